r"""Rotary position embedding on several axes (axial, M-RoPE, mixed) as a module: :mod:`posenc.multiaxis` in torch.

The angles are computed in float64 (NumPy for fixed frequencies, torch float64 for learned ones, so that
gradients reach them) and rounded once to the dtype of the computation: float32, or float64 for a float64
``x``. There is no cache: a table is ``seq x n_pairs`` products, small beside the rotation itself.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike
from torch import nn

from posenc._validation import ROTARY_LAYOUTS, RotaryLayout, check_choice, check_flag
from posenc.multiaxis import check_frequency_matrix, multiaxis_angles

__all__ = ["MultiAxisRotaryEmbedding"]


def _positions_numpy(positions: object) -> object:
    """A tensor of positions as a float64 NumPy array (anything else as given, checked by the caller)."""
    if not isinstance(positions, torch.Tensor):
        return positions
    if positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(
            f"positions must be a real tensor or array of coordinates, got a tensor of dtype {positions.dtype}"
        )
    if positions.device.type == "meta":
        raise ValueError("positions must hold values: got a tensor on the meta device")
    return positions.detach().to("cpu", torch.float64).numpy()


class MultiAxisRotaryEmbedding(nn.Module):
    r"""Rotate queries or keys by their coordinates on several axes: axial RoPE, M-RoPE or RoPE-Mixed.

    ``x`` is ``(..., seq, head_dim)`` (``(batch, heads, seq, head_dim)`` as in transformers) and ``positions``
    ``(..., seq, n_axes)``: one row of coordinates per token, e.g. (row, column) of an image patch or (time,
    row, column) of a video patch. Pair ``i`` turns by ``positions[..., :] @ frequencies[:, i]``.

    Parameters
    ----------
    frequencies : (n_axes, n_pairs) array_like of real
        The frequency matrix: :func:`posenc.axial_frequencies` (axial RoPE), :func:`posenc.mrope_frequencies`
        (M-RoPE), or any finite matrix (RoPE-Mixed). The first ``2 * n_pairs`` features of each head are
        rotated, the others pass through.
    layout : {"interleaved", "halves"}, default "interleaved"
        Which rotated features form pair ``i``: ``2i`` and ``2i + 1``, or ``i`` and ``i + n_pairs`` (Qwen2-VL
        and Qwen3-VL in transformers), as in :func:`posenc.rotate_multiaxis`.
    learnable : bool, default False
        ``True``: the frequencies are a float32 :class:`torch.nn.Parameter` (``self.frequencies``) trained with
        the model, RoPE-Mixed of Heo et al. (2024). ``False``: fixed, kept as float64 NumPy (not a buffer:
        ``.to(torch.float16)`` does not round them).

    Raises
    ------
    TypeError, ValueError
        If ``frequencies`` is not a finite real 2-D array with both sizes ``>= 1``, ``layout`` is not one of the
        two, or ``learnable`` is not a bool.

    Notes
    -----
    RoPE-Mixed (Heo et al., 2024) learns the frequency of each pair on each axis. The authors' code
    (``init_2d_freqs``) keeps one such matrix per head, initialised with the magnitudes of RoPE-Axial turned
    by a random angle per head (that angle for the first half of the pairs, the angle plus :math:`\pi/2` for
    the second). This module holds one matrix shared by the heads it rotates: use one module per head (or per
    layer) for more.

    References
    ----------
    .. [1] B. Heo, S. Park, D. Han and S. Yun, "Rotary Position Embedding for Vision Transformer", ECCV 2024,
       arXiv:2403.13298; code https://github.com/naver-ai/rope-vit (``self-attn/rope_self_attn.py``).
    .. [2] P. Wang et al., "Qwen2-VL: Enhancing Vision-Language Model's Perception of the World at Any
       Resolution", arXiv:2409.12191.

    Examples
    --------
    >>> import posenc
    >>> rope = MultiAxisRotaryEmbedding(posenc.axial_frequencies(64, 2))
    >>> q = torch.randn(2, 8, 16, 64)  # (batch, heads, 4 x 4 patches, head_dim)
    >>> rows, columns = torch.meshgrid(torch.arange(4), torch.arange(4), indexing="ij")
    >>> coordinates = torch.stack((rows.flatten(), columns.flatten()), dim=-1)  # (16, 2)
    >>> rope(q, coordinates).shape
    torch.Size([2, 8, 16, 64])
    """

    frequencies: torch.Tensor | None

    def __init__(
        self, frequencies: ArrayLike, *, layout: RotaryLayout = "interleaved", learnable: bool = False
    ) -> None:
        super().__init__()
        matrix = check_frequency_matrix(frequencies)
        self.layout = check_choice(layout, "layout", ROTARY_LAYOUTS)
        self.learnable = check_flag(learnable, "learnable")
        self.n_axes, self.n_pairs = matrix.shape
        self._fixed = matrix
        if self.learnable:
            self.frequencies = nn.Parameter(torch.from_numpy(matrix).to(torch.float32))
        else:
            self.register_parameter("frequencies", None)

    def _matrix(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        """The current frequencies as float64 NumPy (the learned ones detached), for the checks."""
        if self.frequencies is None:
            return self._fixed
        return self.frequencies.detach().to("cpu", torch.float64).numpy()

    def forward(self, x: torch.Tensor, positions: torch.Tensor | ArrayLike) -> torch.Tensor:
        r"""Rotate ``x`` by the coordinates ``positions``.

        Parameters
        ----------
        x : (..., seq, head_dim) tensor
            Queries or keys, any floating dtype and device, ``head_dim >= 2 * n_pairs``.
        positions : (..., seq, n_axes) tensor or array_like of real
            The coordinates of each row of ``x``, finite reals; the leading axes broadcast against
            ``x.shape[:-2]`` from the right: ``(seq, n_axes)`` for all, ``(batch, 1, seq, n_axes)`` per batch
            entry of a ``(batch, heads, seq, head_dim)`` ``x``. transformers' M-RoPE ``position_ids``
            ``(3, batch, seq)`` are ``position_ids.permute(1, 2, 0)[:, None]``.

        Returns
        -------
        rotated : (..., seq, head_dim) tensor
            ``x`` rotated, with its shape, dtype and device: :func:`posenc.rotate_multiaxis` computed in float32
            (float64 for a float64 ``x``) from float64 angles. Differentiable in ``x``, and in
            ``self.frequencies`` when learnable.

        Raises
        ------
        TypeError
            If ``x`` is not a floating tensor or ``positions`` not real.
        ValueError
            If ``x`` has fewer than 2 axes or fewer than ``2 * n_pairs`` features, ``positions`` does not have
            ``n_axes`` coordinates for each of the ``seq`` rows, does not broadcast into ``x``'s shape, is not
            finite, or gives angles beyond float64.
        """
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor of shape (..., seq, head_dim), got {type(x).__name__}")
        if not x.is_floating_point():
            raise TypeError(f"x must be a floating-point tensor of shape (..., seq, head_dim), got dtype {x.dtype}")
        if x.ndim < 2 or x.shape[-1] < 2 * self.n_pairs:
            raise ValueError(
                f"x must have shape (..., seq, head_dim) with head_dim >= 2 * n_pairs = {2 * self.n_pairs}, "
                f"got {tuple(x.shape)}"
            )
        if isinstance(positions, (bool, numbers.Number)):
            raise TypeError(f"positions must be a (..., seq, n_axes) tensor or array, got {type(positions).__name__}")
        position_array = _positions_numpy(positions)
        angles = multiaxis_angles(position_array, self._matrix(), tuple(x.shape))
        rows = tuple(x.shape[:-1])
        if np.broadcast_shapes(angles.shape[:-1], rows) != rows:
            raise ValueError(
                f"positions of shape {(*angles.shape[:-1], self.n_axes)} must broadcast into x's shape "
                f"{tuple(x.shape)} (its leading axes 1 or equal to x's, aligned from the right)"
            )
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        if self.frequencies is None:
            angle_tensor = torch.from_numpy(angles)
        else:
            coordinates = torch.from_numpy(np.asarray(position_array, dtype=np.float64)).to(self.frequencies.device)
            angle_tensor = coordinates @ self.frequencies.to(torch.float64)
        cosines = torch.cos(angle_tensor).to(device=x.device, dtype=dtype)
        sines = torch.sin(angle_tensor).to(device=x.device, dtype=dtype)
        computed = x.to(dtype)
        rotary_dim = 2 * self.n_pairs
        if self.layout == "interleaved":
            pairs = torch.unflatten(computed[..., :rotary_dim], -1, (self.n_pairs, 2))
            a, b = pairs[..., 0], pairs[..., 1]
            rotated = torch.stack((a * cosines - b * sines, a * sines + b * cosines), dim=-1).flatten(-2)
        else:
            a, b = computed[..., : self.n_pairs], computed[..., self.n_pairs : rotary_dim]
            rotated = torch.cat((a * cosines - b * sines, a * sines + b * cosines), dim=-1)
        if rotary_dim < x.shape[-1]:
            rotated = torch.cat((rotated, computed[..., rotary_dim:]), dim=-1)
        return rotated.to(x.dtype)

    def extra_repr(self) -> str:
        return f"n_axes={self.n_axes}, n_pairs={self.n_pairs}, layout={self.layout!r}, learnable={self.learnable}"
