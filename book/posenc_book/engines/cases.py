"""The matrix's rows: one ``config.json`` per family, as published where a copy was read, and as transformers saves it.

Each :class:`~posenc_book.engines.Case` holds a complete ``config.json`` dict. Where a published file (or a copy of
it) was read, its rotary keys are the file's, as the file spells them (``rope_scaling`` and ``rope_theta`` at the top
level, ``rotary_pct``, ``rotary_dim``, ...), and the keys an engine's loader requires that do not touch positions
(``intermediate_size``, ``rms_norm_eps``, ``vocab_size``, ...) are filled in from the transformers 5.23 configuration
class built from it. Where none was read, the case is the configuration class's defaults, as transformers 5.23
saves them (``config.to_dict()``); its source says so.

:func:`as_saved` gives any case's config as transformers 5.23 writes it back with ``save_pretrained``: every rotary
key folded into ``rope_parameters``, and no ``rope_theta`` or ``rope_scaling`` at the top level. A checkpoint
re-saved with transformers 5 ships that form.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from posenc_book.engines import Case
from posenc_book.zoo import PUBLISHED_CONFIGS

__all__ = ["CASES", "as_saved", "complete"]

_DROPPED = ("_name_or_path", "transformers_version", "dtype", "torch_dtype", "id2label", "label2id", "architectures")


def _transformers_config(values: dict[str, Any]) -> Any:
    from transformers import AutoConfig

    kwargs = copy.deepcopy(values)
    model_type = kwargs.pop("model_type")
    logger = logging.getLogger("transformers")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return AutoConfig.for_model(model_type, **kwargs)
    finally:
        logger.setLevel(level)


def complete(values: dict[str, Any]) -> dict[str, Any]:
    """A published config's keys, with the keys it lacks filled in from its transformers 5.23 configuration class.

    The rotary keys the class derives (``rope_parameters``) are not added when the file spells its rotation with
    the legacy keys: the engines read the file, not transformers' reading of it.
    """
    saved = _transformers_config(values).to_dict()
    legacy = not any(key in values for key in ("rope_parameters",))
    full = {key: value for key, value in saved.items() if key not in _DROPPED}
    if legacy:
        full.pop("rope_parameters", None)
    if "text_config" not in values and isinstance(full.get("text_config"), dict):
        # a file with the text model's keys at its top level (Qwen2.5-VL's): its other keys are the text model's too
        text = full.pop("text_config")
        full.update({key: value for key, value in text.items() if key not in full and key not in _DROPPED})
        if legacy:
            full.pop("rope_parameters", None)
    full.update(copy.deepcopy(values))
    return full


def as_saved(case: Case) -> Case:
    """``case`` with its config as transformers 5.23 writes it back (``save_pretrained``): v5's ``rope_parameters``."""
    config = copy.deepcopy(dict(case.config))
    if case.text_key is not None:
        return case  # composite configs are not re-saved here
    saved = _transformers_config(config).to_dict()
    full = {key: value for key, value in saved.items() if key not in _DROPPED}
    for key in ("rope_scaling", "rope_theta", "rotary_pct", "rotary_emb_base", "partial_rotary_factor", "rotary_dim"):
        if key not in saved:
            full.pop(key, None)
    text_key = case.text_key
    if text_key is None and isinstance(full.get("text_config"), dict) and "text_config" not in case.config:
        text_key = "text_config"  # transformers 5 nests a composite model's text keys (Qwen2.5-VL's)
    return Case(
        case.name,
        case.model_id,
        full,
        case.source + "; re-saved by transformers 5.23 (to_dict)",
        case.covers,
        text_key,
        case.text_model_type,
    )


def _v5(model_type: str) -> dict[str, Any]:
    return _defaults(model_type, legacy=False)


def _published(model_id: str) -> dict[str, Any]:
    return PUBLISHED_CONFIGS[model_id].as_dict(with_class_defaults=True)


def _defaults(model_type: str, *, legacy: bool = True) -> dict[str, Any]:
    """The configuration class's defaults as a ``config.json`` dict.

    ``legacy=True`` spells a flat rope dict as checkpoints published before transformers 5 do: ``rope_theta`` and
    ``partial_rotary_factor`` at the top level, the rest as ``rope_scaling`` (null for the ``"default"`` type);
    per-layer-type dicts that are all equal become that one dict.
    ``legacy=False`` keeps transformers 5.23's ``rope_parameters``, as families released with it publish.
    """
    saved = _transformers_config({"model_type": model_type}).to_dict()
    config = {key: value for key, value in saved.items() if key not in _DROPPED}
    parameters = config.get("rope_parameters")
    if legacy and isinstance(parameters, dict) and "rope_theta" not in parameters:
        # per-layer-type dicts that are all the same (OLMo 3's defaults) are one flat dict in a legacy file
        nested = list(parameters.values())
        if nested and all(isinstance(value, dict) and value == nested[0] for value in nested):
            parameters = config["rope_parameters"] = dict(nested[0])
    if legacy and isinstance(parameters, dict) and "rope_theta" in parameters:
        parameters = dict(config.pop("rope_parameters"))
        config["rope_theta"] = parameters.pop("rope_theta")
        if "partial_rotary_factor" in parameters:
            config["partial_rotary_factor"] = parameters.pop("partial_rotary_factor")
        rope_type = parameters.get("rope_type", "default")
        config["rope_scaling"] = parameters if rope_type != "default" else None  # transformers 4 wrote null
    return config


_PHI35_LONG = [
    1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601, 1.5899999141693115,
    1.600000023841858, 1.6200000047683716, 2.620000123977661, 3.2300000190734863, 3.2300000190734863,
    4.789999961853027, 7.400000095367432, 7.700000286102295, 9.09000015258789, 12.199999809265137,
    17.670000076293945, 24.46000099182129, 28.57000160217285, 30.420001983642578, 30.840002059936523,
    32.590003967285156, 32.93000411987305, 42.320003509521484, 44.96000289916992, 50.340003967285156,
    50.45000457763672, 57.55000305175781, 57.93000411987305, 58.21000289916992, 60.1400032043457,
    62.61000442504883, 62.62000274658203, 62.71000289916992, 63.1400032043457, 63.1400032043457,
    63.77000427246094, 63.93000411987305, 63.96000289916992, 63.970001220703125, 64.02999877929688,
    64.06999969482422, 64.08000183105469, 64.12000274658203, 64.41000366210938, 64.4800033569336,
    64.51000213623047, 64.52999877929688, 64.83999633789062,
]  # fmt: skip
_PHI35_SHORT = [
    1.0, 1.0199999809265137, 1.0299999713897705, 1.0299999713897705, 1.0499999523162842, 1.0499999523162842,
    1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0699999332427979, 1.0999999046325684,
    1.1099998950958252, 1.1599998474121094, 1.1599998474121094, 1.1699998378753662, 1.2899998426437378,
    1.339999794960022, 1.679999828338623, 1.7899998426437378, 1.8199998140335083, 1.8499997854232788,
    1.8799997568130493, 1.9099997282028198, 1.9399996995925903, 1.9899996519088745, 2.0199997425079346,
    2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346,
    2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
    2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0799996852874756,
    2.0899996757507324, 2.189999580383301, 2.2199995517730713, 2.5899994373321533, 2.729999542236328,
    2.749999523162842, 2.8399994373321533,
]  # fmt: skip

_PHI35 = {
    "model_type": "phi3",
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "num_hidden_layers": 32,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "rope_scaling": {"long_factor": _PHI35_LONG, "short_factor": _PHI35_SHORT, "type": "longrope"},
    "sliding_window": 262144,
    "vocab_size": 32064,
}
"""microsoft/Phi-3.5-mini-instruct's config.json, its rotary keys and sizes, as a copy quotes it in full (an ONNX
export recipe, ``get_phi35``, found by a code search whose index does not name the repository)."""

_MINIMAX_M2 = {
    "model_type": "minimax_m2",
    "hidden_size": 3072,
    "intermediate_size": 1536,
    "num_hidden_layers": 62,
    "num_attention_heads": 48,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "rotary_dim": 64,
    "rope_theta": 5000000,
    "max_position_embeddings": 196608,
    "num_local_experts": 256,
    "num_experts_per_tok": 8,
    "use_qk_norm": True,
    "shared_intermediate_size": 0,
    "vocab_size": 200064,
}
"""MiniMaxAI/MiniMax-M2's config.json as test fixtures of other projects quote it (head_dim 128, rotary_dim 64,
rope_theta 5e6, and ``shared_intermediate_size`` 0, which mlx-lm's loader requires, from a second fixture; found by a
code search whose index does not name the repositories); not the file itself."""

_HUNYUAN_7B = {
    "model_type": "hunyuan_v1_dense",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 262144,
    "rms_norm_eps": 1e-5,
    "use_qk_norm": True,
    "rope_theta": 10000,
    "rope_scaling": {"type": "dynamic", "alpha": 1000, "factor": 1},
    "vocab_size": 128167,
}
"""Hunyuan-7B's config.json as test fixtures of other projects quote it (``"dynamic"`` with ``alpha`` 1000: a fixed
NTK base; ``head_dim`` 128 from a second fixture, which transformers 5.23's NTK-alpha rotary needs: without it
``compute_ntk_alpha_rope_parameters`` fails on ``None - 2``); not the file itself."""

_CLASS = (
    "transformers 5.23 configuration class defaults, a flat rope dict spelled with the legacy keys as the family's "
    "checkpoints from before transformers 5 spell it; no published file read"
)
_CLASS_V5 = "transformers 5.23 configuration class defaults, as transformers 5.23 saves them; no published file read"

CASES: tuple[Case, ...] = (
    Case(
        "Llama 3.1 8B",
        "meta-llama/Llama-3.1-8B-Instruct",
        complete(_published("meta-llama/Llama-3.1-8B-Instruct")),
        PUBLISHED_CONFIGS["meta-llama/Llama-3.1-8B-Instruct"].source,
        ("llama3",),
    ),
    Case(
        "GPT-OSS 20B",
        "openai/gpt-oss-20b",
        complete(_published("openai/gpt-oss-20b")),
        PUBLISHED_CONFIGS["openai/gpt-oss-20b"].source,
        ("YaRN, truncate: false", "sliding and full layers"),
    ),
    Case(
        "DeepSeek-V3",
        "deepseek-ai/DeepSeek-V3",
        complete(_published("deepseek-ai/DeepSeek-V3")),
        PUBLISHED_CONFIGS["deepseek-ai/DeepSeek-V3"].source,
        ("MLA", "YaRN with mscale", "interleaved pairs"),
    ),
    Case(
        "Gemma 3 4B",
        "google/gemma-3-4b-it",
        complete(_published("google/gemma-3-4b-it")),
        PUBLISHED_CONFIGS["google/gemma-3-4b-it"].source,
        ("per-layer bases", "linear"),
    ),
    Case(
        "Pythia 1.4B",
        "EleutherAI/pythia-1.4b",
        complete(_published("EleutherAI/pythia-1.4b")),
        PUBLISHED_CONFIGS["EleutherAI/pythia-1.4b"].source,
        ("partial rotary (rotary_pct 0.25)",),
    ),
    Case(
        "Qwen2.5-VL 7B",
        "Qwen/Qwen2.5-VL-7B-Instruct",
        complete({**_published("Qwen/Qwen2.5-VL-7B-Instruct"), "model_type": "qwen2_5_vl"}),
        PUBLISHED_CONFIGS["Qwen/Qwen2.5-VL-7B-Instruct"].source,
        ("M-RoPE",),
        text_model_type="qwen2_5_vl_text",
    ),
    Case(
        "Phi-3.5 mini",
        "microsoft/Phi-3.5-mini-instruct",
        complete(_PHI35),
        "a copy of microsoft/Phi-3.5-mini-instruct's config.json quoted in full (an ONNX export recipe; the code "
        "search's index does not name its repository)",
        ("longrope",),
    ),
    Case(
        "MiniMax-M2",
        "MiniMaxAI/MiniMax-M2",
        complete(_MINIMAX_M2),
        "MiniMax-M2's config.json as test fixtures of other projects quote it (rotary_dim 64 of head_dim 128)",
        ("legacy rotary_dim",),
    ),
    Case(
        "Hunyuan 7B",
        "tencent/Hunyuan-7B-Instruct",
        complete(_HUNYUAN_7B),
        "Hunyuan-7B's config.json as a test fixture of another project quotes it (dynamic, alpha 1000)",
        ("dynamic (NTK alpha)",),
    ),
    Case("Llama 4 (text)", "Llama4TextConfig", _defaults("llama4_text"), _CLASS, ("NoPE layers", "query multiplier")),
    Case("Ministral 3", "Ministral3Config", _v5("ministral3"), _CLASS_V5, ("YaRN, truncate absent", "query multiplier")),
    Case("Mistral 4", "Mistral4Config", _v5("mistral4"), _CLASS_V5, ("MLA", "YaRN", "query multiplier")),
    Case("Gemma 4 (text)", "Gemma4TextConfig", _v5("gemma4_text"), _CLASS_V5, ("proportional", "per-layer bases")),
    Case("Cohere", "CohereConfig", _defaults("cohere"), _CLASS, ("interleaved pairs",)),
    Case("Cohere 2", "Cohere2Config", _defaults("cohere2"), _CLASS, ("NoPE layers", "interleaved pairs")),
    Case("EXAONE 4", "Exaone4Config", _defaults("exaone4"), _CLASS, ("NoPE layers",)),
    Case("SmolLM3", "SmolLM3Config", _defaults("smollm3"), _CLASS, ("NoPE layers",)),
    Case("DeepSeek-V2", "DeepseekV2Config", _defaults("deepseek_v2"), _CLASS, ("MLA", "interleaved pairs")),
    Case("Qwen3-Next", "Qwen3NextConfig", _defaults("qwen3_next"), _CLASS, ("partial rotary 0.25", "linear layers")),
    Case("GLM-4", "Glm4Config", _defaults("glm4"), _CLASS, ("partial rotary 0.5", "interleaved pairs")),
    Case("StableLM", "StableLmConfig", _defaults("stablelm"), _CLASS, ("partial rotary 0.25",)),
    Case("Phi-2", "PhiConfig", _defaults("phi"), _CLASS, ("partial rotary 0.5",)),
    Case("Nemotron", "NemotronConfig", _defaults("nemotron"), _CLASS, ("partial rotary 0.5",)),
    Case("Qwen3", "Qwen3Config", _defaults("qwen3"), _CLASS, ("default",)),
    Case("OLMo 3", "Olmo3Config", _defaults("olmo3"), _CLASS, ("per-layer rope dicts",)),
)  # fmt: skip
"""The families of the matrix, in its row order."""
