"""The benchmark's rotary section and its positional_encodings row, run at tiny sizes: every approach rotates the
same numbers, the errors it reports are the errors the tests pin elsewhere, and its report names every row; and the
one argument it checks itself, --sizes."""

import argparse

import numpy as np
import pytest
import torch

import posenc
from posenc_book.bench import format_rotary_report, parse_sizes, positional_encodings_1d, run_rotary


@pytest.fixture(scope="module")
def tiny():
    return run_rotary((1, 2, 32, 8), repeats=1, long_rows=4, progress=False, decode_shape=(1, 2, 1, 8), decode_steps=3)


def test_every_approach_is_timed_and_checked_against_float64(tiny):
    names = [row["approach"] for row in tiny["approaches"]]
    assert names[0] == "x.clone() (bound)" and tiny["approaches"][0]["x_clone"] == 1.0
    assert {
        f"posenc RotaryEmbedding, {layout}{by}"
        for layout in ("interleaved", "halves")
        for by in ("", ", position_ids", ", new position_ids per call")
    } <= set(names)
    assert any(name.startswith("transformers") for name in names) and "rotary-embedding-torch" in names
    for row in tiny["approaches"][1:]:
        assert row["ms"] > 0 and row["max_abs_error"] < 1e-5, row  # positions < 32: float32 angles are fine here


def test_at_large_positions_only_float64_angles_stay_accurate(tiny):
    errors = tiny["long_positions"]["max_abs_error"]
    assert tiny["long_positions"]["last"] == 2**20 - 1
    for name, error in errors.items():
        if name.startswith("posenc") or "float64" in name:
            assert error <= 1e-6, name
        else:
            assert error > 1e-4, name  # float32 angles near 2**20 are off by up to 0.03 rad


def test_bfloat16_posenc_is_one_rounding_from_exact(tiny):
    rows = tiny["bfloat16"]
    for name in ("posenc RotaryEmbedding, interleaved", "posenc RotaryEmbedding, halves"):
        assert rows[name]["dtype"] == "bfloat16" and rows[name]["max_error_in_roundings"] <= 1.0


def test_targets_are_reported_and_the_precision_target_is_met(tiny):
    targets = {target["target"]: target for target in tiny["targets"]}
    assert len(targets) == 9
    assert targets["posenc float32 error at positions up to 2**20"]["met"] is True


def test_the_decode_step_rotates_q_and_k_at_the_last_position(tiny):
    """Every decode approach is timed; each rotates to within float32 rounding of the float64 rotation at the last
    step's position (4098: float32 angles are off by up to 4098 * 2**-24 rad, hence 1e-3 for transformers)."""
    names = [row["approach"] for row in tiny["decode"]]
    assert names[0] == "q.clone(), k.clone() (bound)"
    assert {"posenc rotate_pair, halves", "posenc rotate_pair, interleaved"} <= set(names)
    assert any(name.startswith("transformers") for name in names)
    for row in tiny["decode"][1:]:
        bound = 1e-6 if row["approach"].startswith("posenc") else 1e-3
        assert row["us"] > 0 and row["max_abs_error"] < bound, row


def test_report_names_every_row(tiny):
    report = format_rotary_report(tiny)
    for row in (*tiny["approaches"], *tiny["decode"]):
        assert f"| {row['approach']} |" in report
    assert "1 x 2 x 32 x 8" in report


def test_positional_encodings_row_builds_the_papers_table():
    ours = posenc.sinusoidal(16, 8, dtype=np.float64)
    theirs = positional_encodings_1d(16, 8)
    assert isinstance(theirs, torch.Tensor) and theirs.shape == (16, 8)
    np.testing.assert_allclose(theirs.double().numpy(), ours, rtol=0, atol=4e-6)  # float32 angles < 16


@pytest.mark.argument_check
def test_sizes_on_the_command_line_are_pairs_with_an_even_width():
    assert parse_sizes("2048x512,16X8") == [(2048, 512), (16, 8)]
    for bad in ("16x7", "16", "0x8", "16x8x2"):
        with pytest.raises(argparse.ArgumentTypeError, match="sizes must look like"):
            parse_sizes(bad)
