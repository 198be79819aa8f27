"""Catch a forward pass that reads a tensor's values on the host: what makes a GPU wait in every layer.

A module that runs on an accelerator must keep the values of its tensors there. ``offset.item()``,
``positions.tolist()``, ``positions.cpu().numpy()``, ``if tensor:``, a slice ``table[offset:]`` with a tensor
``offset`` or an operation whose output shape depends on the values (``nonzero``, boolean indexing) each copy
values to the host and wait for every kernel queued before them: one synchronisation per call, in every
attention layer, at every decoding step. :func:`forbid_host_reads` refuses all of them, eagerly, on any device:

- a :class:`torch.overrides.TorchFunctionMode` refuses the Python-level reads (``Tensor.item``, ``tolist``,
  ``numpy``, ``cpu``, ``__array__``, ``__bool__``, ``__int__``, ``__float__``, ``__index__``), which on the CPU
  dispatch no operator at all;
- a :class:`torch.utils._python_dispatch.TorchDispatchMode` refuses the operators that hand a value to the
  host (``aten._local_scalar_dense``, which every conversion of a tensor to a Python number ends in,
  ``aten.equal``, ``aten.is_nonzero``), those whose output shape depends on the values (``nonzero``,
  ``masked_select``, ``unique``, indexing by a boolean mask), and copies from an accelerator to the CPU.

A compiled function cannot run under a dispatch mode (Dynamo skips the frame), so :func:`host_read_backend`
checks the graphs themselves: a ``torch.compile`` backend that lowers each graph to ATen operators (AOTAutograd,
as the ``aot_eager`` backend does), records every forbidden operator in it, and runs it. With
``fullgraph=True`` (no Python between graphs) a compiled call reads nothing on the host exactly when its graphs
hold none of these operators.

Used by ``tests/test_host_reads.py`` on the CPU and by ``make check-gpu`` on CUDA; it is not part of ``posenc``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["HostRead", "forbid_host_reads", "host_read_backend", "FORBIDDEN_OPERATORS"]

PYTHON_READS = frozenset(
    ["item", "tolist", "numpy", "cpu", "__array__", "__bool__", "__int__", "__float__", "__index__", "__complex__"]
)
"""Tensor methods that hand values to Python (or, for ``cpu``, copy them to the host)."""

FORBIDDEN_OPERATORS = frozenset(
    [
        "aten::_local_scalar_dense",
        "aten::item",
        "aten::equal",
        "aten::is_nonzero",
        "aten::allclose",
        "aten::nonzero",
        "aten::masked_select",
        "aten::_unique",
        "aten::_unique2",
        "aten::unique_dim",
        "aten::unique_consecutive",
    ]
)
"""ATen operators (by name, any overload) that read values on the host or wait for them to size an output."""


class HostRead(AssertionError):
    """A forward pass read a tensor's values on the host (the message says how)."""


def _operator_name(func: object) -> str:
    schema = getattr(func, "_schema", None)
    return "" if schema is None else str(schema.name)


def _boolean_index(func: object, args: tuple[Any, ...]) -> bool:
    """Whether ``func`` indexes by a boolean mask (``x[mask]``, ``x[mask] = v``): a ``nonzero`` on the device."""
    if _operator_name(func) not in ("aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_"):
        return False
    masks = [index for index in args[1] if index is not None] if len(args) > 1 else []
    return any(_dtype(index) in (torch.bool, torch.uint8) for index in masks)


def _dtype(value: object) -> torch.dtype | None:
    """The dtype of a tensor, or of the example value of a graph node."""
    if isinstance(value, torch.fx.Node):
        value = value.meta.get("val")
    return value.dtype if isinstance(value, torch.Tensor) else None


def _to_host(func: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``func`` copies a tensor from an accelerator to the CPU (``_to_copy`` or ``copy_``)."""
    name = _operator_name(func)
    if name == "aten::_to_copy":
        source, device = args[0], kwargs.get("device")
        return device is not None and torch.device(device).type == "cpu" and source.device.type not in ("cpu", "meta")
    if name == "aten::copy_":
        target, source = args[0], args[1]
        return (
            isinstance(source, torch.Tensor)
            and target.device.type == "cpu"
            and source.device.type not in ("cpu", "meta")
        )
    return False


class _PythonReads(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        name = getattr(func, "__name__", "")
        if name in PYTHON_READS and args and isinstance(args[0], torch.Tensor):
            raise HostRead(f"Tensor.{name}() read a tensor of shape {tuple(args[0].shape)} on the host")
        return func(*args, **(kwargs or {}))


class _OperatorReads(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if _operator_name(func) in FORBIDDEN_OPERATORS or _boolean_index(func, args):
            raise HostRead(f"{func} reads values on the host or sizes its output by them")
        if _to_host(func, args, kwargs):
            raise HostRead(f"{func} copies a tensor from the accelerator to the CPU")
        return func(*args, **kwargs)


@contextmanager
def forbid_host_reads() -> Iterator[None]:
    """Within the block, any host read of a tensor's values raises :class:`HostRead` (eager code only).

    Examples
    --------
    >>> offset = torch.tensor(3)
    >>> with forbid_host_reads():
    ...     int(offset)
    Traceback (most recent call last):
    ...
    posenc_book.host_reads.HostRead: Tensor.__int__() read a tensor of shape () on the host
    """
    with _PythonReads(), _OperatorReads():
        yield


def host_read_backend(found: list[str]) -> Callable[..., Any]:
    """A ``torch.compile`` backend that appends to ``found`` each forbidden operator of the graphs it compiles.

    The graphs run as AOTAutograd traced them (the ``aot_eager`` backend), forward and backward alike.
    """
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def record(graph: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        for node in graph.graph.nodes:
            if node.op != "call_function":
                continue
            name = _operator_name(node.target)
            if name in FORBIDDEN_OPERATORS or _boolean_index(node.target, node.args):
                found.append(name)
            elif name == "aten::_to_copy" and node.kwargs.get("device") is not None:
                source = node.args[0].meta.get("val")
                to_cpu = torch.device(node.kwargs["device"]).type == "cpu"
                if to_cpu and isinstance(source, torch.Tensor) and source.device.type not in ("cpu", "meta"):
                    found.append(f"{name} to the CPU")
        return make_boxed_func(graph.forward)

    return aot_autograd(fw_compiler=record, bw_compiler=record)
