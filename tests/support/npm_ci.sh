# Sourced by the node test runners (tests/e2e, tests/browser, tests/deploy):
#   npm_ci_once DIR WHO
# installs DIR's locked packages (npm ci) when DIR/node_modules is missing or older than
# DIR/package-lock.json; fails naming WHO when npm is needed and missing.
npm_ci_once() {
    local dir="$1" who="$2"
    # npm writes node_modules/.package-lock.json on every install: its age is the install's.
    local installed="$dir/node_modules/.package-lock.json"
    if [[ ! -f "$installed" || "$dir/package-lock.json" -nt "$installed" ]]; then
        if ! command -v npm >/dev/null 2>&1; then
            echo "$who: node_modules needs installing and 'npm' is not installed" >&2
            return 1
        fi
        (cd "$dir" && npm ci --no-audit --no-fund)
    fi
}
