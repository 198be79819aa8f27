"""posenc_book.add_or_concatenate: layer costs checked against real torch modules, the logit split, cosines, and
the subspace that holds most of a table's energy."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from posenc_book.add_or_concatenate import (
    COMBINE_MODES,
    LogitTerms,
    energy_share,
    energy_subspace,
    layer_cost,
    logit_terms,
    mean_abs_cosine,
)


class ReferenceLayer(nn.Module):
    """A pre-norm Transformer layer written out with nn.Linear, to count what layer_cost predicts."""

    def __init__(self, d_model, combine, d_position, ffn_multiplier):
        super().__init__()
        width = d_model + d_position if combine == "concat_wide" else d_model
        projection_input = d_model + d_position if combine == "concat_qkv" else width
        self.combine = combine
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.w_q, self.w_k, self.w_v = (nn.Linear(projection_input, width) for _ in range(3))
        self.w_o = nn.Linear(width, width)
        self.ffn = nn.Sequential(
            nn.Linear(width, ffn_multiplier * width), nn.ReLU(), nn.Linear(ffn_multiplier * width, width)
        )

    def forward(self, x, p):
        # x: (n, d_model) token embeddings; p: (n, d_model) for "add", (n, d_position) to concatenate
        if self.combine == "add":
            x = x + p
        elif self.combine == "concat_wide":
            x = torch.cat([x, p], dim=-1)
        h = self.norm1(x)
        if self.combine == "concat_qkv":
            h = torch.cat([h, p], dim=-1)
        q, k, v = self.w_q(h), self.w_k(h), self.w_v(h)
        weights = torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1)
        x = x + self.w_o(weights @ v)
        return x + self.ffn(self.norm2(x))


CASES = [("add", 0), ("concat_wide", 8), ("concat_qkv", 8), ("concat_wide", 1), ("concat_qkv", 24)]


@pytest.mark.parametrize("combine, d_position", CASES)
@pytest.mark.parametrize("d_model, ffn_multiplier", [(16, 4), (12, 2)])
def test_parameter_count_equals_that_of_a_real_torch_layer(combine, d_position, d_model, ffn_multiplier):
    layer = ReferenceLayer(d_model, combine, d_position, ffn_multiplier)
    cost = layer_cost(d_model, combine=combine, d_position=d_position, ffn_multiplier=ffn_multiplier)
    assert cost.params == sum(parameter.numel() for parameter in layer.parameters())
    assert cost.norm_params == sum(
        parameter.numel() for parameter in [*layer.norm1.parameters(), *layer.norm2.parameters()]
    )
    assert cost.ffn_params == sum(parameter.numel() for parameter in layer.ffn.parameters())


@pytest.mark.parametrize("combine, d_position", CASES)
@pytest.mark.parametrize("seq_len", [1, 7, 32])
def test_flops_equal_what_torch_counts_for_a_forward_pass(combine, d_position, seq_len):
    d_model = 16
    layer = ReferenceLayer(d_model, combine, d_position, 4)
    x = torch.randn(seq_len, d_model, generator=torch.Generator().manual_seed(0))
    p = torch.randn(seq_len, d_position or d_model, generator=torch.Generator().manual_seed(1))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        layer(x, p)
    cost = layer_cost(d_model, combine=combine, d_position=d_position, seq_len=seq_len)
    assert cost.flops_per_token * seq_len == counter.get_total_flops()


@given(st.integers(min_value=1, max_value=4096))
def test_added_layer_has_12_d_squared_plus_13_d_parameters(d_model):
    assert layer_cost(d_model).params == 12 * d_model**2 + 13 * d_model


@given(
    st.integers(min_value=1, max_value=2048),
    st.integers(min_value=1, max_value=512),
    st.sampled_from(["concat_wide", "concat_qkv"]),
)
def test_concatenating_costs_strictly_more_than_adding(d_model, d_position, combine):
    add = layer_cost(d_model)
    concat = layer_cost(d_model, combine=combine, d_position=d_position)
    assert concat.params > add.params and concat.flops_per_token > add.flops_per_token


@given(st.integers(min_value=1, max_value=2048), st.integers(min_value=1, max_value=512))
def test_concat_wide_is_an_added_layer_of_width_d_plus_p(d_model, d_position):
    wide = layer_cost(d_model, combine="concat_wide", d_position=d_position, seq_len=9)
    assert wide == layer_cost(d_model + d_position, seq_len=9)


def test_concat_qkv_adds_exactly_3_p_d_weights():
    assert layer_cost(512, combine="concat_qkv", d_position=64).params - layer_cost(512).params == 3 * 64 * 512


def test_combine_modes_are_the_three_documented():
    assert COMBINE_MODES == ("add", "concat_qkv", "concat_wide")


# --- The four-term split ---------------------------------------------------------------------------------

shapes = st.tuples(st.integers(1, 6), st.integers(1, 8), st.integers(1, 5))
seeds = st.integers(0, 2**32 - 1)


def random_inputs(shape, seed):
    n, d_model, d_k = shape
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(n, d_model)),
        rng.normal(size=(n, d_model)),
        rng.normal(size=(d_model, d_k)),
        rng.normal(size=(d_model, d_k)),
    )


@given(shapes, seeds)
def test_the_four_terms_sum_to_the_logits_of_the_sum(shape, seed):
    x, p, w_q, w_k = random_inputs(shape, seed)
    terms = logit_terms(x, p, w_q, w_k)
    assert isinstance(terms, LogitTerms) and all(term.shape == (shape[0], shape[0]) for term in terms)
    np.testing.assert_allclose(sum(terms), ((x + p) @ w_q) @ ((x + p) @ w_k).T, rtol=1e-10, atol=1e-10)


@given(shapes, seeds)
def test_each_term_is_the_product_its_name_says(shape, seed):
    x, p, w_q, w_k = random_inputs(shape, seed)
    terms = logit_terms(x, p, w_q, w_k)
    np.testing.assert_allclose(terms.token_position, x @ w_q @ w_k.T @ p.T, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(terms.position_token, p @ w_q @ w_k.T @ x.T, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(terms.position_position, p @ w_q @ w_k.T @ p.T, rtol=1e-10, atol=1e-10)
    # swapping the roles of tokens and positions swaps the two cross terms
    swapped = logit_terms(p, x, w_q, w_k)
    np.testing.assert_allclose(swapped.token_position, terms.position_token, rtol=1e-12, atol=1e-12)


def test_without_positions_only_the_token_term_remains():
    x, _, w_q, w_k = random_inputs((4, 6, 3), 0)
    terms = logit_terms(x, np.zeros_like(x), w_q, w_k)
    assert np.abs(terms.token_token).max() > 0.1
    assert all(np.array_equal(term, np.zeros((4, 4))) for term in terms[1:])


# --- Cosines ---------------------------------------------------------------------------------------------


def test_mean_abs_cosine_of_known_pairs():
    assert mean_abs_cosine(np.eye(3), np.eye(3)) == pytest.approx(1 / 3)
    assert mean_abs_cosine([[1.0, 1.0]], [[-2.0, -2.0]]) == pytest.approx(1.0)
    assert mean_abs_cosine([[1.0, 0.0]], [[0.0, 5.0]]) == 0.0


@given(seeds, st.floats(0.01, 100.0), st.floats(-100.0, -0.01))
def test_mean_abs_cosine_ignores_scale_and_sign_and_order(seed, scale_a, scale_b):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(5, 7)), rng.normal(size=(3, 7))
    value = mean_abs_cosine(a, b)
    assert 0.0 <= value <= 1.0
    assert mean_abs_cosine(scale_a * a, scale_b * b) == pytest.approx(value, rel=1e-12)
    assert mean_abs_cosine(b, a) == pytest.approx(value, rel=1e-12)


def test_mean_abs_cosine_of_random_gaussian_vectors_matches_the_exact_expectation():
    """E|cos| = Γ(d/2) / (√π Γ((d+1)/2)) for independent Gaussian vectors, within sampling error."""
    rng = np.random.default_rng(0)
    for d in (4, 64, 512):
        expected = math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi)
        measured = mean_abs_cosine(rng.normal(size=(400, d)), rng.normal(size=(400, d)))
        assert measured == pytest.approx(expected, rel=0.02)


# --- Energy subspaces ---------------------------------------------------------------------------------------


@given(
    seeds,
    st.integers(1, 12),
    st.integers(1, 10),
    st.floats(0.05, 0.995),
)
def test_the_energy_subspace_is_orthonormal_holds_the_share_and_is_the_smallest_that_does(seed, n, d, energy):
    rows = np.random.default_rng(seed).normal(size=(n, d))
    basis = energy_subspace(rows, energy)
    k = basis.shape[1]
    assert basis.shape[0] == d and 1 <= k <= min(n, d)
    np.testing.assert_allclose(basis.T @ basis, np.eye(k), rtol=0, atol=1e-10)
    total = np.sum(rows**2)
    held = np.sum((rows @ basis) ** 2) / total
    assert held >= energy - 1e-12
    # one dimension fewer holds less, whichever k - 1 dimensions: the best k - 1 are the first k - 1 columns
    assert np.sum((rows @ basis[:, : k - 1]) ** 2) / total < energy + 1e-12


def test_the_energy_subspace_of_a_table_with_known_energies():
    """Rows along the axes with squared norms 50, 30, 15, 5 (of 100): 0.79 needs two axes, 0.81 three."""
    rows = np.diag(np.sqrt([50.0, 30.0, 15.0, 5.0]))[[2, 0, 3, 1]]  # order of the rows does not matter
    for energy, axes in ((0.5, [0]), (0.79, [0, 1]), (0.81, [0, 1, 2]), (0.96, [0, 1, 2, 3])):
        basis = energy_subspace(rows, energy)
        assert sorted(np.flatnonzero(np.abs(basis).sum(axis=1) > 0.5).tolist()) == axes, energy


@given(seeds, st.integers(2, 10), st.floats(0.01, 100.0))
def test_energy_share_is_one_inside_zero_orthogonal_and_ignores_scale(seed, d, scale):
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(d, d)))
    inside, outside = basis[:, :1], basis[:, 1:]
    v = rng.normal(size=(3, d))
    in_span = v @ inside @ inside.T
    np.testing.assert_allclose(energy_share(in_span, inside), 1.0, rtol=1e-10)
    np.testing.assert_allclose(energy_share(in_span, outside), 0.0, rtol=0, atol=1e-10)
    # a share inside a subspace and its complement add to one, whatever the vector's length
    total = energy_share(scale * v, inside) + energy_share(scale * v, outside)
    np.testing.assert_allclose(total, 1.0, rtol=1e-10)


def test_a_gaussian_vector_keeps_k_over_d_of_its_energy_in_any_k_dimensional_subspace():
    """The chapter's 21 % at d = 512 is this k / d: 4000 draws are within 3 of their standard errors of it."""
    rng = np.random.default_rng(0)
    for d, k in ((8, 3), (64, 30), (512, 109)):
        basis, _ = np.linalg.qr(rng.normal(size=(d, k)))
        share = energy_share(rng.normal(size=(4000, d)), basis)
        assert abs(share.mean() - k / d) < 3 * share.std() / math.sqrt(4000)


# --- What a reader may get wrong ----------------------------------------------------------------------------


@pytest.mark.argument_check
@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: layer_cost(64, combine="concat"), "combine must be one of"),
        (lambda: layer_cost(64, d_position=16), "d_position must be 0 for combine='add'"),
        (lambda: layer_cost(64, combine="concat_wide"), "d_position must be an int >= 1"),
        (lambda: logit_terms(np.ones(4), np.ones(4), np.eye(4), np.eye(4)), "tokens must be a 2-D array"),
        (lambda: logit_terms(np.ones((3, 4)), np.ones((2, 4)), np.eye(4), np.eye(4)), "shape of tokens"),
        (lambda: logit_terms(np.ones((3, 4)), np.ones((3, 4)), np.eye(5), np.eye(5)), "w_query and w_key"),
        (lambda: mean_abs_cosine(np.ones((2, 3)), np.ones((2, 4))), "same width"),
        (lambda: mean_abs_cosine(np.ones((2, 3)), np.zeros((1, 3))), "rows_b must have no zero row"),
        (lambda: energy_subspace(np.ones((2, 3)), energy=1.0), "energy must be a share in"),
        (lambda: energy_subspace(np.zeros((2, 3))), "rows must not be all zero"),
        (lambda: energy_subspace(np.ones(3)), "rows must be a 2-D array"),
        (lambda: energy_share(np.ones((2, 3)), np.eye(4)[:, :2]), "basis must have d = 3 rows"),
        (lambda: energy_share(np.ones((2, 3)), 2 * np.eye(3)[:, :2]), "orthonormal columns"),
        (lambda: energy_share(np.zeros((1, 3)), np.eye(3)[:, :2]), "vectors must have no zero row"),
    ],
    ids=[
        "unknown combine",
        "add with d_position",
        "concat without",
        "1-D",
        "n differs",
        "d differs",
        "widths",
        "zero",
        "energy 1",
        "all-zero rows",
        "1-D rows",
        "basis width",
        "basis not orthonormal",
        "zero vector",
    ],
)
def test_mistakes_are_refused_with_a_message_naming_them(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --- Sizes out of range, extreme and non-finite input (review A, L8) ----------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"d_model": 0}, ValueError, "d_model"),
        ({"d_model": -512}, ValueError, "d_model"),
        ({"d_model": 512.7}, TypeError, "d_model"),
        ({"d_model": True}, TypeError, "d_model"),
        ({"d_model": 512, "seq_len": 0}, ValueError, "seq_len"),
        ({"d_model": 512, "seq_len": -10}, ValueError, "seq_len"),
        ({"d_model": 512, "ffn_multiplier": 0}, ValueError, "ffn_multiplier"),
        ({"d_model": 512, "ffn_multiplier": 2.67}, TypeError, "ffn_multiplier"),
        ({"d_model": 512, "combine": "concat_qkv", "d_position": 2.5}, TypeError, "d_position"),
        ({"d_model": 512, "combine": "concat_qkv", "d_position": True}, TypeError, "d_position"),
    ],
)
def test_layer_cost_refuses_sizes_its_docstring_excludes(kwargs, error, name):
    d_model = kwargs.pop("d_model")
    with pytest.raises(error, match=rf"\b{name}\b"):
        layer_cost(d_model, **kwargs)


@pytest.mark.parametrize("scale", [1e-200, 1e200, 5e-324, 1e308])
def test_cosines_and_shares_do_not_depend_on_the_scale_of_a_row(scale):
    """Norms of rows near the ends of the float64 range overflow or underflow unless the rows are scaled first: a
    cosine of 0 or a refused 'zero row' would be a wrong answer given silently or for the wrong reason."""
    row = np.array([[scale, scale]])
    assert mean_abs_cosine(row, [[1.0, 0.0]]) == pytest.approx(math.sqrt(0.5), rel=1e-12)
    assert mean_abs_cosine([[0.0, 3.0]], row) == pytest.approx(math.sqrt(0.5), rel=1e-12)
    np.testing.assert_allclose(energy_share(row, [[1.0], [0.0]]), [0.5], rtol=1e-12)
    basis = energy_subspace(np.array([[1.0, 0.0], [0.0, 1 / 3]]) * scale, energy=0.8)
    assert basis.shape == (2, 1) and abs(basis[0, 0]) == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input_is_refused_naming_the_argument(bad):
    rows = np.array([[bad, 1.0], [1.0, 0.0]])
    for call, name in [
        (lambda: mean_abs_cosine(rows, np.eye(2)), "rows_a"),
        (lambda: mean_abs_cosine(np.eye(2), rows), "rows_b"),
        (lambda: energy_subspace(rows), "rows"),
        (lambda: energy_share(rows, np.eye(2)[:, :1]), "vectors"),
        (lambda: logit_terms(rows, np.eye(2), np.eye(2), np.eye(2)), "tokens"),
    ]:
        with pytest.raises(ValueError, match=rf"{name} must be finite"):
            call()


def test_complex_input_is_refused_not_cast():
    with pytest.raises(TypeError, match="rows must be real"):
        energy_subspace(np.eye(3) * 1j)
    with pytest.raises(TypeError, match="rows_a must be real"):
        mean_abs_cosine(np.eye(2) * (1 + 1j), np.eye(2))
