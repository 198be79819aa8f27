"""flash-linear-attention's naive PyTorch references, loaded without the Triton kernels beside them.

``fla-core`` (pinned in requirements.txt) ships, for each attention it implements, a ``naive.py`` in plain PyTorch
(and einops) next to Triton kernels. ``import fla.ops.forgetting_attn.naive`` runs ``fla/ops/__init__.py``
first, which imports every kernel and so ``triton``, which this CPU build of PyTorch does not bring:
``ModuleNotFoundError: No module named 'triton'``. :func:`naive` loads one ``naive.py`` file by its path in the
installed package instead, so that its own imports (torch and einops) are all that run. Nothing of fla is copied
here. Used by the parity tests of tests/test_content_*.py.
"""

from __future__ import annotations

import importlib.util
from importlib.metadata import version
from pathlib import Path
from types import ModuleType

FLA_VERSION = "0.6.0"
"""The fla-core release requirements.txt pins; the parity figures in the tests are for it."""


def naive(op: str) -> ModuleType:
    """``fla/ops/<op>/naive.py`` of the installed fla-core, loaded as a module of its own."""
    assert version("fla-core") == FLA_VERSION, f"fla-core {version('fla-core')} installed, {FLA_VERSION} pinned"
    package = importlib.util.find_spec("fla")  # finds the package without running its __init__
    assert package is not None and package.submodule_search_locations, "fla-core is not installed"
    path = Path(next(iter(package.submodule_search_locations))) / "ops" / op / "naive.py"
    spec = importlib.util.spec_from_file_location(f"fla_naive_{op}", path)
    assert spec is not None and spec.loader is not None, f"no {path}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
