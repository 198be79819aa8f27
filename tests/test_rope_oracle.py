"""posenc's plans held against the models themselves: every published config of the corpus, and the oracle's own
claims.

*The corpus* (tests/data/published_configs, sources in its MANIFEST.json): each file is read by
:meth:`posenc.RotaryPlan.from_config` as a user hands it over, and its language model is built small by
tests/rope_oracle.py (at most :data:`LAYERS` layers, four heads, every position key as published) and run one token at
a time at positions 0, 1, L - 1, L and 4L. Each file ends in one of these verdicts (:func:`verdict`):

- ``"agree"``: posenc reads the file, or, for a composite it refuses naming its language model, that model's part
  (its ``text_config``, or the flat file read as that model), and the tiny model agrees layer by layer;
- ``"refused, with the key"``: posenc refuses with a ValueError that names a key the file has (or its model_type);
- ``"not in transformers"``: transformers has no such ``model_type`` (the checkpoint runs its own code): posenc
  refuses it, naming ``model_type``;
- ``"does not rotate"``: a family transformers has and posenc does not read, whose modeling code calls no rotation
  (:func:`posenc_book.zoo.rotating_directories`): posenc refuses it, naming ``model_type``.

*The oracle's claims*: that it sees a wrong plan. Each planted misreading of posenc's family table (a layout, a base,
a partial factor, a NoPE flag, a softmax scale, a query multiplier) is reported by :func:`rope_oracle.compare` on a
published config, and the probe's own assumption (the hidden states do not depend on the position) is seen to fail
where positions enter before the attention (GPT-2's learned table).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from pathlib import Path
from typing import Any

import pytest
import rope_oracle

import posenc
from posenc._families import COMPOSITES, FAMILIES, ROTATES_UNREAD

pytestmark = pytest.mark.usefixtures("quiet_transformers")

CORPUS = Path(__file__).resolve().parent / "data" / "published_configs"
FILES = sorted(path.name for path in CORPUS.glob("*.json") if path.name != "MANIFEST.json")
LAYERS = 6
"""The layers a tiny model keeps: more than a period of every layer pattern in the corpus but Gemma 3's (6)."""


def load(name: str) -> dict[str, Any]:
    return json.loads((CORPUS / name).read_text())


def plan_or_refusal(values: dict[str, Any], model_type: str | None = None) -> posenc.RotaryPlan | str:
    try:
        return posenc.RotaryPlan.from_config(copy.deepcopy(values), model_type=model_type)
    except ValueError as error:
        return str(error)


def known_to_transformers(model_type: str) -> bool:
    from transformers import CONFIG_MAPPING

    return model_type in CONFIG_MAPPING


@functools.cache
def rotating_directories() -> frozenset[str]:
    from posenc_book.zoo import rotating_directories

    return frozenset(rotating_directories())


def verdict(values: dict[str, Any]) -> tuple[str, str]:
    """The file's verdict and what backs it (the differences, or the refusal); see the module docstring."""
    model_type = values["model_type"]
    read = plan_or_refusal(values)
    if not known_to_transformers(model_type):
        assert isinstance(read, str) and "model_type" in read, read
        return "not in transformers", read
    if isinstance(read, str) and model_type not in COMPOSITES and model_type not in ROTATES_UNREAD:
        if model_type not in FAMILIES:
            from transformers import CONFIG_MAPPING

            directory = CONFIG_MAPPING[model_type].__module__.split(".")[2]
            assert directory not in rotating_directories(), f"{model_type} rotates in transformers: {read}"
            assert "model_type" in read
            return "does not rotate", read
        return "refused, with the key", read
    if isinstance(read, str) and model_type in ROTATES_UNREAD:
        return "refused, with the key", read
    built = rope_oracle.tiny(values, max_layers=LAYERS)
    if isinstance(read, str):  # a composite: its language model's part, named by the refusal
        assert f"{COMPOSITES[model_type]!r} model" in read, read
        read = plan_or_refusal(built.values, model_type=built.model_type)
        if isinstance(read, str):
            return "refused, with the key", read
    else:
        read = plan_or_refusal(built.values, model_type=built.model_type)
        assert not isinstance(read, str), read  # the shrunk file reads as the file did
    observation = rope_oracle.observe(built)
    findings = rope_oracle.find(observation)
    differences = rope_oracle.compare(
        read, findings, observation, plain_scales=rope_oracle.plain_scales(built.config, read)
    )
    assert differences == [], differences
    assert any(found.rotates for found in findings.values()) == any(layer.rotates for layer in read.layers)
    return "agree", f"{len(findings)} layers"


@pytest.mark.parametrize("name", FILES)
def test_every_published_config_reads_as_its_tiny_model_runs(name):
    kind, backing = verdict(load(name))
    if kind == "refused, with the key":
        assert "config[" in backing or "model_type" in backing, backing


def test_the_corpus_verdicts():
    """What the corpus shows as a whole (the counts the chapter can quote): most files agree with their model."""
    kinds: dict[str, int] = {}
    for name in FILES:
        model_type = load(name)["model_type"]
        if not known_to_transformers(model_type):
            kind = "not in transformers"
        elif model_type in FAMILIES or model_type in COMPOSITES:
            kind = "read"
        elif model_type in ROTATES_UNREAD:
            kind = "rotates, not read"
        else:
            kind = "does not rotate"
        kinds[kind] = kinds.get(kind, 0) + 1
    assert kinds["read"] >= 60, kinds


# --- The oracle sees a wrong plan -----------------------------------------------------------------------------------

PLANTED = [
    ("meta-llama__Llama-3.2-3B-Instruct.json", "llama", dict(layout="interleaved"), "pairs features"),
    ("openai__gpt-oss-20b.json", "gpt_oss", dict(layout="interleaved"), "pairs features"),
    ("MiniMaxAI__MiniMax-M2.5.json", "minimax_m2", dict(rotary_dim_key=None), "the model leaves it"),
    ("deepseek-ai__DeepSeek-R1.json", "deepseek_v3", dict(softmax_mscale=False), "softmax scale"),
    ("HuggingFaceTB__SmolLM3-3B.json", "smollm3", dict(nope=None), "the model leaves it"),
]
"""(published file, its family, a wrong entry of posenc's table, what the oracle's report says)."""


@pytest.mark.parametrize(("name", "model_type", "change", "message"), PLANTED)
def test_the_oracle_reports_a_planted_misreading(name, model_type, change, message, monkeypatch):
    values = load(name)
    built, differences = rope_oracle.check(values, max_layers=4)
    assert differences == []
    with monkeypatch.context() as patch:
        patch.setitem(FAMILIES, model_type, dataclasses.replace(FAMILIES[model_type], **change))
        _, differences = rope_oracle.check(values, built=built)
    assert any(message in difference for difference in differences), differences


def test_the_oracle_reports_a_wrong_base_angle_and_attention_factor():
    """A base off by 1% moves the slow pairs' angles at 4L far beyond the bound; a YaRN attention factor left out
    (GPT-OSS's 1.347) is seen in the cos the layers receive."""
    values = load("openai__gpt-oss-20b.json")
    built = rope_oracle.tiny(values, max_layers=2)
    observation = rope_oracle.observe(built)
    findings = rope_oracle.find(observation)
    plan = posenc.RotaryPlan.from_config(copy.deepcopy(built.values))
    assert rope_oracle.compare(plan, findings, observation) == []
    moved = tuple(
        dataclasses.replace(
            layer,
            base=layer.base * 1.01,
            scaling=layer.scaling
            if layer.scaling is None or layer.scaling.rope_theta is None
            else dataclasses.replace(layer.scaling, rope_theta=layer.base * 1.01),
        )
        for layer in plan.layers
    )
    assert any(
        "angle" in text for text in rope_oracle.compare(dataclasses.replace(plan, layers=moved), findings, observation)
    )
    unscaled = tuple(
        dataclasses.replace(layer, scaling=dataclasses.replace(layer.scaling, attention_factor=1.0))
        for layer in plan.layers
    )
    differences = rope_oracle.compare(dataclasses.replace(plan, layers=unscaled), findings, observation)
    assert any("attention factor" in text for text in differences), differences


def test_the_probe_sees_positions_that_enter_before_the_attention():
    """GPT-2 adds a learned position table to its embeddings: the values reaching its layers change with the
    position, which breaks the probe's assumption, and the oracle says so rather than reading a rotation."""
    built = rope_oracle.tiny(load("openai-community__gpt2.json"), max_layers=2)
    observation = rope_oracle.observe(built, positions=(0, 1, 2))
    assert any("differs from position 0's" in note for note in observation.notes)
