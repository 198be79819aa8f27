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
import json
import logging
import pathlib
from typing import Any

from posenc_book.engines import Case
from posenc_book.zoo import PUBLISHED_CONFIGS

CORPUS = pathlib.Path(__file__).resolve().parents[3] / "tests" / "data" / "published_configs"
"""Published ``config.json`` files, each stored byte for byte with its source in ``MANIFEST.json``."""

__all__ = ["CASES", "CORPUS", "as_saved", "complete", "published_file", "transformers_config"]

_DROPPED = ("_name_or_path", "transformers_version", "dtype", "torch_dtype", "id2label", "label2id", "architectures")


def transformers_config(values: dict[str, Any]) -> Any:
    """transformers' configuration object of a ``config.json`` dict (``AutoConfig.for_model``), its logging quiet."""
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
    saved = transformers_config(values).to_dict()
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
    saved = transformers_config(config).to_dict()
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
    saved = transformers_config({"model_type": model_type}).to_dict()
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


def published_file(file: str) -> tuple[dict[str, Any], str]:
    """A stored published ``config.json`` (the whole file) and its source, as :data:`CORPUS`'s manifest names it."""
    manifest = json.loads((CORPUS / "MANIFEST.json").read_text())
    entry = next(e for e in manifest["entries"] if e["file"] == file)
    source = entry["source"]
    commit = source["commit"][:7]
    where = f"{entry['checkpoint']}'s config.json, the copy in {source['repo']} ({source['path']}, {commit})"
    return json.loads((CORPUS / file).read_text()), where


def _real(name: str, file: str, covers: tuple[str, ...], **keys: Any) -> Case:
    config, source = published_file(file)
    return Case(name, file.removesuffix(".json").replace("__", "/"), config, source, covers, **keys)


CASES: tuple[Case, ...] = (
    _real("Llama 3.2 3B", "meta-llama__Llama-3.2-3B-Instruct.json", ("llama3",)),
    _real("GPT-OSS 20B", "openai__gpt-oss-20b.json", ("YaRN, truncate: false", "sliding and full layers")),
    _real("DeepSeek-R1", "deepseek-ai__DeepSeek-R1.json", ("MLA", "YaRN with mscale", "interleaved pairs")),
    _real("DeepSeek-V2 Lite", "deepseek-ai__DeepSeek-V2-Lite-Chat.json", ("MLA", "YaRN", "interleaved pairs")),
    _real("Gemma 3 12B", "google__gemma-3-12b-it.json", ("per-layer bases", "linear"), text_key="text_config"),
    _real("Gemma 4 E2B", "google__gemma-4-E2B-it.json", ("proportional", "per-layer bases"), text_key="text_config"),
    _real("Qwen2.5-VL 7B", "Qwen__Qwen2.5-VL-7B-Instruct.json", ("M-RoPE",), text_model_type="qwen2_5_vl_text"),
    _real("Phi-3.5 mini", "microsoft__Phi-3.5-mini-instruct.json", ("longrope",)),
    _real("MiniMax-M2.5", "MiniMaxAI__MiniMax-M2.5.json", ("legacy rotary_dim",)),
    _real("SmolLM3 3B", "HuggingFaceTB__SmolLM3-3B.json", ("NoPE layers",)),
    _real("Qwen3-Next 80B", "Qwen__Qwen3-Next-80B-A3B-Instruct.json", ("partial rotary 0.25", "linear layers")),
    _real("Qwen3 0.6B", "Qwen__Qwen3-0.6B.json", ("default",)),
    _real("GLM-4.5", "zai-org__GLM-4.5.json", ("partial rotary 0.5",)),
    _real("Phi-2", "microsoft__phi-2.json", ("partial rotary 0.4",)),
    _real("LFM2 1.2B", "LiquidAI__LFM2-1.2B.json", ("convolution layers",)),
    _real(
        "Magistral Small 2509",
        "mistralai__Magistral-Small-2509.json",
        ("composite, text_config",),
        text_key="text_config",
    ),
    Case(
        "Pythia 1.4B",
        "EleutherAI/pythia-1.4b",
        complete(_published("EleutherAI/pythia-1.4b")),
        PUBLISHED_CONFIGS["EleutherAI/pythia-1.4b"].source,
        ("partial rotary (rotary_pct 0.25)",),
    ),
    Case(
        "Hunyuan 7B",
        "tencent/Hunyuan-7B-Instruct",
        complete(_HUNYUAN_7B),
        "Hunyuan-7B's config.json as test fixtures of other projects quote it (dynamic, alpha 1000)",
        ("dynamic (NTK alpha)",),
    ),
    Case("Llama 4 (text)", "Llama4TextConfig", _defaults("llama4_text"), _CLASS, ("NoPE layers", "query multiplier")),
    Case(
        "Ministral 3", "Ministral3Config", _v5("ministral3"), _CLASS_V5, ("YaRN, truncate absent", "query multiplier")
    ),
    Case("Mistral 4", "Mistral4Config", _v5("mistral4"), _CLASS_V5, ("MLA", "YaRN", "query multiplier")),
    Case("Cohere", "CohereConfig", _defaults("cohere"), _CLASS, ("interleaved pairs",)),
    Case("Cohere 2", "Cohere2Config", _defaults("cohere2"), _CLASS, ("NoPE layers", "interleaved pairs")),
    Case("EXAONE 4", "Exaone4Config", _defaults("exaone4"), _CLASS, ("NoPE layers",)),
    Case("OLMo 3", "Olmo3Config", _defaults("olmo3"), _CLASS, ("per-layer rope dicts",)),
)
"""The families of the matrix, in its row order: published files first (the stored copies), then a quoted and a
checked one, then configuration-class defaults for families no published file was stored of."""
