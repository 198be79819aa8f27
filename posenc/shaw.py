"""The clipped relative positions of Shaw, Uszkoreit and Vaswani (2018), as indices into a learned table.

Shaw et al. give each (query, key) pair a learned vector chosen by the clipped distance ``j - i``; this
module computes which row of the table, ``2 * max_distance + 1`` rows in all, each pair uses. The attention
layer that reads the table is :class:`posenc.nn.ShawRelativeAttention`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from posenc._validation import MAX_TABLE_ELEMENTS, check_int, check_query_key_lengths

__all__ = ["shaw_relative_indices"]


def shaw_relative_indices(
    q_len: int, k_len: int | None = None, *, max_distance: int, offset: int | None = None
) -> NDArray[np.int64]:
    r"""Row of the relative-position table that each (query, key) pair reads.

    Parameters
    ----------
    q_len : int
        Number of queries; ``>= 0``.
    k_len : int or None, default None
        Number of keys; ``>= 0``. ``None`` means ``q_len``.
    max_distance : int
        The clipping distance :math:`k`: relative positions beyond :math:`\pm k` share the end rows. An int
        in ``[0, posenc.MAX_TABLE_ELEMENTS // 2]``; 0 gives every pair the same row (no position information).
    offset : int or None, default None
        Absolute position of query 0: query ``i`` sits at ``offset + i``, key ``j`` at ``j``. ``None`` means
        ``k_len - q_len`` (the queries are the last ``q_len`` positions). ``|offset| <= 2**52``.

    Returns
    -------
    indices : (q_len, k_len) ndarray of int64
        ``clip(j - (offset + i), -max_distance, max_distance) + max_distance``, in ``[0, 2 * max_distance]``.

    Raises
    ------
    TypeError
        If a length, ``max_distance`` or ``offset`` is not an int (a bool or float included).
    ValueError
        If a length or ``max_distance`` is negative or too large, or ``|offset| > 2**52``.

    Notes
    -----
    Shaw et al. (2018, §3.2) take the relative-position vectors of the pair (query :math:`i`, key
    :math:`j`) from two learned tables :math:`w^K, w^V` of :math:`2k + 1` rows each,

    .. math::

        a^K_{ij} = w^K_{\operatorname{clip}(j - i,\, k)}, \qquad a^V_{ij} = w^V_{\operatorname{clip}(j - i,\, k)},
        \qquad \operatorname{clip}(x, k) = \max(-k, \min(k, x)).

    The table rows are numbered :math:`-k, \dots, k` in the paper; this function shifts them by :math:`k`
    to index an array. The index depends on :math:`j - i` only: shifting every position by the same amount
    leaves it unchanged.

    References
    ----------
    .. [1] P. Shaw, J. Uszkoreit, A. Vaswani, "Self-Attention with Relative Position Representations",
       NAACL 2018, arXiv:1803.02155, §3.2.

    Examples
    --------
    >>> shaw_relative_indices(4, max_distance=2)
    array([[2, 3, 4, 4],
           [1, 2, 3, 4],
           [0, 1, 2, 3],
           [0, 0, 1, 2]])
    """
    max_distance = check_int(max_distance, "max_distance", minimum=0, maximum=MAX_TABLE_ELEMENTS // 2)
    q_len, k_len, offset = check_query_key_lengths(q_len, k_len, offset)
    if not (q_len and k_len):  # an empty table: allocate nothing of the other length (it may be huge)
        return np.zeros((q_len, k_len), dtype=np.int64)
    relative = np.arange(k_len, dtype=np.int64)[None, :] - (np.arange(q_len, dtype=np.int64) + offset)[:, None]
    indices: NDArray[np.int64] = np.clip(relative, -max_distance, max_distance) + max_distance
    return indices
