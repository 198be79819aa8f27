r"""Rotary position embedding (Su et al., 2021) as a module that rotates queries or keys.

*Design.* The frequencies are computed once, in float64, by the NumPy reference (:func:`posenc.rotary_frequencies`)
and kept as a float64 tensor that is not a buffer (``.to(torch.float16)`` cannot round them, the ``state_dict``
stays empty; ``.to(device)`` moves them all the same). Everything after that is torch, so that the module traces:
angles ``position * frequency`` and their cosine and sine are computed in float64 and rounded once to the dtype of
the computation. Nothing in ``forward`` reads a tensor's values on the host (no ``.item()``, no copy to the CPU, no
NumPy; ``tests/test_host_reads.py``): on a GPU, each such read would make the host wait for the device in every
layer at every step. Three paths share the rounding rule:

- *eager, an int offset*: the cos/sin table of positions ``0 .. n - 1`` is cached per device and dtype, and a call
  slices rows ``offset .. offset + seq - 1`` out of it; when a call needs more rows the table grows to at least
  twice its length (up to 2**22 entries; beyond, the direct path), the rows it holds unchanged. A decode step
  then costs a slice, not a table (``make bench``: the decode row).
- *eager, integer positions (any integer dtype) or a 0-d tensor offset*: the positions index the same cached
  table, on the device, and those outside it are computed; which ones are is never read on the host, so both
  are computed and one is picked per position. Nothing is kept between calls (as in torchtune, whose
  ``RotaryPositionalEmbeddings`` indexes its cache by ``input_pos``, and transformers, which computes cos and
  sin from ``position_ids`` at each forward pass): every call reads the values its tensor holds then.
- *direct*: under ``torch.compile`` and ``torch.export`` (``torch.compiler.is_compiling()``), for fractional
  ``positions``, and for the length-dependent scalings (``"dynamic"``, ``"longrope"``), the float64 angles of the
  call's own positions are computed in ``forward``. When tracing, no Python-side state is read or written, a 0-d
  tensor offset stays a tensor, and the sequence length may be symbolic: one graph serves every decode offset and
  every length.

*Why.* Measured on this project's 2-core machine while loaded (so only the ratios mean much): one decode step of
:meth:`~posenc.nn.RotaryEmbedding.rotate_pair` on q and k of ``(1, 32, 1, 128)`` took 26 us (interleaved) and 37 us
(halves) from the cached table, against 112 and 135 us when the same step computed its float64 angles; ``make
bench`` compares it with transformers, and the positions path with the offset path. A call by integer positions
costs the offset call plus a gather and the float64 cos and sin of every position: 1.63 (interleaved) and 1.36
(halves) times the offset call for a ``(1, 16, 4096, 64)`` float32 tensor on one thread, more on two threads of
the loaded machine. Keeping the table of the last call by a tensor, keyed by its version counter, made a model's
later layers as cheap as the offset call, and rotated every row by stale positions once the tensor changed
behind that counter (issue 32): correct first. An ordinary eager call (an int ``offset``, float32, the whole head
rotated, rows already cached) skips the checks and the general machinery, whose Python cost more than the small
kernels of a decode step; any other call, an invalid one included, takes the checked path. Under compile the
direct computation is what keeps one graph for every offset. The alternative, float32 angles, is what
transformers and rotary-embedding-torch do, and is off by up to ``position * 2**-24`` radians (0.06 at 2**20).
Devices without float64 (MPS) compute the angles on the CPU and move the rounded tables, which copies a tensor of
positions to the host (not tested here: the project's machines have no such device).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal, get_args

import torch
from numpy.typing import ArrayLike
from torch import nn

from posenc._rope import (
    ROPE_TYPES,
    RopeScaling,
    check_head_dim,
    check_rotary_dim,
    inverse_frequencies,
    parse_scaling,
    resolve_base,
)
from posenc._validation import (
    ROTARY_LAYOUTS,
    RotaryLayout,
    check_choice,
    check_d_model,
    check_int,
    check_real,
)
from posenc.nn._checks import HostConstants, check_offset, check_rotary_input, positions_tensor

__all__ = ["RotaryEmbedding"]

_DynamicLength = Literal["call", "longest"]
"""How ``"dynamic"`` scaling picks its length: that of each call, or the longest seen (transformers)."""

_DYNAMIC_LENGTHS: tuple[_DynamicLength, ...] = get_args(_DynamicLength)

_TABLE_ELEMENTS = 2**22
"""Most entries (positions times rotated pairs) of the eager path's cached table: 32 MiB as complex64."""

_JOINED_ELEMENTS = 2**16
"""Up to this many elements each, :meth:`RotaryEmbedding.rotate_pair` rotates q and k as one tensor (a decode step)."""

_MAX_OFFSET = 2**53
"""Largest ``offset + seq``: positions stay exact integers in float64 up to here."""

_Table = torch.Tensor | tuple[torch.Tensor, torch.Tensor]
"""Complex ``(..., seq, pairs)`` (interleaved, eager), or ``(cos, sin)``: ``[cos | cos]`` for halves, ``cos``
for interleaved when tracing, and ``[-sin | sin]`` for halves, ``sin`` of ``(..., seq, pairs)`` for interleaved."""

_CPU = torch.device("cpu")


class RotaryEmbedding(nn.Module):
    r"""Rotate queries or keys by their positions: rotary position embedding.

    ``x`` is ``(..., seq, head_dim)`` by default (``seq_dim=-2``: ``(batch, heads, seq, head_dim)`` as in
    transformers); give ``seq_dim=1`` for ``(batch, seq, heads, head_dim)`` (Meta's Llama code, flash-attn).
    Positions are an ``offset`` (int or 0-d tensor) or a ``(seq,)``, ``(1, seq)`` or ``(batch, seq)`` tensor
    such as transformers' ``position_ids``. Works under ``torch.compile(fullgraph=True)`` and ``torch.export``
    with a dynamic sequence length (see the module notes for the design).

    Parameters
    ----------
    head_dim : int
        Features per head; positive, and even unless only part of the head is rotated.
    base : float or None, default None
        As in :func:`posenc.rotary_frequencies` (``rope_theta`` in transformers' configs); ``None`` is the
        scaling's ``"rope_theta"`` if it carries one, else 10000.0.
    layout : {"interleaved", "halves"}, default "interleaved"
        Which features form a rotated pair: ``2i`` and ``2i + 1`` (RoFormer, GPT-J, Meta's Llama code,
        rotary-embedding-torch) or ``i`` and ``i + rotary_dim // 2`` (GPT-NeoX, transformers'
        ``rotate_half``). See :func:`posenc.rotary_weight_permutation` to move weights between them.
    scaling : RopeScaling, dict or None, default None
        A transformers-style ``rope_parameters`` dict (every rope_type of :func:`posenc.rotary_frequencies`:
        ``"linear"``, ``"dynamic"``, ``"yarn"``, ``"llama3"``, ``"longrope"``, ``"proportional"``), with an optional
        ``"rope_theta"`` and ``"partial_rotary_factor"``, or the :class:`posenc.RopeScaling` parsed from one.
    seq_dim : int, default -2
        The axis of ``x`` that indexes positions: ``-2`` for ``(..., seq, head_dim)``, ``1`` for
        ``(batch, seq, heads, head_dim)``; any axis but the last (``head_dim``), an int in ``[-16, 15]``
        other than ``-1``, counted from the end when negative. With the wrong axis a batch-first tensor
        is rotated by head index, which no error reveals; :func:`posenc.testing.assert_rotary_uses_sequence_axis`
        catches it.
    rotary_dim : int or None, default None
        Partial rotary: rotate the first ``rotary_dim`` features of each head (even, in ``[2, head_dim]``) and
        pass the others through unchanged (GPT-J's ``rotary_dim``). ``None``: ``int(head_dim *
        partial_rotary_factor)`` of the scaling (GPT-NeoX's ``rotary_pct``, Phi's ``partial_rotary_factor``),
        all of ``head_dim`` without one; given with a factor, the two must agree.
    dynamic_length : {"call", "longest"}, default "call"
        ``"dynamic"`` scaling only: the frequencies of each call are those of its own length
        ``max(position) + 1`` (``"call"``), or of the longest length seen so far, reset once a call is within
        the trained length (``"longest"``: transformers' ``dynamic_rope_update``, to reproduce a transformers
        model exactly; eager only, as it keeps state between calls).

    Attributes
    ----------
    head_dim : int
        Features per head.
    rotary_dim : int
        Features rotated per head (the first ones).
    base : float
        The base of the frequencies.
    layout : {"interleaved", "halves"}
        Which features form a rotated pair.
    scaling : RopeScaling
        The scaling as parsed (``RopeScaling()`` for ``scaling=None``): its ``repr`` shows the rope type, the
        factor, the resolved defaults and the attention scaling.
    attention_factor : float
        What every rotated feature is multiplied by: ``scaling.attention_scaling``
        (:func:`posenc.rotary_attention_factor`), 1.0 except for ``"yarn"`` and ``"longrope"``.
    seq_dim : int
        The axis of ``x`` that indexes positions.
    dynamic_length : {"call", "longest"}
        How ``"dynamic"`` scaling picks its length.

    Notes
    -----
    :meth:`forward` rotates ``x`` of shape ``(..., seq, head_dim)`` (or with ``seq`` at ``seq_dim``), the row
    ``r`` at position ``offset + r`` or ``positions[..., r]``; there is no maximum length. *Per-row
    positions*: a ``(batch, seq)`` ``positions`` gives row ``b`` of ``x``'s first axis its own positions
    (left padding, packed sequences), shared by every head; its leading axes line up with ``x``'s leading
    axes, as transformers' ``position_ids`` do (not from the right, which would put ``batch`` on ``heads``).
    :meth:`rotate_pair` rotates queries and keys with one table.

    *Precision.* Angles are never formed in float32 or bfloat16: the positions and frequencies are float64,
    so is ``position * frequency``, and its cosine and sine are computed in float64 and rounded once, to
    float64 for a float64 ``x`` and to float32 otherwise. float16 and bfloat16 inputs are rotated in
    float32 and rounded back once. A float32 result is within ``1e-6 * max|x|`` of the float64 rotation
    at every position up to 2**20, eager and compiled (the tests pin both), where a table built from float32
    angles is off by up to ``position * 2**-24`` radians: 0.06 at position 2**20.

    *The interleaved layout* is computed (eager) as one complex multiplication, ``x`` read as complex numbers
    ``x[2i] + 1j * x[2i + 1]`` times ``exp(1j * angle)`` (Meta's Llama code does the same), and when tracing
    as the same products in real arithmetic (compilers handle complex tensors poorly). *The halves layout* is
    the swapped halves ``[x[half:] | x[:half]]`` times ``[-sin | sin]`` plus ``x * [cos | cos]``, both added in
    place: three passes over the tensor and one allocation, where ``rotate_half`` makes five. *Partial rotary* rotates
    ``x[..., :rotary_dim]`` so (in the halves layout the pairs are ``i`` and ``i + rotary_dim // 2``, as in
    transformers' GPT-NeoX and Phi) and concatenates the other features unchanged.

    *The cache* holds, per device and dtype, the table of positions ``0 .. n - 1``; a call with an offset reads
    rows ``offset .. offset + seq - 1``, so a new offset never reuses the rows of another (a cache keyed on the
    length alone returns the rotation of the wrong positions: lucidrains/rotary-embedding-torch#11). Integer
    ``positions`` (and a tensor offset) inside it are gathered from it on the device, with the offset path's
    bits. It is built outside ``torch.inference_mode`` and without gradients, so that a table cached in a
    validation loop serves a training step. It is the only state: nothing is kept per tensor of positions, so
    a tensor changed between calls, in place or behind its version counter (memory shared with NumPy,
    ``.data``), is read afresh at every call. The module has no parameters or buffers: its ``state_dict`` is
    empty.

    *On the device.* Nothing is read on the host: a tensor offset or ``positions`` keeps its values on its
    device, and their checks (``offset >= 0``, finite positions) run there; on the CPU they raise at once, on an
    accelerator they are device assertions that fail at the next synchronisation (and leave the device
    unusable, as an index out of range does). Pass positions on ``x``'s device: a CPU tensor is copied there,
    which waits for the device.

    *Scalings.* For ``"yarn"`` and ``"longrope"`` the result is multiplied by the attention factor, as
    transformers multiplies its cos and sin. ``"longrope"`` takes its long factors when the call's largest
    position + 1 exceeds the trained length, as transformers' ``longrope_frequency_update`` does. For
    ``"dynamic"`` see ``dynamic_length``. Either way, keys cached at an earlier, shorter length were rotated with
    other frequencies than later queries: an inconsistency of dynamic scaling itself.

    References
    ----------
    .. [1] J. Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", arXiv:2104.09864.
    .. [2] transformers v5.23, ``src/transformers/modeling_rope_utils.py`` (``dynamic_rope_update``) and
       ``models/gpt_neox/modeling_gpt_neox.py`` (partial rotary).

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
    >>> neox = RotaryEmbedding(64, layout="halves", rotary_dim=16)  # rotary_pct = 0.25
    >>> torch.equal(neox(q)[..., 16:], q[..., 16:])
    True
    """

    def __init__(
        self,
        head_dim: int,
        *,
        base: float | None = None,
        layout: RotaryLayout = "interleaved",
        scaling: RopeScaling | Mapping[str, object] | None = None,
        seq_dim: int = -2,
        rotary_dim: int | None = None,
        dynamic_length: _DynamicLength = "call",
    ) -> None:
        super().__init__()
        if base is not None:
            base = check_real(base, "base", above=1.0)
        self.layout = check_choice(layout, "layout", ROTARY_LAYOUTS)
        self.scaling = parse_scaling(scaling, base, partial=True, rope_types=ROPE_TYPES)
        self.base = resolve_base(base, self.scaling)
        partial = rotary_dim is not None or self.scaling.partial_rotary_factor != 1.0
        self.head_dim = check_d_model(head_dim, even=not partial, name="head_dim")
        self.rotary_dim = check_rotary_dim(self.head_dim, self.scaling, rotary_dim)
        check_head_dim(self.rotary_dim, self.scaling, "head_dim" if self.rotary_dim == self.head_dim else "rotary_dim")
        self.attention_factor = self.scaling.attention_scaling
        self.seq_dim = check_int(seq_dim, "seq_dim", minimum=-16, maximum=15)
        if self.seq_dim == -1:
            raise ValueError("seq_dim must not be -1: the last axis of x holds head_dim, the sequence axis is another")
        self.dynamic_length = check_choice(dynamic_length, "dynamic_length", _DYNAMIC_LENGTHS)
        # float64 tensors, not buffers: .to(torch.float16) must not round the frequencies. Each is copied once to
        # each device that uses it (without waiting for the device).
        rope_type = self.scaling.rope_type
        constants = {"inverse": self._frequencies(None)}
        if rope_type == "longrope":
            constants["long"] = self._frequencies(self._trained_length() + 1.0)
        constants["exponents"] = torch.arange(0, self.rotary_dim, 2, dtype=torch.float64) / self.rotary_dim
        self._constants = HostConstants(**constants)
        self._length_dependent = rope_type in ("dynamic", "longrope")
        # dynamic_length="longest": the longest length seen so far, per device, as a 0-d float64 tensor there
        self._longest: dict[torch.device, torch.Tensor] = {}
        self._tables: dict[tuple[torch.device, torch.dtype], _Table] = {}

    def _frequencies(self, seq_len: float | None) -> torch.Tensor:
        return torch.from_numpy(inverse_frequencies(self.rotary_dim, self.base, self.scaling, seq_len))

    def _trained_length(self) -> float:
        trained = self.scaling.original_max_position_embeddings
        return 0.0 if trained is None else float(trained)

    # --- Tables ------------------------------------------------------------------------------------------

    def _inverse_frequencies(self, positions: torch.Tensor, tracing: bool) -> torch.Tensor:
        """The float64 inverse frequencies of a call at float64 ``positions``, on their device.

        The length-dependent scalings take their length from ``positions.max()`` on the device: nothing is read.
        """
        device = positions.device
        rope_type = self.scaling.rope_type
        inverse = self._constants.on("inverse", device)
        if rope_type not in ("dynamic", "longrope"):
            return inverse
        trained = self._trained_length()
        if positions.numel() == 0:
            length = torch.full((), trained, dtype=torch.float64, device=device)
        else:
            length = positions.max() + 1.0
        if rope_type == "longrope":
            return torch.where(length > trained, self._constants.on("long", device), inverse)
        if self.dynamic_length == "longest":
            if tracing:
                raise NotImplementedError(
                    "dynamic_length='longest' keeps the longest length between calls, which a compiled or exported "
                    "graph cannot: use dynamic_length='call' there"
                )
            # transformers' dynamic_rope_update, on the device: the longest length so far, back to the trained
            # length once a call is within it
            longest = self._longest.get(device, torch.full((), trained, dtype=torch.float64, device=device))
            reset = (length < trained) & (longest > trained)
            length = torch.where(length > longest, length, torch.where(reset, trained, longest))
            self._longest[device] = length
        # inverse_frequencies' dynamic base, in torch: the length is a tensor (traceable, no .item()).
        factor = self.scaling.factor
        length = torch.clamp(length, min=trained)
        rotary_dim = self.rotary_dim
        scaled_base = self.base * (factor * length / trained - (factor - 1.0)) ** (rotary_dim / (rotary_dim - 2))
        return scaled_base ** -self._constants.on("exponents", device)

    def _cos_sin(self, positions: torch.Tensor, dtype: torch.dtype, tracing: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin (times the attention factor) of float64 ``positions (..., seq)``: ``(..., seq, pairs)``."""
        angles = positions[..., None] * self._inverse_frequencies(positions, tracing)
        cosines, sines = torch.cos(angles), torch.sin(angles)
        if self.attention_factor != 1.0:
            cosines, sines = self.attention_factor * cosines, self.attention_factor * sines
        return cosines, sines

    def _table_of(self, positions: torch.Tensor, device: torch.device, dtype: torch.dtype, tracing: bool) -> _Table:
        """The table of float64 ``positions`` (on a float64 device), rounded once to ``dtype`` on ``device``."""
        cosines, sines = self._cos_sin(positions, dtype, tracing)
        return self._assembled(cosines.to(device=device, dtype=dtype), sines.to(device=device, dtype=dtype), tracing)

    def _assembled(self, cosines: torch.Tensor, sines: torch.Tensor, tracing: bool) -> _Table:
        """The table that :meth:`_rotate` multiplies by, from the rounded ``(..., seq, pairs)`` cos and sin.

        Rounded first, then laid out: negating, concatenating or pairing as complex numbers a rounded value gives
        the bits that rounding the float64 layout would (and moves half as many bytes).
        """
        if self.layout == "interleaved" and not tracing:
            return torch.complex(cosines, sines)
        if self.layout == "halves":  # [cos | cos] and [-sin | sin]: what _rotate_halves multiplies by
            return torch.cat((cosines, cosines), dim=-1), torch.cat((-sines, sines), dim=-1)
        return cosines, sines

    def _cached_table(self, needed: int, device: torch.device, dtype: torch.dtype) -> _Table | None:
        """The cached table of positions ``0 .. n - 1``, grown to ``n >= needed`` if needed; None past _TABLE_ELEMENTS.

        A table grows to at least twice its length, by computing the new rows only: a row, once cached, never
        changes, so that every call that reads it gets the same bits.
        """
        pairs = self.rotary_dim // 2
        if needed * pairs > _TABLE_ELEMENTS:
            return None
        key = (device, dtype)
        table = self._tables.get(key)
        rows = 0 if table is None else _rows(table)
        if table is None or rows < needed:
            grown = min(max(needed, 2 * rows, 64), _TABLE_ELEMENTS // pairs)
            # An ordinary tensor even inside torch.inference_mode() (a validation loop): the cache outlives the
            # call, and an inference tensor reused by a training step would raise in backward.
            with torch.inference_mode(False), torch.no_grad():
                work = _float64_device(device)
                new = self._table_of(torch.arange(rows, grown, dtype=torch.float64, device=work), device, dtype, False)
                if table is None:
                    table = new
                elif isinstance(table, tuple):
                    assert isinstance(new, tuple)
                    table = (torch.cat((table[0], new[0])), torch.cat((table[1], new[1])))
                else:
                    assert isinstance(new, torch.Tensor)
                    table = torch.cat((table, new))
            self._tables[key] = table
        return table

    def _cached_rows(self, offset: int, seq: int, device: torch.device, dtype: torch.dtype) -> _Table | None:
        """Rows ``offset .. offset + seq - 1`` of the cached table, grown if needed; None past _TABLE_ELEMENTS."""
        needed = offset + seq
        table = self._cached_table(needed, device, dtype)
        if table is None:
            return None
        if isinstance(table, tuple):
            return table[0][offset:needed], table[1][offset:needed]
        return table[offset:needed]

    def _gathered(self, positions: torch.Tensor, seq: int, dtype: torch.dtype) -> _Table:
        """The table of integer ``positions`` (a tensor on ``x``'s device, ``(..., seq)``), nothing read on the host.

        Positions inside the cached table (grown to at least ``seq`` rows) are gathered from it: the bits of
        the offset path. The others are computed from float64 angles. Which positions lie inside is known only
        on the device, so both are computed and one is picked per position there, before the table is laid out
        (on ``pairs`` columns, not ``rotary_dim``). Nothing is kept between calls: a tensor changed in any way
        (in place, through NumPy or ``.data``, behind its version counter) is read afresh.
        """
        device = positions.device
        if positions.dtype != torch.int64:
            # int8 and int16 are no index dtype, and uint8 (like bool) indexes as a mask: every width, as int64
            positions = positions.to(torch.int64)
        cosines, sines = self._cos_sin(positions.to(_float64_device(device), torch.float64), dtype, False)
        cosines, sines = cosines.to(device=device, dtype=dtype), sines.to(device=device, dtype=dtype)
        table = self._cached_table(seq, device, dtype)
        if table is not None:  # (None: a sequence past the cached table's size limit, computed whole)
            index = positions.clamp(0, _rows(table) - 1)
            inside = (index == positions)[..., None]  # the positions that clamping left as they were
            if isinstance(table, tuple):  # halves: cos is the first half of [cos | cos], sin the last of [-sin | sin]
                pairs = self.rotary_dim // 2
                cosines = torch.where(inside, table[0][:, :pairs][index], cosines)
                sines = torch.where(inside, table[1][:, pairs:][index], sines)
            else:
                return torch.where(inside, table[index], torch.complex(cosines, sines))
        return self._assembled(cosines, sines, False)

    def _table(
        self, x: torch.Tensor, seq_axis: int, offset: int | torch.Tensor, positions: object, dtype: torch.dtype
    ) -> tuple[_Table, int]:
        """The table for ``x`` and the number of leading axes of its positions (0 for an offset)."""
        tracing = torch.compiler.is_compiling()
        seq = x.shape[seq_axis]
        device = x.device
        work = _float64_device(device)
        cached = not tracing and not self._length_dependent  # whether the cached table may serve this call
        if isinstance(offset, torch.Tensor):  # a static cache's counter: its value stays on the device
            if positions is not None:
                raise ValueError("pass offset or positions, not both: got a tensor offset and positions")
            offset = _traced_offset(offset) if tracing else _check_tensor_offset(offset, seq, device)
            assert isinstance(offset, torch.Tensor)  # for mypy: a tensor stays a tensor
            if not cached:
                start = offset.to(device=work, dtype=torch.float64)
                positions_64 = start + torch.arange(seq, dtype=torch.float64, device=work)
                return self._table_of(positions_64, device, dtype, tracing), 0
            return self._gathered(offset + torch.arange(seq, device=device), seq, dtype), 0
        offset = _traced_offset(offset) if tracing else _check_offset(offset, seq)
        assert isinstance(offset, int)  # a tensor was handled above
        if positions is None:
            if cached:
                rows = self._cached_rows(offset, seq, device, dtype)
                if rows is not None:
                    return rows, 0
            position_tensor = torch.arange(offset, offset + seq, dtype=torch.float64, device=work)
            return self._table_of(position_tensor, device, dtype, tracing), 0
        if offset != 0:
            raise ValueError(f"pass offset or positions, not both: got offset={offset} and positions")
        if tracing:
            given = _traced_positions(positions, x, seq_axis)
        else:
            given = _positions_tensor(positions, x, seq_axis, self.head_dim)
        if given.ndim > 1 and given.shape[:-1].numel() == 1:  # (1, seq): the same positions for every row of x
            given = given.reshape(-1)
        leading = given.ndim - 1
        if not cached or given.is_floating_point():
            return self._table_of(given.to(device=work, dtype=torch.float64), device, dtype, tracing), leading
        return self._gathered(given, seq, dtype), leading

    # --- Rotation ----------------------------------------------------------------------------------------

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
            ``cache_position[0]``. A tensor's value is never read on the host, eager or compiled (one graph
            for every offset); an int is specialised by Dynamo, so compile with ``dynamic=True`` for one graph
            (without it, Dynamo makes a second, dynamic graph when the int first changes, and no more).
        positions : (seq,), (1, seq) or (batch, seq) tensor, array_like of real, or None, default None
            The position of each row instead, any finite reals (fractional included; integers at most
            ``2**53`` in magnitude, where float64 is exact); not with an
            ``offset``. A ``(batch, seq)`` tensor (transformers' ``position_ids``) gives each entry of
            ``x``'s first axis its own positions: its leading axes line up with ``x``'s first axes (before
            ``seq_dim``), each 1 or equal to ``x``'s. A tensor when compiled. Integer positions inside the
            cached table are read from it, as an offset's are.

        Returns
        -------
        rotated : (..., seq, head_dim) tensor
            ``x`` with its first ``rotary_dim`` features rotated and multiplied by ``attention_factor``, the
            others unchanged, with ``x``'s shape, dtype and device: the float64 rotation of
            :func:`posenc.rotate` computed in float32 (float64 for a float64 ``x``) from float64 angles, as
            *Precision* in the class notes describes. Differentiable in ``x``.

        Raises
        ------
        TypeError
            If ``x`` is not a floating tensor, ``offset`` not an int or 0-d integer tensor, or ``positions``
            not real.
        ValueError
            If ``x`` does not end in ``head_dim`` or has no axis ``seq_dim`` before its last, ``offset`` is
            negative or too large, ``positions`` is not finite, its last axis is not ``seq`` long or its
            leading axes do not broadcast against ``x``'s, or both ``offset`` and ``positions`` are given. The
            checks of a tensor's values (``offset``, ``positions``) run on its device: on an accelerator they
            are device assertions, reported at the next synchronisation; when compiling they are skipped.
        NotImplementedError
            When compiling with ``dynamic_length="longest"``.
        """
        rows = self._fast_rows(x, offset, positions)
        if rows is not None:
            return self._rotate_fast(x, rows)
        seq_axis = _sequence_axis(x, self.head_dim, self.seq_dim)
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        table, leading = self._table(x, seq_axis, offset, positions, dtype)
        return self._rotate(x, _broadcast_table(table, x, seq_axis, leading), dtype)

    def rotate_pair(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        *,
        offset: int | torch.Tensor = 0,
        positions: torch.Tensor | ArrayLike | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Rotate queries and keys at the same positions with one table: ``(self(q, ...), self(k, ...))``.

        Parameters
        ----------
        q, k : (..., seq, head_dim) tensor
            Queries and keys of the same dtype, device, number of axes and ``seq``; their other axes may differ
            where the table broadcasts (``heads``, for grouped-query attention).
        offset, positions
            As in :meth:`forward`.

        Returns
        -------
        rotated_q, rotated_k : tuple of tensor
            As :meth:`forward` returns them, with the shapes of ``q`` and ``k``.

        Raises
        ------
        TypeError, ValueError
            As :meth:`forward`, and ``ValueError`` if ``k`` does not match ``q`` as described.
        """
        rows = self._fast_rows(q, offset, positions)
        if (
            rows is not None
            and type(k) is torch.Tensor
            and k.dtype == torch.float32
            and not k.requires_grad
            and k.device == q.device
        ):
            if k.shape == q.shape:
                if isinstance(rows, tuple) and q.numel() <= _JOINED_ELEMENTS:
                    # A decode step in the halves layout: q and k side by side make four kernels instead of six (the
                    # halves swapped by torch.roll, times [-sin | sin], plus x * [cos | cos]); the copy is small.
                    both_cosines, signed_sines = rows
                    both = torch.cat((q, k))
                    swapped = torch.roll(both, self.head_dim // 2, -1).mul_(signed_sines)
                    rotated = torch.addcmul(swapped, both, both_cosines)
                    return rotated[: q.shape[0]], rotated[q.shape[0] :]
                return self._rotate_fast(q, rows), self._rotate_fast(k, rows)
            if k.ndim == q.ndim and k.shape[-2:] == q.shape[-2:]:  # grouped-query attention: fewer key heads
                return self._rotate_fast(q, rows), self._rotate_fast(k, rows)
        seq_axis = _sequence_axis(q, self.head_dim, self.seq_dim, "q")
        _sequence_axis(k, self.head_dim, self.seq_dim, "k")
        if k.ndim != q.ndim or k.shape[seq_axis] != q.shape[seq_axis] or k.dtype != q.dtype or k.device != q.device:
            raise ValueError(
                f"k must have q's number of axes, sequence length, dtype and device: got q {tuple(q.shape)} "
                f"{q.dtype} on {q.device} and k {tuple(k.shape)} {k.dtype} on {k.device}"
            )
        dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        table, leading = self._table(q, seq_axis, offset, positions, dtype)
        table = _broadcast_table(table, q, seq_axis, leading)
        joined = self.layout == "halves" and not leading and seq_axis > 0 and not torch.compiler.is_compiling()
        if joined and q.shape == k.shape and q.numel() <= _JOINED_ELEMENTS:
            # A decode step in the halves layout (three kernels per tensor): q and k side by side make four launches
            # instead of six; the copy is small. (Interleaved is one complex product per tensor: nothing to save.)
            both = self._rotate(torch.cat((q, k)), table, dtype)
            return both[: q.shape[0]], both[q.shape[0] :]
        return self._rotate(q, table, dtype), self._rotate(k, table, dtype)

    # --- The ordinary eager call, without the general machinery (make bench: the decode rows) ----------------

    def _fast_rows(self, x: object, offset: object, positions: object) -> _Table | None:
        """The cached rows for ``x`` if the call is an ordinary eager one, else None (the checked path).

        Ordinary: not compiling, the default ``seq_dim``, the whole head rotated, a scaling that does not depend on
        the length, a float32 tensor ``(..., seq, head_dim)`` without gradient, no ``positions``, and an int
        ``offset >= 0`` whose rows the cached float32 table already covers. Everything else, every invalid input
        included, takes the path that checks it, so that errors and results stay as they are; this one skips its
        general machinery (make bench: the decode rows).
        """
        if (
            positions is not None
            or type(offset) is not int
            or offset < 0
            or type(x) is not torch.Tensor
            or x.dtype != torch.float32
            or x.requires_grad
            or self.seq_dim != -2
            or self.rotary_dim != self.head_dim
            or self._length_dependent
            or torch.compiler.is_compiling()
        ):
            return None
        shape = x.shape
        if len(shape) < 2 or shape[-1] != self.head_dim:
            return None
        table = self._tables.get((x.device, torch.float32))
        if table is None:
            return None
        end = offset + shape[-2]
        if isinstance(table, tuple):
            return (table[0][offset:end], table[1][offset:end]) if end <= table[0].shape[0] else None
        return table[offset:end] if end <= table.shape[0] else None

    def _rotate_fast(self, x: torch.Tensor, rows: _Table) -> torch.Tensor:
        """:meth:`_rotate` of an ``x`` that :meth:`_fast_rows` accepted (float32, rotated whole, no gradient)."""
        return _rotate_halves(x, rows) if isinstance(rows, tuple) else _rotate_interleaved_complex(x, rows)

    def _rotate(self, x: torch.Tensor, table: _Table, dtype: torch.dtype) -> torch.Tensor:
        # The casts are skipped, not just no-ops, when x already has the computing dtype (make bench: decode).
        computed = x if x.dtype == dtype else x.to(dtype)
        rotary_dim = self.rotary_dim
        head = computed if rotary_dim == self.head_dim else computed[..., :rotary_dim]
        if self.layout == "halves":
            assert isinstance(table, tuple)
            rotated = _rotate_halves(head, table)
        elif isinstance(table, tuple):
            rotated = _rotate_interleaved_real(head, table)
        else:
            rotated = _rotate_interleaved_complex(head, table)
        if rotary_dim != self.head_dim:
            rotated = torch.cat((rotated, computed[..., rotary_dim:]), dim=-1)
        return rotated if rotated.dtype == x.dtype else rotated.to(x.dtype)

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> RotaryEmbedding:
        # .to(device), .cuda(), ...: the float64 constants follow the module's device, never its dtype
        self._constants.follow(fn)
        super()._apply(fn, recurse)  # type: ignore[no-untyped-call]
        return self

    def extra_repr(self) -> str:
        extra = "" if self.seq_dim == -2 else f", seq_dim={self.seq_dim}"
        if self.rotary_dim != self.head_dim:
            extra += f", rotary_dim={self.rotary_dim}"
        if self.dynamic_length != "call":
            extra += f", dynamic_length={self.dynamic_length!r}"
        return f"head_dim={self.head_dim}, base={self.base}, layout={self.layout!r}, scaling={self.scaling!r}{extra}"


def _rotate_interleaved_complex(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    # A complex view needs unit stride on the pair axis, even strides elsewhere (Tensor.view(dtype) checks even
    # those of axes of size 1) and an even storage offset. A contiguous view at an odd offset (one token sliced
    # out of a fused projection) needs a copy too, which .contiguous() would not make.
    if x.storage_offset() % 2 or x.stride(-1) != 1 or any(stride % 2 for stride in x.stride()[:-1]):
        x = x.clone(memory_format=torch.contiguous_format)
    if x.requires_grad and torch.is_grad_enabled():
        pairs = torch.view_as_complex(torch.unflatten(x, -1, (-1, 2)))
        return torch.view_as_real(pairs * table).flatten(-2)
    # Without autograd (which Tensor.view(dtype) does not support), x.view(complex dtype) reads each pair as one
    # complex number in one call instead of two, and .view back replaces two more: a decode step is a few calls.
    return (x.view(table.dtype) * table).view(x.dtype)


def _rotate_interleaved_real(x: torch.Tensor, table: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    # The complex product in real arithmetic, for compilers: (a + ib)(c + is) = (ac - bs) + i(as + bc).
    cosines, sines = table
    pairs = torch.unflatten(x, -1, (-1, 2))
    a, b = pairs[..., 0], pairs[..., 1]
    return torch.stack((a * cosines - b * sines, a * sines + b * cosines), dim=-1).flatten(-2)


def _rotate_halves(x: torch.Tensor, table: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    # x * [cos | cos] + [x2 | x1] * [-sin | sin], in one allocation, the sum over whole rows: the last pass, three
    # operands, runs at full speed, where updating each half in place (two passes of three operands over 32-float
    # strips of 64-float rows) runs PyTorch's CPU kernels at a third of it (make bench: the halves prefill row).
    # The cross terms are written into the two halves by out= products (two operands each; autograd and
    # compilers do not take out=), else the halves are swapped by a copy and multiplied in place, which reads and
    # writes the tensor once more. Either way the same products are rounded and added in the same order.
    both_cosines, signed_sines = table
    half = x.shape[-1] // 2
    # Compiling is asked first: x.numel() of a dynamic sequence length is symbolic, and comparing it would make
    # a guard that bounds the length (torch.export would refuse a dynamic length past 2**16 / features).
    if torch.compiler.is_compiling() or x.numel() <= _JOINED_ELEMENTS or (x.requires_grad and torch.is_grad_enabled()):
        rotated = torch.cat((x[..., half:], x[..., :half]), dim=-1)
        rotated.mul_(signed_sines)
    else:
        rotated = torch.empty_like(x)
        torch.mul(x[..., half:], signed_sines[..., :half], out=rotated[..., :half])
        torch.mul(x[..., :half], signed_sines[..., half:], out=rotated[..., half:])
    return rotated.addcmul_(x, both_cosines)


def _float64_device(device: torch.device) -> torch.device:
    """Where float64 angles are computed for ``device``: itself, or the CPU for a device without float64 (MPS)."""
    return _CPU if device.type == "mps" else device


def _check_offset(offset: object, seq: int) -> int:
    """An int ``offset`` (not a tensor), checked."""
    if type(offset) is int and 0 <= offset <= _MAX_OFFSET - seq:  # the common case, without the checks below
        return offset
    accepted = f"an int or 0-d integer tensor >= 0 with offset + seq <= 2**53 (seq = {seq})"
    return check_int(offset, "offset", minimum=0, maximum=_MAX_OFFSET - seq, accepted=accepted)


def _check_tensor_offset(offset: torch.Tensor, seq: int, device: torch.device) -> torch.Tensor:
    """A 0-d integer tensor ``offset``: its type and shape checked here, its value on ``device``, where it is moved."""
    accepted = f"an int or 0-d integer tensor >= 0 with offset + seq <= 2**53 (seq = {seq})"
    checked = check_offset(offset, minimum=0, maximum=_MAX_OFFSET - seq, accepted=accepted, device=device)
    assert isinstance(checked, torch.Tensor)  # for mypy: a tensor stays a tensor
    return checked


def _rows(table: _Table) -> int:
    """Number of positions in a table."""
    return (table[0] if isinstance(table, tuple) else table).shape[0]


def _traced_offset(offset: object) -> int | torch.Tensor:
    """``offset`` when compiling: its type and shape checked, not its value (which a graph does not know)."""
    if isinstance(offset, torch.Tensor):
        if offset.is_floating_point() or offset.is_complex() or offset.dtype == torch.bool or offset.ndim != 0:
            raise TypeError(
                f"offset must be an int or a 0-d integer tensor, got a tensor {offset.dtype} {offset.shape}"
            )
        return offset
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"offset must be an int or a 0-d integer tensor, got {type(offset).__name__}")
    return offset


def _traced_positions(positions: object, x: torch.Tensor, seq_axis: int) -> torch.Tensor:
    """``positions`` when compiling: a real tensor whose shape fits ``x`` (its values are not read)."""
    if not isinstance(positions, torch.Tensor) or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError("positions must be a real tensor when compiling (or None with an offset)")
    leading = positions.shape[:-1]
    if (
        positions.ndim == 0
        or positions.shape[-1] != x.shape[seq_axis]
        or len(leading) > seq_axis
        or any(n != 1 and n != m for n, m in zip(leading, x.shape))
    ):
        raise ValueError(f"positions of shape {tuple(positions.shape)} does not fit x of shape {tuple(x.shape)}")
    return positions


def _sequence_axis(x: object, head_dim: int, seq_dim: int, name: str = "x") -> int:
    """Check ``x`` (a floating tensor ending in ``head_dim``) and return ``seq_dim`` as an axis ``>= 0``."""
    check_rotary_input(x, head_dim, name)
    assert isinstance(x, torch.Tensor)  # for mypy: check_rotary_input refuses anything else
    if seq_dim == -2:
        return x.ndim - 2
    axis = seq_dim + x.ndim if seq_dim < 0 else seq_dim
    if not 0 <= axis < x.ndim - 1:
        raise ValueError(
            f"seq_dim={seq_dim} names no axis of {name} before its last (head_dim): {name} has shape {tuple(x.shape)}"
        )
    return axis


def _broadcast_table(table: _Table, x: torch.Tensor, seq_axis: int, leading: int) -> _Table:
    """The table ``(*leading, seq, width)`` laid out to broadcast against ``x`` (its last axis kept)."""
    if not leading and seq_axis == x.ndim - 2:
        return table
    first = table[0] if isinstance(table, tuple) else table
    seq = x.shape[seq_axis]
    leading_shape = tuple(first.shape[:leading])
    shape = (*leading_shape, *(1,) * (seq_axis - leading), seq, *(1,) * (x.ndim - 2 - seq_axis))
    if isinstance(table, tuple):  # the last axis named, not -1: a table of an empty sequence has no elements
        return table[0].reshape(*shape, table[0].shape[-1]), table[1].reshape(*shape, table[1].shape[-1])
    return table.reshape(*shape, table.shape[-1])


def _positions_tensor(positions: object, x: torch.Tensor, seq_axis: int, head_dim: int) -> torch.Tensor:
    """``positions`` (shape ``(..., seq)``, leading axes broadcasting against ``x``'s first axes) on ``x``'s device.

    Integer positions keep their dtype (the cached table serves them); the values stay on the device.
    """
    seq = x.shape[seq_axis]
    tensor = positions_tensor(positions, seq, head_dim, "head_dim", f"seq = x.shape[{seq_axis}]", x.device)
    leading = tuple(tensor.shape[:-1])
    if len(leading) > seq_axis or any(n not in (1, m) for n, m in zip(leading, x.shape)):
        raise ValueError(
            f"positions of shape {tuple(tensor.shape)} does not broadcast against x of shape {tuple(x.shape)}: its "
            f"axes before the last line up with x's first axes, before the sequence axis {seq_axis}, "
            f"{tuple(x.shape[:seq_axis])}, and each must be 1 or equal to x's ((seq,), (1, seq) or (batch, seq))"
        )
    return tensor
