"""The rotary conformance suite: assert_rotary_conforms, RotaryCase, rotary_cases, the pytest plugin and the strategies.

posenc's own operators (posenc.nn's modules, built from a case's layer kind) pass, in every layout of x and dtype; a
transformers-style operator passes in float16 and bfloat16; each planted bug, written here in a few lines, fails and
the message names it. The plugin's five-line test file passes for posenc and fails for a planted bug, in a pytest
session of its own (pytester, in this process).
"""

import dataclasses
import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import Phase, find, given, settings

import posenc
import posenc.testing
from posenc.nn import rotary_embedding
from posenc.testing import RotaryCase, assert_rotary_conforms, rotary_cases, rotary_positions, strategies
from posenc.testing._cases import CORPUS, PUBLISHED
from posenc_book.zoo import PUBLISHED_CONFIGS

pytest_plugins = ["pytester"]

CASES = {case.id: case for case in rotary_cases()}
"""The catalogue in float32, by id."""

CORPUS_DIR = Path(__file__).resolve().parent / "data" / "published_configs"
"""The repository's corpus of published config.json files (MANIFEST.json names each source)."""

SEQ_DIM = {"bhsd": -2, "bshd": 1, "shd": -3, "sd": -2}
"""Where posenc.nn.RotaryEmbedding finds the sequence in each layout of x."""


def _case(name: str, beyond: bool = True) -> RotaryCase:
    side = "beyond" if beyond else "within"
    return next(case for key, case in CASES.items() if key.startswith(name + ":") and f":{side}:" in key)


def _posenc(case: RotaryCase, qkv_format: str = "bhsd"):
    return rotary_embedding(case.rotary, seq_dim=SEQ_DIM[qkv_format])


# --- The catalogue -----------------------------------------------------------------------------------------------


def test_the_published_configs_are_the_books():
    """posenc/testing/_cases.py copies the book's published configs (the wheel cannot import the book): no drift."""
    assert [model_id for model_id, *_ in PUBLISHED] == [m for m in PUBLISHED_CONFIGS if not m.startswith("Qwen/")]
    for model_id, source, values in PUBLISHED:
        book = PUBLISHED_CONFIGS[model_id]
        assert values == book.as_dict(with_class_defaults=True), model_id
        assert source.startswith(book.source), model_id


def test_the_catalogue_spans_rope_types_layouts_and_widths():
    """What rotary_cases' docstring promises, from the catalogue itself."""
    cases = list(CASES.values())
    assert len({case.id for case in cases}) == len(cases)
    within = [case for case in cases if not case.beyond]
    beyond = [case for case in cases if case.beyond]
    assert len(within) == len(beyond) and all(max(c.positions) < c.trained_length for c in within)
    assert all(max(c.positions) >= c.trained_length for c in beyond)
    assert {c.scaling.rope_type for c in cases} == {"default", "linear", "llama3", "yarn", "proportional", "longrope"}
    assert {c.layout for c in cases} == {"interleaved", "halves"}
    assert any(c.rotary_dim < c.head_dim for c in cases), "partial rotary"
    assert any(c.rotary.rotary_offset > 0 for c in cases), "latent attention's last features"
    assert any(c.scaling.rope_type == "yarn" and not c.scaling.truncate for c in cases), "GPT-OSS's truncate: false"
    assert min(c.base for c in cases) == 1000.0 and max(c.base for c in cases) == 1e9
    assert min(c.head_dim for c in cases) == 32 and max(c.head_dim for c in cases) == 512
    published = {model_id for model_id, *_ in PUBLISHED} | {checkpoint for checkpoint, *_ in CORPUS}
    assert len(published) == 17 and {c.name for c in cases} >= published
    llama = _case("meta-llama/Llama-3.1-8B-Instruct")
    assert (llama.trained_length, max(llama.positions)) == (8192, 131071)


def test_the_stored_configs_are_the_corpus_files():
    """posenc/testing/configs holds copies of tests/data/published_configs files, byte for byte, with their sources."""
    manifest = {entry["file"]: entry for entry in json.loads((CORPUS_DIR / "MANIFEST.json").read_text())["entries"]}
    stored = Path(posenc.testing.__file__).parent / "configs"
    assert sorted(path.name for path in stored.glob("*")) == sorted(file for _, file, *_ in CORPUS)
    for checkpoint, file, repository, path, commit in CORPUS:
        entry = manifest[file]
        assert hashlib.sha256((stored / file).read_bytes()).hexdigest() == entry["sha256"], file
        source = entry["source"]
        assert (checkpoint, repository, path, commit) == (entry["checkpoint"], source["repo"], source["path"],
                                                          source["commit"])  # fmt: skip


def _operator(kind):
    """What an operator must do for a layer kind (rotary_cases' identity of a case), whatever the layer's name."""
    width = kind.head_dim - kind.rotary_offset
    return dataclasses.replace(
        kind, layer_type="", head_dim=width, rotary_offset=0, softmax_scale=1.0, query_scaling=None
    )


def test_every_rotation_of_the_corpus_is_in_the_catalogue():
    """Each one-axis rotation of a corpus config posenc reads is a case: the corpus cannot outgrow the catalogue."""
    catalogue = {_operator(case.rotary) for case in CASES.values()}
    read = 0
    for entry in json.loads((CORPUS_DIR / "MANIFEST.json").read_text())["entries"]:
        try:
            plan = posenc.RotaryPlan.from_config(json.loads((CORPUS_DIR / entry["file"]).read_text()))
        except ValueError:  # a family posenc does not read (yet): the corpus's own tests list them
            continue
        read += 1
        for kind in plan.kinds:
            if kind.rotates and kind.n_axes == 1 and not kind.feature_order:
                assert _operator(kind) in catalogue, (entry["checkpoint"], kind)
    assert read >= 55


def _sample() -> list[RotaryCase]:
    """Every published config's cases reaching beyond the trained length, and the first such case of the class defaults
    of each other rope type, layout and partial width. (The within cases' positions are among the beyond cases', and
    no rope type of the catalogue takes other frequencies for a longer call: the beyond cases try every position.)"""
    chosen, seen = [], set()
    for case in CASES.values():
        key = (case.scaling.rope_type, case.layout, case.rotary_dim < case.head_dim)
        if case.beyond and (not case.families or key not in seen):
            chosen.append(case)
            seen.add(key)
    return chosen


@pytest.mark.parametrize("case", _sample(), ids=lambda case: case.id)
def test_posenc_nn_passes_a_sample_of_the_catalogue(case):
    case.check(_posenc(case))


@pytest.mark.parametrize(
    "qkv_format, dtype", [(f, "float32") for f in SEQ_DIM] + [("bhsd", d) for d in ("float64", "float16", "bfloat16")]
)
def test_posenc_nn_passes_in_every_layout_of_x_and_dtype(qkv_format, dtype):
    case = dataclasses.replace(_case("meta-llama/Llama-3.1-8B-Instruct"), dtype=dtype)
    case.check(_posenc(case, qkv_format), qkv_format=qkv_format)


def _transformers_style(case: RotaryCase):
    """transformers' rotation in a few lines: float32 angles, cos and sin cast to x's dtype, rotate_half."""
    inv_freq = torch.tensor(case.rotary.inverse_frequencies(), dtype=torch.float32)

    def rotate(x, positions):
        freqs = positions.float()[:, None] * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = (emb.cos() * case.attention_factor).to(x.dtype)
        sin = (emb.sin() * case.attention_factor).to(x.dtype)
        half = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    return rotate


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["meta-llama/Llama-3.1-8B-Instruct", "openai/gpt-oss-20b"])
def test_a_transformers_style_operator_passes_in_reduced_precision(name, dtype):
    """The tolerance admits rounding x, cos and sin to the dtype, as transformers does, at every position."""
    case = dataclasses.replace(_case(name), dtype=dtype)
    case.check(_transformers_style(case), array="torch")


# --- Planted bugs: each fails, and the message says which -------------------------------------------------------


def _planted_layout(case):
    return rotary_embedding(dataclasses.replace(case.rotary, layout="interleaved"))


def _planted_offset(case):
    rope = _posenc(case)
    return lambda x, positions: rope(x, positions=positions + 1)


def _planted_scaling(case):
    return rotary_embedding(dataclasses.replace(case.rotary, scaling=posenc.RopeScaling(rope_theta=case.base)))


def _planted_truncate(case):
    return rotary_embedding(
        dataclasses.replace(case.rotary, scaling=dataclasses.replace(case.scaling, truncate=not case.scaling.truncate))
    )


def _planted_factor(case):
    rope = _posenc(case)
    return lambda x, positions: rope(x, positions=positions) / case.attention_factor


def _planted_partial(case):
    return rotary_embedding(dataclasses.replace(case.rotary, rotary_dim=case.head_dim))


def _planted_bfloat16_positions(case):
    rope = _posenc(case)
    return lambda x, positions: rope(x, positions=positions.to(torch.bfloat16).double())


PLANTED = {
    "pairs interleaved": ("meta-llama/Llama-3.1-8B-Instruct", _planted_layout, "the pairs taken as interleaved"),
    "positions off by one": ("EleutherAI/pythia-1.4b", _planted_offset, "by its position \\+ 1"),
    "scaling dropped": ("meta-llama/Llama-3.1-8B-Instruct", _planted_scaling, "'llama3' scaling: the scaling not"),
    "truncate flipped": ("openai/gpt-oss-20b", _planted_truncate, "truncate=True where the config says truncate=False"),
    "attention factor dropped": ("openai/gpt-oss-20b", _planted_factor, "not multiplied by the attention factor"),
    "partial factor dropped": ("EleutherAI/pythia-1.4b", _planted_partial, "the partial rotary factor dropped"),
    "bfloat16 positions": ("google/gemma-3-4b-it", _planted_bfloat16_positions, "Every position below 511 is right"),
}  # fmt: skip
"""(case name, the operator with the bug, what the message says): each bug in a few lines, reported in public
trackers as chapter 10 cites them."""


@pytest.mark.parametrize("name", PLANTED)
def test_each_planted_bug_fails_and_is_named(name):
    case_name, plant, said = PLANTED[name]
    case = _case(case_name)
    case.check(_posenc(case))  # the case itself is fine
    with pytest.raises(AssertionError, match=said):
        case.check(plant(case), array="torch")


@pytest.mark.parametrize("name", ["microsoft/Phi-3-mini-128k-instruct", "microsoft/Phi-3.5-mini-instruct"])
def test_longrope_long_factors_at_every_length_fail_within_the_trained_length(name):
    """mlx-lm's SuScaledRoPE difference (chapter 14), on the published Phi-3 configs: right beyond, wrong within."""
    within, beyond = _case(name, beyond=False), _case(name)
    scaling = within.scaling
    always_long = rotary_embedding(
        dataclasses.replace(within.rotary, scaling=dataclasses.replace(scaling, short_factor=scaling.long_factor))
    )
    beyond.check(always_long)
    with pytest.raises(AssertionError, match="long_factor within the trained length"):
        within.check(always_long)


def test_a_rotation_along_the_wrong_axis_fails():
    """posenc.nn's default module (sequence at axis -2) given a (batch, seq, heads, dim) tensor."""
    case = _case("EleutherAI/pythia-1.4b")
    with pytest.raises(AssertionError, match=r"raised ValueError: positions must have one entry per row"):
        case.check(_posenc(case, "bhsd"), qkv_format="bshd")
    with pytest.raises(AssertionError, match="differs from posenc's float64 rotation"):
        case.check(_posenc(case, "bhsd"), qkv_format="bshd", heads=len(case.positions))  # as many heads as rows


LONGROPE = {
    "model_type": "phi3", "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 1,
    "max_position_embeddings": 16384, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
    "rope_scaling": {"type": "longrope", "short_factor": [1.0 + 0.05 * i for i in range(32)],
                     "long_factor": [1.0 + 0.5 * i for i in range(32)]},
}  # fmt: skip
"""A Phi-3-style longrope config (factor lists made up here): its frequencies depend on the call's length."""


def test_the_default_calls_are_within_and_beyond_apart():
    """An operator that takes longrope's long factors at every length (mlx-lm's SuScaledRoPE) passes a call that reaches
    beyond the trained length, and fails the call within it, which the check makes first."""
    kind = posenc.RotaryPlan.from_config(LONGROPE).kinds[0]
    long_everywhere = dataclasses.replace(
        kind, scaling=dataclasses.replace(kind.scaling, short_factor=kind.scaling.long_factor)
    )
    rotate = lambda x, positions: long_everywhere.rotate(x, positions)  # noqa: E731
    assert_rotary_conforms(lambda x, positions: kind.rotate(x, positions), LONGROPE)
    assert_rotary_conforms(rotate, LONGROPE, positions=rotary_positions(4096, 16384, beyond=True))
    with pytest.raises(AssertionError, match="within the trained length 4096.*long_factor within the trained length"):
        assert_rotary_conforms(rotate, LONGROPE)


# --- The pytest plugin ------------------------------------------------------------------------------------------

FIVE_LINES = """\
import posenc.nn


def test_posenc_rotary(rotary_case):
    rotary_case.check(posenc.nn.rotary_embedding(rotary_case.rotary))
"""
"""The five-line test file of the API page and the README: posenc's own operator on every case."""

PLANTED_FILE = """\
import posenc.nn


def test_posenc_rotary(rotary_case):
    rope = posenc.nn.rotary_embedding(rotary_case.rotary)
    rotary_case.check(lambda x, positions: rope(x, positions=positions + 1), array="torch")
"""
"""The same with a planted bug: every position one too far."""

SELECTED = ("-k", "pythia or gpt-oss", "-p", "no:cacheprovider")
"""Two configs of the catalogue (four cases), to keep the in-process sessions short."""


def test_the_five_line_file_passes_for_posenc_and_fails_for_a_planted_bug(pytester):
    pytester.makepyfile(test_rope=FIVE_LINES)
    passed = pytester.runpytest_inprocess(*SELECTED)
    passed.assert_outcomes(passed=4)
    pytester.makepyfile(test_rope=PLANTED_FILE)
    failed = pytester.runpytest_inprocess(*SELECTED)
    failed.assert_outcomes(failed=4)
    failed.stdout.fnmatch_lines(["*every row rotated by its position + 1*"])


def test_the_documented_five_line_file_is_the_one_tested():
    """README.md, PACKAGE.md (what installers read) and the API page show FIVE_LINES as it is."""
    root = Path(__file__).resolve().parent.parent
    for page in ("README.md", "PACKAGE.md"):
        assert f"```python\n{FIVE_LINES}```" in (root / page).read_text(), page
    indented = "".join(f"   {line}" if line.strip() else line for line in FIVE_LINES.splitlines(keepends=True))
    assert f".. code-block:: python\n\n{indented}" in (root / "book/api/testing.rst").read_text()


def test_the_plugin_runs_the_cases_in_the_dtypes_asked_for(pytester):
    pytester.makepyfile(test_rope=FIVE_LINES)
    result = pytester.runpytest_inprocess(*SELECTED, "--rotary-dtype", "bfloat16", "--rotary-dtype", "float16", "-v")
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(["*openai/gpt-oss-20b:sliding_attention:beyond:bfloat16*PASSED*"])


def test_the_plugin_adds_no_test_to_a_session_that_does_not_ask(pytester):
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_the_plugin_imports_nothing_unless_asked_and_the_strategies_name_their_extra():
    """In a fresh interpreter without Hypothesis: the plugin module and its hook for a test that takes no rotary_case
    import no posenc; posenc.testing imports; posenc.testing.strategies raises an ImportError naming the extra."""
    code = textwrap.dedent(
        """
        import sys, types
        sys.modules["hypothesis"] = None  # as if Hypothesis were not installed
        import _posenc_pytestplugin
        _posenc_pytestplugin.pytest_generate_tests(types.SimpleNamespace(fixturenames=["tmp_path"]))
        print(sorted(name for name in sys.modules if name.startswith("posenc")))
        import posenc.testing
        try:
            import posenc.testing.strategies
        except ImportError as error:
            print(error)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    imported, message = result.stdout.splitlines()
    assert imported == "[]"
    assert 'pip install "posenc[hypothesis]"' in message


# --- The strategies -----------------------------------------------------------------------------------------------


@settings(max_examples=15)
@given(case=strategies.rotary_cases(dtypes=("float32", "bfloat16")), qkv_format=strategies.qkv_formats())
def test_posenc_nn_passes_drawn_cases(case, qkv_format):
    assert (max(case.positions) >= case.trained_length) == case.beyond
    case.check(_posenc(case, qkv_format), qkv_format=qkv_format)


def test_the_strategies_find_a_planted_bug():
    """Drawn cases catch positions counted from 1 (no shrinking: finding it is the point)."""

    def fails(case):
        try:
            case.check(_planted_offset(case), array="torch")
        except AssertionError:
            return True
        return False

    found = find(
        strategies.rotary_cases(), fails, settings=settings(database=None, max_examples=10, phases=[Phase.generate])
    )
    assert isinstance(found, RotaryCase)


@given(data=strategies.positions(4096, 131072))
def test_drawn_positions_lie_within_the_reach(data):
    assert 1 <= len(data) <= 32 and all(0 <= p <= 131071 for p in data)


def test_rotary_positions_are_the_documented_ones():
    assert rotary_positions(16) == (0, 1, 2, 3, 4, 5, 6, 7, 15)
    assert rotary_positions(16, 100, beyond=True) == (0, 1, 2, 3, 4, 5, 6, 7, 15, 16, 17, 31, 32, 99)
    assert max(rotary_positions(2**24, beyond=True)) == 2**24
    assert np.all(np.diff(rotary_positions(131072, 1 << 20, beyond=True)) > 0)
