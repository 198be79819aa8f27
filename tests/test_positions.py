"""Positions as models pass them: per-row ``(batch, seq)`` positions, 0-d tensor offsets, and the sequence axis.

Every module of :mod:`posenc.nn` that places tokens can be told where they are, the way transformers' models
tell theirs: ``position_ids`` of shape ``(batch, seq)`` (left padding, packed sequences), ``cache_position`` (a
static cache's position, a 0-d tensor here), and, for rotary, tensors laid out ``(batch, seq, heads, head_dim)``
(``seq_dim=1``). Each result is compared with the float64 NumPy reference of :mod:`posenc`, row by row.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch

import posenc
from posenc.nn import (
    ALiBiBias,
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    T5RelativeBias,
)
from posenc.testing import assert_rotary_uses_sequence_axis

LAYOUTS = ["interleaved", "halves"]


def _generator(seed=0):
    return torch.Generator().manual_seed(seed)


def _left_padded(lengths, seq):
    """transformers' position_ids for a left-padded batch: 0 on the padding, then 0, 1, ... on the tokens."""
    return torch.tensor([[0] * (seq - n) + list(range(n)) for n in lengths])


# --- RotaryEmbedding: per-row positions ---------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_batch_positions_rotate_each_row_of_every_head_at_its_own_positions(layout):
    """(batch, seq) positions line up with x's batch axis (not with its heads), every head of a row alike."""
    rope = RotaryEmbedding(16, layout=layout)
    x = torch.randn(3, 4, 5, 16, dtype=torch.float64, generator=_generator())  # (batch, heads, seq, head_dim)
    positions = torch.tensor([[0, 0, 0, 1, 2], [0, 1, 2, 3, 4], [7, 8, 0, 1, 2]])  # padded, plain, packed
    out = rope(x, positions=positions)
    for b in range(3):
        want = posenc.rotate(x[b].numpy(), positions[b].numpy(), layout=layout)
        np.testing.assert_allclose(out[b].numpy(), want, rtol=0, atol=1e-13)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_one_row_of_positions_is_the_shared_positions_and_the_offset(layout):
    rope = RotaryEmbedding(8, layout=layout)
    x = torch.randn(2, 3, 6, 8, generator=_generator(1))
    shared = rope(x, positions=torch.arange(4, 10))
    assert torch.equal(rope(x, positions=torch.arange(4, 10)[None, :]), shared)
    assert torch.equal(rope(x, offset=4), shared)
    assert torch.equal(rope(x, offset=torch.tensor(4)), shared)  # a 0-d tensor: cache_position[0]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_per_row_float32_positions_keep_the_precision_promise(layout):
    """Rows at positions up to 2**20, each with its own: float32 within 1e-6 * max|x| of the float64 rotation."""
    rope = RotaryEmbedding(64, layout=layout)
    x = torch.randn(2, 2, 4, 64, dtype=torch.float64, generator=_generator(2))
    positions = torch.tensor([[2**20 - 3, 2**20 - 2, 2**20 - 1, 2**20], [0, 1, 2**19, 2**19 + 1]])
    out = rope(x.float(), positions=positions).double()
    for b in range(2):
        want = posenc.rotate(x[b].numpy(), positions[b].numpy(), layout=layout)
        assert np.abs(out[b].numpy() - want).max() <= 1e-6 * float(x.abs().max())


def test_batch_positions_for_a_batch_of_one_and_a_broadcast_batch():
    rope = RotaryEmbedding(8)
    x = torch.randn(1, 2, 3, 8, generator=_generator(3))
    positions = torch.tensor([[5, 6, 9]])
    torch.testing.assert_close(rope(x, positions=positions), rope(x, positions=[5, 6, 9]), rtol=0, atol=0)
    x2 = torch.randn(2, 2, 3, 8, generator=_generator(4))
    assert rope(x2, positions=positions).shape == x2.shape  # (1, seq) against a batch of two


@pytest.mark.argument_check
def test_positions_that_do_not_broadcast_are_refused_with_the_shapes():
    rope = RotaryEmbedding(8)
    with pytest.raises(ValueError, match=r"positions of shape \(3, 5\) does not broadcast against x of shape"):
        rope(torch.zeros(2, 3, 5, 8), positions=torch.zeros(3, 5))  # the batch of 3 lines up with x's batch of 2
    with pytest.raises(ValueError, match="one entry per row"):
        rope(torch.zeros(2, 3, 5, 8), positions=torch.zeros(2, 4))


# --- RotaryEmbedding: integer positions and the cached table -----------------------------------------------------


def _first_of_each_pair(shape, layout):
    """x whose every pair is (1, 0): its rotation is (cos, sin) of the table, bit for bit, whatever the kernel."""
    x = torch.zeros(shape)
    first = slice(0, None, 2) if layout == "interleaved" else slice(0, shape[-1] // 2)
    x[..., first] = 1.0
    return x


@pytest.mark.parametrize("layout", LAYOUTS)
def test_integer_positions_inside_the_cached_table_are_its_rows(layout):
    """Each row of (batch, seq) position_ids gets the offset path's cos and sin at its position, bit for bit
    (both read the cached table), and they come from that table: marked there, the mark shows in the result.
    Positions past the table (and negative ones) are computed, and equal the float64 rotation."""
    rope = RotaryEmbedding(8, layout=layout)
    x = _first_of_each_pair((2, 3, 6, 8), layout)
    positions = torch.tensor([[0, 0, 1, 2, 3, 4], [5, 9, 7, 8, 63, 10]])  # the table holds 64 rows at least
    out = rope(x, positions=positions)
    for b in range(2):
        for r in range(6):
            by_offset = rope(x[b : b + 1, :, r : r + 1], offset=int(positions[b, r]))
            assert torch.equal(out[b : b + 1, :, r : r + 1], by_offset), (b, r)
    (key,) = rope._tables  # mark the cached rows: a rotation read from the table shows the mark
    table = rope._tables[key]
    rope._tables[key] = (2 * table[0], 2 * table[1]) if isinstance(table, tuple) else 2 * table
    assert torch.equal(rope(x, positions=positions), 2 * out)  # the same tensor too: every call reads the table
    far = torch.tensor([[-3, 0, 64, 70, 2**20, 5]])
    x64 = torch.randn(1, 3, 6, 8, dtype=torch.float64, generator=_generator(20))  # float64: its own, unmarked table
    want = posenc.rotate(x64.numpy(), far[0].numpy(), layout=layout)
    np.testing.assert_allclose(rope(x64, positions=far).numpy(), want, rtol=0, atol=1e-13)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("kind", ["positions", "offset"])
def test_a_tensor_updated_in_place_gives_its_new_positions(layout, kind):
    """A static cache's counter or a reused position_ids buffer, updated in place between calls: each call
    rotates by the values the tensor holds then, in float64 and in float32 (the ordinary eager path)."""
    rope = RotaryEmbedding(8, layout=layout)
    x = torch.randn(1, 2, 4, 8, dtype=torch.float64, generator=_generator(21))
    given = torch.arange(4)[None] if kind == "positions" else torch.tensor(0)
    call = (lambda x: rope(x, positions=given)) if kind == "positions" else (lambda x: rope(x, offset=given))
    np.testing.assert_allclose(call(x).numpy(), posenc.rotate(x.numpy(), np.arange(4), layout=layout), atol=1e-13)
    given.add_(1000)
    want = posenc.rotate(x.numpy(), np.arange(1000, 1004), layout=layout)
    np.testing.assert_allclose(call(x).numpy(), want, rtol=0, atol=1e-13)
    x32 = x.float()
    before = call(x32)
    given.add_(-999)
    fresh = RotaryEmbedding(8, layout=layout)
    again = call(x32)
    assert torch.equal(again, fresh(x32, positions=given.clone()) if kind == "positions" else fresh(x32, offset=1))
    assert not torch.equal(again, before)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("kind", ["positions", "offset"])
@pytest.mark.parametrize("how", ["through NumPy", "through .data"])
def test_a_tensor_changed_behind_its_version_counter_gives_its_new_positions(layout, kind, how):
    """Memory shared with NumPy (torch.from_numpy) or changed through .data changes a tensor's values without
    advancing its version counter: nothing a call reuses may depend on that counter (issue 32: a table kept
    per tensor and counter rotated every row by the old positions, an error of 4.5)."""
    rope = RotaryEmbedding(8, layout=layout)
    x = torch.randn(1, 2, 4, 8, generator=_generator(25))  # float32: the path a model's call takes
    array = np.arange(4)[None] if kind == "positions" else np.array(0)
    given = torch.from_numpy(array)
    call = (lambda: rope(x, positions=given)) if kind == "positions" else (lambda: rope(x, offset=given))
    call()
    version = given._version
    if how == "through NumPy":
        array += 1000
    else:
        given.data.add_(1000)
    assert given._version == version  # the premise: the counter did not move
    want = posenc.rotate(x.double().numpy(), np.arange(1000, 1004), layout=layout)
    assert np.abs(call().double().numpy() - want).max() <= 1e-6 * float(x.abs().max())


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.uint8], ids=str)
def test_positions_of_every_integer_dtype_rotate_each_row_at_its_own_position(layout, dtype):
    """int8 and int16 are no index dtype for torch and uint8 indexes as a boolean mask (issue 32: an IndexError
    that named no parameter, or rows read by mask): positions of every integer dtype are the same positions."""
    rope = RotaryEmbedding(8, layout=layout)
    x = torch.randn(2, 3, 64, 8, dtype=torch.float64, generator=_generator(26))
    values = [[0, 1, 2, 100, 127] + list(range(5, 64)), list(range(64))]  # inside the table and past it
    want = np.stack([posenc.rotate(x[b].numpy(), values[b], layout=layout) for b in range(2)])
    for positions in (torch.tensor(values, dtype=dtype), torch.tensor(values[1], dtype=dtype)[None]):
        expected = want if positions.shape[0] == 2 else posenc.rotate(x.numpy(), values[1], layout=layout)
        np.testing.assert_allclose(rope(x, positions=positions).numpy(), expected, rtol=0, atol=1e-13)
        np.testing.assert_allclose(rope(x.float(), positions=positions).double().numpy(), expected, atol=1e-6)
    array = np.array(values[1], dtype=np.dtype(str(dtype).removeprefix("torch.")))  # the NumPy dtype of that name
    np.testing.assert_allclose(
        rope(x, positions=array).numpy(), posenc.rotate(x.numpy(), values[1], layout=layout), rtol=0, atol=1e-13
    )


@pytest.mark.argument_check
def test_a_second_call_by_the_same_positions_checks_x_again():
    """(1, seq) positions need x to have a batch axis: a second call by the same positions tensor refuses an x
    without one, as the first call would."""
    rope = RotaryEmbedding(8)
    positions = torch.arange(3)[None]
    rope(torch.zeros(2, 2, 3, 8), positions=positions)
    with pytest.raises(ValueError, match="does not broadcast"):
        rope(torch.zeros(3, 8), positions=positions)


def test_a_module_with_a_cached_table_pickles_and_rotates_alike():
    """torch.save(model) pickles the module, its cached table included."""
    rope = RotaryEmbedding(8)
    x, positions = torch.randn(1, 2, 4, 8, generator=_generator(24)), torch.arange(4)
    before = rope(x, positions=positions)
    assert torch.equal(pickle.loads(pickle.dumps(rope))(x, positions=positions), before)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_table_made_in_inference_mode_serves_a_training_step(layout):
    """The same position_ids tensor in a validation step under torch.inference_mode() and then in a training
    step: the table cached in inference mode must be an ordinary tensor, or backward raises."""
    rope = RotaryEmbedding(16, layout=layout)
    positions = torch.arange(3, 8)
    with torch.inference_mode():
        rope(torch.randn(2, 5, 16, generator=_generator(22)), positions=positions)
    q = torch.randn(2, 5, 16, generator=_generator(23)).requires_grad_()
    (rope(q, positions=positions) ** 2).sum().backward()
    assert q.grad is not None


# --- RotaryEmbedding: the sequence axis ---------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_seq_dim_1_rotates_a_batch_first_tensor_like_its_transpose(layout):
    x = torch.randn(2, 5, 3, 8, generator=_generator(5))  # (batch, seq, heads, head_dim)
    positions = _left_padded([3, 5], 5)
    heads_first = RotaryEmbedding(8, layout=layout)
    batch_first = RotaryEmbedding(8, layout=layout, seq_dim=1)
    want = heads_first(x.transpose(1, 2), positions=positions).transpose(1, 2)
    torch.testing.assert_close(batch_first(x, positions=positions), want, rtol=0, atol=0)
    want = heads_first(x.transpose(1, 2), offset=7).transpose(1, 2)
    torch.testing.assert_close(batch_first(x, offset=torch.tensor(7)), want, rtol=0, atol=0)
    assert batch_first(x).shape == x.shape


@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_empty_sequence_is_rotated_to_an_empty_result(layout):
    """A prompt of no tokens, batch-first or with (batch, 0) positions: an empty result, not a reshape error."""
    assert RotaryEmbedding(8, layout=layout, seq_dim=1)(torch.zeros(2, 0, 3, 8)).shape == (2, 0, 3, 8)
    assert RotaryEmbedding(8, layout=layout)(torch.zeros(2, 3, 0, 8), positions=torch.zeros(2, 0)).shape == (2, 3, 0, 8)


def test_seq_dim_counts_from_either_end():
    x = torch.randn(2, 5, 3, 8, generator=_generator(6))
    assert torch.equal(RotaryEmbedding(8, seq_dim=1)(x), RotaryEmbedding(8, seq_dim=-3)(x))
    assert torch.equal(RotaryEmbedding(8, seq_dim=2)(x), RotaryEmbedding(8)(x))
    assert "seq_dim=1" in repr(RotaryEmbedding(8, seq_dim=1)) and "seq_dim" not in repr(RotaryEmbedding(8))


def test_the_sequence_axis_check_passes_posencs_module_given_the_axis():
    for layout in LAYOUTS:
        assert_rotary_uses_sequence_axis(RotaryEmbedding(64, layout=layout, seq_dim=1), layout=layout)


def test_the_sequence_axis_check_catches_rotation_along_the_heads():
    """The batch-first mistake: code for (..., seq, head_dim) given (batch, seq, heads, head_dim)."""

    def along_heads(x):  # a minimal faulty implementation: positions along axis -2, here the heads
        return posenc.rotate(x, np.arange(x.shape[-2]))

    for faulty in (along_heads, RotaryEmbedding(64)):  # posenc's own module, not told where the axis is
        with pytest.raises(AssertionError, match=r"rotates along axis 2, the heads.*seq_dim=1"):
            assert_rotary_uses_sequence_axis(faulty)


def test_the_sequence_axis_check_catches_rotation_along_the_batch_and_a_wrong_base():
    def along_batch(x):
        return posenc.rotate(x.swapaxes(0, 2), np.arange(x.shape[0])).swapaxes(0, 2)

    with pytest.raises(AssertionError, match="rotation by batch index"):
        assert_rotary_uses_sequence_axis(along_batch)
    with pytest.raises(AssertionError, match="not rotated by position"):
        assert_rotary_uses_sequence_axis(RotaryEmbedding(64, base=500.0, seq_dim=1))


# --- The absolute encodings -----------------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [3, 5, 40])  # within the cached table, and past it
def test_sinusoidal_offset_is_the_slice_of_a_longer_call(offset):
    x = torch.randn(2, offset + 4, 8, generator=_generator(7))
    whole = SinusoidalPositionalEncoding(8, max_len=8)(x)
    decoding = SinusoidalPositionalEncoding(8, max_len=8)
    assert torch.equal(decoding(x[:, offset:], offset=offset), whole[:, offset:])
    assert torch.equal(decoding(x[:, offset:], offset=torch.tensor(offset)), whole[:, offset:])
    assert decoding.table.shape[0] == 8  # decoding far out does not grow the table up to the offset


def test_sinusoidal_batch_positions_encode_each_row():
    encoding = SinusoidalPositionalEncoding(8, max_len=4, layout="halves")
    x = torch.zeros(2, 5, 8, dtype=torch.float64)
    positions = _left_padded([2, 5], 5)
    added = encoding(x, positions=positions)
    for b in range(2):
        want = posenc.sinusoidal(positions[b].numpy(), 8, layout="halves", dtype=np.float32)
        np.testing.assert_array_equal(added[b].numpy(), want)
    assert torch.equal(encoding(x, positions=positions[1:]), encoding(x))  # (1, seq): shared, 0 ... seq - 1


def test_learned_offset_and_positions_pick_the_rows_and_train_them():
    embedding = LearnedPositionalEmbedding(10, 3)
    x = torch.zeros(2, 2, 3)
    assert torch.equal(embedding(x, offset=torch.tensor(6)), embedding.weight[6:8].expand(2, 2, 3))
    positions = torch.tensor([[0, 4], [9, 1]])
    out = embedding(x, positions=positions)
    assert torch.equal(out, embedding.weight[positions])
    out.sum().backward()
    rows = embedding.weight.grad.abs().sum(dim=1) > 0
    assert rows.tolist() == [i in (0, 1, 4, 9) for i in range(10)]


# --- The biases: a query offset for static caches ---------------------------------------------------------------


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("offset", [0, 2, 5, 9])
def test_alibi_query_offset_equals_the_numpy_reference(causal, offset):
    bias = ALiBiBias(8)(3, 8, causal=causal, offset=torch.tensor(offset))
    want = posenc.alibi_bias(8, 3, 8, causal=causal, offset=offset)
    np.testing.assert_array_equal(bias.numpy(), want.astype(np.float32))
    assert torch.equal(ALiBiBias(8)(3, 8, causal=causal, offset=offset), bias)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("offset", [0, 3, 7, -4, 2**40])  # 2**40: far beyond max_distance, one bucket per side
def test_t5_query_offset_equals_the_numpy_reference(bidirectional, offset):
    module = T5RelativeBias(2, bidirectional=bidirectional, num_buckets=8, max_distance=16)
    buckets = module.buckets(4, 6, offset=torch.tensor(offset))
    relative = np.arange(6)[None, :] - (offset + np.arange(4))[:, None]
    want = posenc.t5_relative_bucket(relative, bidirectional=bidirectional, num_buckets=8, max_distance=16)
    np.testing.assert_array_equal(buckets.numpy(), want)
    bias = module(4, 6, offset=offset)
    assert torch.equal(bias, module.relative_attention_bias.weight[buckets].permute(2, 0, 1))


def test_bias_offset_none_keeps_the_queries_last():
    assert torch.equal(ALiBiBias(4)(2, 5), ALiBiBias(4)(2, 5, offset=3))
    module = T5RelativeBias(2)
    assert torch.equal(module(2, 5), module(2, 5, offset=3))


@pytest.mark.parametrize(
    "make_bias",
    [
        lambda q_len, k_len: ALiBiBias(4)(q_len, k_len, causal=False),
        lambda q_len, k_len: T5RelativeBias(4)(q_len, k_len),
        lambda q_len, k_len: T5RelativeBias(4).buckets(q_len, k_len),
        lambda q_len, k_len: posenc.alibi_bias(4, q_len, k_len, causal=False),
        lambda q_len, k_len: posenc.shaw_relative_indices(q_len, k_len, max_distance=4),
    ],
    ids=["alibi", "t5", "t5-buckets", "alibi-numpy", "shaw"],
)
@pytest.mark.parametrize(("q_len", "k_len"), [(0, 2**40), (2**40, 0)])
def test_an_empty_bias_allocates_nothing_of_the_other_length(make_bias, q_len, k_len):
    """A bias with no query (or no key) is empty whatever the other length: nothing of that length is built.

    The size check passes such a call (0 elements); before the empty case returned first, a 2**40 ``arange``
    was allocated and the call died in the allocator (found by tests/test_fuzz_bad_input.py).
    """
    bias = make_bias(q_len, k_len)
    assert bias.shape[-2:] == (q_len, k_len)
    assert math.prod(bias.shape) == 0
