"""The corpus of published config.json files (tests/data/published_configs): its integrity only.

Each file is a checkpoint's config.json exactly as a public copy holds it (MANIFEST.json names the copy: repository,
path, commit); these tests check that the files and the manifest agree, that every file is a config transformers
could be handed (a JSON object with a model_type) whose bytes are still those read from the source (MANIFEST.json's
sha256), and that the corpus is as large and as varied as issue 32 asks.
What posenc makes of each file is tested elsewhere.
"""

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parent / "data" / "published_configs"
MANIFEST = CORPUS / "MANIFEST.json"
ENTRIES = json.loads(MANIFEST.read_text())["entries"]
FILES = sorted(path.name for path in CORPUS.glob("*.json") if path != MANIFEST)
FIELDS = {
    "file",
    "checkpoint",
    "model_type",
    "text_config_model_type",
    "year",
    "year_basis",
    "source",
    "source_note",
    "keys",
    "sha256",
}
COMMIT = re.compile(r"[0-9a-f]{40}")
REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
MAX_BYTES = 200_000

# Issue 32's floor for the corpus: at least this many checkpoints, from at least this many model_type families.
MIN_CHECKPOINTS = 100
MIN_FAMILIES = 60


def entry_id(entry):
    return entry["file"]


def test_every_file_is_in_the_manifest_and_every_entry_has_its_file():
    listed = [entry["file"] for entry in ENTRIES]
    assert [name for name, count in Counter(listed).items() if count > 1] == [], "a file listed twice"
    assert sorted(set(FILES) - set(listed)) == [], "files the manifest does not list"
    assert sorted(set(listed) - set(FILES)) == [], "manifest entries without their file"


@pytest.mark.parametrize("entry", ENTRIES, ids=entry_id)
def test_an_entry_describes_its_file(entry):
    assert set(entry) == FIELDS
    assert REPO.fullmatch(entry["checkpoint"]), entry["checkpoint"]
    assert entry["file"] == entry["checkpoint"].replace("/", "__") + ".json"
    raw = (CORPUS / entry["file"]).read_bytes()
    assert len(raw) <= MAX_BYTES
    assert hashlib.sha256(raw).hexdigest() == entry["sha256"], (
        "the stored bytes are no longer the bytes read from the source"
    )
    config = json.loads(raw)
    assert isinstance(config, dict)
    assert isinstance(config.get("model_type"), str) and config["model_type"]
    assert entry["model_type"] == config["model_type"]
    text_config = config.get("text_config")
    nested = text_config.get("model_type") if isinstance(text_config, dict) else None
    assert entry["text_config_model_type"] == nested
    assert isinstance(entry["keys"], list) and all(isinstance(key, str) and key for key in entry["keys"])


@pytest.mark.parametrize("entry", ENTRIES, ids=entry_id)
def test_an_entry_names_its_source(entry):
    source = entry["source"]
    assert set(source) == {"repo", "path", "commit"}
    assert REPO.fullmatch(source["repo"]), source["repo"]
    assert source["path"].endswith(".json") and not source["path"].startswith("/")
    assert COMMIT.fullmatch(source["commit"]), source["commit"]
    assert isinstance(entry["source_note"], str) and entry["source_note"].strip()
    if entry["year"] is None:
        assert entry["year_basis"] is None
    else:
        assert isinstance(entry["year"], int) and 2019 <= entry["year"] <= 2026
        assert isinstance(entry["year_basis"], str) and str(entry["year"]) in entry["year_basis"]


def test_the_checkpoints_are_distinct():
    checkpoints = [entry["checkpoint"].lower() for entry in ENTRIES]
    assert [name for name, count in Counter(checkpoints).items() if count > 1] == []


def test_the_corpus_has_issue_32s_floor_of_checkpoints():
    assert len(ENTRIES) >= MIN_CHECKPOINTS, len(ENTRIES)


def test_the_corpus_has_issue_32s_floor_of_families():
    """Families are the files' top-level model_type values."""
    families = {json.loads((CORPUS / entry["file"]).read_bytes())["model_type"] for entry in ENTRIES}
    assert len(families) >= MIN_FAMILIES, sorted(families)


def test_the_books_reader_returns_each_file_as_stored_and_only_files_of_the_manifest():
    """posenc_book.published, which the chapters read real checkpoints' values through (chapters 11 and 14)."""
    from posenc_book.published import CORPUS as READ_FROM
    from posenc_book.published import manifest_entry, published_config

    assert READ_FROM == CORPUS
    for entry in ENTRIES[:5]:
        assert published_config(entry["file"]) == json.loads((CORPUS / entry["file"]).read_text())
        assert manifest_entry(entry["file"]) == entry
    with pytest.raises(ValueError, match="file_name"):
        published_config("MANIFEST.json")
