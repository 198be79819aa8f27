"""Draw the book's icon: the 32 x 32 sinusoidal table ([sin | cos] layout) in the copper colours of its heat maps.

Writes ``book/site_root/favicon.ico``, an ICO file holding one 32 x 32 PNG. ``_config.yml`` declares it as the
pages' icon (``html: favicon:``, copied to ``_static/``) and copies ``book/site_root/`` to the root of the
site (``html_extra_path``), so ``/favicon.ico`` answers too. Run ``make favicon`` after changing this file;
tests/test_favicon.py checks that the committed icon is exactly what this script draws.

The PNG is written byte by byte with an uncompressed (stored) deflate block, so the bytes depend on nothing
but the pixels: not on the zlib build, not on matplotlib's PNG writer and its metadata.
"""

from __future__ import annotations

import struct
import sys
import zlib
from pathlib import Path

import matplotlib as mpl
import numpy as np

import posenc

SIZE = 32
ICON = Path(__file__).resolve().parent / "site_root" / "favicon.ico"


def pixels() -> np.ndarray:
    """``(SIZE, SIZE, 3)`` uint8 RGB: row ``pos`` is the encoding of position ``pos`` (sines, then cosines)."""
    table = posenc.sinusoidal(SIZE, SIZE, layout="halves", dtype=np.float64)  # [sin | cos], values in [-1, 1]
    rgba = mpl.colormaps["copper"]((table + 1.0) / 2.0, bytes=True)
    return np.ascontiguousarray(rgba[..., :3])


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(rgb: np.ndarray) -> bytes:
    """A truecolour PNG of ``rgb`` (height, width, 3) uint8, its image data in one stored deflate block."""
    height, width, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[row].tobytes() for row in range(height))  # filter type 0 on every row
    if len(raw) > 0xFFFF:
        raise ValueError(f"image too large for one stored block: {len(raw)} bytes")
    stored = b"\x01" + struct.pack("<HH", len(raw), len(raw) ^ 0xFFFF) + raw  # final block, no compression
    zlib_stream = b"\x78\x01" + stored + struct.pack(">I", zlib.adler32(raw))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib_stream) + _chunk(b"IEND", b"")


def ico(png_bytes: bytes, size: int) -> bytes:
    """An ICO file holding one PNG image of ``size`` x ``size`` pixels (PNG inside ICO: every current browser)."""
    directory = struct.pack("<HHH", 0, 1, 1)  # reserved, type 1 = icon, one image
    entry = struct.pack("<BBBBHHII", size, size, 0, 0, 1, 24, len(png_bytes), 6 + 16)
    return directory + entry + png_bytes


def draw() -> bytes:
    """The bytes of ``favicon.ico``."""
    return ico(png(pixels()), SIZE)


def main() -> int:
    ICON.parent.mkdir(parents=True, exist_ok=True)
    ICON.write_bytes(draw())
    print(f"wrote {ICON} ({ICON.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
