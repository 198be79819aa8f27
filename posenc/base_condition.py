r"""Xu et al.'s condition on a rotary head's frequencies for a context length: the cosine sum and its sign.

Xu et al. (2024) ask that a query attend more to a key similar to it than to a random key, at every distance
within the context. Under their assumptions the gap between the two expected scores at distance :math:`m` is
proportional to

.. math:: B_{m,\theta} = \sum_{i=0}^{d/2-1} \cos(m\theta_i),

the sum over the head's :math:`d/2` pairs of features, and the condition is :math:`B_{m,\theta} \ge 0` at
every :math:`m < L`. With RoFormer's frequencies :math:`\theta_i = \text{base}^{-2i/d}` it bounds the base
from below. Here the condition takes the frequencies themselves, so a scaled head (YaRN, llama3, linear), a
partially rotated one and p-RoPE can be asked the same question: a pair that is not rotated has frequency 0
and adds :math:`\cos 0 = 1` at every distance (the ``head_dim`` argument adds such pairs).

- :func:`base_condition_sum`, :math:`B_{m,\theta}` at every distance below a length;
- :func:`base_condition_error`, a bound on that sum's error;
- :func:`base_condition_holds`, whether :math:`B_{m,\theta} \ge 0` at all of them.

The condition is not monotone in the base: the bases that satisfy it do not form an interval, so there is no
"smallest base" to compute, only the answer at each base asked.

How the sum is computed, and how accurate it is. The identity

.. math::

    \cos((a + k)\theta) = \cos(a\theta)\cos(k\theta) - \sin(a\theta)\sin(k\theta)

cuts the distances into blocks of about :math:`\sqrt{L}` starting at :math:`a`: every block's sums are one
matrix product of the
:math:`(\text{blocks}, 2n)` table of :math:`[\cos a\theta_i, \sin a\theta_i]` with the :math:`(2n, \text{block})`
table of :math:`[\cos k\theta_i; -\sin k\theta_i]`, for :math:`n` pairs. That costs :math:`2\sqrt{L} \cdot 2n`
sines and cosines and one matrix product instead of :math:`L n` cosines: at :math:`L = 2^{20}` a few hundredths
of a second instead of more than a second. Compared with the sum of the cosines of the float64 angles
:math:`\mathrm{fl}(m\theta_i)`, each term differs by the roundings of three angles (:math:`a\theta_i`,
:math:`k\theta_i` and :math:`m\theta_i`, each at most :math:`2^{-53} L \max|\theta|`), the four sines and
cosines and two products (a unit roundoff :math:`u = 2^{-53}` each), and the sum of :math:`2n` products
adds at most :math:`2n\,u` times the sum of their sizes, itself at most :math:`n` (each pair's
:math:`|\cos a\cos k| + |\sin a\sin k| \le 1`, by Cauchy-Schwarz). :func:`base_condition_error` doubles the
total,

.. math::

    2n\,(2^{-51} L \max|\theta| + 2^{-50} + n\,2^{-52}),

about :math:`6 \cdot 10^{-8}` at :math:`L = 2^{20}` and :math:`n = 64`. These bounds hold in any order of
summation, fused multiply-adds included, so on every processor.

:func:`base_condition_holds` first takes the products in float32: its inputs carry one more rounding of
:math:`2^{-24}` each, and the same argument bounds its error by :math:`(2n + 6)\,n\,2^{-24}`. A block whose
float32 sums all reach twice that is positive; the others are summed again in float64. A float64 sum within
:func:`base_condition_error` of zero cannot be given a sign, and the function raises rather than guess.

References
----------
Xu, Men et al., "Base of RoPE Bounds Context Length", NeurIPS 2024, arXiv:2405.14591 (the preprint lists Men first).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc._validation import MAX_TABLE_ELEMENTS, check_int, is_int

__all__ = ["base_condition_sum", "base_condition_error", "base_condition_holds"]

_ACCEPTED = "a 1-D (n_pairs,) array of finite real frequencies, n_pairs >= 1"


def _check(frequencies: object, length: object, head_dim: object) -> tuple[NDArray[np.float64], int]:
    """The frequencies as float64 ``(pairs,)`` (zeros appended up to ``head_dim // 2``) and the length."""
    if isinstance(frequencies, (str, bytes)) or not (
        hasattr(frequencies, "__len__") or hasattr(frequencies, "__array__")
    ):
        raise TypeError(f"frequencies must be {_ACCEPTED}, got {type(frequencies).__name__} {frequencies!r}")
    try:
        array = np.asarray(frequencies)
    except ValueError as error:  # ragged nested lists
        raise TypeError(f"frequencies must be {_ACCEPTED}: {error}") from error
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise TypeError(f"frequencies must be {_ACCEPTED}, got an array of dtype {array.dtype}")
    if array.ndim != 1 or array.size == 0 or array.size > MAX_TABLE_ELEMENTS:
        raise ValueError(f"frequencies must be {_ACCEPTED}, got shape {array.shape}")
    theta = array.astype(np.float64)
    if not np.all(np.isfinite(theta)):
        raise ValueError(f"frequencies must be {_ACCEPTED}: found NaN or infinity")
    if head_dim is not None:
        if not is_int(head_dim):
            raise TypeError(f"head_dim must be an even int or None, got {type(head_dim).__name__} {head_dim!r}")
        pairs = check_int(head_dim, "head_dim", minimum=2 * theta.size, maximum=2 * MAX_TABLE_ELEMENTS, even=True)
        theta = np.concatenate([theta, np.zeros(pairs // 2 - theta.size)])
    n = check_int(length, "length", minimum=1, maximum=MAX_TABLE_ELEMENTS)
    if n * theta.size > MAX_TABLE_ELEMENTS:
        raise ValueError(
            f"length * n_pairs must be at most {MAX_TABLE_ELEMENTS} (the number of cosines the sum stands for), "
            f"got length {n} with {theta.size} pairs (frequencies, head_dim)"
        )
    return theta, n


def _block(length: int) -> int:
    """Distances per block: the power of two nearest the square root of ``length``, so both tables are small."""
    return int(2 ** round(math.log2(length) / 2))


def _steps(theta: NDArray[np.float64], block: int) -> NDArray[np.float64]:
    """``(2n, block)``: :math:`[\\cos k\\theta_i; -\\sin k\\theta_i]` for ``k < block``."""
    k = theta[:, None] * np.arange(block)
    return np.concatenate([np.cos(k), -np.sin(k)])


def _origins(theta: NDArray[np.float64], starts: NDArray[np.int64]) -> NDArray[np.float64]:
    """``(starts.size, 2n)``: :math:`[\\cos a\\theta_i, \\sin a\\theta_i]` for each block start ``a``."""
    a = starts[:, None] * theta
    return np.concatenate([np.cos(a), np.sin(a)], axis=1)


def _error(theta: NDArray[np.float64], length: int) -> float:
    n = theta.size
    return 2.0 * n * (2.0**-51 * length * float(np.abs(theta).max()) + 2.0**-50 + n * 2.0**-52)


def base_condition_sum(frequencies: ArrayLike, length: int, *, head_dim: int | None = None) -> NDArray[np.float64]:
    r"""Xu et al.'s sum :math:`B_{m,\theta} = \sum_i \cos(m\theta_i)` at every distance ``m < length``.

    Parameters
    ----------
    frequencies : (n_pairs,) array_like of float
        :math:`\theta_i`, one per pair of features, finite (a pair that is not rotated has frequency 0):
        ``posenc.rotary_frequencies(head_dim, base=base, scaling=scaling)`` for a rotary head.
    length : int
        The context length :math:`L`; positive, with ``length * n_pairs`` at most
        :data:`~posenc.MAX_TABLE_ELEMENTS`.
    head_dim : int or None, default None
        Features per head, even and at least ``2 * n_pairs``: the pairs beyond ``n_pairs`` are not rotated
        (frequency 0, each adding 1 to the sum), as in a partially rotated head. ``None``: the frequencies
        are all the pairs.

    Returns
    -------
    (length,) ndarray of float64
        :math:`B_{m,\theta}` for :math:`m = 0, \dots, L - 1`; :math:`B_{0,\theta}` is the number of pairs.
        Each value is within :func:`base_condition_error` of the exact sum of the cosines of the float64
        angles :math:`\mathrm{fl}(m\theta_i)`.

    Raises
    ------
    TypeError
        If ``frequencies`` is not an array of real numbers, or ``length`` or ``head_dim`` not an int.
    ValueError
        If ``frequencies`` is not 1-D and non-empty or holds NaN or infinity, ``length < 1``, ``head_dim``
        is odd or below ``2 * n_pairs``, or the sum stands for more than ``MAX_TABLE_ELEMENTS`` cosines.

    Notes
    -----
    Computed blockwise as one matrix product (see the module's notes), not as :math:`L \cdot n` cosines.

    References
    ----------
    Xu, Men et al., "Base of RoPE Bounds Context Length", NeurIPS 2024, arXiv:2405.14591.

    Examples
    --------
    >>> import posenc
    >>> s = posenc.base_condition_sum(posenc.rotary_frequencies(128, base=10_000.0), 4096)
    >>> s.shape, float(s[0]), bool(s.min() < 0)
    ((4096,), 64.0, True)
    """
    theta, length = _check(frequencies, length, head_dim)
    block = _block(length)
    sums = _origins(theta, np.arange(0, length, block)) @ _steps(theta, block)
    return np.ascontiguousarray(sums.reshape(-1)[:length])


def base_condition_error(frequencies: ArrayLike, length: int, *, head_dim: int | None = None) -> float:
    r"""A bound on the error of :func:`base_condition_sum` at every distance below ``length``.

    Parameters
    ----------
    frequencies : (n_pairs,) array_like of float
        As for :func:`base_condition_sum`.
    length : int
        The context length; positive.
    head_dim : int or None, default None
        As for :func:`base_condition_sum` (the unrotated pairs add to the count :math:`n`).

    Returns
    -------
    float
        For :math:`n` pairs (the module's notes derive it),

        .. math::

            2n\,(2^{-51} L \max_i|\theta_i| + 2^{-50} + n\,2^{-52}),

        about :math:`6 \cdot 10^{-8}` at :math:`L = 2^{20}`, :math:`n = 64`,
        :math:`\theta_0 = 1`.

    Raises
    ------
    TypeError, ValueError
        As :func:`base_condition_sum`.

    Examples
    --------
    >>> import posenc
    >>> f"{posenc.base_condition_error(posenc.rotary_frequencies(128), 2**20):.1e}"
    '6.0e-08'
    """
    theta, length = _check(frequencies, length, head_dim)
    return _error(theta, length)


def base_condition_holds(frequencies: ArrayLike, length: int, *, head_dim: int | None = None) -> bool:
    r"""Whether :math:`B_{m,\theta} = \sum_i \cos(m\theta_i) \ge 0` at every distance ``m < length``.

    This is the condition of Xu et al. (2024) on a rotary head: does this head, with these frequencies,
    satisfy it over ``length`` positions? For a head of ``d`` features with base ``b``, pass
    ``posenc.rotary_frequencies(d, base=b)``; with a scaling, ``posenc.rotary_frequencies(d, base=b,
    scaling=...)``; for a partially rotated head, its rotated frequencies and ``head_dim=d``.

    Parameters
    ----------
    frequencies : (n_pairs,) array_like of float
        :math:`\theta_i`, one per pair of features, finite; 0 for a pair that is not rotated.
    length : int
        The context length :math:`L`; positive, with ``length * n_pairs`` at most
        :data:`~posenc.MAX_TABLE_ELEMENTS`.
    head_dim : int or None, default None
        Features per head, even and at least ``2 * n_pairs``: the pairs beyond ``n_pairs`` are not rotated
        (frequency 0). ``None``: the frequencies are all the pairs.

    Returns
    -------
    bool

    Raises
    ------
    TypeError, ValueError
        As :func:`base_condition_sum`.
    ArithmeticError
        If a sum lies within :func:`base_condition_error` of zero, where its sign cannot be told.

    Notes
    -----
    The last eighth of the distances is checked first, and the check stops there if a sum is negative: a
    head that fails usually fails near the end of the context. The products are taken in float32 first, and
    again in float64 for every block of distances whose float32 sums do not all clear twice the float32
    error bound (the module's notes).

    The condition is not monotone in the base: at 131,072 positions a head of 128 satisfies it at base
    4.87 million and fails it at 4.86 and 4.88 million. A base that holds says nothing about its neighbours.

    References
    ----------
    Xu, Men et al., "Base of RoPE Bounds Context Length", NeurIPS 2024, arXiv:2405.14591.

    Examples
    --------
    >>> import posenc
    >>> [posenc.base_condition_holds(posenc.rotary_frequencies(128, base=b), 4096) for b in (1e4, 1e5)]
    [False, True]

    A partially rotated head of 128 features that rotates 64 of them, with the same base: its 32 unrotated
    pairs add 32 at every distance.

    >>> posenc.base_condition_holds(posenc.rotary_frequencies(64, base=1e4), 4096, head_dim=128)
    True
    """
    theta, length = _check(frequencies, length, head_dim)
    tolerance = _error(theta, length)
    rough_error = (2 * theta.size + 6) * theta.size * 2.0**-24
    block = _block(length)
    steps = _steps(theta, block)
    steps32 = steps.astype(np.float32)
    starts = np.arange(0, length, block)[::-1]  # the longest distances first
    split = max(1, starts.size // 8)
    for chunk in (starts[:split], starts[split:]):
        if chunk.size == 0:
            continue
        origins = _origins(theta, chunk)
        rough = origins.astype(np.float32) @ steps32
        past = length - int(chunk[0])  # distances of the first (longest) block beyond the context
        if past < block:
            rough[0, past:] = np.inf
        doubt = rough.min(axis=1) < 2 * rough_error
        if not doubt.any():
            continue
        sums = origins[doubt] @ steps
        if past < block and doubt[0]:
            sums[0, past:] = np.inf
        low = float(sums.min())
        if abs(low) <= tolerance:
            raise ArithmeticError(f"B comes within {tolerance:.1e} of zero below length {length}: sign unknown")
        if low < 0:
            return False
    return True
