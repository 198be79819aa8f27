"""Learned absolute position embeddings: one trained vector per position, up to a fixed length."""

from __future__ import annotations

import torch
from torch import nn

from posenc._validation import check_d_model, check_int, check_table_size
from posenc.nn._checks import check_embeddings

__all__ = ["LearnedPositionalEmbedding"]


class LearnedPositionalEmbedding(nn.Module):
    """Add a trained vector per position, for positions ``0 ... max_len - 1`` only.

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
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = check_int(max_len, "max_len", minimum=1)
        self.d_model = check_d_model(d_model, even=False)
        check_table_size(self.max_len, self.d_model, "max_len")
        self.weight = nn.Parameter(torch.empty(self.max_len, self.d_model))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Add the trained vector of each position ``0 ... seq - 1`` to ``x``.

        Parameters
        ----------
        x : (batch, seq, d_model) tensor
            Embeddings, any floating dtype; ``seq <= max_len``.

        Returns
        -------
        out : (batch, seq, d_model) tensor
            ``x + weight[:seq]``, the weight cast to ``x``'s dtype; gradients flow to ``weight``.

        Raises
        ------
        TypeError
            If ``x`` is not a floating tensor.
        ValueError
            If ``x`` is not of shape ``(batch, seq, d_model)``, or ``seq > max_len``: no vector was trained
            for the later positions.
        """
        seq = check_embeddings(x, self.d_model)
        if seq > self.max_len:
            raise ValueError(
                f"sequence length {seq} exceeds max_len={self.max_len}: no learned vector for later positions"
            )
        return x + self.weight[:seq].to(dtype=x.dtype)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"
