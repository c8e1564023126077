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

# shellcheck source=../support/npm_ci.sh
source "$here/../support/npm_ci.sh"
npm_ci_once "$here" deploy || exit 1

if [[ $# -gt 0 ]]; then
    files=("$@")
else
    files=("$here"/*.test.mjs)
fi
cd "$here"
exec node --test "${files[@]}"
