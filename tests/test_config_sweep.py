"""The differential sweep (tests/config_sweep.py): its committed report is current and clean, and a sample of it runs
here, in ``make unit``, with the verdicts the report gives.

The whole sweep (every census class, each key its code reads changed one at a time, posenc against the tiny model)
runs in ``make check-configs`` and writes ``book/posenc_book/config_sweep.json``. A report is refused when it was made
with other versions of transformers or PyTorch, or before a change to posenc's reading code (the hash of
:data:`config_sweep.READING_CODE`), or when a case in it is a misreading, a refusal that does not name its key, or a
crash of the harness.
"""

from __future__ import annotations

import json
from collections import Counter

import config_sweep
import pytest

pytestmark = pytest.mark.usefixtures("quiet_transformers")

SAMPLE = {
    "LlamaConfig": None,  # every key and every rope type
    "GraniteMoeHybridConfig": {"position_embedding_type"},
    "MiniMaxM2Config": {"head_dim", "rope_parameters"},
    "Gemma3TextConfig": {"rope_parameters['sliding_attention']"},
}
"""The cases the fast sample runs: a class and the keys of its cases (None: all of them)."""


@pytest.fixture(scope="module")
def report():
    return json.loads(config_sweep.REPORT.read_text())


def test_the_report_is_for_this_code_and_these_versions(report):
    assert {key: report[key] for key in ("transformers", "torch")} == config_sweep.versions()
    assert report["reading_code_sha256"] == config_sweep.reading_hash(), (
        "posenc's reading code changed since the sweep: run `make check-configs` and commit its report"
    )
    assert report["summary"] == config_sweep.summary(report["cases"])


def test_the_report_has_no_misreading(report):
    defects = [case for case in report["cases"] if case["verdict"] in (*config_sweep.DEFECTS, "harness error")]
    assert defects == []
    census = {name for _, name in ((f, type(c).__name__) for f, c in config_sweep.census_configs())}
    assert {case["config_class"] for case in report["cases"]} == census  # every census class was swept
    verdicts = Counter(case["verdict"] for case in report["cases"])
    assert verdicts["agree"] > verdicts["refused, key named"] > 0


def test_a_sample_of_the_sweep_gives_the_reports_verdicts(report):
    """The sample's cases run again here give the verdicts the report holds (a report of other code would not)."""
    chosen = {type(config).__name__: (family, config) for family, config in config_sweep.census_configs()}
    recorded = {(case["config_class"], case["change"]): case["verdict"] for case in report["cases"]}
    ran = 0
    for name, keys in SAMPLE.items():
        family, config = chosen[name]
        for row in config_sweep.sweep_config(family, config, keys=keys):
            assert row["verdict"] not in config_sweep.DEFECTS, row
            assert recorded[(name, row["change"])] == row["verdict"], row
            ran += 1
    assert ran >= 30
