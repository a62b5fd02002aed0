#!/usr/bin/env bash
# `npm start`: install dependencies when missing, compile when dist/ is not the sources' build
# (scripts/build-is-stale.sh), then run the compiled service (production mode code path; NODE_ENV
# decides the defaults): `switchboard start`, which migrates and runs the Procfile's roles each in a
# child process of its own (they run with the node flags given here); `npm run start:web` etc.
# start one role.
set -euo pipefail
cd "$(dirname "$0")/.."
role="${1:-start}"; shift || true
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund >&2
fi
if bash scripts/build-is-stale.sh; then
  npm run --silent build >&2
fi
# Node flags live in scripts/node-flags (the benchmark starts the service with the same ones): a
# fixed young generation, so the send path's short-lived objects die there instead of being
# promoted, and a full collection when the old generation doubled its live size, so memory stays
# flat under load (the measurements are in docs/benchmarks.md).
# shellcheck disable=SC2046
exec node $(cat scripts/node-flags) dist/bin/switchboard.js "$role" "$@"
