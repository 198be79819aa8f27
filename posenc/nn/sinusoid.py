"""The fixed sinusoidal encoding of Vaswani et al. (2017) as a module that adds it to embeddings.

The module takes ``x`` of shape ``(batch, seq, d_model)`` and returns ``x`` plus one position vector per
sequence index, broadcast over the batch: the *sequence* axis is the one that indexes positions.
"""

from __future__ import annotations

import numpy as np
import torch
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
from posenc.nn._checks import check_embeddings
from posenc.sinusoid import sinusoidal

__all__ = ["SinusoidalPositionalEncoding"]


class SinusoidalPositionalEncoding(nn.Module):
    r"""Add the fixed sinusoidal encoding of Vaswani et al. (2017) to a batch of embeddings.

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
    :meth:`forward` returns ``dropout(x + table[:seq])`` for ``x`` of shape ``(batch, seq, d_model)``. The
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

    def _build(self, n_positions: int, device: torch.device | None) -> torch.Tensor:
        table = sinusoidal(n_positions, self.d_model, base=self.base, layout=self.layout, dtype=np.float32)
        # An ordinary tensor even when the table grows inside torch.inference_mode(): the buffer outlives the call.
        with torch.inference_mode(False):
            return torch.from_numpy(table).to(device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Add the encoding of positions ``0 ... seq - 1`` to ``x``, then apply dropout.

        Parameters
        ----------
        x : (batch, seq, d_model) tensor
            Embeddings, any floating dtype and device; the sequence axis is the one that indexes positions.

        Returns
        -------
        out : (batch, seq, d_model) tensor
            ``dropout(x + table[:seq])``, with ``x``'s dtype and device (the float32 table is cast to them).
            An input longer than the cached table first grows ``table`` to ``max(seq, 2 * cached)`` rows
            (capped by ``posenc.MAX_TABLE_ELEMENTS``).

        Raises
        ------
        TypeError
            If ``x`` is not a floating tensor.
        ValueError
            If ``x`` is not of shape ``(batch, seq, d_model)`` or ``seq * d_model`` exceeds
            ``posenc.MAX_TABLE_ELEMENTS``.
        """
        seq = check_embeddings(x, self.d_model)
        if seq > self.table.shape[0]:
            check_table_size(seq, self.d_model, "sequence length of x")
            grown = max(seq, min(2 * self.table.shape[0], MAX_TABLE_ELEMENTS // self.d_model))
            self.table = self._build(grown, device=self.table.device)
        out: torch.Tensor = self.dropout(x + self.table[:seq].to(dtype=x.dtype, device=x.device))
        return out

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, cached={self.table.shape[0]}, base={self.base}, layout={self.layout!r}"
