"""ALiBi: the slopes follow the paper's rule for every head count, the bias is linear in distance, and the
module, transformers' Bloom, MPT and Falcon agree with the NumPy reference (Falcon only to bfloat16)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from transformers.models.bloom.modeling_bloom import _get_alibi_slopes as bloom_slopes
from transformers.models.bloom.modeling_bloom import build_alibi_tensor as bloom_alibi_tensor
from transformers.models.falcon.modeling_falcon import build_alibi_tensor as falcon_alibi_tensor
from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

import posenc
from posenc import alibi_bias, alibi_slopes
from posenc.nn import ALiBiBias

EPS32 = 2.0**-24  # unit roundoff of float32
HEADS = st.integers(1, 300)


def slopes_by_the_papers_rule(n_heads: int) -> list[float]:
    """The slopes as the reference code's rule states them (written here, not copied).

    Reference: ``get_slopes`` in fairseq/models/transformer.py of github.com/ofirpress/attention_with_linear_biases.
    For ``m`` a power of two, slope ``h`` (1-based) is ``(2 ** (-8 / m)) ** h``; for other counts, the slopes of the
    largest power of two ``c <= n_heads``, then every other slope of ``2c`` heads (the 1st, 3rd, ...), as many as
    needed.
    """

    def geometric(m):
        first = 2.0 ** (-8.0 / m)
        return [first ** (h + 1) for h in range(m)]

    if n_heads & (n_heads - 1) == 0:
        return geometric(n_heads)
    c = 2 ** int(math.floor(math.log2(n_heads)))
    return geometric(c) + geometric(2 * c)[::2][: n_heads - c]


# --- the slopes --------------------------------------------------------------------------------------------


def test_slopes_follow_the_papers_rule_for_every_head_count_up_to_256():
    """Every head count 1..256, powers of two and others: the rule to float64 rounding.

    ``(2 ** (-8/m)) ** h`` (one pow) and the reference's ``start * start ** (h - 1)`` (a pow and a product) round
    differently: three roundings of at most half a unit each (libm's pow is within about 0.52 ulp), so up to
    1.5 * 2**-52 relative apart (their shared ``start`` cancels), and 2 * 2**-52 is the bound. 2**-52 alone is
    not: with glibc 9185 of the 32896 slopes differ by one ulp and the largest of those reaches 2**-52 relative
    (16 heads), so a libm whose pow rounds one of them the other way could fail it. An off-by-one exponent or
    another rule is wrong by a factor, not by ulps."""
    for n_heads in range(1, 257):
        np.testing.assert_allclose(alibi_slopes(n_heads), slopes_by_the_papers_rule(n_heads), rtol=2 * 2.0**-52, atol=0)


@pytest.mark.parametrize("n_heads", [1, 2, 4, 8])
def test_slopes_of_up_to_eight_heads_are_exact_powers_of_two(n_heads):
    """For n <= 8 heads the slopes 2 ** (-8 h / n) are exact powers of two: 8 heads give 1/2 ... 1/256."""
    expected = [2.0 ** (-8 * h // n_heads) for h in range(1, n_heads + 1)]
    assert alibi_slopes(n_heads).tolist() == expected


def test_twelve_heads_take_eight_then_four_odd_slopes_of_sixteen():
    """The non-power-of-two rule, spelled out for 12 heads: 2**-1 ... 2**-8, then 2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5.

    The first eight are exact; the last four to 8 * 2**-52 relative: as in the reference code, 2 ** -0.5 is rounded
    once and then raised to a power up to 7, which multiplies its rounding error by up to 7."""
    expected = [2.0**-h for h in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]
    assert alibi_slopes(12)[:8].tolist() == expected[:8]
    np.testing.assert_allclose(alibi_slopes(12), expected, rtol=8 * 2.0**-52, atol=0)


@given(HEADS)
def test_slopes_are_distinct_and_in_the_open_unit_interval(n_heads):
    slopes = alibi_slopes(n_heads)
    assert slopes.shape == (n_heads,) and slopes.dtype == np.float64
    assert np.all((slopes > 0) & (slopes < 1))
    assert len(np.unique(slopes)) == n_heads


@pytest.mark.parametrize("n_heads", [1, 2, 4, 8, 16, 32, 64, 128, 256])
def test_power_of_two_slopes_are_geometric_with_ratio_equal_to_the_first(n_heads):
    slopes = alibi_slopes(n_heads)
    first = 2.0 ** (-8.0 / n_heads)
    assert math.isclose(slopes[0], first, rel_tol=2.0**-52)
    np.testing.assert_allclose(slopes[1:] / slopes[:-1], first, rtol=4 * 2.0**-52, atol=0)
    assert math.isclose(slopes[-1], 2.0**-8, rel_tol=n_heads * 2.0**-52)  # the last slope is always 1/256


@given(HEADS.filter(lambda n: n & (n - 1)))
def test_other_head_counts_extend_the_power_of_two_below_with_interleaved_slopes(n_heads):
    """The first c slopes are those of c heads (c the power of two below); the extra ones are the 1st, 3rd, ...
    slopes of 2c heads, odd powers of 2 ** (-4 / c), so none repeats one of the first c."""
    c = 1 << (n_heads.bit_length() - 1)
    slopes = alibi_slopes(n_heads)
    np.testing.assert_array_equal(slopes[:c], alibi_slopes(c))
    np.testing.assert_array_equal(slopes[c:], alibi_slopes(2 * c)[0::2][: n_heads - c])
    assert not np.isin(slopes[c:], slopes[:c]).any()


# --- the bias ----------------------------------------------------------------------------------------------


@given(HEADS, st.integers(0, 12), st.integers(0, 12), st.integers(-20, 20))
def test_bidirectional_bias_is_minus_slope_times_distance(n_heads, q_len, k_len, offset):
    bias = alibi_bias(n_heads, q_len, k_len, causal=False, offset=offset)
    distance = np.abs((np.arange(q_len) + offset)[:, None] - np.arange(k_len))
    assert bias.shape == (n_heads, q_len, k_len) and bias.dtype == np.float64
    np.testing.assert_array_equal(bias, -alibi_slopes(n_heads)[:, None, None] * distance)


@given(HEADS, st.integers(1, 12), st.integers(0, 12), st.integers(0, 20))
def test_causal_bias_is_linear_below_the_diagonal_and_minus_infinity_above(n_heads, q_len, extra_keys, offset):
    k_len = q_len + extra_keys
    bias = alibi_bias(n_heads, q_len, k_len, offset=offset)
    query_position = np.arange(q_len)[:, None] + offset
    key_position = np.arange(k_len)[None, :]
    future = key_position > query_position
    assert np.all(np.isneginf(bias[:, future]))
    assert np.all(np.isfinite(bias[:, ~future]))
    slopes = alibi_slopes(n_heads)
    # linear: one step back in key position costs exactly the head's slope, on every row
    steps = np.diff(np.where(future, 0.0, bias), axis=-1)
    visible_steps = ~future[:, 1:]
    np.testing.assert_allclose(
        steps[:, visible_steps], np.broadcast_to(slopes[:, None], (n_heads, visible_steps.sum()))
    )
    # the key at the query's own position gets 0
    own = query_position[:, 0]
    rows = np.arange(q_len)[own < k_len]
    assert np.all(bias[:, rows, own[own < k_len]] == 0)


def test_default_offset_puts_the_queries_last():
    """offset defaults to k_len - q_len: the last query sits at the last key (a decoder step with a cache)."""
    np.testing.assert_array_equal(alibi_bias(4, 3, 10), alibi_bias(4, 10)[:, -3:])
    np.testing.assert_array_equal(alibi_bias(4, 3, 10, causal=False), alibi_bias(4, 3, 10, causal=False, offset=7))


@given(st.integers(1, 16), st.integers(0, 8), st.integers(0, 8), st.integers(0, 30), st.integers(0, 30))
def test_bias_depends_on_the_distance_only(n_heads, q_len, k_len, offset, shift):
    """Moving every query and key by the same amount changes nothing (a relative scheme)."""
    shifted = alibi_bias(n_heads, q_len, k_len + shift, causal=False, offset=offset + shift)[:, :, shift:]
    np.testing.assert_array_equal(shifted, alibi_bias(n_heads, q_len, k_len, causal=False, offset=offset))


def test_the_zero_distance_is_a_positive_zero():
    """0.0, not -0.0, on the diagonal: the reference is exactly comparable with torch and prints cleanly."""
    assert not np.signbit(alibi_bias(3, 4)[:, np.arange(4), np.arange(4)]).any()
    assert not np.signbit(alibi_bias(3, 4, causal=False)[:, np.arange(4), np.arange(4)]).any()


def test_empty_sizes_give_empty_biases():
    assert alibi_bias(2, 0).shape == (2, 0, 0)
    assert alibi_bias(2, 0, 5).shape == (2, 0, 5)
    assert alibi_bias(2, 3, 0, causal=False).shape == (2, 3, 0)


# --- the module and the reference ---------------------------------------------------------------------------


def test_module_has_no_trainable_parameters_and_no_saved_state():
    module = ALiBiBias(12)
    assert list(module.parameters()) == []
    assert module.state_dict() == {}
    assert module.slopes.dtype == torch.float32
    np.testing.assert_array_equal(module.slopes.numpy(), alibi_slopes(12).astype(np.float32))


@given(HEADS, st.integers(0, 40), st.integers(0, 40), st.booleans())
def test_module_matches_the_reference_to_float32_rounding(n_heads, q_len, extra_keys, causal):
    """Tolerance 2 * 2**-24 relative: the slope is rounded to float32 once and the product once (the distances,
    below 2**24, are exact); the -inf entries coincide exactly."""
    k_len = q_len + extra_keys
    got = ALiBiBias(n_heads)(q_len, k_len, causal=causal)
    assert got.shape == (n_heads, q_len, k_len) and got.dtype == torch.float32
    expected = alibi_bias(n_heads, q_len, k_len, causal=causal)
    np.testing.assert_array_equal(np.isneginf(got.numpy()), np.isneginf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got.numpy()[finite], expected[finite], rtol=2 * EPS32, atol=0)
    assert not torch.signbit(got[got == 0]).any()


def test_module_reads_its_slopes_buffer():
    """forward uses the buffer (which ``.to(device)`` moves), not slopes recomputed on the side."""
    module = ALiBiBias(4)
    module.slopes.mul_(2)  # a changed buffer must change the output
    np.testing.assert_allclose(module(3, causal=False).numpy(), 2 * alibi_bias(4, 3, causal=False), rtol=2 * EPS32)


# --- parity with the code people run (transformers 5.23.0) --------------------------------------------------


@pytest.mark.parametrize("n_heads", range(1, 65))
def test_bloom_slopes_follow_the_same_rule_to_float32_rounding(n_heads):
    """Bloom's ``_get_alibi_slopes`` implements the paper's rule, non-powers of two included, in float32 as
    ``torch.pow(base, k)`` with ``base = 2 ** (-8 / c)`` rounded to float32 first. That rounding (<= 2**-24
    relative) is raised to the power k <= n_heads, so the tolerance is (n_heads + 1) * 2**-24 relative; the
    largest difference seen for 1..64 heads is 4 float32 epsilons (64 heads)."""
    got = bloom_slopes(n_heads, torch.device("cpu")).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, alibi_slopes(n_heads), rtol=(n_heads + 1) * EPS32, atol=0)


@pytest.mark.parametrize("n_heads", [1, 3, 8, 12, 16, 20, 31, 64])
def test_bloom_bias_adds_a_constant_per_row_so_the_softmax_is_the_papers(n_heads):
    """Bloom adds ``slope * j`` (key position j) to every query's row; the paper's bias is ``-slope * (i - j)``.
    They differ by ``slope * i`` along each row, so the causal softmax is the same."""
    seq = 33
    bloom = bloom_alibi_tensor(torch.ones(1, seq, dtype=torch.long), n_heads, torch.float32)
    assert bloom.shape == (n_heads, 1, seq)
    bloom = bloom[:, 0, :].double()
    paper = torch.from_numpy(alibi_bias(n_heads, seq))
    future = torch.isneginf(paper)
    softmax_bloom = torch.softmax(bloom[:, None, :].expand(-1, seq, -1).masked_fill(future, -math.inf), dim=-1)
    torch.testing.assert_close(softmax_bloom, torch.softmax(paper, dim=-1), rtol=0, atol=seq * (n_heads + 1) * EPS32)


@pytest.mark.parametrize("n_heads", range(1, 65))
def test_mpt_bias_is_the_papers_last_row(n_heads):
    """MPT's ``build_mpt_alibi_tensor`` gives ``-slope * (L - 1 - j)``: the paper's bias of the last query. Its
    non-power-of-two order (odd-indexed slopes of the next power of two, then the even-indexed) is the paper's
    rule too. Slopes ``1 / torch.pow(2, k * 8 / P)`` in float32 (the exponent exact): the power within one ulp
    (2 * 2**-24 relative), the reciprocal and the product rounded once each: 4 * 2**-24. 3 * 2**-24, which counted
    the power as one rounding, held because torch.pow(2, x) is correctly rounded on these arguments (largest error seen
    1.24 * 2**-24 with AVX-512, AVX2 and scalar kernels); one ulp off would reach 3.48 * 2**-24."""
    seq = 17
    mpt = build_mpt_alibi_tensor(n_heads, seq)
    assert mpt.shape == (n_heads, 1, seq)
    expected = alibi_bias(n_heads, 1, seq)  # one query at position seq - 1
    np.testing.assert_allclose(mpt.numpy().astype(np.float64), expected, rtol=4 * EPS32, atol=0)


@pytest.mark.parametrize("n_heads", [8, 12, 71])
def test_falcon_rounds_slope_and_bias_to_bfloat16(n_heads):
    """A difference, not a parity: Falcon's ``build_alibi_tensor`` (used when ``config.alibi=True``) casts the
    slopes to bfloat16 and multiplies by the key position in bfloat16 (8 significant bits). Its slopes follow the
    paper's rule only to bfloat16 rounding (0.3 % off for 71 heads), and at 2048 positions the bias is off by up
    to 2 (8 heads) or about 10 (71 heads) logits, with steps of 0 or 4 between neighbouring keys where the slope
    is 1/2. This test pins that behaviour exactly, from posenc's slopes, so a change in Falcon shows up here."""
    seq = 2048
    falcon = falcon_alibi_tensor(torch.ones(1, seq, dtype=torch.long), n_heads, torch.float32)[:, 0, :]
    slopes16 = torch.from_numpy(alibi_slopes(n_heads)).to(torch.float32).bfloat16()
    expected = (slopes16[:, None] * torch.arange(seq)[None, :]).float()
    torch.testing.assert_close(falcon, expected, rtol=0, atol=0)
    exact = alibi_slopes(n_heads)[:, None] * np.arange(seq)
    assert np.abs(falcon.numpy() - exact).max() >= 2.0  # far from the paper's bias at long range


def test_the_package_exports_the_functions():
    assert posenc.alibi_slopes is alibi_slopes and posenc.alibi_bias is alibi_bias
