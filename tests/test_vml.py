"""posenc.nn settles oneMKL's kernels on import, so that a process's first split VML call is accurate.

The bug (pytorch/pytorch#188792, oneMKL 2024.2 in torch 2.13.0's CPU wheel): the first call of a process that
oneMKL's VML splits across threads can run a low-accuracy kernel on one thread's part. Only that call, once per
process, so each check needs fresh processes: tests/vml_first_calls.py ``bare`` (without posenc.nn) printed a
function in 9 of 56 processes on the build machine (always the first one it calls, ``acos``, float64, off by about
1e6 ulp), ``settled`` in none of 60. Ten processes catch a regression with probability about 0.8 at that rate;
every CI run tries again.
"""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from posenc.nn import _vml

FIRST_CALLS = Path(__file__).with_name("vml_first_calls.py")


def first_calls(mode: str) -> str:
    """What tests/vml_first_calls.py prints in a fresh interpreter: the functions whose first call was off."""
    result = subprocess.run(
        [sys.executable, str(FIRST_CALLS), mode], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.skipif(not torch.backends.mkl.is_available(), reason="a PyTorch without oneMKL computes no VML")
def test_first_split_vml_call_after_import_is_accurate():
    off = [first_calls("settled") for _ in range(10)]
    assert not any(off), "".join(off)


def test_the_settled_list_is_the_functions_the_first_calls_script_tries():
    names = FIRST_CALLS.read_text().split('NAMES = "')[1].split('"')[0].split()
    assert [function.__name__ for function in _vml.VML_FUNCTIONS] == names


def test_settling_changes_no_result():
    x = torch.linspace(0.001, 0.999, 1000, dtype=torch.float64)
    before = [function(x) for function in _vml.VML_FUNCTIONS]
    _vml.settle_vml_dispatch()
    assert all(torch.equal(a, function(x)) for a, function in zip(before, _vml.VML_FUNCTIONS, strict=True))
