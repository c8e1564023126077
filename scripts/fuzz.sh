#!/usr/bin/env bash
# Runs every fuzz_<name> binary of a fuzz build for FUZZ_SECONDS seconds, seeded from
# fuzz/corpus/<name>/. New corpus entries go to a scratch directory, never into the repo.
set -euo pipefail
build_dir=${1:-build-fuzz}
seconds=${FUZZ_SECONDS:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
for fuzzer in "$build_dir"/fuzz/fuzz_*; do
  [ -x "$fuzzer" ] || continue
  name=${fuzzer##*/fuzz_}
  mkdir -p "$scratch/$name"
  if [ -d "$root/fuzz/corpus/$name" ]; then cp -r "$root/fuzz/corpus/$name/." "$scratch/$name/"; fi
  echo "fuzz: $name for ${seconds}s"
  if ! "$fuzzer" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$scratch/" \
      "$scratch/$name" > "$scratch/$name.log" 2>&1; then
    echo "fuzz: $name FAILED"; tail -40 "$scratch/$name.log"
    mkdir -p "$root/$build_dir/fuzz-artifacts"; cp "$scratch"/crash-* "$scratch"/leak-* "$scratch"/timeout-* \
      "$root/$build_dir/fuzz-artifacts/" 2>/dev/null || true
    status=1
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$scratch/$name.log" | sed "s/^/  /"
  fi
done
exit $status
