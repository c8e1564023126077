#!/usr/bin/python3
"""Writes image_golden.bin: Pillow's bicubic resize, the Qwen2-VL smart_resize and the HF
Qwen2VLImageProcessor patch layout, computed by Debian's python3-pil and numpy (independent of
omnirt's code), for deterministic test images.

Run: /usr/bin/python3 tests/media/goldens/generate_image.py   (apt-get install python3-pil python3-numpy)

File layout (little-endian): "OMNIIMG1";
  u32 resize cases; per case u32 src_w, src_h, dst_w, dst_h, seed; u8 rgb[dst_h * dst_w * 3]
  u32 patch cases; per case u32 src_w, src_h, seed, grid_t, grid_h, grid_w; f32 [rows * 1536]
  u32 smart_resize cases; per case u32 h, w, factor, min_pixels, max_pixels, out_h, out_w
      (out 0 x 0: rejected, aspect ratio over 200)
The source image is test_image(w, h, seed) below; tests/media/image_golden_test.cpp makes the
same bytes.
"""
import math
import struct
import sys
from pathlib import Path

import numpy as np
from PIL import Image


def test_image(width, height, seed):
    """Integer-only pattern: gradients, an 8-pixel checkerboard (sharp edges that make the
    bicubic kernel overshoot and clip), and xorshift32 noise."""
    state = seed & 0xFFFFFFFF
    data = bytearray(width * height * 3)
    i = 0
    for y in range(height):
        for x in range(width):
            for c in range(3):
                state ^= (state << 13) & 0xFFFFFFFF
                state ^= state >> 17
                state ^= (state << 5) & 0xFFFFFFFF
                checker = 200 if ((x // 8 + y // 8) % 2) else 0
                data[i] = (x * 3 + y * 5 + c * 85 + checker + (state & 31)) & 255
                i += 1
    return Image.frombytes("RGB", (width, height), bytes(data))


def smart_resize(height, width, factor, min_pixels, max_pixels):
    # transformers' qwen2_vl image_processing smart_resize
    if max(height, width) / min(height, width) > 200:
        return None
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def patches(image, patch_size=16, temporal_patch_size=2, merge_size=2):
    # Qwen2VLImageProcessor._preprocess for one RGB image (resample BICUBIC, rescale 1/255,
    # normalize mean = std = 0.5, channels first, then the patch reshape / transpose).
    height, width = smart_resize(image.height, image.width, patch_size * merge_size, 56 * 56,
                                 28 * 28 * 16384)
    resized = image.resize((width, height), Image.BICUBIC)
    array = np.array(resized)
    array = (array.astype(np.float64) * (1 / 255)).astype(np.float32)
    mean = np.array([0.5, 0.5, 0.5], dtype=np.float32)
    std = np.array([0.5, 0.5, 0.5], dtype=np.float32)
    array = (array - mean) / std
    array = array.transpose(2, 0, 1)  # C, H, W
    frames = np.array([array])
    if frames.shape[0] == 1:
        frames = np.tile(frames, (temporal_patch_size, 1, 1, 1))
    channel = frames.shape[1]
    grid_t = frames.shape[0] // temporal_patch_size
    grid_h, grid_w = height // patch_size, width // patch_size
    frames = frames.reshape(grid_t, temporal_patch_size, channel, grid_h // merge_size,
                            merge_size, patch_size, grid_w // merge_size, merge_size, patch_size)
    frames = frames.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    flat = frames.reshape(grid_t * grid_h * grid_w,
                          channel * temporal_patch_size * patch_size * patch_size)
    return (grid_t, grid_h, grid_w), flat.astype(np.float32)


RESIZE_CASES = [  # src_w, src_h, dst_w, dst_h, seed
    (97, 61, 128, 96, 1),      # upscale, odd sizes
    (640, 480, 112, 80, 2),    # downscale
    (1920, 1080, 96, 64, 3),   # large downscale
    (33, 47, 64, 32, 4),       # up in x, down in y
    (120, 80, 120, 50, 5),     # vertical pass only
    (101, 63, 51, 63, 6),      # horizontal pass only
    (17, 400, 24, 200, 7),     # tall
    (5, 3, 7, 2, 8),           # tiny
]
PATCH_CASES = [(50, 45, 11)]  # src_w, src_h, seed: 64 x 64 after smart_resize
SMART_CASES = [  # h, w, factor, min, max
    (1080, 1920, 32, 3136, 12845056), (75, 100, 32, 3136, 12845056),
    (40, 70, 32, 3136, 12845056), (10, 1000, 32, 3136, 12845056),
    (16, 16, 32, 3136, 12845056), (48, 48, 32, 3136, 12845056),
    (80, 80, 32, 3136, 12845056), (1, 200, 32, 3136, 12845056), (1, 201, 32, 3136, 12845056),
    (8000, 6000, 32, 3136, 12845056), (20000, 20000, 32, 3136, 12845056),
    (720, 1280, 32, 131072, 786432), (360, 640, 32, 131072, 786432),
    (2160, 3840, 32, 131072, 786432), (480, 854, 32, 131072, 786432),
    (1080, 1920, 28, 3136, 12845056), (333, 777, 32, 3136, 12845056),
    (144, 176, 32, 131072, 235200),
]


def main():
    out = [b"OMNIIMG1", struct.pack("<I", len(RESIZE_CASES))]
    for src_w, src_h, dst_w, dst_h, seed in RESIZE_CASES:
        resized = test_image(src_w, src_h, seed).resize((dst_w, dst_h), Image.BICUBIC)
        out.append(struct.pack("<5I", src_w, src_h, dst_w, dst_h, seed))
        out.append(resized.tobytes())
    out.append(struct.pack("<I", len(PATCH_CASES)))
    for src_w, src_h, seed in PATCH_CASES:
        (grid_t, grid_h, grid_w), flat = patches(test_image(src_w, src_h, seed))
        out.append(struct.pack("<6I", src_w, src_h, seed, grid_t, grid_h, grid_w))
        out.append(flat.astype("<f4").tobytes())
    out.append(struct.pack("<I", len(SMART_CASES)))
    for h, w, factor, min_pixels, max_pixels in SMART_CASES:
        result = smart_resize(h, w, factor, min_pixels, max_pixels) or (0, 0)
        out.append(struct.pack("<7I", h, w, factor, min_pixels, max_pixels, *result))
    path = Path(__file__).with_name("image_golden.bin")
    path.write_bytes(b"".join(out))
    print(f"wrote {path} ({path.stat().st_size} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
