"""Each VML function's first call split across two threads, against its second call (pytorch/pytorch#188792).

Run by tests/test_vml.py in a fresh process: ``python tests/vml_first_calls.py settled`` imports posenc.nn first
(which settles oneMKL's dispatch, posenc/nn/_vml.py), ``python tests/vml_first_calls.py bare`` does not (the bug:
in about one process in six here, the first call is computed by a low-accuracy kernel on one thread's part).
Prints one line per function and dtype whose first call differs from its second by more than 64 units in the last
place.
"""

import sys

import torch

# Sixteen functions named here, not imported from posenc.nn._vml: importing posenc.nn settles the dispatch.
NAMES = "acos asin atan cos erf erfc erfinv exp log log10 log2 sin sqrt tan tanh trunc".split()

if __name__ == "__main__":
    torch.set_num_threads(2)  # the race needs two threads on one call; CI has two cores
    if sys.argv[1:] == ["settled"]:
        import posenc.nn  # noqa: F401 - imported for its settle_vml_dispatch()
    elif sys.argv[1:] != ["bare"]:
        raise SystemExit("usage: vml_first_calls.py settled|bare")
    for dtype in (torch.float64, torch.float32):
        x = torch.linspace(0.001, 0.999, 32000, dtype=dtype)  # in every domain; one call that VML splits
        for name in NAMES:
            function = getattr(torch, name)
            first, second = function(x), function(x)
            ulps = ((first - second).abs() / torch.finfo(dtype).eps / second.abs().clamp(min=1e-30)).max().item()
            if ulps > 64:
                print(f"{name} {dtype}: first call {ulps:.0f} ulp from the second")
