"""PaTH attention: the reference against the Householder products written out, its properties, and fla-core.

Tolerances. The reference carries each query back one rank-one update at a time (float64); the products of
the matrices H_t multiplied out by NumPy agree to 1e-12 for 7 tokens, unit directions and beta in [0, 2].
The module (float32) is within 1e-5 of the reference for unit normal q and k of width 8 over 9 tokens (logits
of size <= 10 after at most 8 updates, each a few float32 roundings; 1.8e-15 in float64, measured).
fla-core's ``naive_path_attn`` computes in float32 with a blockwise (UT transform) algorithm, a different
route to the same products: outputs agree to 1e-5 (2.5e-7 measured).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from fla_reference import naive
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.nn import PaTHGate, forgetting_bias, path_logits


def householders(w: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """H_t = I - beta_t w_t w_t^T for every token: (seq, head_dim, head_dim)."""
    return np.eye(w.shape[-1]) - beta[:, None, None] * w[:, :, None] * w[:, None, :]


def literal_logits(q, k, w, beta) -> np.ndarray:
    """q_i^T H_i H_{i-1} ... H_{j+1} k_j with the matrices multiplied out."""
    seq, head_dim = q.shape
    matrices = householders(w, beta)
    logits = np.full((seq, seq), -np.inf)
    for i in range(seq):
        for j in range(i + 1):
            product = functools.reduce(np.matmul, [matrices[t] for t in range(i, j, -1)], np.eye(head_dim))
            logits[i, j] = q[i] @ product @ k[j]
    return logits


def draw(seed: int, seq: int = 7, head_dim: int = 4):
    rng = np.random.default_rng(seed)
    q, k, w = (rng.standard_normal((seq, head_dim)) for _ in range(3))
    return q, k, w / np.linalg.norm(w, axis=-1, keepdims=True), rng.uniform(0.0, 2.0, seq)


@settings(max_examples=20)
@given(seed=st.integers(0, 2**16), seq=st.integers(1, 7))
def test_reference_is_the_product_of_householder_matrices(seed, seq):
    q, k, w, beta = draw(seed, seq)
    np.testing.assert_allclose(posenc.path_logits(q, k, w, beta), literal_logits(q, k, w, beta), rtol=0, atol=1e-12)


def test_beta_zero_is_nope():
    q, k, w, _ = draw(0, 9)
    expected = np.where(np.tri(9, dtype=bool), q @ k.T, -np.inf)
    np.testing.assert_allclose(posenc.path_logits(q, k, w, np.zeros(9)), expected, rtol=0, atol=1e-12)
    got = path_logits(*(torch.from_numpy(t) for t in (q, k, w, np.zeros(9))))
    torch.testing.assert_close(got, torch.from_numpy(expected), rtol=0, atol=1e-12)


@settings(max_examples=20)
@given(seed=st.integers(0, 2**16), token=st.integers(0, 6))
def test_a_tokens_matrix_acts_only_between_keys_before_it_and_queries_from_it_on(seed, token):
    """Changing w_t and beta_t changes z_ij exactly for j < t <= i: position is the path between the two."""
    q, k, w, beta = draw(seed)
    before = posenc.path_logits(q, k, w, beta)
    w2, beta2 = w.copy(), beta.copy()
    w2[token], beta2[token] = np.roll(w[token], 1), 2.0 - beta[token] / 2
    after = posenc.path_logits(q, k, w2, beta2)
    on_path = (np.arange(7)[None, :] < token) & (token <= np.arange(7)[:, None])
    np.testing.assert_array_equal(before[~on_path], after[~on_path])
    if on_path.any():
        assert not np.allclose(before[on_path], after[on_path])


def test_float32_module_is_within_1e5_of_the_reference():
    generator = torch.Generator().manual_seed(7)
    q, k = (torch.randn(2, 3, 9, 8, generator=generator) for _ in range(2))
    w = torch.nn.functional.normalize(torch.randn(2, 3, 9, 8, generator=generator), dim=-1)
    beta = 2 * torch.rand(2, 3, 9, generator=generator)
    got = path_logits(q, k, w, beta).double().numpy()
    expected = posenc.path_logits(*(t.double().numpy() for t in (q, k, w, beta)))
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(np.isfinite(got), finite)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=0, atol=1e-5)


@pytest.mark.parametrize("with_gate", [False, True])
def test_matches_fla_cores_naive_path_attention(with_gate):
    """fla-core's reference takes (batch, seq, heads, head_dim) and a forget gate g (zeros: PaTH alone).

    With a gate it adds the decay before the scale, softmax(scale * (z + D)) (its Triton kernel does the same),
    whereas its forgetting attention adds it after: softmax(scale * q.k + D).
    """
    module = naive("path_attn")
    generator = torch.Generator().manual_seed(8)
    q, k, v = (torch.randn(2, 9, 3, 8, dtype=torch.float64, generator=generator) for _ in range(3))
    w = torch.nn.functional.normalize(torch.randn(2, 9, 3, 8, dtype=torch.float64, generator=generator), dim=-1)
    beta = 2 * torch.sigmoid(torch.randn(2, 9, 3, dtype=torch.float64, generator=generator))
    gate = torch.nn.functional.logsigmoid(torch.randn(2, 9, 3, dtype=torch.float64, generator=generator))
    gate = gate if with_gate else torch.zeros_like(gate)
    scale = 8**-0.5
    expected = module.naive_path_attn(q, k, v, w, beta, gate, scale)
    qh, kh, vh, wh = (t.transpose(1, 2) for t in (q, k, v, w))
    logits = path_logits(qh, kh, wh, beta.transpose(1, 2))
    if with_gate:
        logits = logits + forgetting_bias(gate.transpose(1, 2))
    out = torch.softmax(logits * scale, -1) @ vh
    torch.testing.assert_close(out.transpose(1, 2), expected.double(), rtol=0, atol=1e-5)


def test_the_gate_gives_unit_directions_and_betas_in_0_2():
    torch.manual_seed(9)
    w, beta = PaTHGate(16, 2, 4)(torch.randn(3, 5, 16) * 10)
    assert w.shape == (3, 2, 5, 4) and beta.shape == (3, 2, 5)
    torch.testing.assert_close(w.norm(dim=-1), torch.ones(3, 2, 5), rtol=0, atol=1e-6)
    assert bool(((beta > 0) & (beta < 2)).all())


def test_gradients_flow_through_the_products():
    generator = torch.Generator().manual_seed(10)
    q, k, w = (torch.randn(1, 4, 3, dtype=torch.float64, generator=generator, requires_grad=True) for _ in range(3))
    beta = torch.rand(1, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *a: torch.softmax(path_logits(*a), -1), (q, k, w, beta))
