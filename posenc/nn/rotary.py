r"""Rotary position embedding (Su et al., 2021) as a module that rotates queries or keys.

The module holds no parameters and no buffers: its frequencies are a float64 NumPy array, and its cos/sin
tables are computed in float64 for the positions of each call, rounded once to the dtype of the
computation, and kept in a small cache keyed on everything that determines them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping

import numpy as np
import torch
from numpy.typing import ArrayLike, NDArray
from torch import nn

from posenc._rope import RopeScaling, check_head_dim, inverse_frequencies, parse_scaling
from posenc._validation import (
    ROTARY_LAYOUTS,
    RotaryLayout,
    check_choice,
    check_d_model,
    check_int,
    check_real,
)
from posenc.nn._checks import check_rotary_input, offset_as_int, positions_array

__all__ = ["RotaryEmbedding"]

_MAX_OFFSET = 2**53
"""Largest ``offset + seq``: positions stay exact integers in float64 up to here."""

_Table = torch.Tensor | tuple[torch.Tensor, torch.Tensor]
"""A cached table: complex ``(seq, head_dim // 2)`` (interleaved), or ``[cos | cos]`` and ``sin`` (halves)."""


class RotaryEmbedding(nn.Module):
    r"""Rotate queries or keys by their positions: rotary position embedding.

    ``x`` is ``(..., seq, head_dim)`` by default (``seq_dim=-2``: ``(batch, heads, seq, head_dim)`` as in
    transformers); give ``seq_dim=1`` for ``(batch, seq, heads, head_dim)`` (Meta's Llama code, flash-attn).
    Positions are an ``offset`` (int or 0-d tensor) or a ``(seq,)``, ``(1, seq)`` or ``(batch, seq)`` tensor
    such as transformers' ``position_ids``.

    Parameters
    ----------
    head_dim : int
        Features per head, all of them rotated; positive and even.
    base : float, default 10000.0
        As in :func:`posenc.rotary_frequencies` (``rope_theta`` in transformers' configs).
    layout : {"interleaved", "halves"}, default "interleaved"
        Which features form a rotated pair: ``2i`` and ``2i + 1`` (RoFormer, GPT-J, Meta's Llama code,
        rotary-embedding-torch) or ``i`` and ``i + head_dim // 2`` (GPT-NeoX, transformers'
        ``rotate_half``). See :func:`posenc.rotary_weight_permutation` to move weights between them.
    scaling : RopeScaling, dict or None, default None
        A transformers-style ``rope_parameters`` dict (``"linear"``, ``"dynamic"``, ``"yarn"``,
        ``"llama3"``) or the :class:`posenc.RopeScaling` parsed from one, as in
        :func:`posenc.rotary_frequencies`.
    seq_dim : int, default -2
        The axis of ``x`` that indexes positions: ``-2`` for ``(..., seq, head_dim)``, ``1`` for
        ``(batch, seq, heads, head_dim)``; any axis but the last (``head_dim``), an int in ``[-16, 15]``
        other than ``-1``, counted from the end when negative. With the wrong axis a batch-first tensor
        is rotated by head index, which no error reveals; :func:`posenc.testing.assert_rotary_uses_sequence_axis`
        catches it.

    Attributes
    ----------
    head_dim : int
        Features per head.
    base : float
        The base of the frequencies.
    layout : {"interleaved", "halves"}
        Which features form a rotated pair.
    scaling : RopeScaling
        The scaling as parsed (``RopeScaling()`` for ``scaling=None``): its ``repr`` shows the rope type, the
        factor, the resolved defaults and the attention scaling.
    attention_factor : float
        What every rotated feature is multiplied by: ``scaling.attention_scaling``
        (:func:`posenc.rotary_attention_factor`), 1.0 except for ``"yarn"``.
    seq_dim : int
        The axis of ``x`` that indexes positions.

    Notes
    -----
    :meth:`forward` rotates ``x`` of shape ``(..., seq, head_dim)`` (or with ``seq`` at ``seq_dim``), the row
    ``r`` at position ``offset + r`` or ``positions[..., r]``; there is no maximum length. *Per-row
    positions*: a ``(batch, seq)`` ``positions`` gives row ``b`` of ``x``'s first axis its own positions
    (left padding, packed sequences), shared by every head; its leading axes line up with ``x``'s leading
    axes, as transformers' ``position_ids`` do (not from the right, which would put ``batch`` on ``heads``).

    *Precision.* Angles are never formed in float32 or bfloat16: the positions and frequencies are float64,
    so is ``position * frequency``, and its cosine and sine are computed in float64 and rounded once, to
    float64 for a float64 ``x`` and to float32 otherwise. float16 and bfloat16 inputs are rotated in
    float32 and rounded back once. A float32 result is within ``1e-6 * max|x|`` of the float64 rotation
    at every position up to 2**20 (the tests pin it), where a table built from float32 angles is off by
    up to ``position * 2**-24`` radians: 0.06 at position 2**20.

    *The interleaved layout* is computed as one complex multiplication, ``x`` read as complex numbers
    ``x[2i] + 1j * x[2i + 1]`` times ``exp(1j * angle)`` (Meta's Llama code does the same). *The halves
    layout* is ``x * [cos | cos]`` plus the two cross terms ``-x[half:] * sin`` and ``x[:half] * sin``
    added in place: three passes over the tensor and one allocation, where ``rotate_half`` makes five.

    *Tables.* The tables for the last few calls are cached, keyed on the offset and length (or the
    positions themselves), the device and the dtype, so repeated calls with the same shape reuse them and
    a new offset never reuses a table built for another (a cache that ignores the offset returns the
    rotation of the wrong positions: lucidrains/rotary-embedding-torch#11). Tables are built on the CPU
    (float64 is available there on every platform) and moved to ``x``'s device. The module has no
    parameters or buffers, so its ``state_dict`` is empty and ``.to(dtype)`` cannot degrade its
    frequencies.

    *Scalings.* For ``"yarn"`` the result is multiplied by :func:`posenc.rotary_attention_factor`, as
    transformers multiplies its cos and sin. For ``"dynamic"`` the frequencies of each call are those of
    the length ``max(position) + 1`` of that call; transformers' ``dynamic_rope_update`` keeps those of the
    largest length seen so far, until a call within the trained length resets them. Either way, keys cached
    at an earlier, shorter length were rotated with other frequencies than later queries: an inconsistency
    of dynamic scaling itself.

    References
    ----------
    .. [1] J. Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", arXiv:2104.09864.

    Examples
    --------
    >>> rope = RotaryEmbedding(64)
    >>> q = torch.randn(2, 8, 16, 64)  # (batch, heads, seq, head_dim)
    >>> rope(q).shape, rope(q.to(torch.bfloat16)).dtype
    (torch.Size([2, 8, 16, 64]), torch.bfloat16)
    >>> torch.allclose(rope(q[..., 5:, :], offset=5), rope(q)[..., 5:, :])  # a later slice, same rotation
    True
    >>> len(rope.state_dict()), len(list(rope.parameters()))
    (0, 0)
    """

    _CACHED_TABLES = 4

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        layout: RotaryLayout = "interleaved",
        scaling: RopeScaling | Mapping[str, object] | None = None,
        seq_dim: int = -2,
    ) -> None:
        super().__init__()
        self.head_dim = check_d_model(head_dim, name="head_dim")
        self.base = check_real(base, "base", above=1.0)
        self.layout = check_choice(layout, "layout", ROTARY_LAYOUTS)
        self.scaling = parse_scaling(scaling, self.base)
        check_head_dim(self.head_dim, self.scaling)
        self.attention_factor = self.scaling.attention_scaling
        self.seq_dim = check_int(seq_dim, "seq_dim", minimum=-16, maximum=15)
        if self.seq_dim == -1:
            raise ValueError("seq_dim must not be -1: the last axis of x holds head_dim, the sequence axis is another")
        # float64 NumPy, not a buffer: .to(torch.float16) must not round the frequencies.
        self._inv_freq = None if self.scaling.rope_type == "dynamic" else self._frequencies(None)
        self._tables: OrderedDict[Hashable, _Table] = OrderedDict()

    def _frequencies(self, seq_len: float | None) -> NDArray[np.float64]:
        return inverse_frequencies(self.head_dim, self.base, self.scaling, seq_len)

    def _build_table(self, positions: NDArray[np.float64], device: torch.device, dtype: torch.dtype) -> _Table:
        """The table of float64 ``positions``: complex ``(seq, half)``, or ``[cos | cos]`` and ``sin``."""
        inv_freq = self._inv_freq
        if inv_freq is None:  # dynamic: the frequencies depend on the length of this call
            inv_freq = self._frequencies(float(positions.max()) + 1.0 if positions.size else None)
        angles = np.multiply.outer(positions, inv_freq)
        cosines = torch.from_numpy(self.attention_factor * np.cos(angles))
        sines = torch.from_numpy(self.attention_factor * np.sin(angles))
        if self.layout == "interleaved":
            complex_dtype = torch.complex128 if dtype == torch.float64 else torch.complex64
            table = torch.complex(cosines, sines).to(complex_dtype)
            return table.to(device)
        both_cosines = torch.cat((cosines, cosines), dim=-1).to(device=device, dtype=dtype)
        return both_cosines, sines.to(device=device, dtype=dtype)

    def _table(
        self, key: Hashable, positions: Callable[[], NDArray[np.float64]], device: torch.device, dtype: torch.dtype
    ) -> _Table:
        table = self._tables.get(key)
        if table is None:
            # Built as an ordinary tensor even inside torch.inference_mode() (a validation loop): the cache
            # outlives the call, and an inference tensor reused by a later training step at the same length
            # would raise "Inference tensors cannot be saved for backward".
            with torch.inference_mode(False):
                table = self._build_table(positions(), device, dtype)
            self._tables[key] = table
            while len(self._tables) > self._CACHED_TABLES:
                self._tables.popitem(last=False)
        else:
            self._tables.move_to_end(key)
        return table

    def forward(
        self, x: torch.Tensor, *, offset: int | torch.Tensor = 0, positions: torch.Tensor | ArrayLike | None = None
    ) -> torch.Tensor:
        r"""Rotate the queries or keys ``x``: pair ``i`` of a row at position ``p`` turns by ``p`` times its frequency.

        Parameters
        ----------
        x : (..., seq, head_dim) tensor
            Queries or keys, any floating dtype and device, e.g. ``(batch, heads, seq, head_dim)``; ``seq``
            is at axis ``seq_dim`` (``(batch, seq, heads, head_dim)`` with ``seq_dim=1``).
        offset : int or 0-d integer tensor, default 0
            Position of row 0: row ``r`` sits at ``offset + r``. ``>= 0`` with ``offset + seq <= 2**53``,
            e.g. the number of tokens already in a key/value cache, or a static cache's
            ``cache_position[0]``.
        positions : (seq,), (1, seq) or (batch, seq) tensor, array_like of real, or None, default None
            The position of each row instead, any finite reals (fractional included); not with an
            ``offset``. A ``(batch, seq)`` tensor (transformers' ``position_ids``) gives each entry of
            ``x``'s first axis its own positions: its leading axes line up with ``x``'s first axes (before
            ``seq_dim``), each 1 or equal to ``x``'s.

        Returns
        -------
        rotated : (..., seq, head_dim) tensor
            ``x`` rotated, with its shape, dtype and device, and multiplied by ``attention_factor``: the
            float64 rotation of :func:`posenc.rotate` computed in float32 (float64 for a float64 ``x``) from
            float64 angles, as *Precision* in the class notes describes. Differentiable in ``x``.

        Raises
        ------
        TypeError
            If ``x`` is not a floating tensor, ``offset`` not an int or 0-d integer tensor, or ``positions``
            not real.
        ValueError
            If ``x`` does not end in ``head_dim`` or has no axis ``seq_dim`` before its last, ``offset`` is
            negative or too large, ``positions`` is not finite, its last axis is not ``seq`` long or its
            leading axes do not broadcast against ``x``'s, or both ``offset`` and ``positions`` are given.
        """
        seq_axis = _sequence_axis(x, self.head_dim, self.seq_dim)
        seq = x.shape[seq_axis]
        offset = _check_offset(offset, seq)
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        key: Hashable
        if positions is None:
            key = ("offset", offset, seq, x.device, dtype)
            table = self._table(key, lambda: offset + np.arange(seq, dtype=np.float64), x.device, dtype)
            leading: tuple[int, ...] = ()
        else:
            if offset:
                raise ValueError(f"pass offset or positions, not both: got offset={offset} and positions")
            position_array = _positions_array(positions, x, seq_axis, self.head_dim)
            key = ("positions", position_array.shape, position_array.tobytes(), x.device, dtype)
            table = self._table(key, lambda: position_array.ravel(), x.device, dtype)
            leading = position_array.shape[:-1]
        if leading or seq_axis != x.ndim - 2:
            # (prod(leading) * seq, width) -> leading, then 1 for each axis before seq, seq, 1 for each after, width
            shape = (*leading, *(1,) * (seq_axis - len(leading)), seq, *(1,) * (x.ndim - 2 - seq_axis))
            table = _reshape_table(table, shape)
        # The casts are skipped, not just no-ops, when x already has the computing dtype: at 16 x 4096 x 64 a
        # call costs about 1 ms, and each skipped Python-level step saves about 1% of it (make bench).
        computed = x if x.dtype == dtype else x.to(dtype)
        if isinstance(table, tuple):  # the halves layout
            rotated = self._rotate_halves(computed, table)
        else:
            rotated = self._rotate_interleaved(computed, table)
        return rotated if rotated.dtype == x.dtype else rotated.to(x.dtype)

    @staticmethod
    def _rotate_interleaved(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        # view_as_complex needs unit stride on the pair axis, even strides elsewhere and an even storage offset.
        # A contiguous view at an odd offset (one token sliced out of a fused projection) needs a copy too, which
        # .contiguous() would not make.
        if x.storage_offset() % 2 or not (
            x.is_contiguous() or (x.stride(-1) == 1 and not any(stride % 2 for stride in x.stride()[:-1]))
        ):
            x = x.clone(memory_format=torch.contiguous_format)
        pairs = torch.view_as_complex(torch.unflatten(x, -1, (-1, 2)))
        return torch.view_as_real(pairs * table).flatten(-2)

    @staticmethod
    def _rotate_halves(x: torch.Tensor, table: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        # Three passes and one allocation: x * [cos | cos], then the cross terms added into each half in place
        # (autograd records the in-place updates of this fresh tensor).
        both_cosines, sines = table
        half = x.shape[-1] // 2
        rotated = torch.mul(x, both_cosines)
        rotated[..., :half].addcmul_(x[..., half:], sines, value=-1)
        rotated[..., half:].addcmul_(x[..., :half], sines)
        return rotated

    def extra_repr(self) -> str:
        seq_dim = "" if self.seq_dim == -2 else f", seq_dim={self.seq_dim}"
        return f"head_dim={self.head_dim}, base={self.base}, layout={self.layout!r}, scaling={self.scaling!r}{seq_dim}"


def _check_offset(offset: object, seq: int) -> int:
    if type(offset) is int and 0 <= offset <= _MAX_OFFSET - seq:  # the common case, without the checks below
        return offset
    accepted = f"an int or 0-d integer tensor >= 0 with offset + seq <= 2**53 (seq = {seq})"
    return check_int(offset_as_int(offset), "offset", minimum=0, maximum=_MAX_OFFSET - seq, accepted=accepted)


def _sequence_axis(x: object, head_dim: int, seq_dim: int) -> int:
    """Check ``x`` (a floating tensor ending in ``head_dim``) and return ``seq_dim`` as an axis ``>= 0``."""
    check_rotary_input(x, head_dim)
    assert isinstance(x, torch.Tensor)  # for mypy: check_rotary_input refuses anything else
    if seq_dim == -2:
        return x.ndim - 2
    axis = seq_dim + x.ndim if seq_dim < 0 else seq_dim
    if not 0 <= axis < x.ndim - 1:
        raise ValueError(
            f"seq_dim={seq_dim} names no axis of x before its last (head_dim): x has shape {tuple(x.shape)}"
        )
    return axis


def _reshape_table(table: _Table, shape: tuple[int, ...]) -> _Table:
    """The table's rows laid out as ``shape`` (its last axis kept), to broadcast against ``x``."""
    if isinstance(table, tuple):  # the last axis named, not -1: a table of an empty sequence has no elements
        return table[0].reshape(*shape, table[0].shape[-1]), table[1].reshape(*shape, table[1].shape[-1])
    return table.reshape(*shape, table.shape[-1])


def _positions_array(positions: object, x: torch.Tensor, seq_axis: int, head_dim: int) -> NDArray[np.float64]:
    """``positions`` (shape ``(..., seq)``, leading axes broadcasting against ``x``'s first axes) as float64 NumPy."""
    seq = x.shape[seq_axis]
    array = positions_array(positions, seq, head_dim, "head_dim", f"seq = x.shape[{seq_axis}]")
    leading = array.shape[:-1]
    if len(leading) > seq_axis or any(n not in (1, m) for n, m in zip(leading, x.shape)):
        raise ValueError(
            f"positions of shape {array.shape} does not broadcast against x of shape {tuple(x.shape)}: its axes "
            f"before the last line up with x's first axes, before the sequence axis {seq_axis}, "
            f"{tuple(x.shape[:seq_axis])}, and each must be 1 or equal to x's ((seq,), (1, seq) or (batch, seq))"
        )
    return array
