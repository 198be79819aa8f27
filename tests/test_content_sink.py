"""A learned attention sink: the reference and module against transformers' GPT-OSS, and its properties.

Tolerances. transformers' ``eager_attention_forward`` (GPT-OSS) and AttentionSink take the same float32 softmax
over the same columns (transformers subtracts the row's maximum first, which softmax does inside): 1e-6 on
weights in [0, 1] and on outputs of size <= 4 (0 measured). The float64 reference is within 1e-6 of float32
weights (7.7e-8 measured). FlexAttention's output rescaled by the log-sum-exp agrees with the dense weights'
output to 2e-6, the float32 rounding of the two paths, as in tests/test_flex.py.
"""

from __future__ import annotations

import math
import types
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.nn.attention.flex_attention import AuxRequest, flex_attention
from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward

import posenc
from posenc.nn import AttentionSink

pytestmark = pytest.mark.usefixtures("quiet_transformers")

HEADS, SEQ, HEAD_DIM = 3, 7, 8


def causal_logits(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v of shape (2, HEADS, SEQ, HEAD_DIM) and the causal mask GPT-OSS adds to the scaled logits."""
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, HEADS, SEQ, HEAD_DIM, generator=generator) for _ in range(3))
    return q, k, v, torch.full((SEQ, SEQ), -math.inf).triu(1)


def test_weights_and_output_match_transformers_gpt_oss():
    q, k, v, mask = causal_logits(0)
    sink = AttentionSink(HEADS)
    with torch.no_grad():
        sink.sinks.copy_(torch.tensor([-1.0, 0.5, 3.0]))
    layer = types.SimpleNamespace(sinks=sink.sinks.detach(), num_key_value_groups=1, training=False)
    expected_out, expected_weights = eager_attention_forward(layer, q, k, v, mask, scaling=HEAD_DIM**-0.5)
    weights = sink(q @ k.transpose(-1, -2) * HEAD_DIM**-0.5 + mask).detach()
    torch.testing.assert_close(weights, expected_weights, rtol=0, atol=1e-6)
    torch.testing.assert_close((weights @ v).transpose(1, 2), expected_out, rtol=0, atol=1e-6)
    reference = posenc.sink_softmax((q @ k.transpose(-1, -2) * HEAD_DIM**-0.5 + mask).double().numpy(), [-1, 0.5, 3])
    np.testing.assert_allclose(weights.double().numpy(), reference, rtol=0, atol=1e-6)


LOGIT_ROWS = st.lists(st.floats(-30.0, 30.0), min_size=1, max_size=10)


@given(row=LOGIT_ROWS, sink=st.floats(-30.0, 30.0))
def test_reference_is_the_formula_and_the_rows_lose_the_sinks_share(row, sink):
    weights = posenc.sink_softmax(np.array(row)[None, None, :], [sink])[0, 0]
    denominator = math.fsum([math.exp(sink)] + [math.exp(z) for z in row])
    np.testing.assert_allclose(weights, [math.exp(z) / denominator for z in row], rtol=1e-12, atol=0)
    lse = math.log(math.fsum(math.exp(z) for z in row))
    assert abs(weights.sum() - 1.0 / (1.0 + math.exp(sink - lse))) <= 1e-12


@given(row=LOGIT_ROWS)
def test_a_sink_at_minus_infinity_is_plain_softmax(row):
    logits = np.array(row)[None, None, :]
    plain = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    np.testing.assert_allclose(posenc.sink_softmax(logits, [-np.inf]), plain, rtol=1e-12, atol=0)
    sink = AttentionSink(1)
    with torch.no_grad():
        sink.sinks.fill_(-math.inf)
    tensor = torch.tensor(logits)
    torch.testing.assert_close(sink(tensor).detach(), torch.softmax(tensor, -1), rtol=0, atol=1e-15)


def test_rescaling_flex_attentions_output_applies_the_sink():
    q, k, v, mask = causal_logits(1)
    sink = AttentionSink(HEADS)
    with torch.no_grad():
        sink.sinks.copy_(torch.tensor([-2.0, 0.0, 1.5]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, aux = flex_attention(
            q,
            k,
            v,
            score_mod=lambda score, b, h, i, j: torch.where(j > i, -math.inf, score),
            return_aux=AuxRequest(lse=True),
        )
    assert all("flex_attention called without torch.compile" in str(w.message) for w in caught)
    dense = sink(q @ k.transpose(-1, -2) * HEAD_DIM**-0.5 + mask) @ v
    torch.testing.assert_close(sink.rescale(out, aux.lse).detach(), dense.detach(), rtol=0, atol=2e-6)


def test_gradients_reach_the_sinks():
    generator = torch.Generator().manual_seed(2)
    logits = torch.randn(1, 2, 3, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    sinks = torch.tensor([0.3, -1.0], dtype=torch.float64, requires_grad=True)
    sink = AttentionSink(2).double()

    def weights(logits, sinks):
        del sink.sinks
        sink.sinks = sinks
        try:
            return sink(logits)
        finally:
            del sink.sinks
            sink.sinks = torch.nn.Parameter(sinks.detach().clone())

    assert torch.autograd.gradcheck(weights, (logits, sinks))
