"""Argument checks shared by the PyTorch modules of :mod:`posenc.nn`."""

from __future__ import annotations

import numbers

import torch


def check_embeddings(x, d_model: int) -> int:
    """Check that ``x`` is a floating ``(batch, seq, d_model)`` tensor and return ``seq``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor of shape (batch, seq, {d_model}), got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}")
    if x.ndim != 3 or x.shape[-1] != d_model:
        raise ValueError(f"x must have shape (batch, seq, d_model={d_model}), got {tuple(x.shape)}")
    return x.shape[1]


def check_dropout(dropout) -> float:
    if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real):
        raise TypeError(f"dropout must be a real number in [0, 1), got {type(dropout).__name__} {dropout!r}")
    dropout = float(dropout)
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be a real number in [0, 1), got {dropout}")
    return dropout


def check_rotary_input(x, head_dim: int) -> int:
    """Check that ``x`` is a floating ``(..., seq, head_dim)`` tensor and return ``seq``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor of shape (..., seq, head_dim={head_dim}), got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor of shape (..., seq, head_dim), got dtype {x.dtype}")
    if x.ndim < 2 or x.shape[-1] != head_dim:
        raise ValueError(f"x must have shape (..., seq, head_dim={head_dim}), got {tuple(x.shape)}")
    return x.shape[-2]
