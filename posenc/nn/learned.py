"""Learned absolute position embeddings: one trained vector per position, up to a fixed length."""

from __future__ import annotations

import torch
from numpy.typing import ArrayLike
from torch import nn

from posenc._validation import check_d_model, check_int, check_table_size
from posenc.nn._checks import batch_positions, check_embeddings, check_offset, check_on_device

__all__ = ["LearnedPositionalEmbedding"]


class LearnedPositionalEmbedding(nn.Module):
    """Add a trained vector per position, for positions ``0 ... max_len - 1`` only.

    ``x`` is ``(batch, seq, d_model)``; its rows sit at positions ``0 ... seq - 1`` unless :meth:`forward` is
    given an ``offset`` (int or 0-d tensor: one token decoded after a cache) or integer ``positions``
    (``(seq,)``, ``(1, seq)`` or ``(batch, seq)``, e.g. left-padded batches).

    Parameters
    ----------
    max_len : int
        Number of positions with a trained vector; an input longer than this is refused, because no
        vector exists for the extra positions.
    d_model : int
        Width of the embeddings; any positive int.

    Attributes
    ----------
    weight : (max_len, d_model) nn.Parameter
        One vector per position, initialised from N(0, 0.02²).

    Notes
    -----
    Vaswani et al. (2017, Table 3, row E) report "nearly identical results" for learned and sinusoidal
    encodings; they kept the sinusoid because it may let the model extrapolate to longer sequences.

    References
    ----------
    .. [1] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017, arXiv:1706.03762, §3.5 and Table 3.

    Examples
    --------
    >>> embedding = LearnedPositionalEmbedding(4, 8)
    >>> embedding(torch.zeros(2, 3, 8)).shape
    torch.Size([2, 3, 8])
    >>> torch.equal(embedding(torch.zeros(1, 1, 8), offset=3)[0, 0], embedding.weight[3])  # the 4th token
    True
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = check_int(max_len, "max_len", minimum=1)
        self.d_model = check_d_model(d_model, even=False)
        check_table_size(self.max_len, self.d_model, "max_len")
        self.weight = nn.Parameter(torch.empty(self.max_len, self.d_model))
        nn.init.normal_(self.weight, std=0.02)

    def forward(
        self, x: torch.Tensor, *, offset: int | torch.Tensor = 0, positions: torch.Tensor | ArrayLike | None = None
    ) -> torch.Tensor:
        """Add the trained vector of each position ``offset ... offset + seq - 1`` (or ``positions``) to ``x``.

        Parameters
        ----------
        x : (batch, seq, d_model) tensor
            Embeddings, any floating dtype; ``seq <= max_len``.
        offset : int or 0-d integer tensor, default 0
            Position of row 0: row ``r`` sits at ``offset + r``; ``>= 0`` with ``offset + seq <= max_len``.
        positions : (seq,), (1, seq) or (batch, seq) integer tensor, array_like of int, or None, default None
            The position of each row instead (a ``(batch, seq)`` one per batch row), each in
            ``[0, max_len)``; not with an ``offset``. The values of a tensor offset or positions are checked
            on its device (on an accelerator by a device assertion, reported at the next synchronisation),
            never read on the host.

        Returns
        -------
        out : (batch, seq, d_model) tensor
            ``x + weight[offset : offset + seq]`` (or ``x + weight[positions]``), the weight cast to ``x``'s
            dtype; gradients flow to ``weight``.

        Raises
        ------
        TypeError
            If ``x`` is not a floating tensor, ``offset`` not an int or 0-d integer tensor, or ``positions``
            not integers.
        ValueError
            If ``x`` is not of shape ``(batch, seq, d_model)``, a position is negative or ``>= max_len`` (no
            vector was trained for it), ``positions`` is not of shape ``(seq,)``, ``(1, seq)`` or
            ``(batch, seq)``, or both are given.
        """
        seq = check_embeddings(x, self.d_model)
        if seq > self.max_len:
            raise ValueError(
                f"sequence length {seq} exceeds max_len={self.max_len}: no learned vector for later positions"
            )
        accepted = f"an int or 0-d integer tensor >= 0 with offset + seq <= max_len = {self.max_len} (seq = {seq})"
        device = self.weight.device
        offset = check_offset(offset, minimum=0, maximum=self.max_len - seq, accepted=accepted, device=device)
        if positions is None:
            if isinstance(offset, torch.Tensor):  # its value stays on the device
                return x + self.weight[offset + torch.arange(seq, device=device)].to(dtype=x.dtype)
            return x + self.weight[offset : offset + seq].to(dtype=x.dtype)
        if isinstance(offset, torch.Tensor) or offset:
            raise ValueError(f"pass offset or positions, not both: got offset={offset} and positions")
        index = batch_positions(positions, x, self.d_model).to(device)
        if index.is_floating_point():
            check_on_device(
                (index == index.round()).all(),
                "positions must be integers: a learned embedding has a vector per integer position only",
                TypeError,
            )
        check_on_device(
            ((index >= 0) & (index < self.max_len)).all(),
            f"positions must be in [0, max_len = {self.max_len}): no vector was trained for positions outside",
        )
        return x + self.weight[index.to(torch.int64)].to(dtype=x.dtype)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"
