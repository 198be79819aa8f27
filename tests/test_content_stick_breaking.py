"""Stick-breaking attention: the float64 reference against the paper's product, its properties, and fla-core.

Tolerances. The reference sums logarithms (float64); the paper's product written out (math.prod of
1 - sigmoid) agrees to 1e-12 for logits in [-10, 10] and 12 keys. The PyTorch weights (float32, log space)
are within 1e-6 of the reference for logits of size <= 12 over 9 keys: each log-weight is a sum of at most
9 float32 roundings of terms of size <= 12 (about 9 * 12 * 6e-8 = 6.5e-6 relative to exp's argument at
worst, far less on average; 4e-8 measured), and a weight is at most 1. fla-core's ``naive_stickbreaking_attn``
keeps float64 inputs in float64: it and ours agree to 1e-12 (6.7e-16 measured).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from fla_reference import naive
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.nn import stick_breaking_attention, stick_breaking_weights


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def literal_weights(logits: np.ndarray, offset: int, attend_current: bool) -> np.ndarray:
    """A_ij = sigmoid(z_ij) * prod over the seen keys k > j of (1 - sigmoid(z_ik)), written out."""
    q_len, k_len = logits.shape
    weights = np.zeros_like(logits)
    for i in range(q_len):
        last = offset + i if attend_current else offset + i - 1
        for j in range(min(last, k_len - 1) + 1):
            later = range(j + 1, min(last, k_len - 1) + 1)
            weights[i, j] = sigmoid(logits[i, j]) * math.prod(1.0 - sigmoid(logits[i, k]) for k in later)
    return weights


MATRICES = st.integers(1, 6).flatmap(
    lambda q_len: st.integers(q_len, 12).flatmap(
        lambda k_len: st.lists(st.floats(-10.0, 10.0), min_size=q_len * k_len, max_size=q_len * k_len).map(
            lambda values: np.array(values).reshape(q_len, k_len)
        )
    )
)


@given(logits=MATRICES, attend_current=st.booleans())
def test_reference_is_the_papers_product(logits, attend_current):
    offset = logits.shape[1] - logits.shape[0]
    got = posenc.stick_breaking_weights(logits, attend_current=attend_current)
    np.testing.assert_allclose(got, literal_weights(logits, offset, attend_current), rtol=0, atol=1e-12)


@given(logits=MATRICES, attend_current=st.booleans())
def test_weights_sum_to_at_most_one_and_the_remainder_is_the_product(logits, attend_current):
    weights = posenc.stick_breaking_weights(logits, attend_current=attend_current)
    assert np.all((weights >= 0) & (weights <= 1))
    offset = logits.shape[1] - logits.shape[0]
    for i, row in enumerate(weights):
        seen = offset + i + (1 if attend_current else 0)
        remainder = math.prod(1.0 - sigmoid(z) for z in logits[i, :seen])
        assert row.sum() <= 1.0 + 1e-12 and abs(1.0 - row.sum() - remainder) <= 1e-12


@given(logits=MATRICES)
def test_a_key_behind_a_firing_key_gets_at_most_what_it_left(logits):
    """For keys k < j < i: A_ik <= 1 - sigmoid(z_ij). A key that fires (sigmoid near 1) hides all behind it."""
    weights = posenc.stick_breaking_weights(logits)
    offset = logits.shape[1] - logits.shape[0]
    for i in range(logits.shape[0]):
        for j in range(offset + i):
            assert np.all(weights[i, :j] <= 1.0 - sigmoid(logits[i, j]) + 1e-12)


@given(z=st.floats(-8.0, 8.0), k_len=st.integers(2, 12))
def test_of_equal_logits_the_nearest_key_gets_the_most(z, k_len):
    """Softmax would share equally; stick-breaking gives each nearer key strictly more (sigmoid(z) < 1)."""
    weights = posenc.stick_breaking_weights(np.full((1, k_len), z), offset=k_len)[0]
    assert np.all(np.diff(weights) > 0)


@settings(max_examples=20)
@given(seed=st.integers(0, 2**16), attend_current=st.booleans(), q_len=st.integers(1, 5))
def test_float32_weights_are_within_1e6_of_the_reference(seed, attend_current, q_len):
    logits = torch.randn(2, q_len, 9, generator=torch.Generator().manual_seed(seed)) * 4
    got = stick_breaking_weights(logits, attend_current=attend_current).double().numpy()
    expected = posenc.stick_breaking_weights(logits.double().numpy(), attend_current=attend_current)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_a_decoding_step_is_the_last_row_of_the_prefill():
    generator = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 3, 8, 4, generator=generator) for _ in range(3))
    out, remainder = stick_breaking_attention(q, k, v)
    step, step_remainder = stick_breaking_attention(q[..., -1:, :], k, v, offset=torch.tensor(7))
    torch.testing.assert_close(step, out[..., -1:, :], rtol=0, atol=1e-6)
    torch.testing.assert_close(step_remainder, remainder[..., -1:], rtol=0, atol=1e-6)


@pytest.mark.parametrize("attend_current", [False, True])
def test_matches_fla_cores_naive_stick_breaking_attention(attend_current):
    """fla-core's reference takes (batch, seq, heads, head_dim), returns the output and the remainder."""
    module = naive("stickbreaking_attn")
    generator = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 9, 3, 8, dtype=torch.float64, generator=generator) for _ in range(3))
    expected_out, expected_remainder = module.naive_stickbreaking_attn(q, k, v, attend_current=attend_current)
    heads = [t.transpose(1, 2) for t in (q, k, v)]
    out, remainder = stick_breaking_attention(*heads, attend_current=attend_current)
    torch.testing.assert_close(out.transpose(1, 2), expected_out, rtol=0, atol=1e-12)
    torch.testing.assert_close(remainder.transpose(1, 2), expected_remainder, rtol=0, atol=1e-12)


def test_gradients_flow_through_the_log_space_weights():
    generator = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(1, 1, 4, 2, dtype=torch.float64, generator=generator, requires_grad=True) for _ in range(3))
    assert torch.autograd.gradcheck(lambda q, k, v: stick_breaking_attention(q, k, v), (q, k, v))


def test_with_no_keys_the_weights_are_empty_and_the_whole_stick_is_left():
    """Review H's H3: k_len = 0 raised an IndexError in the torch functions; the NumPy reference returns empty."""
    assert (
        stick_breaking_weights(torch.zeros(2, 3, 0)).shape == posenc.stick_breaking_weights(np.zeros((2, 3, 0))).shape
    )
    out, remainder = stick_breaking_attention(torch.zeros(1, 2, 4), torch.zeros(1, 0, 4), torch.zeros(1, 0, 5))
    assert out.shape == (1, 2, 5) and torch.equal(out, torch.zeros(1, 2, 5))
    assert torch.equal(remainder, torch.ones(1, 2))
