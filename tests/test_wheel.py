"""The wheel holds the library only: what a stranger installs with ``pip install .``.

Builds the wheel from a copy of the tracked files in a temporary directory, so the source tree gets no
``build/`` or ``*.egg-info``; offline (``--no-index``, and the venv's setuptools: ``--no-build-isolation``).
"""

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = re.compile(
    r"posenc/[^/]+\.py|posenc/nn/[^/]+\.py|posenc/testing/[^/]+\.py|posenc/py\.typed|posenc-[^/]+\.dist-info/.+"
    r"|_posenc_pytestplugin\.py|posenc/testing/configs/[^/]+\.json"
)
"""Every file a wheel of posenc may hold: the library's modules, its typing marker, the metadata, and the pytest plugin
of its conformance suite (a top-level module: its docstring says why) and the published configs it reads."""
BOOK_MACHINERY = re.compile(r"posenc/bench\.py|posenc/chapters/.*")
"""The book's own code, which issue 15 moved out of the package (``posenc/bench.py`` matches ``LIBRARY``)."""


def tracked_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [name for name in listed.stdout.split("\0") if name]


def build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    for name in tracked_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", dist, source],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("posenc-*.whl")
    return wheel


def test_the_wheel_holds_the_library_and_nothing_else(tmp_path):
    with zipfile.ZipFile(build_wheel(tmp_path)) as wheel:
        names = wheel.namelist()
        metadata = next(wheel.read(name).decode() for name in names if name.endswith(".dist-info/METADATA"))
        entry_points = next(wheel.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    outside = sorted(name for name in names if not LIBRARY.fullmatch(name) or BOOK_MACHINERY.fullmatch(name))
    assert outside == [], f"the wheel holds files that are not the library: {outside}"
    modules = sorted(name for name in tracked_files() if LIBRARY.fullmatch(name) and not BOOK_MACHINERY.fullmatch(name))
    assert sorted(set(modules) - set(names)) == [], "tracked library files missing from the wheel"
    assert "posenc/py.typed" in names, "no posenc/py.typed: type checkers would ignore posenc's annotations"
    assert "Provides-Extra: torch" in metadata.splitlines(), "ImportError of posenc.nn names the torch extra"
    assert "Provides-Extra: hypothesis" in metadata.splitlines(), "posenc.testing.strategies' ImportError names it"
    assert "_posenc_pytestplugin.py" in names, "the conformance suite's pytest plugin"
    assert "[pytest11]\nposenc = _posenc_pytestplugin" in entry_points, "pytest finds the plugin by its entry point"
