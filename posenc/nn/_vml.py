"""Settle oneMKL's choice of kernel for PyTorch's vectorised maths before two threads make it at once.

On the CPU, PyTorch computes ``cos``, ``sin``, ``exp``, ``log``, ``sqrt`` and the other functions of
:data:`VML_FUNCTIONS` on a contiguous float32 or float64 tensor with oneMKL's vector maths library (VML), asking
for its high-accuracy kernels (``aten/src/ATen/cpu/vml.h``); a call of some ten thousand elements oneMKL splits
over its threads itself. oneMKL settles its kernels lazily, and a process's first split call can run a
low-accuracy kernel on one thread's part, for that call only: pytorch/pytorch#188792, reported for oneMKL 2024.2,
the version in the ``torch==2.13.0`` CPU wheel. Measured here, after CI failed chapter 7 on fd403ce: in about one
fresh process in six, the first ``torch.cos`` of the float64 angles of a ``RotaryEmbedding(64)`` table of 1012
positions was off by up to ``6.8e-9`` on the second thread's half, where float64 is good to ``1e-16``; the next
call was right. Only a process's first split call was hit (tests/vml_first_calls.py), whichever function it was.

:func:`settle_vml_dispatch` calls each function once, on one element of each dtype, on the calling thread (one
element is never split across threads), so that oneMKL has made every choice before any call that is split. That
is the fix pytorch/pytorch#188791 proposes inside PyTorch. :mod:`posenc.nn` calls it when imported; a process
that already made a split first call before importing it has only that call's result to doubt.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

VML_FUNCTIONS: tuple[Callable[[torch.Tensor], torch.Tensor], ...] = (
    torch.acos,
    torch.asin,
    torch.atan,
    torch.cos,
    torch.erf,
    torch.erfc,
    torch.erfinv,
    torch.exp,
    torch.log,
    torch.log10,
    torch.log2,
    torch.sin,
    torch.sqrt,
    torch.tan,
    torch.tanh,
    torch.trunc,
)
"""The unary functions that ``torch==2.13.0`` computes with oneMKL's VML (``IMPLEMENT_VML_MKL`` in its vml.h)."""


def settle_vml_dispatch() -> None:
    """Call each of :data:`VML_FUNCTIONS` once on a one-element float32 and float64 CPU tensor.

    Nothing to do in a PyTorch built without oneMKL. Costs well under a millisecond; calling it again is harmless.
    """
    if not torch.backends.mkl.is_available():  # type: ignore[no-untyped-call]
        return
    with torch.inference_mode():
        for dtype in (torch.float32, torch.float64):
            half = torch.full((1,), 0.5, dtype=dtype)
            for function in VML_FUNCTIONS:
                function(half)
