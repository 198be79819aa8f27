"""What adding a position vector does inside attention, and what concatenating one would cost.

Helpers for the book's "add or concatenate?" chapter: exact parameter and FLOP counts of one
Transformer layer when position vectors are added to or concatenated with the token embeddings
(:func:`layer_cost`), the four-term expansion of the attention logits of a sum (:func:`logit_terms`),
the mean absolute cosine similarity between two sets of vectors (:func:`mean_abs_cosine`), and the
subspace that holds most of a set of vectors' energy with the share of other vectors' energy inside it
(:func:`energy_subspace`, :func:`energy_share`).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

__all__ = [
    "COMBINE_MODES",
    "LayerCost",
    "layer_cost",
    "LogitTerms",
    "logit_terms",
    "mean_abs_cosine",
    "energy_subspace",
    "energy_share",
]

COMBINE_MODES = ("add", "concat_qkv", "concat_wide")
"""How a position vector meets the token embedding: see :func:`layer_cost`."""


@dataclass(frozen=True)
class LayerCost:
    """Parameter and FLOP counts of one Transformer layer (see :func:`layer_cost`).

    Attributes
    ----------
    width : int
        Width of the residual stream, the vectors the layer reads and writes.
    attention_params, ffn_params, norm_params : int
        Weights and biases of the four attention projections, of the two feed-forward matrices, and the
        gains and biases of the two layer norms.
    attention_flops_per_token, ffn_flops_per_token : int
        FLOPs of the matrix products per token (a multiply-add counts as 2), attention scores and the
        weighted sum of values included.
    """

    width: int
    attention_params: int
    ffn_params: int
    norm_params: int
    attention_flops_per_token: int
    ffn_flops_per_token: int

    @property
    def params(self) -> int:
        """All trainable parameters of the layer."""
        return self.attention_params + self.ffn_params + self.norm_params

    @property
    def flops_per_token(self) -> int:
        """All matrix-product FLOPs of the layer, per token."""
        return self.attention_flops_per_token + self.ffn_flops_per_token


def layer_cost(d_model, *, combine="add", d_position=0, seq_len=1, ffn_multiplier=4):
    r"""Parameters and FLOPs of one pre-norm Transformer layer, with position vectors added or concatenated.

    Parameters
    ----------
    d_model : int
        Width of the token embeddings, :math:`d`; positive.
    combine : {"add", "concat_qkv", "concat_wide"}, default "add"
        ``"add"``: the position vector has :math:`d` entries and is added, so the layer has width
        :math:`d` (Vaswani et al., §3.5). ``"concat_wide"``: a :math:`p`-entry position vector is
        concatenated once at the input and the whole layer runs at width :math:`d + p` (every square
        matrix becomes :math:`(d+p) \times (d+p)`, the feed-forward width grows with it).
        ``"concat_qkv"``: the residual stream keeps width :math:`d` and the position vector is
        concatenated to the input of :math:`W_Q, W_K, W_V` only, which become :math:`(d+p) \times d`.
    d_position : int, default 0
        Length :math:`p` of a concatenated position vector: 0 for ``"add"``, at least 1 otherwise.
    seq_len : int, default 1
        Sequence length :math:`n`, which sets the cost of the attention scores; at least 1.
    ffn_multiplier : int, default 4
        Feed-forward width as a multiple of the layer width (:math:`d_{ff} = 4 d_{model}` in the paper,
        §3.3); at least 1.

    Returns
    -------
    cost : LayerCost
        ``cost.params`` and ``cost.flops_per_token`` are the totals; the fields hold the parts.

    Raises
    ------
    TypeError
        If ``d_model``, ``d_position``, ``seq_len`` or ``ffn_multiplier`` is not an int (a bool is not).
    ValueError
        If ``combine`` is unknown, ``d_position`` does not fit ``combine``, or ``d_model``, ``seq_len`` or
        ``ffn_multiplier`` is below 1.

    Notes
    -----
    With residual width :math:`w`, projection input width :math:`u` (:math:`u = w` except for
    ``"concat_qkv"``, where :math:`u = d + p`), :math:`f = m\,w` for ``ffn_multiplier`` :math:`m` and
    biases on every linear map:

    .. math::

        \text{attention} &= 3(u w + w) + (w^2 + w), \quad
        \text{ffn} = 2 w f + f + w, \quad \text{norms} = 2 \cdot 2w, \\
        \text{FLOPs/token} &= 2(3 u w + w^2) + 2 \cdot 2 n w + 2 \cdot 2 w f .

    The :math:`4 n w` term is :math:`q \cdot k` for :math:`n` keys plus the weighted sum of :math:`n`
    values (no causal mask; the number of heads does not change it). Softmax, norms, bias additions and
    the addition of the position vector itself (:math:`d` FLOPs) are not counted. For ``"add"`` and
    :math:`m = 4` the parameters are :math:`12 d^2 + 13 d`.

    References
    ----------
    .. [1] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017, arXiv:1706.03762, §3.3, §3.5.

    Examples
    --------
    >>> layer_cost(512).params  # 12 * 512**2 + 13 * 512
    3152384
    >>> layer_cost(512, combine="concat_wide", d_position=64).width
    576
    """
    if combine not in COMBINE_MODES:
        raise ValueError(f"combine must be one of {COMBINE_MODES}, got {combine!r}")
    d_model = _count(d_model, "d_model", minimum=1)
    d_position = _count(d_position, "d_position", minimum=0)
    seq_len = _count(seq_len, "seq_len", minimum=1)
    ffn_multiplier = _count(ffn_multiplier, "ffn_multiplier", minimum=1)
    if combine == "add" and d_position != 0:
        raise ValueError(
            f"d_position must be 0 for combine='add' (an added position vector has d_model entries), got {d_position}"
        )
    if combine != "add" and d_position < 1:
        raise ValueError(f"d_position must be an int >= 1 for combine={combine!r}, got {d_position}")

    width = d_model + d_position if combine == "concat_wide" else d_model
    projection_input = d_model + d_position if combine == "concat_qkv" else width
    ffn_width = ffn_multiplier * width
    return LayerCost(
        width=width,
        attention_params=3 * (projection_input * width + width) + width * width + width,
        ffn_params=2 * width * ffn_width + ffn_width + width,
        norm_params=2 * 2 * width,
        attention_flops_per_token=2 * (3 * projection_input * width + width * width) + 2 * 2 * seq_len * width,
        ffn_flops_per_token=2 * 2 * width * ffn_width,
    )


def _count(value, name: str, *, minimum: int) -> int:
    """``value`` as an int ``>= minimum``: a bool, a float or anything else that is not an integer is refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int >= {minimum}, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value}")
    return int(value)


class LogitTerms(NamedTuple):
    """The four parts of the attention logits of token-plus-position inputs (see :func:`logit_terms`).

    Each field is an ``(n, n)`` ndarray; their sum is the full logit matrix.
    """

    token_token: np.ndarray
    token_position: np.ndarray
    position_token: np.ndarray
    position_position: np.ndarray


def _matrix(value, name: str, shape_text: str) -> np.ndarray:
    """``value`` as a float64 array, refused unless it is 2-D, real (not complex) and finite."""
    array = np.asarray(value)
    if array.dtype.kind == "c":
        raise TypeError(f"{name} must be real, got an array of dtype {array.dtype}")
    array = array.astype(np.float64)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array {shape_text}, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite: found NaN or infinity")
    return array


def _scaled_rows(rows: np.ndarray, name: str, what: str) -> np.ndarray:
    """Each row scaled by the power of 2 that brings its largest entry into [0.5, 1): its norm cannot overflow or
    underflow, and the scaling is exact.

    Cosines and energy shares do not change when a row is scaled; ``what`` says, for the message, what a zero row
    would leave undefined.
    """
    largest = np.abs(rows).max(axis=1, keepdims=True) if rows.shape[1] else np.zeros((rows.shape[0], 1))
    if np.any(largest == 0):
        raise ValueError(f"{name} must have no zero row: {what}")
    return np.ldexp(rows, -np.frexp(largest)[1])  # by a power of 2: exact, largest entry in [0.5, 1)


def logit_terms(tokens, positions, w_query, w_key):
    r"""Split the attention logits of ``tokens + positions`` into token and position parts.

    Parameters
    ----------
    tokens : (n, d_model) array_like
        Token embeddings :math:`X`, one row per position.
    positions : (n, d_model) array_like
        Position vectors :math:`P`, the same shape as ``tokens``.
    w_query, w_key : (d_model, d_k) array_like
        Query and key projections :math:`W_Q, W_K`.

    Returns
    -------
    terms : LogitTerms
        Four ``(n, n)`` float64 arrays, ``token_token`` :math:`= X W_Q (X W_K)^\top`, ``token_position``
        :math:`= X W_Q (P W_K)^\top`, ``position_token`` :math:`= P W_Q (X W_K)^\top` and
        ``position_position`` :math:`= P W_Q (P W_K)^\top`.

    Raises
    ------
    ValueError
        If an argument is not 2-D or not finite, or the shapes do not fit together.
    TypeError
        If an argument is complex.

    Notes
    -----
    With row vectors, the logits (before the :math:`1/\sqrt{d_k}` scale) expand by bilinearity:

    .. math::

        (X + P) W_Q \big((X + P) W_K\big)^\top = X W_Q W_K^\top X^\top + X W_Q W_K^\top P^\top
        + P W_Q W_K^\top X^\top + P W_Q W_K^\top P^\top .

    The same projections serve all four terms: adding does not give position its own weights.

    References
    ----------
    .. [1] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017, arXiv:1706.03762, §3.2.1, §3.5.

    Examples
    --------
    >>> eye = np.eye(2)
    >>> terms = logit_terms(eye, np.zeros((2, 2)), eye, eye)
    >>> terms.token_token
    array([[1., 0.],
           [0., 1.]])
    >>> float(np.abs(terms.position_position).max())
    0.0
    """
    tokens = _matrix(tokens, "tokens", "(n, d_model)")
    positions = _matrix(positions, "positions", "(n, d_model)")
    w_query = _matrix(w_query, "w_query", "(d_model, d_k)")
    w_key = _matrix(w_key, "w_key", "(d_model, d_k)")
    if positions.shape != tokens.shape:
        raise ValueError(f"positions must have the shape of tokens {tokens.shape}, got {positions.shape}")
    d_model = tokens.shape[1]
    if w_query.shape[0] != d_model or w_key.shape != w_query.shape:
        raise ValueError(
            f"w_query and w_key must both have shape (d_model={d_model}, d_k), got {w_query.shape} and {w_key.shape}"
        )

    token_queries, token_keys = tokens @ w_query, tokens @ w_key
    position_queries, position_keys = positions @ w_query, positions @ w_key
    return LogitTerms(
        token_token=token_queries @ token_keys.T,
        token_position=token_queries @ position_keys.T,
        position_token=position_queries @ token_keys.T,
        position_position=position_queries @ position_keys.T,
    )


def mean_abs_cosine(rows_a, rows_b):
    r"""Mean absolute cosine similarity between every row of one array and every row of another.

    Parameters
    ----------
    rows_a : (n_a, d) array_like
        First set of vectors; no zero row.
    rows_b : (n_b, d) array_like
        Second set of vectors, of the same width; no zero row.

    Returns
    -------
    value : float
        :math:`\frac{1}{n_a n_b} \sum_{i, j} |\cos(a_i, b_j)|`, in :math:`[0, 1]`: 0 when every pair is
        orthogonal, 1 when every pair is parallel or antiparallel.

    Raises
    ------
    ValueError
        If an argument is not 2-D, not finite or holds a zero row, or the widths differ.
    TypeError
        If an argument is complex.

    Notes
    -----
    :math:`\cos(a, b) = a \cdot b / (\|a\|\,\|b\|)`. For two independent vectors with i.i.d. Gaussian
    entries in :math:`\mathbb{R}^d`, :math:`E|\cos| = \Gamma(d/2) / (\sqrt{\pi}\,\Gamma((d+1)/2))`,
    about :math:`\sqrt{2 / (\pi d)}` for large :math:`d`.

    Examples
    --------
    >>> mean_abs_cosine([[1.0, 0.0]], [[0.0, 2.0], [-3.0, 0.0]])
    0.5
    """
    rows_a = _matrix(rows_a, "rows_a", "(n_a, d)")
    rows_b = _matrix(rows_b, "rows_b", "(n_b, d)")
    if rows_a.shape[1] != rows_b.shape[1]:
        raise ValueError(f"rows_a and rows_b must have the same width, got {rows_a.shape[1]} and {rows_b.shape[1]}")
    undefined = "the cosine of a zero vector is undefined"
    scaled_a, scaled_b = _scaled_rows(rows_a, "rows_a", undefined), _scaled_rows(rows_b, "rows_b", undefined)
    unit_a = scaled_a / np.linalg.norm(scaled_a, axis=1, keepdims=True)
    unit_b = scaled_b / np.linalg.norm(scaled_b, axis=1, keepdims=True)
    return float(np.abs(unit_a @ unit_b.T).mean())


def energy_subspace(rows, energy=0.99):
    r"""The smallest subspace that holds a given share of the energy of a set of row vectors.

    Parameters
    ----------
    rows : (n, d) array_like
        The vectors, one per row (for instance a table of position vectors); not all zero.
    energy : float, default 0.99
        The share of :math:`\sum_j \|r_j\|^2` the subspace must hold, in :math:`(0, 1)`.

    Returns
    -------
    basis : (d, k) ndarray
        Orthonormal columns spanning the subspace: the first :math:`k` right singular vectors of ``rows``,
        :math:`k` the smallest with :math:`\sum_{i \le k} \sigma_i^2 \ge` ``energy`` :math:`\sum_i \sigma_i^2`.

    Raises
    ------
    ValueError
        If ``rows`` is not 2-D, not finite or all zero, or ``energy`` is not in :math:`(0, 1)`.
    TypeError
        If ``rows`` is complex.

    Notes
    -----
    The energy of the rows inside a subspace with orthonormal basis :math:`B` is
    :math:`\|R B\|_F^2`; among subspaces of dimension :math:`k` the span of the first :math:`k` right
    singular vectors holds the most, :math:`\sum_{i \le k} \sigma_i^2` (Eckart–Young), so no subspace of
    fewer dimensions holds ``energy`` of it.

    Examples
    --------
    >>> basis = energy_subspace([[3.0, 0.0, 0.0], [0.0, 1.0, 0.0]], energy=0.9)
    >>> basis.shape, float(abs(basis[0, 0]))
    ((3, 1), 1.0)
    """
    rows = _matrix(rows, "rows", "(n, d)")
    if not 0.0 < energy < 1.0:
        raise ValueError(f"energy must be a share in (0, 1), got {energy!r}")
    largest = float(np.abs(rows).max()) if rows.size else 0.0
    if largest == 0.0:
        raise ValueError("rows must not be all zero: they have no energy to hold")
    # the shares do not change with the scale of the table: scaled exactly by a power of 2, its squared singular
    # values cannot overflow or underflow
    _, singular, right = np.linalg.svd(np.ldexp(rows, -math.frexp(largest)[1]), full_matrices=False)
    total = float(np.sum(singular**2))
    cumulative = np.cumsum(singular**2) / total
    k = int(np.searchsorted(cumulative, energy)) + 1
    return right[:k].T


def energy_share(vectors, basis):
    r"""The share of each vector's squared norm that lies inside a subspace.

    Parameters
    ----------
    vectors : (n, d) array_like
        The vectors, one per row; no zero row.
    basis : (d, k) array_like
        Orthonormal columns spanning the subspace, as :func:`energy_subspace` returns them.

    Returns
    -------
    share : (n,) ndarray
        :math:`\|v B\|^2 / \|v\|^2` for each row :math:`v`, in :math:`[0, 1]`: 1 for a vector inside the
        subspace, 0 for one orthogonal to it.

    Raises
    ------
    ValueError
        If an argument is not 2-D or not finite, ``vectors`` holds a zero row, the widths differ, or the
        columns of ``basis`` are not orthonormal (to 1e-8).
    TypeError
        If an argument is complex.

    Notes
    -----
    A vector with independent Gaussian entries points in a uniformly random direction, so its expected
    share inside any :math:`k`-dimensional subspace of :math:`\mathbb{R}^d` is exactly :math:`k / d`.

    Examples
    --------
    >>> energy_share([[1.0, 1.0], [0.0, 2.0]], [[1.0], [0.0]])
    array([0.5, 0. ])
    """
    vectors = _matrix(vectors, "vectors", "(n, d)")
    basis = _matrix(basis, "basis", "(d, k)")
    if basis.shape[0] != vectors.shape[1]:
        raise ValueError(f"basis must have d = {vectors.shape[1]} rows, the width of vectors, got {basis.shape[0]}")
    if not np.allclose(basis.T @ basis, np.eye(basis.shape[1]), rtol=0, atol=1e-8):
        raise ValueError("basis must have orthonormal columns (basis.T @ basis = I)")
    scaled = _scaled_rows(vectors, "vectors", "the share of a zero vector is undefined")
    return np.sum((scaled @ basis) ** 2, axis=1) / np.sum(scaled**2, axis=1)
