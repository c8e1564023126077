#!/usr/bin/python3
"""Writes decode_golden.bin: small encoded images and what Pillow's
Image.open(...).convert("RGB") decodes them to (Debian python3-pil), for the decode tests.

Run: /usr/bin/python3 tests/media/goldens/generate_decode.py

File layout (little-endian): "OMNIDEC1", u32 cases; per case: u32 name length, name,
u32 encoded size, encoded bytes, u32 width, u32 height, u8 rgb[height * width * 3].
"""
import io
import struct
import sys
from pathlib import Path

from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
from generate_image import test_image  # noqa: E402


def encoded(image, **save):
    out = io.BytesIO()
    image.save(out, **save)
    return out.getvalue()


def main():
    rgb = test_image(40, 30, 21)
    alpha = Image.linear_gradient("L").resize((40, 30))
    rgba = rgb.copy()
    rgba.putalpha(alpha)
    palette = rgb.quantize(colors=16)
    palette.info["transparency"] = 3
    gray = rgb.convert("L")
    cases = [
        ("jpeg_420", encoded(rgb, format="JPEG", quality=90)),
        ("jpeg_444", encoded(rgb, format="JPEG", quality=95, subsampling=0)),
        ("jpeg_gray", encoded(gray, format="JPEG", quality=90)),
        ("jpeg_progressive", encoded(rgb, format="JPEG", quality=85, progressive=True)),
        ("png_rgb", encoded(rgb, format="PNG")),
        ("png_rgba", encoded(rgba, format="PNG")),
        ("png_palette_transparent", encoded(palette, format="PNG", transparency=3)),
        ("png_gray", encoded(gray, format="PNG")),
        ("webp_lossy", encoded(rgb, format="WEBP", quality=80)),
        ("webp_lossless_alpha", encoded(rgba, format="WEBP", lossless=True)),
        ("bmp_rgb", encoded(rgb, format="BMP")),
        ("gif", encoded(rgb.quantize(colors=32), format="GIF")),
        ("gif_transparent", encoded(palette, format="GIF", transparency=3)),
        ("png_201x1", encoded(test_image(201, 1, 5), format="PNG")),
        ("png_200x1", encoded(test_image(200, 1, 5), format="PNG")),
    ]
    out = [b"OMNIDEC1", struct.pack("<I", len(cases))]
    for name, data in cases:
        decoded = Image.open(io.BytesIO(data)).convert("RGB")
        out += [struct.pack("<I", len(name)), name.encode(), struct.pack("<I", len(data)), data,
                struct.pack("<2I", decoded.width, decoded.height), decoded.tobytes()]
    path = Path(__file__).with_name("decode_golden.bin")
    path.write_bytes(b"".join(out))
    print(f"wrote {path} ({path.stat().st_size} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
