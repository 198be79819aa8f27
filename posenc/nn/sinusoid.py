"""The fixed sinusoidal encoding of Vaswani et al. (2017) as a module that adds it to embeddings.

The module takes ``x`` of shape ``(batch, seq, d_model)`` and returns ``x`` plus one position vector per
sequence index, broadcast over the batch: the *sequence* axis is the one that indexes positions.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from numpy.typing import ArrayLike
from torch import nn

from posenc._validation import (
    LAYOUTS,
    MAX_TABLE_ELEMENTS,
    Layout,
    check_choice,
    check_d_model,
    check_int,
    check_real,
    check_table_size,
)
from posenc.nn._checks import HostConstants, batch_positions, check_embeddings, check_offset
from posenc.sinusoid import frequencies, layout_permutation, sinusoidal

__all__ = ["SinusoidalPositionalEncoding"]

_MAX_POSITION = 2**53
"""Largest ``offset + seq``: positions stay exact integers in float64 up to here."""


class SinusoidalPositionalEncoding(nn.Module):
    r"""Add the fixed sinusoidal encoding of Vaswani et al. (2017) to a batch of embeddings.

    ``x`` is ``(batch, seq, d_model)``; its rows sit at positions ``0 ... seq - 1`` unless :meth:`forward` is
    given an ``offset`` (int or 0-d tensor: one token decoded after a cache) or ``positions`` (``(seq,)``,
    ``(1, seq)`` or ``(batch, seq)``, e.g. left-padded batches).

    Parameters
    ----------
    d_model : int
        Width of the embeddings; positive and even.
    max_len : int, default 2048
        Number of positions whose encodings are computed up front. It is a cache size, not a limit: a
        longer input of length ``seq`` grows the table to ``max(seq, 2 * cached)`` rows (capped by
        ``posenc.MAX_TABLE_ELEMENTS``), since the formula is defined for every position.
    base : float, default 10000.0
        As in :func:`posenc.sinusoidal`.
    layout : {"interleaved", "cos_first", "halves"}, default "interleaved"
        As in :func:`posenc.sinusoidal`.
    dropout : float, default 0.0
        Dropout probability applied to the sum, in ``[0, 1)``; the paper uses 0.1 (§5.4).

    Attributes
    ----------
    table : (n_cached, d_model) float32 tensor
        The cached encodings, a non-persistent buffer: it follows ``.to(device)`` but is not saved in the
        ``state_dict``, and the module has no trainable parameters.

    Notes
    -----
    :meth:`forward` returns ``dropout(x + table[:seq])`` for ``x`` of shape ``(batch, seq, d_model)``, or the
    encodings of ``offset ... offset + seq - 1`` or of ``positions`` in place of ``table[:seq]``: rows of the
    cached table where they are cached, the same float64 formula rounded once otherwise. The
    caller scales the token embeddings by :math:`\sqrt{d_{model}}` beforehand if it follows the paper
    (§3.4).

    References
    ----------
    .. [1] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017, arXiv:1706.03762, §3.5, §5.4.

    Examples
    --------
    >>> encoding = SinusoidalPositionalEncoding(8, max_len=4)
    >>> encoding(torch.zeros(2, 6, 8)).shape  # longer than max_len: the table grows
    torch.Size([2, 6, 8])
    >>> encoding.table.shape[0] >= 6
    True
    >>> x = torch.randn(1, 6, 8)
    >>> torch.equal(encoding(x[:, 5:], offset=5), encoding(x)[:, 5:])  # decoding one token after five
    True
    """

    table: torch.Tensor

    def __init__(
        self,
        d_model: int,
        *,
        max_len: int = 2048,
        base: float = 10000.0,
        layout: Layout = "interleaved",
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.d_model = check_d_model(d_model)
        max_len = check_int(max_len, "max_len", minimum=1)
        check_table_size(max_len, self.d_model, "max_len")
        self.base = check_real(base, "base", above=1.0)
        self.layout = check_choice(layout, "layout", LAYOUTS)
        self.dropout = nn.Dropout(check_real(dropout, "dropout", at_least=0.0, below=1.0))
        self.register_buffer("table", self._build(max_len, device=None), persistent=False)
        # For positions outside the table: the float64 frequencies (not a buffer: .half() must not round them) and
        # the column of each interleaved [sin | cos] value in the layout.
        columns = layout_permutation("interleaved", self.layout, self.d_model)
        self._constants = HostConstants(
            frequencies=torch.from_numpy(frequencies(self.d_model, base=self.base)),
            columns=torch.from_numpy(np.ascontiguousarray(columns)),
        )

    def _build(self, n_positions: int, device: torch.device | None) -> torch.Tensor:
        table = sinusoidal(n_positions, self.d_model, base=self.base, layout=self.layout, dtype=np.float32)
        # An ordinary tensor even when the table grows inside torch.inference_mode(): the buffer outlives the call.
        with torch.inference_mode(False):
            return torch.from_numpy(table).to(device)

    def forward(
        self, x: torch.Tensor, *, offset: int | torch.Tensor = 0, positions: torch.Tensor | ArrayLike | None = None
    ) -> torch.Tensor:
        """Add the encoding of positions ``offset ... offset + seq - 1`` (or ``positions``) to ``x``, then dropout.

        Parameters
        ----------
        x : (batch, seq, d_model) tensor
            Embeddings, any floating dtype and device; the sequence axis is the one that indexes positions.
        offset : int or 0-d integer tensor, default 0
            Position of row 0: row ``r`` sits at ``offset + r``. ``>= 0`` with ``offset + seq <= 2**53``,
            e.g. the number of tokens already decoded. A tensor's value stays on its device (checked there,
            never read on the host): rows of the table where they exist, the formula past it.
        positions : (seq,), (1, seq) or (batch, seq) tensor, array_like of real, or None, default None
            The position of each row instead (a ``(batch, seq)`` one per batch row: left padding, packed
            sequences), any finite reals (integers at most ``2**53`` in magnitude); not with an ``offset``.
            Integer positions inside the table are its rows; the values of a tensor are checked on its device.

        Returns
        -------
        out : (batch, seq, d_model) tensor
            ``dropout(x + encoding)``, with ``x``'s dtype and device (the float32 encodings are cast to them).
            Without ``offset`` and ``positions``, an input longer than the cached table first grows
            ``table`` to ``max(seq, 2 * cached)`` rows (capped by ``posenc.MAX_TABLE_ELEMENTS``); other
            positions beyond the cache (and, when compiling, those of a longer input: a graph leaves the
            table as it is) are computed for the call.

        Raises
        ------
        TypeError
            If ``x`` is not a floating tensor, ``offset`` not an int or 0-d integer tensor, or ``positions``
            not real.
        ValueError
            If ``x`` is not of shape ``(batch, seq, d_model)``, ``seq * d_model`` exceeds
            ``posenc.MAX_TABLE_ELEMENTS``, ``offset`` is negative or too large, ``positions`` is not finite or
            not of shape ``(seq,)``, ``(1, seq)`` or ``(batch, seq)``, or both are given.
        """
        seq = check_embeddings(x, self.d_model)
        accepted = "an int or 0-d integer tensor >= 0 with offset + seq <= 2**53"
        device = self.table.device
        offset = check_offset(offset, minimum=0, maximum=_MAX_POSITION - seq, accepted=accepted, device=device)
        encoding: torch.Tensor
        if positions is not None:
            if isinstance(offset, torch.Tensor) or offset:
                raise ValueError(f"pass offset or positions, not both: got offset={offset} and positions")
            encoding = self._encode(batch_positions(positions, x, self.d_model).to(device))
        elif isinstance(offset, torch.Tensor):  # its value stays on the device: rows of the table where they exist
            encoding = self._encode(offset + torch.arange(seq, device=device))
        elif offset + seq <= self.table.shape[0]:
            encoding = self.table[offset : offset + seq]
        elif offset == 0 and not torch.compiler.is_compiling():  # a traced call leaves the table as it is
            check_table_size(seq, self.d_model, "sequence length of x")
            grown = max(seq, min(2 * self.table.shape[0], MAX_TABLE_ELEMENTS // self.d_model))
            self.table = self._build(grown, device=self.table.device)
            encoding = self.table[:seq]
        else:  # beyond the cache: these rows only, not a table up to offset + seq
            encoding = self._formula(torch.arange(offset, offset + seq, dtype=torch.float64, device=device))
        out: torch.Tensor = self.dropout(x + encoding.to(dtype=x.dtype, device=x.device))
        return out

    def _encode(self, positions: torch.Tensor) -> torch.Tensor:
        """The encodings of ``positions`` (a tensor on the table's device): ``(*positions.shape, d_model)``.

        Integer positions inside the table are its rows; the others (outside it, or fractional) are
        :meth:`_formula`'s. Both are computed and one is picked per position, on the device: which positions lie
        inside is never read on the host.
        """
        check_table_size(positions.numel(), self.d_model)
        computed = self._formula(positions.to(torch.float64))
        if positions.is_floating_point():
            return computed
        rows = self.table.shape[0]
        inside = (positions >= 0) & (positions < rows)
        return torch.where(inside[..., None], self.table[positions.clamp(0, rows - 1)], computed)

    def _formula(self, positions: torch.Tensor) -> torch.Tensor:
        """:func:`posenc.sinusoidal` of float64 ``positions`` (any shape) in torch, rounded once to the table dtype."""
        device = positions.device
        angles = positions[..., None] * self._constants.on("frequencies", device)
        interleaved = torch.stack((torch.sin(angles), torch.cos(angles)), dim=-1).flatten(-2)
        return interleaved[..., self._constants.on("columns", device)].to(self.table.dtype)

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> SinusoidalPositionalEncoding:
        # .to(device), .cuda(), ...: the float64 constants follow the module's device, never its dtype
        self._constants.follow(fn)
        super()._apply(fn, recurse)  # type: ignore[no-untyped-call]
        return self

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, cached={self.table.shape[0]}, base={self.base}, layout={self.layout!r}"
