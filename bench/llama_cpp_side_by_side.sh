#!/usr/bin/env bash
# Side-by-side decode and prefill speed of llama.cpp and omnirt's AR engine on the same Qwen3
# weights, threads and shapes, in one run (issue 20). A benchmark, not a test.
#
# llama.cpp comes from the npm package node-llama-cpp (pinned below), whose
# llama/gitRelease.bundle is a git bundle of llama.cpp's source. Everything of llama.cpp (the
# package, the clone, the build) and the checkpoints and GGUF files live in the cache directory
# ${OMNIRT_CACHE_DIR:-$HOME/.cache/omnirt}/llama.cpp/; nothing is written into the repository.
# See docs/benchmarks.md, "llama.cpp side by side".
set -euo pipefail

readonly NODE_LLAMA_CPP_VERSION=3.22.1 # ships llama.cpp release v0.5.0 (its llama.cpp.info.json)
readonly SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly REPO_DIR=$(dirname "$SCRIPT_DIR")

threads=$(nproc)
dtypes=bfloat16,float32
prompt=128
gen=32
batches=1,8,32
checkpoint=
skip_build=0
jobs=$(nproc)
omnirt=${OMNIRT_BIN:-$REPO_DIR/build/bin/omnirt}
python=${PYTHON:-/usr/bin/python3}
cache=${OMNIRT_CACHE_DIR:-$HOME/.cache/omnirt}/llama.cpp

usage() {
    cat <<EOF
Usage: $0 [--threads N] [--dtype bfloat16,float32] [--prompt P] [--gen G] [--batches 1,8,32]
          [--checkpoint DIR] [--skip-build] [--jobs N] [--omnirt PATH]

Runs llama.cpp's llama-batched-bench and 'omnirt bench generate' on the same weights and prints
decode tok/s at each batch size and prefill tok/s of P tokens, per dtype, with the ratio
omnirt / llama.cpp and the host CPU.

  --threads N       threads of both engines (default: nproc = $(nproc))
  --dtype LIST      bfloat16 and/or float32 (default bfloat16,float32)
  --prompt P        prompt tokens per sequence (default 128)
  --gen G           generated tokens per sequence (default 32)
  --batches LIST    sequences decoded together (default 1,8,32)
  --checkpoint DIR  a Hugging Face Qwen3 (dense) checkpoint; default: 'omnirt make-checkpoint
                    --arch qwen3 --preset 0.6b' (random weights, seed 0), made once in the cache
  --skip-build      use the cached llama.cpp build as it is (fails if there is none)
  --jobs N          parallel jobs of the llama.cpp build (default: nproc)
  --omnirt PATH     the omnirt binary (default: \$OMNIRT_BIN or <repo>/build/bin/omnirt)

Cache: $cache (OMNIRT_CACHE_DIR moves it). Python: \$PYTHON or /usr/bin/python3, with numpy
(Debian python3-numpy) and yaml (python3-yaml) for llama.cpp's gguf-py.
EOF
}

die() {
    echo "llama_cpp_side_by_side: $*" >&2
    exit 1
}
log() { echo "== $*" >&2; }

while [[ $# -gt 0 ]]; do
    case $1 in
        --threads) threads=$2; shift 2 ;;
        --dtype) dtypes=$2; shift 2 ;;
        --prompt) prompt=$2; shift 2 ;;
        --gen) gen=$2; shift 2 ;;
        --batches) batches=$2; shift 2 ;;
        --checkpoint) checkpoint=$2; shift 2 ;;
        --skip-build) skip_build=1; shift ;;
        --jobs) jobs=$2; shift 2 ;;
        --omnirt) omnirt=$2; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done
for dtype in ${dtypes//,/ }; do
    [[ $dtype == bfloat16 || $dtype == float32 ]] || die "--dtype: $dtype is not bfloat16 or float32"
done
[[ -x $omnirt ]] || die "no omnirt binary at $omnirt (build omnirt, or pass --omnirt)"
"$python" -c 'import numpy, yaml' 2>/dev/null ||
    die "$python lacks numpy or yaml (apt-get install python3-numpy python3-yaml)"

src=$cache/src-$NODE_LLAMA_CPP_VERSION
build=$cache/build-$NODE_LLAMA_CPP_VERSION
batched_bench=$build/bin/llama-batched-bench
quantize=$build/bin/llama-quantize
mkdir -p "$cache"

# 1. llama.cpp's source: npm pack, then a clone of the bundle inside the package.
if [[ ! -d $src ]]; then
    log "fetching node-llama-cpp@$NODE_LLAMA_CPP_VERSION into $cache"
    command -v npm >/dev/null || die "npm is needed to fetch node-llama-cpp"
    tarball=$cache/node-llama-cpp-$NODE_LLAMA_CPP_VERSION.tgz
    if [[ ! -f $tarball ]]; then
        (cd "$cache" && npm pack --silent "node-llama-cpp@$NODE_LLAMA_CPP_VERSION" >/dev/null)
    fi
    unpack=$cache/unpack-$NODE_LLAMA_CPP_VERSION
    rm -rf "$unpack" "$src.partial"
    mkdir -p "$unpack"
    tar -xzf "$tarball" -C "$unpack" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
    git -c advice.detachedHead=false clone --quiet "$unpack/package/llama/gitRelease.bundle" "$src.partial"
    cp "$unpack/package/llama/llama.cpp.info.json" "$src.partial/"
    rm -rf "$unpack"
    mv "$src.partial" "$src"
fi

# 2. The CPU tools, built once: only llama-batched-bench and llama-quantize.
if [[ $skip_build == 1 ]]; then
    [[ -x $batched_bench && -x $quantize ]] || die "--skip-build, but no build in $build"
elif [[ ! -x $batched_bench || ! -x $quantize ]]; then
    log "building llama.cpp (Release, GGML_NATIVE, -j$jobs) into $build; log: $cache/build.log"
    generator=()
    command -v ninja >/dev/null && generator=(-G Ninja)
    {
        cmake -S "$src" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
            -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
            -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF &&
            cmake --build "$build" -j "$jobs" --target llama-batched-bench llama-quantize
    } >"$cache/build.log" 2>&1 || die "llama.cpp build failed; see $cache/build.log"
fi

# 3. The weights: a checkpoint, its F32 GGUF and (for bfloat16) a BF16 copy.
if [[ -z $checkpoint ]]; then
    checkpoint=$cache/models/qwen3-0.6b-seed0
    if [[ ! -f $checkpoint/config.json ]]; then
        log "making the checkpoint $checkpoint"
        "$omnirt" make-checkpoint --arch qwen3 --preset 0.6b --seed 0 --out "$checkpoint" \
            --force --quiet >&2
    fi
fi
[[ -f $checkpoint/config.json ]] || die "--checkpoint $checkpoint has no config.json"
checkpoint=$(cd "$checkpoint" && pwd)
# GGUF files are cached per checkpoint: its path, config and the safetensors' sizes and times.
key=$( (echo "$checkpoint" && cat "$checkpoint/config.json" &&
    stat -c '%n %s %Y' "$checkpoint"/*.safetensors) | sha1sum | cut -c1-12)
gguf_dir=$cache/gguf/$(basename "$checkpoint")-$key
gguf_f32=$gguf_dir/model-f32.gguf
gguf_bf16=$gguf_dir/model-bf16.gguf
mkdir -p "$gguf_dir"
if [[ ! -f $gguf_f32 ]]; then
    log "converting $checkpoint to $gguf_f32"
    "$python" "$SCRIPT_DIR/qwen3_to_gguf.py" "$src/gguf-py" "$checkpoint" "$gguf_f32.partial"
    mv "$gguf_f32.partial" "$gguf_f32"
fi
if [[ ,$dtypes, == *,bfloat16,* && ! -f $gguf_bf16 ]]; then
    log "quantizing to $gguf_bf16"
    "$quantize" "$gguf_f32" "$gguf_bf16.partial" BF16 >"$gguf_dir/quantize.log" 2>&1 ||
        die "llama-quantize failed; see $gguf_dir/quantize.log"
    mv "$gguf_bf16.partial" "$gguf_bf16"
fi

# 4. Both engines, dtype by dtype, on the same threads and shapes.
run_dir=$cache/runs/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$run_dir"
max_batch=$(tr , '\n' <<<"$batches" | sort -n | tail -1)
context=$((max_batch * (prompt + gen)))
results=()
for dtype in ${dtypes//,/ }; do
    gguf=$gguf_f32
    [[ $dtype == bfloat16 ]] && gguf=$gguf_bf16
    log "llama.cpp $dtype: llama-batched-bench -t $threads -npp $prompt -ntg $gen -npl $batches"
    "$batched_bench" -m "$gguf" -t "$threads" -c "$context" -npp "$prompt" -ntg "$gen" \
        -npl "$batches" --output-format jsonl >"$run_dir/llama-$dtype.log" 2>&1 ||
        die "llama-batched-bench failed; see $run_dir/llama-$dtype.log"
    log "omnirt $dtype: bench generate --threads $threads --batch $batches"
    "$omnirt" bench generate --model-path "$checkpoint" --dtype "$dtype" --threads "$threads" \
        --batch "$batches" --input-len "$prompt" --output-len "$gen" \
        --json "$run_dir/omnirt-$dtype.json" >"$run_dir/omnirt-$dtype.log" 2>&1 ||
        die "omnirt bench generate failed; see $run_dir/omnirt-$dtype.log"
    results+=("$dtype" "$run_dir/llama-$dtype.log" "$run_dir/omnirt-$dtype.json")
done

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
# A virtual machine's model name is often generic; the vector extensions say what ran.
flags=$(grep -m1 -ow -E 'avx2|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')
cpu="$cpu ($(nproc) CPUs; ${flags% })"
"$python" "$SCRIPT_DIR/llama_cpp_side_by_side_table.py" --cpu "$cpu" --threads "$threads" \
    --prompt "$prompt" --gen "$gen" -- "${results[@]}" | tee "$run_dir/table.md"
log "logs and table: $run_dir"
