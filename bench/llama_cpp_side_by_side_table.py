#!/usr/bin/env python3
"""The table of bench/llama_cpp_side_by_side.sh from both engines' outputs.

Usage: llama_cpp_side_by_side_table.py --cpu TEXT --threads N --prompt P --gen G --
       DTYPE LLAMA_LOG OMNIRT_JSON [DTYPE LLAMA_LOG OMNIRT_JSON ...]

LLAMA_LOG is llama-batched-bench's output with --output-format jsonl (one JSON object per
batch size among other log lines); OMNIRT_JSON is 'omnirt bench generate --json'.

Decode: llama.cpp's S_TG (all sequences' generated tokens over the generation time) against
omnirt's aggregate tokens/s over the steady window (every sequence decodes in every step).
Prefill of P tokens: llama.cpp's S_PP at one sequence against P / omnirt's batch-1 TTFT p50
(submit to first token: the prefill plus one sampled token).
"""

from __future__ import annotations

import argparse
import json


def llama_rows(path: str) -> dict[int, dict]:
    rows = {}
    with open(path, encoding="utf-8", errors="replace") as log:
        for line in log:
            line = line.strip()
            if line.startswith('{"n_kv_max"'):
                row = json.loads(line)
                rows[row["pl"]] = row
    if not rows:
        raise SystemExit(f"no llama-batched-bench results in {path}")
    return rows


def omnirt_rows(path: str) -> dict[int, dict]:
    with open(path, encoding="utf-8") as report:
        return {row["batch"]: row for row in json.load(report)["batches"]}


def ratio(llama: float | None, omnirt: float | None) -> str:
    if not llama or not omnirt:
        return "-"
    return f"{omnirt / llama:.2f}x"


def speed(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpu", required=True)
    parser.add_argument("--threads", required=True)
    parser.add_argument("--prompt", type=int, required=True)
    parser.add_argument("--gen", type=int, required=True)
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    if len(args.runs) % 3:
        raise SystemExit("runs come in threes: DTYPE LLAMA_LOG OMNIRT_JSON")

    lines = []
    llama_settings = ""
    for index in range(0, len(args.runs), 3):
        dtype, llama_path, omnirt_path = args.runs[index:index + 3]
        llama, omnirt = llama_rows(llama_path), omnirt_rows(omnirt_path)
        first = next(iter(llama.values()))
        llama_settings = (f"llama.cpp n_batch {first['n_batch']}, n_ubatch {first['n_ubatch']}, "
                          f"flash_attn {first['flash_attn']} (-1 auto), "
                          f"threads {first['n_threads']} / batch {first['n_threads_batch']}")
        for batch in sorted(set(llama) | set(omnirt)):
            llama_speed = llama[batch]["speed_tg"] if batch in llama else None
            omnirt_speed = None
            note = ""
            if batch in omnirt and not omnirt[batch]["failed"]:
                omnirt_speed = omnirt[batch]["decode_tokens_per_second_aggregate"]
                if not omnirt[batch]["steady_window"]:
                    note = " (omnirt: whole decode)"
            lines.append((f"decode {dtype}, batch {batch}{note}", llama_speed, omnirt_speed))
        llama_prefill = llama[1]["speed_pp"] if 1 in llama else None
        omnirt_prefill = None
        if 1 in omnirt and omnirt[1]["ttft_p50_ms"] > 0:
            omnirt_prefill = args.prompt / (omnirt[1]["ttft_p50_ms"] / 1000.0)
        lines.append((f"prefill {args.prompt} tokens, {dtype}", llama_prefill, omnirt_prefill))

    print(f"host CPU: {args.cpu}; {args.threads} threads; prompt {args.prompt}, "
          f"generate {args.gen} tokens per sequence")
    print(llama_settings)
    print()
    print("| measure | llama.cpp tok/s | omnirt tok/s | omnirt / llama.cpp |")
    print("| --- | --- | --- | --- |")
    for measure, llama_speed, omnirt_speed in lines:
        print(f"| {measure} | {speed(llama_speed)} | {speed(omnirt_speed)} | "
              f"{ratio(llama_speed, omnirt_speed)} |")


if __name__ == "__main__":
    main()
