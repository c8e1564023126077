#!/usr/bin/env python3
"""Writes a small seed-tts-eval style test set for speech benchmark clients.

Layout (the one of seed-tts-eval's `en/` split, which SGLang-Omni's
`benchmarks/eval/benchmark_tts_speed.py` reads through `load_seedtts_samples`):

    OUT/meta.lst                 one sample per line: id|ref_text|ref_audio|target_text
    OUT/prompt-wavs/<id>.wav     the reference clip; ref_audio is relative to meta.lst's folder

The reference clips are synthetic (no speech data set is needed): a voiced-like tone, a
fundamental with decaying harmonics, slow vibrato and a syllable-rate amplitude envelope,
as 16-bit mono PCM WAV at --rate Hz (44.1 kHz by default: S2-Pro's codec rate, so the server
does not resample). Deterministic for a given --seed. Standard library only.

    python3 bench/s2_pro_seedtts_testset.py --out /tmp/testset/en --samples 8
"""

from __future__ import annotations

import argparse
import math
import os
import random
import struct
import wave

REF_TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Please bring the books back to the library.",
    "We walked along the river until the sun went down.",
    "A cup of tea helps me think in the morning.",
    "The train leaves the station at half past nine.",
    "She painted the old fence a bright shade of green.",
    "Our neighbours planted tomatoes in the spring.",
    "He forgot his umbrella at the bus stop again.",
]

TARGET_TEXTS = [
    "Good morning, this is a short test of the speech server.",
    "The weather today is mild with a light breeze from the west.",
    "Numbers such as twelve and forty two should be read aloud clearly.",
    "Thank you for calling, your request has been received.",
    "Music drifted through the open window of the quiet street.",
    "Remember to save your work before you close the program.",
    "The meeting has been moved to Thursday afternoon.",
    "Every morning the baker opens the shop at six.",
]


def synth_clip(rng: random.Random, rate: int, seconds: float) -> bytes:
    """16-bit little-endian PCM of one voiced-like clip."""
    f0 = rng.uniform(95.0, 220.0)
    vibrato_hz = rng.uniform(4.0, 6.0)
    syllable_hz = rng.uniform(3.0, 5.0)
    harmonics = [(k, 0.6 / k) for k in range(1, 9)]
    n = int(round(rate * seconds))
    fade = int(0.02 * rate)
    phase = 0.0
    out = bytearray()
    for i in range(n):
        t = i / rate
        f = f0 * (1.0 + 0.02 * math.sin(2.0 * math.pi * vibrato_hz * t))
        phase += 2.0 * math.pi * f / rate
        s = sum(a * math.sin(k * phase) for k, a in harmonics)
        env = 0.5 + 0.5 * math.sin(2.0 * math.pi * syllable_hz * t) ** 2
        if i < fade:
            env *= i / fade
        elif i >= n - fade:
            env *= (n - 1 - i) / fade
        s = s * env * 0.35 + rng.gauss(0.0, 0.003)
        out += struct.pack("<h", max(-32768, min(32767, int(s * 32767))))
    return bytes(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for meta.lst and prompt-wavs/")
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--rate", type=int, default=44100, help="sample rate of the clips")
    parser.add_argument("--min-seconds", type=float, default=1.0)
    parser.add_argument("--max-seconds", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args()
    if args.samples < 1:
        parser.error("--samples must be at least 1")
    if not 0.1 <= args.min_seconds <= args.max_seconds <= 60.0:
        parser.error("need 0.1 <= --min-seconds <= --max-seconds <= 60")

    rng = random.Random(args.seed)
    wav_dir = os.path.join(args.out, "prompt-wavs")
    os.makedirs(wav_dir, exist_ok=True)
    lines = []
    for i in range(args.samples):
        sample_id = f"synth_{i:04d}"
        ref_text = REF_TEXTS[i % len(REF_TEXTS)]
        target_text = TARGET_TEXTS[i % len(TARGET_TEXTS)]
        seconds = rng.uniform(args.min_seconds, args.max_seconds)
        with wave.open(os.path.join(wav_dir, f"{sample_id}.wav"), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(args.rate)
            w.writeframes(synth_clip(rng, args.rate, seconds))
        lines.append(f"{sample_id}|{ref_text}|prompt-wavs/{sample_id}.wav|{target_text}")
    with open(os.path.join(args.out, "meta.lst"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.samples} samples to {os.path.join(args.out, 'meta.lst')}")


if __name__ == "__main__":
    main()
