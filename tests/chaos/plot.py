#!/usr/bin/env python3
"""The soak suite's plot (tests/chaos/soak.mjs) with PIL alone (no matplotlib on Debian's base):
resident memory and file descriptors of the server and of its process tree over time.

    python3 tests/chaos/plot.py soak.csv soak.png [WARMUP_S]
"""
import csv
import sys

from PIL import Image, ImageDraw, ImageFont

WIDTH, HEIGHT, MARGIN = 1000, 720, 70
SERIES = [
    ("resident memory (MiB)", [("server_rss_mib", "server", (31, 119, 180)),
                               ("tree_rss_mib", "server + stages", (255, 127, 14))]),
    ("file descriptors", [("server_fds", "server", (31, 119, 180)),
                          ("tree_fds", "server + stages", (255, 127, 14))]),
]


def main() -> int:
    source, target = sys.argv[1], sys.argv[2]
    warmup = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    with open(source, newline="") as f:
        rows = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]
    if not rows:
        print("plot.py: no samples", file=sys.stderr)
        return 1
    image = Image.new("RGB", (WIDTH, HEIGHT), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    t_max = max(r["t_s"] for r in rows) or 1.0
    panel_height = (HEIGHT - MARGIN) // len(SERIES)
    for index, (title, lines) in enumerate(SERIES):
        top = MARGIN // 2 + index * panel_height
        bottom = top + panel_height - MARGIN // 2
        left, right = MARGIN, WIDTH - 20
        values = [r[key] for key, _, _ in lines for r in rows]
        low, high = 0.0, max(values) * 1.15 or 1.0
        draw.rectangle([left, top, right, bottom], outline="black")
        draw.text((left, top - 14), title + " over time (min:s)", fill="black", font=font)
        for step in range(5):
            value = low + (high - low) * step / 4
            y = bottom - (bottom - top) * step / 4
            draw.line([left - 4, y, left, y], fill="black")
            draw.text((4, y - 6), f"{value:.0f}", fill="black", font=font)
        for step in range(6):
            t = t_max * step / 5
            x = left + (right - left) * step / 5
            draw.line([x, bottom, x, bottom + 4], fill="black")
            draw.text((x - 14, bottom + 6), f"{int(t // 60)}:{int(t % 60):02d}", fill="black",
                      font=font)
        if warmup > 0:
            x = left + (right - left) * min(warmup / t_max, 1.0)
            draw.line([x, top, x, bottom], fill=(160, 160, 160))
            draw.text((x + 4, top + 4), "end of warm-up", fill=(120, 120, 120), font=font)
        for n, (key, label, color) in enumerate(lines):
            points = [(left + (right - left) * r["t_s"] / t_max,
                       bottom - (bottom - top) * (r[key] - low) / (high - low)) for r in rows]
            if len(points) > 1:
                draw.line(points, fill=color, width=2)
            draw.text((right - 160, top + 6 + 14 * n), label, fill=color, font=font)
    image.save(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
