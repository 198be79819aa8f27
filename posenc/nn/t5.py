"""T5's relative attention bias as a PyTorch module: one learned scalar per (bucket, head)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from posenc._validation import (
    MAX_TABLE_ELEMENTS,
    check_int,
    check_query_key_lengths,
    check_t5_buckets,
    check_table_size,
)
from posenc.nn._checks import LONG_CONTEXT_HINT, offset_as_int, offset_tensor
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
        q_len, k_len, offset = check_query_key_lengths(q_len, k_len, offset_as_int(offset))
        return self._buckets(q_len, k_len, offset)

    def _buckets(self, q_len: int, k_len: int, offset: int) -> torch.Tensor:
        """:meth:`buckets` for checked lengths and offset."""
        device = self.relative_attention_bias.weight.device
        if not (q_len and k_len):  # an empty table: allocate nothing of the other length (it may be huge)
            return torch.zeros(q_len, k_len, dtype=torch.int64, device=device)
        # Buckets depend on j - (offset + i) only: compute them once per distinct relative position, then spread.
        distinct = torch.from_numpy(
            t5_relative_bucket(
                np.arange(-(q_len - 1), k_len) - offset,
                bidirectional=self.bidirectional,
                num_buckets=self.num_buckets,
                max_distance=self.max_distance,
            )
        ).to(device)
        # relative position j - (offset + i) sits at index j - i + q_len - 1 of `distinct`
        index = torch.arange(k_len, device=device)[None, :] - torch.arange(q_len, device=device)[:, None] + q_len - 1
        return distinct[index]

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
        q_len, k_len, offset = check_query_key_lengths(
            q_len, k_len, offset_as_int(offset), self.n_heads, "n_heads", hint=LONG_CONTEXT_HINT
        )
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
        The buckets stay exact integers: no logarithm is evaluated per score. The module computes once
        the bucket of every relative position in ``[-max_distance, max_distance]`` with
        :func:`posenc.t5_relative_bucket`, and the score_mod clamps ``kv_idx - (offset + q_idx)`` to
        that range and reads the bucket there; clamping changes no bucket, since every distance of
        ``max_distance`` or more is in the last bucket of its side.

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
        lookup = torch.from_numpy(
            t5_relative_bucket(
                np.arange(-reach, reach + 1),
                bidirectional=self.bidirectional,
                num_buckets=self.num_buckets,
                max_distance=self.max_distance,
            )
        ).to(shift.device)
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
