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

# shellcheck source=../support/npm_ci.sh
source "$here/../support/npm_ci.sh"
npm_ci_once "$here" e2e || exit 1

if [[ $# -gt 0 ]]; then
    files=("$@")
else
    files=("$here"/*.test.mjs)
fi
cd "$repo_root"
exec node --test --test-concurrency=2 "${files[@]}"
