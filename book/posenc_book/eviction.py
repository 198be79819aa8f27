r"""Re-rotating the keys of a cache that evicts tokens: how far they drift from the float64 rotation.

A cache that keeps the first tokens and a window of recent ones (StreamingLLM) gives each kept key the position
of its place in the cache. When a token leaves, every key after it moves one place down, and its rotation must
turn back by one step. Chapter 16 measures two ways to do that against :func:`posenc.rotate` in float64:

- *re-rotated*: the cache stores rotated keys and, at each eviction, rotates each kept key by one step back,
  in the cache's dtype (a correction applied to a key already corrected);
- *stored unrotated*: the cache stores the keys before rotation, in its dtype, and rotates each once, to its
  place, when it is read.

Both rotate with :class:`posenc.nn.RotaryEmbedding` (angles in float64, the rotation in float32, the result in
the key's dtype), so the difference between them is only how often a key is rounded. This module holds
:func:`shift_drift`, which shifts keys ``n`` times both ways and compares them with the float64 rotation, and
:func:`pair_angle_errors`, the angle each rotated pair has lost or gained.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

import posenc
from posenc.nn import RotaryEmbedding

__all__ = ["DriftResult", "shift_drift", "pair_angle_errors"]


class DriftResult(NamedTuple):
    """What :func:`shift_drift` measured: relative errors against the float64 rotation, largest over the keys.

    Attributes
    ----------
    n_shifts : int
    dtype : torch.dtype
    rerotated, unrotated : float
        :math:`\\max_k |k_\\text{cache} - k_\\text{ref}| / |k_\\text{ref}|` for the keys re-rotated ``n_shifts``
        times, and for the keys stored unrotated and rotated once.
    norm_change : float
        The mean over the keys of :math:`|k_\\text{re-rotated}| / |k_\\text{ref}| - 1`: a shrinking or growing
        length shows rounding that does not average out.
    rerotated_keys, reference : (n_keys, head_dim) float64 arrays
        The re-rotated keys and the float64 rotation, for :func:`pair_angle_errors`.
    """

    n_shifts: int
    dtype: torch.dtype
    rerotated: float
    unrotated: float
    norm_change: float
    rerotated_keys: np.ndarray
    reference: np.ndarray


def shift_drift(n_shifts, dtype, *, head_dim=128, n_keys=64, place=4, base=10000.0, seed=0) -> DriftResult:
    r"""Shift keys ``n_shifts`` places down, re-rotating them each time, and compare with rotating them once.

    Parameters
    ----------
    n_shifts : int
        Evictions before the keys are compared, each moving every key one place down; at least 1.
    dtype : torch.dtype
        The cache's dtype: the keys are stored, and re-rotated, in it.
    head_dim : int, default 128
        Width of a key (Llama's).
    n_keys : int, default 64
        Keys, standard normal.
    place : int, default 4
        The place the keys end at (just after four sinks); they start at ``place + n_shifts``.
    base : float, default 10000.0
        The RoPE base, with the interleaved layout of :class:`posenc.nn.RotaryEmbedding`'s default.
    seed : int, default 0
        Seeds the keys.

    Returns
    -------
    DriftResult

    Examples
    --------
    >>> r = shift_drift(100, torch.float32)  # errors about 7e-8 (rotated once) and 3e-6 (100 times)
    >>> r.unrotated < 3e-7 and r.rerotated > 1e-6
    True
    """
    rope = RotaryEmbedding(head_dim, base=base)
    raw = np.random.default_rng(seed).standard_normal((n_keys, head_dim))
    stored = torch.from_numpy(raw).to(dtype)
    start, back = torch.full((n_keys,), float(place + n_shifts)), torch.full((n_keys,), -1.0)
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.no_grad():
            keys = rope(stored, positions=start)
            for _ in range(n_shifts):
                keys = rope(keys, positions=back)
            once = rope(stored, positions=torch.full((n_keys,), float(place)))
    finally:
        torch.set_num_threads(previous)
    reference = posenc.rotate(raw, np.full(n_keys, float(place)), base=base)
    norms = np.linalg.norm(reference, axis=-1)
    rerotated = keys.double().numpy()

    def error(x: np.ndarray) -> float:
        return float((np.linalg.norm(x - reference, axis=-1) / norms).max())

    norm_change = float(np.mean(np.linalg.norm(rerotated, axis=-1) / norms - 1.0))
    return DriftResult(
        n_shifts, dtype, error(rerotated), error(once.double().numpy()), norm_change, rerotated, reference
    )


def pair_angle_errors(result: DriftResult) -> np.ndarray:
    r"""The angle by which each pair of the re-rotated keys is off, in radians, averaged over the keys.

    Parameters
    ----------
    result : DriftResult
        From :func:`shift_drift`.

    Returns
    -------
    errors : (head_dim // 2,) float64 array
        For pair :math:`i` (features :math:`2i, 2i + 1`), the mean over the keys of the angle of the re-rotated
        pair relative to the float64 one, positive where the pair has turned too far forward (not far enough
        back). A pair that never turns during the shifts is off by :math:`n\,\theta_i`.

    Examples
    --------
    >>> errors = pair_angle_errors(shift_drift(100, torch.bfloat16, head_dim=8))
    >>> errors.shape
    (4,)
    """
    got = result.rerotated_keys[:, 0::2] + 1j * result.rerotated_keys[:, 1::2]
    want = result.reference[:, 0::2] + 1j * result.reference[:, 1::2]
    errors: np.ndarray = np.angle(got / want).mean(axis=0)
    return errors
