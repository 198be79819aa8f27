"""The audit of chapters 13 and 14: the runner's verdicts on the pinned libraries, re-run here, and the runner
itself (it must fail a broken adapter, measure errors without the check, and import no library early).

The expected verdicts are the chapters' written ones: rotary-embedding-torch in bfloat16, the rotary
embeddings of transformers' Llama and of x-transformers once the module is cast to bfloat16, transformers'
YaRN in a per-layer-type dict, Falcon's and MLX's bfloat16 ALiBi slopes, mlx-lm's YaRN and longrope, and the
Equinox module that ran after another base. Errors are
compared with ranges that follow from the arithmetic, never with the exact numbers of this machine:
float32 angles at positions below 2**13 err by a few float32 units of the largest angle (below 1e-3 rad;
the checks' tolerance is 2**-20 * 8191 = 0.0078), cos and sin rounded to bfloat16 (8 significant bits)
by at most about 2**-8 rad, and an angle from a wrong position or base by anything up to pi.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest
import torch

import posenc
from posenc_book.audit import PROPERTIES, PYTORCH_LIBRARIES, Implementation, all_implementations, run_audit
from posenc_book.audit.runner import ANGLE_TOLERANCE, t5_differences_on_boundaries


def find(library: str, function: str, implementations: list[Implementation] | None = None) -> Implementation:
    """The implementation of ``library`` whose function starts with ``function``."""
    candidates = all_implementations() if implementations is None else implementations
    return next(i for i in candidates if i.library == library and i.function.startswith(function))


@pytest.fixture(scope="module")
def audit():
    return run_audit()


def test_eight_libraries_three_outside_pytorch(audit):
    libraries = {i.library for i in audit.implementations}
    assert libraries == {
        "transformers",
        "rotary-embedding-torch",
        "x-transformers",
        "llama-models",
        "diffusers",
        "mlx",
        "mlx-lm",
        "equinox",
    }
    assert set(PYTORCH_LIBRARIES) == libraries - {"mlx", "mlx-lm", "equinox"}
    kinds = {i.kind for i in audit.implementations}
    assert kinds == {"rotary", "scaled", "conversion", "slopes", "buckets"}


def test_libraries_selects_whole_libraries_in_the_audits_order():
    pytorch = all_implementations(PYTORCH_LIBRARIES)
    assert {i.library for i in pytorch} == set(PYTORCH_LIBRARIES)
    rest = all_implementations(["mlx", "mlx-lm", "equinox"])
    assert {i.library for i in rest} == {"mlx", "mlx-lm", "equinox"}
    # the two chapters together are the whole audit, in its order
    assert [i.name for i in all_implementations()] == [i.name for i in pytorch + rest]
    assert [i.name for i in all_implementations(["equinox", "mlx-lm", "mlx"])] == [i.name for i in rest]


@pytest.mark.argument_check
def test_libraries_must_be_known_names():
    with pytest.raises(ValueError, match=r"libraries: unknown \['jax'\]"):
        all_implementations(["mlx", "jax"])
    with pytest.raises(TypeError, match="libraries must be a sequence"):
        all_implementations("mlx")


def test_the_failures_are_the_ones_the_chapters_explain(audit):
    def name(library, function):
        return find(library, function, audit.implementations).name

    lucidrains = name("rotary-embedding-torch", "RotaryEmbedding")
    mixed = name("equinox", "nn.RotaryPositionalEmbedding, after")
    failures = {failure for failure in audit.failures() if failure[1] != "t5_exact"}  # machine-dependent
    assert failures == {
        (name("transformers", "Falcon"), "slopes"),
        (name("transformers", "LlamaRotaryEmbedding"), "bfloat16_cast"),
        (name("transformers", "Gemma3RotaryEmbedding"), "scaled"),
        (lucidrains, "bfloat16"),
        (lucidrains, "bfloat16_cast"),
        (name("x-transformers", "RotaryEmbedding"), "bfloat16_cast"),
        (name("mlx", "nn.ALiBi, bfloat16"), "slopes"),
        (name("mlx-lm", "YarnRoPE"), "scaled"),
        (name("mlx-lm", "SuScaledRoPE"), "scaled"),
        (mixed, "angles"),
        (mixed, "offset_only"),
        (mixed, "bfloat16_cast"),
    }


def test_yarn_in_a_per_layer_dict_is_truncated_and_a_flat_one_is_not():
    """transformers reads truncate from the top of rope_parameters: in a per-layer-type dict it never finds it."""
    from transformers import Gemma3TextConfig
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding

    from posenc_book.audit.hf_transformers import GPT_OSS_BASE, GPT_OSS_YARN

    def gemma_frequencies(truncate):
        yarn = dict(GPT_OSS_YARN, truncate=truncate, rope_theta=GPT_OSS_BASE)
        config = Gemma3TextConfig(
            hidden_size=64,
            head_dim=32,
            num_attention_heads=2,
            num_key_value_heads=2,
            num_hidden_layers=2,
            layer_types=["sliding_attention", "full_attention"],
            rope_parameters={"full_attention": yarn, "sliding_attention": {"rope_type": "default"}},
        )
        return Gemma3RotaryEmbedding(config).full_attention_inv_freq.double().numpy()

    truncated = posenc.rotary_frequencies(32, base=GPT_OSS_BASE, scaling=dict(GPT_OSS_YARN, truncate=True))
    untruncated = posenc.rotary_frequencies(32, base=GPT_OSS_BASE, scaling=GPT_OSS_YARN)
    assert np.abs(truncated - untruncated).max() > 1e-4  # the two ramps differ by far more than float32
    for truncate in (False, True):
        np.testing.assert_allclose(gemma_frequencies(truncate), truncated, rtol=1e-6)


def test_gpt_oss_yarn_is_gpt_oss_default():
    from transformers import GptOssConfig

    from posenc_book.audit.hf_transformers import GPT_OSS_BASE, GPT_OSS_YARN

    shipped = dict(GptOssConfig().rope_parameters)
    assert shipped.pop("rope_theta") == GPT_OSS_BASE
    assert shipped == GPT_OSS_YARN


def test_loading_paths_that_keep_transformers_inv_freq_in_float32(tmp_path):
    """from_pretrained and from_config with a dtype build inv_freq in float32; .to() and .bfloat16() cast it."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging

    config = LlamaConfig(
        hidden_size=64, intermediate_size=64, num_attention_heads=2, num_hidden_layers=1, vocab_size=32
    )
    LlamaForCausalLM(config).save_pretrained(tmp_path)
    logging.disable_progress_bar()
    try:
        loaded = LlamaForCausalLM.from_pretrained(tmp_path, dtype=torch.bfloat16)
    finally:
        logging.enable_progress_bar()
    built = LlamaForCausalLM._from_config(config, dtype=torch.bfloat16)
    for model in (loaded, built):
        assert model.model.embed_tokens.weight.dtype == torch.bfloat16
        assert model.model.rotary_emb.inv_freq.dtype == torch.float32
    assert LlamaForCausalLM(config).to(torch.bfloat16).model.rotary_emb.inv_freq.dtype == torch.bfloat16
    assert LlamaForCausalLM(config).bfloat16().model.rotary_emb.inv_freq.dtype == torch.bfloat16


def test_meta_keeps_freqs_cis_outside_the_module_buffers():
    """The model-cast verdict of llama-models rests on freqs_cis being a plain attribute of Transformer."""
    import inspect

    from llama_models.llama3.model import Transformer

    source = inspect.getsource(Transformer)
    assert "self.freqs_cis = precompute_freqs_cis(" in source
    assert "register_buffer" not in source and "nn.Buffer" not in source


def test_mlx_bfloat16_slopes_are_bfloat16_roundings_of_alibi():
    slopes = find("mlx", "nn.ALiBi, bfloat16").build()
    for n_heads in (1, 8, 9, 12, 64):
        rounded = torch.from_numpy(posenc.alibi_slopes(n_heads)).float().bfloat16().double().numpy()
        np.testing.assert_array_equal(slopes(n_heads), rounded)


def test_measured_errors_agree_with_the_verdicts(audit):
    """A pass's own measurement is small, a failure's large: the runner's numbers and the checks agree."""
    for implementation in audit.implementations:
        if implementation.kind != "rotary":
            continue
        for key in ("angles", "bfloat16", "bfloat16_cast"):
            cell = audit.cell(implementation, key)
            assert cell.passed == (cell.error <= ANGLE_TOLERANCE), (implementation.name, key, cell)
            if not cell.passed:
                assert cell.error > 1.0  # a wrong position or base, not rounding
        assert audit.cell(implementation, "angles").passed is False or audit.cell(implementation, "angles").error < 2e-3
        for key in ("slice", "stale"):
            assert audit.cell(implementation, key).passed and audit.cell(implementation, key).error < 1e-6


def test_bfloat16_passes_round_cos_and_sin_only(audit):
    """Angles formed in float32 and cos, sin rounded to bfloat16: off by more than float32, within 2**-8 rad."""
    for implementation in audit.implementations:
        for key in ("bfloat16", "bfloat16_cast"):
            cell = audit.cell(implementation, key)
            if cell.passed:
                assert 1e-3 < cell.error < 2.0**-8


def test_scaled_verdicts_agree_with_their_measurement(audit):
    """A scaled pass is within float32 of posenc's scaled rotation; a failure is off by a wrong frequency."""
    for implementation in audit.implementations:
        if implementation.kind == "scaled":
            cell = audit.cell(implementation, "scaled")
            assert cell.error < 1e-3 if cell.passed else cell.error > 0.1


def test_t5_differences_only_on_float32_boundaries(audit):
    for implementation in audit.implementations:
        if implementation.kind == "buckets":
            assert audit.cell(implementation, "t5_range").passed
            assert t5_differences_on_boundaries(implementation.build())


def test_a_broken_adapter_fails():
    """An adapter that declares the wrong layout fails the angle check, and its measured error is large."""
    correct = find("x-transformers", "RotaryEmbedding")
    swapped = dataclasses.replace(
        correct,
        function=f"{correct.function}, layout swapped",
        layout="halves" if correct.layout == "interleaved" else "interleaved",
    )
    result = run_audit([correct, swapped], keys=["angles"])
    assert result.cell(correct, "angles").passed
    broken = result.cell(swapped, "angles")
    assert broken.passed is False and broken.error > 1.0
    assert result.failures() == [(swapped.name, "angles")]


def test_equinox_rows_do_not_depend_on_their_order():
    """Each build starts from empty Equinox caches: the plain module passes before and after the mixed one."""
    plain = find("equinox", "nn.RotaryPositionalEmbedding")
    mixed = find("equinox", "nn.RotaryPositionalEmbedding, after")
    assert plain is not mixed and plain.function != mixed.function
    for order in ([plain, mixed], [mixed, plain]):
        result = run_audit(order, keys=["angles"])
        assert result.cell(plain, "angles").passed and not result.cell(mixed, "angles").passed


def test_a_correct_float64_implementation_measures_zero():
    def build():
        return lambda x, positions, dtype: posenc.rotate(x, positions.astype(float), layout="interleaved")

    ours = Implementation("posenc", "rotate", "rotary", build, layout="interleaved")
    result = run_audit([ours])
    assert result.failures() == []
    for prop in PROPERTIES:
        cell = result.cell(ours, prop.key)
        assert cell.passed is None if prop.kind != "rotary" else cell.error < 1e-9


def test_table_has_a_row_per_implementation_and_a_column_per_property(audit):
    table = audit.table()
    assert len(table.rows) == len(audit.implementations)
    assert len(table.header) == 1 + len(PROPERTIES)
    assert [row[0] for row in table.rows] == [i.name for i in audit.implementations]
    cells = {cell.split()[0] for row in table.rows for cell in row[1:]}
    assert cells == {"pass", "FAIL", "n/a"}
    bfloat16 = audit.table(["rotary"], keys=["bfloat16", "bfloat16_cast"])
    assert [column.split(" (")[0] for column in bfloat16.header[1:]] == [
        "angles, bfloat16 input",
        "angles, model cast to bfloat16",
    ]


def test_table_of_some_kinds_shows_their_rows_and_only_their_properties(audit):
    rotary = audit.table(["rotary"])
    assert len(rotary.rows) == sum(i.kind == "rotary" for i in audit.implementations)
    assert len(rotary.header) == 1 + sum(prop.kind == "rotary" for prop in PROPERTIES)
    assert "n/a" not in {cell for row in rotary.rows for cell in row[1:]}
    others = audit.table(["scaled", "conversion", "slopes", "buckets"])
    assert len(rotary.rows) + len(others.rows) == len(audit.implementations)


def test_implementation_finds_a_row_by_library_and_function_prefix(audit):
    found = audit.implementation("transformers", "Falcon")
    assert found.library == "transformers" and found.function == "Falcon build_alibi_tensor"
    # the first in table order: the Equinox module alone comes before the one after another base
    assert audit.implementation("equinox", "nn.Rotary").function == "nn.RotaryPositionalEmbedding"


@pytest.mark.argument_check
def test_implementation_that_is_not_there_is_refused(audit):
    with pytest.raises(ValueError, match="no implementation of 'mlx' whose function starts with 'Falcon'"):
        audit.implementation("mlx", "Falcon")


@pytest.mark.argument_check
def test_unknown_kind_is_refused(audit):
    with pytest.raises(ValueError, match="unknown kinds"):
        audit.table(["rope"])
    with pytest.raises(ValueError, match="unknown property keys"):
        audit.table(["rotary"], keys=["bf16"])


@pytest.mark.argument_check
def test_unknown_property_key_is_refused():
    with pytest.raises(ValueError, match="unknown property keys"):
        run_audit([], keys=["angle"])


def test_importing_the_audit_imports_no_audited_library():
    libraries = (
        "torch",
        "jax",
        "mlx",
        "mlx_lm",
        "transformers",
        "x_transformers",
        "equinox",
        "llama_models",
        "diffusers",
    )
    code = f"import sys, posenc_book.audit; print(sorted(m for m in {libraries!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_falcon_slopes_are_bfloat16_roundings_of_alibi():
    """Falcon's failure is bfloat16 rounding of the right slopes, not another formula."""
    slopes = find("transformers", "Falcon").build()
    for n_heads in (1, 8, 9, 12, 64):
        rounded = torch.from_numpy(posenc.alibi_slopes(n_heads)).float().bfloat16().double().numpy()
        np.testing.assert_array_equal(slopes(n_heads), rounded)
