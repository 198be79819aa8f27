"""The check of a rotary key cache that evicts tokens and shifts the positions of the keys it keeps."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

import posenc
from posenc._validation import ROTARY_LAYOUTS, RotaryLayout, check_choice, check_int, check_real
from posenc.testing._common import (
    MAX_CHECK_ELEMENTS,
    MAX_SEED,
    Implementation,
    as_array,
    call_implementation,
    check_implementation,
    pairs_of,
)

GROWTH = 8.0
"""How many times its error before the first eviction a cache's error may reach after the last one."""

DRIFT_FLOOR = 1e-6
"""Relative error of a key below which no growth counts as drift (a float64 cache's shifts stay far below it)."""

WRONG_KEY = 0.05
"""Relative error from which a row is examined for a wrong position or a wrong token, not only for drift."""


def _relative_errors(got: NDArray[np.float64], want: NDArray[np.float64]) -> NDArray[np.float64]:
    """``|got - want| / |want|`` of each row."""
    norms = np.maximum(np.linalg.norm(want, axis=-1), np.finfo(np.float64).tiny)
    errors: NDArray[np.float64] = np.linalg.norm(got - want, axis=-1) / norms
    return errors


def _best_position(
    row: NDArray[np.float64], raw: NDArray[np.float64], theta: NDArray[np.float64], layout: RotaryLayout, last: int
) -> tuple[int, float]:
    """The position in ``0 ... last`` to which ``raw`` rotated comes closest to ``row``, and that relative error."""
    a, b = pairs_of(row, layout)
    c, d = pairs_of(raw, layout)
    got, key = a + 1j * b, c + 1j * d
    candidates = np.arange(last + 1, dtype=np.float64)
    turned = key[None, :] * np.exp(1j * candidates[:, None] * theta[None, :])  # (candidates, pairs)
    errors = np.sqrt(np.sum(np.abs(got[None, :] - turned) ** 2, axis=-1)) / max(np.linalg.norm(raw), 1e-300)
    best = int(np.argmin(errors))
    return best, float(errors[best])


def _pair_norms(x: NDArray[np.float64], layout: RotaryLayout) -> NDArray[np.float64]:
    """The length of each rotated pair, which a rotation keeps: it tells the token whatever the position."""
    a, b = pairs_of(x, layout)
    norms: NDArray[np.float64] = np.hypot(a, b)
    return norms


def assert_rerotated_keys_accurate(
    make_cache: Implementation,
    *,
    head_dim: int = 64,
    n_sink: int = 4,
    window: int = 508,
    n_evictions: int = 512,
    base: float = 10000.0,
    layout: RotaryLayout = "interleaved",
    seed: int = 0,
) -> None:
    r"""Check a key cache that evicts tokens and shifts the positions of the rest, as StreamingLLM's does.

    Parameters
    ----------
    make_cache : callable
        ``make_cache()`` returns a new, empty cache ``push``; ``push(key, position)`` stores the key of the
        next token and returns the keys attention uses after it. ``key`` is the token's key before rotation,
        a ``(head_dim,)`` float64 NumPy array (the cache casts it as it stores), ``position`` the token's
        index in the stream, ``0, 1, 2, ...``. The cache keeps the first ``n_sink`` tokens and the last
        ``window``; it returns ``(n_kept, head_dim)`` keys (array or tensor of any float dtype), the tokens
        kept in the order they came, each rotated by RoPE (``base``, ``layout``) to its place in the cache:
        row ``r`` at position ``r``.
    head_dim : int, default 64
        Width of a key; even, in ``[2, 256]``.
    n_sink : int, default 4
        Tokens kept from the start of the stream (StreamingLLM's attention sinks); in ``[0, 64]``.
    window : int, default 508
        Most recent tokens kept; at least 1.
    n_evictions : int, default 512
        Tokens pushed after the cache is full, each evicting one; at least 1. With ``window`` it is bounded by
        ``(n_sink + window) * (n_sink + window + n_evictions) <= 2**22``.
    base : float, default 10000.0
        The cache's RoPE base, ``> 1``.
    layout : {"interleaved", "halves"}, default "interleaved"
        The cache's RoPE layout (see :func:`posenc.rotate`).
    seed : int, default 0
        Seeds the keys, standard normal.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If, once the cache is full, after its first eviction or after its last, a row is not the key of the
        token it should hold rotated to its place (the message names the row, the token, and the position the
        key is rotated to: a new key left at its position in the stream, or keys never shifted, give such
        rows); if the keys' error, relative to the float64 rotation, grows during the evictions to more than
        ``GROWTH`` times what it was before the first one and above ``DRIFT_FLOOR`` (the message gives both
        and the number of shifts); if the result has the wrong shape; or if ``make_cache`` or ``push`` raises.
    TypeError, ValueError
        If an argument of the check is invalid.

    Notes
    -----
    StreamingLLM keeps the first tokens of a stream and a window of recent ones, and gives the kept keys the
    positions of their places in the cache, not their positions in the stream [1]_. When a token is evicted,
    every key after it moves one place down. A cache can store keys unrotated and rotate each, when read, to
    its place (the reference implementation does, mit-han-lab/streaming-llm#73), or store them rotated and
    rotate each kept key back by one step at every eviction. The second way applies a correction to a key
    already corrected, once per eviction over the key's life in the window: each rotation rounds, and the
    rounding accumulates. In bfloat16 a step of the slowest pairs is smaller than the format's resolution, so
    those pairs do not turn at all (chapter 16 measures both). The check compares, at three moments, every
    kept key with the float64 rotation of the token's key to its place, :func:`posenc.rotate`.

    References
    ----------
    .. [1] G. Xiao, Y. Tian, B. Chen, S. Han, M. Lewis, "Efficient Streaming Language Models with Attention
       Sinks", ICLR 2024, arXiv:2309.17453.

    Examples
    --------
    A cache that stores keys unrotated and rotates them when read passes:

    >>> import posenc
    >>> def raw_cache(n_sink=4, window=28):
    ...     kept = []
    ...     def push(key, position):
    ...         kept.append(key)
    ...         if len(kept) > n_sink + window:
    ...             del kept[n_sink]
    ...         return posenc.rotate(np.array(kept), len(kept))
    ...     return push
    >>> assert_rerotated_keys_accurate(raw_cache, window=28, n_evictions=40)

    One that keeps each key rotated at its position in the stream, never shifting it, fails:

    >>> def unshifted_cache(n_sink=4, window=28):
    ...     kept = []
    ...     def push(key, position):
    ...         kept.append(posenc.rotate(key[None], [position])[0])
    ...         if len(kept) > n_sink + window:
    ...             del kept[n_sink]
    ...         return np.array(kept)
    ...     return push
    >>> assert_rerotated_keys_accurate(unshifted_cache, window=28, n_evictions=40)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    AssertionError: push(key, 32), the first eviction: row 4 holds token 5 rotated to position 5, not to its place 4...
    """
    check_implementation(make_cache, "make_cache")
    head_dim = check_int(head_dim, "head_dim", minimum=2, maximum=256, even=True)
    n_sink = check_int(n_sink, "n_sink", maximum=64)
    window = check_int(window, "window", minimum=1, maximum=MAX_CHECK_ELEMENTS)
    n_evictions = check_int(n_evictions, "n_evictions", minimum=1, maximum=MAX_CHECK_ELEMENTS)
    kept = n_sink + window
    n_tokens = kept + n_evictions
    if kept * n_tokens > MAX_CHECK_ELEMENTS:
        raise ValueError(
            f"(n_sink + window) x (n_sink + window + n_evictions) must be at most {MAX_CHECK_ELEMENTS}, got "
            f"{kept} x {n_tokens}: ask for a smaller window or fewer n_evictions"
        )
    base = check_real(base, "base", above=1.0)
    layout = check_choice(layout, "layout", ROTARY_LAYOUTS)
    seed = check_int(seed, "seed", maximum=MAX_SEED)

    keys = np.random.default_rng(seed).standard_normal((n_tokens, head_dim))
    theta = posenc.rotary_frequencies(head_dim, base=base)
    push: Any = call_implementation(make_cache, "make_cache()")
    if not callable(push):
        raise AssertionError(f"make_cache() returned {type(push).__name__}, not a callable push(key, position)")
    moments = {kept - 1: "the cache full, before any eviction", kept: "the first eviction"}
    moments[n_tokens - 1] = f"after {n_evictions} evictions"
    before = None
    for position in range(n_tokens):
        description = f"push(key, {position})"
        result = call_implementation(push, description, keys[position].copy(), position)
        if position not in moments:
            continue
        sinks = np.arange(min(n_sink, position + 1))
        tokens = np.concatenate([sinks, np.arange(max(n_sink, position + 1 - window), position + 1)])
        got = as_array(result, description)
        if got.shape != (len(tokens), head_dim):
            raise AssertionError(
                f"{description} returned shape {got.shape}, expected {(len(tokens), head_dim)}: the first {n_sink} "
                f"tokens and the last {window}, one row each"
            )
        want = posenc.rotate(keys[tokens], len(tokens), base=base, layout=layout)
        errors = _relative_errors(got, want)
        worst = float(errors.max())
        where = f"{description}, {moments[position]}"
        if before is None:
            before = worst
        elif position == n_tokens - 1 and worst > max(GROWTH * before, DRIFT_FLOOR):
            raise AssertionError(
                f"{where}: the kept keys differ from the float64 rotation of their tokens to their places by up to "
                f"{worst:.3g} of their length, against {before:.3g} before the first eviction "
                f"({worst / max(before, 1e-300):.3g} times as much; a key in the window was shifted up to "
                f"{min(n_evictions, window - 1)} times). The error grows with every shift: keys rotated again after "
                "being rotated (a correction applied to a correction) accumulate rounding. Store the keys unrotated "
                "and rotate each once, to its place, when it is read (StreamingLLM's reference does)."
            )
        _check_rows(got, errors, tokens, keys, theta, layout, where, base)


def _check_rows(
    got: NDArray[np.float64],
    errors: NDArray[np.float64],
    tokens: NDArray[np.int64],
    keys: NDArray[np.float64],
    theta: NDArray[np.float64],
    layout: RotaryLayout,
    description: str,
    base: float,
) -> None:
    """Raise for the first row far from its token's key at its place: which token and position it holds instead."""
    for row in np.flatnonzero(errors > WRONG_KEY)[:8]:
        token = int(tokens[row])
        last = int(max(tokens[-1], len(tokens)))
        position, error = _best_position(got[row], keys[token], theta, layout, last)
        if error <= WRONG_KEY and position != row:
            stream = (
                " That is the token's position in the stream: the key was rotated there and never moved to its "
                "place (huggingface/transformers#35350 reports a new key left so)."
                if position == token
                else ""
            )
            raise AssertionError(
                f"{description}: row {row} holds token {token} rotated to position {position}, not to its place "
                f"{row} in the cache (the kept tokens sit at positions 0..{len(tokens) - 1}, in order).{stream}"
            )
        if error > WRONG_KEY:
            norms = _pair_norms(got[row], layout)
            candidates = _pair_norms(keys, layout)
            holder = int(np.argmin(np.linalg.norm(candidates - norms, axis=-1)))
            if holder != token:
                raise AssertionError(
                    f"{description}: row {row} holds the key of token {holder}, not of token {token} (the cache keeps "
                    f"tokens {tokens[0]}..{tokens[min(len(tokens), 3) - 1]} ... {tokens[-1]}: the first sinks and the "
                    "last window, in order)."
                )
            raise AssertionError(
                f"{description}: row {row} differs from the key of token {token} rotated to its place {row} by "
                f"{errors[row]:.3g} of its length, and from that key at any position 0..{last} by at least "
                f"{error:.3g}: the cache does not rotate as RoPE with base {base:g} and layout {layout!r} does."
            )
