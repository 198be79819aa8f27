"""T5's relative attention bias as a PyTorch module: one learned scalar per (bucket, head)."""

from __future__ import annotations

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from posenc._validation import (
    MAX_OFFSET,
    MAX_TABLE_ELEMENTS,
    check_int,
    check_query_key_lengths,
    check_t5_buckets,
    check_table_size,
)
from posenc.nn._checks import LONG_CONTEXT_HINT, check_offset, offset_tensor
from posenc.nn.flex import ScoreMod
from posenc.t5 import t5_relative_bucket

__all__ = ["T5RelativeBias"]


class T5RelativeBias(nn.Module):
    r"""The relative attention bias of T5 (Raffel et al., 2020): a learned scalar per bucket and head.

    Parameters
    ----------
    n_heads : int
        Number of attention heads; ``>= 1``.
    bidirectional : bool, default True
        ``True`` for T5's encoder (keys after the query have their own buckets), ``False`` for its decoder.
    num_buckets : int, default 32
        As in :func:`posenc.t5_relative_bucket`.
    max_distance : int, default 128
        As in :func:`posenc.t5_relative_bucket`.

    Attributes
    ----------
    relative_attention_bias : nn.Embedding(num_buckets, n_heads)
        The learned scalars, row ``b`` for bucket ``b``; named as in ``transformers``' ``T5Attention``, so
        a T5 checkpoint's table loads as it is. Initialised by ``nn.Embedding``'s default, N(0, 1).
    bucket_starts : (n_side - 1,) int64 tensor
        The smallest distance of bucket ``1, 2, ..., n_side - 1`` of a side (``n_side``: ``num_buckets // 2``
        when bidirectional, else ``num_buckets``), found once from :func:`posenc.t5_relative_bucket`; the
        buckets of any distances are then a sorted search on the device (``torch.bucketize``), without a
        logarithm or a copy to the host. A non-persistent buffer: it moves with ``.to()``, and the
        ``state_dict`` (a T5 checkpoint's) does not hold it.

    Notes
    -----
    The logit of query position :math:`i` and key position :math:`j` in head :math:`h` gets
    :math:`b_{h}(\text{bucket}(j - i))` added. T5 computes this bias once, in the first layer of each
    stack, and every later layer of that stack reuses it (Raffel et al., 2020, §2.1: the position
    parameters are shared across layers); to do the same, build one module and add its output in every layer.

    References
    ----------
    .. [1] C. Raffel et al., "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
       Transformer", JMLR 21(140), 2020, arXiv:1910.10683, §2.1.

    Examples
    --------
    >>> bias = T5RelativeBias(4)
    >>> bias(5).shape
    torch.Size([4, 5, 5])
    >>> bool((bias(3, 7) == bias(7)[:, -3:]).all())  # 3 queries after 4 cached keys
    True
    >>> bool((bias(1, 7, offset=torch.tensor(2)) == bias(7)[:, 2:3]).all())  # a static cache of 7 slots
    True

    For long contexts, :meth:`score_mod` gives the same bias to FlexAttention without the tensor
    (see :mod:`posenc.nn.flex`).
    """

    bucket_starts: torch.Tensor

    def __init__(
        self, n_heads: int, *, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
    ) -> None:
        super().__init__()
        self.n_heads = check_int(n_heads, "n_heads", minimum=1, maximum=MAX_TABLE_ELEMENTS)
        self.bidirectional, self.num_buckets, self.max_distance = check_t5_buckets(
            bidirectional, num_buckets, max_distance
        )
        check_table_size(self.num_buckets, self.n_heads, "num_buckets", "n_heads")
        self.relative_attention_bias = nn.Embedding(self.num_buckets, self.n_heads)
        starts = _bucket_starts(self.bidirectional, self.num_buckets, self.max_distance)
        self.register_buffer("bucket_starts", torch.from_numpy(starts), persistent=False)

    def buckets(
        self, q_len: int, k_len: int | None = None, *, offset: int | torch.Tensor | None = None
    ) -> torch.Tensor:
        """The ``(q_len, k_len)`` int64 tensor of buckets, query ``i`` at ``offset + i`` (default: the last keys).

        Parameters
        ----------
        q_len : int
            Number of queries; ``>= 0``.
        k_len : int or None, default None
            Number of keys; ``>= 0``. ``None`` means ``q_len``.
        offset : int, 0-d integer tensor or None, default None
            Position of query 0, as in :meth:`forward`; ``None`` means ``k_len - q_len``.

        Returns
        -------
        buckets : (q_len, k_len) int64 tensor
            ``posenc.t5_relative_bucket(j - (offset + i))`` at ``[i, j]``, on the device of the weight.

        Raises
        ------
        TypeError, ValueError
            If a length is not an int ``>= 0``, the result would exceed ``posenc.MAX_TABLE_ELEMENTS``, or
            ``offset`` is not an int or 0-d integer tensor with ``|offset| <= 2**52``.
        """
        q_len, k_len, offset = self._lengths(q_len, k_len, offset)
        return self._buckets(q_len, k_len, offset)

    def _lengths(
        self, q_len: object, k_len: object, offset: object, *, dense: bool = False
    ) -> tuple[int, int, int | torch.Tensor]:
        """Checked lengths and offset (an int, or a 0-d tensor on the weight's device, its value checked there).

        ``dense``: the lengths of :meth:`forward`'s bias, ``n_heads`` values per pair (its size message hints at
        :meth:`score_mod`); else of :meth:`buckets`' table.
        """
        sizes = (self.n_heads, "n_heads") if dense else (1, "")
        hint = LONG_CONTEXT_HINT if dense else ""
        given = 0 if isinstance(offset, torch.Tensor) else offset
        queries, keys, checked = check_query_key_lengths(q_len, k_len, given, *sizes, hint=hint)
        if not isinstance(offset, torch.Tensor):
            return queries, keys, checked
        device = self.relative_attention_bias.weight.device
        return queries, keys, check_offset(offset, minimum=-MAX_OFFSET, maximum=MAX_OFFSET, device=device)

    def _buckets(self, q_len: int, k_len: int, offset: int | torch.Tensor) -> torch.Tensor:
        """:meth:`buckets` for checked lengths and offset."""
        device = self.relative_attention_bias.weight.device
        if not (q_len and k_len):  # an empty table: allocate nothing of the other length (it may be huge)
            return torch.zeros(q_len, k_len, dtype=torch.int64, device=device)
        queries = torch.arange(q_len, device=device) + offset
        return self._relative_buckets(torch.arange(k_len, device=device)[None, :] - queries[:, None])

    def _relative_buckets(self, relative: torch.Tensor) -> torch.Tensor:
        """The bucket of each relative position (int64, key minus query): ``bucket_starts`` searched on the device."""
        side = self.num_buckets // 2 if self.bidirectional else self.num_buckets
        # The distance of a side: |j - i| when bidirectional, else how far the key lies before the query.
        distance = relative.abs() if self.bidirectional else (-relative).clamp(min=0)
        bucket = torch.bucketize(distance, self.bucket_starts, right=True)  # the starts at or below the distance
        return bucket + side * (relative > 0) if self.bidirectional else bucket

    def forward(
        self, q_len: int, k_len: int | None = None, *, offset: int | torch.Tensor | None = None
    ) -> torch.Tensor:
        """The bias for ``q_len`` queries at positions ``offset ...`` (default: the last ``q_len`` of ``k_len``).

        Parameters
        ----------
        q_len : int
            Number of queries; ``>= 0``.
        k_len : int or None, default None
            Number of keys; ``>= 0``. ``None`` means ``q_len``. Query ``i`` sits at position
            ``k_len - q_len + i`` unless ``offset`` is given, key ``j`` at ``j`` (as ``transformers``'
            ``compute_bias`` with a cache).
        offset : int, 0-d integer tensor or None, default None
            Position of query 0: query ``i`` sits at ``offset + i``. ``None`` means ``k_len - q_len``. Give it
            for a static cache, whose ``k_len`` is the cache's size and not the number of tokens seen
            (``cache_position[0]``, as transformers' ``compute_bias(..., cache_position=)``). ``|offset| <= 2**52``.
            A tensor's value stays on its device: it is checked there (on an accelerator by a device
            assertion, reported at the next synchronisation), never read on the host.

        Returns
        -------
        bias : (n_heads, q_len, k_len) tensor
            ``bias[h, i, j] = relative_attention_bias.weight[bucket(j - (offset + i)), h]``, with the
            weight's dtype and device.

        Raises
        ------
        TypeError
            If a length is not an int, or ``offset`` not an int or 0-d integer tensor.
        ValueError
            If a length is negative, the bias would exceed ``posenc.MAX_TABLE_ELEMENTS`` elements (the message
            then points to :meth:`score_mod`), or ``|offset| > 2**52``.
        """
        q_len, k_len, offset = self._lengths(q_len, k_len, offset, dense=True)
        bias: torch.Tensor = self.relative_attention_bias(self._buckets(q_len, k_len, offset))
        return bias.permute(2, 0, 1)

    def score_mod(self, *, offset: int | torch.Tensor = 0) -> ScoreMod:
        r"""The bias of :meth:`forward` as a FlexAttention ``score_mod``, computed per score: no bias tensor.

        Parameters
        ----------
        offset : int or 0-d integer tensor, default 0
            Position of query 0: query ``i`` sits at ``offset + i``, key ``j`` at ``j``. ``0`` for a prefill
            or an encoder (queries and keys the same tokens); the number of cached tokens when decoding
            (``cache_position[0]``). There is no ``None`` default as in :meth:`forward`, since a
            ``score_mod`` is not told the lengths. ``|offset| <= 2**52``.

        Returns
        -------
        score_mod : posenc.nn.flex.ScoreMod
            ``score_mod(score, batch, head, q_idx, kv_idx)`` returns ``score + bias[head, q_idx, kv_idx]``
            with ``bias = self(q_len, k_len, offset=offset)`` for any lengths, cast to the score's dtype.
            It reads ``relative_attention_bias.weight`` itself, so gradients reach the table, and later
            updates of the weight (an optimizer step) are seen; it captures a bucket lookup and the offset
            on the weight's device: move the module first.

        Raises
        ------
        TypeError
            If ``offset`` is not an int or 0-d integer tensor.
        ValueError
            If ``|offset| > 2**52``, or ``2 * max_distance + 1`` exceeds ``posenc.MAX_TABLE_ELEMENTS`` (the
            size of the lookup).

        Notes
        -----
        The buckets stay exact integers: no logarithm is evaluated per score. This method computes, on the
        weight's device and from ``bucket_starts``, the bucket of every relative position in
        ``[-max_distance, max_distance]``, and the score_mod clamps ``kv_idx - (offset + q_idx)`` to
        that range and reads the bucket there; clamping changes no bucket, since every distance of
        ``max_distance`` or more is in the last bucket of its side. (FlexAttention's compiled kernels cannot
        run ``torch.bucketize`` inside a score_mod, hence the lookup.)

        Examples
        --------
        >>> bias = T5RelativeBias(4)
        >>> mod = bias.score_mod(offset=2)
        >>> heads, queries, keys = torch.arange(4)[:, None, None], torch.arange(3)[:, None], torch.arange(300)
        >>> bool((mod(torch.zeros(()), 0, heads, queries, keys) == bias(3, 300, offset=2)).all())
        True
        """
        shift = offset_tensor(offset, causal=False, device=self.relative_attention_bias.weight.device)
        reach = self.max_distance
        if 2 * reach + 1 > MAX_TABLE_ELEMENTS:
            raise ValueError(
                f"score_mod needs a lookup of 2 * max_distance + 1 = {2 * reach + 1} buckets, over the limit of "
                f"{MAX_TABLE_ELEMENTS}: build the module with a smaller max_distance, or use its dense forward"
            )
        lookup = self._relative_buckets(torch.arange(-reach, reach + 1, device=shift.device))
        weight = self.relative_attention_bias.weight

        def t5(
            score: torch.Tensor, batch: torch.Tensor, head: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor
        ) -> torch.Tensor:
            # relative position j - (offset + i), clamped, is entry relative + reach of the lookup
            # in int64: the int32 indices would take the offset's sum in int32 (0-d tensors do not promote)
            index = (kv_idx.to(torch.int64) - (q_idx.to(torch.int64) + shift)).clamp(-reach, reach) + reach
            return score + weight[lookup[index], head].to(score.dtype)

        return t5

    def extra_repr(self) -> str:
        return (
            f"n_heads={self.n_heads}, bidirectional={self.bidirectional}, num_buckets={self.num_buckets}, "
            f"max_distance={self.max_distance}"
        )


def _bucket_starts(bidirectional: bool, num_buckets: int, max_distance: int) -> NDArray[np.int64]:
    """The smallest distance ``n >= 0`` of each bucket ``1 .. n_side - 1`` of a side, by bisection on the reference.

    Bucket ``f(n)`` of distance ``n`` is :func:`posenc.t5_relative_bucket` of ``-n`` (a key ``n`` before the
    query: the same side in both modes); it never decreases with ``n`` and is ``n_side - 1`` from
    ``max_distance`` on, so ``f(n)`` is the number of starts at or below ``n`` (a bucket the log term skips
    starts where the next one does).
    """
    side = num_buckets // 2 if bidirectional else num_buckets
    wanted = np.arange(1, side)
    low, high = np.zeros_like(wanted), np.full_like(wanted, max_distance)
    while np.any(low < high):
        middle = (low + high) // 2
        reached = (
            t5_relative_bucket(-middle, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
            >= wanted
        )
        low, high = np.where(reached, low, middle + 1), np.where(reached, middle, high)
    return low
