"""Shaw et al.'s relative positions: the indices are clipped and depend on j - i only; the attention layer
follows eqs. (3) and (4), reduces to torch's multi-head attention without relative terms, and sees positions
only through their differences."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc import shaw_relative_indices
from posenc.nn import ShawRelativeAttention

# --- the indices ----------------------------------------------------------------------------------------------


@given(st.integers(0, 20), st.integers(0, 20), st.integers(0, 25), st.integers(-30, 30))
def test_indices_are_the_clipped_relative_position_shifted_by_k(q_len, k_len, max_distance, offset):
    indices = shaw_relative_indices(q_len, k_len, max_distance=max_distance, offset=offset)
    assert indices.shape == (q_len, k_len) and indices.dtype == np.int64
    for i in range(q_len):
        for j in range(k_len):
            relative = j - (offset + i)
            assert indices[i, j] == max(-max_distance, min(max_distance, relative)) + max_distance
    assert np.all((indices >= 0) & (indices <= 2 * max_distance))


@given(st.integers(1, 30), st.integers(0, 12), st.integers(0, 40))
def test_indices_depend_on_j_minus_i_only(seq, max_distance, shift):
    """Shifting queries and keys together changes nothing, and the matrix is constant along its diagonals."""
    indices = shaw_relative_indices(seq, max_distance=max_distance)
    np.testing.assert_array_equal(indices[1:, 1:], indices[:-1, :-1])
    shifted = shaw_relative_indices(seq, seq + shift, max_distance=max_distance, offset=shift)[:, shift:]
    np.testing.assert_array_equal(shifted, indices)


@given(st.integers(2, 40), st.integers(0, 45))
def test_exactly_min_2k_plus_1_labels_are_used(seq, max_distance):
    """2k + 1 labels when the sequence reaches past the clip (seq > k), else 2 * seq - 1: one per distance."""
    used = np.unique(shaw_relative_indices(seq, max_distance=max_distance))
    assert len(used) == min(2 * max_distance + 1, 2 * seq - 1)
    # distances beyond k share the end labels
    if seq > max_distance + 1:
        assert shaw_relative_indices(seq, max_distance=max_distance)[0, -1] == 2 * max_distance
        assert shaw_relative_indices(seq, max_distance=max_distance)[-1, 0] == 0


def test_default_offset_puts_the_queries_last():
    np.testing.assert_array_equal(
        shaw_relative_indices(3, 8, max_distance=2), shaw_relative_indices(8, max_distance=2)[-3:]
    )


# --- the layer -----------------------------------------------------------------------------------------------


def reference_layer(layer: ShawRelativeAttention, x: torch.Tensor) -> torch.Tensor:
    """Eqs. (3) and (4) of Shaw et al. in float64, pair by pair with an explicit (seq, seq, head_dim) tensor of
    a^K_ij and a^V_ij gathered by posenc.shaw_relative_indices: a second, independent way to the same numbers."""
    x = x.double()
    weights = {name: p.detach().double() for name, p in layer.named_parameters()}
    batch, seq, d_model = x.shape
    heads, head_dim = layer.n_heads, layer.head_dim
    index = torch.from_numpy(shaw_relative_indices(seq, max_distance=layer.max_distance))
    a_key = weights["relative_keys.weight"][index]  # (seq, seq, head_dim)
    a_value = weights["relative_values.weight"][index] if layer.values else torch.zeros_like(a_key)

    def project(name):
        out = x @ weights[f"{name}.weight"].T + weights[f"{name}.bias"]
        return out.view(batch, seq, heads, head_dim)

    q, k, v = project("q_proj"), project("k_proj"), project("v_proj")
    # e_ij = q_i . (k_j + a^K_ij) / sqrt(d_z)            (eq. 4)
    logits = torch.einsum("bihd,bjhd->bhij", q, k) + torch.einsum("bihd,ijd->bhij", q, a_key)
    logits = logits / head_dim**0.5
    if layer.causal:
        logits = logits.masked_fill(torch.ones(seq, seq, dtype=torch.bool).triu(1), float("-inf"))
    alpha = torch.softmax(logits, dim=-1)
    # z_i = sum_j alpha_ij (v_j + a^V_ij)                 (eq. 3)
    z = torch.einsum("bhij,bjhd->bihd", alpha, v) + torch.einsum("bhij,ijd->bihd", alpha, a_value)
    return z.reshape(batch, seq, d_model) @ weights["out_proj.weight"].T + weights["out_proj.bias"]


@pytest.mark.parametrize("values", [True, False])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("max_distance", [0, 1, 3, 20])
def test_layer_computes_shaws_equations(values, causal, max_distance):
    """The layer (gathered logits, weights summed per label) against the pair-by-pair float64 reference; the
    layer runs in float64 too, so only summation order differs: 1e-12."""
    torch.manual_seed(1)
    layer = ShawRelativeAttention(24, 3, max_distance=max_distance, values=values, causal=causal).double()
    x = torch.randn(2, 9, 24, dtype=torch.float64)
    torch.testing.assert_close(layer(x), reference_layer(layer, x), rtol=1e-12, atol=1e-12)


def test_layer_indices_are_the_numpy_indices():
    layer = ShawRelativeAttention(8, 2, max_distance=3)
    for seq in (1, 4, 11):
        np.testing.assert_array_equal(layer.relative_indices(seq).numpy(), shaw_relative_indices(seq, max_distance=3))


def copy_into_torch_mha(layer: ShawRelativeAttention) -> torch.nn.MultiheadAttention:
    mha = torch.nn.MultiheadAttention(layer.d_model, layer.n_heads, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([layer.q_proj.weight, layer.k_proj.weight, layer.v_proj.weight]))
        mha.in_proj_bias.copy_(torch.cat([layer.q_proj.bias, layer.k_proj.bias, layer.v_proj.bias]))
        mha.out_proj.weight.copy_(layer.out_proj.weight)
        mha.out_proj.bias.copy_(layer.out_proj.bias)
    return mha


@pytest.mark.parametrize("causal", [False, True])
def test_with_zero_relative_vectors_the_layer_is_torchs_multi_head_attention(causal):
    """max_distance covering the whole sequence, a^K = a^V = 0: plain attention, as nn.MultiheadAttention
    computes it. float32, 1e-6: the two compute the same sums in different orders."""
    torch.manual_seed(2)
    seq = 12
    layer = ShawRelativeAttention(32, 4, max_distance=seq, causal=causal)
    with torch.no_grad():
        layer.relative_keys.weight.zero_()
        layer.relative_values.weight.zero_()
    x = torch.randn(3, seq, 32)
    mask = torch.ones(seq, seq, dtype=torch.bool).triu(1) if causal else None
    expected, _ = copy_into_torch_mha(layer)(x, x, x, attn_mask=mask, need_weights=False)
    torch.testing.assert_close(layer(x), expected, rtol=1e-6, atol=1e-6)
    # and the relative vectors do matter once they are not zero
    with torch.no_grad():
        layer.relative_keys.weight.normal_()
    assert (layer(x) - expected).abs().max() > 1e-2


def test_logits_depend_on_content_and_j_minus_i_only():
    """Repeat a block of s tokens: x = [u, u]. Query i + s and key j + s then hold the same tokens as i and j, at
    the same distance, so every logit repeats: e[i + s, j + s] = e[i, j] for i, j < s. An absolute encoding added
    to x breaks this (checked too): the property pins that the layer sees positions only through j - i."""
    torch.manual_seed(3)
    s = 7
    layer = ShawRelativeAttention(16, 2, max_distance=4).double()
    u = torch.randn(2, s, 16, dtype=torch.float64)
    logits = layer.attention_logits(torch.cat([u, u], dim=1))
    torch.testing.assert_close(logits[..., s:, s:], logits[..., :s, :s], rtol=1e-13, atol=1e-13)
    absolute = torch.from_numpy(posenc.sinusoidal(2 * s, 16, dtype=np.float64))
    shifted = layer.attention_logits(torch.cat([u, u], dim=1) + absolute)
    assert (shifted[..., s:, s:] - shifted[..., :s, :s]).abs().max() > 1e-3


def test_reversing_the_sequence_is_mirroring_the_tables():
    """Bidirectional layer: f(reverse x) = reverse f'(x), where f' has w^K_r and w^V_r swapped with w_{-r}.
    Reversal turns j - i into i - j; a layer that used absolute positions would not satisfy this."""
    torch.manual_seed(4)
    layer = ShawRelativeAttention(16, 4, max_distance=3).double()
    mirrored = ShawRelativeAttention(16, 4, max_distance=3).double()
    mirrored.load_state_dict(layer.state_dict())
    with torch.no_grad():
        mirrored.relative_keys.weight.copy_(layer.relative_keys.weight.flip(0))
        mirrored.relative_values.weight.copy_(layer.relative_values.weight.flip(0))
    x = torch.randn(2, 10, 16, dtype=torch.float64)
    torch.testing.assert_close(layer(x.flip(1)), mirrored(x).flip(1), rtol=1e-12, atol=1e-12)
    assert (layer(x.flip(1)) - layer(x).flip(1)).abs().max() > 1e-3  # the unmirrored layer does see direction


def test_beyond_the_clip_distance_keys_are_told_apart_by_content_only():
    """Keys at distances > k from the query share a^K and a^V: two such keys with the same content get the same
    logit, and swapping them leaves the output of that query unchanged."""
    torch.manual_seed(5)
    layer = ShawRelativeAttention(8, 2, max_distance=2).double()
    x = torch.randn(1, 9, 8, dtype=torch.float64)
    x[0, 5] = x[0, 8]  # keys 5 and 8 are both more than 2 after query 0
    logits = layer.attention_logits(x)
    torch.testing.assert_close(logits[..., 0, 5], logits[..., 0, 8], rtol=0, atol=1e-14)
    assert (logits[..., 0, 1] - logits[..., 0, 2]).abs().max() > 0  # within the clip they differ
    permuted = x[:, [0, 1, 2, 3, 4, 7, 6, 5, 8]]  # swap keys 5 and 7, both beyond the clip from query 0
    torch.testing.assert_close(layer(permuted)[:, 0], layer(x)[:, 0], rtol=1e-13, atol=1e-13)


def test_a_clip_beyond_the_sequence_changes_nothing():
    """With k >= seq - 1 no distance is clipped: a larger k with the same rows around 0 gives the same layer."""
    torch.manual_seed(6)
    small = ShawRelativeAttention(8, 2, max_distance=5).double()
    large = ShawRelativeAttention(8, 2, max_distance=9).double()
    state = small.state_dict()
    for name in ("relative_keys.weight", "relative_values.weight"):
        padded = torch.zeros(19, 4, dtype=torch.float64)
        padded[4:15] = state[name]
        state[name] = padded
    large.load_state_dict(state)
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    torch.testing.assert_close(large(x), small(x), rtol=1e-13, atol=1e-13)


def test_causal_outputs_ignore_later_tokens():
    torch.manual_seed(7)
    layer = ShawRelativeAttention(8, 2, max_distance=3, causal=True)
    x = torch.randn(1, 8, 8)
    changed = x.clone()
    changed[0, 5:] = torch.randn(3, 8)
    torch.testing.assert_close(layer(changed)[:, :5], layer(x)[:, :5], rtol=0, atol=0)


def test_parameters_of_each_variant():
    with_values = ShawRelativeAttention(12, 3, max_distance=4)
    keys_only = ShawRelativeAttention(12, 3, max_distance=4, values=False)
    assert with_values.relative_keys.weight.shape == (9, 4)
    assert with_values.relative_values.weight.shape == (9, 4)
    assert keys_only.relative_values is None
    n_with = sum(p.numel() for p in with_values.parameters())
    n_keys = sum(p.numel() for p in keys_only.parameters())
    assert n_with - n_keys == 9 * 4
    assert n_keys == 4 * (12 * 12 + 12) + 9 * 4
    x = torch.randn(2, 5, 12)
    out = keys_only(x)
    out.sum().backward()
    assert keys_only.relative_keys.weight.grad.abs().sum() > 0


def test_the_package_exports_the_function():
    assert posenc.shaw_relative_indices is shaw_relative_indices
