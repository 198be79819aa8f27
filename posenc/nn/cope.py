r"""Contextual position encoding (CoPE) in PyTorch: gated positions and their interpolated embeddings."""

from __future__ import annotations

import math

import torch
from torch import nn

from posenc._validation import MAX_TABLE_ELEMENTS, check_d_model, check_int, check_real, check_table_size
from posenc.nn._checks import check_float_tensor, check_on_device

__all__ = ["CoPE"]


class CoPE(nn.Module):
    r"""Contextual position embeddings (Golovneva et al., 2024): one learned table, read at gated positions.

    Parameters
    ----------
    n_positions : int
        Rows of the table, positions ``0, ..., n_positions - 1``; larger positions use the last row. An int
        ``>= 1``; the authors use ``seq + 1`` by default (position 0 is possible) or a smaller maximum.
    head_dim : int
        Width of a head; a positive int.

    Attributes
    ----------
    embeddings : nn.Parameter of shape (n_positions, head_dim)
        The position embeddings :math:`e[0], \dots, e[n - 1]`, initialised to 0 as in the authors' code; one
        table for every head that calls the module, as the authors' layer holds one.

    Notes
    -----
    For query :math:`i` and key :math:`j \le i`, with gates :math:`g_{ij} = \sigma(z_{ij})` of the attention
    logits, the position is :math:`p_{ij} = \sum_{t=j}^{i} g_{it}`, clamped to ``n_positions - 1``, and
    :math:`q_i^\top e[p_{ij}]` is interpolated between the integer positions around :math:`p_{ij}` (see
    :func:`posenc.cope_positions` and :func:`posenc.cope_logits`). The interpolation weight
    :math:`p - \lfloor p \rfloor` carries the gradient to the gates; the floor and ceiling carry none.

    References
    ----------
    .. [1] O. Golovneva, T. Wang, J. Weston, S. Sukhbaatar, "Contextual Position Encoding: Learning to Count
       What's Important", arXiv:2405.18719, 2024.

    Examples
    --------
    >>> cope = CoPE(n_positions=9, head_dim=8)
    >>> q = k = torch.randn(2, 4, 8, 8)  # (batch, heads, seq, head_dim)
    >>> cope.logits(q, k).shape  # causal logits with contextual positions, for a softmax
    torch.Size([2, 4, 8, 8])
    """

    def __init__(self, n_positions: int, head_dim: int) -> None:
        super().__init__()
        self.n_positions = check_int(n_positions, "n_positions", minimum=1, maximum=MAX_TABLE_ELEMENTS)
        self.head_dim = check_d_model(head_dim, even=False, name="head_dim")
        check_table_size(self.n_positions, self.head_dim, "n_positions", "head_dim")
        self.embeddings = nn.Parameter(torch.zeros(self.n_positions, self.head_dim))

    def positions(self, gate_logits: torch.Tensor) -> torch.Tensor:
        r"""The contextual positions :math:`p_{ij}`, clamped to ``n_positions - 1``.

        Parameters
        ----------
        gate_logits : (..., q_len, k_len) tensor
            Logits whose sigmoid is the gate of each pair, floating point, no NaN (checked on the device);
            ``-inf`` for the keys a query does not see (their gate is then 0), as after a causal mask.

        Returns
        -------
        positions : (..., q_len, k_len) tensor
            :math:`\min\big(\sum_{t \ge j} \sigma(z_{it}),\ n - 1\big)`, summed from the last key back in
            float32 or wider, of ``gate_logits``' dtype or float32, whichever is wider.

        Raises
        ------
        TypeError
            If ``gate_logits`` is not a floating tensor.
        ValueError
            If it has fewer than 2 axes or holds a NaN.
        """
        tensor = check_float_tensor(gate_logits, "gate_logits", "(..., q_len, k_len)", min_ndim=2)
        check_on_device(~torch.isnan(tensor).any(), "gate_logits must hold no NaN: the tensor does")
        gates = torch.sigmoid(tensor.to(torch.promote_types(tensor.dtype, torch.float32)))
        return gates.flip(-1).cumsum(-1).flip(-1).clamp(max=self.n_positions - 1)

    def forward(self, q: torch.Tensor, gate_logits: torch.Tensor) -> torch.Tensor:
        r"""The position term :math:`q_i^\top e[p_{ij}]` of every pair, interpolated.

        Parameters
        ----------
        q : (..., q_len, head_dim) tensor
            Queries, floating point.
        gate_logits : (..., q_len, k_len) tensor
            As for :meth:`positions`, with ``q``'s leading axes.

        Returns
        -------
        position_logits : (..., q_len, k_len) tensor
            With :math:`p` from :meth:`positions`, of ``q``'s dtype:

            .. math::

                (p - \lfloor p \rfloor)\, q^\top e[\lceil p \rceil]
                + (1 - p + \lfloor p \rfloor)\, q^\top e[\lfloor p \rfloor].

            The authors add it to
            :math:`q_i^\top k_j` before the scale (:meth:`logits`).

        Raises
        ------
        TypeError
            If ``q`` or ``gate_logits`` is not a floating tensor.
        ValueError
            If their shapes do not fit (``q`` must end in ``head_dim``), or ``gate_logits`` holds a NaN.
        """
        queries = check_float_tensor(q, "q", f"(..., q_len, head_dim={self.head_dim})", min_ndim=2)
        if queries.shape[-1] != self.head_dim:
            raise ValueError(f"q must have shape (..., q_len, head_dim={self.head_dim}), got {tuple(queries.shape)}")
        gates = check_float_tensor(gate_logits, "gate_logits", "(..., q_len, k_len)", min_ndim=2)
        if gates.shape[:-1] != queries.shape[:-1]:
            raise ValueError(
                f"gate_logits must have shape (..., q_len, k_len) with q's leading axes {tuple(queries.shape[:-1])}, "
                f"got {tuple(gates.shape)}"
            )
        check_table_size(queries.numel() // self.head_dim, max(gates.shape[-1], self.n_positions), "queries", "keys")
        positions = self.positions(gates)
        floor = positions.floor()
        weight = positions - floor  # the only path of the gradient to the gates
        integer_logits = queries @ self.embeddings.to(queries.dtype).T  # q . e[n] for every n: (..., q_len, n)
        low = integer_logits.gather(-1, floor.long())
        high = integer_logits.gather(-1, positions.ceil().long())
        return (weight * high + (1.0 - weight) * low).to(queries.dtype)

    def logits(self, q: torch.Tensor, k: torch.Tensor, *, scale: float | None = None) -> torch.Tensor:
        r"""Causal attention logits with contextual positions, as the authors' ``ContextPosSelfAttn`` computes them.

        Parameters
        ----------
        q : (..., q_len, head_dim) tensor
            Queries, the last ``q_len`` tokens of the keys' sequence; floating point.
        k : (..., k_len, head_dim) tensor
            Keys, of ``q``'s dtype and leading axes; ``k_len >= q_len``.
        scale : float or None, default None
            Multiplies the logits; ``None`` means ``1 / sqrt(head_dim)``. Finite and ``> 0``.

        Returns
        -------
        logits : (..., q_len, k_len) tensor
            ``scale * (q_i . k_j + forward(q, gate_logits))`` for the keys up to the query, ``-inf`` after it,
            with ``gate_logits = scale * q_i . k_j`` (masked); :func:`posenc.cope_logits` up to float32
            rounding. Take the softmax over the last axis.

        Raises
        ------
        TypeError
            If ``q`` or ``k`` is not a floating tensor, they differ in dtype, or ``scale`` is not a real number.
        ValueError
            If the shapes do not fit, ``k_len < q_len``, or ``scale`` is not positive.
        """
        queries = check_float_tensor(q, "q", f"(..., q_len, head_dim={self.head_dim})", min_ndim=2)
        keys = check_float_tensor(k, "k", f"(..., k_len, head_dim={self.head_dim})", min_ndim=2)
        if keys.dtype != queries.dtype:
            raise TypeError(f"q and k must have one dtype, got {queries.dtype} and {keys.dtype}")
        if (
            queries.shape[-1] != self.head_dim
            or keys.shape[-1] != self.head_dim
            or keys.shape[:-2] != queries.shape[:-2]
            or keys.shape[-2] < queries.shape[-2]
        ):
            raise ValueError(
                f"q and k must have shapes (..., q_len, head_dim={self.head_dim}) and (..., k_len, head_dim) with "
                f"k_len >= q_len, got {tuple(queries.shape)} and {tuple(keys.shape)}"
            )
        factor = 1.0 / math.sqrt(self.head_dim) if scale is None else check_real(scale, "scale", above=0.0)
        q_len, k_len = queries.shape[-2], keys.shape[-2]
        check_table_size(queries.numel() // self.head_dim, max(k_len, self.n_positions), "queries", "keys")
        future = torch.arange(k_len, device=queries.device)[None, :] > (
            torch.arange(q_len, device=queries.device)[:, None] + (k_len - q_len)
        )
        scores = queries @ keys.transpose(-1, -2)
        gate_logits = (scores * factor).masked_fill(future, float("-inf"))
        position_logits: torch.Tensor = self(queries, gate_logits)
        return ((scores + position_logits) * factor).masked_fill(future, float("-inf"))

    def extra_repr(self) -> str:
        return f"n_positions={self.n_positions}, head_dim={self.head_dim}"
