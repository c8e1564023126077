#!/usr/bin/env bash
# The device run (docs/gpu.md): on the borrowed GPU machine, in one call of at most ~9 minutes,
# builds omnirt against the image's CUDA libtorch and the Debian packages of .device-deps
# (scripts/device/gather.sh), runs the CUDA-relevant tests and `omnirt bench generate` on cuda:0,
# and writes $OUT/report.md plus logs and bench JSON (8 files, one folder level: the most the
# device tool returns).
# Every step is time-boxed, runs whatever the earlier ones gave, and records its exit status.
#
#   bash scripts/device/run.sh                    # there (the device tool sets $OUT)
#   DEVICE_REHEARSAL=1 bash scripts/device/run.sh # here: Debian's CPU libtorch, -j1, a few
#                                                 # small targets, no GPU steps (see docs/gpu.md)
# Environment: OUT (default ./device-out), DEVICE_BUDGET_S (whole-run budget, default 530),
# DEVICE_JOBS (default 16; 1 in rehearsal), DEVICE_BUILD_DIR (default build-device),
# DEVICE_TESTS (1: build and run the libtorch tests; 0: skip them, for a short bench-only run),
# DEVICE_SHAPES (default "0.6b 8b"), DEVICE_BATCHES (default "1 64").
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
OUT=${OUT:-$root/device-out}
mkdir -p "$OUT"
rehearsal=${DEVICE_REHEARSAL:-0}
if [ "$rehearsal" = 1 ]; then
  jobs=${DEVICE_JOBS:-1} budget=${DEVICE_BUDGET_S:-7200}
else
  jobs=${DEVICE_JOBS:-16} budget=${DEVICE_BUDGET_S:-530}
fi
build=${DEVICE_BUILD_DIR:-build-device}
start=$(date +%s)
deadline=$((start + budget))
report=$OUT/report.md
summary=()   # "| step | status | seconds | log |" rows

remaining() { echo $((deadline - $(date +%s))); }

# step NAME SECONDS LOG COMMAND...: runs COMMAND under `timeout` (SECONDS, cut to what the
# budget has left), output appended to $OUT/LOG through tee; records the exit status.
step() {
  local name=$1 limit=$2 log=$3
  shift 3
  local left
  left=$(($(remaining) - 5))
  if [ "$left" -lt "$limit" ]; then limit=$left; fi
  if [ "$limit" -lt 5 ]; then
    summary+=("| $name | skipped (budget spent) | 0 | |")
    echo "== $name: skipped, the run's budget is spent" | tee -a "$OUT/$log"
    return 124
  fi
  local t0 rc
  t0=$(date +%s)
  echo "== $name (limit ${limit}s): $*" | tee -a "$OUT/$log"
  if declare -F "$1" >/dev/null; then
    "$@" 2>&1 | tee -a "$OUT/$log"  # a shell function: not time-boxed (rehearsal checks only)
  else
    timeout -k 10 "$limit" "$@" 2>&1 | tee -a "$OUT/$log"
  fi
  rc=${PIPESTATUS[0]}
  local took=$(($(date +%s) - t0)) word=ok
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then word="TIMED OUT ($rc)"; elif [ "$rc" != 0 ]; then word="FAILED ($rc)"; fi
  echo "== $name: $word after ${took}s" | tee -a "$OUT/$log"
  summary+=("| $name | $word | $took | $log |")
  return "$rc"
}

{
  echo "# omnirt device run"
  echo
  echo "- started: $(date -u +%Y-%m-%dT%H:%M:%SZ), mode: $([ "$rehearsal" = 1 ] && echo rehearsal || echo device), commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (+ local changes)')"
  echo
  echo '## Machine'
  echo
  echo '```'
  if [ "$rehearsal" != 1 ]; then timeout 20 nvidia-smi 2>&1 || echo "nvidia-smi: failed ($?)"; fi
  grep -E '^(PRETTY_NAME|VERSION_ID)=' /etc/os-release 2>&1
  echo "kernel: $(uname -r), cpus: $(nproc)"
  echo "glibc: $(ldd --version 2>&1 | head -1)"
  echo "g++: $(g++ --version 2>&1 | head -1)"
  echo "cmake: $(cmake --version 2>&1 | head -1), ninja: $(ninja --version 2>&1)"
  if [ "$rehearsal" != 1 ]; then
    echo "nvcc: $(nvcc --version 2>&1 | tail -2 | tr '\n' ' ')"
    timeout 60 python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' 2>&1
  fi
  echo '```'
} >"$report" 2>&1

# --- libtorch: the image's CUDA one (asked before env.sh adds Debian's libraries to the loader
# path), or Debian's in rehearsal.
# CMAKE_POLICY_VERSION_MINIMUM: should the image's CMake be 4.x, package files that still name
# CMake 2.x policies load anyway (Debian's all use the <min>...<max> form; this is a safety net).
cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DOMNIRT_TESTS=ON -DCMAKE_POLICY_VERSION_MINIMUM=3.5)
# FFmpeg (video, BMP / GIF) is not carried: its codec libraries alone would fill the transfer.
if [ "${GATHER_MEDIA:-0}" != 1 ]; then cmake_args+=(-DOMNIRT_FFMPEG=OFF -DOMNIRT_CURL=OFF); fi
# Nor is libonnx-dev (Silero VAD's file reader): the VAD layer builds without it.
cmake_args+=(-DOMNIRT_VAD_ONNX=OFF)
if [ "$rehearsal" != 1 ]; then
  torch_cmake=$(timeout 60 python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
  torch_lib=$(timeout 60 python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)
  # The CUDA libraries and headers of the nvidia-* wheels the torch wheel uses: the linker needs
  # the libraries to resolve libtorch_cuda's own dependencies when it links our executables, the
  # compiler nccl.h (ProcessGroupNCCL.hpp includes it; the CUDA toolkit does not ship NCCL).
  nvidia_dirs=$(timeout 60 python3 - 2>/dev/null <<'PY'
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
libs = sorted({os.path.dirname(p) for r in roots for p in glob.glob(os.path.join(r, "**", "lib*.so*"), recursive=True)})
incs = sorted({p for r in roots for p in glob.glob(os.path.join(r, "**", "include"), recursive=True) if os.path.isdir(p)})
print(":".join(libs))
print(":".join(incs))
PY
)
  nvidia_libs=$(sed -n 1p <<<"$nvidia_dirs")
  nvidia_includes=$(sed -n 2p <<<"$nvidia_dirs")
  nvcc_path=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
  if [ -n "$nvcc_path" ]; then
    cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc_path")")")
    export CUDACXX=$nvcc_path CUDA_HOME=$cuda_root CUDAToolkit_ROOT=$cuda_root
    export PATH="$cuda_root/bin:$PATH"
  fi
  cmake_args+=(-DCMAKE_PREFIX_PATH="${torch_cmake}"
               -DCMAKE_CUDA_COMPILER="${nvcc_path:-nvcc}"
               -DCMAKE_CUDA_ARCHITECTURES=90
               -DCMAKE_BUILD_RPATH="${torch_lib}")
  # GCC 13+ no longer includes <cstdint> through other standard headers; omnirt is written on
  # GCC 12. A safety net for the image's compiler, not a fix (the report shows the compiler).
  # The torch wheel ships its own fmt headers (a newer fmt than Debian's spdlog was built for),
  # on the include path ahead of ours: our Debian headers go first.
  cmake_args+=(-DCMAKE_CXX_FLAGS="-include cstdint -I${OMNIRT_DEVICE_DEPS:-$root/.device-deps}/usr/include")
  {
    echo
    echo "- libtorch: $torch_cmake (lib: $torch_lib)"
    echo "- CUDA: ${cuda_root:-not found}"
    echo "- nvidia wheel libraries: ${nvidia_libs:-none found}"
    echo "- nvidia wheel headers: ${nvidia_includes:-none found}"
  } >>"$report"
fi

# shellcheck source=scripts/device/env.sh
source "$root/scripts/device/env.sh"
if [ "$rehearsal" != 1 ]; then
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:${nvidia_libs:+$nvidia_libs:}$torch_lib"
  export LIBRARY_PATH="$LIBRARY_PATH${nvidia_libs:+:$nvidia_libs}"
  if [ -n "${nvidia_includes:-}" ]; then export CPATH="$CPATH:$nvidia_includes"; fi
fi
# Debian's gloo headers only where the torch wheel has none of its own (ProcessGroupGloo.hpp
# includes gloo/...): gather.sh keeps them apart from usr/include for that reason.
if [ -n "${torch_cmake:-}" ] && [ ! -e "$torch_lib/../include/gloo/algorithm.h" ] &&
  [ -d "$OMNIRT_DEVICE_DEPS/gloo/include" ]; then
  export CPATH="$CPATH:$OMNIRT_DEVICE_DEPS/gloo/include"
  echo "- gloo headers: Debian's (the torch wheel has none)" >>"$report"
fi
# Which folders the dependencies come from (rehearsal: Debian's libtorch stays in /usr).
cmake_args+=(-DCMAKE_FIND_PACKAGE_PREFER_CONFIG=ON)

# --- configure
rm -rf "$build/CMakeCache.txt"
step configure 120 build.log cmake -S . -B "$build" "${cmake_args[@]}"
{
  echo
  echo "- packages found (from the CMake cache):"
  grep -E '^(Torch|Caffe2|yaml-cpp|nlohmann_json|CLI11|spdlog|fmt|GTest)_DIR|^PKG_CONFIG_EXECUTABLE|^pkgcfg_lib_[A-Z0-9_]+_[a-z0-9+-]+:' \
    "$build/CMakeCache.txt" 2>/dev/null | sed 's/^/  - /'
} >>"$report"

# --- build: first what the bench needs, then the tests (a slow build still yields the bench).
if [ "$rehearsal" = 1 ]; then
  targets=(${DEVICE_REHEARSAL_TARGETS:-core_tensor_test omnirt_control omnirt_media omnirt_text omnirt_config omnirt_relay omnirt_serve_http})
  step build 3000 build.log nice ninja -C "$build" -j "$jobs" "${targets[@]}"
else
  # -k 0: every failing file in one run, not the first few.
  step build-omnirt 240 build.log ninja -C "$build" -k 0 -j "$jobs" omnirt omnirt_qwen3_plugin \
    $([ "${DEVICE_TESTS:-1}" = 1 ] && echo omnirt_c10d_plugin)
fi

bin=$build/bin/omnirt
if [ "$rehearsal" != 1 ] && [ "${DEVICE_TESTS:-1}" = 1 ]; then
  # --- the tests that link libtorch (engine, models, torch bridge, c10d relay), built and run
  # against the CUDA libtorch first (they are what says the build is right); most run on CPU
  # tensors, the Qwen3 golden test also on cuda:0.
  test_targets=(torch_bridge_torch_tensor_test relay_c10d_loader_test)
  torch_labels=(engine models models_omni models_omni_code2wav models_omni_golden relay_gloo)
  for label in "${torch_labels[@]}"; do
    for f in tests/"$label"/*_test.cpp; do test_targets+=("${label}_$(basename "$f" .cpp)"); done
  done
  step build-tests 150 build.log ninja -C "$build" -k 0 -j "$jobs" "${test_targets[@]}"
  label_regex="^(torch_bridge|$(IFS='|'; echo "${torch_labels[*]}"))\$"
  step ctest 120 ctest.log ctest --test-dir "$build" -L "$label_regex" -j 8 --timeout 90 \
    --output-on-failure
  # The Qwen3 golden test on cuda:0 too (float32 and bfloat16 against transformers), verbose.
  step cuda-golden 60 ctest.log "$build/tests/models_qwen3_hf_golden_test"
  if [ -x "$build/tests/relay_c10d_loader_test" ]; then
    step c10d-loader-test 30 ctest.log "$build/tests/relay_c10d_loader_test"
  fi
fi
if [ "$rehearsal" != 1 ]; then
  # --- the bench on cuda:0: a tiny smoke run first (the CUDA path at all), then Qwen3-0.6B's
  # and Qwen3-8B's shapes with dummy weights at batch 1 and 64.
  if [ -x "$bin" ]; then
    step bench-tiny-cuda 45 bench.log "$bin" bench generate --preset tiny --gpu 0 --batch 1 \
      --input-len 32 --output-len 16 --bandwidth-mib 256
    for shape in ${DEVICE_SHAPES:-0.6b 8b}; do
      for b in ${DEVICE_BATCHES:-1 64}; do
        step "bench-$shape-b$b" 120 bench.log "$bin" bench generate --preset "$shape" --gpu 0 \
          --batch "$b" --input-len 512 --output-len 128 --json "$OUT/bench-$shape-b$b.json"
      done
    done
  else
    summary+=("| bench | skipped (no omnirt binary) | 0 | |")
  fi
else
  # Rehearsal: run the small test, and show where every library of what was built resolves
  # from (each of ours must come from .device-deps), and which headers the compiler read from
  # /usr/include that belong to a package .device-deps ships (must be none).
  if [ -x "$build/tests/core_tensor_test" ]; then
    step core-tensor-test 120 ctest.log "$build/tests/core_tensor_test" --gtest_brief=1
  fi
  check_deps() {
    local shipped bad=0
    shipped=$(sed 's/_.*//' "$OMNIRT_DEVICE_DEPS/PACKAGES" | sort -u)
    echo "-- ldd of the built libraries and binaries"
    for f in $(find "$build" -name 'libomnirt_*.so' -o -name '*_test' -type f -perm -u+x | sort); do
      echo "$f:"
      ldd "$f" | grep -v "$root/$build" | sed 's/^/   /'
    done | tee "$OUT/ldd.txt"
    if grep -q 'not found' "$OUT/ldd.txt"; then echo "UNRESOLVED libraries (see ldd.txt)"; bad=1; fi
    local sys_libs
    sys_libs=$(grep -oE '=> /(usr/)?lib/x86_64-linux-gnu/[^ ]+' "$OUT/ldd.txt" | awk '{print $2}' | sort -u)
    for lib in $sys_libs; do
      pkg=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null | head -1 | cut -d: -f1)
      if [ -n "$pkg" ] && grep -qxF "$pkg" <<<"$shipped"; then
        echo "NOT FROM .device-deps: $lib ($pkg)"; bad=1
      fi
    done
    echo "-- headers read from /usr/include that a shipped package owns"
    local headers
    headers=$(ninja -C "$build" -t deps | grep -oE '^ +/usr/include/[^ ]+' | sort -u)
    echo "$(wc -l <<<"$headers") distinct headers read from /usr/include"
    for h in $headers; do
      pkg=$(dpkg -S "$h" 2>/dev/null | head -1 | cut -d: -f1)
      if [ -n "$pkg" ] && grep -qxF "$pkg" <<<"$shipped"; then echo "NOT FROM .device-deps: $h ($pkg)"; bad=1; fi
    done
    return $bad
  }
  step deps-check 600 ctest.log check_deps
fi

{
  echo
  echo '## Steps'
  echo
  echo '| step | status | seconds | log |'
  echo '| --- | --- | --- | --- |'
  printf '%s\n' "${summary[@]}"
  echo
  echo "total: $(($(date +%s) - start)) s of a ${budget} s budget"
  for j in "$OUT"/bench-*.json; do
    [ -f "$j" ] || continue
    echo
    echo "### $(basename "$j")"
    echo
    python3 - "$j" <<'PY' 2>&1
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{r.get('model', '?')}, {r.get('device', '?')}, {r.get('dtype', '?')}, load {r.get('load_seconds', 0):.1f} s")
for b in r["batches"]:
    print(f"- batch {b['batch']}: TTFT p50 {b['ttft_p50_ms']:.1f} ms, "
          f"{b['decode_tokens_per_second_per_request']:.1f} tok/s/req, "
          f"{b['decode_tokens_per_second_aggregate']:.1f} tok/s total, step {b['step_ms']:.2f} ms, "
          f"failed {b['failed']}")
PY
  done
  if [ -f "$OUT/bench.log" ]; then
    echo
    echo '### bench tables'
    echo
    echo '```'
    grep -E '^(generate bench|input|batch| +[0-9]+ )' "$OUT/bench.log"
    echo '```'
  fi
} >>"$report"
cat "$report"
exit 0
