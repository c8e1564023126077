#!/usr/bin/env bash
# Black-box end-to-end tests of `omnirt serve` with the official openai npm client and curl
# (tests/e2e/*.test.mjs, Node's built-in test runner). Each test file starts its own server on a
# port the OS picks, so files run in parallel.
#
#   OMNIRT_BIN=/path/to/omnirt bash tests/e2e/run.sh [test files...]
#
# Installs the locked dependencies (npm ci) when node_modules is missing or older than
# package-lock.json. OMNIRT_BIN defaults to build/bin/omnirt under the repository root.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/../.." && pwd)"
export OMNIRT_BIN="${OMNIRT_BIN:-$repo_root/build/bin/omnirt}"

for tool in node curl; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "e2e: '$tool' is not installed" >&2
        exit 1
    fi
done
if [[ ! -x "$OMNIRT_BIN" ]]; then
    echo "e2e: no omnirt binary at $OMNIRT_BIN (build it, or set OMNIRT_BIN)" >&2
    exit 1
fi

# npm writes node_modules/.package-lock.json on every install: its age is the install's.
installed="$here/node_modules/.package-lock.json"
if [[ ! -f "$installed" || "$here/package-lock.json" -nt "$installed" ]]; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "e2e: node_modules needs installing and 'npm' is not installed" >&2
        exit 1
    fi
    (cd "$here" && npm ci --no-audit --no-fund)
fi

if [[ $# -gt 0 ]]; then
    files=("$@")
else
    files=("$here"/*.test.mjs)
fi
cd "$repo_root"
exec node --test --test-concurrency=2 "${files[@]}"
