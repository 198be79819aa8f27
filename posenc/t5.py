"""T5's relative-position buckets (Raffel et al., 2020): exact for near keys, logarithmic for far ones.

T5 learns one scalar per (bucket, head) and adds it to the attention logit; this module computes only the
bucket of each relative position, bit for bit as the code T5 was trained with (Mesh TensorFlow) and as
``transformers`` computes it. The learned table is :class:`posenc.nn.T5RelativeBias`.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from posenc._validation import MAX_OFFSET, MAX_TABLE_ELEMENTS, check_flag, check_int_in

__all__ = ["t5_relative_bucket"]

_ACCEPTED_POSITIONS = "an int or an array_like of integers (key position - query position)"


def _clipped_relative_positions(relative_position, limit: int) -> np.ndarray:
    """``relative_position`` as an int64 array clipped to ``[-limit, limit]``; refuses non-integers.

    Clipping first keeps every later step free of overflow (``abs`` of the most negative int64, a Python
    int beyond int64) and does not change a bucket: every distance ``>= max_distance`` lands in the last
    bucket of its side, and ``limit`` is ``max_distance``.
    """
    if isinstance(relative_position, (bool, np.bool_)):
        raise TypeError(f"relative_position must be {_ACCEPTED_POSITIONS}, got bool {relative_position!r}")
    if isinstance(relative_position, numbers.Integral):  # Python ints of any size, NumPy integer scalars
        return np.array(max(-limit, min(limit, int(relative_position))), dtype=np.int64)
    if isinstance(relative_position, (str, bytes, numbers.Number)) or relative_position is None:
        raise TypeError(
            f"relative_position must be {_ACCEPTED_POSITIONS}, got {type(relative_position).__name__} "
            f"{relative_position!r}"
        )
    try:
        array = np.asarray(relative_position)
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
    if np.issubdtype(array.dtype, np.unsignedinteger):
        return np.minimum(array, limit).astype(np.int64)
    return np.clip(array.astype(np.int64), -limit, limit)


def t5_relative_bucket(relative_position, *, bidirectional=True, num_buckets=32, max_distance=128):
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
        Number of buckets; even and ``>= 4`` when bidirectional, ``>= 2`` otherwise, at most
        ``posenc.MAX_TABLE_ELEMENTS``.
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

    The logarithm is evaluated in float32, in the order written, as Mesh TensorFlow's
    ``_relative_position_bucket`` (the code T5 was trained with) and ``transformers``'
    ``T5Attention._relative_position_bucket`` both do. The float64 evaluation of the same formula puts a few
    distances that sit exactly on a bucket boundary one bucket lower: with 18 buckets and
    ``max_distance=128``, distance 64 gives exactly 4 for the log term, so bucket 8 (T5's code and float32
    agree), but 3.9999999999999996 in float64, bucket 7. Raffel et al. (2020, §2.1) describe the scheme in
    words.

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
    bidirectional = check_flag(bidirectional, "bidirectional")
    minimum_buckets = 4 if bidirectional else 2
    num_buckets = check_int_in(num_buckets, "num_buckets", minimum=minimum_buckets, maximum=MAX_TABLE_ELEMENTS)
    if bidirectional and num_buckets % 2:
        raise ValueError(
            f"num_buckets must be even when bidirectional=True (half for keys before the query, half for keys "
            f"after), got {num_buckets}"
        )
    side = num_buckets // 2 if bidirectional else num_buckets
    max_exact = side // 2
    if isinstance(max_distance, numbers.Integral) and not isinstance(max_distance, (bool, np.bool_)):
        if max_distance <= max_exact:
            raise ValueError(
                f"max_distance must be an int > max_exact = {max_exact} (num_buckets={num_buckets}, "
                f"bidirectional={bidirectional}) and <= {MAX_OFFSET}, got {max_distance}"
            )
    max_distance = check_int_in(max_distance, "max_distance", minimum=max_exact + 1, maximum=MAX_OFFSET)
    relative = _clipped_relative_positions(relative_position, max_distance)

    if bidirectional:
        buckets = (relative > 0).astype(np.int64) * side
        distance = np.abs(relative)
    else:
        buckets = np.zeros(relative.shape, dtype=np.int64)
        distance = -np.minimum(relative, 0)
    # float32 throughout, as T5's code: float32(n) / E, its logarithm (float64 log rounded to float32, that
    # is the correctly rounded float32 log), divided by float32(log(D / E)) and times float32(B - E).
    ratio = np.maximum(distance, max_exact).astype(np.float32) / np.float32(max_exact)
    log_ratio = np.log(ratio.astype(np.float64)).astype(np.float32)
    scaled = log_ratio / np.float32(math.log(max_distance / max_exact)) * np.float32(side - max_exact)
    large = np.minimum(max_exact + scaled.astype(np.int64), side - 1)
    return buckets + np.where(distance < max_exact, distance, large)
