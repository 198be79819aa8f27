r"""Rotary position embedding on several axes (axial, M-RoPE, mixed) as a module: :mod:`posenc.multiaxis` in torch.

The angles are computed in float64, in torch on ``x``'s device (the fixed frequencies are copied there once; the
learned ones are used as they are, so that gradients reach them), and rounded once to the dtype of the
computation: float32, or float64 for a float64 ``x``. There is no cache: a table is ``seq x n_pairs`` products,
small beside the rotation itself. Nothing is read on the host: the coordinates' values (finite, and finite angles)
are checked on the device (on the CPU at once, on an accelerator by a device assertion).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable

import numpy as np
import torch
from numpy.typing import ArrayLike
from torch import nn

from posenc._validation import (
    ROTARY_LAYOUTS,
    RotaryLayout,
    check_choice,
    check_exact_integers,
    check_flag,
    check_table_size,
)
from posenc.multiaxis import check_frequency_matrix
from posenc.nn._checks import HostConstants, check_on_device, exact_in_float64

__all__ = ["MultiAxisRotaryEmbedding"]


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
        the model, RoPE-Mixed of Heo et al. (2024). ``False``: fixed, kept in float64 (not a buffer:
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
        self._fixed = HostConstants(frequencies=torch.from_numpy(matrix))
        if self.learnable:
            self.frequencies = nn.Parameter(torch.from_numpy(matrix).to(torch.float32))
        else:
            self.register_parameter("frequencies", None)

    def forward(self, x: torch.Tensor, positions: torch.Tensor | ArrayLike) -> torch.Tensor:
        r"""Rotate ``x`` by the coordinates ``positions``.

        Parameters
        ----------
        x : (..., seq, head_dim) tensor
            Queries or keys, any floating dtype and device, ``head_dim >= 2 * n_pairs``.
        positions : (..., seq, n_axes) tensor or array_like of real
            The coordinates of each row of ``x``, finite reals (integers at most ``2**53`` in magnitude). Either
            no leading axes, ``(seq, n_axes)`` for all rows of ``x``, or as many as ``x.shape[:-2]``, each 1 or
            equal to ``x``'s: ``(batch, 1, seq, n_axes)`` per batch entry of a ``(batch, heads, seq, head_dim)``
            ``x``. Fewer leading axes are refused unless all are 1: broadcast from the right, a ``(batch, seq,
            n_axes)`` tensor would fall on the heads axis, while :class:`~posenc.nn.RotaryEmbedding` lines its
            ``(batch, seq)`` positions up with ``x``'s first axes. transformers' M-RoPE ``position_ids``
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
            ``n_axes`` coordinates for each of the ``seq`` rows, does not broadcast into ``x``'s shape, has fewer
            leading axes than ``x`` (not all 1), is not finite, holds an integer beyond ``2**53`` in magnitude, or
            gives angles beyond float64.
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
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        angles = self._angles(positions, x)
        cosines, sines = torch.cos(angles).to(dtype), torch.sin(angles).to(dtype)
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

    def _angles(self, positions: object, x: torch.Tensor) -> torch.Tensor:
        """The float64 angles ``positions @ frequencies`` on ``x``'s device, ``(..., seq, n_pairs)``, checked.

        The shapes are checked on the host; the values (finite coordinates, finite angles) on the device.
        """
        accepted = f"a (..., seq, n_axes={self.n_axes}) tensor or array of finite real coordinates"
        if isinstance(positions, torch.Tensor):
            if positions.is_complex() or positions.dtype == torch.bool:
                raise TypeError(f"positions must be {accepted}, got a tensor of dtype {positions.dtype}")
            if positions.device.type == "meta" and x.device.type != "meta":
                raise ValueError("positions must hold values: got a tensor on the meta device")
            coordinates = positions.detach()
        else:  # host data: parsed by NumPy, checked here
            if isinstance(positions, (bool, str, bytes, numbers.Number)) or not (
                hasattr(positions, "__len__") or hasattr(positions, "__array__")
            ):
                raise TypeError(f"positions must be {accepted}, got {type(positions).__name__}")
            try:
                array = np.asarray(positions)
            except ValueError as error:  # ragged nested lists
                raise TypeError(f"positions must be {accepted}: {error}") from error
            if array.dtype == np.bool_ or not (
                np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
            ):
                raise TypeError(f"positions must be {accepted}, got an array of dtype {array.dtype}")
            check_exact_integers(array, "positions", accepted)
            coordinates = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float64))
        shape, rows = tuple(coordinates.shape), tuple(x.shape[:-1])
        if len(shape) < 2 or shape[-1] != self.n_axes:
            raise ValueError(f"positions must be {accepted} (n_axes = frequencies.shape[0]), got shape {shape}")
        if shape[-2] != rows[-1]:
            raise ValueError(
                f"positions must have one coordinate row per row of x (seq = x.shape[-2] = {rows[-1]}), "
                f"got shape {shape}"
            )
        leading, outer = shape[:-2], rows[:-1]  # aligned from the right, each 1 or equal to x's
        if len(leading) > len(outer) or any(n not in (1, m) for n, m in zip(leading[::-1], outer[::-1])):
            raise ValueError(
                f"positions of shape {shape} must broadcast into x's shape {tuple(x.shape)} (its leading axes 1 or "
                "equal to x's, aligned from the right)"
            )
        if 0 < len(leading) < len(outer) and any(n != 1 for n in leading):
            # (batch, seq, n_axes) against (batch, heads, seq, head_dim): aligned from the right, the batch axis
            # of positions would fall on x's heads axis, the opposite of RotaryEmbedding's (batch, seq) positions
            raise ValueError(
                f"positions of shape {shape} must have as many leading axes as x of shape {tuple(x.shape)} "
                f"({len(outer)}, 1 where shared), or none: e.g. (batch, 1, seq, n_axes) for (batch, heads, seq, "
                "head_dim); with fewer they would line up with x's last leading axes, not its first"
            )
        check_table_size(coordinates.numel() // self.n_axes, self.n_pairs, "positions rows", "n_pairs")
        coordinates = coordinates.to(device=x.device)
        if coordinates.dtype == torch.int64:
            exact = exact_in_float64(coordinates)
            check_on_device(exact, f"positions must be {accepted}: integers beyond 2**53 in magnitude are not exact")
        coordinates = coordinates.to(dtype=torch.float64)
        check_on_device(torch.isfinite(coordinates).all(), f"positions must be {accepted}: found NaN or infinity")
        if self.frequencies is None:
            matrix = self._fixed.on("frequencies", x.device)
        else:
            matrix = self.frequencies.to(torch.float64)
        angles = coordinates @ matrix
        check_on_device(
            torch.isfinite(angles).all(),
            "positions @ frequencies overflows: positions or frequencies too large for float64 angles",
        )
        return angles

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> MultiAxisRotaryEmbedding:
        # .to(device), .cuda(), ...: the float64 constants follow the module's device, never its dtype
        self._fixed.follow(fn)
        super()._apply(fn, recurse)  # type: ignore[no-untyped-call]
        return self

    def extra_repr(self) -> str:
        return f"n_axes={self.n_axes}, n_pairs={self.n_pairs}, layout={self.layout!r}, learnable={self.learnable}"
