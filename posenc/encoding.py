"""The sinusoidal positional encoding of Vaswani et al. (2017), its layouts and its translation matrix.

Every formula of the book lives here once: the frequencies, the table, where each sine and cosine sits in
a row (the *layout*), and the block-diagonal matrix that shifts a row by a fixed offset.
"""

from __future__ import annotations

import numpy as np

from posenc._validation import (
    LAYOUTS,
    check_base,
    check_d_model,
    check_float_dtype,
    check_layout,
    check_positions,
    check_real,
    check_table_size,
)

__all__ = ["frequencies", "sinusoidal", "translation_matrix", "layout_permutation"]

# Rows are computed in blocks of at most this many angles, so the float64 temporaries stay small
# (16 MiB) whatever the size of the table.
_ANGLES_PER_BLOCK = 2**21


def frequencies(d_model, *, base=10000.0):
    r"""Angular frequencies of the sinusoidal encoding, one per (sine, cosine) pair.

    Parameters
    ----------
    d_model : int
        Width of the encoding; positive and even.
    base : float, default 10000.0
        The constant of the geometric progression; finite and greater than 1.

    Returns
    -------
    omega : (d_model // 2,) ndarray of float64
        ``omega[i] = base ** (-2 * i / d_model)`` for ``i = 0, ..., d_model // 2 - 1``: from 1 down to
        ``base ** (-(d_model - 2) / d_model)``, never reaching ``1 / base``.

    Notes
    -----
    Vaswani et al. (2017, §3.5) write the pair ``i`` of the encoding as

    .. math::

        PE_{(pos, 2i)} = \sin(pos \cdot \omega_i), \quad PE_{(pos, 2i+1)} = \cos(pos \cdot \omega_i),
        \quad \omega_i = 10000^{-2i / d_{model}}.

    Both members of a pair share the exponent ``2i / d_model``: ``i`` counts pairs, not columns. The
    wavelength of pair ``i`` is ``2 * pi / omega[i]``.

    References
    ----------
    .. [1] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017, arXiv:1706.03762, §3.5.

    Examples
    --------
    >>> frequencies(8)
    array([1.   , 0.1  , 0.01 , 0.001])
    """
    d_model = check_d_model(d_model)
    base = check_base(base)
    return base ** (-np.arange(0, d_model, 2, dtype=np.float64) / d_model)


def _pair_columns(layout: str, d_model: int) -> tuple[np.ndarray, np.ndarray]:
    """Column of the sine and of the cosine of each pair ``i`` in a table of the given layout."""
    pairs = np.arange(d_model // 2)
    if layout == "interleaved":
        return 2 * pairs, 2 * pairs + 1
    if layout == "cos_first":
        return 2 * pairs + 1, 2 * pairs
    return pairs, d_model // 2 + pairs  # "halves": [sin | cos]


def sinusoidal(positions, d_model, *, base=10000.0, layout="interleaved", dtype=np.float32):
    r"""The sinusoidal positional-encoding table.

    Parameters
    ----------
    positions : int or (n_positions,) array_like of real
        An int ``n >= 0`` for the positions ``0, 1, ..., n - 1``, or the positions themselves: any finite
        real numbers, negative and fractional included.
    d_model : int
        Width of the encoding; positive and even.
    base : float, default 10000.0
        The constant of the geometric progression of frequencies (see :func:`frequencies`).
    layout : {"interleaved", "cos_first", "halves"}, default "interleaved"
        Where the sine and cosine of pair ``i`` go. ``"interleaved"`` is the paper's: sine in column
        ``2i``, cosine in ``2i + 1``. ``"cos_first"`` swaps each pair (cosine in ``2i``), as Kernes' code
        does. ``"halves"`` puts all sines first and all cosines after, ``[sin | cos]``, as tensor2tensor,
        fairseq and the TensorFlow tutorial do (with the paper's frequencies here; see Notes).
    dtype : floating dtype, default np.float32
        Dtype of the returned table.

    Returns
    -------
    table : (n_positions, d_model) ndarray of ``dtype``
        Row ``r`` encodes ``positions[r]``.

    Raises
    ------
    TypeError
        If an argument has the wrong type: a bool or str size, a non-real position array, a non-float dtype.
    ValueError
        If ``d_model`` is odd or not positive, a position or ``base`` is not finite, ``base <= 1``,
        ``positions`` is negative or not 1-D, ``layout`` is unknown, or the table would have more than
        ``posenc.MAX_TABLE_ELEMENTS`` elements.

    Notes
    -----
    With :math:`\omega_i = \text{base}^{-2i/d_{model}}` (:func:`frequencies`), the interleaved table is

    .. math::

        PE_{(pos, 2i)} = \sin(pos\,\omega_i), \qquad PE_{(pos, 2i+1)} = \cos(pos\,\omega_i).

    The other layouts hold the same numbers in other columns (:func:`layout_permutation`). The angles
    ``pos * omega`` are formed and reduced in float64 and only the sines and cosines are rounded to
    ``dtype``, so a float32 table is accurate to float32 rounding at any position; forming the angles in
    float32, as many implementations do, loses about ``pos * 2**-24`` radians.

    tensor2tensor's ``get_timing_signal_1d`` uses the ``"halves"`` layout but spaces its frequencies so
    that the last is exactly ``1 / base``; this function keeps the paper's frequencies in every layout.

    References
    ----------
    .. [1] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017, arXiv:1706.03762, §3.5.

    Examples
    --------
    >>> table = sinusoidal(3, 4)
    >>> table.shape, table.dtype
    ((3, 4), dtype('float32'))
    >>> table[1].round(4)  # [sin(1), cos(1), sin(0.01), cos(0.01)]
    array([0.8415, 0.5403, 0.01  , 1.    ], dtype=float32)
    """
    d_model = check_d_model(d_model)
    base = check_base(base)
    layout = check_layout(layout)
    dtype = check_float_dtype(dtype)
    positions = check_positions(positions, d_model)

    omega = frequencies(d_model, base=base)
    sine_columns, cosine_columns = _pair_columns(layout, d_model)
    table = np.empty((len(positions), d_model), dtype=dtype)
    rows_per_block = max(1, _ANGLES_PER_BLOCK // len(omega))
    for start in range(0, len(positions), rows_per_block):
        rows = slice(start, start + rows_per_block)
        angles = np.multiply.outer(positions[rows], omega)
        table[rows, sine_columns] = np.sin(angles)
        table[rows, cosine_columns] = np.cos(angles)
    return table


def translation_matrix(offset, d_model, *, base=10000.0, layout="interleaved"):
    r"""The matrix that shifts every row of a sinusoidal table by ``offset`` positions.

    Parameters
    ----------
    offset : float
        The shift :math:`\Delta`; any finite real number.
    d_model : int
        Width of the encoding; positive and even.
    base : float, default 10000.0
        As in :func:`sinusoidal`.
    layout : {"interleaved", "cos_first", "halves"}, default "interleaved"
        The layout of the rows the matrix acts on. A matrix built for one layout is wrong, by O(1), for
        another.

    Returns
    -------
    T : (d_model, d_model) ndarray of float64
        Orthogonal, with ``sinusoidal(x + offset) == sinusoidal(x) @ T`` up to rounding, for every ``x``
        (rows are row vectors).

    Notes
    -----
    Write :math:`c_i = \cos(\omega_i \Delta)` and :math:`s_i = \sin(\omega_i \Delta)`. By the angle-addition
    formulas, the interleaved pair :math:`[\sin \omega_i x, \cos \omega_i x]` times the block

    .. math::

        B_i = \begin{pmatrix} c_i & -s_i \\ s_i & c_i \end{pmatrix}

    is :math:`[\sin \omega_i (x + \Delta), \cos \omega_i (x + \Delta)]`. ``T`` carries :math:`B_i` on the
    rows and columns of pair ``i``: block diagonal for ``"interleaved"`` (and for ``"cos_first"``, where
    each block is transposed), a permuted block diagonal for ``"halves"``. ``T`` does not depend on ``x``,
    and :math:`T(a)\,T(b) = T(a + b)`, :math:`T(-a) = T(a)^\top`.

    References
    ----------
    .. [1] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017, arXiv:1706.03762, §3.5.
    .. [2] T. Denk, "Linear Relationships in the Transformer's Positional Encoding", 2019.

    Examples
    --------
    >>> T = translation_matrix(3, 8)
    >>> bool(np.allclose(sinusoidal([2.0], 8, dtype=np.float64) @ T, sinusoidal([5.0], 8, dtype=np.float64)))
    True
    """
    offset = check_real(offset, "offset")
    d_model = check_d_model(d_model)
    base = check_base(base)
    layout = check_layout(layout)
    check_table_size(d_model, d_model, "d_model")

    angles = frequencies(d_model, base=base) * offset
    cosines, sines = np.cos(angles), np.sin(angles)
    sine_columns, cosine_columns = _pair_columns(layout, d_model)
    matrix = np.zeros((d_model, d_model))
    matrix[sine_columns, sine_columns] = cosines
    matrix[cosine_columns, cosine_columns] = cosines
    matrix[sine_columns, cosine_columns] = -sines
    matrix[cosine_columns, sine_columns] = sines
    return matrix


def layout_permutation(source, target, d_model):
    """Column permutation that turns a table of one layout into the same table in another.

    Parameters
    ----------
    source, target : {"interleaved", "cos_first", "halves"}
        The layouts to convert from and to.
    d_model : int
        Width of the encoding; positive and even.

    Returns
    -------
    permutation : (d_model,) ndarray of int
        ``sinusoidal(p, d_model, layout=target) == sinusoidal(p, d_model, layout=source)[:, permutation]``
        exactly, for any positions ``p``. Applying it to a weight matrix's input rows (``W[permutation]``)
        moves a model trained on one layout to the other.

    Examples
    --------
    >>> layout_permutation("interleaved", "halves", 6)
    array([0, 2, 4, 1, 3, 5])
    """
    source = check_layout(source, "source")
    target = check_layout(target, "target")
    d_model = check_d_model(d_model)

    source_sines, source_cosines = _pair_columns(source, d_model)
    target_sines, target_cosines = _pair_columns(target, d_model)
    permutation = np.empty(d_model, dtype=np.intp)
    permutation[target_sines] = source_sines
    permutation[target_cosines] = source_cosines
    return permutation
