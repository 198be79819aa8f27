"""Rotary position embedding on several axes: properties, reductions to 1-D RoPE, and parity with transformers.

Tolerances. The float64 checks (NumPy reference, float64 module) compare two computations of the same
rotation, equal up to a few roundings of each product and of each sine and cosine: ``1e-12`` relative to the
size of the vectors, far above float64's ``2e-16`` and far below any real error (a pair turned by a wrong
angle is off by order 1). The parity tests against transformers (float32: inverse frequencies rounded to
float32, angles ``position * inv_freq`` rounded to float32, then cos/sin) allow, per rotated feature, the
error of an angle off by ``2 * max_position * eps32`` plus float32 rounding of the products: the bound
``(2 * max_position + 8) * eps32 * max|x|``, computed in each test from its own positions.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import axial_frequencies, mrope_frequencies, rotary_frequencies, rotate, rotate_multiaxis
from posenc.nn import MultiAxisRotaryEmbedding

EPS32 = float(np.finfo(np.float32).eps)
RNG_SEED = 20240318

LAYOUTS = ("interleaved", "halves")

pytestmark = pytest.mark.usefixtures("quiet_transformers")  # the parity tests below build transformers configs


def _scores(q_rotated: np.ndarray, k_rotated: np.ndarray) -> np.ndarray:
    return q_rotated @ k_rotated.T


def _frequency_matrices() -> dict[str, np.ndarray]:
    """One matrix of each kind: axial on 2 and 3 axes, M-RoPE in both assignments, a dense (mixed) one."""
    rng = np.random.default_rng(RNG_SEED)
    return {
        "axial-2": axial_frequencies(16, 2, base=100.0),
        "axial-3": axial_frequencies(24, 3),
        "mrope-chunked": mrope_frequencies(16, [2, 3, 3]),
        "mrope-interleaved": mrope_frequencies(16, [4, 2, 2], assignment="interleaved"),
        "mixed": rng.normal(size=(2, 8)),
    }


# --- Per-axis translation invariance -------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(_frequency_matrices()))
@settings(max_examples=25, deadline=None)
@given(shift=st.lists(st.integers(-50, 50), min_size=3, max_size=3), seed=st.integers(0, 2**16))
def test_scores_depend_only_on_the_offset_along_each_axis(name, layout, shift, seed):
    """q(p) . k(p') is unchanged when every coordinate of p and p' moves by the same per-axis shift."""
    frequencies = _frequency_matrices()[name]
    n_axes, n_pairs = frequencies.shape
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, 5, 2 * n_pairs))
    p_q = rng.integers(-20, 20, size=(5, n_axes)).astype(float)
    p_k = rng.integers(-20, 20, size=(5, n_axes)).astype(float)
    moved = np.asarray(shift[:n_axes], dtype=float)
    before = _scores(
        rotate_multiaxis(q, p_q, frequencies, layout=layout), rotate_multiaxis(k, p_k, frequencies, layout=layout)
    )
    after = _scores(
        rotate_multiaxis(q, p_q + moved, frequencies, layout=layout),
        rotate_multiaxis(k, p_k + moved, frequencies, layout=layout),
    )
    scale = np.linalg.norm(q, axis=1)[:, None] * np.linalg.norm(k, axis=1)[None, :]
    np.testing.assert_allclose(after, before, rtol=0, atol=1e-12 * scale.max())


def test_a_shift_along_one_axis_changes_the_scores():
    """The invariance above is not vacuous: moving only the keys along one axis changes the scores."""
    rng = np.random.default_rng(RNG_SEED)
    frequencies = axial_frequencies(16, 2)
    q, k = rng.normal(size=(2, 4, 16))
    p = rng.integers(0, 8, size=(4, 2)).astype(float)
    for axis in range(2):
        moved = p.copy()
        moved[:, axis] += 1.0
        same = _scores(rotate_multiaxis(q, p, frequencies), rotate_multiaxis(k, p, frequencies))
        shifted = _scores(rotate_multiaxis(q, p, frequencies), rotate_multiaxis(k, moved, frequencies))
        assert np.abs(same - shifted).max() > 1e-3


# --- Reductions to 1-D RoPE and the axial split ---------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_one_axis_axial_is_plain_rotary(layout):
    rng = np.random.default_rng(RNG_SEED)
    x = rng.normal(size=(3, 7, 16))
    positions = rng.uniform(-100, 100, size=7)
    expected = rotate(x, positions, layout=layout, base=500.0)
    got = rotate_multiaxis(x, positions[:, None], axial_frequencies(16, 1, base=500.0), layout=layout)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(x).max())


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("section", "assignment"), [([8, 12, 12], "chunked"), ([12, 10, 10], "interleaved")])
def test_mrope_with_equal_ids_is_plain_rotary(section, assignment, layout):
    """Qwen2-VL's text tokens: time = height = width = the token's index, and M-RoPE is 1-D RoPE."""
    rng = np.random.default_rng(RNG_SEED)
    x = rng.normal(size=(2, 9, 64))
    positions = np.arange(9.0) + 37.0
    expected = rotate(x, positions, layout=layout, base=1e6)
    frequencies = mrope_frequencies(64, section, assignment=assignment, base=1e6)
    got = rotate_multiaxis(x, np.repeat(positions[:, None], 3, axis=1), frequencies, layout=layout)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(x).max())


def test_axial_turns_each_block_of_the_head_by_its_own_axis():
    """Interleaved axial RoPE on (row, column) is 1-D RoPE by row on the first half of the features and by
    column on the second (torchtune's split, with rows first), each with the frequencies of half a head."""
    rng = np.random.default_rng(RNG_SEED)
    x = rng.normal(size=(4, 12, 32))
    coordinates = rng.integers(0, 16, size=(12, 2)).astype(float)
    got = rotate_multiaxis(x, coordinates, axial_frequencies(32, 2, base=100.0))
    expected = np.concatenate(
        [rotate(x[..., :16], coordinates[:, 0], base=100.0), rotate(x[..., 16:], coordinates[:, 1], base=100.0)],
        axis=-1,
    )
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(x).max())


def test_mrope_assigns_pairs_as_qwen2_vl_and_qwen3_vl_do():
    """Which axis each pair follows: contiguous sections, or every third pair from 1 (height) and 2 (width)."""
    chunked = mrope_frequencies(16, [2, 3, 3]).argmax(axis=0)
    np.testing.assert_array_equal(chunked, [0, 0, 1, 1, 1, 2, 2, 2])
    interleaved = mrope_frequencies(16, [4, 2, 2], assignment="interleaved").argmax(axis=0)
    np.testing.assert_array_equal(interleaved, [0, 1, 2, 0, 1, 2, 0, 0])
    for frequencies in (mrope_frequencies(16, [2, 3, 3]), mrope_frequencies(16, [4, 2, 2], assignment="interleaved")):
        np.testing.assert_array_equal(frequencies.sum(axis=0), rotary_frequencies(16))
        assert ((frequencies != 0).sum(axis=0) == 1).all()


def test_partial_frequencies_pass_the_other_features_through():
    rng = np.random.default_rng(RNG_SEED)
    x = rng.normal(size=(5, 12))
    coordinates = rng.normal(size=(5, 2))
    got = rotate_multiaxis(x, coordinates, axial_frequencies(8, 2), layout="halves")
    np.testing.assert_array_equal(got[:, 8:], x[:, 8:])
    np.testing.assert_allclose(
        got[:, :8], rotate_multiaxis(x[:, :8], coordinates, axial_frequencies(8, 2), layout="halves"), rtol=0, atol=0
    )


# --- The module against the reference ---------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(_frequency_matrices()))
def test_module_matches_the_reference(name, layout):
    frequencies = _frequency_matrices()[name]
    n_axes, n_pairs = frequencies.shape
    generator = torch.Generator().manual_seed(RNG_SEED)
    x = torch.randn(2, 3, 6, 2 * n_pairs + 2, generator=generator, dtype=torch.float64)
    coordinates = torch.randint(-30, 30, (2, 1, 6, n_axes), generator=generator)
    expected = rotate_multiaxis(x.numpy(), coordinates.numpy(), frequencies, layout=layout)
    for learnable in (False, True):
        module = MultiAxisRotaryEmbedding(frequencies, layout=layout, learnable=learnable)
        got64 = module(x, coordinates)
        # learnable: the float32 parameter moves each frequency by up to eps32 relative, an angle by 30 * that
        atol64 = 1e-12 if not learnable else 4 * 30 * n_axes * EPS32 * np.abs(frequencies).max()
        np.testing.assert_allclose(got64.detach().numpy(), expected, rtol=0, atol=atol64 * x.abs().max().item())
        got32 = module(x.to(torch.float32), coordinates)
        assert got32.dtype == torch.float32
        np.testing.assert_allclose(
            got32.detach().numpy(), expected, rtol=0, atol=max(atol64, 8 * EPS32) * x.abs().max().item()
        )


def test_positions_have_all_of_xs_leading_axes_or_none():
    """(batch, 1, seq, n_axes) gives each batch entry its own coordinates; (batch, seq, n_axes), which
    RotaryEmbedding's (batch, seq) convention suggests, is refused: from the right it would fall on the heads axis,
    silently so when heads == batch (review A, L13)."""
    module = MultiAxisRotaryEmbedding(axial_frequencies(8, 2))
    generator = torch.Generator().manual_seed(RNG_SEED)
    x = torch.randn(2, 2, 3, 8, generator=generator, dtype=torch.float64)  # (batch, heads = batch, seq, head_dim)
    coordinates = torch.tensor([[[0, 0], [0, 1], [0, 2]], [[5, 5], [5, 6], [5, 7]]])  # (batch, seq, n_axes)
    per_batch = torch.stack([module(x[b], coordinates[b]) for b in range(2)])
    torch.testing.assert_close(module(x, coordinates[:, None]), per_batch, rtol=0, atol=0)
    with pytest.raises(ValueError, match="leading axes"):
        module(x, coordinates)
    # leading axes of size 1 mean the same from either end: accepted, as is no leading axis
    torch.testing.assert_close(module(x, coordinates[:1]), module(x, coordinates[0]), rtol=0, atol=0)
    # float64 holds every integer up to 2**53: accepted there, refused beyond
    assert torch.isfinite(module(x[0, 0, :1], torch.tensor([[2**53, -(2**53)]]))).all()
    with pytest.raises(ValueError, match="2\\*\\*53"):
        module(x[0, 0, :1], torch.tensor([[2**53 + 1, 0]]))


def test_learned_frequencies_get_gradients():
    torch.manual_seed(0)
    module = MultiAxisRotaryEmbedding(axial_frequencies(8, 2), learnable=True)
    q, k = torch.randn(2, 5, 8).unbind(0)
    coordinates = torch.randint(0, 4, (5, 2))
    (module(q, coordinates) @ module(k, coordinates).T).square().sum().backward()
    assert module.frequencies is not None and module.frequencies.grad is not None
    assert module.frequencies.grad.abs().sum() > 0
    assert [name for name, _ in module.named_parameters()] == ["frequencies"]
    assert list(MultiAxisRotaryEmbedding(axial_frequencies(8, 2)).parameters()) == []


# --- Parity with transformers' Qwen2-VL and Qwen3-VL rotary code ----------------------------------------------------


def _qk_and_ids(head_dim: int, max_position: int):
    generator = torch.Generator().manual_seed(RNG_SEED)
    q = torch.randn(2, 3, 10, head_dim, generator=generator)
    k = torch.randn(2, 3, 10, head_dim, generator=generator)
    position_ids = torch.randint(0, max_position + 1, (3, 2, 10), generator=generator)
    position_ids[:, 0, :4] = torch.arange(4)  # a few text tokens: equal ids on the three axes
    return q, k, position_ids


def _float32_bound(max_position: int, x: torch.Tensor) -> float:
    return (2 * max_position + 8) * EPS32 * x.abs().max().item()


@pytest.mark.parametrize("max_position", [50, 3000])
def test_qwen2_vl_chunked_mrope_matches_transformers(max_position):
    from transformers import Qwen2VLTextConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding, apply_rotary_pos_emb

    section = [8, 12, 12]
    config = Qwen2VLTextConfig(
        hidden_size=192,
        num_attention_heads=3,
        num_key_value_heads=3,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": section},
    )
    head_dim = 64
    q, k, position_ids = _qk_and_ids(head_dim, max_position)
    cos, sin = Qwen2VLRotaryEmbedding(config)(q, position_ids)
    q_ref, k_ref = apply_rotary_pos_emb(q, k, cos, sin)
    module = MultiAxisRotaryEmbedding(mrope_frequencies(head_dim, section, base=1e6), layout="halves")
    coordinates = position_ids.permute(1, 2, 0)[:, None]  # (batch, 1, seq, 3)
    for x, reference in ((q, q_ref), (k, k_ref)):
        bound = _float32_bound(max_position, x)
        np.testing.assert_allclose(module(x, coordinates).numpy(), reference.numpy(), rtol=0, atol=bound)


@pytest.mark.parametrize("max_position", [50, 3000])
def test_qwen3_vl_interleaved_mrope_matches_transformers(max_position):
    from transformers.models.qwen2_vl.modeling_qwen2_vl import apply_rotary_pos_emb
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding

    section = [12, 10, 10]
    config = Qwen3VLTextConfig(
        hidden_size=192,
        num_attention_heads=3,
        num_key_value_heads=3,
        head_dim=64,
        rope_parameters={"rope_type": "default", "rope_theta": 5e6, "mrope_section": section},
    )
    q, k, position_ids = _qk_and_ids(64, max_position)
    cos, sin = Qwen3VLTextRotaryEmbedding(config)(q, position_ids)
    q_ref, k_ref = apply_rotary_pos_emb(q, k, cos, sin)
    frequencies = mrope_frequencies(64, section, assignment="interleaved", base=5e6)
    module = MultiAxisRotaryEmbedding(frequencies, layout="halves")
    coordinates = position_ids.permute(1, 2, 0)[:, None]
    for x, reference in ((q, q_ref), (k, k_ref)):
        bound = _float32_bound(max_position, x)
        np.testing.assert_allclose(module(x, coordinates).numpy(), reference.numpy(), rtol=0, atol=bound)
    # the NumPy reference, from transformers' (3, batch, seq) ids as documented
    reference64 = rotate_multiaxis(
        q.double().numpy(), np.moveaxis(position_ids.numpy(), 0, -1)[:, None], frequencies, layout="halves"
    )
    np.testing.assert_allclose(reference64, q_ref.numpy(), rtol=0, atol=_float32_bound(max_position, q))


def test_qwen2_vl_vision_axial_rope_matches_transformers():
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLVisionRotaryEmbedding, apply_rotary_pos_emb_vision

    config = Qwen2VLVisionConfig(embed_dim=128, num_heads=4)
    head_dim, max_position = 32, 40
    generator = torch.Generator().manual_seed(RNG_SEED)
    rows, columns = torch.meshgrid(torch.arange(0, 40, 5), torch.arange(0, 40, 8), indexing="ij")
    position_ids = torch.stack((rows.flatten(), columns.flatten()), dim=-1)  # (patches, 2): height, width
    q = torch.randn(len(position_ids), 4, head_dim, generator=generator)  # (seq, heads, head_dim)
    cos, sin = Qwen2VLVisionRotaryEmbedding(config)(q, position_ids)
    q_ref, _ = apply_rotary_pos_emb_vision(q, q, cos, sin)
    module = MultiAxisRotaryEmbedding(axial_frequencies(head_dim, 2, base=10000.0), layout="halves")
    got = module(q.transpose(0, 1), position_ids).transpose(0, 1)
    np.testing.assert_allclose(got.numpy(), q_ref.numpy(), rtol=0, atol=_float32_bound(max_position, q))
