"""What every adapter shares: the record of one implementation and array conversions.

An adapter is a function ``build()`` that imports its library, constructs what a model would construct
(a module, a table), and returns a plain function on NumPy arrays. The runner calls ``build()`` afresh for
every check, so state a library keeps in an object starts clean each time; state it keeps in the library
itself (a module-level cache) does not, as in a real process.

Rotary adapters return ``rotate(x, positions, dtype)``: ``x`` is ``(seq, head_dim)`` float64, ``positions``
``(seq,)`` int64, ``dtype`` one of :data:`DTYPES`: ``"float32"`` or ``"bfloat16"`` (the dtype the library is
fed, as a model in that dtype would feed it, the library's objects as built), or :data:`BFLOAT16_CAST`
(fed bfloat16, and the object that holds the library's frequencies or tables cast to bfloat16 the way the
library casts a model: ``module.to(torch.bfloat16)``, MLX's ``set_dtype``, a tree map over Equinox's arrays).
The result is the rotated ``x`` as float64. Conversion adapters return
``convert(weight)``, ALiBi adapters ``slopes(n_heads)``, T5 adapters ``buckets(relative_position,
bidirectional=..., num_buckets=..., max_distance=...)``, in the forms :mod:`posenc.testing` documents.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "BFLOAT16_CAST",
    "DTYPES",
    "HEAD_DIM",
    "Implementation",
    "by_offset",
    "fed_dtype",
    "from_torch",
    "import_allowing",
    "to_torch",
]

HEAD_DIM = 32
"""Width of every rotary head the adapters build: 16 pairs, the fastest (frequency 1) among them."""

BFLOAT16_CAST = "bfloat16, model cast"
"""The dtype argument of a rotary adapter for a model cast to bfloat16 after it was built, and fed bfloat16."""
DTYPES = ("float32", "bfloat16", BFLOAT16_CAST)
"""The values a rotary adapter's ``dtype`` takes."""

RotateAt = Callable[[NDArray[np.float64], int, str], NDArray[np.float64]]


@dataclass(frozen=True)
class Implementation:
    """One implementation under audit.

    Parameters
    ----------
    library : str
        The distribution's name on the package registry (its version is read from the installed package).
    function : str
        What the adapter calls, as the library names it.
    kind : {"rotary", "scaled", "conversion", "slopes", "buckets"}
        Which checks apply: ``"scaled"`` is a rotary implementation configured with a scaling (YaRN, llama3,
        longrope), checked against ``posenc.rotate`` with ``scaling`` and ``base``.
    build : callable
        ``build()`` imports the library and returns the adapter function described in this module.
    layout : {"interleaved", "halves"}, optional
        The pairing of a rotary implementation (or the target layout of a conversion).
    source : str
        The file of the library that holds the code called, for the explanations.
    scaling : Mapping or None, optional
        A ``"scaled"`` row's ``rope_parameters`` dict, as its model's config writes it (without
        ``rope_theta``), the scaling the adapter configures the library with.
    base : float, default 10000.0
        A ``"scaled"`` row's ``rope_theta``.
    """

    library: str
    function: str
    kind: str
    build: Callable[[], Callable[..., Any]]
    layout: str | None = None
    source: str = ""
    scaling: Mapping[str, Any] | None = None
    base: float = 10000.0

    @property
    def version(self) -> str:
        """The installed version of the library."""
        return _installed_version(self.library)

    @property
    def name(self) -> str:
        """``library version: function``, the row label of the audit table."""
        return f"{self.library} {self.version}: {self.function}"


@functools.cache
def _installed_version(distribution: str) -> str:
    """``importlib.metadata.version``, looked up once per distribution (each lookup scans site-packages)."""
    return importlib.metadata.version(distribution)


def fed_dtype(dtype: str) -> str:
    """The dtype of the input for a rotary adapter's ``dtype`` argument: ``"float32"`` or ``"bfloat16"``."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    return "float32" if dtype == "float32" else "bfloat16"


def to_torch(x: NDArray[np.float64], dtype: str) -> Any:
    """``x`` as a torch tensor of the dtype fed for ``dtype`` (one of :data:`DTYPES`)."""
    import torch

    return torch.tensor(np.asarray(x, dtype=np.float32), dtype=getattr(torch, fed_dtype(dtype)))


def from_torch(t: Any) -> NDArray[np.float64]:
    """A torch tensor of any floating dtype as a float64 array."""
    return np.asarray(t.detach().double().cpu().numpy(), dtype=np.float64)


def by_offset(rotate_at: RotateAt) -> Callable[[NDArray[np.float64], NDArray[np.int64], str], NDArray[np.float64]]:
    """A ``rotate(x, positions, dtype)`` for a library that only takes a start offset.

    Each run of consecutive positions ``p, p + 1, ...`` becomes one call ``rotate_at(rows, p, dtype)``, the
    way a decoding loop calls such a library with the length of its cache as the offset.
    """

    def rotate(x: NDArray[np.float64], positions: NDArray[np.int64], dtype: str) -> NDArray[np.float64]:
        positions = np.asarray(positions, dtype=np.int64)
        out = np.empty_like(x, dtype=np.float64)
        breaks = np.flatnonzero(np.diff(positions) != 1) + 1
        for run in np.split(np.arange(len(positions)), breaks):
            out[run] = rotate_at(x[run], int(positions[run[0]]), dtype)
        return out

    return rotate


def import_allowing(name: str, *allowed: str) -> Any:
    """Import module ``name``; warnings whose message contains one of ``allowed`` are recorded, not shown.

    Any other warning is issued again as it came, so that pytest's ``filterwarnings = error`` still fails
    on it. x-transformers, for one, decorates a function with ``torch.jit.script`` at import, which
    PyTorch 2.13 deprecates with a DeprecationWarning.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(name)
    for warning in caught:
        if not any(text in str(warning.message) for text in allowed):
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return module
