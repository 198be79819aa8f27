"""posenc.config: published configs read from their config.json as transformers reads them, the query multipliers, and
the NoPE and per-layer bases that a model's forward loop (not its attention) decides.

*Real configs.* :data:`posenc_book.zoo.PUBLISHED_CONFIGS` holds the rotary keys of six models' ``config.json`` and
the sizes they depend on, each checked against the source it names (other keys are left out). The test reads the
dict with :meth:`posenc.RotaryPlan.from_config`, builds transformers' own config object from the file's keys alone
(``AutoConfig.for_model``), checks that both readings give the same plan, and rotates with posenc and with the
family's rotary class (tests/test_model_zoo.py's :func:`compare`, its tolerance) at positions 0, 1, L - 1, L and 4L.
Gemma 3's file leaves six keys to its configuration class: posenc refuses the file's dict as it stands, naming the
first key it lacks, and reads it with the class's defaults added, which are checked against the class.

*Query multipliers* are compared with transformers' functions in float32: both evaluate the same formula on the same
integer positions, so they agree to a few float32 roundings of a value near 1 (``1e-6``).
"""

from __future__ import annotations

import copy
import importlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
import rope_oracle
import torch
from test_model_zoo import compare

import posenc
from posenc import QueryScaling, RotaryPlan
from posenc.nn import query_scale
from posenc_book.zoo import PUBLISHED_CONFIGS

pytestmark = pytest.mark.usefixtures("quiet_transformers")

REAL_CONFIGS = {
    model_id: published.as_dict(with_class_defaults=True) for model_id, published in PUBLISHED_CONFIGS.items()
}
"""The published configs (posenc_book.zoo.PUBLISHED_CONFIGS, each value checked against the source it names), with
the keys Gemma 3's file leaves to its class added."""


def transformers_config(raw: dict):
    """transformers' own config object built from a config.json dict."""
    from transformers import AutoConfig

    values = copy.deepcopy(raw)
    return AutoConfig.for_model(values.pop("model_type"), **values)


@pytest.mark.parametrize("model_id", REAL_CONFIGS)
def test_a_published_config_reads_as_transformers_reads_it_and_rotates_as_it_does(model_id):
    raw = REAL_CONFIGS[model_id]
    from_dict = RotaryPlan.from_config(copy.deepcopy(raw))
    config = transformers_config(PUBLISHED_CONFIGS[model_id].as_dict())  # the file's keys alone
    from_object = RotaryPlan.from_config(config)
    assert from_dict.layers == from_object.layers
    assert compare(config)


def test_what_the_published_configs_say():
    """The plans' claims, checked against the published values and the modeling code they come from."""
    plans = {model_id: RotaryPlan.from_config(copy.deepcopy(raw)) for model_id, raw in REAL_CONFIGS.items()}
    llama = plans["meta-llama/Llama-3.1-8B-Instruct"].kinds
    assert [(kind.rotary_dim, kind.base, kind.scaling.rope_type, kind.layout) for kind in llama] == [
        (128, 500000.0, "llama3", "halves")
    ]
    gemma = plans["google/gemma-3-4b-it"]
    full = [index for index, layer in enumerate(gemma.layers) if layer.layer_type == "full_attention"]
    assert full == [5, 11, 17, 23, 29]  # sliding_window_pattern 6
    assert {(layer.base, layer.scaling.rope_type, layer.scaling.factor) for layer in gemma.layers} == {
        (10000.0, "default", 1.0),  # the sliding layers: rope_local_base_freq, unscaled
        (1000000.0, "linear", 8.0),  # the full layers: rope_theta and rope_scaling
    }
    gpt_oss = plans["openai/gpt-oss-20b"]
    assert len(gpt_oss.kinds) == 2 and all(kind.scaling.truncate is False for kind in gpt_oss.kinds)
    assert gpt_oss.kinds[0].attention_factor == pytest.approx(0.1 * math.log(32.0) + 1.0)
    (deepseek,) = plans["deepseek-ai/DeepSeek-V3"].kinds
    shape = (deepseek.head_dim, deepseek.rotary_dim, deepseek.rotary_offset, deepseek.layout)
    assert shape == (192, 64, 128, "interleaved")
    assert deepseek.attention_factor == 1.0  # mscale / mscale_all_dim = 1
    assert deepseek.softmax_scale == pytest.approx((0.1 * math.log(40.0) + 1.0) ** 2)
    (pythia,) = plans["EleutherAI/pythia-1.4b"].kinds
    assert (pythia.head_dim, pythia.rotary_dim, pythia.base) == (128, 32, 10000.0)
    (qwen,) = plans["Qwen/Qwen2.5-VL-7B-Instruct"].kinds
    assert qwen.axes == ("time", "height", "width") and qwen.axis_of_pair == (0,) * 16 + (1,) * 24 + (2,) * 24


def test_gemma_3s_sparse_file_reads_and_rotates_as_transformers_reads_it():
    """gemma-3-4b-it's text_config as published says neither which layers slide nor their bases: posenc fills them
    in with Gemma3TextConfig's defaults, as transformers does (the same plan as the class built from the same dict,
    the same rotation as its rotary embedding), and names each default it used."""
    from transformers import Gemma3TextConfig

    published = PUBLISHED_CONFIGS["google/gemma-3-4b-it"]
    plan = RotaryPlan.from_config(published.as_dict())
    theirs = Gemma3TextConfig.from_dict(published.as_dict())
    assert plan.layers == RotaryPlan.from_config(theirs).layers
    assert plan.layers == RotaryPlan.from_config(published.as_dict(with_class_defaults=True)).layers
    compare_against(published.as_dict(), theirs)
    assert plan.config_class == "Gemma3TextConfig"
    for key in ("sliding_window_pattern", "rope_theta", "rope_local_base_freq"):
        assert plan.defaults_used[key] == published.class_defaults[key], key
    assert not set(plan.defaults_used) & set(published.values)
    assert "rope_local_base_freq = 10000.0" in repr(plan)


def test_a_minimal_dict_reads_with_its_classs_defaults_and_says_so():
    """A Llama dict without a base reads with LlamaConfig's default, 10000, and the plan says it came from there; a
    config object records nothing (transformers filled it in)."""
    from transformers import LlamaConfig

    raw = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2}
    plan = RotaryPlan.from_config(copy.deepcopy(raw))
    assert plan.kinds[0].base == LlamaConfig().rope_parameters["rope_theta"] == 10000.0
    assert dict(plan.defaults_used) == {"rope_theta": 10000.0, "max_position_embeddings": 2048}
    assert plan.max_position_embeddings == LlamaConfig().max_position_embeddings
    assert dict(RotaryPlan.from_config(LlamaConfig.from_dict(raw)).defaults_used) == {}


def test_the_class_defaults_added_to_gemma_3s_file_are_the_classs():
    from transformers import Gemma3TextConfig

    defaults = PUBLISHED_CONFIGS["google/gemma-3-4b-it"].class_defaults
    config = Gemma3TextConfig(num_hidden_layers=12)
    assert [index for index, kind in enumerate(config.layer_types) if kind == "full_attention"] == [
        defaults["sliding_window_pattern"] - 1,
        2 * defaults["sliding_window_pattern"] - 1,
    ]
    assert config.rope_parameters["full_attention"]["rope_theta"] == defaults["rope_theta"]
    assert config.rope_parameters["sliding_attention"]["rope_theta"] == defaults["rope_local_base_freq"]
    for key in ("head_dim", "num_attention_heads", "num_key_value_heads"):
        assert getattr(config, key) == defaults[key], key
    assert not set(defaults) & set(PUBLISHED_CONFIGS["google/gemma-3-4b-it"].values)


GEMMA4_TEXT_CONFIG = {
    "hidden_size": 3840,
    "num_hidden_layers": 12,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "num_global_key_value_heads": 1,
    "head_dim": 256,
    "global_head_dim": 512,
    "attention_k_eq_v": True,
    "sliding_window": 1024,
    "max_position_embeddings": 131072,
    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 2,
    "rope_parameters": {
        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    },
}
"""A Gemma 4 text_config in the form Google publishes it (the sizes of gemma-4-12B-it's, 12 of its 48 layers): the
full layers' head size as ``global_head_dim``, no ``per_layer_config``, which transformers derives from it."""


@pytest.mark.parametrize(
    ("model_type", "class_name"),
    [
        ("gemma4_text", "Gemma4TextConfig"),
        ("gemma4_unified_text", "Gemma4UnifiedTextConfig"),
        ("diffusion_gemma_text", "DiffusionGemmaTextConfig"),
    ],
)
def test_gemma_4s_published_text_config_gives_the_full_layers_their_own_head(model_type, class_name):
    """The full layers of a published Gemma 4 text_config have ``global_head_dim`` = 512 features a head, and rotate
    a quarter of their pairs at base^(-2i/512), as the configuration class reads it; without the key, the class's
    default 512 (recorded in ``defaults_used``), never ``head_dim``."""
    import transformers

    config_class = getattr(transformers, class_name)
    for published in (GEMMA4_TEXT_CONFIG, {k: v for k, v in GEMMA4_TEXT_CONFIG.items() if k != "global_head_dim"}):
        raw = {**copy.deepcopy(published), "model_type": model_type}
        plan = RotaryPlan.from_config(copy.deepcopy(raw))
        theirs = config_class.from_dict(copy.deepcopy(raw))
        full = [plan.layers[index] for index in (5, 11)]
        assert {(layer.layer_type, layer.head_dim, layer.rotary_dim) for layer in full} == {
            ("full_attention", 512, 512)
        }
        assert np.count_nonzero(full[0].inverse_frequencies()) == 512 // 2 // 4
        assert plan.layers[0].head_dim == 256
        assert plan.layers == RotaryPlan.from_config(theirs).layers
        compare_against(copy.deepcopy(raw), theirs)
        assert ("global_head_dim" in plan.defaults_used) == ("global_head_dim" not in published)


def test_the_reader_sees_the_wrong_reading_of_a_published_config(monkeypatch):
    """The comparison is live: Gemma 3's legacy rope_scaling applied to every layer (vllm-project/vllm#29111's bug:
    the sliding layers lose their local base) moves the rotation far beyond the tolerance."""
    raw = copy.deepcopy(REAL_CONFIGS["google/gemma-3-4b-it"])
    config = transformers_config(raw)
    for layer_dict in config.rope_parameters.values():
        layer_dict.update(rope_type="linear", factor=8.0, rope_theta=1000000.0)  # one flat scaling for all layers
    with pytest.raises(AssertionError, match="sliding_attention"):
        compare_against(config, transformers_config(raw))


def compare_against(ours, theirs):
    """Rotate with the plan of ``ours`` and transformers' rotary of ``theirs`` (same family and sizes)."""
    import test_model_zoo

    original = test_model_zoo.posenc.RotaryPlan.from_config
    plan = original(ours)
    try:
        test_model_zoo.posenc.RotaryPlan.from_config = lambda config, **kwargs: plan  # type: ignore[method-assign]
        return compare(theirs)
    finally:
        test_model_zoo.posenc.RotaryPlan.from_config = original  # type: ignore[method-assign]


# --- Query multipliers ------------------------------------------------------------------------------------------

POSITIONS = torch.tensor([[0, 1, 8191, 8192, 16383, 16384, 65535, 131072, 1048575]])


@pytest.mark.parametrize("family", ["ministral3", "mistral4"])
def test_llama_4_scaling_beta_matches_transformers(family):
    """Ministral 3 and Mistral 4 multiply the queries by 1 + beta * ln(1 + floor(p / L)) after the rotation."""
    module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    theirs = module.get_llama_4_attn_scale(POSITIONS, 0.1, 16384)[:, 0, :, 0]
    scaling = QueryScaling("llama4_beta", 0.1, 16384.0)
    torch.testing.assert_close(query_scale(POSITIONS, scaling), theirs, rtol=0, atol=1e-6)
    np.testing.assert_allclose(posenc.query_scale(POSITIONS.numpy(), scaling), theirs.double().numpy(), atol=1e-6)


def test_beams_scalable_softmax_matches_transformers():
    """beam's NoPE full-attention layers: (1 + (p + 1) / 2048) ** 0.1, from the modeling file's constants."""
    from transformers.models.beam.modeling_beam import compute_attention_scaling

    theirs = compute_attention_scaling(POSITIONS)[:, 0, :, 0]
    (nope,) = [kind for kind in RotaryPlan.from_config(_default("BeamConfig")).kinds if not kind.rotates]
    assert nope.query_scaling == QueryScaling("scalable_softmax", 0.1, 2048.0)
    torch.testing.assert_close(query_scale(POSITIONS, nope.query_scaling), theirs, rtol=0, atol=1e-6)


def test_mistral_large_4s_learned_query_multiplier_is_named_not_computed():
    """Mistral Large 4 multiplies the queries of every attention layer, NoPE layers included, by a_h ln(1 + p) + b_h
    with a_h, b_h learned per head (MistralLarge4TextSoftmaxScaling): the plan names it on each such layer, from the
    object and from its config.json, and refuses to compute it (its values are weights)."""
    from transformers import MistralLarge4TextConfig
    from transformers.models.mistral_large4 import modeling_mistral_large4

    config = MistralLarge4TextConfig(
        hidden_size=64, num_attention_heads=4, num_hidden_layers=4, q_lora_rank=16, kv_lora_rank=16,
        qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8, intermediate_size=32, moe_intermediate_size=16,
        n_routed_experts=2, num_experts_per_tok=1, index_n_heads=2, index_head_dim=16,
    )  # fmt: skip
    learned = QueryScaling("learned_log")
    for plan in (RotaryPlan.from_config(config), RotaryPlan.from_config(config.to_dict())):
        assert [layer.rotates for layer in plan.layers] == [True, True, True, False]
        for index, layer in enumerate(plan.layers):
            attention = modeling_mistral_large4.MistralLarge4TextAttention(config, index)
            assert isinstance(attention.softmax_scaling, modeling_mistral_large4.MistralLarge4TextSoftmaxScaling)
            assert layer.query_scaling == learned, index
    with pytest.raises(ValueError, match="learned per head"):
        posenc.query_scale([0, 1], learned)
    with pytest.raises(ValueError, match="learned per head"):
        query_scale(torch.arange(2), learned)
    with pytest.raises(ValueError, match="scale must be None"):
        QueryScaling("learned_log", 0.1, 8.0)
    assert RotaryPlan.from_config(_default("MistralLarge4TextConfig")).layers[0].query_scaling == learned


def test_llama4_temperature_tuning_matches_the_attention():
    """Llama 4's NoPE layers scale the queries inside the attention; its ratio with the tuning on and off, at each
    position, is posenc's factor (tiny random attention, float64)."""
    from transformers import Llama4TextConfig
    from transformers.models.llama4 import modeling_llama4

    config = Llama4TextConfig(
        hidden_size=32, num_attention_heads=2, num_key_value_heads=1, head_dim=16, num_hidden_layers=4,
        attn_scale=0.1, floor_scale=4, intermediate_size=32, intermediate_size_mlp=32, use_qk_norm=False,
    )  # fmt: skip
    config._attn_implementation = "eager"
    plan = RotaryPlan.from_config(config)
    nope_index = plan.layers.index(next(layer for layer in plan.layers if not layer.rotates))
    scaling = plan.layers[nope_index].query_scaling
    assert scaling == QueryScaling("llama4_temperature", 0.1, 4.0)
    torch.manual_seed(0)
    attention = modeling_llama4.Llama4TextAttention(config, nope_index).double()
    queries = []

    def record(module, query, *args, **kwargs):
        queries.append(query)
        return query.transpose(1, 2), None

    hidden = torch.randn(1, 20, 32, dtype=torch.float64)
    positions = torch.arange(20)[None]
    original = modeling_llama4.eager_attention_forward
    try:
        modeling_llama4.eager_attention_forward = record
        for tuning in (True, False):
            attention.attn_temperature_tuning = tuning
            attention(hidden, None, None, position_ids=positions)
    finally:
        modeling_llama4.eager_attention_forward = original
    ratio = (queries[0] / queries[1])[0, 0, :, 0]
    torch.testing.assert_close(ratio, query_scale(positions, scaling, dtype=torch.float64)[0], rtol=0, atol=1e-6)


# --- Decided by the model's forward loop: NoPE layers and per-layer bases ---------------------------------------

TINY = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=64)
FOUR_TYPES = ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]
LOOPS = {
    "MuseGlimmerTextConfig": ("MuseGlimmerTextModel", dict(layer_rope_theta=[10000.0, 0, 10000.0, 0])),
    "GraniteSWAConfig": ("GraniteSWAModel", dict(layer_rope_theta=[10000.0, 0, 500000.0, 10000.0])),
    "GraniteMoeSWAConfig": (
        "GraniteMoeSWAModel",
        dict(layer_rope_theta=[10000.0, 0, 500000.0, 10000.0], num_local_experts=2, num_experts_per_tok=1),
    ),
    "BeamConfig": ("BeamModel", {}),
    "OlmoHybridConfig": ("OlmoHybridModel", dict(pad_token_id=0)),
    "OlmoHybridConfig without rope": ("OlmoHybridModel", dict(pad_token_id=0, rope_parameters=None)),
}
"""Tiny models whose forward loop decides per layer: MUSE and Granite SWA pass no cos/sin to a layer whose
``layer_rope_theta`` is 0 (Granite SWA: one rotary per nonzero theta), beam to its full layers (``None`` in the
nested rope dict), OLMo Hybrid to every layer when the config has no rope parameters."""


def _default(name: str):
    import transformers

    return getattr(transformers, name)()


def test_nope_layers_and_bases_decided_by_the_model_loop(subtests):
    """Each layer's attention gets no cos/sin exactly where the plan says NoPE, and else the cos of the plan's base."""
    import transformers

    for label, (model_name, extra) in LOOPS.items():
        with subtests.test(config=label):
            config_class = getattr(transformers, label.split()[0])
            layer_types = FOUR_TYPES if "layer_rope_theta" in extra else {}
            types = {"layer_types": layer_types} if layer_types else {}
            config = config_class(**TINY, vocab_size=64, num_hidden_layers=4, **types, **extra)
            config._attn_implementation = "eager"
            family = config_class.__module__.split(".")[2]
            module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
            torch.manual_seed(0)
            model = getattr(module, model_name)(config).eval()
            seen: dict[int, torch.Tensor | None] = {}
            for index, layer in enumerate(model.layers):
                if getattr(layer, "self_attn", None) is None:
                    continue  # a recurrent layer

                def hook(attention, args, kwargs, index=index, seen=seen):
                    embeddings = kwargs.get("position_embeddings")
                    seen[index] = None if embeddings is None else embeddings[0]

                layer.self_attn.register_forward_pre_hook(hook, with_kwargs=True)
            with torch.no_grad():
                model(input_ids=torch.tensor([[1, 2, 3, 4, 5]]))
            plan = RotaryPlan.from_config(config)
            assert seen, "no attention layer ran"
            for index, cos in seen.items():
                layer = plan.layers[index]
                assert (cos is not None) == layer.rotates, f"layer {index}"
                if cos is not None:
                    expected = np.cos(np.multiply.outer(np.arange(5.0), layer.inverse_frequencies()))
                    np.testing.assert_allclose(cos[0, :, : layer.rotary_dim // 2].double().numpy(), expected, atol=1e-6)


# --- Refusals -----------------------------------------------------------------------------------------------------

LLAMA = REAL_CONFIGS["meta-llama/Llama-3.1-8B-Instruct"]


@pytest.mark.argument_check
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (dict(model_type="llama_v9"), "model_type.*llama_v9"),
        (dict(model_type="laguna", rope_theta=None), "rope_theta"),  # LagunaConfig takes the rope dict as given
        (dict(rope_scaling={"rope_type": "linear", "factor": 2.0, "llama_4_scaling_beta": 0.1}), "scaling_beta"),
        (dict(rope_scaling={"rope_type": "yarn", "factor": 2.0, "attention_factr": 1.0}), "attention_factr"),
        (dict(rope_scaling={"rope_type": "ntk_alpha", "alpha": 2.0}), "rope_type"),
        (dict(model_type="deepseek_v3", qk_rope_head_dim=64, qk_nope_head_dim=128, partial_rotary_factor=0.5), "rope"),
        (dict(model_type="llama4_text", no_rope_layers=[1, 1, 0]), "no_rope_layers"),  # 3 entries, 32 layers
        (dict(model_type="qwen2_vl_text", rope_scaling={"type": "mrope", "mrope_section": [16, 24]}), "mrope_section"),
        (dict(model_type="hunyuan_vl_text", rope_scaling={"mrope_section": [16, 16, 16, 16]}), "mrope_section"),
        (dict(model_type="dots3_note_text", layer_types=None), "layer_types"),  # derived by a rule posenc lacks
        (dict(rope_scaling={"main": {"rope_type": "default"}, "compress": {"rope_type": "default"}}), "main"),
        (dict(model_type="gpt_neox", rotary_pct=0.34), "partial_rotary_factor"),  # int(128 * 0.34) = 43 features
    ],
)
def test_a_config_posenc_cannot_serve_gets_a_value_error_naming_the_key(change, message):
    raw = {**copy.deepcopy(LLAMA), **change}
    raw = {key: value for key, value in raw.items() if value is not None}
    with pytest.raises(ValueError, match=message):
        RotaryPlan.from_config(raw)


@pytest.mark.argument_check
def test_a_composite_config_names_its_sub_configs():
    with pytest.raises(ValueError, match="text_config"):
        RotaryPlan.from_config({"model_type": "llama", "text_config": {}, "vision_config": {}, "num_hidden_layers": 1})


def test_keys_that_do_not_change_positions_are_accepted():
    """max_position_embeddings inside the dict (Ministral 3 ships it) changes nothing."""
    raw = copy.deepcopy(LLAMA)
    plain = RotaryPlan.from_config(copy.deepcopy(raw))
    raw["rope_scaling"]["max_position_embeddings"] = 131072
    assert RotaryPlan.from_config(raw).layers == plain.layers


def test_deepseek_v4s_nested_dict_without_a_factor_rotates_the_whole_head():
    """A DeepSeek-V4 config whose nested ``compress`` dict has no ``partial_rotary_factor``, and no top-level one:
    the class keeps the dict as given (its own ``partial_rotary_factor`` stays 0.125) and the rotary module rotates
    the whole head of 512. posenc reads the object and the dict alike, with the module's width."""
    from transformers import DeepseekV4Config
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4RotaryEmbedding

    raw = DeepseekV4Config().to_dict()
    del raw["rope_parameters"]["compress"]["partial_rotary_factor"], raw["partial_rotary_factor"]
    config = DeepseekV4Config.from_dict(copy.deepcopy(raw))
    width = 2 * DeepseekV4RotaryEmbedding(config).compress_inv_freq.shape[0]
    assert (config.partial_rotary_factor, width) == (0.125, 512)
    for plan in (RotaryPlan.from_config(config), RotaryPlan.from_config(copy.deepcopy(raw))):
        compressed = {kind.rotary_dim for kind in plan.kinds if kind.rotates and kind.layer_type != "sliding_attention"}
        assert compressed == {width}


def test_deepseek_v4_nests_by_its_own_labels():
    """DeepSeek-V4's rope_parameters are keyed main / compress, not by layer type: sliding layers read main."""
    from transformers import DeepseekV4Config

    types = ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"]
    config = DeepseekV4Config(num_hidden_layers=3, layer_types=types, mlp_layer_types=["hash_moe", "moe", "moe"])
    plan = RotaryPlan.from_config(config)
    for layer in plan.layers:
        label = "main" if layer.layer_type == "sliding_attention" else "compress"
        assert layer.base == config.rope_parameters[label]["rope_theta"]
        assert layer.rotary_offset == layer.head_dim - layer.rotary_dim  # the last features (its apply_rotary_pos_emb)
    assert {layer.base for layer in plan.layers} == {10000.0, 160000.0}
    assert compare(config) == types  # each kind rotated as transformers' rotary of its label


# --- Issue 32's four misreadings: keys real checkpoints ship, read as transformers reads them ---------------------

CORPUS = Path(__file__).resolve().parent / "data" / "published_configs"


def corpus_file(name: str) -> dict:
    """A published config.json of the corpus (tests/data/published_configs, sources in its MANIFEST.json)."""
    return json.loads((CORPUS / name).read_text())


def test_minimax_m2s_legacy_rotary_dim_rotates_half_the_head():
    """MiniMax-M2.5's config.json states partial rotary as ``"rotary_dim": 64`` beside ``head_dim`` 128 and no
    ``partial_rotary_factor``: MiniMaxM2Config's ``convert_rope_params_to_dict`` makes that a factor of 0.5 (a factor
    the file states, at the top level or in the rope dict, wins), and the model turns the first 64 features. posenc
    reads the dict as the object, and the tiny model agrees layer by layer."""
    from transformers import MiniMaxM2Config

    published = corpus_file("MiniMaxAI__MiniMax-M2.5.json")
    assert (published["rotary_dim"], published["head_dim"]) == (64, 128) and "partial_rotary_factor" not in published
    plan = RotaryPlan.from_config(copy.deepcopy(published))
    assert {(kind.head_dim, kind.rotary_dim) for kind in plan.kinds} == {(128, 64)}
    assert plan.layers == RotaryPlan.from_config(transformers_config(published)).layers
    built, differences = rope_oracle.check(published, max_layers=3)
    assert differences == []
    for change, width in (
        (dict(partial_rotary_factor=0.25), 32),  # the file's own factor wins over rotary_dim
        (dict(rope_parameters={"rope_type": "default", "rope_theta": 5e6, "partial_rotary_factor": 0.75}), 96),
        (dict(rotary_dim=None), 128),
        (dict(rotary_dim=32, head_dim=64), 32),
    ):
        changed = {**copy.deepcopy(published), **change}
        theirs = MiniMaxM2Config.from_dict(copy.deepcopy(changed))
        ours = RotaryPlan.from_config(changed)
        assert {kind.rotary_dim for kind in ours.kinds} == {width}, change
        assert ours.layers == RotaryPlan.from_config(theirs).layers, change


GRANITE_4_H = dict(
    model_type="granitemoehybrid",
    num_hidden_layers=4,
    layer_types=["mamba", "attention", "mamba", "attention"],
    rope_theta=10000.0,
)
"""Granite 4.0-H's form: attention layers among Mamba ones, a ``rope_theta``, and ``position_embedding_type``."""


@pytest.mark.parametrize("flag", ["nope", None, "absent", "rope"])
def test_granite_4_h_rotates_only_when_position_embedding_type_is_rope(flag):
    """GraniteMoeHybridModel builds its rotary embedding only when ``position_embedding_type == "rope"``: its
    published checkpoints set ``"nope"`` beside a ``rope_theta``, and the class default is None; both leave every
    attention layer unrotated. posenc reads the object, the dict and the tiny model alike."""
    from transformers import GraniteMoeHybridConfig

    raw = copy.deepcopy(GRANITE_4_H)
    if flag != "absent":
        raw["position_embedding_type"] = flag
    plan = RotaryPlan.from_config(copy.deepcopy(raw))
    attention = [layer for layer in plan.layers if layer.layer_type == "full_attention"]
    assert len(attention) == 2 and {layer.rotates for layer in attention} == {flag == "rope"}
    assert plan.layers == RotaryPlan.from_config(GraniteMoeHybridConfig.from_dict(copy.deepcopy(raw))).layers
    built, differences = rope_oracle.check(raw)
    assert differences == []
    assert {rope_oracle.find(rope_oracle.observe(built))[1].rotates} == {flag == "rope"}


ZAMBA2 = dict(
    model_type="zamba2",
    hidden_size=64,
    num_attention_heads=2,
    num_hidden_layers=4,
    layers_block_type=["mamba", "hybrid", "mamba", "hybrid"],
)
"""A tiny Zamba2: Mamba layers and hybrid ones, whose shared attention block rotates only with ``use_mem_rope``."""


@pytest.mark.parametrize("flag", [True, False, "absent"])
def test_zamba2_rotates_only_when_use_mem_rope_is_true(flag):
    """Zamba2Model builds its rotary embedding, and its attention rotates, only when ``use_mem_rope`` is true; the
    class's default is false (review F found posenc rotating it at the defaults). The tiny model and posenc's plan
    agree, read from the dict and from the config object."""
    raw = copy.deepcopy(ZAMBA2)
    if flag != "absent":
        raw["use_mem_rope"] = flag
    plan = RotaryPlan.from_config(copy.deepcopy(raw))
    hybrid = [layer for layer in plan.layers if layer.layer_type == "hybrid"]
    assert len(hybrid) == 2 and {layer.rotates for layer in hybrid} == {flag is True}
    assert plan.layers == RotaryPlan.from_config(transformers_config(raw)).layers
    built, differences = rope_oracle.check(raw)
    assert differences == []
    assert {finding.rotates for finding in rope_oracle.find(rope_oracle.observe(built)).values()} == {flag is True}


def test_falcon_with_alibi_is_refused_naming_the_key():
    """FalconModel adds ALiBi biases when ``alibi`` is true, and its attention then rotates nothing: posenc refuses
    such a config, naming the key, instead of planning a rotation; with ``alibi`` false both rotate every layer."""
    from transformers import FalconConfig, FalconModel

    raw = dict(model_type="falcon", hidden_size=64, num_attention_heads=2, num_hidden_layers=2, alibi=True)
    assert FalconModel(FalconConfig.from_dict({k: v for k, v in raw.items() if k != "model_type"})).use_alibi
    with pytest.raises(ValueError, match=r"config\['alibi'\] = True"):
        RotaryPlan.from_config(copy.deepcopy(raw))
    with pytest.raises(ValueError, match="alibi"):
        RotaryPlan.from_config(transformers_config(raw))
    plain = {**raw, "alibi": False}
    assert {layer.rotates for layer in RotaryPlan.from_config(copy.deepcopy(plain)).layers} == {True}
    assert rope_oracle.check(plain)[1] == []


def test_longrope_lists_for_another_width_are_refused_when_read():
    """Phi-3-mini-128k's published LongRoPE lists hold 48 divisors, one per pair of its 96 features; with
    ``partial_rotary_factor`` 0.5 added, transformers refuses the config (the lists must have 24 entries). posenc
    refuses it when it reads it, naming the lists (review F found a plan returned and a broadcast error later)."""
    raw = corpus_file("microsoft__Phi-3-mini-128k-instruct.json")
    assert {kind.rotary_dim for kind in RotaryPlan.from_config(copy.deepcopy(raw)).kinds} == {96}
    halved = {**raw, "partial_rotary_factor": 0.5}
    with pytest.raises(ValueError, match=r"short_factor.*48 pairs.*got 48 rotated features"):
        RotaryPlan.from_config(copy.deepcopy(halved))
    with pytest.raises(Exception, match="short_factor field must have length 24, got 48"):  # transformers' own error
        transformers_config(halved)


@pytest.mark.parametrize("rope_type", ["su", "su (its length in the dict)", "yarn", "linear", "dynamic"])
def test_phi3_reads_legacy_rope_types_as_transformers_does(rope_type):
    """Phi3Config renames the legacy types "su" and "yarn" to "longrope" and refuses any type but "default" and
    "longrope" (review F, F4: posenc read a YaRN or linear plan that transformers never computes). On
    Phi-3-mini-128k's published file with its type changed: the renamed ones give the file's own plan, read from
    the dict and from transformers' object alike; the others are refused by both, posenc naming the key. "su"
    with the file's top-level original_max_position_embeddings fails in transformers 5.23 (the rename comes after
    the step that moves that key into the dict for "yarn"), and posenc refuses it too."""
    raw = corpus_file("microsoft__Phi-3-mini-128k-instruct.json")
    published = RotaryPlan.from_config(copy.deepcopy(raw))
    scaling = raw["rope_scaling"]
    scaling.pop("type", None)
    scaling["rope_type"] = rope_type.split()[0]
    if rope_type.startswith("su ("):
        scaling["original_max_position_embeddings"] = raw["original_max_position_embeddings"]
    if rope_type == "su":
        with pytest.raises(ValueError, match=r"'su' without .*original_max_position_embeddings"):
            RotaryPlan.from_config(copy.deepcopy(raw))
        with pytest.raises(KeyError, match="original_max_position_embeddings"):  # transformers' own error
            transformers_config(raw)
    elif rope_type.startswith(("su", "yarn")):
        plan = RotaryPlan.from_config(copy.deepcopy(raw))
        assert plan.layers == published.layers
        assert plan.layers == RotaryPlan.from_config(transformers_config(raw)).layers
    else:
        scaling["factor"] = 4.0
        with pytest.raises(ValueError, match=rf"\['rope_type'\] = '{rope_type}': Phi3Config accepts only"):
            RotaryPlan.from_config(copy.deepcopy(raw))
        with pytest.raises(Exception, match="type field must be one of"):  # transformers' own error
            transformers_config(raw)


def test_unlimited_ocr_derives_its_head_size_whatever_head_dim_says():
    """UnlimitedOcrTextConfig's __post_init__ sets head_dim = hidden_size // num_attention_heads, overwriting a
    head_dim the config gives (make check-configs found posenc reading the given one: "head of 16 features, posenc
    says 128"). A config.json with another head_dim: posenc's plan is the one transformers' object gives."""
    raw = dict(model_type="unlimited_ocr_text", hidden_size=256, num_attention_heads=4, num_hidden_layers=2)
    given = {**raw, "head_dim": 128}
    assert transformers_config(given).head_dim == 64
    plan = RotaryPlan.from_config(copy.deepcopy(given))
    assert {kind.head_dim for kind in plan.kinds} == {64}
    assert plan.layers == RotaryPlan.from_config(transformers_config(given)).layers


@pytest.mark.parametrize(
    "given",
    [
        dict(num_hidden_layers=6),
        dict(num_hidden_layers=6, H_cycles=1, L_cycles=2),
        dict(num_hidden_layers=48, num_layers_per_stack=6),
    ],
    ids=["legacy", "legacy-cycles", "round-tripped"],
)
def test_hrm_has_a_layer_per_attention_call(given):
    """HRM runs each stack's layers in cycles, with a cache layer per call: a config.json without
    ``num_layers_per_stack`` (a legacy file) gives one stack's count as ``num_hidden_layers``, which HrmTextConfig
    turns into ``num_layers_per_stack * H_cycles * (L_cycles + 1)``; a saved config gives both. posenc's plan has as
    many layers as transformers' object says, read from the dict or from the object."""
    raw = {"model_type": "hrm_text", **given}
    theirs = transformers_config(raw)
    plan = RotaryPlan.from_config(copy.deepcopy(raw))
    assert len(plan.layers) == theirs.num_hidden_layers == len(RotaryPlan.from_config(theirs).layers)


IGNORING_FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "gemma", "mixtral"]


@pytest.mark.parametrize("model_type", IGNORING_FAMILIES)
def test_a_partial_factor_the_default_frequencies_ignore_turns_the_whole_head(model_type):
    """Llama's ``compute_default_rope_parameters`` and its copies never read ``partial_rotary_factor``: a config that
    carries one (top-level or in the rope dict) turns every feature of the head in transformers, and in posenc. With a
    scaling whose frequencies do read it (YaRN here), those frequencies cover half the head while the attention turns
    all of it, and transformers fails: posenc refuses, naming the key."""
    raw = {
        "model_type": model_type,
        "hidden_size": 256,
        "num_attention_heads": 2,
        "num_hidden_layers": 2,
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.5,
    }
    plan = RotaryPlan.from_config(copy.deepcopy(raw))
    assert {kind.rotary_dim for kind in plan.kinds} == {kind.head_dim for kind in plan.kinds}
    assert plan.layers == RotaryPlan.from_config(transformers_config(raw)).layers
    assert rope_oracle.check(raw)[1] == []
    yarn = {**raw, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}}
    with pytest.raises(ValueError, match="partial_rotary_factor"):
        RotaryPlan.from_config(copy.deepcopy(yarn))
    assert transformers_fails(yarn)


def transformers_fails(values: dict) -> str | None:
    """How transformers fails on a config.json dict: building its tiny model, or running it at positions 0 and 1
    (the error's message), or None if it runs."""
    try:
        observation = rope_oracle.observe(rope_oracle.tiny(values), positions=(0, 1))
    except (RuntimeError, TypeError, ValueError) as error:
        return f"{type(error).__name__}: {error}"
    return observation.failed.get(0)


HUNYUAN_SCALING = {
    "type": "dynamic",
    "alpha": 1000.0,
    "factor": 1.0,
    "beta_fast": 32,
    "beta_slow": 1,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
}
"""The form of Hunyuan's published ``rope_scaling`` (issue 32): a "dynamic" type with a fixed ``alpha``, and YaRN's
keys, which its rotary embedding does not read (their values do not matter here)."""


@pytest.mark.parametrize("model_type", ["hunyuan_v1_dense", "hunyuan_v1_moe"])
def test_hunyuans_dynamic_alpha_with_extra_keys_is_served_as_transformers_serves_it(model_type):
    """transformers turns a "dynamic" rope dict with an ``alpha`` into a fixed NTK base, ``rope_theta * alpha **
    (d / (d - 2))``, and ignores the other keys; posenc did refuse the dict for them. It now reads it, as the object
    and the tiny model do."""
    raw = {
        "model_type": model_type,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "head_dim": 128,
        "num_hidden_layers": 2,
        "rope_theta": 10000.0,
        "max_position_embeddings": 262144,
        "rope_scaling": copy.deepcopy(HUNYUAN_SCALING),
    }
    plan = RotaryPlan.from_config(copy.deepcopy(raw))
    (kind,) = plan.kinds
    assert kind.base == pytest.approx(10000.0 * 1000.0 ** (128 / 126), rel=1e-12)
    assert (kind.rotary_dim, kind.scaling.rope_type, kind.attention_factor) == (128, "default", 1.0)
    assert plan.layers == RotaryPlan.from_config(transformers_config(raw)).layers
    assert rope_oracle.check(raw)[1] == []


def test_a_layer_types_yarn_truncate_transformers_does_not_read_is_refused():
    """transformers 5.23 reads YaRN's ``truncate`` from the top level of ``rope_parameters``
    (``_compute_yarn_parameters``: ``config.rope_parameters.get("truncate", True)``), not from a layer type's dict:
    Beam's sliding layers with ``truncate: False`` get the rounded ramp. posenc read the layer's key and rotated pair
    21 by 0.04859 rad at position 1, the model by 0.04696 (found by tests/config_sweep.py); it now refuses, naming the
    key. A layer dict whose truncate is what transformers uses (true, or absent) still reads."""
    from transformers import BeamConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    yarn = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 2048}
    rope = {"sliding_attention": {**yarn, "truncate": False, "beta_fast": 16.0}, "full_attention": None}
    config = BeamConfig(rope_parameters=copy.deepcopy(rope))
    # what transformers computes for the sliding layers: the ramp of truncate=True, whatever the layer's dict says
    theirs, _ = ROPE_INIT_FUNCTIONS["yarn"](config, "cpu", layer_type="sliding_attention")
    rounded = {**rope, "sliding_attention": {**rope["sliding_attention"], "truncate": True}}
    plan = RotaryPlan.from_config({**config.to_dict(), "rope_parameters": rounded})
    sliding = next(kind for kind in plan.kinds if kind.layer_type == "sliding_attention")
    np.testing.assert_allclose(sliding.inverse_frequencies(), theirs.double().numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match=r"\['sliding_attention'\]\['truncate'\] = False"):
        RotaryPlan.from_config({**config.to_dict(), "rope_parameters": copy.deepcopy(rope)})
