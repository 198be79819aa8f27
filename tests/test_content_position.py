"""posenc_book.content_position (chapter 16's models and tasks) and posenc_book.eviction (its drift measurement).

The models are chapter 9's where they should be (same weights, same logits, same training), causal for every
scheme, and the tasks' targets are what their docstrings say. The file of the nine-seed sweep that the chapter
reads is refused when the code it ran has changed since, or when a claim in it does not hold.
"""

import math

import numpy as np
import pytest
import torch

from posenc_book import content_position as cp
from posenc_book.eviction import pair_angle_errors, shift_drift
from posenc_book.extrapolation import TinyCausalLM, train_and_evaluate
from posenc_book.robustness import MIN_SEEDS

CHAPTER9 = ("rotary", "alibi", "none")


@pytest.mark.parametrize("scheme", CHAPTER9)
def test_a_chapter_9_scheme_builds_chapter_9s_model(scheme):
    torch.manual_seed(3)
    theirs = TinyCausalLM(scheme)
    torch.manual_seed(3)
    ours = cp.ContentLM(scheme)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for name, value in theirs.state_dict().items():
        assert torch.equal(ours.state_dict()[name], value), name
    tokens = torch.randint(0, 16, (2, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(ours(tokens), theirs(tokens), rtol=0, atol=1e-6)


def test_chain_run_trains_chapter_9s_model():
    # the same seed, data stream, steps and evaluation sequences as train_and_evaluate
    theirs = train_and_evaluate("rotary", seed=1, train_len=8, eval_lens=(8, 16), steps=3)
    ours = cp.chain_run("rotary", seed=1, train_len=8, eval_lens=(8, 16), steps=3)
    for length in (8, 16):
        assert math.isclose(ours.losses[length], theirs.losses[length], rel_tol=1e-6), length
    assert math.isclose(ours.train_loss, theirs.train_loss, rel_tol=1e-6)


@pytest.mark.parametrize(
    ("scheme", "sink"), [(s, False) for s in cp.SCHEMES] + [(s, True) for s in cp.SCHEMES if s != "stick_breaking"]
)
def test_every_scheme_is_causal_and_its_weights_are_distributions(scheme, sink):
    torch.manual_seed(0)
    model = cp.ContentLM(scheme, sink=sink, n_positions=9).eval()
    tokens = torch.randint(0, 16, (2, 12), generator=torch.Generator().manual_seed(1))
    changed = tokens.clone()
    changed[:, 7:] = (changed[:, 7:] + 5) % 16
    with torch.no_grad():
        assert torch.allclose(model(tokens)[:, :7], model(changed)[:, :7], rtol=0, atol=1e-6)
    for weights in model.attention_weights(tokens):
        assert weights.shape == (2, 4, 12, 12)
        assert torch.all(weights.triu(1) == 0) and torch.all(weights >= 0)
        sums = weights.sum(-1)
        if sink:
            assert torch.all(sums < 1)
        else:
            assert torch.allclose(sums, torch.ones_like(sums), atol=1e-5)


def test_attention_weights_are_the_ones_the_forward_pass_uses():
    torch.manual_seed(0)
    model = cp.ContentLM("fox", sink=True, n_layers=1).eval()
    tokens = torch.randint(0, 16, (1, 10), generator=torch.Generator().manual_seed(2))
    (weights,) = model.attention_weights(tokens)
    block = model.blocks[0]
    h = block.norm1(model.embed(tokens))
    _, _, v = block.qkv(h).view(1, 10, 3, 4, 8).permute(2, 0, 3, 1, 4)
    with torch.no_grad():
        assert torch.allclose(block.attend(h, None, None, None), weights @ v, atol=1e-6)


def test_bad_models_are_refused():
    with pytest.raises(ValueError, match="scheme"):
        cp.ContentLM("sinusoidal")
    with pytest.raises(ValueError, match="sink"):
        cp.ContentLM("stick_breaking", sink=True)
    with pytest.raises(TypeError, match="sink"):
        cp.ContentLM("fox", sink=1)
    with pytest.raises(ValueError, match="n_heads"):
        cp.ContentLM("fox", d_model=30)


def test_drope_keeps_every_weight_and_drops_only_the_rotation():
    trained = cp.chain_run("rotary", seed=0, train_len=8, eval_lens=(8,), steps=2)
    before = {name: value.clone() for name, value in trained.model.state_dict().items()}
    result = cp.drope_run(trained.model, seed=0, steps=1, eval_lens=(8, 16), train_len=8)
    for name, value in trained.model.state_dict().items():
        assert torch.equal(value, before[name]), name  # the model given is left as it was
    none = cp.ContentLM("none")
    none.load_state_dict(before)
    assert result.dropped == cp._chain_losses(none.eval(), (8, 16))  # the same weights, no rotation
    assert result.rotary == cp._chain_losses(trained.model, (8, 16))
    assert result.recalibrated != result.dropped  # one step taken
    with pytest.raises(ValueError, match="rotary"):
        cp.drope_run(none, seed=0)


def test_recall_targets_are_the_second_to_last_mark():
    tokens, targets = cp.recall_sequences(50, 30, 0.3, seed=4)
    for row, target in zip(tokens, targets):
        for t in range(30):
            marks = [int(s) for s in row[: t + 1] if s >= cp.N_FILLERS]
            assert target[t] == (marks[-2] if len(marks) >= 2 else -100)
    assert set(np.unique(tokens)) <= set(range(cp.N_FILLERS + cp.N_MARKED))


def test_parity_targets_count_the_ones():
    tokens, targets = cp.parity_sequences(20, 17, seed=5)
    assert np.all(tokens[:, 0] == cp.PARITY_START)
    for row, target in zip(tokens, targets):
        assert target[0] == -100
        assert [int(x) for x in target[1:]] == [int(sum(row[1 : t + 1]) % 2) for t in range(1, 18)]


def test_first_token_share_is_one_without_other_keys():
    # a model whose every query attends only to key 0 gets share 1; uniform attention gets the uniform share
    torch.manual_seed(0)
    model = cp.ContentLM("none")
    for block in model.blocks:
        with torch.no_grad():
            block.qkv.weight.zero_()
            block.qkv.bias.zero_()
    token, sink, uniform = cp.first_token_share(model, length=32, first=16)
    assert math.isclose(token, uniform, rel_tol=1e-6) and abs(sink) < 1e-6


# --- The sweep file the chapter reads --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sweep_data():
    return cp.read_sweep()


ROOT = cp.Path(__file__).resolve().parents[1]


def assert_sweep_is_current(data, root=ROOT):
    """Refuse a sweep file written by other code than the sources' as they are under ``root``, or by other pins."""
    assert data["sources_sha256"] == cp._sources_sha256(root), (
        "book/data/position_from_content.json was written by other code than the sources' (posenc_book."
        "content_position.SOURCES): run `make check-position-from-content` and commit the new file"
    )
    assert data["versions"]["torch"] == torch.__version__
    assert data["seeds"] == list(cp.SWEEP_SEEDS) and len(cp.SWEEP_SEEDS) >= MIN_SEEDS
    assert data["page_seed"] == cp.PAGE_SEED


def test_the_sweep_file_is_of_the_code_as_it_is(sweep_data):
    assert_sweep_is_current(sweep_data)


def test_every_claim_of_the_sweep_holds_and_is_the_code_s(sweep_data):
    rows = sweep_data["claims"]
    assert [(r["quantity"], r["bound"]) for r in rows] == [(b.quantity, b.text()) for b in cp.CLAIMS]
    assert [r["page_bound"] for r in rows] == [b.text() for b in cp.PAGE_CLAIMS]
    failing = [r["quantity"] for r in rows if not (r["seeds_holds"] and r["page_holds"])]
    assert failing == [], f"claims that do not hold in the sweep file: {failing}"
    page = {name: values[sweep_data["seeds"].index(cp.PAGE_SEED)] for name, values in sweep_data["quantities"].items()}
    assert all(row["holds"] for row in cp.check_page(page, sweep_data))


def test_a_stale_sweep_file_is_refused(sweep_data, tmp_path):
    # a copy of the sources that the committed file passes against, then planted: one source given one more
    # statement, a file from other pins, a file of other seeds; a changed docstring or comment is not a change
    for name in cp.SOURCES:
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((ROOT / name).read_bytes())
    assert_sweep_is_current(sweep_data, tmp_path)
    source = tmp_path / cp.SOURCES[0]
    text = source.read_text(encoding="utf-8")
    documented = text.replace('"""', '"""Reworded. ', 1) + "\n# a comment\n"
    source.write_text(documented, encoding="utf-8")
    assert_sweep_is_current(sweep_data, tmp_path)
    source.write_text(text + "\nPAGE_SEED = PAGE_SEED + 0\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="other code than the sources"):
        assert_sweep_is_current(sweep_data, tmp_path)
    source.write_bytes((ROOT / cp.SOURCES[0]).read_bytes())
    other_torch = dict(sweep_data, versions=dict(sweep_data["versions"], torch="2.0.0"))
    with pytest.raises(AssertionError):
        assert_sweep_is_current(other_torch, tmp_path)
    with pytest.raises(AssertionError):
        assert_sweep_is_current(dict(sweep_data, seeds=sweep_data["seeds"][:-1]), tmp_path)


# --- posenc_book.eviction ---------------------------------------------------------------------------------------


def test_keys_stored_unrotated_do_not_drift_and_rerotated_ones_do():
    one, many = shift_drift(1, torch.float32), shift_drift(300, torch.float32)
    assert one.unrotated == many.unrotated < 1e-7  # one rotation, whatever the number of shifts
    assert many.rerotated > 20 * one.rerotated
    exact = shift_drift(300, torch.float64)
    assert exact.rerotated < 1e-13 and exact.unrotated < 1e-15


def test_in_bfloat16_the_slowest_pairs_do_not_turn():
    n = 100
    result = shift_drift(n, torch.bfloat16)
    theta = 10000.0 ** (-np.arange(0, 128, 2) / 128)
    errors = pair_angle_errors(result)
    slow = theta < 2.0**-10  # a step turns a pair's components by less than a bfloat16 unit rounds away
    assert np.all(errors[slow] > 0.5 * n * theta[slow])  # they lag by more than half their whole turn
    assert np.all(np.abs(errors[theta > 0.1]) < 0.05)  # the fast ones turn
