"""What every check of :mod:`posenc.testing` shares: calling an implementation, reading what it returns."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from posenc._validation import (
    RotaryLayout,
    is_int,
)

MAX_POSITION = 2**24
"""Largest position a rotary check visits: every integer up to it is exact in float32."""

MAX_CHECK_ELEMENTS = 2**22
"""Largest array (elements) a check builds, so that every check runs in well under a second."""


MAX_SEED = 2**32 - 1
"""Largest seed a check accepts (the checks draw their inputs from ``np.random.default_rng(seed)``)."""

Implementation = Callable[..., Any]
"""What a check calls: a function, or a ``torch.nn.Module`` (callable, and typed by torch)."""


def check_implementation(fn: object, name: str) -> None:
    if not callable(fn):
        raise TypeError(f"{name} must be a callable (a function or a torch.nn.Module), got {type(fn).__name__}")


# --- Calling an implementation and reading what it returns ------------------------------------------------


def is_torch_module(fn: object) -> bool:
    torch = sys.modules.get("torch")  # a Module can only exist if torch is already imported
    return torch is not None and isinstance(fn, torch.nn.Module)


def as_tensor(array: NDArray[Any], dtype_name: str) -> Any:  # a torch.Tensor, torch not imported here
    torch = sys.modules["torch"]
    return torch.as_tensor(np.ascontiguousarray(array), dtype=getattr(torch, dtype_name))


def call_implementation(fn: Implementation, description: str, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; any exception it raises becomes an AssertionError that names the call."""
    try:
        return fn(*args, **kwargs)
    except AssertionError:
        raise
    except Exception as error:  # the implementation under test failed: that is the check's finding
        raise AssertionError(f"{description} raised {type(error).__name__}: {error}") from error


def as_array(result: Any, description: str) -> NDArray[np.float64]:
    """The result of an implementation as a float64 NumPy array (tensors of any dtype accepted)."""
    if hasattr(result, "detach") and hasattr(result, "cpu"):  # a torch tensor, without importing torch
        result = result.detach().cpu()
        result = result.double() if result.is_floating_point() else result
        result = result.numpy()
    try:
        array = np.asarray(result)
        if array.dtype == object or np.iscomplexobj(array):
            raise TypeError(f"dtype {array.dtype}")
        return array.astype(np.float64)
    except (TypeError, ValueError) as error:
        raise AssertionError(f"{description} returned {type(result).__name__}, not a real array ({error})") from error


def expect_shape(array: NDArray[Any], shape: tuple[int, ...], description: str) -> None:
    if array.shape != shape:
        raise AssertionError(f"{description} returned shape {array.shape}, expected {shape}")


def rotate_with(
    fn: Implementation, x: NDArray[np.float64], positions: NDArray[np.float64], description: str
) -> NDArray[np.float64]:
    """Call a rotary implementation ``fn(x, positions)`` (a Module gets ``fn(x, positions=positions)``)."""
    if is_torch_module(fn):
        out = call_implementation(fn, description, as_tensor(x, "float32"), positions=as_tensor(positions, "float64"))
    else:
        out = call_implementation(fn, description, x.copy(), positions.copy())
    out = as_array(out, description)
    expect_shape(out, x.shape, description)
    return out


def rotate_at_offset(fn: Implementation, x: NDArray[np.float64], offset: int, description: str) -> NDArray[np.float64]:
    """Call a rotary implementation ``fn(x, offset=offset)`` (positions ``offset, offset + 1, ...``)."""
    x_in = as_tensor(x, "float32") if is_torch_module(fn) else x.copy()
    out = as_array(call_implementation(fn, description, x_in, offset=offset), description)
    expect_shape(out, x.shape, description)
    return out


def pairs_of(array: NDArray[np.float64], layout: RotaryLayout) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The first and second member of every rotated pair of the last axis, in pair order."""
    half = array.shape[-1] // 2
    if layout == "interleaved":
        return array[..., 0::2], array[..., 1::2]
    return array[..., :half], array[..., half:]


def show(values: NDArray[Any]) -> str:
    return np.array2string(values, precision=4, separator=", ", threshold=12)


def wrap_angle(angle: NDArray[np.float64]) -> NDArray[np.float64]:
    """Angles folded into [-pi, pi)."""
    folded: NDArray[np.float64] = (angle + np.pi) % (2 * np.pi) - np.pi
    return folded


def check_int_sequence(values: object, name: str, *, low: int, high: int) -> NDArray[np.int64]:
    """A 1-D sequence of 1 to 64 ints in ``[low, high]``, as an int64 array."""
    accepted = f"a non-empty sequence of at most 64 ints in [{low}, {high}]"
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__") or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be {accepted}, got {type(values).__name__} {values!r}")
    items = list(values)
    if not 0 < len(items) <= 64:
        raise ValueError(f"{name} must be {accepted}, got {len(items)} values")
    for value in items:
        if not is_int(value):
            raise TypeError(f"{name} must be {accepted}, got an element {type(value).__name__} {value!r}")
        if not low <= int(value) <= high:
            raise ValueError(f"{name} must be {accepted}, got {int(value)}")
    return np.array([int(value) for value in items], dtype=np.int64)
