"""Checks of the tensors the PyTorch modules of :mod:`posenc.nn` receive (the other checks: ``posenc._validation``)."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch

from posenc._validation import MAX_OFFSET, check_int, check_table_size

LONG_CONTEXT_HINT = "use score_mod() with torch.nn.attention.flex_attention, which never builds the bias tensor"
"""Where the size guard of the dense ALiBi and T5 biases points for long contexts."""


def check_embeddings(x: object, d_model: int) -> int:
    """Check that ``x`` is a floating ``(batch, seq, d_model)`` tensor and return ``seq``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor of shape (batch, seq, {d_model}), got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}")
    if x.ndim != 3 or x.shape[-1] != d_model:
        raise ValueError(f"x must have shape (batch, seq, d_model={d_model}), got {tuple(x.shape)}")
    return x.shape[1]


def check_rotary_input(x: object, head_dim: int, name: str = "x") -> int:
    """Check that ``x`` is a floating ``(..., seq, head_dim)`` tensor and return ``seq``; messages call it ``name``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor of shape (..., seq, head_dim={head_dim}), got {type(x).__name__}"
        )
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor of shape (..., seq, head_dim), got dtype {x.dtype}")
    if x.ndim < 2 or x.shape[-1] != head_dim:
        raise ValueError(f"{name} must have shape (..., seq, head_dim={head_dim}), got {tuple(x.shape)}")
    return x.shape[-2]


def offset_as_int(offset: object, name: str = "offset") -> object:
    """A 0-d integer tensor as a Python int (``cache_position[0]``, a static cache's counter); anything else as given.

    The caller checks the range (and the type of what is not a tensor) with ``check_int``.
    """
    if not isinstance(offset, torch.Tensor):
        return offset
    accepted = f"{name} must be an int or a 0-d integer tensor"
    if offset.is_floating_point() or offset.is_complex() or offset.dtype == torch.bool:
        raise TypeError(f"{accepted}, got a tensor of dtype {offset.dtype}")
    if offset.ndim != 0:
        raise ValueError(
            f"{accepted}, got a tensor of shape {tuple(offset.shape)} (a (seq,) cache_position is positions=, "
            "or pass its first entry)"
        )
    if offset.device.type == "meta":
        raise ValueError(f"{accepted} holding a value, got a tensor on the meta device")
    return int(offset.item())


def positions_array(
    positions: object, seq: int, width: int, width_name: str, what: str
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """``positions`` (tensor, array or nested sequence of finite reals, shape ``(..., seq)``) as float64 NumPy.

    ``what`` describes where ``seq`` comes from, for the message; ``width`` (features per position) bounds the
    size of the table that will be built (``width_name`` names it).
    """
    accepted = "a (seq,), (1, seq) or (batch, seq) tensor or array of finite real positions"
    if isinstance(positions, torch.Tensor):
        if positions.is_complex() or positions.dtype == torch.bool:
            raise TypeError(f"positions must be {accepted}, got a tensor of dtype {positions.dtype}")
        if positions.device.type == "meta":
            raise ValueError("positions must hold values: got a tensor on the meta device")
        positions = positions.detach().to("cpu", torch.float64).numpy()
    if isinstance(positions, (bool, np.bool_, str, bytes, numbers.Number)) or not (
        hasattr(positions, "__len__") or hasattr(positions, "__array__")
    ):
        raise TypeError(f"positions must be {accepted}, got {type(positions).__name__} {positions!r}")
    try:
        array = np.asarray(positions)
    except ValueError as error:  # a ragged nested sequence
        raise ValueError(f"positions must be {accepted}: {error}") from error
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise TypeError(f"positions must be {accepted}, got an array of dtype {array.dtype}")
    if array.ndim == 0 or array.shape[-1] != seq:
        raise ValueError(
            f"positions must have one entry per row of x along its last axis ({what} = {seq}), got shape {array.shape}"
        )
    check_table_size(array.size, width, "positions.size", width_name)
    array = array.astype(np.float64)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"positions must be {accepted}: found NaN or infinity")
    return array


def batch_positions(positions: object, x: torch.Tensor, d_model: int) -> np.ndarray[Any, np.dtype[np.float64]]:
    """``positions`` for ``x`` of shape ``(batch, seq, d_model)``: ``(seq,)``, ``(1, seq)`` or ``(batch, seq)``."""
    batch, seq = x.shape[0], x.shape[1]
    array = positions_array(positions, seq, d_model, "d_model", "seq = x.shape[1]")
    if array.ndim > 2 or (array.ndim == 2 and array.shape[0] not in (1, batch)):
        raise ValueError(
            f"positions must have shape (seq,), (1, seq) or (batch, seq) = ({batch}, {seq}) for x of shape "
            f"{tuple(x.shape)}, got {array.shape}"
        )
    return array


def offset_tensor(offset: object, *, causal: bool, device: torch.device) -> torch.Tensor:
    """``offset`` (an int or a 0-d integer tensor) checked and held in a 0-d int64 tensor on ``device``.

    ``|offset| <= 2**52``, and ``offset >= 0`` when ``causal`` (with a negative offset query 0 sees no key).
    """
    value = check_int(offset_as_int(offset), "offset", minimum=-MAX_OFFSET, maximum=MAX_OFFSET)
    if causal and value < 0:
        raise ValueError(f"offset must be >= 0 when causal=True, got {value}: query 0 would see no key")
    return torch.tensor(value, dtype=torch.int64, device=device)
