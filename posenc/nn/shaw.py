"""Multi-head self-attention with the relative position representations of Shaw et al. (2018)."""

from __future__ import annotations

import math

import torch
from torch import nn

from posenc._validation import MAX_TABLE_ELEMENTS, check_d_model, check_flag, check_int, check_table_size
from posenc.nn._checks import check_embeddings

__all__ = ["ShawRelativeAttention"]


class ShawRelativeAttention(nn.Module):
    r"""Self-attention whose keys (and values) get a learned vector per clipped relative position.

    Parameters
    ----------
    d_model : int
        Width of the input and output; a positive int divisible by ``n_heads``.
    n_heads : int
        Number of heads; each has ``head_dim = d_model // n_heads`` channels.
    max_distance : int
        The clipping distance :math:`k`; the tables have :math:`2k + 1` rows. An int ``>= 0`` (0: one row,
        no position information).
    values : bool, default True
        Also add the value vectors :math:`a^V_{ij}` (Shaw et al., eq. 3). ``False`` keeps the key term only
        (eq. 4); Shaw et al. ablate the two terms separately.
    causal : bool, default False
        Mask the keys after each query (a decoder).

    Attributes
    ----------
    q_proj, k_proj, v_proj, out_proj : nn.Linear(d_model, d_model)
        The projections :math:`W^Q, W^K, W^V, W^O` (with biases, as ``nn.MultiheadAttention``).
    relative_keys : nn.Embedding(2 * max_distance + 1, head_dim)
        :math:`w^K_{-k}, \dots, w^K_{k}` in rows ``0 ... 2k``; shared by all heads, as in
        tensor2tensor's ``dot_product_attention_relative`` (one table of width ``head_dim`` for every head).
        Initialised from N(0, 1 / head_dim).
    relative_values : nn.Embedding(2 * max_distance + 1, head_dim) or None
        :math:`w^V`, likewise; ``None`` when ``values=False``.

    Notes
    -----
    With :math:`a^K_{ij} = w^K_{\operatorname{clip}(j - i, k)}` and :math:`a^V_{ij}` likewise
    (:func:`posenc.shaw_relative_indices`), each head computes (Shaw et al., 2018, §3.1, eqs. 3 and 4)

    .. math::

        e_{ij} = \frac{x_i W^Q \,(x_j W^K + a^K_{ij})^\top}{\sqrt{d_z}}, \qquad
        \alpha_{ij} = \operatorname{softmax}_j(e_{ij}), \qquad
        z_i = \sum_j \alpha_{ij}\,(x_j W^V + a^V_{ij}).

    The relative terms are computed without any ``(seq, seq, head_dim)`` tensor: :math:`x_i W^Q\, {w^K}^\top`
    has :math:`2k + 1` columns per query and is then gathered, and the weights :math:`\alpha_{ij}` are
    summed per relative index before they multiply :math:`w^V`.

    References
    ----------
    .. [1] P. Shaw, J. Uszkoreit, A. Vaswani, "Self-Attention with Relative Position Representations",
       NAACL 2018, arXiv:1803.02155, §3.

    Examples
    --------
    >>> layer = ShawRelativeAttention(16, 4, max_distance=2)
    >>> layer(torch.zeros(2, 5, 16)).shape
    torch.Size([2, 5, 16])
    """

    relative_values: nn.Embedding | None

    def __init__(
        self, d_model: int, n_heads: int, *, max_distance: int, values: bool = True, causal: bool = False
    ) -> None:
        super().__init__()
        self.d_model = check_d_model(d_model, even=False)
        self.n_heads = check_int(n_heads, "n_heads", minimum=1, maximum=self.d_model)
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads must divide d_model={self.d_model}, got n_heads={self.n_heads}")
        self.max_distance = check_int(max_distance, "max_distance", minimum=0, maximum=MAX_TABLE_ELEMENTS // 2)
        self.values = check_flag(values, "values")
        self.causal = check_flag(causal, "causal")
        self.head_dim = self.d_model // self.n_heads
        check_table_size(self.d_model, self.d_model, "d_model")
        check_table_size(2 * self.max_distance + 1, self.head_dim, "2 * max_distance + 1", "head_dim")
        self.q_proj = nn.Linear(self.d_model, self.d_model)
        self.k_proj = nn.Linear(self.d_model, self.d_model)
        self.v_proj = nn.Linear(self.d_model, self.d_model)
        self.out_proj = nn.Linear(self.d_model, self.d_model)
        n_labels = 2 * self.max_distance + 1
        self.relative_keys = nn.Embedding(n_labels, self.head_dim)
        nn.init.normal_(self.relative_keys.weight, std=self.head_dim**-0.5)
        if self.values:
            self.relative_values = nn.Embedding(n_labels, self.head_dim)
            nn.init.normal_(self.relative_values.weight, std=self.head_dim**-0.5)
        else:
            self.relative_values = None

    def _check_input(self, x: torch.Tensor) -> int:
        """Check ``x`` and return ``seq``, refusing a ``(seq, seq)`` index table over the size limit."""
        seq = check_embeddings(x, self.d_model)
        dtype = self.q_proj.weight.dtype
        if x.dtype != dtype:
            raise TypeError(f"x must have the module's dtype {dtype}, got {x.dtype}: convert x or the module")
        check_table_size(seq, seq, "seq (x.shape[1])")
        return seq

    def relative_indices(self, seq: int, device: torch.device | str | None = None) -> torch.Tensor:
        """``clip(j - i, -k, k) + k`` as a ``(seq, seq)`` int64 tensor (:func:`posenc.shaw_relative_indices`).

        Parameters
        ----------
        seq : int
            Sequence length; ``>= 0``, with ``seq * seq`` at most ``posenc.MAX_TABLE_ELEMENTS``.
        device : torch.device, str or None, default None
            Where to build the tensor (``None``: the default device).

        Returns
        -------
        indices : (seq, seq) int64 tensor
            Row ``clip(j - i, -max_distance, max_distance) + max_distance`` of the tables, at ``[i, j]``.

        Raises
        ------
        TypeError, ValueError
            If ``seq`` is not an int ``>= 0`` or ``seq * seq`` is too large.
        """
        seq = check_int(seq, "seq")
        check_table_size(seq, seq, "seq")
        return self._relative_indices(seq, device)

    def _relative_indices(self, seq: int, device: torch.device | str | None) -> torch.Tensor:
        """:meth:`relative_indices` for a checked ``seq``."""
        positions = torch.arange(seq, device=device)
        relative = positions[None, :] - positions[:, None]
        return relative.clamp(-self.max_distance, self.max_distance) + self.max_distance

    def _heads(self, projected: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = projected.shape
        return projected.view(batch, seq, self.n_heads, self.head_dim).transpose(1, 2)

    def _logits(self, x: torch.Tensor, queries: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        keys = self._heads(self.k_proj(x))
        logits = queries @ keys.transpose(-1, -2)  # x_i W^Q (x_j W^K)^T
        relative = queries @ self.relative_keys.weight.T  # x_i W^Q (w^K_r)^T for every r: (..., seq, 2k + 1)
        logits = logits + relative.gather(-1, index.expand(*relative.shape[:-1], index.shape[-1]))
        logits = logits / math.sqrt(self.head_dim)
        if self.causal:
            seq = x.shape[1]
            future = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(1)
            logits = logits.masked_fill(future, float("-inf"))
        return logits

    def attention_logits(self, x: torch.Tensor) -> torch.Tensor:
        """The logits :math:`e_{ij}` of every head, before the softmax.

        Parameters
        ----------
        x : (batch, seq, d_model) tensor
            Floating point, of the module's dtype.

        Returns
        -------
        logits : (batch, n_heads, seq, seq) tensor
            ``logits[b, h, i, j]`` is :math:`e_{ij}` of head ``h``; ``-inf`` for ``j > i`` when ``causal``.

        Raises
        ------
        TypeError
            If ``x`` is not a floating tensor of the module's dtype.
        ValueError
            If ``x`` is not of shape ``(batch, seq, d_model)``.
        """
        seq = self._check_input(x)
        queries = self._heads(self.q_proj(x))
        return self._logits(x, queries, self._relative_indices(seq, x.device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attend over ``x`` with relative positions.

        Parameters
        ----------
        x : (batch, seq, d_model) tensor
            Floating point, of the module's dtype.

        Returns
        -------
        out : (batch, seq, d_model) tensor
            ``out_proj`` of the concatenated heads :math:`z_i`.

        Raises
        ------
        TypeError
            If ``x`` is not a floating tensor of the module's dtype.
        ValueError
            If ``x`` is not of shape ``(batch, seq, d_model)``.
        """
        seq = self._check_input(x)
        batch = x.shape[0]
        index = self._relative_indices(seq, x.device)
        queries = self._heads(self.q_proj(x))
        weights = torch.softmax(self._logits(x, queries, index), dim=-1)
        heads = weights @ self._heads(self.v_proj(x))
        if self.relative_values is not None:
            # sum_j alpha_ij w^V_{index(i, j)} = sum_r (sum of alpha_ij over the j with index r) w^V_r
            per_label = weights.new_zeros(*weights.shape[:-1], 2 * self.max_distance + 1)
            per_label.scatter_add_(-1, index.expand_as(weights), weights)
            heads = heads + per_label @ self.relative_values.weight
        out: torch.Tensor = self.out_proj(heads.transpose(1, 2).reshape(batch, seq, self.d_model))
        return out

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, max_distance={self.max_distance}, "
            f"values={self.values}, causal={self.causal}"
        )
