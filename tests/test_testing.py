"""posenc.testing: every check passes on posenc's implementations and fails on faulty ones.

Each faulty implementation below reproduces, in a few lines, the mechanism of a bug reported in a public
issue tracker (the chapter notebooks/10_bug_gallery.ipynb cites each one). A check that let one of them
through, or that failed on posenc, would be a wrong check.
"""

import dataclasses
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.nn import RotaryEmbedding, rotary_embedding
from posenc.testing import (
    assert_alibi_slopes_match_reference,
    assert_layouts_agree_after_permutation,
    assert_rotary_angles_accurate,
    assert_rotary_calls_independent,
    assert_rotary_matches_config,
    assert_rotary_offset_matches_slice,
    assert_rotary_scores_depend_on_offset_only,
    assert_sinusoidal_matches_reference,
    assert_sinusoidal_odd_width_handled,
    assert_t5_buckets_exact,
    assert_t5_buckets_in_range,
    t5_float32_boundaries,
)

# --- Faulty sinusoidal tables: (n_positions, d_model) -> (n_positions, d_model) -----------------------------


def _interleave(angles_sin, angles_cos):
    table = np.empty((angles_sin.shape[0], 2 * angles_sin.shape[1]))
    table[:, 0::2], table[:, 1::2] = np.sin(angles_sin), np.cos(angles_cos)
    return table


def per_column_exponent(n, d):
    """jadore801120/attention-is-all-you-need-pytorch#32, Kyubyong/transformer#38: 2 * j / d for column j."""
    angles = np.outer(np.arange(n), 10000.0 ** (-2.0 * np.arange(d) / d))
    return np.where(np.arange(d) % 2 == 0, np.sin(angles), np.cos(angles))


def cosine_exponent_shifted(n, d):
    """SamLynnEvans/Transformer#7: the cosine of pair i gets 2 * (i + 1) / d."""
    columns = np.arange(0, d, 2)
    p = np.arange(n)[:, None]
    return _interleave(p / 10000.0 ** (columns / d), p / 10000.0 ** ((columns + 2) / d))


def precedence(n, d):
    """zju3dv/LoFTR#41: -log(10000) / d // 2 is (-log(10000) / d) // 2 = -1."""
    div_term = np.exp(np.arange(0, d, 2) * (-math.log(10000.0) / d // 2))
    angles = np.arange(n)[:, None] * div_term
    return _interleave(angles, angles)


def integer_division(n, d):
    """Kyubyong/transformer PR #81: (i - i % 2) // d is 0 for every column (Python 2's int division)."""
    table = np.array([[p / 10000 ** ((i - i % 2) // d) for i in range(d)] for p in range(n)], dtype=float)
    table[:, 0::2], table[:, 1::2] = np.sin(table[:, 0::2]), np.cos(table[:, 1::2])
    return table


def divided_by_context(n, d):
    """warner-benjamin/commented-transformers#1: div_term uses the context size where d_model belongs."""
    div_term = np.exp(np.arange(0, d, 2) * (-math.log(10000.0) / n))
    angles = np.arange(n)[:, None] * div_term
    return _interleave(angles, angles)


def divides_by_div_term(n, d):
    """harvardnlp/annotated-transformer#131: position / div_term instead of position * div_term."""
    div_term = np.exp(np.arange(0, d, 2) * (-math.log(10000.0) / d))
    angles = np.arange(n)[:, None] / div_term
    return _interleave(angles, angles)


def index_not_slice(n, d):
    """DiffPoseTalk/DiffPoseTalk#20: pe[:, seq_len] (one row) is added where pe[:, :seq_len] was meant."""
    pe = posenc.sinusoidal(4096, d, dtype=np.float64)
    return np.zeros((n, d)) + pe[n]


def odd_width_crash(n, d):
    """codertimo/BERT-pytorch#78: ceil(d / 2) cosines assigned to floor(d / 2) odd columns."""
    div_term = np.exp(np.arange(0, d, 2) * (-math.log(10000.0) / d))
    table = np.zeros((n, d))
    table[:, 0::2] = np.sin(np.arange(n)[:, None] * div_term)
    table[:, 1::2] = np.cos(np.arange(n)[:, None] * div_term)  # shape mismatch for odd d
    return table


FAULTY_TABLES = [
    per_column_exponent,
    cosine_exponent_shifted,
    precedence,
    integer_division,
    divided_by_context,
    divides_by_div_term,
    index_not_slice,
]


def test_sinusoidal_check_passes_on_posenc_in_every_layout():
    for layout in posenc.LAYOUTS:
        assert_sinusoidal_matches_reference(
            lambda n, d, layout=layout: posenc.sinusoidal(n, d, layout=layout), layout=layout
        )
    assert_sinusoidal_matches_reference(
        lambda n, d: posenc.sinusoidal(n, d, base=500.0), d_model=6, n_positions=3, base=500.0
    )


def test_sinusoidal_check_passes_on_the_torch_module():
    module = posenc.nn.SinusoidalPositionalEncoding(64, max_len=256)
    assert_sinusoidal_matches_reference(lambda n, d: module(torch.zeros(1, n, d))[0])


@pytest.mark.parametrize("faulty", FAULTY_TABLES, ids=lambda f: f.__name__)
def test_sinusoidal_check_fails_on_each_classic_mistake(faulty):
    with pytest.raises(AssertionError, match=r"differs from the sinusoidal table in \d+ of 64 columns"):
        assert_sinusoidal_matches_reference(faulty)


def test_sinusoidal_check_fails_on_a_wrong_layout_and_names_the_column():
    with pytest.raises(AssertionError, match=r"62 of 64 columns.*First wrong column: 1\."):
        assert_sinusoidal_matches_reference(lambda n, d: posenc.sinusoidal(n, d, layout="halves"))


@settings(max_examples=30)
@given(
    n=st.integers(2, 40),
    half=st.integers(1, 16),
    layout=st.sampled_from(posenc.LAYOUTS),
    row=st.integers(0, 39),
    column=st.integers(0, 31),
    delta=st.floats(2e-5, 2.0),
)
def test_sinusoidal_check_catches_any_single_entry_off_by_more_than_atol(n, half, layout, row, column, delta):
    """Property: posenc's table passes; the same table with one entry moved by more than atol fails."""
    d = 2 * half
    assert_sinusoidal_matches_reference(
        lambda a, b: posenc.sinusoidal(a, b, layout=layout), n_positions=n, d_model=d, layout=layout
    )
    row, column = row % n, column % d

    def nudged(a, b):
        table = posenc.sinusoidal(a, b, layout=layout, dtype=np.float64)
        table[row, column] += delta
        return table

    with pytest.raises(AssertionError, match=f"worst at row {row}, column {column}"):
        assert_sinusoidal_matches_reference(nudged, n_positions=n, d_model=d, layout=layout)


def test_sinusoidal_check_reports_a_crash_and_a_wrong_shape_as_failures():
    with pytest.raises(AssertionError, match="raised ZeroDivisionError") as raised:
        assert_sinusoidal_matches_reference(lambda n, d: 1 / 0)
    assert isinstance(raised.value.__cause__, ZeroDivisionError)
    with pytest.raises(AssertionError, match=r"returned shape \(64, 128\), expected \(128, 64\)"):
        assert_sinusoidal_matches_reference(lambda n, d: posenc.sinusoidal(d, n))
    with pytest.raises(AssertionError, match="must be finite"):
        assert_sinusoidal_matches_reference(lambda n, d: np.full((n, d), np.nan))
    with pytest.raises(AssertionError, match="not a real array"):
        assert_sinusoidal_matches_reference(lambda n, d: "table")


def test_odd_width_check_accepts_a_refusal_or_the_formula_and_rejects_a_crash():
    assert_sinusoidal_odd_width_handled(posenc.sinusoidal)  # refuses with ValueError

    def formula(n, d):  # column j: sin/cos of p * 10000 ** (-2 (j // 2) / d), last column an unpaired sine
        j = np.arange(d)
        angles = np.outer(np.arange(n), 10000.0 ** (-2 * (j // 2) / d))
        return np.where(j % 2 == 0, np.sin(angles), np.cos(angles))

    for d in (1, 3, 7, 31):
        assert_sinusoidal_odd_width_handled(formula, d_model=d)
    with pytest.raises(AssertionError, match="raised ValueError: could not broadcast") as raised:
        assert_sinusoidal_odd_width_handled(odd_width_crash)
    assert isinstance(raised.value.__cause__, ValueError)
    with pytest.raises(AssertionError, match="not the formula's table"):
        assert_sinusoidal_odd_width_handled(lambda n, d: formula(n, d + 1)[:, :d])


# --- Faulty rotary implementations: rotate(x, positions) with x (seq, head_dim), interleaved pairs ----------


def _rotate_interleaved(x, angles):
    out = np.array(x, dtype=np.float64)
    cos, sin = np.cos(angles), np.sin(angles)
    out[..., 0::2] = x[..., 0::2] * cos - x[..., 1::2] * sin
    out[..., 1::2] = x[..., 0::2] * sin + x[..., 1::2] * cos
    return out


def _inv_freq(head_dim, base=10000.0):
    return base ** (-np.arange(0, head_dim, 2) / head_dim)


def float32_angles(x, positions):
    """A correct float32 implementation (Hugging Face computes the angles in float32): must pass."""
    inv = _inv_freq(x.shape[-1]).astype(np.float32)
    angles = np.outer(positions.astype(np.float32), inv)  # float32 product
    return _rotate_interleaved(x, angles.astype(np.float64))


def torch_angles(dtype):
    """EleutherAI/gpt-neox#1003: positions, frequencies and angles in the model's dtype."""

    def rotate(x, positions):
        inv = torch.as_tensor(_inv_freq(x.shape[-1]), dtype=torch.float32).to(dtype)
        t = torch.as_tensor(positions, dtype=torch.float32).to(dtype)
        angles = torch.outer(t, inv)
        return _rotate_interleaved(x, angles.double().numpy())

    return rotate


def arange_bfloat16(x, positions):
    """pytorch/pytorch#137774: positions built by torch.arange in bfloat16 repeat values above 256."""
    t = torch.arange(len(positions), dtype=torch.bfloat16).double().numpy()
    return _rotate_interleaved(x, np.outer(t, _inv_freq(x.shape[-1])))


def bfloat16_positions(x, positions):
    """Positions rounded to bfloat16 (8 significant bits), frequencies and angles in float64."""
    t = torch.as_tensor(positions).to(torch.bfloat16).double().numpy()
    return _rotate_interleaved(x, np.outer(t, _inv_freq(x.shape[-1])))


class BufferedRotary(torch.nn.Module):
    """huggingface/transformers#25681: inv_freq is a buffer, so model.to(bfloat16) rounds it."""

    def __init__(self, head_dim):
        super().__init__()
        self.register_buffer("inv_freq", torch.as_tensor(_inv_freq(head_dim), dtype=torch.float32))

    def forward(self, x, positions):
        t = positions.to(self.inv_freq.dtype)  # the positions follow the buffer's dtype
        angles = torch.outer(t, self.inv_freq).double()
        return torch.as_tensor(_rotate_interleaved(x.double().numpy(), angles.numpy()))


def autocast_matmul(x, positions):
    """huggingface/transformers PR #29285: under bfloat16 autocast the angle matmul runs in bfloat16."""
    inv = torch.as_tensor(_inv_freq(x.shape[-1]), dtype=torch.float32)[:, None]
    t = torch.as_tensor(positions, dtype=torch.float32)[None, :]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        angles = (inv @ t).T
    return _rotate_interleaved(x, angles.double().numpy())


def test_rotary_angle_check_passes_on_posenc_and_on_float32():
    assert_rotary_angles_accurate(posenc.rotate)
    assert_rotary_angles_accurate(lambda x, p: posenc.rotate(x, p, layout="halves"), layout="halves")
    assert_rotary_angles_accurate(lambda x, p: posenc.rotate(x, p, base=500.0), base=500.0, head_dim=16)
    assert_rotary_angles_accurate(float32_angles)
    assert_rotary_angles_accurate(float32_angles, n_positions=2**16)


def test_rotary_angle_check_passes_on_the_torch_module():
    assert_rotary_angles_accurate(RotaryEmbedding(64))
    assert_rotary_angles_accurate(RotaryEmbedding(32, layout="halves"), head_dim=32, layout="halves")


@pytest.mark.parametrize(
    "faulty",
    [torch_angles(torch.float16), torch_angles(torch.bfloat16), arange_bfloat16, autocast_matmul],
    ids=["float16", "bfloat16", "arange_bfloat16", "autocast"],
)
def test_rotary_angle_check_fails_on_reduced_precision_angles(faulty):
    with pytest.raises(AssertionError, match="rotary angles are off by more than"):
        assert_rotary_angles_accurate(faulty)


def test_rotary_angle_check_fails_on_a_module_cast_to_bfloat16_and_passes_before():
    module = BufferedRotary(64)
    assert_rotary_angles_accurate(module)
    with pytest.raises(AssertionError, match="the first wrong position is"):
        assert_rotary_angles_accurate(module.to(torch.bfloat16))


def test_rotary_angle_check_fails_on_the_wrong_layout_or_base():
    with pytest.raises(AssertionError, match="rotary angles"):
        assert_rotary_angles_accurate(lambda x, p: posenc.rotate(x, p, layout="halves"))
    with pytest.raises(AssertionError, match="rotary angles"):
        assert_rotary_angles_accurate(lambda x, p: posenc.rotate(x, p, base=500000.0))


def test_rotary_angle_check_fails_on_a_rotation_that_scales():
    with pytest.raises(AssertionError, match="length of the rotated unit pair 2.0000"):
        assert_rotary_angles_accurate(lambda x, p: 2 * posenc.rotate(x, p), n_positions=8)


def test_rotary_score_check_passes_on_posenc_and_float32_and_fails_on_bfloat16():
    assert_rotary_scores_depend_on_offset_only(posenc.rotate)
    assert_rotary_scores_depend_on_offset_only(float32_angles, shifts=(0, 2**16))
    assert_rotary_scores_depend_on_offset_only(
        lambda x, p: posenc.rotate(x, p, layout="halves"), layout="halves", distances=(-5, 3)
    )
    assert_rotary_scores_depend_on_offset_only(RotaryEmbedding(64))
    # positions rounded to bfloat16 are exact up to 256 (shift 0 passes) and wrong beyond
    assert_rotary_scores_depend_on_offset_only(bfloat16_positions, shifts=(0, 128))
    with pytest.raises(AssertionError, match="the first at shift 1024"):
        assert_rotary_scores_depend_on_offset_only(bfloat16_positions)
    with pytest.raises(AssertionError, match="depends on more than the offset"):
        assert_rotary_scores_depend_on_offset_only(torch_angles(torch.bfloat16))


def test_rotary_score_check_fails_on_angles_that_are_not_linear_in_position():
    squared = lambda x, p: posenc.rotate(x, p**2 / 100.0)  # noqa: E731
    with pytest.raises(AssertionError, match="depends on more than"):
        assert_rotary_scores_depend_on_offset_only(squared, shifts=(0, 10))


# --- Faulty rotary modules called with an offset ------------------------------------------------------------


class LengthKeyedCache:
    """lucidrains/rotary-embedding-torch#11: the angle cache is keyed on the length, not the offset."""

    def __init__(self):
        self.cache = {}

    def __call__(self, x, offset=0):
        key = f"freqs:{x.shape[-2]}"
        if key not in self.cache:
            positions = offset + np.arange(x.shape[-2])
            self.cache[key] = np.outer(positions, _inv_freq(x.shape[-1]))
        return _rotate_interleaved(x, self.cache[key])


class StaleDynamicNTK:
    """huggingface/transformers#25306: dynamic NTK enlarges the base for a long input and keeps it."""

    def __init__(self, max_positions=2048, factor=4.0):
        self.max_positions, self.factor, self.base = max_positions, factor, 10000.0

    def __call__(self, x, offset=0):
        seq_len, head_dim = offset + x.shape[-2], x.shape[-1]
        if seq_len > self.max_positions:  # only ever grows
            growth = self.factor * seq_len / self.max_positions - (self.factor - 1)
            self.base = 10000.0 * growth ** (head_dim / (head_dim - 2))
        positions = offset + np.arange(x.shape[-2])
        return _rotate_interleaved(x, np.outer(positions, _inv_freq(head_dim, self.base)))


def posenc_with_offset(x, offset=0):
    return posenc.rotate(x, offset + np.arange(x.shape[-2]))


def test_offset_check_passes_on_posenc_and_fails_on_a_length_keyed_cache():
    assert_rotary_offset_matches_slice(posenc_with_offset)
    assert_rotary_offset_matches_slice(RotaryEmbedding(64))
    assert_rotary_offset_matches_slice(RotaryEmbedding(16, layout="halves"), head_dim=16, offset=100, seq_len=3)
    with pytest.raises(AssertionError, match="It equals fn\\(tail, offset=0\\): the offset is ignored"):
        assert_rotary_offset_matches_slice(LengthKeyedCache())


def test_offset_check_fails_when_the_offset_is_applied_twice():
    with pytest.raises(AssertionError, match="differs from rows 5 to 20") as raised:
        assert_rotary_offset_matches_slice(lambda x, offset=0: posenc_with_offset(x, 2 * offset))
    assert "ignored" not in str(raised.value)


def test_independence_check_passes_on_posenc_and_fails_on_a_stale_dynamic_base():
    assert_rotary_calls_independent(posenc_with_offset)
    assert_rotary_calls_independent(RotaryEmbedding(64))
    dynamic = StaleDynamicNTK()
    assert_rotary_calls_independent(dynamic, long_len=2048)  # within the trained length: nothing changes
    with pytest.raises(AssertionError, match="leaks into the short one"):
        assert_rotary_calls_independent(StaleDynamicNTK(), long_len=4096)


# --- Weight conversions between rotary layouts ----------------------------------------------------------------


def hf_permute(w, n_heads):
    """transformers' convert_llama_weights_to_hf.py: interleaved (Meta) rows -> halves (Hugging Face)."""
    rows, cols = w.shape
    return w.reshape(n_heads, rows // n_heads // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def llamacpp_permute(w, n_head, n_head_kv):
    """ggml-org/llama.cpp PR #3364: halves -> interleaved, with n_head //= n_head_kv for the keys."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head //= n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def test_layout_check_passes_on_the_reference_permutations():
    for n_heads in (1, 2, 4):
        assert_layouts_agree_after_permutation(lambda w, n=n_heads: hf_permute(w, n), n_heads=n_heads)
        order = posenc.rotary_weight_permutation("halves", "interleaved", 8, n_heads=n_heads)
        assert_layouts_agree_after_permutation(
            lambda w, o=order: w[o], n_heads=n_heads, source="halves", target="interleaved"
        )
    assert_layouts_agree_after_permutation(lambda w: w, source="halves", target="halves")


def test_layout_check_fails_on_the_grouped_query_key_bug_and_passes_after_the_fix():
    # keys of a model with 8 query heads and 2 key-value heads: the bug uses 8 // 2 = 4 heads
    buggy = lambda w: llamacpp_permute(w, 8, 2)  # noqa: E731
    with pytest.raises(AssertionError, match="check the head count"):
        assert_layouts_agree_after_permutation(buggy, n_heads=2, source="halves", target="interleaved")
    fixed = lambda w: llamacpp_permute(w, 2, None)  # noqa: E731
    assert_layouts_agree_after_permutation(fixed, n_heads=2, source="halves", target="interleaved")
    # with 64 and 8 heads the bug is invisible: 64 // 8 == 8
    assert_layouts_agree_after_permutation(
        lambda w: llamacpp_permute(w, 64, 8), n_heads=8, source="halves", target="interleaved"
    )


def test_layout_check_fails_when_a_permutation_is_skipped_or_applied_for_nothing():
    """huggingface/nanotron#241 and PR #427: the layout flag not followed."""
    with pytest.raises(AssertionError, match="2 of 2 heads wrong"):
        assert_layouts_agree_after_permutation(lambda w: w)  # interleaved model exported unpermuted
    with pytest.raises(AssertionError, match="from halves to halves"):
        assert_layouts_agree_after_permutation(lambda w: hf_permute(w, 2), source="halves", target="halves")


# --- ALiBi and T5 ------------------------------------------------------------------------------------------


def plain_geometric_slopes(n):
    """ml-explore/mlx#343: 2 ** (-8 i / n) for every n, right only for powers of two."""
    return 2.0 ** (-8.0 * np.arange(1, n + 1) / n)


def mpt_slopes_before_the_fix(n, alibi_bias_max=8):
    """huggingface/transformers PR #28380: the 2**ceil(log2 n) slopes reshaped as if there were n."""
    n2 = 2 ** math.ceil(math.log2(n))
    base = torch.arange(1, n2 + 1, dtype=torch.float32) * (alibi_bias_max / n2)
    slopes = (1.0 / torch.pow(2, base)).view(1, n, 1, 1)
    if n2 != n:
        slopes = torch.concat([slopes[1::2], slopes[::2]])[:n]
    return slopes.reshape(-1)


def mpt_slopes_after_the_fix(n, alibi_bias_max=8):
    n2 = 2 ** math.ceil(math.log2(n))
    base = torch.arange(1, n2 + 1, dtype=torch.float32) * (alibi_bias_max / n2)
    slopes = 1.0 / torch.pow(2, base)
    if n2 != n:
        slopes = torch.concat([slopes[1::2], slopes[::2]])[:n]
    return slopes


def test_alibi_check_passes_on_posenc_and_on_mpt_after_the_fix():
    assert_alibi_slopes_match_reference(posenc.alibi_slopes)
    assert_alibi_slopes_match_reference(mpt_slopes_after_the_fix)


def test_alibi_check_fails_on_the_plain_sequence_at_the_first_non_power_of_two():
    assert_alibi_slopes_match_reference(plain_geometric_slopes, max_heads=2)
    with pytest.raises(AssertionError, match=r"slopes_fn\(3\) returned"):
        assert_alibi_slopes_match_reference(plain_geometric_slopes)


def test_alibi_check_turns_mpts_crash_into_an_assertion():
    with pytest.raises(AssertionError, match=r"slopes_fn\(3\) raised RuntimeError") as raised:
        assert_alibi_slopes_match_reference(mpt_slopes_before_the_fix)
    assert isinstance(raised.value.__cause__, RuntimeError)


def t5_bucket_without_clamp(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """huggingface/candle PR #1312: the log buckets are not clamped to num_buckets - 1."""
    rp = np.asarray(relative_position, dtype=np.int64)
    buckets = np.zeros_like(rp)
    if bidirectional:
        num_buckets //= 2
        buckets += (rp > 0) * num_buckets
        rp = np.abs(rp)
    else:
        rp = -np.minimum(rp, 0)
    max_exact = num_buckets // 2
    with np.errstate(divide="ignore"):
        large = max_exact + (
            np.log(np.maximum(rp, 1) / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
        ).astype(np.int64)
    return buckets + np.where(rp < max_exact, rp, large)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_check_passes_on_posenc_and_fails_without_the_clamp(bidirectional):
    assert_t5_buckets_in_range(posenc.t5_relative_bucket, bidirectional=bidirectional)
    assert_t5_buckets_in_range(posenc.t5_relative_bucket, bidirectional=bidirectional, num_buckets=8, max_distance=20)
    with pytest.raises(AssertionError, match="outside 0..31"):
        assert_t5_buckets_in_range(t5_bucket_without_clamp, bidirectional=bidirectional)


def test_t5_check_fails_on_buckets_in_range_but_wrong():
    swapped = lambda r, **kw: posenc.t5_relative_bucket(-np.asarray(r), **kw)  # noqa: E731
    with pytest.raises(AssertionError, match="offset -1 in bucket 17, T5 puts it in 1"):
        assert_t5_buckets_in_range(swapped)


def t5_bucket_float32(relative_position, bidirectional=True, num_buckets=32, max_distance=128, *, log_scale=1.0):
    """T5's formula in float32 as T5's code evaluates it, with the logarithm scaled by ``log_scale``: 1 - 2**-22
    stands in for a processor whose float32 logarithm errs low by a few units in the last place."""
    rp = np.asarray(relative_position, dtype=np.int64)
    side = num_buckets // 2 if bidirectional else num_buckets
    buckets = (rp > 0) * side if bidirectional else np.zeros_like(rp)
    distance = np.abs(rp) if bidirectional else -np.minimum(rp, 0)
    max_exact = side // 2
    ratio = np.maximum(distance, 1).astype(np.float32) / np.float32(max_exact)
    log = (np.log(ratio.astype(np.float64)) * log_scale).astype(np.float32)
    term = log / np.float32(math.log(max_distance / max_exact)) * np.float32(side - max_exact)
    large = np.minimum(max_exact + term.astype(np.int64), side - 1)
    return buckets + np.where(distance < max_exact, distance, large)


def test_t5_exact_check_catches_buckets_that_depend_on_the_logarithm():
    """With 34 buckets and max_distance 27 the log term is exactly 3 at distance 12 and 6 at distance 18. A float32
    logarithm a few units low puts both one bucket down: the exact check fails and says why, the range check
    (which tolerates boundaries) passes, and posenc passes both."""
    config = dict(num_buckets=34, max_distance=27)
    low = lambda r, **kw: t5_bucket_float32(r, log_scale=1 - 2**-22, **kw)  # noqa: E731
    assert_t5_buckets_exact(posenc.t5_relative_bucket, **config)
    assert_t5_buckets_in_range(low, **config)
    with pytest.raises(
        AssertionError, match=r"offset -12 in bucket 10, the exact bucket is 11 .* on a bucket boundary"
    ):
        assert_t5_buckets_exact(low, **config)


def test_t5_exact_check_says_when_a_difference_is_not_on_a_boundary():
    with pytest.raises(AssertionError, match="not on a bucket boundary: the formula itself differs"):
        assert_t5_buckets_exact(t5_bucket_without_clamp)


def test_t5_range_check_still_refuses_a_wrong_bucket_on_a_boundary():
    """The tolerance is one bucket at a flagged offset, not any bucket."""
    two_down = lambda r, **kw: posenc.t5_relative_bucket(r, **kw) - 2 * t5_float32_boundaries(r, **kw)  # noqa: E731
    with pytest.raises(AssertionError, match="offset -16 in bucket 8, T5 puts it in 10"):
        assert_t5_buckets_in_range(two_down)


YARN_UNTRUNCATED = {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096, "truncate": False}


def test_rotary_angle_check_with_a_scaling_passes_on_that_scaling_only():
    """With ``scaling`` the reference is the scaled rotation: the unscaled one and a truncated ramp both fail."""
    assert_rotary_angles_accurate(lambda x, p: posenc.rotate(x, p, scaling=YARN_UNTRUNCATED), scaling=YARN_UNTRUNCATED)
    truncated = dict(YARN_UNTRUNCATED, truncate=True)
    with pytest.raises(AssertionError, match=r"angles are off by more than .* scaling RopeScaling\(rope_type='yarn'"):
        assert_rotary_angles_accurate(lambda x, p: posenc.rotate(x, p, scaling=truncated), scaling=YARN_UNTRUNCATED)
    with pytest.raises(AssertionError, match="rotary angles are off by more than"):
        assert_rotary_angles_accurate(posenc.rotate, scaling=YARN_UNTRUNCATED)


def test_rotary_angle_check_with_a_scaling_expects_its_attention_factor():
    """The rotated unit pair must have the attention factor's length: the bare rotation (length 1) fails."""

    def angles_only(x, p):  # YaRN's frequencies, without the factor on cos and sin
        return posenc.rotate(x, p, scaling=YARN_UNTRUNCATED) / posenc.rotary_attention_factor(YARN_UNTRUNCATED)

    with pytest.raises(AssertionError, match=r"length of the rotated unit pair 1.0000 \(expected 1.3466"):
        assert_rotary_angles_accurate(angles_only, scaling=YARN_UNTRUNCATED, n_positions=64)


def test_rotary_angle_check_with_longrope_uses_the_list_of_its_length():
    """longrope's short list up to the trained length, the long list beyond (transformers' choice)."""
    longrope = {
        "rope_type": "longrope",
        "short_factor": [1.0] * 4,
        "long_factor": [1.0, 2.0, 4.0, 8.0],
        "original_max_position_embeddings": 64,
        "factor": 4.0,
    }
    always_long = dict(longrope, short_factor=longrope["long_factor"])  # the long list at every length
    check = {"head_dim": 8, "scaling": longrope}
    assert_rotary_angles_accurate(lambda x, p: posenc.rotate(x, p, scaling=always_long), n_positions=128, **check)
    with pytest.raises(AssertionError, match="rotary angles are off"):
        assert_rotary_angles_accurate(lambda x, p: posenc.rotate(x, p, scaling=always_long), n_positions=64, **check)


@pytest.mark.argument_check
def test_rotary_angle_check_refuses_a_partial_scaling_and_another_base():
    with pytest.raises(ValueError, match="partial_rotary_factor"):
        assert_rotary_angles_accurate(posenc.rotate, scaling={"rope_type": "default", "partial_rotary_factor": 0.5})
    with pytest.raises(ValueError, match="disagrees with base"):
        assert_rotary_angles_accurate(posenc.rotate, scaling={"rope_type": "default", "rope_theta": 500000.0})


# --- A whole model's rotation against its config: rotate_fn(x, positions, layer) -----------------------------

CONFIGS = {
    # A transformers v5 config.json: rope_theta inside rope_parameters.
    "llama (v5 rope_parameters)": {
        "model_type": "llama", "hidden_size": 256, "num_attention_heads": 2, "num_hidden_layers": 2,
        "max_position_embeddings": 8192, "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
    },
    # Gemma 3's legacy form: a flat rope_scaling for the full layers, rope_local_base_freq for the sliding ones.
    "gemma3_text": {
        "model_type": "gemma3_text", "hidden_size": 2560, "head_dim": 256, "num_attention_heads": 8,
        "num_hidden_layers": 6, "sliding_window_pattern": 6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "max_position_embeddings": 131072,
    },
    # Gemma 4: proportional frequencies on the full layers' 512-wide heads.
    "gemma4_text": {
        "model_type": "gemma4_text", "hidden_size": 2304, "head_dim": 256, "num_attention_heads": 8,
        "num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"],
        "max_position_embeddings": 131072, "per_layer_config": {"1": {"head_dim": 512}},
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
        },
    },
    # Qwen3-Next: linear-attention layers (not called) and a quarter of each full-attention head rotated.
    "qwen3_next": {
        "model_type": "qwen3_next", "hidden_size": 2048, "head_dim": 256, "num_attention_heads": 16,
        "num_hidden_layers": 4, "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "max_position_embeddings": 262144,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25},
    },
    # gpt-oss-20b's YaRN without truncation (two of its 24 layers).
    "gpt_oss": {
        "model_type": "gpt_oss", "hidden_size": 2880, "head_dim": 64, "num_attention_heads": 64,
        "num_hidden_layers": 2, "max_position_embeddings": 131072,
        "layer_types": ["sliding_attention", "full_attention"], "rope_theta": 150000,
        "rope_scaling": {
            "beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
            "rope_type": "yarn", "truncate": False,
        },
    },
    # Laguna-like: YaRN with an explicit attention_factor and partial rotary on the full layers only.
    "laguna": {
        "model_type": "laguna", "hidden_size": 2048, "head_dim": 128, "num_attention_heads": 48,
        "num_hidden_layers": 2, "layer_types": ["full_attention", "sliding_attention"],
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "full_attention": {
                "rope_type": "yarn", "factor": 64.0, "original_max_position_embeddings": 4096,
                "attention_factor": 1.0, "rope_theta": 500000.0, "partial_rotary_factor": 0.5,
            },
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0},
        },
    },
    # SmolLM3: every fourth layer NoPE.
    "smollm3": {
        "model_type": "smollm3", "hidden_size": 2048, "num_attention_heads": 16, "num_hidden_layers": 8,
        "max_position_embeddings": 65536, "no_rope_layer_interval": 4,
        "rope_parameters": {"rope_type": "default", "rope_theta": 5000000.0},
    },
    # DeepSeek-V3: latent attention's last 64 features, interleaved pairs, YaRN with mscale.
    "deepseek_v3": {
        "model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128, "num_hidden_layers": 2,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "kv_lora_rank": 512,
        "q_lora_rank": 1536, "max_position_embeddings": 163840, "rope_theta": 10000,
        "rope_scaling": {
            "beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096, "type": "yarn",
        },
    },
}  # fmt: skip
"""Configs of the families whose misreadings chapter 10 reproduces, as config.json dicts (sizes cut down)."""


def _by_plan(config):
    """posenc's float64 reference: the config's plan, layer by layer."""
    plan = posenc.RotaryPlan.from_config(config)
    return lambda x, p, layer: plan.layers[layer].rotate(x, p)


class _Float32Model(torch.nn.Module):
    """An engine in float32: posenc.nn's module of each layer kind, called with layer=."""

    def __init__(self, config):
        super().__init__()
        self.plan = posenc.RotaryPlan.from_config(config)

    def forward(self, x, positions, layer):
        kind = self.plan.layers[layer]
        if not kind.rotates:
            return x
        out = x.clone()
        out[..., kind.rotary_offset :] = rotary_embedding(kind)(x[..., kind.rotary_offset :], positions=positions)
        return out


@pytest.mark.parametrize("name", CONFIGS)
def test_config_check_passes_on_the_plan_and_on_a_float32_engine(name):
    assert_rotary_matches_config(_by_plan(CONFIGS[name]), CONFIGS[name])
    assert_rotary_matches_config(_Float32Model(CONFIGS[name]), CONFIGS[name])


def _replaced(config, layer_type=None, **change):
    """A rotate_fn that rotates with the config's plan, some layers' kind changed by dataclasses.replace."""
    plan = posenc.RotaryPlan.from_config(config)

    def rotate(x, p, layer):
        kind = plan.layers[layer]
        if layer_type in (None, kind.layer_type) and kind.rotates:
            kind = dataclasses.replace(kind, **change)
        return kind.rotate(x, p)

    return rotate


def _gemma4_as_partial(x, p, layer):
    """Gemma 4's full layers built as RotaryEmbedding(dim=512 * 0.25) on the first 128 features."""
    plan = posenc.RotaryPlan.from_config(CONFIGS["gemma4_text"])
    if plan.layers[layer].layer_type != "full_attention":
        return plan.layers[layer].rotate(x, p)
    out = x.copy()
    out[:, :128] = posenc.rotate(x[:, :128], p, base=1e6, layout="halves")
    return out


def _laguna_default_mscale(x, p, layer):
    """The full layers multiplied by YaRN's 0.1 ln(64) + 1, the config's attention_factor 1.0 not read."""
    out = _by_plan(CONFIGS["laguna"])(x, p, layer)
    if layer == 0:
        out[:, :64] *= 0.1 * math.log(64.0) + 1.0
    return out


def _deepseek_output_deinterleaved(x, p, layer):
    """The right rotation, its rotated features returned de-interleaved, as transformers'
    apply_rotary_pos_emb_interleave returns them: pair i at features i and i + 32 of the 64 (scores unchanged)."""
    out = _by_plan(CONFIGS["deepseek_v3"])(x, p, layer)
    out[:, 128:] = out[:, 128:][:, posenc.rotary_weight_permutation("interleaved", "halves", 64)]
    return out


MISREADINGS = {
    "v4 reader of a v5 config": (
        "llama (v5 rope_parameters)",
        lambda x, p, layer: posenc.rotate(x, p, base=CONFIGS["llama (v5 rope_parameters)"].get("rope_theta", 1e4),
                                          layout="halves"),
        "the default base 10000 in place of the config's 500000",
    ),
    "one flat rope for Gemma 3": (
        "gemma3_text",
        lambda x, p, layer: posenc.rotate(x, p, base=1e6, scaling={"rope_type": "linear", "factor": 8.0},
                                          layout="halves"),
        r"in 5 of 6 layers \(layers 0, 1, 2, 3, 4, of type 'sliding_attention'\).*the config's 'full_attention' layers",
    ),
    "Gemma 4 as partial rotary": ("gemma4_text", _gemma4_as_partial, "partial rotary's convention"),
    "partial as proportional": (
        "qwen3_next",
        _replaced(CONFIGS["qwen3_next"], rotary_dim=256,
                  scaling=posenc.RopeScaling(rope_type="proportional", partial_rotary_factor=0.25)),
        "the proportional convention",
    ),
    "partial dropped": (
        "qwen3_next",
        lambda x, p, layer: posenc.rotate(x, p, base=1e7, layout="halves"),
        "partial_rotary_factor dropped",
    ),
    "truncate ignored": (
        "gpt_oss",
        lambda x, p, layer: posenc.rotate(
            x, p, base=150000.0, scaling=dict(CONFIGS["gpt_oss"]["rope_scaling"], truncate=True), layout="halves"
        ),
        "truncate=True where the config says truncate=False",
    ),
    "attention_factor dropped": ("laguna", _laguna_default_mscale, "multiplied by 1.41589 where the config's"),
    "scaling dropped": (
        "gpt_oss", lambda x, p, layer: posenc.rotate(x, p, base=150000.0, layout="halves"), "without the config's"
    ),
    "NoPE layers rotated": (
        "smollm3",
        lambda x, p, layer: posenc.rotate(x, p, base=5e6, layout="halves"),
        r"in 2 of 8 layers \(layers 3, 7.*Layer 3 is a NoPE layer",
    ),
    "latent pairs as halves": (
        "deepseek_v3", _replaced(CONFIGS["deepseek_v3"], layout="halves"), "the pairs taken as halves",
    ),
    "every layer left alone": ("deepseek_v3", lambda x, p, layer: x, "leaves layer 0 unrotated"),
    "latent output de-interleaved": (
        "deepseek_v3", _deepseek_output_deinterleaved, "the rotation right, but its output de-interleaved",
    ),
}  # fmt: skip
"""Misreadings of a config seen in engines (chapter 10 cites the threads): (config, rotate_fn, what the check says)."""


@pytest.mark.parametrize("name", MISREADINGS)
def test_config_check_names_each_misreading(name):
    config, faulty, said = MISREADINGS[name]
    with pytest.raises(AssertionError, match=said):
        assert_rotary_matches_config(faulty, CONFIGS[config])


def test_config_check_reports_a_difference_it_cannot_explain_without_guessing():
    plan = posenc.RotaryPlan.from_config(CONFIGS["llama (v5 rope_parameters)"])

    def slightly_off(x, p, layer):  # base 501000: no known misreading
        kind = plan.layers[layer]
        return dataclasses.replace(
            kind, base=501000.0, scaling=dataclasses.replace(kind.scaling, rope_theta=None)
        ).rotate(x, p)

    with pytest.raises(AssertionError, match=r"layer 0 by .* \(tolerance .*\)\.$"):
        assert_rotary_matches_config(slightly_off, CONFIGS["llama (v5 rope_parameters)"])


@pytest.mark.parametrize("name", ["llama (v5 rope_parameters)", "deepseek_v3"])
def test_config_check_allows_angles_off_by_2_to_the_minus_20_relative(name):
    """Angles off by a relative 2**-21 (eight times float32's precision 2**-24) pass; 2**-19 fail, at every length."""
    plan = posenc.RotaryPlan.from_config(CONFIGS[name])

    def off_by(relative):
        return lambda x, p, layer: plan.layers[layer].rotate(x, p * (1 + relative))

    assert_rotary_matches_config(off_by(2.0**-21), CONFIGS[name])
    with pytest.raises(AssertionError, match="rotate_fn differs"):
        assert_rotary_matches_config(off_by(2.0**-19), CONFIGS[name])


LENGTH_DEPENDENT = {
    # Phi-3's form of longrope (original_max_position_embeddings at the top level); lists of 32 made up here.
    "longrope": {
        "model_type": "phi3", "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 2,
        "max_position_embeddings": 16384, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
        "rope_scaling": {"type": "longrope", "short_factor": [1.0 + 0.05 * i for i in range(32)],
                         "long_factor": [1.0 + 0.5 * i for i in range(32)]},
    },
    # Dynamic NTK on Llama's head: the base enlarged for a call longer than 4096 positions.
    "dynamic": {
        "model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 2,
        "max_position_embeddings": 4096, "rope_theta": 10000.0,
        "rope_scaling": {"rope_type": "dynamic", "factor": 4.0},
    },
}  # fmt: skip
"""Configs whose frequencies depend on the length of the call (posenc.LayerRotary.inverse_frequencies' seq_len)."""


def _frequencies_of_the_longest_call(config):
    """A minimal engine that builds its table once, for a call reaching 4 times the trained length, and uses it at
    every length: for longrope the long factors everywhere (mlx-lm's SuScaledRoPE, chapter 14), for dynamic NTK a
    base enlarged once for the longest context."""
    plan = posenc.RotaryPlan.from_config(config)

    def rotate(x, positions, layer):
        kind = plan.layers[layer]
        inv_freq = kind.inverse_frequencies(seq_len=4 * 4096 + 1)
        angles = np.outer(positions, inv_freq)
        half = kind.rotary_dim // 2
        cos, sin = np.cos(angles), np.sin(angles)
        first, second = x[:, :half], x[:, half:]
        return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=1) * kind.attention_factor

    return rotate


@pytest.mark.parametrize("name", LENGTH_DEPENDENT)
def test_config_check_calls_within_and_beyond_the_trained_length_apart(name):
    """One call reaching beyond the trained length takes the long frequencies for every row, so a check of that one
    call passes an engine that takes them at every length (chapter 14's mlx-lm longrope difference)."""
    config = LENGTH_DEPENDENT[name]
    assert_rotary_matches_config(_by_plan(config), config)
    assert_rotary_matches_config(_Float32Model(config), config)
    with pytest.raises(AssertionError, match="in the call with the positions within the trained length 4096") as error:
        assert_rotary_matches_config(_frequencies_of_the_longest_call(config), config)
    if name == "longrope":
        assert "a known misreading: longrope's long_factor within the trained length" in str(error.value)
        short_everywhere = _replaced(config, scaling=posenc.RopeScaling.from_dict(
            dict(config["rope_scaling"], long_factor=config["rope_scaling"]["short_factor"]),
            max_position_embeddings=16384, original_max_position_embeddings=4096))  # fmt: skip
        with pytest.raises(AssertionError, match="reach beyond the trained length 4096.*short_factor beyond"):
            assert_rotary_matches_config(short_everywhere, config)


@pytest.mark.argument_check
def test_config_check_refuses_what_it_cannot_check():
    mrope = {
        "model_type": "qwen2_vl_text", "hidden_size": 3584, "num_attention_heads": 28, "num_hidden_layers": 1,
        "rope_theta": 1e6, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    }  # fmt: skip
    with pytest.raises(ValueError, match="assert_mrope_axes_match"):
        assert_rotary_matches_config(_by_plan(mrope), mrope)
    without_base = {"model_type": "laguna", "num_hidden_layers": 1, "rope_parameters": {"rope_type": "default"}}
    with pytest.raises(ValueError, match="rope_theta"):  # LagunaConfig fills in no base (LlamaConfig's is 10000)
        assert_rotary_matches_config(print, without_base)
