"""Checks of the tensors the PyTorch modules of :mod:`posenc.nn` receive (the other checks: ``posenc._validation``).

*Values stay on the device.* The type, dtype and shape of a tensor are checked on the host, where they are
known. Its values (a tensor ``offset`` at least 0, finite ``positions``) are checked by :func:`check_on_device`,
which reads nothing on the host: on the CPU the check is immediate and raises ``ValueError`` (or the error
asked for) as the host checks do; on an accelerator it is a device assertion that reports at the next
synchronisation, as an index out of range does, and leaves the device unusable; when compiling it is
skipped. Nothing here calls ``.item()`` or ``.tolist()`` on a tensor or copies one to the host
(``tests/test_host_reads.py``).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable

import numpy as np
import torch

from posenc._validation import MAX_EXACT_INTEGER, MAX_OFFSET, check_exact_integers, check_int, check_table_size

LONG_CONTEXT_HINT = "use score_mod() with torch.nn.attention.flex_attention, which never builds the bias tensor"
"""Where the size guard of the dense ALiBi and T5 biases points for long contexts."""

_DEVICE_MESSAGE_LENGTH = 250
"""A CUDA device assertion carries at most 255 characters of its message (``_assert_async_msg_cuda``)."""


def check_on_device(condition: torch.Tensor, message: str, error: type[Exception] = ValueError) -> None:
    """Refuse a call unless the 0-d bool tensor ``condition`` holds, without reading it on the host.

    On the CPU, ``error(message)`` is raised at once; on an accelerator ``torch._assert_async`` queues a device
    assertion that fails at the next synchronisation with ``message`` (shortened to 250 characters); on the meta
    device (no values) and when compiling or exporting (where the checks are documented as skipped) nothing
    is checked.
    """
    if torch.compiler.is_compiling() or condition.device.type == "meta":
        return
    if condition.device.type != "cpu":
        torch._assert_async(condition, message[:_DEVICE_MESSAGE_LENGTH])
        return
    try:
        torch._assert_async(condition, message)
    except RuntimeError as failure:  # the CPU kernel's refusal, raised before any other work
        raise error(message) from failure


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


def _on_device(tensor: torch.Tensor, device: torch.device | None, name: str) -> torch.Tensor:
    """``tensor`` on ``device`` (``None``: where it is); a tensor on the meta device serves only a meta computation."""
    if tensor.device.type == "meta" and (device is None or device.type != "meta"):
        raise ValueError(f"{name} must hold values: got a tensor on the meta device")
    return tensor if device is None else tensor.to(device)


def check_offset(
    offset: object,
    name: str = "offset",
    *,
    minimum: int,
    maximum: int,
    accepted: str | None = None,
    device: torch.device | None = None,
) -> int | torch.Tensor:
    """``offset``, an int or a 0-d integer tensor (``cache_position[0]``), in ``[minimum, maximum]``.

    An int is checked and returned as it is. A tensor's type and shape are checked on the host and its value on
    its device (:func:`check_on_device`); it is returned as a 0-d int64 tensor on ``device`` (``None``: its own).
    """
    if not isinstance(offset, torch.Tensor):
        return check_int(offset, name, minimum=minimum, maximum=maximum, accepted=accepted)
    described = accepted or f"an int in [{minimum}, {maximum}]"
    kinds = f"{name} must be an int or a 0-d integer tensor"
    if offset.is_floating_point() or offset.is_complex() or offset.dtype == torch.bool:
        raise TypeError(f"{kinds}, got a tensor of dtype {offset.dtype}")
    if offset.ndim != 0:
        raise ValueError(
            f"{kinds}, got a tensor of shape {tuple(offset.shape)} (a (seq,) cache_position is positions=, "
            "or pass its first entry)"
        )
    value = _on_device(offset, device, name).to(torch.int64)
    check_on_device((value >= minimum) & (value <= maximum), f"{name} must be {described}: the tensor is not")
    return value


def positions_tensor(
    positions: object, seq: int, width: int, width_name: str, what: str, device: torch.device
) -> torch.Tensor:
    """``positions`` (tensor, array or nested sequence of finite reals, shape ``(..., seq)``) as a tensor on ``device``.

    A tensor keeps its dtype (integer or floating) and its values stay on the device: their finiteness is
    checked there (:func:`check_on_device`). Anything else is host data, parsed by NumPy (ints stay ints,
    floats become float64) and checked on the host. ``what`` describes where ``seq`` comes from, for the
    message; ``width`` (features per position) bounds the size of the table that will be built (``width_name``
    names it).
    """
    accepted = "a (seq,), (1, seq) or (batch, seq) tensor or array of finite real positions"
    if isinstance(positions, torch.Tensor):
        if positions.is_complex() or positions.dtype == torch.bool:
            raise TypeError(f"positions must be {accepted}, got a tensor of dtype {positions.dtype}")
        tensor = positions.detach()
    else:
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
        if np.issubdtype(array.dtype, np.floating):
            array = array.astype(np.float64)
            if not np.all(np.isfinite(array)):
                raise ValueError(f"positions must be {accepted}: found NaN or infinity")
        check_exact_integers(array, "positions", accepted)
        tensor = torch.from_numpy(np.ascontiguousarray(array))
    if tensor.ndim == 0 or tensor.shape[-1] != seq:
        raise ValueError(
            f"positions must have one entry per row of x along its last axis ({what} = {seq}), "
            f"got shape {tuple(tensor.shape)}"
        )
    check_table_size(tensor.numel(), width, "positions.size", width_name)
    tensor = _on_device(tensor, device, "positions")
    if tensor.is_floating_point() and isinstance(positions, torch.Tensor):
        check_on_device(torch.isfinite(tensor).all(), f"positions must be {accepted}: found NaN or infinity")
    elif tensor.dtype == torch.int64 and isinstance(positions, torch.Tensor):
        check_on_device(exact_in_float64(tensor), f"positions must be {accepted}: {_NOT_EXACT}")
    return tensor


_NOT_EXACT = "integers beyond 2**53 in magnitude do not convert to float64 exactly"


def exact_in_float64(tensor: torch.Tensor) -> torch.Tensor:
    """0-d bool tensor: every entry of the int64 ``tensor`` lies in ``[-2**53, 2**53]``, where float64 is exact."""
    return ((tensor >= -MAX_EXACT_INTEGER) & (tensor <= MAX_EXACT_INTEGER)).all()


def batch_positions(positions: object, x: torch.Tensor, d_model: int) -> torch.Tensor:
    """``positions`` for ``x`` of shape ``(batch, seq, d_model)``: ``(seq,)``, ``(1, seq)`` or ``(batch, seq)``."""
    batch, seq = x.shape[0], x.shape[1]
    tensor = positions_tensor(positions, seq, d_model, "d_model", "seq = x.shape[1]", x.device)
    if tensor.ndim > 2 or (tensor.ndim == 2 and tensor.shape[0] not in (1, batch)):
        raise ValueError(
            f"positions must have shape (seq,), (1, seq) or (batch, seq) = ({batch}, {seq}) for x of shape "
            f"{tuple(x.shape)}, got {tuple(tensor.shape)}"
        )
    return tensor


def offset_tensor(offset: object, *, causal: bool, device: torch.device) -> torch.Tensor:
    """``offset`` (an int or a 0-d integer tensor) checked and held in a 0-d int64 tensor on ``device``.

    ``|offset| <= 2**52``, and ``offset >= 0`` when ``causal`` (with a negative offset query 0 sees no key); a
    tensor's value is checked on its device (:func:`check_offset`).
    """
    minimum = 0 if causal else -MAX_OFFSET
    if isinstance(offset, torch.Tensor):
        accepted = f"a 0-d integer tensor in [{minimum}, 2**52]" + (
            " (causal=True: query 0 sees key 0)" if causal else ""
        )
        checked = check_offset(offset, minimum=minimum, maximum=MAX_OFFSET, accepted=accepted, device=device)
        assert isinstance(checked, torch.Tensor)  # for mypy: a tensor stays a tensor
        return checked
    value = check_int(offset, "offset", minimum=-MAX_OFFSET, maximum=MAX_OFFSET)
    if causal and value < 0:
        raise ValueError(f"offset must be >= 0 when causal=True, got {value}: query 0 would see no key")
    # torch.full, not torch.tensor: filled on the device, where torch.tensor would copy a host value there (and wait)
    return torch.full((), value, dtype=torch.int64, device=device)


class HostConstants:
    """Float64 tensors a module computes once (its frequencies), kept out of its buffers, on the module's device.

    Out of the buffers, ``module.half()`` cannot round them; the module's ``_apply`` calls :meth:`follow`, so that
    ``module.to(device)`` moves them all the same. A call on another device gets a copy, made once: on CUDA from
    pinned memory without waiting for the device (a plain copy from the host would synchronise, the very thing
    :mod:`posenc.nn` avoids); when compiling, in the graph instead, leaving this object unchanged (a graph
    reads only the tensors that :meth:`follow` placed, so that no eager call makes it compile again).
    """

    def __init__(self, **tensors: torch.Tensor) -> None:
        self._tensors = tensors
        self._copies: dict[tuple[str, torch.device], torch.Tensor] = {}

    def follow(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Move every tensor to the device that ``fn`` (``nn.Module._apply``'s function) moves tensors to."""
        for name, tensor in self._tensors.items():
            device = fn(torch.empty(0, dtype=torch.float64, device=tensor.device)).device
            if device != tensor.device:
                self._tensors[name] = tensor.to(device)

    def on(self, name: str, device: torch.device) -> torch.Tensor:
        """The tensor ``name`` on ``device``."""
        tensor = self._tensors[name]
        if tensor.device == device:
            return tensor
        if torch.compiler.is_compiling():
            return tensor.to(device)
        copy = self._copies.get((name, device))
        if copy is None:
            if device.type == "cuda" and tensor.device.type == "cpu":
                copy = tensor.pin_memory().to(device, non_blocking=True)
            else:
                copy = tensor.to(device)
            self._copies[(name, device)] = copy
        return copy


def check_float_tensor(x: object, name: str, shape: str, *, min_ndim: int = 1) -> torch.Tensor:
    """Check that ``x`` is a floating tensor with at least ``min_ndim`` axes; ``shape`` describes it in messages."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a floating-point torch.Tensor of shape {shape}, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor of shape {shape}, got dtype {x.dtype}")
    if x.ndim < min_ndim:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(x.shape)}")
    return x
