"""Run the unit tests and every chapter again as a processor with fewer vector instructions would.

NumPy and PyTorch choose their SIMD kernels when they start, from the instructions the processor has, and
the kernels of one function do not all round alike: NumPy's float64 ``power``, ``exp`` and ``log`` differ
by a unit in the last place between its AVX-512 and AVX2 kernels, its float32 ``sin``, ``cos`` and ``exp``
between AVX2 and the baseline, PyTorch's vectorised float32 ``log`` between its AVX-512 and AVX2 builds,
and float32 sums change order with the vector width. A test or a hidden assert that depends on such a last
bit passes on the machine that wrote it and fails on another one; CI, which runs on one machine, cannot
see that. This script makes the machine it runs on behave like older ones, one level at a time:

``avx2``
    NumPy's AVX-512 kernels disabled (``NPY_DISABLE_CPU_FEATURES``), PyTorch's dispatch capped at AVX2
    (``ATEN_CPU_CAPABILITY``), MKL and oneDNN likewise. Run when the processor has AVX-512.
``baseline``
    NumPy's AVX2 and AVX-512 kernels disabled, PyTorch's plain (non-vectorised) kernels. Run when the
    processor has AVX2.

At each level it runs ``pytest`` on the unit tests and doctests and on every chapter (nbval), as ``make unit``
and ``make notebooks`` do (less the gate tests, which build throwaway books and compute nothing), and exits
non-zero if any run fails. (Numbers from training move with the kernels by far more than a last bit; the
training claims carry margins of three times their spread under posenc_book.robustness's perturbation, which
``tests/claim_spread.py calibrate`` compares with these levels.) It needs an x86-64 Linux machine (it reads
``/proc/cpuinfo``); elsewhere it says so and exits 0. Usage: ``make check-portable``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# NumPy's dispatch targets above its x86-64 baseline, by name (names outside its build are an error).
NUMPY_AVX512 = "X86_V4 AVX512_ICL AVX512_SPR"
NUMPY_AVX2_AND_ABOVE = f"X86_V3 {NUMPY_AVX512}"

LEVELS = {
    "avx2": {
        "needs": "avx512f",
        "env": {
            "NPY_DISABLE_CPU_FEATURES": NUMPY_AVX512,
            "ATEN_CPU_CAPABILITY": "avx2",
            "MKL_ENABLE_INSTRUCTIONS": "AVX2",
            "ONEDNN_MAX_CPU_ISA": "AVX2",
        },
    },
    "baseline": {
        "needs": "avx2",
        "env": {
            "NPY_DISABLE_CPU_FEATURES": NUMPY_AVX2_AND_ABOVE,
            "ATEN_CPU_CAPABILITY": "default",
            "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
            "ONEDNN_MAX_CPU_ISA": "SSE41",
        },
    },
}

RUNS = {
    "unit tests and doctests": [
        "-m",
        "pytest",
        "--doctest-modules",
        "posenc",
        "book/posenc_book",
        "tests",
        # the gate tests build throwaway books to see a broken one rejected: nothing in them computes a number
        "-m",
        "not browser and not gates",
        "-q",
        "-p",
        "no:cacheprovider",
    ],
    "chapters": ["-m", "pytest", "--nbval-lax", "--nbval-current-env", "-q", "-p", "no:cacheprovider", "notebooks/"],
}


def cpu_flags() -> set[str]:
    """The instruction-set flags of the first processor in /proc/cpuinfo (empty if there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def what_the_libraries_use(env: dict[str, str]) -> str:
    """One line: the kernels NumPy and PyTorch select under ``env``, as they report them."""
    probe = (
        "import numpy, torch\n"
        "from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__\n"
        "on = [t for t in __cpu_dispatch__ if __cpu_features__.get(t)]\n"
        "print('NumPy kernels up to', on[-1] if on else 'its baseline', '| PyTorch', "
        "torch.backends.cpu.get_cpu_capability())"
    )
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    return result.stdout.strip()


def main() -> int:
    flags = cpu_flags()
    levels = [name for name, level in LEVELS.items() if level["needs"] in flags]
    if not levels:
        print("check-portable: no x86-64 vector level below this processor's to emulate; nothing to do")
        return 0
    failed = []
    for name in levels:
        # Each level compiles its own kernels, as a machine of that level would: torch.compile's caches (under
        # TORCHINDUCTOR_CACHE_DIR) do not key on the capped ATen dispatch, and a graph compiled by an uncapped
        # run gave wrong numbers when a capped run loaded it (tests/test_flex.py's compiled FlexAttention, off
        # by 0.9, at level avx2; right with a fresh cache or with the FX graph and AOT autograd caches off).
        with tempfile.TemporaryDirectory(prefix=f"check-portable-{name}-") as compiled:
            env = {**os.environ, **LEVELS[name]["env"], "TORCHINDUCTOR_CACHE_DIR": compiled}
            print(f"\n=== level {name}: {what_the_libraries_use(env)}", flush=True)
            for what, args in RUNS.items():
                start = time.monotonic()
                code = subprocess.run([sys.executable, *args], cwd=ROOT, env=env).returncode
                print(f"=== level {name}, {what}: exit {code} in {time.monotonic() - start:.0f} s", flush=True)
                if code:
                    failed.append(f"{name}: {what}")
    if failed:
        print("check-portable failed:", "; ".join(failed))
        return 1
    print(f"check-portable: every run passed at level(s) {', '.join(levels)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
