#!/usr/bin/env bash
# `npm test`: installs dependencies when missing, lints (ESLint and the layering check: `npm run
# lint`), then runs every test file with node's test runner (each file in its own process with its
# own database and Redis prefix). Given files, it runs just those, without the lint. The spec
# reporter ends with every failing test and its error, so the tail of a CI log names what failed.
set -euo pipefail
cd "$(dirname "$0")/.."
# A node_modules that is a link to another checkout's is that checkout's to install: `npm ci` here
# would empty it through the link.
if [ ! -L node_modules ] && { [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; }; then
  npm ci --no-audit --no-fund >&2
fi
if [ "$#" -gt 0 ]; then
  files=("$@")
else
  npm run --silent lint
  mapfile -t files < <(find test -name '*.test.ts' | sort)
fi
exec node --import tsx --test --test-reporter=spec --test-reporter-destination=stdout --test-concurrency="${TEST_CONCURRENCY:-2}" --test-timeout=180000 "${files[@]}"
