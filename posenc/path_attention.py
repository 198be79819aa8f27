"""PaTH attention (Yang et al., 2025): a product of data-dependent Householder matrices between key and query.

RoPE turns the key by a fixed rotation for every token between it and the query. PaTH applies instead one
matrix per token, :math:`H_t = I - \\beta_t w_t w_t^\\top`, with :math:`w_t` and :math:`\\beta_t` computed
from the token: what passes between key and query is what the tokens in between are. With every
:math:`\\beta_t = 0` each matrix is the identity and the logits are NoPE's. The PyTorch side is
:func:`posenc.nn.path_logits` and :class:`posenc.nn.PaTHGate`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc._validation import check_real_array, check_table_size

__all__ = ["path_logits"]


def path_logits(q: ArrayLike, k: ArrayLike, w: ArrayLike, beta: ArrayLike) -> NDArray[np.float64]:
    r"""Causal PaTH attention logits: query and key with the Householder matrices of the tokens between them.

    Parameters
    ----------
    q, k, w : (..., seq, head_dim) array_like of float
        Queries, keys and the Householder directions :math:`w_t` of every token, of one shape; finite.
        PaTH normalises :math:`w_t` to unit length (:class:`posenc.nn.PaTHGate` does); any vector is accepted.
    beta : (..., seq) array_like of float
        :math:`\beta_t` of every token, finite; PaTH keeps it in ``(0, 2)``, where :math:`H_t` with a
        unit :math:`w_t` is invertible.

    Returns
    -------
    logits : (..., seq, seq) ndarray of float64
        :math:`q_i^\top H_i H_{i-1} \cdots H_{j+1}\, k_j` for ``j <= i`` (no matrix on the diagonal),
        ``-inf`` for ``j > i``; not scaled.

    Raises
    ------
    TypeError
        If an argument is not an array of real numbers.
    ValueError
        If ``q``, ``k`` and ``w`` differ in shape or have fewer than 2 axes, ``beta`` is not their shape
        without the last axis, an entry is not finite, or the logits would exceed
        ``posenc.MAX_TABLE_ELEMENTS`` elements.

    Notes
    -----
    Yang et al. (2025) replace RoPE's rotation :math:`R^{i-j}` between key :math:`j` and query :math:`i` by
    the cumulative product of the matrices of the tokens after the key,

    .. math::

        z_{ij} = q_i^\top \Big(\prod_{t = j + 1}^{i} H_t\Big) k_j, \qquad H_t = I - \beta_t w_t w_t^\top,

    the product ordered with :math:`H_i` leftmost: flash-linear-attention's PaTH layer applies
    :math:`H_t` to every cached key when token :math:`t` arrives (``rank_one_update`` in
    ``fla/layers/path_attn.py``), so key :math:`j` meets :math:`H_{j+1}` first. Since each :math:`H_t` is
    symmetric, this reference carries the query back instead, :math:`\tilde q \leftarrow H_t \tilde q`, one
    rank-one update per step, in float64: :math:`O(\mathrm{seq}^2\, \mathrm{head\_dim})` operations.
    :math:`\beta_t = 0` gives :math:`z_{ij} = q_i^\top k_j` (NoPE).

    References
    ----------
    .. [1] S. Yang, Y. Shen, K. Wen, S. Tan, M. Mishra, L. Ren, R. Panda, Y. Kim, "PaTH Attention: Position
       Encoding via Accumulating Householder Transformations", NeurIPS 2025, arXiv:2505.16381.

    Examples
    --------
    >>> q = k = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    >>> w = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 0.0]])  # tokens 1 and 2 reflect the first axis
    >>> path_logits(q, k, w, np.array([0.0, 2.0, 2.0]))  # each reflection flips the sign
    array([[  1., -inf, -inf],
           [ -1.,   1., -inf],
           [  1.,  -1.,   1.]])
    >>> path_logits(q, k, w, np.zeros(3))  # beta = 0: NoPE
    array([[  1., -inf, -inf],
           [  1.,   1., -inf],
           [  1.,   1.,   1.]])
    """
    accepted = "a finite real array of shape (..., seq, head_dim)"
    queries = check_real_array(q, "q", accepted, min_ndim=2)
    keys = check_real_array(k, "k", accepted, min_ndim=2)
    directions = check_real_array(w, "w", accepted, min_ndim=2)
    if not (queries.shape == keys.shape == directions.shape):
        raise ValueError(
            f"q, k and w must have one shape (..., seq, head_dim), got {queries.shape}, {keys.shape} and "
            f"{directions.shape}"
        )
    accepted_beta = f"a finite real array of shape (..., seq) = {queries.shape[:-1]}"
    betas = check_real_array(beta, "beta", accepted_beta)
    if betas.shape != queries.shape[:-1]:
        raise ValueError(f"beta must be {accepted_beta}, got shape {betas.shape}")
    seq = queries.shape[-2]
    check_table_size(queries.size // max(queries.shape[-1], 1) * seq, 1, "the logits' size", "1")
    logits = np.full((*queries.shape[:-1], seq), -np.inf)
    carried = queries.copy()  # carried[..., i, :] = H_{j+1} ... H_i q_i after the step for key j
    for distance in range(seq):
        # the keys `distance` tokens before their query: pairs (i, i - distance) for i >= distance
        rows = np.arange(distance, seq)
        logits[..., rows, rows - distance] = np.sum(carried[..., distance:, :] * keys[..., : seq - distance, :], -1)
        # the next key back is one token further; first apply H of the token just passed, i - distance
        passed = slice(distance + 1, seq) if distance + 1 < seq else slice(0, 0)
        tokens = slice(1, seq - distance)
        step = carried[..., passed, :]
        along = np.sum(directions[..., tokens, :] * step, axis=-1, keepdims=True)
        carried[..., passed, :] = step - betas[..., tokens, None] * along * directions[..., tokens, :]
    return logits
