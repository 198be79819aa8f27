"""T5's relative-position buckets (Raffel et al., 2020): exact for near keys, logarithmic for far ones.

T5 learns one scalar per (bucket, head) and adds it to the attention logit; this module computes only the
bucket of each relative position. It returns the mathematically exact bucket of T5's formula, the same on
every machine: the boundaries between the logarithmic buckets are integers found once per configuration by
exact arithmetic, and a distance is placed by comparing it with them, with no logarithm at run time. T5's
own code (Mesh TensorFlow, and ``transformers``) evaluates the formula in float32 and agrees with it except
at the few distances where the exact value of the log term is an integer or within float32 rounding of
one; there its answer depends on the last bit of the processor's float32 logarithm. The learned table is
:class:`posenc.nn.T5RelativeBias`.
"""

from __future__ import annotations

import functools
import math
import numbers
from decimal import Decimal, localcontext
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc._validation import check_t5_buckets, is_int

__all__ = ["t5_relative_bucket"]

_ACCEPTED_POSITIONS = "an int or an array_like of integers (key position - query position)"

# A float64 estimate of a bucket boundary E * (D / E) ** (k / m) is within a relative 5e-14 of the real
# number, for any libm whose log and exp err by less than 8 units in the last place; the search below
# treats every integer within a relative 1e-10 of the estimate as undecided and settles it exactly.
_ESTIMATE_MARGIN = 1e-10


def _log_term_reaches(distance: int, k: int, max_exact: int, max_distance: int, n_log: int) -> bool:
    r"""Whether ``n_log * ln(distance / max_exact) / ln(max_distance / max_exact) >= k``, decided exactly.

    The inequality is :math:`(n/E)^m \ge (D/E)^k`; after dividing both exponents by :math:`g = \gcd(m, k)`
    it is :math:`n^a E^b \ge D^b E^a`, compared in integers when :math:`a \le 64`. For larger :math:`a` the
    two sides cannot be equal (equality with :math:`\gcd(a, b) = 1` makes the numerator of :math:`D/E` in
    lowest terms a perfect :math:`a`-th power, at least :math:`2^a > 2^{52} \ge D`), so the sign of
    :math:`a \ln(n/E) - b \ln(D/E)` decides, and it is computed with correctly rounded decimal logarithms at
    a precision doubled until the result is larger than its error bound.
    """
    g = math.gcd(n_log, k)
    a, b = n_log // g, k // g
    if a <= 64:
        return bool(distance**a * max_exact**b >= max_distance**b * max_exact**a)
    digits = 40
    while True:
        with localcontext() as context:
            context.prec = digits
            log_exact = Decimal(max_exact).ln()
            difference = a * (Decimal(distance).ln() - log_exact) - b * (Decimal(max_distance).ln() - log_exact)
            # Each logarithm is below 37 (ln 2**52 = 36.04) and within one unit in its last digit; the few
            # roundings that follow, times a + b, stay far below this bound.
            error_bound = (a + b) * Decimal(10) ** (5 - digits)
        if abs(difference) > error_bound:
            return difference > 0
        digits *= 2


@functools.lru_cache(maxsize=64)
def _bucket_boundaries(n_log: int, max_exact: int, max_distance: int) -> NDArray[np.int64]:
    """The distances where the logarithmic buckets begin: entry ``k - 1`` is the smallest ``n`` whose log term
    reaches ``k``, for ``k = 1 .. n_log - 1`` (int64, non-decreasing; read-only, as it is cached)."""
    log_ratio = math.log(max_distance / max_exact)
    boundaries = np.empty(max(n_log - 1, 0), dtype=np.int64)
    for k in range(1, n_log):
        estimate = max_exact * math.exp(k / n_log * log_ratio)
        low = math.ceil(estimate * (1 - _ESTIMATE_MARGIN))
        high = math.ceil(estimate * (1 + _ESTIMATE_MARGIN))
        # The real boundary lies in [estimate (1 - margin), estimate (1 + margin)]; the answer is its ceiling,
        # so `high` reaches k. Find the smallest distance in [low, high] that does (usually low == high).
        while low < high:
            middle = (low + high) // 2
            if _log_term_reaches(middle, k, max_exact, max_distance, n_log):
                high = middle
            else:
                low = middle + 1
        boundaries[k - 1] = high
    boundaries.setflags(write=False)
    return boundaries


def _clipped_relative_positions(relative_position: object, limit: int) -> NDArray[np.int64]:
    """``relative_position`` as an int64 array clipped to ``[-limit, limit]``; refuses non-integers.

    Clipping first keeps every later step free of overflow (``abs`` of the most negative int64, a Python
    int beyond int64) and does not change a bucket: every distance ``>= max_distance`` lands in the last
    bucket of its side, and ``limit`` is ``max_distance``.
    """
    if is_int(relative_position):  # Python ints of any size, NumPy integer scalars
        return np.array(max(-limit, min(limit, int(relative_position))), dtype=np.int64)
    if isinstance(relative_position, (str, bytes, numbers.Number, np.bool_)) or relative_position is None:
        raise TypeError(
            f"relative_position must be {_ACCEPTED_POSITIONS}, got {type(relative_position).__name__} "
            f"{relative_position!r}"
        )
    try:
        array: NDArray[Any] = np.asarray(relative_position)
    except (TypeError, ValueError, RuntimeError, OverflowError) as error:
        raise TypeError(
            f"relative_position must be {_ACCEPTED_POSITIONS}, got {type(relative_position).__name__}"
        ) from error
    if array.size == 0 and (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        return np.zeros(array.shape, dtype=np.int64)  # [] arrives as float64: nothing to refuse
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(
            f"relative_position must be {_ACCEPTED_POSITIONS}, got an array of dtype {array.dtype}: "
            "round or cast integer-valued floats yourself"
        )
    clipped: NDArray[np.int64]
    if np.issubdtype(array.dtype, np.unsignedinteger):
        clipped = np.minimum(array, limit).astype(np.int64)
    else:
        clipped = np.clip(array.astype(np.int64), -limit, limit)
    return clipped


def t5_relative_bucket(
    relative_position: ArrayLike, *, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
) -> NDArray[np.int64]:
    r"""The T5 bucket of each relative position (key position minus query position).

    Parameters
    ----------
    relative_position : int or array_like of int
        ``j - i`` for a key at position ``j`` and a query at ``i``, any shape; integers only (a float
        array, even integer-valued, is refused). Any size of integer is accepted.
    bidirectional : bool, default True
        ``True`` (T5's encoder): keys after the query get their own half of the buckets.
        ``False`` (T5's decoder): every key after the query shares bucket 0 with the query itself.
    num_buckets : int, default 32
        Number of buckets; even and ``>= 4`` when bidirectional, ``>= 2`` otherwise, at most ``2**16``.
    max_distance : int, default 128
        Distances of ``max_distance`` and more all land in the last bucket of their side. Greater than
        ``max_exact`` (below) and at most ``2**52``.

    Returns
    -------
    bucket : ndarray of int64, the shape of ``relative_position``
        In ``[0, num_buckets)``; a 0-d array for a scalar input.

    Raises
    ------
    TypeError
        If ``relative_position`` is not made of integers (floats, bools, strings, None), a size is not an
        int, or ``bidirectional`` is not a bool.
    ValueError
        If ``num_buckets`` is odd with ``bidirectional=True``, too small or too large, or ``max_distance``
        is not greater than ``max_exact`` or is above ``2**52``.

    Notes
    -----
    Let :math:`B` be the buckets of one side: ``num_buckets // 2`` when bidirectional, ``num_buckets``
    otherwise, and :math:`E = \lfloor B/2 \rfloor` (``max_exact``). The distance is :math:`n = |j - i|`
    when bidirectional (keys after the query, :math:`j > i`, add :math:`B` to the bucket), and
    :math:`n = \max(i - j, 0)` otherwise. Then

    .. math::

        \text{bucket}(n) = \begin{cases}
            n & n < E, \\
            \min\!\Big(B - 1,\; E + \Big\lfloor \dfrac{\ln(n / E)}{\ln(D / E)}\,(B - E) \Big\rfloor\Big)
              & n \ge E,
        \end{cases}

    with :math:`D` = ``max_distance``: half of a side's buckets count single positions, the other half
    cover :math:`[E, D)` in logarithmically growing ranges, and the clamp to :math:`B - 1` collects every
    distance from :math:`D` on. The clamp acts before :math:`D`: the last bucket starts where the log term
    reaches :math:`B - E - 1`, at :math:`D\,(E/D)^{1/(B-E)}`. With the defaults (32 buckets, 128) a
    bidirectional side holds 16 buckets, 8 of them exact, and its last bucket starts at distance 91.

    The result is the exact value of this formula, the same on every machine. Each boundary, the smallest
    :math:`n` whose log term reaches :math:`k` (:math:`k = 1, \dots, B - E - 1`), is the integer
    :math:`\lceil E\,(D/E)^{k/(B-E)} \rceil`, found once per configuration from a float64 estimate and
    settled by exact comparisons of :math:`(n/E)^{B-E}` with :math:`(D/E)^k`; a distance is then placed by
    counting the boundaries at or below it. No logarithm is evaluated at call time.

    T5's own code (Mesh TensorFlow's ``_relative_position_bucket``, which T5 was trained with, and
    ``transformers``' ``T5Attention._relative_position_bucket``) evaluates the formula in float32. It gives
    the same buckets except at distances where the exact log term is an integer or lies within float32
    rounding of one, and there its answer depends on the last bit of the float32 logarithm of the machine it
    runs on. With 34 buckets and ``max_distance=27``, distance 12 has log term
    :math:`9 \ln(3/2) / \ln(27/8) = 3` exactly, so bucket :math:`8 + 3 = 11`; a correctly rounded float32
    logarithm gives 2.9999998 there (bucket 10), while a vectorised float32 logarithm one unit in the last
    place higher gives 11. With the defaults, distances 16, 32 and 64 of a bidirectional side sit on such
    boundaries (log terms exactly 2, 4 and 6). :func:`posenc.testing.t5_float32_boundaries` finds these
    distances for any configuration. Raffel et al. (2020, §2.1) describe the scheme in words.

    References
    ----------
    .. [1] C. Raffel et al., "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
       Transformer", JMLR 21(140), 2020, arXiv:1910.10683, §2.1.

    Examples
    --------
    >>> t5_relative_bucket([-3, -1, 0, 1, 3, 200])
    array([ 3,  1,  0, 17, 19, 31])
    >>> t5_relative_bucket([-200, -20, -3, 0, 5], bidirectional=False)
    array([31, 17,  3,  0,  0])
    """
    bidirectional, num_buckets, max_distance = check_t5_buckets(bidirectional, num_buckets, max_distance)
    side = num_buckets // 2 if bidirectional else num_buckets
    max_exact = side // 2
    relative = _clipped_relative_positions(relative_position, max_distance)

    if bidirectional:
        buckets = (relative > 0).astype(np.int64) * side
        distance = np.abs(relative)
    else:
        buckets = np.zeros(relative.shape, dtype=np.int64)
        distance = -np.minimum(relative, 0)
    # Distances are clipped to max_distance, whose log term is side - max_exact: it lands in bucket side - 1
    # after all side - max_exact - 1 boundaries, which is T5's clamp.
    boundaries = _bucket_boundaries(side - max_exact, max_exact, max_distance)
    large = max_exact + np.searchsorted(boundaries, distance, side="right")
    result: NDArray[np.int64] = buckets + np.where(distance < max_exact, distance, large)
    return result
