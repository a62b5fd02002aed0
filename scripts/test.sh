#!/usr/bin/env bash
# `npm test`: installs dependencies when missing, then runs every test file with node's test
# runner (each file in its own process with its own database and Redis prefix).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund >&2
fi
if [ "$#" -gt 0 ]; then files=("$@"); else mapfile -t files < <(find test -name '*.test.ts' | sort); fi
exec node --import tsx --test --test-concurrency="${TEST_CONCURRENCY:-2}" --test-timeout=180000 "${files[@]}"
