r"""The position codes tried on the way to the sinusoidal encoding, each with its weakness left in.

Kernes (2021) derives the sinusoidal encoding by trying simpler codes first: the raw count of the position,
the count divided by the sequence length, the binary digits of the position, and sine "dials" whose
frequencies halve from one column to the next. They are here so that the book can compute each one and
show what goes wrong with it; none of them is meant for a model.

Every function takes ``n_positions`` and returns a float64 table of shape ``(n_positions, k)`` whose row
``i`` encodes position ``i = 0, 1, ..., n_positions - 1``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["raw_count", "normalised_count", "binary_code", "dyadic_dials"]


def raw_count(n_positions):
    r"""Encode each position by its index: the first prototype, unbounded and never centred.

    Parameters
    ----------
    n_positions : int
        Number of positions, at least 0.

    Returns
    -------
    table : (n_positions, 1) ndarray of float64
        ``table[i, 0] = i``.

    Notes
    -----
    .. math:: M_{i0} = i, \qquad i = 0, \dots, n - 1.

    The values grow without bound and their mean is :math:`(n - 1)/2`, not 0, against the advice that
    inputs to a network be centred on zero and of comparable scale (LeCun et al., 2012).

    References
    ----------
    .. [1] J. Kernes, "Master Positional Encoding: Part I", Towards Data Science, 2021.
    .. [2] Y. LeCun, L. Bottou, G. B. Orr, K.-R. Müller, "Efficient BackProp", in Neural Networks: Tricks
       of the Trade, 2nd ed., Springer, 2012.

    Examples
    --------
    >>> raw_count(4).ravel()
    array([0., 1., 2., 3.])
    """
    return np.arange(n_positions, dtype=np.float64)[:, None]


def normalised_count(n_positions):
    r"""Encode each position by its index divided by the last index, so that values lie in ``[0, 1]``.

    Parameters
    ----------
    n_positions : int
        Number of positions, at least 2 (one position has no last index to divide by).

    Returns
    -------
    table : (n_positions, 1) ndarray of float64
        ``table[i, 0] = i / (n_positions - 1)``: 0 for the first position, 1 for the last.

    Raises
    ------
    ValueError
        If ``n_positions < 2``.

    Notes
    -----
    .. math:: M_{i0} = \frac{i}{n - 1}, \qquad i = 0, \dots, n - 1.

    The value of position ``i`` depends on the length ``n`` of the sequence, and so does the step
    :math:`1/(n - 1)` between neighbours: the same offset means different changes in different sequences.

    References
    ----------
    .. [1] J. Kernes, "Master Positional Encoding: Part I", Towards Data Science, 2021.

    Examples
    --------
    >>> normalised_count(5).ravel()
    array([0.  , 0.25, 0.5 , 0.75, 1.  ])
    >>> float(normalised_count(3)[1, 0]), float(normalised_count(9)[1, 0])  # position 1 at two lengths
    (0.5, 0.125)
    """
    if n_positions < 2:
        raise ValueError(f"n_positions must be at least 2 (the last index divides), got {n_positions}")
    return (np.arange(n_positions, dtype=np.float64) / (n_positions - 1))[:, None]


def binary_code(n_positions, n_bits, *, centred=False):
    r"""Encode each position by its binary digits, least significant bit in column 0.

    Parameters
    ----------
    n_positions : int
        Number of positions, at least 0 and at most ``2 ** n_bits`` (the codes of ``0, ..., n_positions - 1``
        must fit in ``n_bits`` bits).
    n_bits : int
        Number of columns, at least 1.
    centred : bool, default False
        If true, map each bit ``b`` to ``2 * b - 1``, so that the values are -1 and 1 instead of 0 and 1.

    Returns
    -------
    table : (n_positions, n_bits) ndarray of float64
        ``table[i, j]`` is bit ``j`` of ``i`` (0 or 1), or ``2 * bit - 1`` if ``centred``.

    Raises
    ------
    ValueError
        If ``n_positions > 2 ** n_bits``; the error names ``n_bits`` and the number of bits needed.

    Notes
    -----
    .. math:: M_{ij} = \left\lfloor i / 2^j \right\rfloor \bmod 2, \qquad
              i = \sum_{j} M_{ij}\, 2^j .

    Column ``j`` flips every :math:`2^j` positions, so column 0 changes fastest. Neighbouring positions can
    differ in many bits at once (7 = 0111 and 8 = 1000 differ in four), while distant ones can differ in
    one (0 and 8): distance between codes does not follow distance between positions.

    References
    ----------
    .. [1] J. Kernes, "Master Positional Encoding: Part I", Towards Data Science, 2021.

    Examples
    --------
    >>> binary_code(4, 3)
    array([[0., 0., 0.],
           [1., 0., 0.],
           [0., 1., 0.],
           [1., 1., 0.]])
    >>> binary_code(3, 2, centred=True)
    array([[-1., -1.],
           [ 1., -1.],
           [-1.,  1.]])
    """
    needed = max(1, (int(n_positions) - 1).bit_length())
    if n_bits < needed:
        raise ValueError(
            f"n_bits must be at least {needed} to give positions 0 to {n_positions - 1} distinct codes, got {n_bits}"
        )

    table = np.zeros((n_positions, n_bits))
    used = min(n_bits, needed)  # every higher bit of every position is 0
    positions = np.arange(n_positions, dtype=np.int64)
    table[:, :used] = (positions[:, None] >> np.arange(used, dtype=np.int64)) & 1
    if centred:
        table = 2.0 * table - 1.0
    return table


def dyadic_dials(n_positions, n_columns):
    r"""The note's first sine prototype: column ``j`` is a sine "dial" of period ``2 ** j`` positions.

    Parameters
    ----------
    n_positions : int
        Number of positions, at least 0.
    n_columns : int
        Number of columns ``J``, at least 1.

    Returns
    -------
    table : (n_positions, n_columns) ndarray of float64
        ``table[i, j] = sin(2 * pi * i / 2 ** j)``.

    Notes
    -----
    Research note 001, after Kernes (2021), writes

    .. math:: M_{ij} = \sin\!\left(\frac{2\pi i}{2^j}\right) = \sin(x_i\, \omega_j), \qquad
              \omega_j = 2\pi / 2^j .

    For integer ``i`` the first two columns vanish: :math:`\sin(2\pi i) = \sin(\pi i) = 0` (in floating
    point they hold rounding noise of order :math:`i \cdot 10^{-16}`). Column :math:`j \ge 2` has period
    :math:`2^j`, so every row repeats after :math:`2^{J-1}` positions, and rows ``0`` and ``2 ** (J - 2)``
    are both zero: the code is not unique.

    References
    ----------
    .. [1] J. Kernes, "Master Positional Encoding: Part I", Towards Data Science, 2021.

    Examples
    --------
    >>> dials = dyadic_dials(6, 4)
    >>> bool(np.abs(dials[:, :2]).max() < 1e-14)  # sin(2 pi i) and sin(pi i): no information
    True
    >>> dials[:, 2:].round(3)  # periods 4 and 8
    array([[ 0.   ,  0.   ],
           [ 1.   ,  0.707],
           [ 0.   ,  1.   ],
           [-1.   ,  0.707],
           [-0.   ,  0.   ],
           [ 1.   , -0.707]])
    """
    full_turns = 2.0 * np.pi * np.arange(n_positions, dtype=np.float64)
    # ldexp divides by 2**j exactly, and underflows to 0 instead of overflowing 2**j for large j.
    return np.sin(np.ldexp(full_turns[:, None], -np.arange(n_columns)[None, :]))
