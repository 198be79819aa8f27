"""The book's corpus of published ``config.json`` files (``tests/data/published_configs``), for the chapters.

Each file is a checkpoint's configuration exactly as a public copy holds it; ``MANIFEST.json`` beside the files
names the copy (repository, path, commit) and the digest of the bytes, which ``tests/test_published_configs.py``
checks. A chapter that states what a real checkpoint configures reads the value here, not from memory.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

__all__ = ["CORPUS", "manifest_entry", "published_config"]

CORPUS = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "published_configs"
"""The corpus directory, in the repository the book's helpers are installed from (editable)."""


def manifest_entry(file_name: str) -> dict[str, Any]:
    """The ``MANIFEST.json`` entry of ``file_name``: its checkpoint, ``model_type`` and source.

    Raises
    ------
    FileNotFoundError
        If the corpus is not there (the helpers were not installed from a clone of the repository).
    ValueError
        If the manifest has no entry for ``file_name``.
    """
    manifest = CORPUS / "MANIFEST.json"
    if not manifest.is_file():
        raise FileNotFoundError(f"no corpus of published configs at {CORPUS}: install the book from a clone")
    entries = {entry["file"]: entry for entry in json.loads(manifest.read_text())["entries"]}
    if file_name not in entries:
        raise ValueError(f"file_name must name a file of the corpus's MANIFEST.json, got {file_name!r}")
    return dict(entries[file_name])


def published_config(file_name: str) -> dict[str, Any]:
    """The published ``config.json`` stored as ``file_name`` in the corpus, parsed.

    Examples
    --------
    >>> published_config("microsoft__Phi-3.5-mini-instruct.json")["rope_scaling"]["type"]
    'longrope'
    """
    manifest_entry(file_name)  # refuses a file the manifest does not name
    parsed: dict[str, Any] = json.loads((CORPUS / file_name).read_text())
    return parsed
