"""Train short, test long (posenc_book.extrapolation and chapter 9).

Three groups: the Markov source (its floor is the loss of the chain itself, rows are distributions, the
sampler draws from the chain, the order-blind entropy matches enumeration), the model and training loop
(causal, deterministic, leaves global state alone, Position Interpolation equals transformers-style linear
scaling, the window and shuffle measurements do what they say), and the chapter's claims re-run on seeds
and chains the chapter does not use. The last group is the expensive one (about a minute of CPU).
"""

import functools
import itertools
import math
from collections import defaultdict

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.nn import RotaryEmbedding
from posenc_book.extrapolation import (
    SCHEMES,
    TinyCausalLM,
    _copy_logits_and_targets,
    _copy_sequences,
    _evaluate,
    _scored_loss,
    chain_symbol_losses,
    copy_task,
    evaluate,
    evaluation_sequences,
    markov_chain,
    order_blind_entropy,
    position_interpolation,
    sample_sequences,
    shuffled_context_loss,
    symbol_losses,
    train_and_evaluate,
    train_in_processes,
    train_steps,
)
from posenc_book.robustness import Bound, Perturbation, active_perturbation, assert_claim, perturbed

TINY = dict(train_len=8, eval_lens=(8, 16), steps=3, batch_size=4, d_model=8, n_heads=2, n_layers=1, eval_tokens=64)

# --- The source -------------------------------------------------------------------------------------------


@settings(max_examples=20)
@given(
    seed=st.integers(0, 2**32),
    n_symbols=st.integers(2, 12),
    concentration=st.sampled_from([0.01, 0.05, 0.3, 1.0, 10.0, 100.0]),
)
def test_rows_are_distributions_and_pairs_are_stationary(seed, n_symbols, concentration):
    chain = markov_chain(seed, n_symbols=n_symbols, concentration=concentration)
    assert chain.transitions.shape == (n_symbols,) * 3
    assert np.all(chain.transitions > 0)
    np.testing.assert_allclose(chain.transitions.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    assert np.all(chain.pair_distribution >= 0)
    assert abs(chain.pair_distribution.sum() - 1.0) < 1e-12
    # stationary: the distribution of (x[t], x[t+1]) equals that of (x[t-1], x[t])
    following = np.einsum("ab,abc->bc", chain.pair_distribution, chain.transitions)
    np.testing.assert_allclose(following, chain.pair_distribution, rtol=0, atol=1e-12)
    # conditioning never increases entropy, and nothing beats log n
    assert chain.entropy_rate <= chain.order1_entropy + 1e-12
    assert chain.order1_entropy <= chain.marginal_entropy + 1e-12 <= math.log(n_symbols) + 2e-12


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_entropy_floor_is_the_loss_of_the_chain_itself(seed):
    """The computed entropy rate equals the mean -log P of sampled symbols (those with two predecessors)."""
    chain = markov_chain(seed)
    x = sample_sequences(chain, 4096, 64, seed=seed + 100)
    nll = chain_symbol_losses(chain, x)
    assert nll.shape == (4096, 62)
    # 254 000 correlated symbols: a standard error near 0.003 nats
    assert abs(nll.mean() - chain.entropy_rate) < 0.015


def test_order1_entropy_matches_counts():
    """H(next | current) from the stationary pairs equals the plug-in estimate from 520 000 sampled symbols."""
    chain = markov_chain(3)
    x = sample_sequences(chain, 4096, 128, seed=5)
    counts = np.zeros((16, 16))
    np.add.at(counts, (x[:, :-1].ravel(), x[:, 1:].ravel()), 1)
    joint = counts / counts.sum()
    conditional = joint / joint.sum(axis=1, keepdims=True)
    plug_in = -np.sum(joint[joint > 0] * np.log(conditional[joint > 0]))
    assert abs(plug_in - chain.order1_entropy) < 0.02


def test_sequences_start_stationary_and_follow_the_table():
    chain = markov_chain(2)
    x = sample_sequences(chain, 4096, 3, seed=9)
    first = np.zeros((16, 16))
    np.add.at(first, (x[:, 0], x[:, 1]), 1)
    # total variation between the first pairs and pi: about sqrt(256 / 4096) / 2 by chance
    assert 0.5 * np.abs(first / first.sum() - chain.pair_distribution).sum() < 0.2
    # the third symbol follows P(. | a, b): the mean log-likelihood is at the floor, not near log 16
    nll = -np.log(chain.transitions[x[:, 0], x[:, 1], x[:, 2]])
    assert abs(nll.mean() - chain.entropy_rate) < 0.06


def _order_blind_by_enumeration(chain, t):
    """H(X[t+1] | X[t], multiset of X[0..t-1]) by listing every sequence X[0..t+1] and its probability."""
    n = chain.transitions.shape[0]
    groups = defaultdict(lambda: np.zeros(n))
    for x in itertools.product(range(n), repeat=t + 2):
        p = chain.pair_distribution[x[0], x[1]]
        for i in range(2, t + 2):
            p *= chain.transitions[x[i - 2], x[i - 1], x[i]]
        groups[x[t], tuple(sorted(x[:t]))][x[t + 1]] += p
    h = 0.0
    for next_symbol in groups.values():
        conditional = next_symbol / next_symbol.sum()
        h -= np.sum(next_symbol * np.log(conditional))
    return h


@pytest.mark.parametrize(("seed", "n_symbols", "concentration"), [(0, 3, 0.05), (5, 3, 1.0), (2, 4, 0.3)])
def test_order_blind_entropy_matches_enumeration(seed, n_symbols, concentration):
    chain = markov_chain(seed, n_symbols=n_symbols, concentration=concentration)
    positions = 4 if n_symbols == 3 else 3
    h = order_blind_entropy(chain, positions)
    expected = [_order_blind_by_enumeration(chain, t) for t in range(1, positions + 1)]
    np.testing.assert_allclose(h, expected, rtol=1e-10, atol=1e-12)
    # one earlier symbol is no multiset at all: the floor; more can only be less informative than order
    assert h[0] == pytest.approx(chain.entropy_rate, rel=1e-10)
    assert np.all(h >= chain.entropy_rate - 1e-12) and np.all(h <= chain.order1_entropy + 1e-12)


def test_order_blind_entropy_is_not_the_order1_entropy_on_a_chain_that_needs_order():
    """On a chain where x[t+1] = x[t-1], the multiset of two earlier symbols {a, b} with x[t] = b gives a."""
    n = 3
    transitions = np.full((n, n, n), 1e-9)
    transitions[np.arange(n), :, np.arange(n)] = 1.0
    transitions /= transitions.sum(axis=-1, keepdims=True)
    chain = markov_chain(0, n_symbols=n)._replace(
        transitions=transitions, pair_distribution=np.full((n, n), 1.0 / n**2)
    )
    h = order_blind_entropy(chain, 2)
    # x = (a, b, a, b): at t = 2 the current symbol is a and the multiset {a, b} names b, the next symbol
    assert h[1] < 1e-6
    assert _order_blind_by_enumeration(chain, 2) == pytest.approx(h[1], abs=1e-12)


@pytest.mark.argument_check
def test_order_blind_entropy_refuses_too_many_multisets():
    chain = markov_chain(0)
    assert order_blind_entropy(chain, 2).shape == (2,)
    with pytest.raises(ValueError, match="MAX_BAG_STATES"):
        order_blind_entropy(chain, 7)


class _ChainOracle(torch.nn.Module):
    """Stands in for a model: at position t >= 1 it predicts with the chain's own P(. | x[t-1], x[t])."""

    n_heads = 1

    def __init__(self, chain):
        super().__init__()
        self.log_p = torch.from_numpy(np.log(chain.transitions))
        self.vocab_size = self.log_p.shape[-1]

    def _logits(self, tokens, positions=None, window=None):
        logits = torch.zeros(*tokens.shape, self.log_p.shape[-1], dtype=torch.float64)
        logits[:, 1:] = self.log_p[tokens[:, :-1], tokens[:, 1:]]
        return logits  # position 0 (one symbol seen) predicts uniformly


def test_the_loss_scores_exactly_the_symbols_with_two_predecessors():
    """_scored_loss / _evaluate average -log P over x[2:], which the chain oracle predicts exactly."""
    chain = markov_chain(4)
    x = sample_sequences(chain, 64, 17, seed=0)
    expected = -np.log(chain.transitions[x[:, :-3], x[:, 1:-2], x[:, 2:-1]]).mean()  # x[2 .. 15] of 16 read
    oracle = _ChainOracle(chain)
    assert float(_scored_loss(oracle, torch.from_numpy(x[:, :-1]))) == pytest.approx(expected, rel=1e-12)
    assert _evaluate(oracle, x[:, :-1]) == pytest.approx(expected, rel=1e-12)


def test_symbol_losses_put_each_prediction_in_the_column_of_its_position():
    """Column t - 1 holds the prediction of symbol t + 1: for the chain oracle, the chain's own losses."""
    chain = markov_chain(4)
    x = sample_sequences(chain, 32, 21, seed=0)
    expected = chain_symbol_losses(chain, x)
    assert expected.shape == (32, 19)
    np.testing.assert_allclose(symbol_losses(_ChainOracle(chain), x), expected, rtol=1e-12, atol=0)
    # chain_symbol_losses itself, entry by entry, against the table
    k, t = 5, 7
    assert expected[k, t - 1] == -math.log(chain.transitions[x[k, t - 1], x[k, t], x[k, t + 1]])


@pytest.mark.parametrize("scheme", ["sinusoidal", "rotary", "t5", "alibi", "none"])
def test_one_long_read_gives_the_loss_at_every_shorter_length_on_the_same_symbols(scheme):
    """A causal model's losses at positions 1 .. 15 of a 40-symbol read are those of a 16-symbol read."""
    torch.manual_seed(0)
    model = TinyCausalLM(scheme, max_len=40).eval()
    x = sample_sequences(markov_chain(0), 8, 41, seed=3)
    long = symbol_losses(model, x)
    assert long.shape == (8, 39)
    np.testing.assert_allclose(long[:, :15], symbol_losses(model, x[:, :17]), rtol=0, atol=1e-5)
    # the mean of all columns is the loss _evaluate reports, with and without a window
    assert long.mean() == pytest.approx(_evaluate(model, x), abs=1e-6)
    assert symbol_losses(model, x, window=5).mean() == pytest.approx(_evaluate(model, x, window=5), abs=1e-6)


def test_evaluation_sequences_are_the_ones_train_and_evaluate_scores():
    result = train_and_evaluate("alibi", seed=1, **TINY)
    for length in (8, 16):
        x = evaluation_sequences(length, eval_tokens=64)
        assert x.shape == (64 // (length - 1), length + 1)
        assert symbol_losses(result.model, x).mean() == pytest.approx(result.losses[length], abs=1e-6)
    assert not np.array_equal(evaluation_sequences(8)[:, :9], evaluation_sequences(16)[:, :9])


def test_sampling_is_reproducible_and_seeded():
    chain = markov_chain(0)
    a = sample_sequences(chain, 8, 20, seed=1)
    assert np.array_equal(a, sample_sequences(chain, 8, 20, seed=1))
    assert not np.array_equal(a, sample_sequences(chain, 8, 20, seed=2))
    assert a.min() >= 0 and a.max() < 16 and a.dtype == np.int64
    assert not np.array_equal(markov_chain(0).transitions, markov_chain(1).transitions)


# --- The model ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", SCHEMES)
def test_model_is_causal(scheme):
    """Changing the symbol at position 5 leaves the logits at positions 0..4 unchanged, and changes later ones."""
    torch.manual_seed(0)
    model = TinyCausalLM(scheme, max_len=12).eval()
    tokens = torch.randint(0, 16, (2, 12))
    edited = tokens.clone()
    edited[:, 5] = (edited[:, 5] + 1) % 16
    with torch.no_grad():
        before, after = model(tokens), model(edited)
    assert torch.equal(before[:, :5], after[:, :5])
    assert not torch.allclose(before[:, 5:], after[:, 5:])


def test_biases_are_the_references_plus_the_causal_mask():
    """ALiBi is posenc.alibi_bias; T5 reads its table at the decoder's (unidirectional) buckets, 40 positions."""
    torch.manual_seed(0)
    alibi = TinyCausalLM("alibi")._bias(40, torch.float64)
    np.testing.assert_allclose(alibi.numpy(), posenc.alibi_bias(4, 40), rtol=1e-6, atol=0)
    t5 = TinyCausalLM("t5")
    bias = t5._bias(40, torch.float32).detach()
    relative = np.arange(40)[None, :] - np.arange(40)[:, None]
    buckets = posenc.t5_relative_bucket(relative, bidirectional=False, num_buckets=32, max_distance=128)
    table = t5.relative.relative_attention_bias.weight.detach()
    lower = np.tril(np.ones((40, 40), dtype=bool))
    assert torch.equal(bias[:, lower], table[torch.from_numpy(buckets[lower])].T)
    assert torch.all(bias[:, ~lower] == -math.inf)
    for scheme in ("sinusoidal", "learned", "rotary", "none"):
        assert TinyCausalLM(scheme)._bias(40, torch.float32) is None  # the fused causal kernel


def test_interpolated_positions_equal_linear_rope_scaling():
    """Positions m / 4 in the model give the logits of the same weights with {"rope_type": "linear", "factor": 4}."""
    torch.manual_seed(0)
    model = TinyCausalLM("rotary").eval()
    scaled = TinyCausalLM("rotary").eval()
    scaled.load_state_dict(model.state_dict())
    scaled.rotary = RotaryEmbedding(8, scaling={"rope_type": "linear", "factor": 4.0})
    tokens = torch.randint(0, 16, (3, 40))
    with torch.no_grad():
        by_positions = model(tokens, positions=torch.arange(40, dtype=torch.float64) / 4)
        by_scaling = scaled(tokens)
        plain = model(tokens)
    torch.testing.assert_close(by_positions, by_scaling, rtol=0, atol=1e-5)
    assert not torch.allclose(plain, by_scaling, atol=1e-3)


def test_window_masks_keys_at_and_beyond_its_width():
    """With window w, the logits at position i depend on positions i - w + 1 .. i only."""
    torch.manual_seed(0)
    for scheme in ("rotary", "alibi", "t5", "none"):
        model = TinyCausalLM(scheme).eval()
        tokens = torch.randint(0, 16, (2, 20))
        edited = tokens.clone()
        edited[:, 3] = (edited[:, 3] + 1) % 16
        with torch.no_grad():
            before, after = model._logits(tokens, window=5), model._logits(edited, window=5)
            full = model._logits(tokens)
            wide = model._logits(tokens, window=20)
        # one layer sees 4 back, two layers 8: position 3 reaches positions 3 .. 11 only
        assert torch.equal(before[:, 12:], after[:, 12:])
        assert not torch.allclose(before[:, 3:12], after[:, 3:12])
        torch.testing.assert_close(wide, full, rtol=0, atol=1e-5)


def test_evaluate_repeats_train_and_evaluate():
    result = train_and_evaluate("alibi", seed=1, **TINY)
    assert evaluate(result.model, 16, eval_tokens=64) == result.losses[16]
    assert evaluate(result.model, 16, eval_tokens=64, window=16) == pytest.approx(result.losses[16], abs=1e-5)
    # after 3 steps the model barely reads its context, but a window that drops keys changes the number
    assert evaluate(result.model, 16, eval_tokens=64, window=2) != result.losses[16]
    with pytest.raises(ValueError, match="max_len"):
        evaluate(train_and_evaluate("learned", seed=1, **TINY).model, 16)


def test_shuffling_leaves_an_order_blind_model_unchanged_and_hurts_one_that_uses_order():
    """One attention layer without positions sees a multiset: the shuffle cannot change its predictions."""
    torch.manual_seed(0)
    blind = TinyCausalLM("none", n_layers=1)
    result = shuffled_context_loss(blind, 24, n_sequences=256)
    assert result.in_order == pytest.approx(result.shuffled, abs=1e-5)
    # two layers without positions are not order-blind: the causal mask gives each prefix its own output
    deep = shuffled_context_loss(TinyCausalLM("none", n_layers=2), 24, n_sequences=256)
    assert abs(deep.in_order - deep.shuffled) > 1e-4
    # a model that reads the previous symbol loses a lot when that symbol is moved
    torch.manual_seed(0)
    trained = train_and_evaluate("rotary", seed=0, eval_lens=(32,))
    moved = shuffled_context_loss(trained.model, 32, n_sequences=512)
    # 1.64 over; spread 0.008 over four perturbations of the initial weights (posenc_book.robustness)
    assert moved.shuffled > moved.in_order + 0.5


class _CurrentSymbolOracle(torch.nn.Module):
    """Predicts with P(next | current) under the stationary pairs: it sees the current symbol only."""

    def __init__(self, chain):
        super().__init__()
        joint = np.einsum("ab,abc->bc", chain.pair_distribution, chain.transitions)
        self.log_p = torch.from_numpy(np.log(joint / joint.sum(axis=1, keepdims=True)))
        self.vocab_size = self.log_p.shape[0]

    def _logits(self, tokens, positions=None, window=None):
        return self.log_p[tokens]


def test_the_shuffle_reports_the_current_symbol_predictor_on_the_same_symbols():
    """current_symbol_only is exactly the loss of a predictor that reads the current symbol alone."""
    oracle = _CurrentSymbolOracle(markov_chain(0))
    result = shuffled_context_loss(oracle, 12, n_sequences=512)
    assert result.in_order == result.shuffled  # the current symbol stays last
    assert result.current_symbol_only == pytest.approx(result.in_order, rel=1e-12)
    # its expectation is H(next | current): 512 symbols, a standard error near 0.06 nats
    assert abs(result.current_symbol_only - markov_chain(0).order1_entropy) < 0.25


def test_a_shuffled_loss_bounds_the_order_blind_loss_from_above():
    """The chain's own predictor fed a shuffled context is an order-blind predictor: its loss is at least
    order_blind_entropy at that position, which on this chain lies far above the floor (a shuffle that
    left the order alone would give the floor)."""
    chain = markov_chain(2, n_symbols=4, concentration=0.1)
    blind = order_blind_entropy(chain, 3)[-1]  # position t = 3: the current symbol is the 4th
    assert blind > chain.entropy_rate + 0.2
    result = shuffled_context_loss(_ChainOracle(chain), 4, source_seed=2, concentration=0.1, n_sequences=8192)
    # 8192 symbols: standard errors near 0.01 nats
    assert abs(result.in_order - chain.entropy_rate) < 0.05
    assert result.shuffled > blind - 0.05


@pytest.mark.argument_check
def test_learned_model_refuses_positions_it_has_no_vector_for():
    model = TinyCausalLM("learned", max_len=8)
    assert model(torch.zeros(1, 8, dtype=torch.long)).shape == (1, 8, 16)
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 9, dtype=torch.long))


@pytest.mark.argument_check
@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: TinyCausalLM("alibi2"), "scheme must be one of"),  # would otherwise build the "none" model
        (lambda: TinyCausalLM("t5", d_model=30, n_heads=4), "n_heads must divide d_model"),
        (
            lambda: TinyCausalLM("alibi")(torch.zeros(1, 4, dtype=torch.long), positions=torch.arange(4.0)),
            "rotary scheme only",  # ALiBi would ignore the positions
        ),
        (lambda: TinyCausalLM("alibi", rotary_dim=4), "rotary scheme only"),  # ALiBi would ignore it
        (lambda: TinyCausalLM("none", nope_layer_interval=2), "rotary scheme only"),
        (lambda: TinyCausalLM("rotary", rotary_dim=3), "even int in \\[0, 8\\]"),
        (lambda: TinyCausalLM("rotary", rotary_dim=10), "even int in \\[0, 8\\]"),
        (lambda: TinyCausalLM("rotary", nope_layer_interval=0), "int >= 1"),
    ],
    ids=[
        "unknown scheme",
        "heads",
        "positions without rotary",
        "rotary_dim without rotary",
        "NoPE layers without rotary",
        "odd rotary_dim",
        "rotary_dim beyond the head",
        "interval 0",
    ],
)
def test_mistakes_are_refused_with_a_message_naming_them(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def _same_weights(model, like):
    model.load_state_dict(like.state_dict())
    return model


def test_nope_blocks_follow_llama4_rule_and_do_not_rotate():
    """Block i skips rotation when (i + 1) % interval == 0 (Llama 4's TransformerBlock), and a skipped block is
    exactly a block of the "none" model: with every block skipped the model is the NoPE model, with some skipped
    it is neither the NoPE nor the fully rotary model."""
    assert TinyCausalLM("rotary", n_layers=8, nope_layer_interval=4).rope_layers == (0, 1, 2, 4, 5, 6)
    assert TinyCausalLM("rotary", n_layers=3).rope_layers == (0, 1, 2)
    assert TinyCausalLM("rotary", nope_layer_interval=2).rope_layers == (0,)
    torch.manual_seed(0)
    rotary = TinyCausalLM("rotary")
    tokens = torch.randint(0, 16, (3, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = rotary(tokens)
        none = _same_weights(TinyCausalLM("none"), rotary)(tokens)
        all_nope = _same_weights(TinyCausalLM("rotary", nope_layer_interval=1), rotary)(tokens)
        hybrid = _same_weights(TinyCausalLM("rotary", nope_layer_interval=2), rotary)(tokens)
    torch.testing.assert_close(all_nope, none, rtol=0, atol=0)  # the same operations on the same numbers
    # rotation moves the logits by O(1): far more than any rounding
    assert (hybrid - none).abs().max() > 0.05 and (hybrid - full).abs().max() > 0.05


def test_partial_rotary_reaches_the_rotary_module_and_zero_is_the_none_model():
    torch.manual_seed(0)
    rotary = TinyCausalLM("rotary")
    assert rotary.rotary.rotary_dim == 8 and TinyCausalLM("rotary", rotary_dim=2).rotary.rotary_dim == 2
    tokens = torch.randint(0, 16, (3, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = rotary(tokens)
        whole = _same_weights(TinyCausalLM("rotary", rotary_dim=8), rotary)(tokens)
        quarter = _same_weights(TinyCausalLM("rotary", rotary_dim=2), rotary)(tokens)
    torch.testing.assert_close(whole, full, rtol=0, atol=0)
    assert (quarter - full).abs().max() > 0.05
    # rotary_dim=0 builds the "none" model with the same weights from the same seed, hence the same training
    zero = train_and_evaluate("rotary", seed=2, rotary_dim=0, **TINY)
    none = train_and_evaluate("none", seed=2, **TINY)
    assert zero.model.rope_layers == () and zero.losses == none.losses


def test_copy_sequences_repeat_their_symbols_after_the_separator_and_only_the_copy_is_scored():
    sequences = _copy_sequences(np.random.default_rng(0), 5, 6, 8)  # <bos> x1..x6 <sep> x1..x6
    assert sequences.shape == (5, 14)
    assert torch.all(sequences[:, 0] == 9) and torch.all(sequences[:, 7] == 8)
    assert torch.equal(sequences[:, 1:7], sequences[:, 8:]) and int(sequences[:, 1:7].max()) < 8
    torch.manual_seed(0)
    model = TinyCausalLM("none", vocab_size=10, d_model=8, n_heads=2)
    logits, targets = _copy_logits_and_targets(model, sequences)
    # the logits read at <sep> and the copy so far (positions 7..12) predict the copy (positions 8..13)
    assert logits.shape == (5, 6, 10) and torch.equal(targets, sequences[:, 8:])
    with torch.no_grad():
        torch.testing.assert_close(logits, model(sequences[:, :-1])[:, 7:], rtol=0, atol=0)


def test_copy_task_is_seeded_and_a_learned_model_reports_lengths_it_cannot_run():
    tiny = dict(max_train_len=3, eval_lens=(3, 6), steps=3, d_model=8, n_heads=2, eval_sequences=8)
    learned = copy_task("learned", seed=1, **tiny)
    assert sorted(learned.accuracy) == [3] and learned.not_evaluated == (6,)
    first, second = copy_task("rotary", seed=1, **tiny), copy_task("rotary", seed=1, **tiny)
    assert first.accuracy == second.accuracy and first.train_loss == second.train_loss


# --- Training -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["rotary", "t5", "learned"])
def test_same_seed_same_losses_and_no_global_side_effects(scheme):
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    first = train_and_evaluate(scheme, seed=4, **TINY)
    assert torch.get_num_threads() == threads
    assert torch.equal(torch.random.get_rng_state(), state)
    second = train_and_evaluate(scheme, seed=4, **TINY)
    other = train_and_evaluate(scheme, seed=5, **TINY)
    assert first.losses == second.losses and first.train_loss == second.train_loss
    assert first.losses != other.losses
    assert all(math.isfinite(v) for v in first.losses.values())


def test_learned_reports_missing_lengths_instead_of_numbers():
    result = train_and_evaluate("learned", seed=0, **{**TINY, "eval_lens": (4, 8, 16, 32)})
    assert sorted(result.losses) == [4, 8] and result.not_evaluated == (16, 32)


def test_interpolation_starts_from_the_model_train_and_evaluate_trains():
    pi = position_interpolation(
        seed=3, factor=2, finetune_steps=2, **{k: v for k, v in TINY.items() if k != "eval_lens"}
    )
    plain = train_and_evaluate("rotary", seed=3, **{**TINY, "eval_lens": (8, 16)})
    assert pi.trained == plain.losses[8] and pi.extrapolated == plain.losses[16]
    assert pi.eval_len == 16 and pi.interpolated != pi.extrapolated


def test_models_trained_in_worker_processes_are_bit_for_bit_those_trained_here():
    jobs = {(scheme, seed): dict(scheme=scheme, seed=seed, **TINY) for scheme in ("t5", "rotary") for seed in (0, 1)}
    copy_jobs = {"copy": dict(scheme="alibi", seed=1, max_train_len=3, eval_lens=(3, 6), steps=3, d_model=8)}
    for function, work in ((train_and_evaluate, jobs), (copy_task, copy_jobs)):
        here = train_in_processes(function, work, processes=1)
        there = train_in_processes(function, work, processes=2)
        assert list(there) == list(work)
        for key in work:
            assert here[key][:-1] == there[key][:-1], key  # every field but the model
            a, b = here[key].model.state_dict(), there[key].model.state_dict()
            assert all(torch.equal(a[k], b[k]) for k in a), key
    # the workers apply the caller's perturbation (a large one, so that every loss moves)
    with perturbed(Perturbation(1, scale=1e-2)):
        moved = train_in_processes(train_and_evaluate, jobs, processes=2)
        assert all(moved[key].losses == train_and_evaluate(**jobs[key]).losses for key in jobs)
    plain = train_in_processes(train_and_evaluate, jobs, processes=1)
    assert all(moved[key].losses != plain[key].losses for key in jobs)
    with pytest.raises(ValueError, match="processes"):
        train_in_processes(train_and_evaluate, jobs, processes=0)


# --- The chapter's claims, on seeds and chains the chapter does not use ------------------------------------
# Both chains are here because they are hard on the claims. On chain 3, T5 has a lower mean loss at 32 symbols
# than rotary (the chapter says rotary's lead is not stable). On chain 6, two of the T5 models barely learn
# position, and an earlier, stronger wording of the T5 and NoPE claims failed. Each claim below holds, with
# these thresholds, on the chapter's chain 0 and on each of chains 1 to 7 with three seeds; the comments give
# the extreme value measured there, so that every threshold keeps a margin well beyond rounding.
#
# Each claim is a posenc_book.robustness check: a function that reads the trained models and returns the
# numbers the claim compares, and the bounds it asserts. `make test` checks the bounds on the plain runs;
# `pytest tests/test_extrapolation.py --claim-draws 1,2,3,4 -s` also trains every model under four
# perturbations of its initial weights and fails a bound whose margin is under three times the spread of its
# number, printing each claim's table. The spreads that run measured (1 h 27 min on a busy 2-core AMD EPYC
# with AVX-512) are in the comments as "spread S, margin M": S the largest change of the number nearest to
# its bound over the four runs (on either chain, the one of smaller M / S), M its margin on the plain run.

OTHER_RUNS = ((3, (21, 22, 23)), (6, (61, 62, 63)))
LENGTHS = (32, 64, 128, 256)


@functools.cache
def _grid(source, seeds, perturbation):
    """Every scheme trained on chain ``source`` with ``seeds``, under ``perturbation`` (None: plain)."""
    with perturbed(perturbation):
        return {
            (scheme, seed): train_and_evaluate(scheme, seed=seed, source_seed=source, eval_lens=LENGTHS)
            for scheme in SCHEMES
            for seed in seeds
        }


@pytest.fixture(scope="module", params=OTHER_RUNS, ids=lambda run: f"chain{run[0]}")
def grid(request):
    """(chain, seeds, results of the active perturbation as a function of nothing)."""
    source, seeds = request.param
    return source, seeds, lambda: _grid(source, seeds, active_perturbation())


def losses(results, seeds, scheme, length):
    return np.array([results[scheme, seed].losses[length] for seed in seeds])


def check(measure, bounds, draws):
    """The claim's table is printed (pytest -s) and the claim asserted; with no draws, on the plain run."""
    result = assert_claim(measure, bounds, draws=draws)
    print("\n" + result.table())


def test_claim_every_model_uses_more_than_the_current_symbol(grid, claim_draws):
    source, seeds, results = grid
    chain = markov_chain(source)

    def measure():
        at32 = {s: losses(results(), seeds, s, 32) for s in SCHEMES}
        mean32 = {s: v.mean() for s, v in at32.items()}
        others = [mean32[s] for s in SCHEMES if s not in ("learned", "none")]
        return {
            "at 32 minus order1": np.concatenate([v - chain.order1_entropy for v in at32.values()]),
            "at 32 minus floor": np.concatenate([v - chain.entropy_rate for v in at32.values()]),
            # rotary or T5 has the lowest mean: the lowest other mean minus the lower of the two
            "next mean minus rotary/t5": min(v for s, v in mean32.items() if s not in ("rotary", "t5"))
            - min(mean32["rotary"], mean32["t5"]),
            # learned and NoPE have the two highest means
            "learned, none minus the rest": min(mean32["learned"], mean32["none"]) - max(others),
        }

    check(
        measure,
        [
            Bound("at 32 minus order1", below=-0.1),  # smallest margin 0.12; spread 0.0010, margin 0.121
            Bound("at 32 minus floor", above=0.2),  # smallest margin 0.15; spread 0.0037, margin 0.214
            Bound("next mean minus rotary/t5", above=0.0),  # spread 0.0011, margin 0.204
            Bound("learned, none minus the rest", above=0.0),  # spread 0.0011, margin 0.110
        ],
        claim_draws,
    )


def test_claim_the_order_blind_loss_is_far_below_the_current_symbol_loss(grid):
    chain = markov_chain(grid[0])
    # exact (no training, nothing to perturb); chains 0, 3, 6: 0.03-0.09 above the floor at positions 2 to 6
    blind = order_blind_entropy(chain, 6)
    assert np.all(blind[1:] - chain.entropy_rate < 0.1) and np.all(blind < chain.order1_entropy - 1.0)


def shuffle_gap(model, source):
    result = shuffled_context_loss(model, 32, source_seed=source)
    return result.shuffled - result.in_order


def test_claim_shuffling_the_context_hurts_some_schemes_much_more_than_others(grid, claim_draws):
    source, seeds, results = grid

    def measure():
        return {s: [shuffle_gap(results()[s, seed].model, source) for seed in seeds] for s in SCHEMES}

    check(
        measure,
        [
            Bound("rotary", above=0.5),  # spread 0.0065, margin 0.732
            # smallest on chains 0-7 (4096 sequences): 0.75 (ALiBi); spread 0.0027, margin 0.228
            Bound("alibi", above=0.5),
            Bound("sinusoidal", above=0.1),  # smallest 0.20; spread 0.0013, margin 0.079
            # smallest 0.09 (chain 6): some T5 models use order as little as NoPE; spread 0.0008, margin 0.056
            Bound("t5", above=0.03),
            # 0.025 to 0.113; the chapter's "more than 0.01" is within noise of some of these, so it is checked on
            # the chapter's chain only
            Bound("learned", below=0.2),  # spread 0.0025, margin 0.100
            Bound("none", below=0.2),  # spread 0.0014, margin 0.123
        ],
        claim_draws,
    )


def test_claim_at_the_shuffled_symbol_part_of_the_learned_and_nope_gain_survives(grid, claim_draws):
    """At the 33rd symbol the learned and NoPE models gain less over the current symbol alone than in their mean
    at 32 symbols; a shuffle keeps part of that gain and loses part; the lowest shuffled loss, an upper bound on
    the order-blind loss there, lies just below the current-symbol-only loss."""
    source, seeds, results = grid
    order1 = markov_chain(source).order1_entropy

    def measure():
        shuffled = {
            (s, seed): shuffled_context_loss(results()[s, seed].model, 32, source_seed=source)
            for s in ("learned", "none")
            for seed in seeds
        }
        gains = {key: r.current_symbol_only - r.in_order for key, r in shuffled.items()}
        alone = {r.current_symbol_only for r in shuffled.values()}
        assert len(alone) == 1  # one draw of sequences for every model: exact, not a training number
        return {
            # chains 0, 3, 6: gain at the 33rd symbol 0.11-0.18, in the mean at 32 symbols 0.22-0.35
            "mean gain at 32 minus gain at the 33rd": [
                order1 - results()[s, seed].losses[32] - gains[s, seed] for s, seed in shuffled
            ],
            # 0.52-0.65 (chain 0), 0.30-0.49 (chain 3), 0.75-0.84 (chain 6)
            "share of the gain a shuffle keeps": [
                (r.current_symbol_only - r.shuffled) / gains[key] for key, r in shuffled.items()
            ],
            # 0.080 (chain 0), 0.062 (chain 3), 0.134 (chain 6)
            "current symbol only minus lowest shuffled": alone.pop() - min(r.shuffled for r in shuffled.values()),
        }

    check(
        measure,
        [
            Bound("mean gain at 32 minus gain at the 33rd", above=0.0),  # spread 0.0014, margin 0.063
            Bound("share of the gain a shuffle keeps", above=0.1, below=0.95),  # spread 0.0099, margin 0.109
            Bound("current symbol only minus lowest shuffled", above=0.0, below=0.2),  # spread 0.0011, margin 0.066
        ],
        claim_draws,
    )


@functools.cache
def _by_position(source, seeds, perturbation):
    """Each model's mean loss at positions 1 .. 255 of the same 256 sequences (the chapter's per-position read)."""
    results = _grid(source, seeds, perturbation)
    common = sample_sequences(markov_chain(source), 256, 257, seed=2)
    return {
        (s, seed): symbol_losses(results[s, seed].model, common[:, :33] if s == "learned" else common).mean(axis=0)
        for s in SCHEMES
        for seed in seeds
    }


def band(losses, first, last):
    """Mean loss over positions ``first`` to ``last``."""
    return np.mean(losses[first - 1 : last])


def test_claim_on_one_draw_alibi_hardly_rises_and_nope_rises_with_every_symbol_read(grid, claim_draws):
    source, seeds, _ = grid

    def measure():
        by_position = _by_position(source, seeds, active_perturbation())
        rise = {
            s: [band(by_position[s, seed], 1, 255) - band(by_position[s, seed], 1, 31) for seed in seeds]
            for s in SCHEMES
            if s != "learned"
        }
        far = {s: np.mean([band(by_position[s, seed], 128, 255) for seed in seeds]) for s in rise}
        return {
            # largest 0.032 (chain 3), 0.056 (chain 6); the chapter's 0.05: chain 0
            "alibi: 1-255 minus 1-31": rise["alibi"],
            "none: 1-255 minus 1-31": rise["none"],  # smallest 0.25 (chain 3), 0.21 (chain 6)
            "t5: 1-255 minus 1-31": rise["t5"],  # smallest 0.53 (chain 3), 0.22 (chain 6); the chapter's 0.3: chain 0
            # smallest 0.78 (chain 3), 0.49 (chain 6)
            "sinusoidal, rotary: 1-255 minus 1-31": rise["sinusoidal"] + rise["rotary"],
            # worse at 16-31 than at 1-7, inside the training length: smallest 0.31 (chain 3), 0.27 (chain 6)
            "learned, none: 16-31 minus 1-7": [
                band(by_position[s, seed], 16, 31) - band(by_position[s, seed], 1, 7)
                for s in ("learned", "none")
                for seed in seeds
            ],
            # NoPE at most 0.09 (chain 3), 0.12 (chain 6); rotary at least 1.04 (chain 3), 0.91 (chain 6)
            "none: 32-63 minus 16-31": [
                band(by_position["none", seed], 32, 63) - band(by_position["none", seed], 16, 31) for seed in seeds
            ],
            "rotary: 32-63 minus 16-31": [
                band(by_position["rotary", seed], 32, 63) - band(by_position["rotary", seed], 16, 31) for seed in seeds
            ],
            # the order at 128-255: ALiBi lowest, then T5 and NoPE, then sinusoidal and rotary
            "t5, none at 128-255 minus alibi": min(far["t5"], far["none"]) - far["alibi"],
            "sinusoidal, rotary minus t5, none": min(far["sinusoidal"], far["rotary"]) - max(far["t5"], far["none"]),
        }

    check(
        measure,
        [
            Bound("alibi: 1-255 minus 1-31", below=0.1),  # spread 0.0009, margin 0.044
            Bound("none: 1-255 minus 1-31", above=0.1),  # spread 0.0038, margin 0.106
            Bound("t5: 1-255 minus 1-31", above=0.1),  # spread 0.0026, margin 0.122
            Bound("sinusoidal, rotary: 1-255 minus 1-31", above=0.3),  # spread 0.0017, margin 0.191
            Bound("learned, none: 16-31 minus 1-7", above=0.1),  # spread 0.0020, margin 0.175
            Bound("none: 32-63 minus 16-31", below=0.3),  # spread 0.0016, margin 0.209
            Bound("rotary: 32-63 minus 16-31", above=0.5),  # spread 0.0035, margin 0.408
            Bound("t5, none at 128-255 minus alibi", above=0.0),  # spread 0.0013, margin 0.743
            Bound("sinusoidal, rotary minus t5, none", above=0.0),  # spread 0.0040, margin 0.341
        ],
        claim_draws,
    )


def test_claim_a_window_removes_most_of_the_t5_rise(grid, claim_draws):
    source, seeds, results = grid

    def measure():
        shares = []
        for seed in seeds:
            r = results()["t5", seed]
            windowed = evaluate(r.model, 256, source_seed=source, window=32)
            shares.append((r.losses[256] - windowed) / (r.losses[256] - r.losses[32]))
        # share removed: 0.61-0.83 (chain 0), 0.89-0.95 (chain 3), 0.97-1.37 (chain 6)
        return {"share of the t5 rise a window removes": shares}

    # spread 0.0048, margin 0.467
    check(measure, [Bound("share of the t5 rise a window removes", above=0.5)], claim_draws)


def test_claim_only_alibi_keeps_its_loss_at_eight_times_the_length(grid, claim_draws):
    source, seeds, results = grid
    order1 = markov_chain(source).order1_entropy

    def measure():
        at32 = {s: losses(results(), seeds, s, 32) for s in SCHEMES if s != "learned"}
        at256 = {s: losses(results(), seeds, s, 256) for s in at32}
        mean256 = {s: v.mean() for s, v in at256.items()}
        return {
            "|rise| alibi": np.abs(at256["alibi"] - at32["alibi"]),
            "sinusoidal at 256 minus order1": at256["sinusoidal"] - order1,
            "rotary at 256 minus order1": at256["rotary"] - order1,
            "rise t5": at256["t5"] - at32["t5"],
            "rise none": at256["none"] - at32["none"],
            # the ranking by mean at 256: ALiBi, then T5 and NoPE in either order, then sinusoidal, rotary
            "t5, none minus alibi": min(mean256["t5"], mean256["none"]) - mean256["alibi"],
            "sinusoidal minus t5, none": mean256["sinusoidal"] - max(mean256["t5"], mean256["none"]),
            "rotary minus sinusoidal": mean256["rotary"] - mean256["sinusoidal"],
        }

    check(
        measure,
        [
            Bound("|rise| alibi", below=0.2),  # largest on chains 0-7: 0.15; spread 0.0016, margin 0.144
            # sinusoidal ends only 0.03 above order1 for one seed of chain 6: the chapter's "above" is checked
            # with a margin below it; rotary's smallest margin is 0.28
            Bound("sinusoidal at 256 minus order1", above=-0.1),  # 0.24 (chain 3), 0.033 (chain 6); spread 0.0045
            Bound("rotary at 256 minus order1", above=0.05),  # spread 0.0095, margin 0.230
            # "gets worse": smallest rises 0.07 (T5, NoPE, chain 6); the chapter's 0.2 holds on its own chain only
            Bound("rise t5", above=0.0),  # spread 0.0018, margin 0.071
            Bound("rise none", above=0.0),  # spread 0.0029, margin 0.069
            # T5's and NoPE's means are 0.04 apart on chain 6: their order is not claimed
            Bound("t5, none minus alibi", above=0.0),  # spread 0.0031, margin 0.476
            Bound("sinusoidal minus t5, none", above=0.0),  # spread 0.0028, margin 0.257
            Bound("rotary minus sinusoidal", above=0.0),  # spread 0.0068, margin 0.352
        ],
        claim_draws,
    )
    assert all(results()["learned", seed].not_evaluated == (64, 128, 256) for seed in seeds)


def test_claim_a_window_of_the_training_length_undoes_rotary_and_t5_but_not_sinusoidal(grid, claim_draws):
    source, seeds, results = grid

    def measure():
        schemes = [s for s in SCHEMES if s != "learned"]
        at32 = {s: losses(results(), seeds, s, 32) for s in schemes}
        at256 = {s: losses(results(), seeds, s, 256) for s in schemes}
        windowed = {
            s: np.array([evaluate(results()[s, seed].model, 256, source_seed=source, window=32) for seed in seeds])
            for s in schemes
        }
        removed = {s: at256[s] - windowed[s] for s in schemes}
        return {
            "rotary windowed minus at 32": windowed["rotary"] - at32["rotary"],
            "rotary removed": removed["rotary"],
            "t5 removed minus 0.3 rise": removed["t5"] - 0.3 * (at256["t5"] - at32["t5"]),
            "sinusoidal removed": removed["sinusoidal"],
            "sinusoidal windowed minus at 32": windowed["sinusoidal"] - at32["sinusoidal"],
            "|alibi removed|": np.abs(removed["alibi"]),
        }

    check(
        measure,
        [
            Bound("rotary windowed minus at 32", below=0.2),  # spread 0.0028, margin 0.182
            Bound("rotary removed", above=0.5),  # spread 0.0096, margin 0.733
            Bound("t5 removed minus 0.3 rise", above=0.0),  # spread 0.0014, margin 0.072
            Bound("sinusoidal removed", below=0.35),  # largest 0.25; spread 0.0041, margin 0.253
            Bound("sinusoidal windowed minus at 32", above=0.1),  # smallest 0.23 (chain 6); spread 0.0027, margin 0.126
            Bound("|alibi removed|", below=0.05),  # spread 0.0008, margin 0.038
        ],
        claim_draws,
    )


def test_claim_t5_buckets_beyond_the_training_distances_stay_untrained(grid):
    _, seeds, results = grid
    for seed in seeds:  # exact: those biases get no gradient, whatever the rounding
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            initial = TinyCausalLM("t5").relative.relative_attention_bias.weight
        trained = results()["t5", seed].model.relative.relative_attention_bias.weight
        assert torch.equal(trained[22:], initial[22:])
        assert not torch.equal(trained[:22], initial[:22])


@functools.cache
def _interpolation(source, seeds, perturbation):
    with perturbed(perturbation):
        return [position_interpolation(seed=seed, source_seed=source) for seed in seeds]


def test_claim_interpolation_is_ahead_after_the_same_fine_tuning(grid, claim_draws):
    source, seeds, results = grid

    def measure():
        runs = _interpolation(source, seeds, active_perturbation())
        for pi, seed in zip(runs, seeds):  # the same model as the grid's (exact, same arguments)
            assert pi.trained == results()["rotary", seed].losses[32]
            assert pi.extrapolated == results()["rotary", seed].losses[128]

        def each(f):
            return [f(pi) for pi in runs]

        return {
            "extrapolated minus trained": each(lambda pi: pi.extrapolated - pi.trained),
            "interpolated minus trained": each(lambda pi: pi.interpolated - pi.trained),
            # the quarter step alone, at the training length, costs most of what interpolation costs at 128
            "interpolated short minus trained": each(lambda pi: pi.interpolated_short - pi.trained),
            "short cost minus half the cost at 128": each(
                lambda pi: (pi.interpolated_short - pi.trained) - 0.5 * (pi.interpolated - pi.trained)
            ),
            "fine-tuned: extrapolated minus interpolated": each(
                lambda pi: pi.finetuned_extrapolated - pi.finetuned_interpolated
            ),
            "fine-tuned interpolated minus trained": each(lambda pi: pi.finetuned_interpolated - pi.trained),
            # "worse at 32 than before fine-tuning": smallest 0.16 and 0.22 on chains 0-7 (was checked at 0.1)
            "fine-tuned extrapolated, at 32, minus trained": each(
                lambda pi: pi.finetuned_extrapolated_short - pi.trained
            ),
            "fine-tuned interpolated, at 32, minus trained": each(
                lambda pi: pi.finetuned_interpolated_short - pi.trained
            ),
        }

    check(
        measure,
        [
            Bound("extrapolated minus trained", above=0.8),  # spread 0.0055, margin 0.208
            Bound("interpolated minus trained", above=0.5),  # spread 0.0036, margin 0.270
            Bound("interpolated short minus trained", above=0.4),  # spread 0.0058, margin 0.252
            Bound("short cost minus half the cost at 128", above=0.0),  # spread 0.0063, margin 0.396
            Bound("fine-tuned: extrapolated minus interpolated", above=0.1),  # spread 0.0094, margin 0.134
            Bound("fine-tuned interpolated minus trained", above=0.1),  # spread 0.0032, margin 0.204
            Bound("fine-tuned extrapolated, at 32, minus trained", above=0.05),  # spread 0.0020, margin 0.122
            Bound("fine-tuned interpolated, at 32, minus trained", above=0.05),  # spread 0.0022, margin 0.171
        ],
        claim_draws,
    )


# --- Hybrid and partial rotary (chapter 9), on the same chains and seeds -------------------------------------
# Margins measured on chains 0-7, three seeds each, in the comments (the chapter uses chain 0, seeds 0-2).

VARIANTS = {
    "rotary + NoPE": dict(nope_layer_interval=2),
    "rotary 2 of 8": dict(rotary_dim=2),
    "rotary 4 of 8": dict(rotary_dim=4),
}


def format_loss_table(source, rows):
    """The losses of ``rows`` (name -> results of the same seeds) as text: one line per model, then the means."""
    lines = [f"chain {source}: loss in nats at " + ", ".join(str(n) for n in LENGTHS) + " symbols"]
    for name, runs in rows.items():
        for r in runs:
            lines.append(f"  {name:15} seed {r.seed:3}: " + "  ".join(f"{r.losses[n]:.3f}" for n in LENGTHS))
        means = [np.mean([r.losses[n] for r in runs]) for n in LENGTHS]
        lines.append(f"  {name:15} mean    : " + "  ".join(f"{m:.3f}" for m in means))
    return "\n".join(lines)


@functools.cache
def _variants(source, seeds, perturbation):
    """The variants' models, with the grid's NoPE and rotary models, under ``perturbation``."""
    with perturbed(perturbation):
        rows = {
            name: [
                train_and_evaluate("rotary", seed=seed, source_seed=source, eval_lens=LENGTHS, **options)
                for seed in seeds
            ]
            for name, options in VARIANTS.items()
        }
    results = _grid(source, seeds, perturbation)
    return {"none": [results["none", s] for s in seeds], **rows, "rotary": [results["rotary", s] for s in seeds]}


@pytest.fixture(scope="module")
def variants(grid):
    source, seeds, _ = grid
    rows = _variants(source, seeds, None)
    print("\n" + format_loss_table(source, rows))  # visible with pytest -s
    return lambda: _variants(source, seeds, active_perturbation())


def variant_losses(rows):
    return {name: np.array([[r.losses[n] for n in LENGTHS] for r in runs]) for name, runs in rows.items()}


def test_claim_a_nope_block_does_not_make_rotary_extrapolate(grid, variants, claim_draws):
    source, seeds, _ = grid
    order1 = markov_chain(source).order1_entropy
    assert all(r.model.rope_layers == (0,) for r in variants()["rotary + NoPE"])

    def measure():
        rows = variants()
        grid_losses = variant_losses(rows)
        hybrid, rotary = grid_losses["rotary + NoPE"], grid_losses["rotary"]
        windowed = np.array([evaluate(r.model, 256, source_seed=source, window=32) for r in rows["rotary + NoPE"]])
        return {
            "hybrid minus rotary at 32": hybrid[:, 0] - rotary[:, 0],
            "hybrid minus rotary at 32, mean": hybrid[:, 0].mean() - rotary[:, 0].mean(),
            "hybrid at 256 minus order1": hybrid[:, -1] - order1,
            "|hybrid windowed minus at 32|": np.abs(windowed - hybrid[:, 0]),
        }

    check(
        measure,
        [
            # worse at 32 for every seed: smallest 0.011 (chain 4), 0.046 and 0.05 on these chains; in the mean
            # >= 0.05
            Bound("hybrid minus rotary at 32", above=0.0),  # spread 0.0047, margin 0.053
            Bound("hybrid minus rotary at 32, mean", above=0.03),  # spread 0.0015, margin 0.097
            # smallest margin 0.20 (chain 6); spread 0.0024, margin 0.102
            Bound("hybrid at 256 minus order1", above=0.1),
            Bound("|hybrid windowed minus at 32|", below=0.2),  # largest 0.12 (chain 2); spread 0.0017, margin 0.157
        ],
        claim_draws,
    )


def test_claim_partial_rotary_trades_loss_at_the_training_length_for_loss_beyond(grid, variants, claim_draws):
    source, seeds, _ = grid
    order1 = markov_chain(source).order1_entropy

    def measure():
        grid_losses = variant_losses(variants())
        rotary, nope = grid_losses["rotary"], grid_losses["none"]
        numbers = {}
        for name in ("rotary 2 of 8", "rotary 4 of 8"):
            p = grid_losses[name]
            numbers[f"{name} minus rotary at 32"] = p[:, 0] - rotary[:, 0]
            numbers[f"NoPE minus {name} at 32"] = nope[:, 0] - p[:, 0]
            numbers[f"{name} at 256 minus order1"] = p[:, -1] - order1
            numbers[f"{name} minus rotary at 256"] = p[:, -1] - rotary[:, -1]
        return numbers

    bounds = []
    for name in ("rotary 2 of 8", "rotary 4 of 8"):
        bounds += [
            # spreads (--claim-draws 1,2,3,4), the larger of the two variants: 0.0034, margin 0.073
            Bound(f"{name} minus rotary at 32", above=0.25),  # smallest 0.35
            Bound(f"NoPE minus {name} at 32", above=0.1),  # smallest 0.17 (chain 7); spread 0.0022, margin 0.134
            # the chapter's "more than 0.05 below" holds on its own chain; smallest margin 0.04 (chain 2)
            Bound(f"{name} at 256 minus order1", below=0.0),  # spread 0.0022, margin 0.104
            Bound(f"{name} minus rotary at 256", below=-0.4),  # smallest 0.49 (chain 6); spread 0.0113, margin 0.085
        ]
    check(measure, bounds, claim_draws)


# --- Copying (chapter 9): two seeds and evaluation sequences the chapter does not use -------------------------

COPY_SCHEMES = ("none", "rotary", "alibi")
COPY_SEEDS = (1, 2)
COPY_LENGTHS = (8, 12, 16)


@functools.cache
def _copies(perturbation):
    with perturbed(perturbation):
        return {
            (scheme, seed): copy_task(scheme, seed=seed, eval_lens=COPY_LENGTHS, eval_seed=1)
            for scheme in COPY_SCHEMES
            for seed in COPY_SEEDS
        }


def test_claim_on_copying_nope_beats_rotary_and_alibi_beats_nope_beyond_the_training_length(claim_draws):
    plain = _copies(None)
    lines = ["copy task, evaluation sequences 1: share of copied symbols right at " + ", ".join(map(str, COPY_LENGTHS))]
    for (scheme, seed), r in plain.items():
        lines.append(f"  {scheme:7} seed {seed}: " + "  ".join(f"{r.accuracy[n]:.3f}" for n in COPY_LENGTHS))
    print("\n" + "\n".join(lines))  # visible with pytest -s

    def measure():
        acc = {key: r.accuracy for key, r in _copies(active_perturbation()).items()}

        def each(f):
            return [f({s: acc[s, seed] for s in COPY_SCHEMES}) for seed in COPY_SEEDS]

        numbers = {
            "rotary at 8": each(lambda a: a["rotary"][8]),
            "rotary minus NoPE at 8": each(lambda a: a["rotary"][8] - a["none"][8]),
            "rotary at 16": each(lambda a: a["rotary"][16]),
        }
        for n in (12, 16):
            numbers[f"NoPE minus rotary at {n}"] = each(lambda a, n=n: a["none"][n] - a["rotary"][n])
            numbers[f"ALiBi minus NoPE at {n}"] = each(lambda a, n=n: a["alibi"][n] - a["none"][n])
        return numbers

    # measured for seeds 0-3: rotary at 8 >= 0.98, NoPE 0.74-0.84; at 12 and 16 NoPE ahead of rotary by >= 0.17
    # and ALiBi ahead of NoPE by >= 0.16; rotary at 16 <= 0.21 (chance 0.125)
    bounds = [
        Bound("rotary at 8", above=0.95),  # spread 0.0049, margin 0.027
        Bound("rotary minus NoPE at 8", above=0.1),  # spread 0.0083, margin 0.060
        Bound("rotary at 16", below=0.3),  # spread 0.0063, margin 0.089
    ]
    # spreads (--claim-draws 1,2,3,4): NoPE minus rotary 0.0176, margin 0.138; ALiBi minus NoPE 0.0149, margin
    # 0.062 (at 16: the tightest claim of this file, 4.1 spreads)
    for n in (12, 16):
        bounds += [Bound(f"NoPE minus rotary at {n}", above=0.1), Bound(f"ALiBi minus NoPE at {n}", above=0.1)]
    check(measure, bounds, claim_draws)


def test_train_steps_returns_the_mean_of_the_last_tenth_and_leaves_the_model_in_eval_mode():
    """The shared loop of chapters 9 and 12: the loss it reports is the mean of the last 10 % of the steps'."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    seen, modes = [], []

    def loss_at(step):
        modes.append(model.training)
        loss = torch.nn.functional.mse_loss(model(x), y)
        seen.append(float(loss.detach()))
        return loss

    reported = train_steps(model, loss_at, steps=40, lr=0.05)
    assert len(seen) == 40 and all(modes) and not model.training
    assert reported == pytest.approx(np.mean(seen[-4:]), rel=1e-12)
    assert seen[-1] < seen[0]  # it trained: Adam lowered a convex loss


@pytest.mark.argument_check
def test_train_steps_refuses_a_loss_that_is_not_finite_naming_the_callers_rate():
    model = torch.nn.Linear(3, 1)
    x = torch.randn(4, 3)

    def loss_at(step):
        loss = model(x).pow(2).mean()
        return loss * float("nan") if step == 3 else loss

    with pytest.raises(ValueError, match=r"diverged at step 3 \(loss nan\): finetune_lr=0.5 is too large"):
        train_steps(model, loss_at, steps=10, lr=0.5, lr_name="finetune_lr")
