#!/usr/bin/env bash
# Exits 0 when the compiled service in ./dist is missing or older than the sources in the current
# directory (the project's root), 1 when it is current. `scripts/start.sh` rebuilds on 0.
#   - a source file newer than the build (an edit, or a checkout, which writes files it changes);
#   - a different set of migrations: a checkout that only removes one leaves no newer file, and
#     `migrate` applies whatever the build's migrations directory holds (the build's copy makes it
#     the source's, scripts/copy-assets.mjs).
set -uo pipefail
[ -f dist/bin/switchboard.js ] || exit 0
[ -z "$(find api workers services shared bin scripts -newer dist/bin/switchboard.js -type f 2>/dev/null | head -n 1)" ] || exit 0
[ "$(ls -A shared/db/migrations 2>/dev/null)" = "$(ls -A dist/shared/db/migrations 2>/dev/null)" ] || exit 0
exit 1
