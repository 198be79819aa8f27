"""The model zoo: every rotary configuration of the pinned transformers, as posenc reads it (chapter 15).

:func:`rotary_configs` builds, with its defaults, every configuration class defined in transformers' configuration
modules and keeps those that carry rotary parameters; :func:`census` reads each with
:meth:`posenc.RotaryPlan.from_config`; :func:`families_by_rope_type` counts the families per rope type. The same
list is what tests/test_model_zoo.py checks, family by family, against transformers' own rotary classes.

:data:`PUBLISHED_CONFIGS` holds six published ``config.json`` files' rotary keys, each checked against the source it
names (Gemma 3's six ``text_config`` values excepted: no copy of that file could be cited, see its source);
:func:`tiny_model` builds a transformers model from such a dict scaled down, and :func:`posenc_rotation` makes
its attention rotate with posenc's modules, so that a config can be followed to logits (tests/test_zoo_logits.py).
"""

from __future__ import annotations

import copy
import importlib
import inspect
import logging
import pathlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import posenc

__all__ = [
    "LEFT_OUT",
    "OVERRIDES",
    "PUBLISHED_CONFIGS",
    "PublishedConfig",
    "ROTATION_CALL",
    "ZooEntry",
    "census",
    "config_sweep",
    "families_by_rope_type",
    "model_type_of",
    "posenc_rotation",
    "rotary_configs",
    "rotating_directories",
    "tiny_model",
    "trained_length",
]

MODEL_TYPES = {"Qwen3OmniMoeCode2WavConfig": "qwen3_omni_moe_code2wav"}
"""Configuration classes without a ``model_type`` of their own, and the name posenc's table gives them."""

LEFT_OUT = {
    "efficientloftr": "its rotary covers the whole hidden size at 4 x the head's frequencies (partial_rotary_factor "
    "4.0) on an image grid computed inside the module; posenc refuses partial_rotary_factor > 1",
    "musicflamingo": "its angles are audio timestamps times a window position, computed inside the module from "
    "timestamps; no position or coordinate posenc could be given",
    "hunyuan_vl": "its M-RoPE splits the doubled cos/sin table into sections, so the two features of a pair can "
    "follow different axes (not a rotation); posenc refuses mrope_section (and transformers' default config has none)",
}
"""Families posenc cannot serve, with the reason: the census test (tests/test_model_zoo.py) leaves them out and checks
that posenc refuses each with a ValueError; chapter 15 lists them."""

OVERRIDES: dict[str, tuple[dict[str, Any], str]] = {
    "Glm4MoeConfig": (dict(head_dim=128), "default 4096 / 96 heads = 42 features, 21 rotated; GLM-4.5 ships 128"),
    "Glm4vMoeTextConfig": (dict(head_dim=128), "default 4096 / 96 heads = 42 features, 21 rotated; GLM-4.5V ships 128"),
    "Glm4vTextConfig": (
        dict(rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}),
        "GLM-4.1V-9B-Thinking ships partial_rotary_factor 0.5, for which [8, 12, 12] sums to the 32 pairs",
    ),
    "GlmImageTextConfig": (
        dict(rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}),
        "as GLM-4.1V: partial_rotary_factor 0.5 for the default mrope_section [8, 12, 12]",
    ),
    "Qwen3OmniMoeTextConfig": (dict(head_dim=128), "Qwen3-Omni-30B-A3B ships head_dim 128"),
}
"""Configuration classes the census test runs with a published value in place of a default that transformers cannot
run or posenc refuses (class name: the keys replaced, and whose value it is). GLM-Image's is GLM-4.1V's."""

_MENTIONS_ROTARY = re.compile(r"rope_parameters|rope_theta|rope_scaling|rotary")
_ROPE_FIELDS = {"rope_parameters", "rope_theta", "rope_scaling"}


@contextmanager
def _quiet() -> Iterator[None]:
    """transformers logs (does not warn) about defaults while configs are built; keep it quiet."""
    logger = logging.getLogger("transformers")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def rotary_configs() -> list[tuple[str, object]]:
    """(family, config) for every configuration class of transformers that builds with its defaults and rotates.

    The family is the directory of the class's module (``transformers/models/<family>/``). A class is kept if its
    default instance has a non-empty ``rope_parameters``; modules whose source never mentions rotary parameters are
    not imported (about 320 of 530), and classes whose dataclass fields name none of ``rope_parameters``,
    ``rope_theta`` and ``rope_scaling`` are not built (about 140 of 385), which keeps this to a few seconds.

    Returns
    -------
    list of (str, transformers.PreTrainedConfig)
        Sorted by family, then class name.
    """
    import transformers
    from transformers import PreTrainedConfig

    root = pathlib.Path(transformers.__file__).parent / "models"
    found = []
    with _quiet():
        for path in sorted(root.glob("*/configuration_*.py")):
            if not _MENTIONS_ROTARY.search(path.read_text()):
                continue
            module = importlib.import_module(f"transformers.models.{path.parent.name}.{path.stem}")
            for _, cls in sorted(vars(module).items()):
                defined_here = inspect.isclass(cls) and cls.__module__ == module.__name__
                if not (defined_here and issubclass(cls, PreTrainedConfig)):
                    continue
                fixed = _FIXED_ROTARY.get(getattr(cls, "model_type", ""), False)
                if not fixed and not _ROPE_FIELDS & set(getattr(cls, "__dataclass_fields__", _ROPE_FIELDS)):
                    continue  # declares no rotary field: its defaults cannot carry rope_parameters
                try:
                    config = cls()
                except (TypeError, ValueError, AttributeError, KeyError):  # no defaults to build from
                    continue
                if fixed or getattr(config, "rope_parameters", None):
                    found.append((path.parent.name, config))
    return found


_FIXED_ROTARY = {
    model_type: True for model_type, family in posenc.config.FAMILIES.items() if family.rope_form == "fixed"
}
"""Families whose modeling code fixes the rotation without rope parameters (GPT-J, CodeGen): their classes rotate at
their defaults (``rotary_dim`` 64) and are in the census though they carry no ``rope_parameters``."""

ROTATION_CALL = re.compile(
    r"^(?!\s*def )(?!\s*#).*?(_?apply_rotary\w*|_?apply_rope\w*|apply_multidimensional_rope)\(", re.MULTILINE
)
"""A line of a modeling file that calls a rotation function (not its definition, not a comment)."""


def rotating_directories() -> dict[str, tuple[str, ...]]:
    """Every model directory of transformers whose modeling code rotates, with the rotation functions it calls.

    Found from the code, not from posenc's table: a ``modeling_*.py`` with a line that calls a function named
    ``apply_rotary*``, ``apply_rope*`` or ``apply_multidimensional_rope`` (GPT-J's, ESM's, CLVP's ... as well as the
    families that carry ``rope_parameters``). Each is a directory of a family :meth:`posenc.RotaryPlan.from_config`
    reads, or holds ``model_type`` values posenc lists, with the reason, in ``posenc._families.ROTATES_UNREAD``.
    """
    import transformers

    root = pathlib.Path(transformers.__file__).parent / "models"
    found: dict[str, set[str]] = {}
    for path in sorted(root.glob("*/modeling_*.py")):
        calls = {match.group(1).lstrip("_") for match in ROTATION_CALL.finditer(path.read_text())}
        if calls:
            found.setdefault(path.parent.name, set()).update(calls)
    return {directory: tuple(sorted(calls)) for directory, calls in sorted(found.items())}


def model_type_of(config: object) -> str:
    """The ``model_type`` posenc reads ``config`` as: its own, or :data:`MODEL_TYPES`'s name for its class."""
    return MODEL_TYPES.get(type(config).__name__) or str(getattr(config, "model_type", ""))


@dataclass(frozen=True)
class ZooEntry:
    """One configuration class of the zoo and its :class:`posenc.RotaryPlan` (None if posenc refused it)."""

    family: str
    config_class: str
    model_type: str
    plan: posenc.RotaryPlan | None
    refusal: str | None

    @property
    def rope_types(self) -> tuple[str, ...]:
        """The rope types of the rotating layer kinds, in order of first appearance ("axial", "mrope": several axes)."""
        if self.plan is None:
            return ()
        kinds = []
        for kind in self.plan.kinds:
            if kind.rotates:
                kinds.append(kind.scaling.rope_type if kind.n_axes == 1 else _multiaxis_name(kind))
        return tuple(dict.fromkeys(kinds))


def _multiaxis_name(kind: posenc.LayerRotary) -> str:
    return "mrope" if kind.axes == ("time", "height", "width") and kind.frequency_dim == 0 else "axial"


def census() -> list[ZooEntry]:
    """Every configuration of :func:`rotary_configs`, read by :meth:`posenc.RotaryPlan.from_config`.

    A config posenc refuses (its ``ValueError``) is kept with the refusal's message and no plan.
    """
    entries = []
    for family, config in rotary_configs():
        model_type = model_type_of(config)
        try:
            plan, refusal = posenc.RotaryPlan.from_config(config, model_type=model_type), None
        except ValueError as error:
            plan, refusal = None, str(error)
        entries.append(ZooEntry(family, type(config).__name__, model_type, plan, refusal))
    return entries


def families_by_rope_type(entries: list[ZooEntry]) -> dict[str, list[str]]:
    """For each rope type, the sorted families with a layer kind of that type (a family may count under several)."""
    table: dict[str, set[str]] = {}
    for entry in entries:
        for rope_type in entry.rope_types:
            table.setdefault(rope_type, set()).add(entry.family)
    return {rope_type: sorted(families) for rope_type, families in sorted(table.items())}


# --- Published configs -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PublishedConfig:
    """The rotary keys of a model's published ``config.json``, the sizes they depend on, and where they were checked.

    ``values`` holds only keys the published file has (other keys are left out); ``class_defaults`` the keys a
    reader needs that the file leaves to transformers' configuration class (empty when the file says all).
    """

    model_id: str
    values: dict[str, object]
    source: str
    class_defaults: dict[str, object]

    def as_dict(self, *, with_class_defaults: bool = False) -> dict[str, object]:
        """A deep copy of ``values`` (and of ``class_defaults`` too, if asked), ready to be changed."""
        merged = {**self.values, **(self.class_defaults if with_class_defaults else {})}
        return copy.deepcopy(merged)


def _published(model_id: str, source: str, values: dict[str, object], **class_defaults: object) -> PublishedConfig:
    return PublishedConfig(model_id, values, source, dict(class_defaults))


PUBLISHED_CONFIGS = {
    config.model_id: config
    for config in (
        _published(
            "meta-llama/Llama-3.1-8B-Instruct",
            "sizes, rope_theta and use_scaled_rope: Meta's llama-models, models/sku_list.py (llama3_1_instruct_models, "
            "commit 8c88b8c); the scaling's 8, 1, 4 and 8192: models/llama3/model.py (apply_scaling, commit a9c89c4); "
            "131072 and the rope_scaling keys: transformers' convert_llama_weights_to_hf.py "
            "(CONTEXT_LENGTH_FOR_VERSION)",
            {
                "model_type": "llama",
                "hidden_size": 4096,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "num_hidden_layers": 32,
                "max_position_embeddings": 131072,
                "rope_theta": 500000.0,
                "rope_scaling": {
                    "factor": 8.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 8192,
                    "rope_type": "llama3",
                },
            },
        ),
        _published(
            "google/gemma-3-4b-it",
            "the six keys of the text_config of the published config.json, as copies of the file quote them (found "
            "by a code search whose index does not name their repositories, so none can be cited here: these six "
            "values are the ones to recheck against the file itself); vLLM pull request 21927 lists the file as "
            "lacking sliding_window_pattern; the rest is Gemma3TextConfig's defaults in transformers 5.23 "
            "(class_defaults, checked against the class)",
            {
                "model_type": "gemma3_text",
                "hidden_size": 2560,
                "intermediate_size": 10240,
                "num_hidden_layers": 34,
                "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                "sliding_window": 1024,
            },
            head_dim=256,
            num_attention_heads=8,
            num_key_value_heads=4,
            sliding_window_pattern=6,
            rope_theta=1000000.0,
            rope_local_base_freq=10000.0,
        ),
        _published(
            "openai/gpt-oss-20b",
            "a copy of the published config.json (jihengzhang/jihz-gpt-oss-20b, gpt-oss-20b/config.json, commit "
            "7ec8980), its rotary keys and sizes",
            {
                "model_type": "gpt_oss",
                "hidden_size": 2880,
                "head_dim": 64,
                "num_attention_heads": 64,
                "num_key_value_heads": 8,
                "num_hidden_layers": 24,
                "max_position_embeddings": 131072,
                "sliding_window": 128,
                "layer_types": ["sliding_attention", "full_attention"] * 12,
                "rope_theta": 150000,
                "rope_scaling": {
                    "beta_fast": 32.0,
                    "beta_slow": 1.0,
                    "factor": 32.0,
                    "original_max_position_embeddings": 4096,
                    "rope_type": "yarn",
                    "truncate": False,
                },
            },
        ),
        _published(
            "deepseek-ai/DeepSeek-V3",
            "sizes and YaRN values: DeepSeek's repository, inference/configs/config_671B.json and ModelArgs in "
            "inference/model.py (commit 9b4e978); 163840, 128 key-value heads, rope_theta 10000 and the rope_scaling "
            "keys (mscale and mscale_all_dim 1.0, type yarn) as a copy of the published config.json writes them: the "
            "one quoted in full in vllm-project/vllm-ascend issue 206 (2025-02-28, transformers_version 4.33.1)",
            {
                "model_type": "deepseek_v3",
                "hidden_size": 7168,
                "num_attention_heads": 128,
                "num_key_value_heads": 128,
                "num_hidden_layers": 61,
                "q_lora_rank": 1536,
                "kv_lora_rank": 512,
                "qk_nope_head_dim": 128,
                "qk_rope_head_dim": 64,
                "v_head_dim": 128,
                "max_position_embeddings": 163840,
                "rope_theta": 10000,
                "rope_scaling": {
                    "beta_fast": 32,
                    "beta_slow": 1,
                    "factor": 40,
                    "mscale": 1.0,
                    "mscale_all_dim": 1.0,
                    "original_max_position_embeddings": 4096,
                    "type": "yarn",
                },
            },
        ),
        _published(
            "EleutherAI/pythia-1.4b",
            "sizes, context and rotary-pct 0.25: Pythia's training configuration, models/1.4B/pythia-1.4b.yml "
            "(EleutherAI/pythia, commit 4d0c901); the key names rotary_pct and rotary_emb_base and GPT-NeoX's base "
            "10000 as the published GPT-NeoX configs write them",
            {
                "model_type": "gpt_neox",
                "hidden_size": 2048,
                "num_attention_heads": 16,
                "num_hidden_layers": 24,
                "max_position_embeddings": 2048,
                "rotary_pct": 0.25,
                "rotary_emb_base": 10000,
            },
        ),
        _published(
            "Qwen/Qwen2.5-VL-7B-Instruct",
            "the top level of the published config.json (the text model's keys; NVIDIA/TensorRT-LLM, "
            "tests/unittest/_torch/modeling/test_modeling_qwen2_5vl.py, and a second copy), read as the text model "
            "qwen2_5_vl_text",
            {
                "model_type": "qwen2_5_vl_text",
                "hidden_size": 3584,
                "num_attention_heads": 28,
                "num_key_value_heads": 4,
                "num_hidden_layers": 28,
                "max_position_embeddings": 128000,
                "rope_theta": 1000000.0,
                "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
            },
        ),
    )
}
"""Six published configs (model id: :class:`PublishedConfig`), each value checked against the source it names, but
for the six values of Gemma 3's ``text_config``: no copy of its file could be cited, and its source says so.

Only Gemma 3's file leaves keys to its class (its ``text_config`` is sparse): posenc refuses that dict as it stands,
naming the first missing key, and reads it with the class's defaults added (tests/test_config.py shows both).
"""


def trained_length(plan: posenc.RotaryPlan, kind: posenc.LayerRotary) -> int | None:
    """The context a rotating layer kind was trained on, as its config says it.

    The scaling's ``original_max_position_embeddings`` when the layer's scaling has one (YaRN, llama3, dynamic,
    LongRoPE: the length before the extension), else the config's ``max_position_embeddings``; None if neither.
    """
    original = kind.scaling.original_max_position_embeddings
    return original if original is not None else plan.max_position_embeddings


# --- Tiny models: a config followed to logits -------------------------------------------------------------------


def tiny_model(values: dict[str, object], *, seed: int = 0) -> tuple[object, object]:
    """transformers' config and causal language model built from a config.json dict, with random weights.

    ``values`` is the dict of a ``config.json`` (its ``model_type`` included), already scaled down by the caller (a
    few layers, a small hidden size). The attention is transformers' eager one; the weights come from
    ``torch.manual_seed(seed)``. Returns ``(config, model)``, the model in eval mode.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    kwargs = copy.deepcopy(values)
    model_type = kwargs.pop("model_type")
    with _quiet():
        config = AutoConfig.for_model(model_type, **kwargs)
        config._attn_implementation = "eager"
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config).eval()
    return config, model


_ROTATION_FUNCTIONS = ("apply_rotary_pos_emb", "apply_rotary_pos_emb_interleave")


@contextmanager
def posenc_rotation(model: object, plan: posenc.RotaryPlan) -> Iterator[None]:
    """Inside the block, ``model``'s attention layers rotate with posenc's modules instead of transformers' function.

    Each attention layer of the model (a module whose class name ends in ``Attention`` and that has a
    ``layer_idx``) calls its modeling file's ``apply_rotary_pos_emb`` (or ``apply_rotary_pos_emb_interleave``); in
    the block that name is bound to a function that ignores transformers' cos and sin and rotates the queries and
    keys it is given with :func:`posenc.nn.rotary_embedding` of ``plan.layers[layer_idx]``, at the layer's
    ``position_ids`` (read by a forward pre-hook). Everything else stays transformers': the projections, the
    attention, its softmax scale. The names and hooks are restored on exit.

    Raises
    ------
    ValueError
        If the model has no attention layer whose modeling file defines a rotation function, or a layer of
        ``plan`` that one of them runs does not rotate (the attention would not have called the function).
    """
    import sys

    from posenc.nn import rotary_embedding

    attentions = [
        module
        for module in model.modules()  # type: ignore[attr-defined]
        if type(module).__name__.endswith("Attention") and isinstance(getattr(module, "layer_idx", None), int)
    ]
    modeling = {sys.modules[type(module).__module__] for module in attentions}
    saved = {
        (module, name): getattr(module, name)
        for module in modeling
        for name in _ROTATION_FUNCTIONS
        if hasattr(module, name)
    }
    if not saved:
        raise ValueError("model has no attention layer whose modeling file defines apply_rotary_pos_emb")
    current: dict[str, object] = {}
    modules: dict[posenc.LayerRotary, object] = {}

    def remember(attention: object, args: tuple, kwargs: dict) -> None:
        current["layer"], current["positions"] = attention.layer_idx, kwargs.get("position_ids")  # type: ignore[attr-defined]

    def rotate(q, k, cos, sin, *args, **kwargs):  # transformers' signature; cos and sin are not used
        layer = plan.layers[current["layer"]]  # type: ignore[index]
        if not layer.rotates:
            raise ValueError(f"layer {current['layer']} rotates, but the plan says it does not (NoPE)")
        if layer not in modules:
            modules[layer] = rotary_embedding(layer)
        if current["positions"] is None:
            raise ValueError("call the model with position_ids: posenc_rotation rotates at the positions it is given")
        rope, positions = modules[layer], current["positions"][0]  # type: ignore[index]
        return rope(q, positions=positions), rope(k, positions=positions)  # type: ignore[operator]

    hooks = [module.register_forward_pre_hook(remember, with_kwargs=True) for module in attentions]
    try:
        for module, name in saved:
            setattr(module, name, rotate)
        yield
    finally:
        for (module, name), function in saved.items():
            setattr(module, name, function)
        for hook in hooks:
            hook.remove()


# --- The differential sweep's report ------------------------------------------------------------------------------

SWEEP_REPORT = pathlib.Path(__file__).resolve().parent / "config_sweep.json"
"""The committed report of ``make check-configs`` (tests/config_sweep.py)."""


def config_sweep() -> dict[str, Any]:
    """The differential sweep's report: every census class, each key its code reads changed one at a time.

    The dict holds ``date``, ``transformers`` and ``torch`` (the versions it ran with), ``reading_code_sha256`` (the
    hash of posenc's reading code it ran against), ``seconds``, ``summary`` (families, classes, keys, cases, and the
    count of each verdict) and ``cases`` (one row each: family, config_class, key, change, verdict, detail).

    Raises
    ------
    ValueError
        If the report was made with other versions of transformers or PyTorch than those installed (tests/
        test_config_sweep.py also refuses one made before a change to posenc's reading code).
    """
    import json

    import torch
    import transformers

    report: dict[str, Any] = json.loads(SWEEP_REPORT.read_text())
    installed = {"transformers": transformers.__version__, "torch": torch.__version__.split("+")[0]}
    made = {key: report.get(key) for key in installed}
    if made != installed:
        raise ValueError(
            f"{SWEEP_REPORT.name} was made with {made}, not the installed {installed}: run make check-configs"
        )
    return report
