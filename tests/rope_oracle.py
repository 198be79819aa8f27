"""The oracle: what a transformers model does with positions, found by running it, and posenc's plan held against it.

:func:`tiny` builds a small transformers model from a ``config.json`` dict (a text model's, or a composite one's:
its ``text_config`` is built), every position key as given and only the sizes that do not touch positions scaled
down (:func:`shrink`), with random weights. :func:`observe` runs it on ONE token at ``position_ids = [[p]]`` for
positions 0, 1, L - 1, L and 4L (L the trained length the config states) and records, through a custom attention
function registered with transformers' ``AttentionInterface``, the query, key and value every attention layer hands
it, the ``scaling`` it passes, and the ``position_embeddings`` the layer received. With one token, attention over the
one key returns its value, so (the probe's attention function returns the value itself, whatever the sinks, masks or
scales) the hidden states reaching every layer do not depend on p; the recorded values are checked to be identical at
every position, which is the probe's first assumption. Then, per layer (:class:`Finding`, by :func:`find`):

- the features that turn: those whose query or key at p differs from p = 0 (after the query's norm ratio);
- the pairs: feature ``a`` pairs with the ``b`` for which ``q[a]**2 + q[b]**2`` keeps its value at every position,
  in every head, in queries and keys;
- the angle of every pair at every position: ``atan2`` of the turn from p = 0 to p, summed over heads, q and k;
- the attention factor: the ``cos`` the layer received at p = 0 (``cos 0 = 1`` times the factor; ``abs`` of a complex
  ``freqs_cis``), where the layer receives its rotation as ``position_embeddings``;
- the query multiplier: the ratio of the query's norm at p to its norm at 0 (a rotation keeps norms);
- the softmax ``scaling`` passed to the attention function.

:func:`compare` holds a :class:`posenc.RotaryPlan` against the findings: the same layers turn, the same features
(a feature posenc turns that the model does not move is accepted only where posenc's own angle is below what the
probe can see at every position), the same pairs, the same angles within the float32 bound of
tests/test_model_zoo.py (twice ``|phi| (ln base + 12) 2**-24``, plus ``1e-5`` rad for reading an angle off float32
vectors), the same attention factor and query multiplier (``1e-5`` relative), and a softmax scale whose ratio to the
model's is one of the family's plain scales (:func:`compare`'s ``plain_scales``).

What the probe cannot see, and says: a position-dependent effect outside the queries and keys (none is known in
transformers' rotary families); a turn too small to show at any probed position; a dynamic scaling at another
sequence length than ``p + 1`` (one token at p is a sequence of p + 1 for ``dynamic_rope_update``; the positions are
run in increasing order, so transformers' grown cache equals a fresh one's); Llama 4's temperature tuning, which reads
the cache length, not ``position_ids``, is probed with a cache that reports p tokens already seen
(:class:`_SeenCache`); an attention that does not call the attention interface (GPT-J, CodeGen, RoFormer, ...) is
probed by its own ``_attn`` where it has one, else the oracle says it saw no attention.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import logging
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

import posenc

EPS32 = 2.0**-24

NO_ATTENTION = ("linear_attention", "conv", "mamba")
"""Layer types without softmax attention (posenc._families.NO_ATTENTION_TYPES): the probe sees none of them."""

PROBE = "posenc_oracle_probe"
"""The name the probe's attention function is registered under in transformers' ``AttentionInterface``."""

# --- Shrinking a config -------------------------------------------------------------------------------------------

_SMALL_INTS = {
    "vocab_size": 96,
    "intermediate_size": 16,
    "moe_intermediate_size": 16,
    "shared_expert_intermediate_size": 16,
    "shared_intermediate_size": 16,
    "expert_intermediate_size": 16,
    "ffn_hidden_size": 16,
    "n_inner": 16,
    "dense_intermediate_size": 16,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "moe_num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_topk": 2,
    "moe_k": 2,
    "top_k": 2,
    "n_shared_experts": 1,
    "num_shared_experts": 1,
    "n_group": 1,
    "topk_group": 1,
    "q_lora_rank": 16,
    "kv_lora_rank": 16,
    "index_n_heads": 2,
    "index_head_dim": 32,
    "index_topk": 4,
    "mamba_d_state": 16,
    "mamba_n_heads": 8,
    "ssm_state_size": 16,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 2,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "linear_num_heads": 2,
    "linear_head_dim": 16,
    "ffn_dim": 16,
    "decoder_ffn_dim": 16,
    "encoder_ffn_dim": 16,
    "block_ff_dim": 16,
    "d_ff": 16,
    "word_embed_proj_dim": 64,
    "vocab_size_per_layer_input": 96,
    "hidden_size_per_layer_input": 16,
}
_DERIVED_WHEN_NONE = {"n_inner", "intermediate_size", "ffn_hidden_size"}
"""Sizes that do not touch positions, and the small value :func:`shrink` gives them (when the config has them)."""

_KV_HEAD_KEYS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num")
_HEADS_KEYS = ("num_attention_heads", "n_head", "encoder_attention_heads", "decoder_attention_heads")
_HIDDEN_KEYS = ("hidden_size", "n_embd", "n_embed", "d_model")


def config_class(model_type: str, composite: str | None = None) -> type | None:
    """The configuration class of ``model_type`` (of ``composite``'s ``text_config``), or None."""
    from transformers import CONFIG_MAPPING

    try:
        cls = CONFIG_MAPPING[composite or model_type]
    except KeyError:
        return None
    if composite is not None:
        cls = (getattr(cls, "sub_configs", None) or {}).get("text_config", cls)
    return cls if isinstance(cls, type) else None


def class_defaults(cls: type | None) -> dict[str, Any]:
    """The field defaults of a configuration class (empty for None)."""
    import dataclasses

    defaults = {}
    for item in dataclasses.fields(cls) if cls is not None and dataclasses.is_dataclass(cls) else ():
        if item.default is not dataclasses.MISSING:
            defaults[item.name] = item.default
    return defaults


def shrink(
    values: Mapping[str, Any],
    *,
    heads: int = 4,
    max_layers: int | None = None,
    defaults: Mapping[str, Any] | None = None,
    attribute_map: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A copy of a text model's ``config.json`` dict with its sizes scaled down and every position key as given.

    The head size is kept (``head_dim`` if the dict or its class has one, else ``hidden_size //
    num_attention_heads``): ``num_attention_heads`` becomes ``heads``, the key-value heads 1, and ``hidden_size``
    64 (``heads`` times the head size where that is derived, so that it is unchanged); :data:`_SMALL_INTS` for the
    feed-forward, expert and recurrent sizes; token ids become 0; a size the dict leaves to its class (``defaults``,
    :func:`class_defaults`) is scaled down too, under the name the class's ``attribute_map`` gives it (GPT-J's
    ``n_head``, ...). With ``max_layers``, a longer model keeps its first ``max_layers``
    layers and every per-layer list is cut to them (the layer pattern of those layers is unchanged when the dict
    lists it).
    """
    out = copy.deepcopy(dict(values))
    defaults = defaults or {}
    names = dict(attribute_map or {})

    def name(key: str) -> str:  # the key a config.json of this class writes for ``key`` (GPT-J's n_head, ...)
        return names[key] if key in names and key not in out else key

    def value_of(key: str) -> Any:
        return out.get(name(key), defaults.get(name(key)))

    def first(keys: tuple[str, ...]) -> Any:
        return next((value_of(key) for key in keys if isinstance(value_of(key), int)), None)

    n_heads, hidden = first(_HEADS_KEYS), first(_HIDDEN_KEYS)
    if isinstance(n_heads, int) and isinstance(hidden, int):
        given_head = value_of("head_dim") if "head_dim" in defaults or not defaults else None  # a field of its class
        derived = hidden // n_heads
        fewer = min(n_heads, heads)
        for key in _HEADS_KEYS:
            if isinstance(value_of(key), int):
                out[name(key)] = fewer
        width = min(hidden, 64) if isinstance(given_head, int) else fewer * derived  # keep a derived head size
        for key in _HIDDEN_KEYS:
            if isinstance(value_of(key), int):
                out[name(key)] = width
    new_heads = value_of("num_attention_heads")
    for key in _KV_HEAD_KEYS:
        value = value_of(key)
        if isinstance(value, int):  # as many as the heads where the model had as many (multi-head), else 1 or 2
            out[name(key)] = new_heads if value == n_heads and isinstance(new_heads, int) else min(value, 2)
    for key, small in _SMALL_INTS.items():
        value = value_of(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > small:
            out[name(key)] = small
        elif value is None and key in _DERIVED_WHEN_NONE and (key in out or key in defaults):
            out[name(key)] = small  # (GPT-J's n_inner: None is 4 * hidden_size)
    if isinstance(out.get("num_experts_per_tok"), int):
        experts = next((out[key] for key in ("num_experts", "num_local_experts", "n_routed_experts") if key in out), 4)
        out["num_experts_per_tok"] = min(out["num_experts_per_tok"], experts or 1)
    for key, value in list(out.items()):
        if key.endswith(("_token_id", "_token_index")) and isinstance(value, int):
            out[key] = 0
        elif key.endswith("_token_id") and isinstance(value, list):
            out[key] = [0]
    expand, mamba_heads = value_of("mamba_expand"), value_of("mamba_n_heads")
    if isinstance(expand, int) and isinstance(mamba_heads, int) and isinstance(value_of("hidden_size"), int):
        # Granite 4.0-H and its kin: the Mamba heads' width follows the (scaled) hidden size
        out[name("mamba_d_head")] = max(1, expand * value_of("hidden_size") // mamba_heads)
        out[name("mamba_n_heads")] = expand * value_of("hidden_size") // out[name("mamba_d_head")]
    n_layers = value_of("num_hidden_layers")
    if max_layers is not None and isinstance(n_layers, int) and n_layers > max_layers:
        out[name("num_hidden_layers")] = max_layers
        # HRM saves (num_hidden_layers, num_layers_per_stack) as (cycles x stack, stack): without the second the
        # capped count is read as one stack's, as from a legacy file (kept, it would contradict the first)
        out.pop("num_layers_per_stack", None)
        for key, value in list(out.items()):
            if isinstance(value, list) and len(value) == n_layers:
                out[key] = value[:max_layers]
    return out


# --- Building the tiny model ----------------------------------------------------------------------------------------


@contextmanager
def quiet() -> Iterator[None]:
    """transformers logs (does not warn) about the configs it builds; keep it quiet."""
    logger = logging.getLogger("transformers")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@dataclass
class Tiny:
    """A tiny model built from a config.json dict: the text config's dict as posenc reads it and the objects."""

    values: dict[str, Any]  # the (shrunk) dict of the part that rotates: the text model's
    model_type: str  # the text model's model_type (transformers' class says it where the dict does not)
    config: Any  # transformers' config object of the text model, as built from the dict
    model: Any  # the text model, eval mode, random weights


def _model_class(config: Any) -> type:
    """The base model class of ``config``: AutoModel's, else its modeling module's ``*Model`` of that config class."""
    from transformers import AutoModel
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    if config.model_type in MODEL_MAPPING_NAMES:
        return AutoModel._model_mapping[type(config)]  # type: ignore[no-any-return]
    family = type(config).__module__.split(".")[2]
    module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    found = [
        cls
        for name, cls in vars(module).items()
        if inspect.isclass(cls) and name.endswith("Model") and getattr(cls, "config_class", None) is type(config)
    ]
    if not found:
        raise LookupError(f"no model class for {type(config).__name__}")
    return min(found, key=lambda cls: len(cls.__name__))


def tiny(values: Mapping[str, Any], *, seed: int = 0, max_layers: int | None = None, shrunk: bool = False) -> Tiny:
    """A :class:`Tiny` model built from a ``config.json`` dict (shrunk by :func:`shrink` unless ``shrunk``).

    The model is the language model transformers builds from the dict (``get_text_config()`` of its config: the
    config itself, or a composite's text part). The dict posenc reads is the part that holds it: the file's
    ``text_config`` where it has one (that is what is shrunk, with the rest of the file as given), else the file.
    A composite whose class builds its text model from its defaults, the file's top-level keys unused (LLaVA-1.5's
    flat file), gets those defaults shrunk as its ``text_config``. Where cutting the layers breaks a rule that ties
    them together (Gemma 4's shared key-value caches), every layer is kept.
    """
    try:
        return _tiny(values, seed, max_layers, shrunk)
    except ValueError as error:
        if max_layers is None or "parameters" in str(error):
            raise
        return _tiny(values, seed, None, shrunk)


def _tiny(values: Mapping[str, Any], seed: int, max_layers: int | None, shrunk: bool) -> Tiny:
    _register()
    values = dict(values)
    model_type = str(values["model_type"])
    whole_class = config_class(model_type)
    nested = isinstance(values.get("text_config"), Mapping)
    part = dict(values["text_config"]) if nested else values
    part_class = config_class(str(part.get("model_type")), None) if nested else whole_class
    if nested and part_class is None:
        part_class = config_class(model_type, model_type)
    if not shrunk:
        part = _shrunk(part, part_class, max_layers)
    whole = {**values, "text_config": part} if nested else dict(part)
    with quiet():
        config = _config(model_type, whole)
        text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
        if text is not config and not nested and not shrunk and _too_big(text):
            # the class built its text model from its own defaults: shrink those, the file's keys as they are
            own = _shrunk({**text.to_dict(), "model_type": text.model_type}, type(text), max_layers)
            config = _config(model_type, {**whole, "text_config": own})
            text = config.get_text_config(decoder=True)
        text._attn_implementation = PROBE
        try:
            model = _build(text, seed)
        except (KeyError, ValueError) as error:  # an attention that does not dispatch through the interface
            if PROBE not in str(error):
                raise
            text._attn_implementation = "eager"
            model = _build(text, seed)
    return Tiny(part, str(text.model_type), text, model)


def _shrunk(part: dict[str, Any], cls: type | None, max_layers: int | None) -> dict[str, Any]:
    attribute_map = getattr(cls, "attribute_map", None) or {}
    return shrink(part, max_layers=max_layers, defaults=class_defaults(cls), attribute_map=attribute_map)


def _config(model_type: str, values: Mapping[str, Any]) -> Any:
    """transformers' config object of a config.json dict. The warnings it gives about the published keys
    (``rope_scaling`` is deprecated, ...) are recorded in :data:`WARNINGS`, not raised: they are the file's."""
    import warnings

    from transformers import AutoConfig

    kwargs = copy.deepcopy(dict(values))
    kwargs.pop("model_type", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = AutoConfig.for_model(model_type, **kwargs)
    WARNINGS.extend(f"{model_type}: {item.category.__name__}: {item.message}" for item in caught)
    return config


WARNINGS: list[str] = []
"""The warnings transformers gave while the oracle built configs (kept, for a caller that wants to show them)."""


def _too_big(config: Any) -> bool:
    hidden = getattr(config, "hidden_size", None)
    return isinstance(hidden, int) and hidden > 1024


MAX_PARAMETERS = 64_000_000
"""The largest tiny model :func:`tiny` builds: a size the shrinking missed raises instead of filling the memory."""


def _build(config: Any, seed: int) -> Any:
    cls = _model_class(config)
    with torch.device("meta"):
        count = sum(parameter.numel() for parameter in cls(config).parameters())
    if count > MAX_PARAMETERS:
        raise ValueError(f"the shrunk {type(config).__name__} still has {count} parameters (> {MAX_PARAMETERS})")
    torch.manual_seed(seed)
    with one_thread():
        return cls(config).eval()


# --- Running it ---------------------------------------------------------------------------------------------------


@dataclass
class Seen:
    """What one attention layer handed the attention function, per position: ``(heads, head_dim)`` float64 arrays,
    and, where the layer called a rotation function of its modeling module, that function's input and output at
    position 0 (q heads then k heads, ``(rows, width)``)."""

    q: dict[int, np.ndarray] = field(default_factory=dict)
    k: dict[int, np.ndarray] = field(default_factory=dict)
    v: dict[int, np.ndarray] = field(default_factory=dict)
    scaling: dict[int, float | None] = field(default_factory=dict)
    cos: dict[int, np.ndarray | None] = field(default_factory=dict)
    rotation: tuple[str, np.ndarray, np.ndarray] | None = None
    via_rotation: bool = False


@dataclass
class Observation:
    """The layers seen (by ``layer_idx``), the positions run, and the positions transformers failed at."""

    positions: tuple[int, ...]
    layers: dict[int, Seen]
    failed: dict[int, str]
    n_layers: int
    notes: list[str] = field(default_factory=list)


_current: dict[str, Any] = {}


def _register() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(PROBE, _probe_attention)


def _probe_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, *args: Any, **kwargs: Any):
    """The attention function of the probe: records q, k, v and the scaling; returns the value (one token)."""
    scaling = kwargs.get("scaling", args[0] if args else None)
    _record(module, query, key, value, scaling)
    groups = query.shape[1] // value.shape[1]
    return value.repeat_interleave(groups, dim=1).transpose(1, 2).contiguous(), None


def _rows(x: Any) -> np.ndarray:
    """A ``(batch 1, heads, seq 1, d)`` or ``(1, 1, heads, d)`` tensor of one token as ``(heads, d)`` float64."""
    return x.detach().reshape(-1, x.shape[-1]).double().numpy().copy()


def _record(module: Any, query: Any, key: Any, value: Any, scaling: Any) -> None:
    index = getattr(module, "layer_idx", None)
    if index is None:
        index = _current["calls"]
    _current["calls"] += 1
    seen = _current["layers"].setdefault(index, Seen())
    p = _current["position"]
    seen.q[p], seen.k[p], seen.v[p] = (x.detach()[0, :, -1, :].double().numpy().copy() for x in (query, key, value))
    seen.scaling[p] = None if scaling is None else float(scaling)
    seen.cos[p] = _current["cos"].pop(id(module), None)
    rotation = _current["rotation"].pop(id(module), None)
    if p == 0 and rotation is not None:
        name, given, returned, _ = rotation
        seen.rotation = (name, given[0], returned[0])


def _cos_of(embeddings: Any) -> np.ndarray | None:
    """The cos a layer received as ``position_embeddings`` (or ``abs`` of a complex ``freqs_cis``), last row."""
    if isinstance(embeddings, torch.Tensor) and embeddings.is_complex():
        return embeddings.detach().abs().reshape(-1, embeddings.shape[-1])[-1].double().numpy()
    if isinstance(embeddings, (tuple, list)) and len(embeddings) == 2 and isinstance(embeddings[0], torch.Tensor):
        cos = embeddings[0].detach()
        return cos.reshape(-1, cos.shape[-1])[-1].double().numpy()
    return None


def _pre_hook(module: Any, args: tuple, kwargs: dict) -> None:
    embeddings = kwargs.get("position_embeddings")
    if embeddings is None:
        embeddings = next((a for a in args if isinstance(a, tuple) and len(a) == 2), None)
    _current["cos"][id(module)] = _cos_of(embeddings)
    _current["attention"] = module


def _rotation_recorder(name: str, function: Any) -> Any:
    """``function`` (a rotation function of a modeling module), recording its first call per attention module and
    position: the queries and keys it is given and returns, ``(rows, width)`` each (one token)."""

    def record(*args: Any, **kwargs: Any) -> Any:
        out = function(*args, **kwargs)
        module = _current.get("attention")
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if module is not None and id(module) not in _current["rotation"] and tensors:
            outs = out if isinstance(out, tuple) else (out,)
            given = [x for x in tensors[:2] if not x.is_complex()]
            returned = [x for x in outs[: len(given)] if isinstance(x, torch.Tensor)]
            if len(given) == len(returned) and all(a.shape == b.shape for a, b in zip(given, returned)):
                if all(a.shape[-1] == given[0].shape[-1] for a in given):
                    _current["rotation"][id(module)] = (
                        name,
                        [_rows(x) for x in given],
                        [_rows(x) for x in returned],
                        module,
                    )
        return out

    return record


ROTATION_FUNCTION_PREFIXES = ("apply_rotary", "apply_rope")


class _SeenCache:
    """A key-value cache that reports ``p`` tokens already seen and keeps nothing: the one token attends to itself
    while the model reads its cache length as p (Llama 4's temperature tuning reads that, not ``position_ids``)."""

    def __new__(cls, seen: int) -> Any:
        from transformers import DynamicCache

        class SeenCache(DynamicCache):
            def get_seq_length(self, layer_idx: int = 0) -> int:
                return seen

            def update(self, key_states: Any, value_states: Any, layer_idx: int, *args: Any, **kwargs: Any) -> Any:
                return key_states, value_states

            def get_mask_sizes(self, query_length: int, layer_idx: int = 0) -> tuple[int, int]:
                return query_length, 0

        return SeenCache()


def _attention_modules(model: Any) -> list[Any]:
    """The model's attention modules, by class name: ``...Attention``, and LongCat-Flash's ``LongcatFlashMLA``
    (without it, no rotation was recorded for LongCat's layers and its de-interleaved output read as halves)."""
    return [module for module in model.modules() if type(module).__name__.endswith(("Attention", "MLA"))]


def positions_of(config: Any) -> tuple[int, ...]:
    """0, 1, L - 1, L and 4L for every trained length L the config states (each rope dict's
    ``original_max_position_embeddings``, else ``max_position_embeddings``, else 4096)."""
    lengths = set()
    rope = getattr(config, "rope_parameters", None) or {}
    dicts = [value for value in rope.values() if isinstance(value, Mapping)] or [rope]
    for layer_dict in dicts:
        length = layer_dict.get("original_max_position_embeddings") if isinstance(layer_dict, Mapping) else None
        lengths.add(int(length or getattr(config, "max_position_embeddings", None) or 4096))
    found = {0, 1}
    for length in lengths:
        found |= {length - 1, length, 4 * length}
    return tuple(sorted(found))


@contextmanager
def one_thread() -> Iterator[None]:
    """PyTorch on one thread: the tiny models' matrices are too small to share, and on a busy machine the threads'
    hand-offs cost 10 ms a product (20 times the whole forward)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def observe(built: Tiny, positions: tuple[int, ...] | None = None, *, seen_cache: bool | None = None) -> Observation:
    """Run ``built.model`` on one token at each position (increasing), recording every attention layer.

    ``seen_cache`` (default: for Llama 4's text model only) passes a :class:`_SeenCache` reporting p tokens seen.
    """
    import sys

    config, model = built.config, built.model
    positions = positions or positions_of(config)
    if seen_cache is None:
        seen_cache = built.model_type in ("llama4_text",)
    attentions = _attention_modules(model)
    hooks = [module.register_forward_pre_hook(_pre_hook, with_kwargs=True) for module in attentions]
    patched = _patch_own_attention(model)
    modules = {sys.modules[type(module).__module__] for module in attentions}
    for module in modules:
        for name, function in list(vars(module).items()):
            if name.startswith(ROTATION_FUNCTION_PREFIXES) and inspect.isfunction(function):
                patched.append((module, name, function))
                setattr(module, name, _rotation_recorder(name, function))
    _current.clear()
    _current.update(layers={}, cos={}, rotation={})
    failed: dict[int, str] = {}
    token = torch.tensor([[1]])
    try:
        with torch.no_grad(), quiet(), one_thread():
            for p in sorted(positions):
                _current.update(position=p, calls=0, rotation={}, attention=None)
                kwargs: dict[str, Any] = dict(input_ids=token, position_ids=torch.tensor([[p]]), use_cache=False)
                if seen_cache:
                    kwargs.update(past_key_values=_SeenCache(p), use_cache=True)
                try:
                    model(**kwargs)
                    _rotations_only()
                except (RuntimeError, IndexError, ValueError, TypeError) as error:
                    failed[p] = f"{type(error).__name__}: {str(error)[:200]}"
                    for seen in _current["layers"].values():
                        for table in (seen.q, seen.k, seen.v, seen.scaling, seen.cos):
                            table.pop(p, None)
    finally:
        for hook in hooks:
            hook.remove()
        for module, name, function in reversed(patched):
            if function is _ABSENT:
                delattr(module, name)
            else:
                setattr(module, name, function)
    layers = _current["layers"]
    n_layers = int(getattr(config, "num_hidden_layers", 0) or 0)
    observation = Observation(tuple(sorted(positions)), dict(sorted(layers.items())), failed, n_layers)
    _check_assumptions(observation)
    return observation


_ABSENT: Any = object()


def _rotations_only() -> None:
    """Layers whose attention the probe's function never saw (an attention that computes its own, as Falcon's does):
    what their rotation function returned stands for what the attention received."""
    for name, given, returned, module in _current["rotation"].values():
        if len(returned) != 2:
            continue
        index = getattr(module, "layer_idx", None)
        if index is None:
            continue
        seen = _current["layers"].setdefault(index, Seen())
        p = _current["position"]
        seen.q[p], seen.k[p] = returned
        seen.v[p] = np.zeros(1)
        seen.scaling[p] = None
        seen.cos[p] = _current["cos"].pop(id(module), None)
        if p == 0:
            seen.rotation = (name, given[0], returned[0])
        seen.via_rotation = True
    _current["rotation"].clear()


def _patch_own_attention(model: Any) -> list[tuple[Any, str, Any]]:
    """Attention modules that compute their own attention in ``_attn(query, key, value, ...)`` (GPT-J, CodeGen):
    bound to a recorder that returns the value as the probe's attention function does."""
    patched = []
    for module in model.modules():
        if getattr(type(module), "_attn", None) is None or not type(module).__name__.endswith("Attention"):
            continue

        def recorder(query: Any, key: Any, value: Any, *args: Any, _module: Any = module, **kwargs: Any) -> Any:
            _record(_module, query, key, value, None)
            groups = query.shape[1] // value.shape[1]
            return value.repeat_interleave(groups, dim=1), None

        patched.append((module, "_attn", module.__dict__.get("_attn", _ABSENT)))
        module._attn = recorder
    return patched


def _check_assumptions(observation: Observation) -> None:
    """The values reaching every layer are the same at every position (the hidden states do not depend on p)."""
    for index, seen in observation.layers.items():
        reference = seen.v.get(min(seen.v)) if seen.v else None
        for p, value in seen.v.items():
            if reference is not None and not np.array_equal(value, reference):
                observation.notes.append(f"layer {index}: the value at position {p} differs from position 0's")
                break


# --- What the model does, found from what it handed the attention ---------------------------------------------------


@dataclass
class Finding:
    """What one attention layer does with positions, found from the recorded queries and keys.

    Features are numbered as the layer's queries are before the rotation (``pre``: where the layer called a rotation
    function, its input; else the features the attention receives, which are the same for every family that does
    not reorder them). ``features``: those that turn (sorted); ``pairs``: ``(a, b)`` with ``a < b``, each turning by
    ``angles[p][i]`` from a towards b (``(a, b) -> (a cos - b sin, b cos + a sin)``); ``unpaired``: turning features
    no partner explains; ``attention_factor``: what the rotation multiplies the turning features by (from the
    rotation function's output over its input at p = 0, else the cos the layer received at p = 0; None: neither
    seen); ``query_ratio[p]``: ``|q_p| / |q_0|``; ``key_ratio[p]`` likewise; ``scaling``: the softmax scale passed;
    ``order``: how the features were numbered.
    """

    blind: bool
    index: int
    head_dim: int
    features: tuple[int, ...]
    pairs: tuple[tuple[int, int], ...]
    unpaired: tuple[int, ...]
    angles: dict[int, np.ndarray]
    attention_factor: float | None
    query_ratio: dict[int, float]
    key_ratio: dict[int, float]
    scaling: float | None
    order: str

    @property
    def rotates(self) -> bool:
        return bool(self.features)


def find(observation: Observation) -> dict[int, Finding]:
    """A :class:`Finding` per attention layer seen at position 0."""
    return {index: _find(index, seen) for index, seen in observation.layers.items() if 0 in seen.q}


def _find(index: int, seen: Seen) -> Finding:
    q0, k0 = seen.q[0], seen.k[0]
    head_dim = q0.shape[-1]
    others = [p for p in sorted(seen.q) if p != 0]
    blind = not (np.linalg.norm(q0) > 0 and np.linalg.norm(k0) > 0)
    if blind:  # zero queries or keys at position 0 show no rotation: said by the finding, not read as NoPE
        q0, k0 = q0 + 1.0, k0 + 1.0
    query_ratio = {p: float(np.linalg.norm(seen.q[p]) / np.linalg.norm(q0)) for p in others}
    key_ratio = {p: float(np.linalg.norm(seen.k[p]) / np.linalg.norm(k0)) for p in others}
    # the features that move once the norm ratios are taken out
    moved = np.zeros(head_dim, dtype=bool)
    for p in others:
        for x0, xp, ratio in ((q0, seen.q[p], query_ratio[p]), (k0, seen.k[p], key_ratio[p])):
            if x0.shape[-1] != head_dim:
                continue
            scale = np.sqrt(np.mean(x0**2)) + 1e-30
            moved |= np.max(np.abs(xp / ratio - x0), axis=0) > 1e-4 * scale
    post_features = tuple(int(i) for i in np.flatnonzero(moved))
    post_pairs, post_unpaired = _pairs(seen, post_features, query_ratio, key_ratio)
    angles = {0: np.zeros(len(post_pairs))}
    for p in others:
        angles[p] = _angles(seen, p, post_pairs, query_ratio[p], key_ratio[p])
    pre, factor, order = _pre_order(seen, post_features)
    pairs = []
    for i, (a, b) in enumerate(post_pairs):
        if pre[a] > pre[b]:  # the same turn seen from the other feature
            for p in angles:
                angles[p][i] = -angles[p][i]
        pairs.append((min(pre[a], pre[b]), max(pre[a], pre[b])))
    cos = seen.cos.get(0)
    if factor is None and cos is not None and post_features:
        values = np.abs(cos[cos != 0]) if np.any(cos != 0) else np.abs(cos)
        factor = float(np.median(values))
    return Finding(
        blind,
        index,
        head_dim,
        tuple(sorted(pre[f] for f in post_features)),
        tuple(pairs),
        tuple(sorted(pre[f] for f in post_unpaired)),
        angles,
        factor,
        query_ratio,
        key_ratio,
        seen.scaling.get(0),
        order,
    )


def _pre_order(seen: Seen, moved: tuple[int, ...]) -> tuple[list[int], float | None, str]:
    """The feature each feature the attention receives comes from before the rotation, the attention factor, and how
    they were found: from the rotation function's input and output at p = 0 (a returned feature that is the given
    feature ``i`` times a constant came from ``i``; the function's slice sits where its output lands in the head)."""
    q0 = seen.q[0]
    heads, head_dim = q0.shape
    identity = list(range(head_dim))
    if seen.rotation is None:
        return identity, None, "as the attention receives them (no rotation function seen)"
    name, given, returned = seen.rotation
    given, returned = given[:heads], returned[:heads]
    if given.shape[0] != heads:
        return identity, None, f"as the attention receives them ({name}'s rows are not the query heads)"
    # where each returned feature lands in the head: the head's feature equal to it
    columns: dict[bytes, list[int]] = {}
    for i in range(head_dim):
        columns.setdefault(q0[:, i].tobytes(), []).append(i)
    lands = {}
    for j in range(returned.shape[1]):
        hits = columns.get(np.ascontiguousarray(returned[:, j]).tobytes(), [])
        if len(hits) == 1:
            lands[j] = hits[0]
    offsets = {lands[j] - j for j in lands}
    if len(lands) != returned.shape[1] or len(offsets) != 1:
        return identity, None, f"as the attention receives them ({name}'s output is not a slice of the head)"
    offset = offsets.pop()
    norms_given = np.linalg.norm(given, axis=0) + 1e-300
    norms_returned = np.linalg.norm(returned, axis=0) + 1e-300
    cosines = (returned.T @ given) / np.outer(norms_returned, norms_given)
    source = np.argmax(cosines, axis=1)
    if np.any(cosines[np.arange(len(source)), source] < 1 - 1e-9) or len(set(source.tolist())) != len(source):
        return identity, None, f"as the attention receives them ({name}'s output at 0 is not its input reordered)"
    pre = list(identity)
    for j, i in enumerate(source):
        pre[offset + j] = offset + int(i)
    factors = [
        float(np.dot(returned[:, j], given[:, i]) / norms_given[i] ** 2)
        for j, i in enumerate(source)
        if offset + j in moved
    ]
    factor = float(np.median(factors)) if factors else None
    return pre, factor, f"before {name}"


def _samples(seen: Seen, p: int, ratio_q: float, ratio_k: float) -> tuple[np.ndarray, np.ndarray]:
    """(rows at 0, rows at p / their norm ratio): every head of q and k stacked, ``(rows, head_dim)``."""
    k_dim = seen.k[0].shape[-1]
    head_dim = seen.q[0].shape[-1]
    at0 = [seen.q[0]]
    atp = [seen.q[p] / ratio_q]
    if k_dim == head_dim:
        at0.append(seen.k[0])
        atp.append(seen.k[p] / ratio_k)
    return np.concatenate(at0), np.concatenate(atp)


def _pairs(
    seen: Seen, features: tuple[int, ...], query_ratio: dict[int, float], key_ratio: dict[int, float]
) -> tuple[tuple[tuple[int, int], ...], tuple[int, ...]]:
    """Pair each turning feature with the one whose sum of squares with it stays put at every position and row.

    For a true pair (a, b), ``xp_a**2 - x0_a**2 = -(xp_b**2 - x0_b**2)`` in every row at every position: the vectors
    of those changes are opposite, which one product of the normalised changes finds; each candidate is then held to
    the sums themselves."""
    if not features:
        return (), ()
    idx = np.array(features)
    changes, sums = [], []
    for p in query_ratio:
        x0, xp = _samples(seen, p, query_ratio[p], key_ratio[p])
        a0, ap = x0[:, idx], xp[:, idx]
        changes.append(ap**2 - a0**2)
        sums.append(a0**2)
    change = np.concatenate(changes)
    size = np.linalg.norm(change, axis=0) + 1e-300
    cosine = (change / size).T @ (change / size)
    np.fill_diagonal(cosine, np.inf)
    partner = np.argmin(cosine, axis=1)
    start = np.concatenate(sums)
    own = np.arange(len(idx))
    before = start + start[:, partner]
    kept = np.max(np.abs(change + change[:, partner]) / (before + 1e-12), axis=0) < 1e-3
    good = (partner[partner] == own) & (cosine[own, partner] < -1 + 1e-3) & kept
    pairs = tuple((int(idx[i]), int(idx[partner[i]])) for i in own if good[i] and i < partner[i])
    return pairs, tuple(int(idx[i]) for i in own if not good[i])


def _angles(seen: Seen, p: int, pairs: tuple[tuple[int, int], ...], ratio_q: float, ratio_k: float) -> np.ndarray:
    """The angle each pair turns by from position 0 to p, from the sums over rows of its cross and dot products."""
    if not pairs:
        return np.zeros(0)
    x0, xp = _samples(seen, p, ratio_q, ratio_k)
    a, b = np.array(pairs).T
    cross = np.sum(x0[:, a] * xp[:, b] - x0[:, b] * xp[:, a], axis=0)
    dot = np.sum(x0[:, a] * xp[:, a] + x0[:, b] * xp[:, b], axis=0)
    return np.arctan2(cross, dot)


# --- posenc's plan held against the findings ------------------------------------------------------------------------


def plan_pairs(layer: posenc.LayerRotary) -> list[tuple[int, int]]:
    """posenc's pairs ``(a, b)`` in the model's features, each turning by posenc's angle from a towards b."""
    n = layer.rotary_dim // 2
    first, second = (
        (np.arange(n) * 2, np.arange(n) * 2 + 1) if layer.layout == "interleaved" else (np.arange(n), np.arange(n) + n)
    )
    order = np.array(layer.feature_order) if layer.feature_order else np.arange(layer.rotary_dim)
    offset = layer.rotary_offset
    return [(offset + int(order[i]), offset + int(order[j])) for i, j in zip(first, second)]


def plan_angles(layer: posenc.LayerRotary, p: int) -> np.ndarray:
    """posenc's angle of every pair at position ``p`` (one token: the sequence is ``p + 1`` long). A layer of several
    axes (M-RoPE) sees a text token at coordinate p on every axis: pair i turns by p times its frequency, whichever
    axis it follows."""
    if layer.n_axes > 1:
        return p * layer.frequencies().sum(axis=0)
    return p * layer.inverse_frequencies(seq_len=p + 1)


def _wrapped(x: np.ndarray) -> np.ndarray:
    return np.abs((x + np.pi) % (2 * np.pi) - np.pi)


def compare(
    plan: posenc.RotaryPlan,
    findings: Mapping[int, Finding],
    observation: Observation,
    *,
    plain_scales: tuple[float, ...] = (),
) -> list[str]:
    """Every difference between ``plan`` and the model's findings, as sentences (empty: they agree).

    ``plain_scales``: the softmax scales the family's attention uses without rotary scaling (``head_dim ** -0.5``
    and the like); a layer's recorded scaling divided by posenc's ``softmax_scale`` must be one of them (skipped if
    empty).
    """
    problems = [f"probe: {note}" for note in observation.notes]
    served = plan.max_position_embeddings
    for p, error in observation.failed.items():
        if served is None or p < served:  # (beyond the served context, a table of that length may end: GPT-J's)
            problems.append(f"transformers fails at position {p}: {error}")
    if not findings and not observation.failed and all(layer.layer_type in NO_ATTENTION for layer in plan.layers):
        return problems  # no attention layer at all (Granite 4.0-H's default: every layer Mamba), as posenc says
    if not findings:
        failed = "; ".join(f"at {p}: {error}" for p, error in observation.failed.items())
        reason = f" (transformers failed {failed})" if failed else ""
        return [*problems, f"the model has no attention layer the probe saw{reason}"]
    for index, found in findings.items():
        if index >= len(plan.layers):
            problems.append(f"layer {index}: the model has it, posenc's plan has {len(plan.layers)} layers")
            continue
        layer = plan.layers[index]
        problems += [f"layer {index}: {text}" for text in _compare_layer(layer, found, plain_scales)]
    return problems


def _compare_layer(layer: posenc.LayerRotary, found: Finding, plain_scales: tuple[float, ...]) -> list[str]:
    if found.blind:
        return ["its queries or keys are zero at position 0: the probe sees nothing of its rotation"]
    problems = []
    if layer.head_dim != found.head_dim:
        return [f"head of {found.head_dim} features, posenc says {layer.head_dim}"]
    positions = sorted(found.angles)
    if layer.query_scaling is not None and layer.query_scaling.kind != "learned_log":
        theirs = np.array([found.query_ratio.get(p, 1.0) for p in positions])
        factors = layer.query_scaling.factors(positions)
        ours = factors / factors[0]
    else:
        theirs = np.array([found.query_ratio.get(p, 1.0) for p in positions])
        ours = np.ones(len(positions))
    if not np.allclose(theirs, ours, rtol=1e-5, atol=0):
        problems.append(f"query multiplier at positions {positions}: {theirs.round(6)}, posenc {ours.round(6)}")
    if plain_scales and found.scaling is not None:
        ratio = found.scaling / layer.softmax_scale
        if not any(math.isclose(ratio, scale, rel_tol=1e-6) for scale in plain_scales):
            problems.append(
                f"softmax scale {found.scaling:.6g}: divided by posenc's softmax_scale {layer.softmax_scale:.6g} it is "
                f"{ratio:.6g}, none of the plain scales {[round(s, 6) for s in plain_scales]}"
            )
    if not layer.rotates:
        if found.rotates:
            problems.append(f"turns {len(found.features)} features, posenc says it does not rotate (NoPE)")
        return problems
    ours_pairs = plan_pairs(layer)
    ours_features = {f for pair in ours_pairs for f in pair}
    extra = sorted(set(found.features) - ours_features)
    if extra:
        problems.append(f"turns features posenc leaves alone: {_ranges(extra)} ({len(extra)} of {layer.head_dim})")
    if found.unpaired:
        problems.append(f"features no pair explains: {_ranges(list(found.unpaired))}")
    index_of = {pair: i for i, pair in enumerate(ours_pairs)}
    base_term = math.log(max(layer.base, 2.0)) + 12
    for p in positions:
        phi = plan_angles(layer, p)
        tolerance = 2 * np.abs(phi) * base_term * EPS32 + 1e-5
        visible = tolerance < 0.5  # below, float32 keeps no digit of the angle
        moved_enough = np.abs(np.sin(phi / 2)) > 1e-3
        found_set = set(found.features)
        for i, (a, b) in enumerate(ours_pairs):
            if visible[i] and moved_enough[i] and (a not in found_set or b not in found_set):
                problems.append(f"pair ({a}, {b}) turns by {phi[i]:.4g} rad at {p} for posenc; the model leaves it")
                return problems
    seen_pairs = {}
    for i, (a, b) in enumerate(found.pairs):
        if (a, b) in index_of:
            seen_pairs[i] = (index_of[(a, b)], 1.0)
        elif (b, a) in index_of:
            seen_pairs[i] = (index_of[(b, a)], -1.0)
        else:
            problems.append(f"pairs features ({a}, {b}); posenc does not")
    if problems:
        return problems
    for p in positions:
        phi = plan_angles(layer, p)
        tolerance = 2 * np.abs(phi) * base_term * EPS32 + 1e-5
        for i, (j, sign) in seen_pairs.items():
            difference = _wrapped(found.angles[p][i] - sign * phi[j])
            if difference > tolerance[j]:
                a, b = found.pairs[i]
                problems.append(
                    f"pair ({a}, {b}) at position {p}: angle {found.angles[p][i]:.7g}, posenc {sign * phi[j]:.7g} "
                    f"(wrapped difference {difference:.3g} > {tolerance[j]:.3g})"
                )
                return problems
    if found.attention_factor is not None and not math.isclose(
        found.attention_factor, layer.attention_factor, rel_tol=1e-5
    ):
        problems.append(f"attention factor {found.attention_factor:.7g}, posenc {layer.attention_factor:.7g}")
    return problems


def _ranges(values: list[int]) -> str:
    runs, start = [], None
    for i, value in enumerate(values):
        if start is None:
            start = value
        if i + 1 == len(values) or values[i + 1] != value + 1:
            runs.append(f"{start}" if start == value else f"{start}-{value}")
            start = None
    return ", ".join(runs)


def _attribute(config: Any, key: str) -> Any:
    """``config.key``, or None where it has none or a heterogeneous config has one per layer (Gemma 4)."""
    try:
        return getattr(config, key, None)
    except RuntimeError:  # transformers' AmbiguousGlobalPerLayerAttributeError
        return None


def plain_scales(config: Any, plan: posenc.RotaryPlan) -> tuple[float, ...]:
    """The softmax scales a family's attention may use before any rotary scaling: the inverse square root of a head
    size (the plan's, the config's ``head_dim``, ``qk_head_dim``, ``query_pre_attn_scalar``), the config's
    ``attention_multiplier`` or ``attn_scale``-free 1."""
    sizes = {layer.head_dim for layer in plan.layers}
    for key in ("head_dim", "qk_head_dim", "query_pre_attn_scalar", "v_head_dim"):
        value = _attribute(config, key)
        if isinstance(value, (int, float)) and value:
            sizes.add(value)
    hidden, heads = _attribute(config, "hidden_size"), _attribute(config, "num_attention_heads")
    if hidden and heads:
        sizes.add(hidden // heads)
    scales = {size**-0.5 for size in sizes} | {1.0}
    multiplier = _attribute(config, "attention_multiplier")
    if isinstance(multiplier, (int, float)):
        scales.add(float(multiplier))
    return tuple(sorted(scales))


def check(
    values: Mapping[str, Any],
    *,
    seed: int = 0,
    max_layers: int | None = None,
    shrunk: bool = False,
    built: Tiny | None = None,
) -> tuple[Tiny, list[str] | str]:
    """Build, observe, find, and hold posenc's reading of the same dict against it.

    Returns the tiny model and either the list of differences (empty: agree) or, where posenc refuses the dict, the
    refusal's message prefixed ``"refused: "``.
    """
    built = built or tiny(values, seed=seed, max_layers=max_layers, shrunk=shrunk)
    try:
        plan = posenc.RotaryPlan.from_config(copy.deepcopy(built.values), model_type=built.model_type)
    except ValueError as error:
        return built, f"refused: {error}"
    observation = observe(built)
    findings = find(observation)
    return built, compare(plan, findings, observation, plain_scales=plain_scales(built.config, plan))
