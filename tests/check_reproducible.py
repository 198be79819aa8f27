"""Build the book twice from the same sources and show that the outputs are identical.

Each build runs every notebook from scratch (``execute_notebooks: force``) into its own temporary
directory (``jupyter-book build --path-output``). The script then compares

* every file of the rendered site (``_build/html``) byte for byte: each page with the text outputs the
  reader sees, the search index, and every figure (``_images``);
* every executed notebook (``_build/jupyter_execute/**/*.ipynb``): each code cell's execution count and
  its non-stream outputs (every MIME bundle, figure bytes included, and errors), and every image file
  written next to it.

Printed (stream) text is compared in the rendered pages, not in the executed notebooks: a kernel may cut
one cell's prints into several messages, and myst-nb merges them for the page but in doing so leaves a
half-merged copy in ``jupyter_execute`` that differs between builds although the reader sees the same
text.

It prints a summary and exits non-zero on the first build failure or on any difference, listing them.
``SOURCE_DATE_EPOCH`` is taken from the environment, else from the last commit, so that both builds
stamp the same date into anything matplotlib or Sphinx dates.

When ``_build`` holds a complete ``make book`` build of exactly the sources as they are now (``make book``
records :func:`source_state`, a digest of the commit, every changed or untracked file's content and the
virtual environment's install stamp, in ``_build/source-state`` after a build that succeeded), that build is
the first of the two and only one more build is made: CI's ``make test`` has just built the book from the
same clone, and a third execution of every chapter would compare nothing the second does not. ``--fresh``
always makes two builds.

Usage (from the repository root; ``make check-reproducible`` runs it)::

    .venv/bin/python tests/check_reproducible.py [--keep DIR] [--fresh]
    .venv/bin/python tests/check_reproducible.py --print-state   # what ``make book`` records
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JUPYTER_BOOK = Path(sys.executable).parent / "jupyter-book"
IMAGE_SUFFIXES = {".png", ".svg", ".jpg", ".jpeg", ".gif", ".pdf"}


def source_date_epoch() -> str:
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return os.environ["SOURCE_DATE_EPOCH"]
    result = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=ROOT, capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 and result.stdout.strip() else "0"


STATE_FILE = "source-state"
"""The file in ``_build`` where ``make book`` records :func:`source_state` after a build that succeeded."""


def source_state(root: Path = ROOT) -> str:
    """A digest of what a build of ``root`` reads: the commit, each changed or untracked file (its path and
    content, ignored files left out as the build leaves them out), ``SOURCE_DATE_EPOCH`` and the install stamp of
    ``.venv`` (its time changes whenever the requirements are installed again)."""
    digest = hashlib.sha256()

    def git(*args: str) -> bytes:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, check=True).stdout

    digest.update(git("rev-parse", "HEAD"))
    changed = git("status", "--porcelain=v1", "-z", "--untracked-files=all").split(b"\0")
    for entry in sorted(filter(None, changed)):
        digest.update(entry)
        path = root / entry[3:].decode()
        if path.is_file():
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    digest.update(source_date_epoch().encode())
    stamp = root / ".venv" / ".installed"
    digest.update(str(stamp.stat().st_mtime_ns if stamp.exists() else 0).encode())
    return digest.hexdigest()


def reusable_build(root: Path = ROOT) -> bool:
    """Whether ``root/_build`` is a complete ``make book`` build of the sources exactly as they are now."""
    recorded = root / "_build" / STATE_FILE
    return recorded.is_file() and recorded.read_text().strip() == source_state(root)


def build(source: Path, output: Path, env: dict[str, str]) -> float:
    """Build the book at ``source`` into ``output/_build``; return the seconds it took."""
    start = time.monotonic()
    result = subprocess.run(
        [str(JUPYTER_BOOK), "build", "--all", "-W", "-n", "--keep-going", "--path-output", str(output), str(source)],
        env=env,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        sys.stdout.write(result.stdout[-5000:] + result.stderr[-5000:])
        for log in sorted((output / "_build" / "html" / "reports").glob("*.log")):
            sys.stdout.write(log.read_text())
        raise SystemExit(f"check_reproducible: the build into {output} failed")
    return time.monotonic() - start


def _joined(value):
    """nbformat stores text either as one string or as a list of lines; compare the text, not the split."""
    if isinstance(value, dict):
        return {key: _joined(item) for key, item in value.items()}
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "".join(value)
    if isinstance(value, list):
        return [_joined(item) for item in value]
    return value


def notebook_outputs(path: Path) -> list:
    """What a reader sees of an executed notebook: per code cell, its count and outputs, without timings."""
    cells = json.loads(path.read_text())["cells"]
    return [
        {
            "execution_count": cell.get("execution_count"),
            "outputs": [output for output in _joined(cell.get("outputs", [])) if output.get("output_type") != "stream"],
        }
        for cell in cells
        if cell["cell_type"] == "code"
    ]


def output_files(build_dir: Path) -> tuple[dict[str, Path], dict[str, Path]]:
    """The executed notebooks, and the files compared byte for byte (the site, the executed notebooks'
    images), of a build, keyed by their path inside ``_build``."""
    base = build_dir / "_build"
    notebooks = {p.relative_to(base).as_posix(): p for p in sorted((base / "jupyter_execute").rglob("*.ipynb"))}
    files = {p.relative_to(base).as_posix(): p for p in sorted((base / "html").rglob("*")) if p.is_file()}
    files.update(
        (p.relative_to(base).as_posix(), p)
        for p in sorted((base / "jupyter_execute").rglob("*"))
        if p.suffix.lower() in IMAGE_SUFFIXES
    )
    return notebooks, files


def compare(first: Path, second: Path) -> tuple[list[str], dict[str, int]]:
    """Differences between two builds, and counts of what was compared."""
    differences = []
    notebooks_a, images_a = output_files(first)
    notebooks_b, images_b = output_files(second)
    for kind, a, b in (("notebook", notebooks_a, notebooks_b), ("file", images_a, images_b)):
        for name in sorted(set(a) ^ set(b)):
            differences.append(f"{kind} {name} exists in only one build")
    n_outputs = 0
    for name in sorted(set(notebooks_a) & set(notebooks_b)):
        cells_a, cells_b = notebook_outputs(notebooks_a[name]), notebook_outputs(notebooks_b[name])
        n_outputs += sum(len(cell["outputs"]) for cell in cells_a)
        if len(cells_a) != len(cells_b):
            differences.append(f"notebook {name}: {len(cells_a)} vs {len(cells_b)} code cells")
            continue
        for index, (cell_a, cell_b) in enumerate(zip(cells_a, cells_b)):
            if cell_a != cell_b:
                differences.append(f"notebook {name}: code cell {index} differs: {_first_difference(cell_a, cell_b)}")
    for name in sorted(set(images_a) & set(images_b)):
        bytes_a, bytes_b = images_a[name].read_bytes(), images_b[name].read_bytes()
        if bytes_a != bytes_b:
            differences.append(f"file {name} differs{_first_line_difference(bytes_a, bytes_b)}")
    counts = {
        "notebooks": len(notebooks_a),
        "outputs": n_outputs,
        "files": len(images_a),
        "images": sum(Path(name).suffix.lower() in IMAGE_SUFFIXES for name in images_a),
    }
    return differences, counts


def _first_line_difference(a: bytes, b: bytes) -> str:
    """For text files, the first differing line of each (shortened); nothing for binary files."""
    try:
        lines_a, lines_b = a.decode().splitlines(), b.decode().splitlines()
    except UnicodeDecodeError:
        return ""
    for line_a, line_b in zip(lines_a, lines_b):
        if line_a != line_b:
            at = next((i for i, (x, y) in enumerate(zip(line_a, line_b)) if x != y), min(len(line_a), len(line_b)))
            start = max(0, at - 60)
            return f": ...{line_a[start : at + 40]!r} vs ...{line_b[start : at + 40]!r}"
    return f": {len(lines_a)} vs {len(lines_b)} lines"


def _first_difference(a, b, where="") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{where}.{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _first_difference(x, y, f"{where}[{i}]")
    return f"{where}: {str(a)[:120]!r} vs {str(b)[:120]!r}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--keep", type=Path, help="build into DIR/a and DIR/b and keep them (default: a temporary directory)"
    )
    parser.add_argument("--source", type=Path, default=ROOT, help="the book to build (default: this repository)")
    parser.add_argument("--fresh", action="store_true", help="make two builds even if make book's build is current")
    parser.add_argument("--print-state", action="store_true", help="print the digest make book records, and exit")
    args = parser.parse_args(argv)
    if args.print_state:
        print(source_state(args.source))
        return 0
    env = dict(os.environ, SOURCE_DATE_EPOCH=source_date_epoch())
    reuse = not args.fresh and args.keep is None and reusable_build(args.source)
    with tempfile.TemporaryDirectory(prefix="posenc-repro-") as scratch:
        base = args.keep or Path(scratch)
        first, second = (args.source, base / "b") if reuse else (base / "a", base / "b")
        seconds = [0.0 if reuse else build(args.source, first, env), build(args.source, second, env)]
        differences, counts = compare(first, second)
    first_build = "make book's build of these sources (_build)" if reuse else f"{seconds[0]:.0f} s"
    print(
        f"check_reproducible: two builds ({first_build}, {seconds[1]:.0f} s, "
        f"SOURCE_DATE_EPOCH={env['SOURCE_DATE_EPOCH']}) "
        f"compared: {counts['files']} files byte for byte ({counts['images']} images), {counts['notebooks']} executed "
        f"notebooks with {counts['outputs']} non-stream outputs"
    )
    for difference in differences:
        print(f"  DIFFERENT {difference}")
    print("check_reproducible: " + ("identical" if not differences else f"{len(differences)} differences"))
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
