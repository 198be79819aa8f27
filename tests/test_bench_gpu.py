"""``make check-gpu``'s script, book/posenc_book/bench_gpu.py, as far as a machine without CUDA can run it.

The script is meant for a CUDA GPU, which CI does not have; here it must say so and exit 0, and its sections
that need no CUDA (parity against the float64 reference, the host-read guard over the calls a model makes, the
tiny Llama with posenc's rotary) must pass on the CPU, so that a GPU run fails on the GPU's account only. The
compiled, FlexAttention and timing sections take minutes on 2 cores; ``python -m posenc_book.bench_gpu --device
cpu`` runs them.
"""

from __future__ import annotations

import pytest
import torch

from posenc_book.bench_gpu import Section, _timed, main, run

pytestmark = pytest.mark.usefixtures("quiet_transformers")


def test_without_cuda_it_says_so_and_exits_0(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["--out", str(tmp_path / "report.md")]) == 0
    assert "no CUDA GPU here" in capsys.readouterr().out
    assert not (tmp_path / "report.md").exists()


def test_the_sections_that_need_no_cuda_pass_on_the_cpu():
    report, failures = run("cpu", ["parity", "host_reads", "llama"])
    assert failures == 0, report
    for title in (
        "Parity against the float64 reference",
        "No host reads, no synchronisation",
        "A tiny Llama with posenc's rotary",
    ):
        assert f"## {title}\n\npassed" in report
    assert report.count("| yes |") >= 40 and "**NO**" not in report


def test_a_section_that_raises_is_reported_as_failed_and_the_run_goes_on():
    section = Section("broken", ["a"])
    with _timed(section):
        raise RuntimeError("device-side assert triggered")
    assert section.failures == 1
    assert "device-side assert triggered" in section.markdown() and "1 failed" in section.markdown()
