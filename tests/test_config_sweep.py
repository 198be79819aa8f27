"""The differential sweep (tests/config_sweep.py): a sample of its cases runs here, in ``make unit``, and its committed
report, once ``make check-configs`` has written it, is current.

The whole sweep (every census class, each key its code reads changed one at a time, posenc against the tiny model)
runs in ``make check-configs`` and writes ``book/posenc_book/config_sweep.json``. A report is refused when it was made
with other versions of transformers or PyTorch, or before a change to posenc's reading code or to the sweep's (the
hash of :data:`config_sweep.READING_CODE`), or when its defects (a misreading, a refusal that does not name its key, a
config.json transformers rejects and posenc serves) or the classes the harness failed on are not the ones listed in
:data:`KNOWN_DEFECTS` and :data:`KNOWN_HARNESS_ERRORS`. Until the report is written those tests are skipped, saying
so; the sample runs either way.
"""

from __future__ import annotations

import json
from collections import Counter

import config_sweep
import pytest

pytestmark = pytest.mark.usefixtures("quiet_transformers")

SAMPLE = {
    "LlamaConfig": {"num_key_value_heads=1": "agree", "rope_parameters: rope_type=yarn": "agree"},
    "GraniteMoeHybridConfig": {"position_embedding_type='rope'": "agree"},
    "MiniMaxM2Config": {"head_dim=256": "agree", "rope_parameters: partial_rotary_factor": "agree"},
    "Gemma3TextConfig": {"rope_parameters['sliding_attention']: rope_type=linear": "agree"},
    "Mistral4Config": {"qk_nope_head_dim=128": "refused, key named"},
    "MixtralConfig": {"rope_parameters: rope_type=longrope": "served, transformers' validator fails"},
    "FalconH1Config": {"hidden_size=256": "agree"},
}
"""The cases the fast sample runs, by class and label (``change``), with the verdict the sweep gave each: the issue's
misreadings (Granite 4.0-H's NoPE switch, MiniMax-M2's partial rotary beside a head size), a layer type's own
scaling, Llama, and a refusal that once did not name the key changed (Mistral 4's head_dim is the sum of its
nope and rope widths); a LongRoPE dict beside a null head_dim, which transformers' validator takes for a size
(Mixtral), and a hidden size whose Mamba widths the sweep keeps consistent (Falcon-H1, whose mamba_d_ssm gives the
width). Each class's defaults run too, and must agree."""

KNOWN_DEFECTS: set[tuple[str, str, str]] = set()
"""(class, change, verdict) of each defect of the committed report: what is left to fix, not what is accepted."""
KNOWN_HARNESS_ERRORS: dict[str, str] = {
    "BltGlobalTransformerConfig": "LookupError: no model class for BltGlobalTransformerConfig",
    "BltLocalDecoderConfig": "LookupError: no model class for BltLocalDecoderConfig",
    "BltLocalEncoderConfig": "LookupError: no model class for BltLocalEncoderConfig",
    "BltPatcherConfig": "LookupError: no model class for BltPatcherConfig",
    "DeepseekOcr2VisionEncoderConfig": "LookupError: no model class for DeepseekOcr2VisionEncoderCon",
    "DiaDecoderConfig": "LookupError: no model class for DiaDecoderConfig",
    "DiaEncoderConfig": "LookupError: no model class for DiaEncoderConfig",
    "Molmo2TextConfig": "StrictDataclassFieldValidationError: Validation error for fi",
    "PeAudioVideoEncoderConfig": "ImportError: \nTimmWrapperForImageClassification requires the",
    "PeVideoEncoderConfig": "ImportError: \nTimmWrapperForImageClassification requires the",
    "T5Gemma2DecoderConfig": "LookupError: no model class for T5Gemma2DecoderConfig",
    "T5Gemma2TextConfig": "LookupError: no model class for T5Gemma2TextConfig",
    "T5GemmaModuleConfig": "LookupError: no model class for T5GemmaModuleConfig",
}
"""The classes the harness failed on, with why."""


@pytest.fixture(scope="module")
def report():
    if not config_sweep.REPORT.exists():
        pytest.skip(f"{config_sweep.REPORT.name} is not written yet: run `make check-configs` and commit it")
    return json.loads(config_sweep.REPORT.read_text())


def test_the_report_is_for_this_code_and_these_versions(report):
    assert {key: report[key] for key in ("transformers", "torch")} == config_sweep.versions()
    assert report["reading_code_sha256"] == config_sweep.reading_hash(), (
        "posenc's reading code or the sweep's changed since the sweep: run `make check-configs` and commit its report"
    )
    assert report["summary"] == config_sweep.summary(report["cases"])


def test_the_reports_defects_are_the_known_ones(report):
    """A new defect fails this test, and so does one fixed (remove it from the list then)."""
    defects = {
        (case["config_class"], case["change"], case["verdict"])
        for case in report["cases"]
        if case["verdict"] in config_sweep.DEFECTS
    }
    assert defects == KNOWN_DEFECTS
    harness = {case["config_class"] for case in report["cases"] if case["verdict"] == "harness error"}
    assert harness == set(KNOWN_HARNESS_ERRORS)
    verdicts = Counter(case["verdict"] for case in report["cases"])
    assert verdicts["agree"] > verdicts["refused, key named"] > 0
    assert report["summary"]["classes"] >= 190  # (the census's classes, image and video towers aside)


def test_a_sample_of_the_sweep():
    """The sample's cases, run as the sweep runs them: posenc and transformers' own tiny model agree."""
    ran = 0
    for name, expected in SAMPLE.items():
        family, config = config_sweep.census_config(name)
        rows = config_sweep.sweep_config(family, config, labels=set(expected))
        verdicts = {row["change"]: row["verdict"] for row in rows}
        assert verdicts == {**expected, "(the class's defaults)": "agree"}, rows
        ran += len(rows)
    assert ran == sum(len(expected) + 1 for expected in SAMPLE.values())
