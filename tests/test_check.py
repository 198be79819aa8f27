"""``posenc check`` and :func:`posenc.check_config`: published configs read or refused, the JSON schema, the exit
codes, and each warning shown firing on a config that has its pitfall and silent on one that does not.

The configs are the published ``config.json`` files of tests/data/published_configs (each file's source is in its
MANIFEST.json); where a pitfall needs a value no published file in the corpus has, a published file is changed in
the one key, and the test says which.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest

import posenc
from posenc import CHECK_SCHEMA, check_config
from posenc.__main__ import main

CORPUS = Path(__file__).resolve().parent / "data" / "published_configs"
PUBLISHED = sorted(path for path in CORPUS.glob("*.json") if path.name != "MANIFEST.json")
WIDTH = 80


def published(name: str) -> Path:
    return CORPUS / f"{name}.json"


def published_dict(name: str) -> dict:
    return json.loads(published(name).read_text())


def codes(report) -> list[str]:
    return [warning.code for warning in report.warnings]


# --- The schema of --json -------------------------------------------------------------------------------------

TOP = {
    "schema": str,
    "source": str,
    "part": (str, type(None)),
    "model_type": str,
    "config_class": str,
    "modeling_source": str,
    "num_layers": int,
    "max_position_embeddings": (int, type(None)),
    "context": (int, type(None)),
    "kinds": list,
    "defaults_used": dict,
    "warnings": list,
}
KIND = {
    "layer_type": str,
    "layers": list,
    "attention": bool,
    "rotates": bool,
    "head_dim": int,
    "rotary_dim": int,
    "rotated_features": (list, type(None)),
    "layout": (str, type(None)),
    "base": (float, type(None)),
    "scaling": (dict, type(None)),
    "axes": list,
    "attention_factor": float,
    "softmax_scale": float,
    "query_multiplier": (dict, type(None)),
    "context": (dict, type(None)),
}
WARNING = {"code": str, "message": str, "see": str, "sources": list}
CONTEXT = {"length": int, "holds": (bool, type(None)), "first_failure": (int, type(None)), "meaning": str}


def assert_schema(document: dict) -> None:
    """``document`` has exactly the keys of schema posenc.check/1, each of its type, and is consistent."""

    def fields(value: dict, expected: dict, where: str) -> None:
        assert set(value) == set(expected), f"{where}: keys {sorted(value)}"
        for key, kind in expected.items():
            assert isinstance(value[key], kind), f"{where}[{key!r}] = {value[key]!r}"

    fields(document, TOP, "report")
    assert document["schema"] == CHECK_SCHEMA
    layers = sorted(index for kind in document["kinds"] for index in kind["layers"])
    assert layers == list(range(document["num_layers"])), "the kinds' layers are not the model's layers"
    for kind in document["kinds"]:
        fields(kind, KIND, "kind")
        if kind["rotates"]:
            start, stop = kind["rotated_features"]
            assert stop - start == kind["rotary_dim"] and 0 <= start < stop <= kind["head_dim"]
            assert kind["layout"] in ("interleaved", "halves") and kind["scaling"]["rope_type"] in posenc.ROPE_TYPES
            assert kind["base"] > 1 and kind["axes"]
        else:
            assert kind["rotary_dim"] == 0 and kind["rotated_features"] is None and kind["base"] is None
        if kind["context"] is not None:
            fields(kind["context"], CONTEXT, "context")
    for warning in document["warnings"]:
        fields(warning, WARNING, "warning")
        assert all(isinstance(source, str) and source for source in warning["sources"])


# --- Every published config: read, or refused with a reason ---------------------------------------------------


@pytest.mark.parametrize("path", PUBLISHED, ids=lambda path: path.stem)
def test_a_published_config_is_read_in_80_columns_or_refused_with_the_reason(path, capsys):
    status = main(["check", str(path)])
    out, err = capsys.readouterr()
    if status == 2:
        assert out == "" and err.startswith("posenc check: refused: ") and len(err.strip()) > 30
        return
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "posenc check" and lines[1].startswith("  read ")
    assert max(map(len, lines)) <= WIDTH, max(lines, key=len)
    report = check_config(path)
    document = json.loads(report.to_json())
    assert_schema(document)
    assert document == report.to_dict()
    assert document["num_layers"] == len(report.plan.layers)
    assert [tuple(kind["layers"]) for kind in document["kinds"]] == [
        report.plan.layers_of(k) for k in report.plan.kinds
    ]


def test_most_of_the_corpus_is_read():
    """A floor that keeps the test above from passing by refusing everything: the rotating families posenc knows."""
    read = []
    for path in PUBLISHED:
        try:
            read.append(check_config(path).plan.model_type)
        except ValueError:
            pass
    assert len(read) >= 40 and len(set(read)) >= 15, (len(read), sorted(set(read)))


@pytest.mark.parametrize("name", ["meta-llama__Llama-2-7b-hf", "openai__gpt-oss-20b", "google__gemma-4-E2B-it"])
def test_with_a_context_the_report_still_fits_80_columns_and_the_schema(name, capsys):
    assert main(["check", str(published(name)), "--context", "65536"]) == 0
    out, _ = capsys.readouterr()
    assert max(map(len, out.splitlines())) <= WIDTH
    assert main(["check", str(published(name)), "--context", "65536", "--json"]) == 0
    document = json.loads(capsys.readouterr()[0])
    assert_schema(document)
    assert document["context"] == 65536 and all(kind["context"] is not None for kind in document["kinds"])


# --- The command line -----------------------------------------------------------------------------------------


def test_python_m_posenc_prints_the_json_check_config_returns():
    path = published("openai__gpt-oss-20b")
    run = subprocess.run(
        [sys.executable, "-m", "posenc", "check", str(path), "--json"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == check_config(path).to_dict()


def test_the_posenc_console_script_is_declared():
    (script,) = entry_points(group="console_scripts", name="posenc")
    assert script.value == "posenc.__main__:main"


@pytest.mark.argument_check
@pytest.mark.parametrize(
    "arguments, reason",
    [
        (["check", "{tmp}/missing.json"], "cannot read"),
        (["check", "{tmp}/broken.json"], "is not JSON"),
        (["check", "{tmp}/list.json"], "not an object"),
        (["check", "{tmp}"], "cannot read"),  # a directory without config.json
        (["check", str(published("openai-community__gpt2"))], "'gpt2' is not a family posenc knows"),
        (["check", str(published("openai__gpt-oss-20b")), "--context", "1"], "context"),
    ],
)
def test_a_refused_config_exits_2_with_the_reason_on_stderr(arguments, reason, tmp_path, capsys):
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    status = main([argument.replace("{tmp}", str(tmp_path)) for argument in arguments])
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert err.startswith("posenc check: refused: ") and reason in err, err


@pytest.mark.argument_check
@pytest.mark.parametrize("arguments", [[], ["check"], ["check", "config.json", "--context", "many"], ["verify", "x"]])
def test_a_bad_command_line_exits_2(arguments, capsys):
    try:
        status = main(arguments)
    except SystemExit as stop:  # argparse's own refusal
        status = stop.code
    assert status == 2
    assert capsys.readouterr()[1] != ""


def test_a_model_directory_reads_its_config_json(tmp_path):
    source = published("HuggingFaceTB__SmolLM3-3B")
    (tmp_path / "config.json").write_bytes(source.read_bytes())
    from_directory, from_file = check_config(tmp_path).to_dict(), check_config(source).to_dict()
    assert from_directory.pop("source") == str(tmp_path / "config.json")
    assert from_file.pop("source") == str(source)
    assert from_directory == from_file


def test_a_composite_config_is_read_through_its_text_config():
    report = check_config(published("google__gemma-3-12b-it"))
    assert report.part == "text_config" and report.plan.model_type == "gemma3_text"
    assert {kind.kind.base for kind in report.kinds} == {10000.0, 1000000.0}


@pytest.mark.argument_check
def test_render_checks_its_width():
    with pytest.raises(ValueError, match="width"):
        check_config(published("openai__gpt-oss-20b")).render(width=40)


# --- A transformers config object ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, expected",
    [("HuggingFaceTB__SmolLM3-3B", ["nope-layers"]), ("openai__gpt-oss-20b", ["truncate", "static-yarn"])],
)
def test_a_config_object_gives_the_plan_of_its_file_and_the_plan_derived_warnings(name, expected):
    """transformers has standardised an object: the warnings about a key's place in the file are the dict's alone."""
    from transformers import AutoConfig

    data = published_dict(name)
    model_type = data.pop("model_type")
    config = AutoConfig.for_model(model_type, **data)
    report = check_config(config)
    assert report.source == f"a {type(config).__name__} object"
    assert report.plan == check_config(published(name)).plan
    assert codes(report) == expected


# --- Each warning: firing on a config with the pitfall, silent on one without --------------------------------


def test_base_only_in_rope_parameters():
    report = check_config(published("google__gemma-4-E2B-it"))  # a v5 file: rope_parameters per layer type
    (warning,) = [w for w in report.warnings if w.code == "base-only-in-rope-parameters"]
    assert "rope_parameters['full_attention']['rope_theta'] = 1000000" in warning.message
    assert "base-only-in-rope-parameters" not in codes(check_config(published("meta-llama__Llama-3.2-3B-Instruct")))
    # the same v5 file with the base of the fallback inside (10000 is what a reader would fall back to anyway)
    data = published_dict("google__gemma-4-E2B-it")
    data["text_config"]["rope_parameters"]["full_attention"]["rope_theta"] = 10000.0
    assert "base-only-in-rope-parameters" not in codes(check_config(data))
    # and with a top-level rope_theta beside it, as a file written for both conventions has
    data = published_dict("google__gemma-4-E2B-it")
    data["text_config"]["rope_theta"] = 1000000.0
    assert "base-only-in-rope-parameters" not in codes(check_config(data))


def test_rotary_dim_key():
    report = check_config(published("MiniMaxAI__MiniMax-M2.5"))  # rotary_dim 64 beside head_dim 128
    (warning,) = [w for w in report.warnings if w.code == "rotary-dim-key"]
    assert warning.message.startswith("rotary_dim = 64 ")
    assert "rotary-dim-key" not in codes(check_config(published("meta-llama__Llama-3.2-3B-Instruct")))


@pytest.mark.parametrize(
    "name",
    ["microsoft__phi-2", "Qwen__Qwen3-Next-80B-A3B-Instruct", "google__gemma-4-E2B-it", "MiniMaxAI__MiniMax-M2.5"],
)
def test_partial_rotary_fires(name):
    report = check_config(published(name))
    assert "partial-rotary" in codes(report)
    assert any(k.kind.rotary_dim < k.kind.head_dim or k.kind.scaling.rope_type == "proportional" for k in report.kinds)


@pytest.mark.parametrize("name", ["meta-llama__Llama-3.2-3B-Instruct", "deepseek-ai__DeepSeek-V2-Lite-Chat"])
def test_partial_rotary_is_silent_on_a_whole_head_and_on_latent_attention(name):
    """DeepSeek-V2-Lite rotates the last 64 features of its 192 (multi-head latent attention), not partial rotary."""
    assert "partial-rotary" not in codes(check_config(published(name)))


def test_truncate():
    report = check_config(published("openai__gpt-oss-20b"))  # YaRN with truncate: false
    (warning,) = [w for w in report.warnings if w.code == "truncate"]
    assert "truncate: false" in warning.message and "per-layer-type" not in warning.message
    assert "truncate" not in codes(check_config(published("deepseek-ai__DeepSeek-V2-Lite-Chat")))  # YaRN, no key
    # gemma-4-E2B-it's per-layer-type dict with GPT-OSS's YaRN on its full layers, truncate inside it
    data = published_dict("google__gemma-4-E2B-it")
    yarn = published_dict("openai__gpt-oss-20b")["rope_scaling"]
    data["text_config"]["rope_parameters"]["full_attention"] = {**yarn, "rope_theta": 1000000.0}
    # transformers reads truncate from the top of rope_parameters only: posenc refuses the layer's false (it read it
    # silently before, tests/config_sweep.py found Beam's case), and warns where the layer's value is the one used
    with pytest.raises(ValueError, match=r"\['full_attention'\]\['truncate'\] = False"):
        check_config(copy.deepcopy(data))
    data["text_config"]["rope_parameters"]["full_attention"]["truncate"] = True
    (warning,) = [w for w in check_config(data).warnings if w.code == "truncate"]
    assert "per-layer-type dict ['full_attention']" in warning.message


def test_nope_layers():
    report = check_config(published("HuggingFaceTB__SmolLM3-3B"))  # no_rope_layers: every fourth layer NoPE
    (warning,) = [w for w in report.warnings if w.code == "nope-layers"]
    nope = [index for kind in report.kinds if not kind.kind.rotates for index in kind.layers]
    assert nope == list(range(3, 36, 4))
    assert warning.message.startswith("9 of the 36 attention layers do not rotate")
    assert "a 1 marks a layer that rotates" in warning.message
    assert "nope-layers" not in codes(check_config(published("meta-llama__Llama-3.2-3B-Instruct")))


def test_nope_layers_of_granite_4_h_follow_position_embedding_type():
    """GraniteMoeHybrid rotates only when position_embedding_type is 'rope' (its class default None leaves every
    attention layer unrotated): a config built by transformers' class, as an object and as its dict."""
    from transformers import GraniteMoeHybridConfig

    config = GraniteMoeHybridConfig(num_hidden_layers=4, layer_types=["mamba", "attention"] * 2)
    for given in (config, config.to_dict()):
        report = check_config(given)
        (warning,) = [w for w in report.warnings if w.code == "nope-layers"]
        assert warning.message.startswith("2 of the 2 attention layers do not rotate (NoPE): layers 1, 3.")
        assert ("position_embedding_type = None" in warning.message) is isinstance(given, dict)
    rotating = {**config.to_dict(), "position_embedding_type": "rope"}
    report = check_config(rotating)
    assert [kind.kind.rotates for kind in report.kinds if kind.attention] == [True]
    (warning,) = [w for w in report.warnings if w.code == "nope-layers"]  # the key's polarity, stated
    assert warning.message.startswith("Every attention layer rotates. position_embedding_type = 'rope'")


def test_partial_key_not_read():
    """Llama's default frequencies ignore partial_rotary_factor (transformers' compute_default_rope_parameters):
    Llama 2's file with a factor of 0.5 added rotates the whole head, and the warning says so; phi-2's factor and
    MiniMax-M2.5's rotary_dim are read, and stay silent."""
    data = published_dict("meta-llama__Llama-2-7b-hf")
    data["partial_rotary_factor"] = 0.5
    report = check_config(data)
    assert [(kind.kind.rotary_dim, kind.kind.head_dim) for kind in report.kinds] == [(128, 128)]
    (warning,) = [w for w in report.warnings if w.code == "partial-key-not-read"]
    assert warning.message.startswith("The config carries partial_rotary_factor = 0.5, but")
    for name in ("microsoft__phi-2", "MiniMaxAI__MiniMax-M2.5"):
        assert "partial-key-not-read" not in codes(check_config(published(name))), name


@pytest.mark.parametrize("name", ["openai__gpt-oss-20b", "deepseek-ai__DeepSeek-R1"])
def test_static_yarn_fires(name):
    assert "static-yarn" in codes(check_config(published(name)))


@pytest.mark.parametrize("name", ["microsoft__Phi-3.5-mini-instruct", "meta-llama__Llama-3.2-3B-Instruct"])
def test_static_yarn_is_silent_without_yarn(name):
    assert "static-yarn" not in codes(check_config(published(name)))


def test_context_beyond_scaling():
    """Qwen3-32B's file with the YaRN block Qwen's documentation gives for 131072 positions (factor 4 over 32768):
    silent at a declared 131072, firing at 262144; Llama 3.1's llama3 factor (8 over 8192, 131072 declared) is not
    the extended length over the trained one and stays silent."""
    data = published_dict("Qwen__Qwen3-32B")
    data["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    data["max_position_embeddings"] = 131072
    assert "context-beyond-scaling" not in codes(check_config(data))
    data["max_position_embeddings"] = 262144
    (warning,) = [w for w in check_config(data).warnings if w.code == "context-beyond-scaling"]
    assert warning.message.startswith("max_position_embeddings 262144 > factor 4 x original_max_position_embeddings")
    gpt_oss = published("openai__gpt-oss-20b")  # 32 x 4096 = 131072, as declared
    assert "context-beyond-scaling" not in codes(check_config(gpt_oss))
    assert "context-beyond-scaling" in codes(check_config(gpt_oss, context=262144))
    assert "context-beyond-scaling" not in codes(check_config(published("deepseek-ai__DeepSeek-R1-Distill-Llama-8B")))


def test_context_beyond_declared():
    llama2 = published("meta-llama__Llama-2-7b-hf")  # max_position_embeddings 4096
    assert "context-beyond-declared" in codes(check_config(llama2, context=8192))
    assert "context-beyond-declared" not in codes(check_config(llama2, context=4096))


def test_context_condition_fails_for_llama_2_and_holds_for_llama_3_2():
    """Chapter 12: base 10000 fails Xu et al.'s condition at 4096 positions for a head of 128, and the first
    failing distance is the first m where the direct sum of cosines of the float64 angles is negative."""
    report = check_config(published("meta-llama__Llama-2-7b-hf"), context=4096)
    (kind,) = report.kinds
    assert kind.context.holds is False
    direct = np.cos(np.outer(np.arange(4096.0), kind.kind.inverse_frequencies())).sum(axis=1)
    assert kind.context.first_failure == int(np.flatnonzero(direct < 0)[0])
    assert "context-condition" in codes(report)
    holds = check_config(published("meta-llama__Llama-3.2-3B-Instruct"), context=131072)
    assert [kind.context.holds for kind in holds.kinds] == [True]
    assert "context-condition" not in codes(holds)


def test_a_nope_kind_and_a_layer_without_attention_get_no_condition():
    report = check_config(published("HuggingFaceTB__SmolLM3-3B"), context=4096)
    nope = [kind for kind in report.kinds if not kind.kind.rotates]
    assert nope and all(kind.context is not None and kind.context.holds is None for kind in nope)
    lfm = check_config(published("LiquidAI__LFM2-1.2B"), context=4096)  # convolution layers beside attention
    assert any(not kind.attention and kind.context is None for kind in lfm.kinds)


def test_a_config_with_none_of_the_pitfalls_has_no_warning():
    report = check_config(published("meta-llama__Llama-3.2-3B-Instruct"), context=8192)
    assert report.warnings == ()
    assert copy.deepcopy(report.to_dict())["warnings"] == []


# --- The documentation shows what the code does -----------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent


def test_the_api_page_shows_what_posenc_check_prints(monkeypatch):
    """book/api/check.rst quotes the report of gpt-oss-20b's config.json: it must be today's."""
    monkeypatch.chdir(ROOT)
    page = (ROOT / "book" / "api" / "check.rst").read_text()
    shown = "\n".join(
        ("   " + line) if line else ""
        for line in check_config("tests/data/published_configs/openai__gpt-oss-20b.json").render().split("\n")
    )
    assert shown in page


def test_the_readme_example_of_from_config_and_check_config_runs(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    (block,) = [block for block in blocks if "check_config" in block]
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert codes(namespace["report"]) == ["truncate", "static-yarn", "context-condition"]
    assert "['truncate', 'static-yarn', 'context-condition']" in capsys.readouterr()[0]
