#!/usr/bin/env bash
# Checks that every C++ source under src tests fuzz bench matches .clang-format: lists each
# drifting file with clang-format's diagnostics and exits 1. `make format` (this script with
# --fix) rewrites them in place. Run from any directory; uses the clang-format on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -d '' files < <(find src tests fuzz bench -name node_modules -prune -o \
    \( -name '*.cpp' -o -name '*.h' \) -type f -print0 2>/dev/null | sort -z)
if [ ${#files[@]} -eq 0 ]; then exit 0; fi

if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
if ! clang-format --dry-run --Werror "${files[@]}"; then
  echo "check_format: the files above differ from .clang-format; run 'make format'" >&2
  exit 1
fi
