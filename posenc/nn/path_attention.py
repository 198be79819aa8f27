r"""PaTH attention in PyTorch: the Householder directions from the tokens, and the logits they give."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from posenc._validation import check_d_model, check_int, check_table_size
from posenc.nn._checks import check_embeddings, check_float_tensor

__all__ = ["PaTHGate", "path_logits"]


class PaTHGate(nn.Module):
    r"""The data-dependent Householder matrices of PaTH: a unit direction :math:`w_t` and :math:`\beta_t` per head.

    Parameters
    ----------
    d_model : int
        Width of the tokens; a positive int.
    n_heads : int
        Number of heads; a positive int.
    head_dim : int
        Width of a head; a positive int.

    Attributes
    ----------
    w_proj : nn.Linear(d_model, n_heads * head_dim, bias=False)
        The directions before normalisation.
    beta_proj : nn.Linear(d_model, n_heads)
        :math:`\beta_t = 2 \sigma(\cdot)` of each head.

    Notes
    -----
    :math:`H_t = I - \beta_t w_t w_t^\top` with :math:`w_t` of unit length and :math:`\beta_t \in (0, 2)`
    (Yang et al., 2025), so that :math:`H_t` can reflect (:math:`\beta = 2`) as well as shrink along
    :math:`w_t`. flash-linear-attention's ``PaTHAttention`` layer computes :math:`w_t` through a rank-32
    projection (with as many key heads as query heads) and a short causal convolution before the
    normalisation; this module uses one linear map.

    References
    ----------
    .. [1] S. Yang, Y. Shen, K. Wen, S. Tan, M. Mishra, L. Ren, R. Panda, Y. Kim, "PaTH Attention: Position
       Encoding via Accumulating Householder Transformations", NeurIPS 2025, arXiv:2505.16381.

    Examples
    --------
    >>> gate = PaTHGate(16, 2, 8)
    >>> w, beta = gate(torch.randn(3, 5, 16))  # (batch, n_heads, seq, head_dim) and (batch, n_heads, seq)
    >>> q = k = torch.randn(3, 2, 5, 8)
    >>> path_logits(q, k, w, beta).shape
    torch.Size([3, 2, 5, 5])
    """

    def __init__(self, d_model: int, n_heads: int, head_dim: int) -> None:
        super().__init__()
        self.d_model = check_d_model(d_model, even=False)
        self.n_heads = check_int(n_heads, "n_heads", minimum=1, maximum=2**16)
        self.head_dim = check_d_model(head_dim, even=False, name="head_dim")
        check_table_size(self.d_model, self.n_heads * self.head_dim, "d_model", "n_heads * head_dim")
        self.w_proj = nn.Linear(self.d_model, self.n_heads * self.head_dim, bias=False)
        self.beta_proj = nn.Linear(self.d_model, self.n_heads)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r"""The unit directions :math:`w_t` and the :math:`\beta_t` of every head and token of ``x``.

        Parameters
        ----------
        x : (batch, seq, d_model) tensor
            Floating point, of the module's dtype.

        Returns
        -------
        w : (batch, n_heads, seq, head_dim) tensor
            Unit vectors (a zero projection stays zero: :math:`H_t = I`).
        beta : (batch, n_heads, seq) tensor
            In ``(0, 2)``.

        Raises
        ------
        TypeError
            If ``x`` is not a floating tensor of the module's dtype.
        ValueError
            If ``x`` is not of shape ``(batch, seq, d_model)``.
        """
        seq = check_embeddings(x, self.d_model)
        if x.dtype != self.w_proj.weight.dtype:
            raise TypeError(f"x must have the module's dtype {self.w_proj.weight.dtype}, got {x.dtype}")
        batch = x.shape[0]
        directions = self.w_proj(x).view(batch, seq, self.n_heads, self.head_dim).transpose(1, 2)
        beta = 2.0 * torch.sigmoid(self.beta_proj(x)).transpose(1, 2)
        return F.normalize(directions, dim=-1), beta

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, head_dim={self.head_dim}"


def path_logits(q: torch.Tensor, k: torch.Tensor, w: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    r"""Causal PaTH logits :math:`q_i^\top H_i H_{i-1} \cdots H_{j+1} k_j`, with :math:`H_t = I - \beta_t w_t w_t^\top`.

    Parameters
    ----------
    q, k, w : (..., seq, head_dim) tensor
        Queries, keys and Householder directions of every token, of one shape and dtype; floating point.
    beta : (..., seq) tensor
        :math:`\beta_t` of every token, of ``q``'s dtype.

    Returns
    -------
    logits : (..., seq, seq) tensor
        Of ``q``'s dtype, ``-inf`` above the diagonal; not scaled (multiply by ``1 / sqrt(head_dim)`` for a
        softmax). :func:`posenc.path_logits` up to float32 rounding.

    Raises
    ------
    TypeError
        If an argument is not a floating tensor or they differ in dtype.
    ValueError
        If the shapes do not fit, or the logits would exceed ``posenc.MAX_TABLE_ELEMENTS`` elements.

    Notes
    -----
    The query is carried back one token at a time, :math:`\tilde q \leftarrow \tilde q - \beta_t (w_t^\top
    \tilde q)\, w_t`, for all queries at once: ``seq`` steps of :math:`O(\mathrm{seq} \cdot
    \mathrm{head\_dim})` each, a Python loop of ``seq`` iterations (unrolled when compiled). That suits the
    short sequences of small models; flash-linear-attention's kernels use a blockwise algorithm instead
    (Yang et al., 2025). See :func:`posenc.path_logits` for the formula and the order of the product.
    To add forgetting attention's decay, add :func:`posenc.nn.forgetting_bias` to these logits: fla-core
    0.6.0's PaTH (its kernel and its naive reference) adds it before the softmax scale, its forgetting
    attention after it (``tests/test_content_path.py`` checks the first).

    Examples
    --------
    >>> q = k = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    >>> w = torch.tensor([[0.0, 0.0], [1.0, 0.0]])
    >>> path_logits(q, k, w, torch.tensor([0.0, 2.0]))  # token 1 reflects the first axis
    tensor([[ 1., -inf],
            [-1.,  1.]])
    """
    accepted = "(..., seq, head_dim)"
    queries = check_float_tensor(q, "q", accepted, min_ndim=2)
    keys = check_float_tensor(k, "k", accepted, min_ndim=2)
    directions = check_float_tensor(w, "w", accepted, min_ndim=2)
    betas = check_float_tensor(beta, "beta", "(..., seq)", min_ndim=1)
    dtypes = (queries.dtype, keys.dtype, directions.dtype, betas.dtype)
    if len(set(dtypes)) != 1:
        raise TypeError(f"q, k, w and beta must have one dtype, got {dtypes}")
    if not (queries.shape == keys.shape == directions.shape) or betas.shape != queries.shape[:-1]:
        raise ValueError(
            "q, k and w must have one shape (..., seq, head_dim) and beta that shape without its last axis, got "
            f"{tuple(queries.shape)}, {tuple(keys.shape)}, {tuple(directions.shape)} and {tuple(betas.shape)}"
        )
    seq = queries.shape[-2]
    check_table_size(betas.numel(), seq, "the queries", "seq")
    if seq == 0:
        return queries.new_zeros(*queries.shape[:-1], 0)
    diagonals = []  # diagonals[s][..., i - s]: the logit of query i and key i - s
    carried = queries
    for distance in range(seq):
        diagonals.append((carried * keys[..., : seq - distance, :]).sum(-1))
        # every query from `distance + 1` on passes token i - distance next: apply its matrix
        step = carried[..., 1:, :]
        passed = directions[..., 1 : seq - distance, :]
        along = (passed * step).sum(-1, keepdim=True)
        carried = step - betas[..., 1 : seq - distance, None] * along * passed
    # logits[..., i, j] = diagonals[i - j][..., j]: pad each diagonal at the front, stack by distance, gather
    stacked = torch.stack([F.pad(diagonal, (back, 0)) for back, diagonal in enumerate(diagonals)], -1)
    rows = torch.arange(seq, device=queries.device)
    back = (rows[:, None] - rows[None, :]).clamp(min=0)  # (seq, seq): i - j, 0 above the diagonal
    logits = stacked.gather(-1, back.expand(*stacked.shape[:-2], seq, seq))
    return logits.masked_fill(rows[None, :] > rows[:, None], float("-inf"))
