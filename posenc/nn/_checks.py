"""Checks of the tensors the PyTorch modules of :mod:`posenc.nn` receive (the other checks: ``posenc._validation``)."""

from __future__ import annotations

import torch


def check_embeddings(x: object, d_model: int) -> int:
    """Check that ``x`` is a floating ``(batch, seq, d_model)`` tensor and return ``seq``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor of shape (batch, seq, {d_model}), got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}")
    if x.ndim != 3 or x.shape[-1] != d_model:
        raise ValueError(f"x must have shape (batch, seq, d_model={d_model}), got {tuple(x.shape)}")
    return x.shape[1]


def check_rotary_input(x: object, head_dim: int) -> int:
    """Check that ``x`` is a floating ``(..., seq, head_dim)`` tensor and return ``seq``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor of shape (..., seq, head_dim={head_dim}), got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor of shape (..., seq, head_dim), got dtype {x.dtype}")
    if x.ndim < 2 or x.shape[-1] != head_dim:
        raise ValueError(f"x must have shape (..., seq, head_dim={head_dim}), got {tuple(x.shape)}")
    return x.shape[-2]
