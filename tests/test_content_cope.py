"""CoPE: contextual positions against the paper's sum, counting as the index does, and the PyTorch module.

No package of the CoPE authors installs (their code is a project folder of github.com/facebookresearch/RAM), so
the float64 reference is checked against the paper's formulas written out here, and the module against it.

Tolerances. Positions summed in float64 agree with math.fsum to 1e-12 (at most 12 gates in [0, 1]). The
module's logits (float32) are within 5e-5 of the float64 reference for unit normal q, k and table over 7
tokens: logits of size <= 30, a few float32 roundings each, and the positions' rounding moves an interpolated
logit by at most |e[n+1] - e[n]| |q| times it (5.9e-7 measured).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc.nn import CoPE

GATES = st.integers(1, 6).flatmap(
    lambda q_len: st.integers(q_len, 12).flatmap(
        lambda k_len: st.lists(st.floats(0.0, 1.0), min_size=q_len * k_len, max_size=q_len * k_len).map(
            lambda values: np.array(values).reshape(q_len, k_len)
        )
    )
)


@given(gates=GATES)
def test_positions_are_the_papers_sum_from_the_key_to_the_query(gates):
    q_len, k_len = gates.shape
    got = posenc.cope_positions(gates)
    for i in range(q_len):
        token = k_len - q_len + i
        for j in range(k_len):
            expected = math.fsum(gates[i, j : token + 1]) if j <= token else 0.0
            assert abs(got[i, j] - expected) <= 1e-12


def test_every_gate_open_counts_tokens_as_the_index_does():
    """p_ij = i - j + 1: the reference and the module (gate logits +inf, sigmoid exactly 1), exactly."""
    counted = np.arange(6)[:, None] - np.arange(6)[None, :] + 1.0
    expected = np.where(counted > 0, counted, 0.0)
    np.testing.assert_array_equal(posenc.cope_positions(np.ones((6, 6))), expected)
    open_gates = torch.full((6, 6), float("inf")).masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), -math.inf)
    assert torch.equal(CoPE(8, 4).positions(open_gates), torch.from_numpy(expected).float())


def test_gates_on_markers_count_the_markers():
    """Gates open on marker tokens only: the position of key j is the number of markers from j to the query."""
    markers = np.array([0, 1, 0, 0, 1, 1, 0, 1], dtype=float)
    positions = posenc.cope_positions(np.tile(markers, (8, 1)))
    for i in range(8):
        for j in range(i + 1):
            assert positions[i, j] == markers[j : i + 1].sum()


def test_with_open_gates_cope_is_a_relative_position_embedding():
    """Gates at 1: the position term is q_i . e[min(i - j + 1, n - 1)], a learned table read by distance."""
    torch.manual_seed(0)
    cope = CoPE(5, 4)
    with torch.no_grad():
        cope.embeddings.normal_()
    q = torch.randn(3, 7, 4)
    causal = torch.ones(7, 7, dtype=torch.bool).triu(1)
    open_gates = torch.full((3, 7, 7), math.inf).masked_fill(causal, -math.inf)
    distance = (torch.arange(7)[:, None] - torch.arange(7)[None, :] + 1).clamp(0, 4)
    expected = (q[:, :, None, :] * cope.embeddings[distance]).sum(-1)
    got = cope(q, open_gates)
    torch.testing.assert_close(got[:, ~causal], expected[:, ~causal], rtol=0, atol=1e-6)


def test_fractional_positions_interpolate_linearly():
    table = np.array([[0.0], [2.0], [10.0]])
    q = np.ones((1, 1))
    # one query, one key: the only gate is the query's own, sigmoid(scale * q.k); position p in (0, 1)
    for k in (-2.0, 0.0, 1.5):
        p = 1.0 / (1.0 + math.exp(-k))
        got = posenc.cope_logits(q, np.array([[k]]), table, scale=1.0)[0, 0]
        assert abs(got - (k + 2.0 * p)) <= 1e-12
    # positions beyond the table use its last row
    many = posenc.cope_logits(np.ones((8, 1)), np.full((8, 1), 30.0), table, scale=1.0)
    assert abs(many[7, 0] - (30.0 + 10.0)) <= 1e-12


def test_module_logits_match_the_reference():
    torch.manual_seed(1)
    cope = CoPE(5, 8)
    with torch.no_grad():
        cope.embeddings.normal_()
    q, k = torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 8)
    got = cope.logits(q, k).detach().double().numpy()
    expected = posenc.cope_logits(q.double().numpy(), k.double().numpy(), cope.embeddings.detach().double().numpy())
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=0, atol=5e-5)


def test_a_decoding_step_is_the_last_row_of_the_prefill():
    torch.manual_seed(2)
    cope = CoPE(9, 4)
    with torch.no_grad():
        cope.embeddings.normal_()
    q, k = torch.randn(2, 6, 4), torch.randn(2, 6, 4)
    torch.testing.assert_close(cope.logits(q[:, -1:], k), cope.logits(q, k)[:, -1:], rtol=0, atol=1e-6)


def test_gradients_reach_the_table_the_queries_and_the_keys():
    torch.manual_seed(3)
    cope = CoPE(6, 2).double()
    q, k = (torch.randn(1, 4, 2, dtype=torch.float64, requires_grad=True) for _ in range(2))
    table = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
    parameter = cope.embeddings

    def attention(q, k, table):
        """The softmax of the logits with ``table`` in place of the parameter, so gradcheck can vary it."""
        del cope.embeddings
        cope.embeddings = table
        try:
            return torch.softmax(cope.logits(q, k), -1)
        finally:
            del cope.embeddings
            cope.embeddings = parameter

    assert torch.autograd.gradcheck(attention, (q, k, table))
