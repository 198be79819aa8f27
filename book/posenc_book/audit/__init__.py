"""The audit of chapters 13 and 14: posenc.testing's checks run against the positional-encoding code people run.

One module per library holds its adapters: a few lines each that call the library's own rotary, ALiBi or
T5 code and hand back NumPy arrays in the shapes the checks of :mod:`posenc.testing` take. Each adapter
imports its library only when it is built, so importing this package imports none of them.

- :mod:`posenc_book.audit.common`: the :class:`~posenc_book.audit.common.Implementation` record and the
  small conversions every adapter shares;
- :mod:`posenc_book.audit.hf_transformers`, :mod:`posenc_book.audit.lucidrains_rotary`,
  :mod:`posenc_book.audit.xtransformers`, :mod:`posenc_book.audit.meta_llama`,
  :mod:`posenc_book.audit.apple_mlx`, :mod:`posenc_book.audit.equinox_jax`: the adapters;
- :mod:`posenc_book.audit.runner`: :func:`~posenc_book.audit.runner.run_audit`, which runs every check
  that applies to every implementation and returns the verdicts with the errors it measured.
"""

from posenc_book.audit.common import Implementation
from posenc_book.audit.runner import PROPERTIES, PYTORCH_LIBRARIES, Audit, Cell, all_implementations, run_audit

__all__ = [
    "PROPERTIES",
    "PYTORCH_LIBRARIES",
    "Audit",
    "Cell",
    "Implementation",
    "all_implementations",
    "run_audit",
]
