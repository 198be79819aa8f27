"""The FlexAttention score_mods of ALiBiBias and T5RelativeBias give the dense bias's attention and gradients.

Three levels: the score_mod called directly on broadcast index tensors equals the module's dense bias exactly
(the same integer relative positions and the same float32 products, nothing transcendental); flex_attention with
the score_mod equals ``scaled_dot_product_attention`` with the dense bias as ``attn_mask`` (float32, see
``ATOL``); and the gradient reaching T5's learned table through flex_attention equals the dense path's.

flex_attention runs uncompiled here (PyTorch compiles the score_mod with its eager backend, a few seconds
once) except in one test of the compiled kernel, the only path without the ``(L, L)`` scores; that one also
checks that a new decode offset does not recompile. Uncompiled flex_attention warns once per process that it
materialises the scores, and compiling imports a module of PyTorch that warns of a deprecation:
``only_warnings`` records those two and fails on any other.
"""

import contextlib
import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
from torch.nn.functional import scaled_dot_product_attention

from posenc import MAX_TABLE_ELEMENTS
from posenc.nn import ALiBiBias, T5RelativeBias
from posenc.nn.flex import causal_mask_mod

ATOL = 2e-6
"""Flex and SDPA attention outputs differ by float32 rounding only: each output is a softmax-weighted mean of
values of magnitude <= 4 (normal draws, 8 x 12 of them), computed by both in float32 with different orders of
exponentiation and summation; a few units in the last place of 4 (4.8e-7 each) stay below 2e-6."""

HEADS, HEAD_DIM = 4, 8


def qkv(q_len: int, k_len: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(2, HEADS, q_len, HEAD_DIM, generator=generator)
    k, v = (torch.randn(2, HEADS, k_len, HEAD_DIM, generator=generator) for _ in range(2))
    return q, k, v


@contextlib.contextmanager
def only_warnings(*allowed: str):
    """Record the warnings of the block and fail on any whose message contains none of ``allowed``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    others = [str(w.message) for w in caught if not any(text in str(w.message) for text in allowed)]
    assert others == []


UNCOMPILED = "flex_attention called without torch.compile"
"""Uncompiled flex_attention's warning (once per process) that it materialises the scores."""

INDUCTOR_IMPORT = "`torch.jit.script_method` is deprecated"
"""A DeprecationWarning raised inside PyTorch when torch.compile's inductor first imports its mkldnn module."""


def eager_flex(*args, **kwargs) -> torch.Tensor:
    """flex_attention uncompiled, allowing only its warning that it is uncompiled."""
    with only_warnings(UNCOMPILED):
        return flex_attention(*args, **kwargs)


def broadcast_indices(q_len: int, k_len: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(head, query, key) index tensors that broadcast to (HEADS, q_len, k_len), int32 as flex_attention's."""
    return (
        torch.arange(HEADS, dtype=torch.int32)[:, None, None],
        torch.arange(q_len, dtype=torch.int32)[:, None],
        torch.arange(k_len, dtype=torch.int32),
    )


# --- The score_mod is the dense bias, exactly ----------------------------------------------------------------


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(("q_len", "k_len", "offset"), [(6, 6, 0), (3, 9, 6), (1, 20, 7), (4, 10, 2**40)])
def test_alibi_score_mod_equals_the_dense_bias(causal, q_len, k_len, offset):
    alibi = ALiBiBias(HEADS)
    mod = alibi.score_mod(causal=causal, offset=torch.tensor(offset))
    got = mod(torch.zeros(()), torch.tensor(0), *broadcast_indices(q_len, k_len))
    assert torch.equal(got, alibi(q_len, k_len, causal=causal, offset=offset))


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(("q_len", "k_len", "offset"), [(5, 5, 0), (3, 300, 150), (2, 40, -60), (1, 8, 2**45)])
def test_t5_score_mod_equals_the_dense_bias(bidirectional, q_len, k_len, offset):
    """Relative positions beyond max_distance (24) on both sides, where the score_mod clamps its lookup index."""
    torch.manual_seed(0)
    bias = T5RelativeBias(HEADS, bidirectional=bidirectional, num_buckets=16, max_distance=24)
    mod = bias.score_mod(offset=offset)
    got = mod(torch.zeros(()), torch.tensor(0), *broadcast_indices(q_len, k_len))
    assert torch.equal(got, bias(q_len, k_len, offset=offset))


@pytest.mark.argument_check
def test_the_dense_guard_points_to_the_score_mod():
    """32 heads at 8192 tokens is over MAX_TABLE_ELEMENTS as a dense bias; the message names the way out."""
    assert 32 * 8192 * 8192 > MAX_TABLE_ELEMENTS
    for module in (ALiBiBias(32), T5RelativeBias(32)):
        with pytest.raises(ValueError, match=r"score_mod\(\) with torch\.nn\.attention\.flex_attention"):
            module(8192)


# --- flex_attention with the score_mod is SDPA with the dense bias ----------------------------------------------


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(("q_len", "k_len"), [(12, 12), (5, 12)])
def test_alibi_flex_attention_equals_sdpa_with_the_dense_bias(causal, q_len, k_len):
    q, k, v = qkv(q_len, k_len, seed=1)
    alibi = ALiBiBias(HEADS)
    offset = k_len - q_len  # the queries are the last tokens: a chunk decoded after a cache
    expected = scaled_dot_product_attention(q, k, v, attn_mask=alibi(q_len, k_len, causal=causal))
    got = eager_flex(q, k, v, score_mod=alibi.score_mod(causal=causal, offset=offset))
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)


def test_alibi_static_cache_offset():
    """A static cache of 16 slots holding 9 tokens: 3 new queries at positions 6, 7, 8 see keys 0..8 only."""
    q, k, v = qkv(3, 16, seed=2)
    alibi = ALiBiBias(HEADS)
    expected = scaled_dot_product_attention(q, k[:, :, :9], v[:, :, :9], attn_mask=alibi(3, 9))
    got = eager_flex(q, k, v, score_mod=alibi.score_mod(offset=torch.tensor(6)))
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_flex_attention_and_table_gradient_equal_the_dense_path(bidirectional):
    """With a query offset; the gradient of a weighted sum of the outputs reaches the table as on the dense path.

    Tolerance: the gradient of each table entry sums up to 2 * 5 * 30 per-pair terms, each of size <= ~4, in
    float32 in different orders; 2e-5 absolute is about 40 units in the last place of the largest entries.
    """
    torch.manual_seed(3)
    bias = T5RelativeBias(HEADS, bidirectional=bidirectional, num_buckets=8, max_distance=12)
    q, k, v = qkv(5, 30, seed=4)
    weights = torch.randn(2, HEADS, 5, HEAD_DIM, generator=torch.Generator().manual_seed(5))
    offset = 20  # positions 20..24 among 30 keys: keys after the queries too, in their own buckets when bidirectional

    dense = scaled_dot_product_attention(q, k, v, attn_mask=bias(5, 30, offset=offset))
    (dense * weights).sum().backward()
    dense_grad = bias.relative_attention_bias.weight.grad.clone()
    bias.zero_grad()

    flex = eager_flex(q, k, v, score_mod=bias.score_mod(offset=torch.tensor(offset)))
    (flex * weights).sum().backward()
    flex_grad = bias.relative_attention_bias.weight.grad

    torch.testing.assert_close(flex, dense, atol=ATOL, rtol=0)
    assert dense_grad.abs().sum() > 0
    torch.testing.assert_close(flex_grad, dense_grad, atol=2e-5, rtol=0)


# --- Compiled: the kernel without the (L, L) scores, and no recompilation across decode offsets ----------------


@pytest.mark.skipif(
    torch.backends.cpu.get_cpu_capability() == "DEFAULT",
    reason="PyTorch compiles FlexAttention for the CPU only with AVX2 kernels (check_cpu_supported in "
    "torch/_inductor/kernel/flex/flex_cpu.py); without them flex_attention runs uncompiled, as the tests above run it",
)
def test_compiled_alibi_with_a_block_mask_and_no_recompilation_across_offsets():
    """Decode steps at offsets 9, 10, 11 through one compiled flex_attention, each checked against SDPA."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        compiled_decode_steps()
    finally:
        torch.set_num_threads(threads)


def compiled_decode_steps():
    alibi = ALiBiBias(HEADS)
    with only_warnings(INDUCTOR_IMPORT):  # compile's first call imports inductor
        attention = torch.compile(flex_attention, dynamic=False)
    q, k, v = qkv(1, 16, seed=6)
    with torch.no_grad():  # CPU FlexAttention computes no gradient for q, k, v; its forward skips the LSE then
        for step, offset in enumerate((9, 10, 11)):
            block_mask = create_block_mask(causal_mask_mod(offset), None, None, 1, 16, device="cpu")
            with torch.compiler.set_stance("fail_on_recompile" if step else "default"):
                got = attention(q, k, v, score_mod=alibi.score_mod(offset=torch.tensor(offset)), block_mask=block_mask)
            keys = offset + 1
            expected = scaled_dot_product_attention(q, k[:, :, :keys], v[:, :, :keys], attn_mask=alibi(1, keys))
            torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)
