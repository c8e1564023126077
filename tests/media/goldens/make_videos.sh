#!/usr/bin/env bash
# Writes the small test videos of tests/media/video_test.cpp with Debian's ffmpeg (run once by
# hand; the outputs are committed). Frame N of every video has luma 8 * N (grey), so a test can
# tell which source frame it got; the audio track is a 440 Hz sine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
video="nullsrc=s=96x64:r=10:d=3,geq=lum='8*N':cb=128:cr=128,format=yuv420p"
audio="sine=frequency=440:sample_rate=44100:duration=3"
common=(-hide_banner -loglevel error -y)
out=(-map_metadata -1 -fflags +bitexact)
ffmpeg "${common[@]}" -f lavfi -i "$video" -f lavfi -i "$audio" -ac 2 \
  -c:v libx264 -qp 0 -preset ultrafast -c:a aac -b:a 32k -shortest "${out[@]}" video_h264_aac.mp4
ffmpeg "${common[@]}" -f lavfi -i "$video" -f lavfi -i "$audio" \
  -c:v libvpx-vp9 -lossless 1 -c:a libopus -b:a 24k -shortest "${out[@]}" video_vp9_opus.webm
ffmpeg "${common[@]}" -f lavfi -i "$video" -c:v libvpx -b:v 200k -auto-alt-ref 0 "${out[@]}" video_vp8.webm
ffmpeg "${common[@]}" -f lavfi -i "$video" -f lavfi -i "$audio" \
  -c:v libaom-av1 -crf 0 -cpu-used 8 -c:a libopus -b:a 24k -shortest "${out[@]}" video_av1_opus.mkv
ffmpeg "${common[@]}" -f lavfi -i "nullsrc=s=96x64:r=10:d=0.1,geq=lum=100:cb=128:cr=128,format=yuv420p" \
  -frames:v 1 -c:v libx264 -qp 0 "${out[@]}" video_one_frame.mp4
ls -l video_*
