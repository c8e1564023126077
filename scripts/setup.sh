#!/usr/bin/env bash
# Installs every Debian package omnirt needs to build, test and serve.
# Idempotent and non-interactive: packages already present are skipped, and apt runs only when
# something is missing. Run as root (or through sudo when it is available).
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git clang-14 libclang-rt-14-dev
  clang-format
  # tests and benchmarks (wrk loads the HTTP server)
  libgtest-dev libgmock-dev libbenchmark-dev wrk
  # control plane and wire format
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev
  # config, CLI, logging
  nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libspdlog-dev
  # HTTP / WebSocket, tokenizer regex, media
  libboost1.74-dev libpcre2-dev libicu-dev libsndfile1-dev libsoxr-dev
  # time-stretching that keeps pitch (the speech API's `speed`)
  librubberband-dev
  libjpeg-dev libpng-dev libwebp-dev libavformat-dev libavcodec-dev libavutil-dev libswscale-dev
  # remote media (http(s) image / audio / video URLs)
  libcurl4-openssl-dev
  # relay data plane and model compute
  libucx-dev libtorch-dev libgloo-dev libopenblas0-pthread
  # Silero VAD weights are read from the ONNX file with ONNX's protobuf definitions (src/vad);
  # espeak-ng speaks the VAD golden recordings (tests/vad/goldens/generate.mjs)
  libonnx-dev libprotobuf-dev
  # end-to-end tests; the browser tests (tests/browser: headless chromium, and a spoken WAV made
  # with espeak-ng + sox for the fake microphone)
  curl chromium espeak-ng sox
)
# Node.js drives the end-to-end and tokenizer-oracle tests; a machine that already has node and
# npm (from any source) keeps them, otherwise Debian's are installed.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# libtorch dispatches BLAS through the alternatives system: pin the pthread OpenBLAS build.
blas=/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3
if [ -e "$blas" ] && command -v update-alternatives >/dev/null; then
  current=$(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | awk '/^Value:/ {print $2}')
  if [ "$current" != "$blas" ]; then
    "${sudo_cmd[@]}" update-alternatives --set libblas.so.3-x86_64-linux-gnu "$blas"
  fi
  lapack=/usr/lib/x86_64-linux-gnu/openblas-pthread/liblapack.so.3
  current=$(update-alternatives --query liblapack.so.3-x86_64-linux-gnu 2>/dev/null | awk '/^Value:/ {print $2}')
  if [ -e "$lapack" ] && [ "$current" != "$lapack" ]; then
    "${sudo_cmd[@]}" update-alternatives --set liblapack.so.3-x86_64-linux-gnu "$lapack"
  fi
fi
echo "setup: all packages present"

# The Silero VAD model file (npm package, pinned, sha256-checked) for server_vad and its tests.
bash "$(dirname "$0")/fetch_vad_model.sh"
