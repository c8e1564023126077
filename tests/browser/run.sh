#!/usr/bin/env bash
# Real-browser tests of the playground `omnirt serve` answers at / (tests/browser/*.test.mjs,
# Node's built-in test runner driving headless chromium through puppeteer-core). Each test file
# starts its own server on a port the OS picks.
#
#   OMNIRT_BIN=/path/to/omnirt bash tests/browser/run.sh [test files...]
#
# The browser is $CHROMIUM_BIN or Debian's chromium (scripts/setup.sh installs it). When no
# browser can start here the suite prints a SKIP line and exits 0: that is the only skip. The
# realtime voice test makes its microphone input with espeak-ng and sox.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/../.." && pwd)"
export OMNIRT_BIN="${OMNIRT_BIN:-$repo_root/build/bin/omnirt}"

if ! command -v node >/dev/null 2>&1; then
    echo "browser: 'node' is not installed" >&2
    exit 1
fi
if [[ ! -x "$OMNIRT_BIN" ]]; then
    echo "browser: no omnirt binary at $OMNIRT_BIN (build it, or set OMNIRT_BIN)" >&2
    exit 1
fi

browser="${CHROMIUM_BIN:-}"
if [[ -z "$browser" ]]; then
    for name in chromium chromium-browser google-chrome; do
        if command -v "$name" >/dev/null 2>&1; then
            browser="$(command -v "$name")"
            break
        fi
    done
fi
if [[ -z "$browser" ]]; then
    echo "SKIP browser_playground: no chromium (install it: scripts/setup.sh, or set CHROMIUM_BIN)"
    exit 0
fi
sandbox=()
if [[ "$(id -u)" -eq 0 ]]; then sandbox=(--no-sandbox); fi
if ! timeout 60 "$browser" --headless "${sandbox[@]}" --disable-gpu --dump-dom about:blank \
        >/dev/null 2>&1; then
    echo "SKIP browser_playground: $browser cannot start headless here"
    exit 0
fi
export CHROMIUM_BIN="$browser"

# shellcheck source=../support/npm_ci.sh
source "$here/../support/npm_ci.sh"
npm_ci_once "$here" browser || exit 1

if [[ $# -gt 0 ]]; then
    files=("$@")
else
    files=("$here"/*.test.mjs)
fi
cd "$repo_root"
# One file at a time: each runs a browser and a whole speech pipeline.
exec node --test --test-concurrency=1 "${files[@]}"
