#!/usr/bin/env bash
# Checks the Kubernetes manifests under deploy/ (tests/deploy/*.test.mjs, Node's built-in test
# runner): every object against the Kubernetes schemas and field lists (kubernetes-models,
# offline), and the fields omnirt relies on against its sources (the flags in
# src/cli/serve_command.cpp, the routes in src/serve/api/, the planned flags in docs/deploy.md).
# Needs no omnirt build.
#
#   bash tests/deploy/run.sh [test files...]
#
# Installs the locked dependencies (npm ci) when node_modules is missing or older than
# package-lock.json. Without node it prints a SKIP line and exits 77 (ctest: skipped); that is
# the only skip.
set -euo pipefail

if ! command -v node >/dev/null 2>&1; then
    echo "SKIP deploy_manifests: 'node' is not installed (scripts/setup.sh installs it)"
    exit 77
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# npm writes node_modules/.package-lock.json on every install: its age is the install's.
installed="$here/node_modules/.package-lock.json"
if [[ ! -f "$installed" || "$here/package-lock.json" -nt "$installed" ]]; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "deploy: node_modules needs installing and 'npm' is not installed" >&2
        exit 1
    fi
    (cd "$here" && npm ci --no-audit --no-fund)
fi

if [[ $# -gt 0 ]]; then
    files=("$@")
else
    files=("$here"/*.test.mjs)
fi
cd "$here"
exec node --test "${files[@]}"
