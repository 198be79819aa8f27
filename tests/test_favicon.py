"""The site's icon is exactly what book/draw_favicon.py draws, and it is a well-formed 32 x 32 ICO.

The icon is committed (the book builds without running the script); these tests keep the committed bytes and
the code that draws them together: change one without the other (``make favicon``) and they fail.
"""

import runpy
import struct
import zlib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "book" / "draw_favicon.py"
ICON = ROOT / "book" / "site_root" / "favicon.ico"


def _script():
    return runpy.run_path(str(SCRIPT), run_name="draw_favicon")


def test_committed_icon_is_what_the_script_draws():
    assert ICON.read_bytes() == _script()["draw"](), "run `make favicon` and commit book/site_root/favicon.ico"


def test_icon_is_one_32x32_png_inside_an_ico_whose_pixels_are_the_drawing():
    data = ICON.read_bytes()
    assert struct.unpack("<HHH", data[:6]) == (0, 1, 1)
    width, height, _, _, planes, bits, size, offset = struct.unpack("<BBBBHHII", data[6:22])
    assert (width, height, planes, bits, offset, size) == (32, 32, 1, 24, 22, len(data) - 22)
    png = data[offset:]
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    # Walk the chunks, checking each CRC, and decode the image data.
    chunks, position = {}, 8
    while position < len(png):
        (length,) = struct.unpack(">I", png[position : position + 4])
        kind, body = png[position + 4 : position + 8], png[position + 8 : position + 8 + length]
        (crc,) = struct.unpack(">I", png[position + 8 + length : position + 12 + length])
        assert crc == zlib.crc32(kind + body), kind
        chunks[kind] = body
        position += 12 + length
    assert list(chunks) == [b"IHDR", b"IDAT", b"IEND"]
    assert struct.unpack(">IIBBBBB", chunks[b"IHDR"]) == (32, 32, 8, 2, 0, 0, 0)
    raw = zlib.decompress(chunks[b"IDAT"])
    rows = [raw[r * 97 : (r + 1) * 97] for r in range(32)]
    assert len(raw) == 32 * 97 and all(row[0] == 0 for row in rows)
    assert b"".join(row[1:] for row in rows) == _script()["pixels"]().tobytes()


def test_config_declares_the_icon_and_puts_it_at_the_site_root():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["html"]["favicon"] == ICON.relative_to(ROOT).as_posix()
    assert ICON.parent.relative_to(ROOT).as_posix() in config["sphinx"]["config"]["html_extra_path"]
