"""posenc.testing's checks for the bug families of 2024-2026 (chapter 10, families 7 and on).

Each faulty implementation reproduces, in a few lines written here, the mechanism of a bug reported in a public
issue tracker (the chapter cites each thread); posenc's own implementations must pass the same check. A check
that let one of the faulty ones through, or that failed on posenc, would be a wrong check.
"""

import functools
import math

import numpy as np
import pytest
import torch

import posenc
from posenc.nn import ALiBiBias, MultiAxisRotaryEmbedding, RotaryEmbedding
from posenc.testing import (
    assert_alibi_offset_matches_slice,
    assert_mrope_axes_match,
    assert_rotary_angles_accurate,
    assert_yarn_attention_factor,
)

# --- Family 7: an ALiBi bias that vanishes during cached decoding (keras-team/keras-hub#2861, #2977) ------------


def falcon_bias(n_heads, over_cache=True):
    """Falcon's form, slope x key index from a cumulative sum of ones, over the cache (fixed) or the queries."""

    def bias(q_len, k_len):
        ones = np.ones((1, k_len if over_cache else q_len))  # (batch, length)
        index = np.cumsum(ones, axis=-1) - 1
        return posenc.alibi_slopes(n_heads)[None, :, None, None] * index[:, None, None, :]

    return bias


def offset_dropped(n_heads):
    """The queries placed at positions 0, 1, ... instead of at the end of the cache."""
    return lambda q_len, k_len: posenc.alibi_bias(n_heads, q_len, k_len, causal=False, offset=0)


@pytest.mark.parametrize("n_heads", [1, 6, 8, 12])
def test_posenc_alibi_passes_at_every_query_length(n_heads):
    q_lens = (1, 2, 7, 32)
    assert_alibi_offset_matches_slice(
        functools.partial(posenc.alibi_bias, n_heads), n_heads=n_heads, k_len=32, q_lens=q_lens
    )
    assert_alibi_offset_matches_slice(ALiBiBias(n_heads), n_heads=n_heads, k_len=32, q_lens=q_lens)


def test_a_bias_that_differs_by_a_constant_per_row_passes():
    """Softmax ignores a constant per query row: slope x j (BLOOM's, Falcon's form) is ALiBi's bias."""
    assert_alibi_offset_matches_slice(falcon_bias(8), q_lens=(1, 3, 16))
    shifted = lambda q, k: posenc.alibi_bias(8, q, k) + np.arange(q)[:, None] * 3.0  # noqa: E731
    assert_alibi_offset_matches_slice(shifted, q_lens=(1, 5))


def test_a_causal_mask_outside_the_visible_keys_is_free():
    def masked(q_len, k_len):
        bias = posenc.alibi_bias(8, q_len, k_len, causal=False)
        future = np.arange(k_len)[None, :] > (k_len - q_len) + np.arange(q_len)[:, None]
        return np.where(future, np.inf, bias)  # anything there, even +inf

    assert_alibi_offset_matches_slice(masked, q_lens=(1, 4))


def test_a_bias_over_the_queries_alone_is_caught_at_one_query():
    """keras-hub's Falcon: right without a cache, zero bias (slope x 0, broadcast) at every decoding step."""
    faulty = falcon_bias(8, over_cache=False)
    assert_alibi_offset_matches_slice(faulty, q_lens=(16,))  # the full pass is right: no cache, no bug
    with pytest.raises(AssertionError, match="constant along the keys"):
        assert_alibi_offset_matches_slice(faulty, q_lens=(1,))
    decoded = np.broadcast_to(faulty(1, 16)[0], (8, 1, 16))
    assert np.all(decoded == 0.0)  # the whole bias of the decoding step is zero
    # several queries: the shape does not broadcast over the cache, which keras-hub's issue reported as an error
    with pytest.raises(AssertionError, match="does not broadcast"):
        assert_alibi_offset_matches_slice(faulty, q_lens=(3,))


def test_queries_placed_at_the_start_are_caught():
    with pytest.raises(AssertionError, match=r"query position 15, head 0") as caught:
        assert_alibi_offset_matches_slice(offset_dropped(8), q_lens=(1,))
    assert "as if the queries started at position 0" in str(caught.value)
    with pytest.raises(AssertionError, match=r"bias_fn\(3, 16\)"):
        assert_alibi_offset_matches_slice(offset_dropped(8), q_lens=(16, 3))


def test_a_flipped_sign_is_caught():
    """The bias must fall with the distance: +slope x (i - j) favours the farthest keys."""
    flipped = lambda q, k: -posenc.alibi_bias(8, q, k, causal=False)  # noqa: E731
    with pytest.raises(AssertionError, match="differs from ALiBi's"):
        assert_alibi_offset_matches_slice(flipped)


def test_other_slopes_and_a_masked_visible_key_are_caught():
    def plain(q_len, k_len):  # the plain sequence 2**(-8h/n) for 6 heads (ml-explore/mlx#343)
        distance = (k_len - q_len + np.arange(q_len))[:, None] - np.arange(k_len)
        return -(2.0 ** -np.arange(1, 7))[:, None, None] * distance

    with pytest.raises(AssertionError, match="head 4"):  # 2**-5 where ALiBi's 6 heads have 2**-1
        assert_alibi_offset_matches_slice(plain, n_heads=6)

    def hides_the_diagonal(q_len, k_len):
        bias = posenc.alibi_bias(8, q_len, k_len).copy()
        bias[:, :, -1] = -np.inf  # the last key is the query itself, always visible
        return bias

    with pytest.raises(AssertionError, match="inf"):
        assert_alibi_offset_matches_slice(hides_the_diagonal)


def test_an_implementation_that_raises_fails_the_check():
    def crashes(q_len, k_len):
        raise RuntimeError("The size of tensor a (32) must match the size of tensor b (8)")

    with pytest.raises(AssertionError, match=r"bias_fn\(1, 16\) raised RuntimeError") as caught:
        assert_alibi_offset_matches_slice(crashes)
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_a_float32_module_passes_within_its_rounding():
    """Float32 biases of a 1024-key cache: rounding of values up to 255.75 (2**-22 relative), below atol = 1e-5."""
    module = ALiBiBias(4)
    assert_alibi_offset_matches_slice(module, n_heads=4, k_len=1024, q_lens=(1, 3))
    assert module(1, 1024).dtype == torch.float32


# --- Family 8: a rotary table shorter than the context (vllm-project/semantic-router#3388, #3451) --------------


def table_rotary(length, past_the_end="raise", head_dim=64):
    """cos/sin tables of ``length`` positions read by position: indexed (raises), clamped or wrapped past the end."""
    angles = np.outer(np.arange(length), posenc.rotary_frequencies(head_dim))
    cos, sin = np.cos(angles), np.sin(angles)

    def rotate(x, positions):
        rows = np.asarray(positions).astype(np.int64)
        if past_the_end != "raise":
            rows = np.take(np.arange(length), rows, mode=past_the_end)
        out = x.copy()
        out[..., 0::2] = x[..., 0::2] * cos[rows] - x[..., 1::2] * sin[rows]
        out[..., 1::2] = x[..., 0::2] * sin[rows] + x[..., 1::2] * cos[rows]
        return out

    return rotate


def test_a_table_indexed_past_its_end_fails_with_the_error():
    with pytest.raises(AssertionError, match="raised IndexError") as caught:
        assert_rotary_angles_accurate(table_rotary(2048))
    assert isinstance(caught.value.__cause__, IndexError)
    assert_rotary_angles_accurate(table_rotary(2048), n_positions=2048)  # within the table it is right


@pytest.mark.parametrize(
    ("mode", "name", "reads"), [("clip", "clamped", "position 2047"), ("wrap", "wrapped", "mod 2048")]
)
def test_a_table_clamped_or_wrapped_past_its_end_is_named(mode, name, reads):
    with pytest.raises(AssertionError, match="the first wrong position is 2048") as caught:
        assert_rotary_angles_accurate(table_rotary(2048, mode))
    message = str(caught.value)
    assert f"a table of 2048 positions, {name} past its end" in message
    assert reads in message and "float16" not in message
    assert_rotary_angles_accurate(table_rotary(2048, mode), n_positions=2048)


@pytest.mark.parametrize("length", [1, 3, 1000])
def test_any_table_length_is_found(length):
    with pytest.raises(AssertionError, match=f"a table of {length} positions, clamped"):
        assert_rotary_angles_accurate(table_rotary(length, "clip", head_dim=8), head_dim=8, n_positions=4096)


def test_precision_errors_keep_the_precision_hint():
    """bfloat16 positions repeat values above 256 without being a short table: the hint must not say clamped."""

    def bf16_positions(x, positions):
        rounded = torch.as_tensor(positions).to(torch.bfloat16).double().numpy()
        return posenc.rotate(x, rounded)

    with pytest.raises(AssertionError, match="float16 or bfloat16") as caught:
        assert_rotary_angles_accurate(bf16_positions)
    assert "past its end" not in str(caught.value)


def test_a_refusal_that_names_the_limit_passes_within_it():
    """The fix of vllm-project/semantic-router#3451: a guard that names the limit, and the table within it."""
    table = table_rotary(2048)

    def guarded(x, positions):
        if len(positions) > 2048:
            raise ValueError(f"seq_len must be at most max_position_embeddings = 2048, got {len(positions)}")
        return table(x, positions)

    assert_rotary_angles_accurate(guarded, n_positions=2048)
    with pytest.raises(AssertionError, match="raised ValueError: seq_len must be at most"):
        assert_rotary_angles_accurate(guarded, n_positions=2049)


# --- Family 9: YaRN's attention factor and DeepSeek's two mscale coefficients (vllm-project/vllm#48621) ---------

MINISTRAL3_LIKE = {  # factor 16 and both coefficients 1, as in the issue
    "rope_type": "yarn",
    "factor": 16.0,
    "original_max_position_embeddings": 4096,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
}
V2_LITE_LIKE = {  # factor 40 and both coefficients 0.707, as in kekzl/imp#880
    "rope_type": "yarn",
    "factor": 40.0,
    "original_max_position_embeddings": 4096,
    "mscale": 0.707,
    "mscale_all_dim": 0.707,
}


def yarn_times(scaling, factor):
    """YaRN's frequencies of ``scaling``, the rotated q and k multiplied by ``factor`` (a cos/sin multiplier)."""
    frequencies_only = dict(scaling, attention_factor=1.0)
    return lambda x, positions: factor * posenc.rotate(x, positions, scaling=frequencies_only)


def m(s, coefficient=1.0):
    return 0.1 * coefficient * math.log(s) + 1.0


@pytest.mark.parametrize("scaling", [MINISTRAL3_LIKE, V2_LITE_LIKE, {**MINISTRAL3_LIKE, "mscale_all_dim": 0.5}])
def test_posenc_passes_with_its_own_factor(scaling):
    assert_yarn_attention_factor(lambda x, p: posenc.rotate(x, p, scaling=scaling), scaling)
    module = RotaryEmbedding(64, scaling=scaling)
    assert_yarn_attention_factor(module, scaling, rtol=1e-6)  # float32 output: relative 1e-7 per entry


def test_the_coefficients_dropped_are_caught():
    """vLLM's generic YaRN: 0.1 ln 16 + 1 = 1.2773 where transformers gives 1 (logits 1.63 times too large)."""
    faulty = yarn_times(MINISTRAL3_LIKE, m(16.0))
    with pytest.raises(AssertionError, match="as if mscale and mscale_all_dim were absent") as caught:
        assert_yarn_attention_factor(faulty, MINISTRAL3_LIKE)
    assert "1.27726" in str(caught.value) and "1.631" in str(caught.value)
    assert posenc.rotary_attention_factor(MINISTRAL3_LIKE) == 1.0
    # without the two keys, the same factor is YaRN's own, and right
    plain = {key: MINISTRAL3_LIKE[key] for key in ("rope_type", "factor", "original_max_position_embeddings")}
    assert_yarn_attention_factor(faulty, plain)


def test_one_coefficient_alone_is_caught():
    """kekzl/imp#880: 0.1 x 0.707 ln 40 + 1 = 1.261 on cos and sin where the ratio, 1, was due."""
    faulty = yarn_times(V2_LITE_LIKE, m(40.0, 0.707))
    with pytest.raises(AssertionError, match="where the ratio of mscale's term"):
        assert_yarn_attention_factor(faulty, V2_LITE_LIKE)


def test_a_missing_factor_and_a_position_dependent_one_are_caught():
    plain = {key: MINISTRAL3_LIKE[key] for key in ("rope_type", "factor", "original_max_position_embeddings")}
    with pytest.raises(AssertionError, match="no attention factor at all"):
        assert_yarn_attention_factor(yarn_times(plain, 1.0), plain)

    def growing(x, positions):  # a factor that depends on the position
        return (1.0 + 1e-3 * positions[:, None]) * posenc.rotate(x, positions, scaling=plain)

    with pytest.raises(AssertionError, match=r"\(from 1.27726 to .* first at position 1:"):
        assert_yarn_attention_factor(growing, plain)


def test_an_explicit_attention_factor_wins():
    """transformers and posenc: a given attention_factor replaces the derived one (vllm-project/vllm#48351)."""
    given = {**MINISTRAL3_LIKE, "attention_factor": 1.5}
    assert_yarn_attention_factor(yarn_times(MINISTRAL3_LIKE, 1.5), given)
    with pytest.raises(AssertionError, match="attention factor of this scaling is 1.5"):
        assert_yarn_attention_factor(yarn_times(MINISTRAL3_LIKE, m(16.0)), given)


# --- Family 10: an M-RoPE kernel hard-coded for the chunked assignment (vllm-project/vllm-gaudi#1437) ----------

QWEN3_VL = [24, 20, 20]  # mrope_section of head_dim 128, interleaved
QWEN2_VL = [16, 24, 24]  # chunked


def hand_kernel(sections, interleave, head_dim=128, halves=False):
    """cos/sin of every pair for each axis, then one axis per pair: in chunks, or every third pair from 1 and 2."""
    pairs = np.arange(head_dim // 2)
    if interleave:
        axis = np.zeros(head_dim // 2, dtype=int)
        axis[(pairs % 3 == 1) & (pairs < 3 * sections[1])] = 1
        axis[(pairs % 3 == 2) & (pairs < 3 * sections[2])] = 2
    else:
        axis = np.repeat([0, 1, 2], sections)
    omega = posenc.rotary_frequencies(head_dim)

    def rotate(x, positions):
        angles = np.asarray(positions)[:, axis] * omega  # (seq, pairs)
        first, second = (pairs, pairs + head_dim // 2) if halves else (2 * pairs, 2 * pairs + 1)
        out = x.copy()
        out[:, first] = x[:, first] * np.cos(angles) - x[:, second] * np.sin(angles)
        out[:, second] = x[:, first] * np.sin(angles) + x[:, second] * np.cos(angles)
        return out

    return rotate


@pytest.mark.parametrize(("sections", "assignment"), [(QWEN3_VL, "interleaved"), (QWEN2_VL, "chunked")])
def test_posenc_and_a_right_kernel_pass(sections, assignment):
    frequencies = posenc.mrope_frequencies(128, sections, assignment=assignment)
    for layout in ("interleaved", "halves"):
        module = MultiAxisRotaryEmbedding(frequencies, layout=layout)
        assert_mrope_axes_match(module, sections, assignment=assignment, layout=layout)
        kernel = hand_kernel(sections, assignment == "interleaved", halves=layout == "halves")
        assert_mrope_axes_match(kernel, sections, assignment=assignment, layout=layout)


def test_a_kernel_that_always_chunks_is_caught_on_qwen3_vl():
    """vllm-gaudi#1437: the split/concat mapping kept for an interleaved model."""
    chunking = hand_kernel(QWEN3_VL, interleave=False)
    with pytest.raises(AssertionError, match="follow the chunked assignment of the same sections") as caught:
        assert_mrope_axes_match(chunking, QWEN3_VL, assignment="interleaved")
    assert "pair 1 follows time, not height" in str(caught.value)
    # on text (equal coordinates) the two kernels agree: why text-only tests pass
    x = np.random.default_rng(0).standard_normal((5, 128))
    text = np.repeat(np.arange(5.0)[:, None], 3, axis=1)
    right = hand_kernel(QWEN3_VL, interleave=True)
    assert np.allclose(chunking(x, text), right(x, text), rtol=0, atol=1e-12)


def test_interleaving_a_chunked_model_is_caught():
    sections = [22, 21, 21]  # the counts of both assignments for 64 pairs
    with pytest.raises(AssertionError, match="follow the interleaved assignment"):
        assert_mrope_axes_match(hand_kernel(sections, interleave=True), sections, assignment="chunked")


def test_swapped_axes_and_wrong_frequencies_are_caught():
    swapped = hand_kernel([16, 24, 24], interleave=False)

    def height_width_swapped(x, positions):
        return swapped(x, np.asarray(positions)[:, [0, 2, 1]])

    with pytest.raises(AssertionError, match="follows width, not height"):
        assert_mrope_axes_match(height_width_swapped, QWEN2_VL)
    frequencies = posenc.mrope_frequencies(128, QWEN2_VL, base=500000.0)
    with pytest.raises(AssertionError, match="every pair follows the right axis, but angles are off"):
        assert_mrope_axes_match(lambda x, p: posenc.rotate_multiaxis(x, p, frequencies), QWEN2_VL)
