"""Forgetting attention (FoX): the float64 reference, its properties, the PyTorch side, and fla-core's reference.

Tolerances. The reference (posenc.forgetting_bias) takes float64 cumulative sums; checked against the paper's
sum written out term by term (math.fsum) it agrees to 1e-12 on sums of at most 12 terms of size <= 20. The
PyTorch bias sums in float64 too and rounds once to float32: within 2**-23 of each entry's size. fla-core's
``naive_forgetting_attn`` computes in float32 whatever its inputs (``q.float()``): its output and ours, from
the same float64 inputs (normal draws, 9 tokens), differ by float32 rounding of logits of size <= 10 and of a
softmax-weighted mean of values of size <= 4: 3.3e-7 measured, 1e-5 asserted.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from fla_reference import FLA_VERSION, naive
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention.flex_attention import flex_attention
from torch.nn.functional import logsigmoid, scaled_dot_product_attention

import posenc
from posenc.nn import ForgettingGate, forgetting_bias, forgetting_score_mod

LOGS = st.lists(st.floats(-20.0, 0.0), min_size=1, max_size=12)


def literal_bias(logs: list[float], q_len: int) -> np.ndarray:
    """The paper's D_ij = sum of log f_l for l = j+1 .. i, each entry summed on its own (exactly rounded)."""
    k_len = len(logs)
    bias = np.full((q_len, k_len), -np.inf)
    for i in range(q_len):
        token = k_len - q_len + i
        for j in range(token + 1):
            bias[i, j] = math.fsum(logs[j + 1 : token + 1])
    return bias


@given(logs=LOGS, data=st.data())
def test_reference_is_the_papers_sum(logs, data):
    q_len = data.draw(st.integers(0, len(logs)), label="q_len")
    got = posenc.forgetting_bias(np.array(logs), q_len=q_len)
    expected = literal_bias(logs, q_len)
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=0, atol=1e-12)


def test_a_constant_gate_is_alibi():
    """f = e^(-1/2) at every token: D_ij = -(i - j) / 2, ALiBi's bias for the first of 8 heads (slope 1/2)."""
    np.testing.assert_array_equal(posenc.forgetting_bias(np.full(7, -0.5)), posenc.alibi_bias(8, 7)[0])


def test_gates_at_one_are_plain_causal_softmax():
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 6, 8, generator=generator) for _ in range(3))
    bias = forgetting_bias(torch.zeros(2, 3, 6))
    assert torch.equal(bias == 0, torch.ones(6, 6, dtype=torch.bool).tril().expand(2, 3, 6, 6))
    fox = scaled_dot_product_attention(q, k, v, attn_mask=bias)
    torch.testing.assert_close(fox, scaled_dot_product_attention(q, k, v, is_causal=True), rtol=0, atol=1e-6)


@settings(max_examples=20)
@given(seed=st.integers(0, 2**16), k_len=st.integers(1, 40), data=st.data())
def test_float32_bias_is_one_rounding_from_the_reference(seed, k_len, data):
    q_len = data.draw(st.integers(0, k_len), label="q_len")
    logs = logsigmoid(torch.randn(2, k_len, generator=torch.Generator().manual_seed(seed)) * 4)
    got = forgetting_bias(logs, q_len=q_len).double().numpy()
    expected = posenc.forgetting_bias(logs.double().numpy(), q_len=q_len)
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected))
    finite = np.isfinite(expected)
    assert np.all(np.abs(got[finite] - expected[finite]) <= 2.0**-23 * np.abs(expected[finite]))


def test_the_gate_module_gives_log_sigmoid_of_a_linear_map():
    torch.manual_seed(0)
    gate = ForgettingGate(16, 4).double()
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    expected = logsigmoid(x @ gate.proj.weight.T + gate.proj.bias).transpose(1, 2)
    torch.testing.assert_close(gate(x), expected, rtol=0, atol=1e-15)
    assert gate(x).shape == (2, 4, 5) and bool((gate(x) <= 0).all())


def test_matches_fla_cores_naive_forgetting_attention():
    """fla-core's reference takes (batch, seq, heads, head_dim) and the log gates as (batch, seq, heads)."""
    module = naive("forgetting_attn")
    generator = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 9, 3, 8, dtype=torch.float64, generator=generator) for _ in range(3))
    log_forget = logsigmoid(torch.randn(2, 9, 3, dtype=torch.float64, generator=generator))
    expected = module.naive_forgetting_attn(q, k, v, log_forget)
    heads = [t.transpose(1, 2) for t in (q, k, v)]
    ours = scaled_dot_product_attention(*heads, attn_mask=forgetting_bias(log_forget.transpose(1, 2)))
    assert FLA_VERSION == "0.6.0"
    torch.testing.assert_close(ours.transpose(1, 2), expected.double(), rtol=0, atol=1e-5)


# --- FlexAttention --------------------------------------------------------------------------------------------


def eager_flex(*args, **kwargs) -> torch.Tensor:
    """flex_attention uncompiled; its warning that it materialises the scores is the only one allowed."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = flex_attention(*args, **kwargs)
    assert all("flex_attention called without torch.compile" in str(w.message) for w in caught)
    return out


@pytest.mark.parametrize(("q_len", "k_len"), [(7, 7), (1, 7), (3, 10)])
def test_score_mod_is_the_dense_bias_and_gives_its_attention(q_len, k_len):
    generator = torch.Generator().manual_seed(2)
    log_forget = logsigmoid(torch.randn(2, 3, k_len, generator=generator) * 3)
    mod = forgetting_score_mod(log_forget, offset=torch.tensor(k_len - q_len))
    dense = forgetting_bias(log_forget, q_len=q_len)
    index = (torch.arange(2)[:, None, None, None], torch.arange(3)[:, None, None], torch.arange(q_len)[:, None])
    assert torch.equal(mod(torch.zeros(()), *index, torch.arange(k_len)), dense)
    q = torch.randn(2, 3, q_len, 8, generator=generator)
    k, v = (torch.randn(2, 3, k_len, 8, generator=generator) for _ in range(2))
    got = eager_flex(q, k, v, score_mod=mod)
    torch.testing.assert_close(got, scaled_dot_product_attention(q, k, v, attn_mask=dense), rtol=0, atol=2e-6)


def test_gradients_flow_to_the_gates_and_inputs():
    generator = torch.Generator().manual_seed(3)
    gate = ForgettingGate(6, 2).double()
    x = torch.randn(1, 4, 6, dtype=torch.float64, generator=generator, requires_grad=True)
    q, k, v = (torch.randn(1, 2, 4, 3, dtype=torch.float64, generator=generator) for _ in range(3))

    def attention(x):
        return scaled_dot_product_attention(q, k, v, attn_mask=forgetting_bias(gate(x)))

    assert torch.autograd.gradcheck(attention, (x,))
    attention(x).sum().backward()
    assert gate.proj.weight.grad is not None and bool(gate.proj.weight.grad.abs().sum() > 0)
