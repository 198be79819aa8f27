"""The differential sweep: every census family, each key its code reads changed one at a time, posenc against the model.

For every configuration class of the census (:func:`posenc_book.zoo.rotary_configs`, the classes tests/test_model_zoo.py
compares), :func:`keys_read` finds, *from transformers' code and not from posenc's table*, the keys the family reads:
``config.<name>`` and ``getattr(config, "<name>")`` in the classes of its modeling module that handle positions (its
attention, rotary embedding, decoder layer and model classes) and its module-level functions, kept where the
configuration class has that field; and the keys of its rope dict that ``modeling_rope_utils`` reads. Keys that cannot
move a position (:data:`NOT_POSITIONAL`: norms' epsilons, dropouts, biases, token ids, sizes of the feed-forward and
experts) are not varied. Each key is changed, one at a time, to other plausible values (:func:`variants`: a flag
flipped, a number doubled and halved, a string to the other values the code compares it with, a list reversed or made
uniform, a None filled in; the rope dict to each rope type with its parameters), in the class's ``config.json``
(``config.to_dict()``), scaled down by tests/rope_oracle.py. For each changed dict, posenc's reading and the tiny model
built from the same dict are compared (:func:`judge`):

- ``"agree"``: the model runs and the plan agrees with it layer by layer (tests/rope_oracle.py's tolerance);
- ``"refused, key named"``: posenc raises a ValueError (or TypeError) whose message names the key changed;
- ``"refused by both"``: posenc refuses and transformers cannot build or run the model either;
- ``"served, transformers refuses"``: posenc reads a dict that transformers' configuration class rejects (a defect
  of posenc, which should refuse it too);
- ``"served, transformers crashes"``: posenc reads a dict that transformers' configuration class accepts but whose
  model transformers cannot build or run (a shape that does not match, an index beyond a table): there is no model
  to compare with, and no evidence against posenc's reading; reported, not counted as posenc's defect;
- ``"refused, key not named"``: posenc refuses, transformers runs, and the message does not name the key;
- ``"misread"``: both read it, and posenc's plan differs from the model.

``"served, transformers refuses"``, ``"refused, key not named"`` and ``"misread"`` are defects: the report lists
each. ``python tests/config_sweep.py`` (``make check-configs``) runs the
whole sweep in two worker processes and writes :data:`REPORT` (versions, date, the hash of posenc's reading code, one
row per case); ``python tests/config_sweep.py llama gemma3`` runs some families and prints their rows. A fast sample
runs in ``make unit`` (tests/test_config_sweep.py), which also refuses a stale report.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import functools
import hashlib
import importlib
import inspect
import json
import math
import os
import re
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import rope_oracle
from huggingface_hub.errors import StrictDataclassClassValidationError

import posenc

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "book" / "posenc_book" / "config_sweep.json"
"""The committed report of the whole sweep, which chapter 15 can read (posenc_book.zoo.config_sweep)."""

READING_CODE = (
    "posenc/config.py", "posenc/_families.py", "posenc/_rope.py", "tests/config_sweep.py", "tests/rope_oracle.py",
)  # fmt: skip
"""The files whose content the report's hash covers (posenc's reading code, and the sweep and oracle that judge
it): a change to any of them makes the report stale."""

LAYERS = 6
"""The layers of a tiny model (more than a period of every default layer pattern but Gemma 3's)."""

VERDICTS = (
    "agree",
    "refused, key named",
    "refused by both",
    "served, transformers refuses",
    "served, transformers crashes",
    "probe blind",
    "not probed",
    "refused, key not named",
    "misread",
)
UNPROBED = ("served, transformers refuses", "served, transformers crashes", "probe blind")
"""Verdicts of a class's defaults after which its variants are not run: its one row becomes ``"not probed"`` with
the reason (a tiny model that does not run on text tokens, as Kyutai's speech model; or hidden states that depend on
the position, as RecurrentGemma's recurrent layers, which restart at position 0)."""
DEFECTS = ("served, transformers refuses", "refused, key not named", "misread")

NOT_POSITIONAL = {
    "vocab_size", "pad_token_id", "bos_token_id", "eos_token_id", "sep_token_id", "cls_token_id",
    "rms_norm_eps", "layer_norm_eps", "norm_eps", "layer_norm_epsilon", "initializer_range", "initializer_factor",
    "attention_dropout", "hidden_dropout", "hidden_dropout_prob", "attention_probs_dropout_prob", "dropout",
    "resid_pdrop", "embd_pdrop", "attn_pdrop", "classifier_dropout", "mlp_dropout", "embedding_dropout",
    "hidden_act", "hidden_activation", "activation_function", "mlp_bias", "attention_bias", "use_cache",
    "tie_word_embeddings", "intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size",
    "num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok", "n_shared_experts",
    "norm_topk_prob", "routed_scaling_factor", "router_aux_loss_coef", "output_router_logits", "n_group",
    "topk_group", "q_lora_rank", "kv_lora_rank", "v_head_dim", "logits_scaling", "embedding_multiplier",
    "residual_multiplier", "final_logit_softcapping", "attn_logit_softcapping", "torch_dtype", "dtype",
    "pretraining_tp", "decoder_sparse_step", "mlp_only_layers", "first_k_dense_replace", "moe_layer_freq",
}  # fmt: skip
"""Keys read by the code that cannot move a position (or are the sizes tests/rope_oracle.py scales down): not varied.
``attention_multiplier`` and ``query_pre_attn_scalar`` are varied: they set the softmax scale the oracle checks."""

ROPE_KEYS = (
    "rope_theta", "partial_rotary_factor", "factor", "original_max_position_embeddings", "low_freq_factor",
    "high_freq_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "truncate",
)  # fmt: skip
"""Keys of a rope dict that ``modeling_rope_utils`` reads (with ``rope_type`` and LongRoPE's factor lists)."""


# --- The keys a family reads, from its code ---------------------------------------------------------------------

_READ = re.compile(r"\bconfig\.([A-Za-z_]\w*)|getattr\(\s*(?:self\.)?config\s*,\s*[\"'](\w+)[\"']")


def positional_sources(config: Any) -> list[str]:
    """The sources of the parts of the family's modeling module that handle positions: every class whose name says
    attention, rotary, rope, decoder layer or (base) model, and every module-level function."""
    return _sources(type(config).__module__.split(".")[2])


@functools.cache
def _sources(family: str) -> list[str]:
    module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    sources = []
    for name, item in vars(module).items():
        if getattr(item, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(item) and (
            any(word in name for word in ("Attention", "Rotary", "Rope", "RoPE", "DecoderLayer", "Layer"))
            or (name.endswith("Model") and "PreTrained" not in name)
        ):
            sources.append(inspect.getsource(item))
        elif inspect.isfunction(item):
            sources.append(inspect.getsource(item))
    return sources


def keys_read(config: Any) -> list[str]:
    """The keys of ``config``'s class that its modeling code reads where it handles positions (sorted), without
    :data:`NOT_POSITIONAL`."""
    fields = {item.name for item in dataclasses.fields(type(config))} | set(type(config).attribute_map or {})
    read = set()
    for source in positional_sources(config):
        for match in _READ.finditer(source):
            read.add(match.group(1) or match.group(2))
    keys = (read & fields) - NOT_POSITIONAL - {"rope_parameters", "rope_scaling"}
    return sorted(key for key in keys if not key.startswith(RECURRENT_PREFIXES))


RECURRENT_PREFIXES = ("mamba_", "ssm_", "conv_", "linear_", "time_step", "lru_", "block_")
"""Sizes of recurrent and convolutional layers (Mamba, gated delta nets, LFM's convolutions): not varied, as
:data:`NOT_POSITIONAL`; the layer types that say which layers attend are."""


def compared_values(config: Any, key: str) -> list[Any]:
    """The string values the modeling code compares ``config.<key>`` with (``== "rope"``, ``in ("a", "b")``)."""
    found: set[str] = set()
    for source in positional_sources(config):
        for match in re.finditer(rf"config\.{key}\s*(?:==|!=|in|not in)\s*([\(\[\{{]?[^\n:]*)", source):
            found.update(re.findall(r"[\"']([\w\-]+)[\"']", match.group(1)))
    return sorted(found)


# --- The values tried --------------------------------------------------------------------------------------------


def _other_numbers(key: str, value: float | int, values: dict[str, Any]) -> list[Any]:
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        if key in ("num_hidden_layers", "num_layers", "n_layer"):
            return [max(1, value - 1), value + 1]
        heads = values.get("num_attention_heads")
        if key in ("num_key_value_heads", "num_kv_heads") and isinstance(heads, int):
            return [d for d in range(1, heads + 1) if heads % d == 0 and d != value][:2]  # (it must divide them)
        return [value * 2, max(1, value // 2)] if value > 1 else [value + 1, value + 2]
    return [value * 2, value / 2] if value else [0.5, 1.0]


def _other_lists(value: list[Any]) -> list[list[Any]]:
    out: list[list[Any]] = []
    if len(value) > 1 and value[::-1] != value:
        out.append(value[::-1])
    if len(set(map(repr, value))) > 1:
        out.append([value[-1]] * len(value))
    if value and all(isinstance(item, bool) or item in (0, 1) for item in value) and len(value) > 1:
        out.append([type(value[0])(i % 2) for i in range(len(value))])
    return out


def _none_filled(annotation: str, key: str, strings: list[str]) -> list[Any]:
    if strings:
        return list(strings)
    if "int" in annotation:
        return [64 if "window" in key else 2]
    if "float" in annotation:
        return [0.5]
    if "bool" in annotation:
        return [True]
    return []


def rope_variants(rope: dict[str, Any], head_dim: int, length: int) -> list[tuple[str, dict[str, Any]]]:
    """The rope dict (flat) changed one way at a time: its base, its partial factor, and each rope type with its
    parameters (YaRN also with the keys DeepSeek's, GPT-OSS's and Qwen's configs vary)."""
    base = {key: value for key, value in rope.items() if key in ("rope_theta", "rope_type", "partial_rotary_factor")}
    theta = float(rope.get("rope_theta") or 10000.0)
    original = max(2, length // 4)
    trained = {"original_max_position_embeddings": original}
    half = head_dim // 2
    out = [
        ("rope_theta", {**rope, "rope_theta": theta * 2}),
        ("partial_rotary_factor", {**rope, "partial_rotary_factor": 0.5}),
        ("rope_type=default", {**base, "rope_type": "default"}),
        ("rope_type=linear", {**base, "rope_type": "linear", "factor": 2.0}),
        ("rope_type=dynamic", {**base, "rope_type": "dynamic", "factor": 2.0, **trained}),
        ("rope_type=yarn", {**base, "rope_type": "yarn", "factor": 4.0, **trained}),
        (
            "yarn: truncate, beta_fast, attention_factor",
            {**base, "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": original,
             "truncate": False, "beta_fast": 16.0, "attention_factor": 1.5},
        ),
        (
            "yarn: mscale, mscale_all_dim",
            {**base, "rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": original,
             "mscale": 1.0, "mscale_all_dim": 0.707},
        ),
        (
            "rope_type=llama3",
            {**base, "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
             "original_max_position_embeddings": original},
        ),
        (
            "rope_type=longrope",
            {**base, "rope_type": "longrope", **trained, "short_factor": [1.0 + i / half for i in range(half)],
             "long_factor": [2.0 + i / half for i in range(half)]},
        ),
    ]  # fmt: skip
    return [(label, changed) for label, changed in out if changed != rope]


def variants(config: Any, values: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(key, label, changed config.json) for every key of :func:`keys_read` and the rope dict, one change each."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    fields = {item.name: str(item.type) for item in dataclasses.fields(type(config))}
    names = dict(type(config).attribute_map or {})
    for key in keys_read(config):
        name = names.get(key, key) if key not in values else key
        value = values.get(name)
        strings = compared_values(config, key)
        if isinstance(value, (bool, int, float)):
            tried = _other_numbers(key, value, values)
        elif isinstance(value, str):
            tried = [item for item in strings if item != value] + [None]
        elif isinstance(value, list):
            tried = _other_lists(value)
        elif value is None:
            tried = _none_filled(fields.get(key, ""), key, strings)
        else:
            tried = []
        for other in tried:
            changed = {**values, name: other}
            if key in ("num_hidden_layers", "num_layers", "n_layer") and isinstance(value, int):
                for list_key, item in values.items():  # the per-layer lists follow the count (cycled)
                    if isinstance(item, list) and len(item) == value and item:
                        changed[list_key] = [item[i % value] for i in range(other)]
            out.append((key, f"{key}={other!r}"[:80], _consistent(changed, values)))
    rope = values.get("rope_parameters")
    if isinstance(rope, dict) and rope:
        head_dim = _head_dim(config)
        length = int(values.get("max_position_embeddings") or 4096)
        nested = [label for label, layer in rope.items() if isinstance(layer, dict)]
        for label in nested or [None]:
            flat = rope[label] if label is not None else rope
            for what, changed in rope_variants(flat, head_dim, length):
                new = copy.deepcopy(rope)
                if label is None:
                    new = changed
                else:
                    new[label] = changed
                key = f"rope_parameters[{label!r}]" if label is not None else "rope_parameters"
                out.append((key, f"{key}: {what}", {**values, "rope_parameters": new}))
    return out


def _consistent(changed: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """Sizes that must agree with the one changed follow it: the key-value heads divide the heads, and the Mamba
    heads' width follows the hidden size (Granite 4.0-H's validator), as a checkpoint's would."""
    heads, kv = changed.get("num_attention_heads"), changed.get("num_key_value_heads")
    if isinstance(heads, int) and isinstance(kv, int) and heads % kv:
        changed["num_key_value_heads"] = math.gcd(heads, kv)
    expand, hidden = changed.get("mamba_expand"), changed.get("hidden_size")
    if isinstance(expand, int) and isinstance(hidden, int) and hidden != values.get("hidden_size"):
        if isinstance(changed.get("mamba_n_heads"), int):
            changed["mamba_d_head"] = max(1, expand * hidden // changed["mamba_n_heads"])
    return changed


def _head_dim(config: Any) -> int:
    for attribute in ("qk_rope_head_dim", "head_dim"):
        value = rope_oracle._attribute(config, attribute)
        if isinstance(value, int) and value > 0:
            return value
    return int(config.hidden_size // config.num_attention_heads)


# --- Judging one changed config ---------------------------------------------------------------------------------


def judge(values: dict[str, Any], model_type: str, key: str) -> tuple[str, str]:
    """The verdict of one changed config.json (see the module docstring) and its detail."""
    try:
        plan: posenc.RotaryPlan | None = posenc.RotaryPlan.from_config(copy.deepcopy(values), model_type=model_type)
        refusal = ""
    except (ValueError, TypeError) as error:
        plan, refusal = None, f"{type(error).__name__}: {error}"
    try:
        built = rope_oracle.tiny({**values, "model_type": values.get("model_type", model_type)}, shrunk=True)
        observation = rope_oracle.observe(built)
    except (*TRANSFORMERS_REFUSES, StrictDataclassClassValidationError) as error:
        theirs = f"{type(error).__name__}: {str(error)[:300]}"
        if plan is None:
            return "refused by both", f"posenc {refusal[:300]} | transformers {theirs}"
        return _served_and_failed(values, model_type), theirs
    served = plan.max_position_embeddings if plan is not None else None
    everywhere = len(observation.failed) == len(observation.positions)
    early = [error for p, error in observation.failed.items() if served is None or p < served]
    if everywhere or (plan is not None and early):  # (beyond the served context, a table may end: GPT-J's)
        theirs = next(iter(observation.failed.values()))
        if plan is None:
            return "refused by both", f"posenc {refusal[:300]} | transformers {theirs[:300]}"
        return "served, transformers crashes", theirs[:300]
    if plan is None:
        named = _names(refusal, key)
        return ("refused, key named" if named else "refused, key not named"), refusal[:400]
    if observation.notes:
        return "probe blind", " | ".join(observation.notes[:2])
    findings = rope_oracle.find(observation)
    differences = rope_oracle.compare(
        plan, findings, observation, plain_scales=rope_oracle.plain_scales(built.config, plan)
    )
    if differences and all(text.endswith("the probe sees nothing of its rotation") for text in differences):
        # (Zaya's queries or keys are zero at position 0: a blind spot of the probe, not a reading)
        return "probe blind", " | ".join(differences[:2])[:500]
    if differences:
        return "misread", " | ".join(differences[:3])[:500]
    return "agree", f"{sum(found.rotates for found in findings.values())} of {len(findings)} layers rotate"


def _served_and_failed(values: dict[str, Any], model_type: str) -> str:
    """Whether transformers' configuration class itself rejects ``values`` (``"served, transformers refuses"``) or
    accepts it and the model fails (``"served, transformers crashes"``)."""
    try:
        with rope_oracle.quiet():
            rope_oracle._config(str(values.get("model_type", model_type)), values)
    except (*TRANSFORMERS_REFUSES, StrictDataclassClassValidationError):
        return "served, transformers refuses"
    return "served, transformers crashes"


TRANSFORMERS_REFUSES = (ValueError, TypeError, RuntimeError, KeyError, AttributeError, IndexError, ZeroDivisionError)
"""What transformers raises building or running a config it cannot serve (with huggingface_hub's
StrictDataclassClassValidationError, a validator of the config class)."""


def _names(message: str, key: str) -> bool:
    """Whether a refusal names the key changed (or, for the rope dict, a key inside it)."""
    if key.startswith("rope_parameters"):
        return "rope" in message or any(name in message for name in ROPE_KEYS)
    return key in message


# --- The sweep ----------------------------------------------------------------------------------------------------


def census_configs() -> list[tuple[str, Any]]:
    """(family, config) of the census classes the sweep varies: those tests/test_model_zoo.py compares (its published
    values in place of defaults transformers cannot run), and not the families posenc leaves out."""
    from test_model_zoo import NOT_ROTARY, REFUSED_BY_BOTH, with_overrides

    from posenc_book.zoo import LEFT_OUT, OVERRIDES, model_type_of, rotary_configs

    chosen = []
    with rope_oracle.quiet():
        for family, config in rotary_configs():
            name = type(config).__name__
            if name in NOT_ROTARY or family in LEFT_OUT or (name in REFUSED_BY_BOTH and name not in OVERRIDES):
                continue
            config = with_overrides(config) if name in OVERRIDES else config
            plan = posenc.RotaryPlan.from_config(config, model_type=model_type_of(config))
            if any(kind.rotates and kind.axes not in (("position",), MROPE_AXES) for kind in plan.kinds):
                continue  # an image or video tower: no image for the one-token probe (the census compares it)
            chosen.append((family, config))
    return chosen


def census_config(name: str) -> tuple[str, Any]:
    """(family, config) of the census class ``name``, built as :func:`census_configs` builds it, without building the
    whole census (the fast sample of tests/test_config_sweep.py)."""
    import transformers
    from test_model_zoo import with_overrides

    from posenc_book.zoo import OVERRIDES

    with rope_oracle.quiet():
        config = getattr(transformers, name)()
    config = with_overrides(config) if name in OVERRIDES else config
    return type(config).__module__.split(".")[2], config


MROPE_AXES = ("time", "height", "width")
"""The axes of M-RoPE, whose text tokens the probe runs (at the same coordinate on every axis)."""


def sweep_config(
    family: str, config: Any, keys: set[str] | None = None, labels: set[str] | None = None
) -> list[dict[str, Any]]:
    """Every case of one configuration class: its base (the shrunk defaults) and each variant (only those of ``keys``
    or with one of ``labels``, if either is given)."""
    from posenc_book.zoo import model_type_of

    model_type = model_type_of(config)
    with rope_oracle.quiet():
        values = rope_oracle._shrunk(
            {**config.to_dict(), "model_type": model_type}, type(config), LAYERS
        )  # the class's config.json, scaled down
        values["model_type"] = config.model_type or model_type
    rows = []
    cases = [("(defaults)", "(the class's defaults)", values), *variants(config, values)]
    if keys is not None or labels is not None:
        cases = [
            case for case in cases if case[0] == "(defaults)" or case[0] in (keys or ()) or case[1] in (labels or ())
        ]
    for number, (key, label, changed) in enumerate(cases):
        if number == 1 and rows[0]["verdict"] in UNPROBED:
            rows[0]["verdict"] = "not probed"  # the defaults' tiny model does not run, or the probe cannot see it
            break
        start = time.perf_counter()
        try:
            verdict, detail = judge(changed, model_type, key)
        except Exception as error:  # noqa: BLE001  (a crash of the harness itself is a row, not an abort)
            verdict, detail = "harness error", f"{type(error).__name__}: {str(error)[:300]}"
        rows.append(_row(family, config, key, label, verdict, detail, time.perf_counter() - start))
    return rows


def _sweep_chunk(indices: list[int]) -> list[dict[str, Any]]:
    import torch

    torch.set_num_threads(1)
    chosen = census_configs()
    rows = []
    for index in indices:
        family, config = chosen[index]
        try:
            found = sweep_config(family, config)
        except Exception as error:  # noqa: BLE001  (a crash of the harness on one class is a row, not an abort)
            found = [
                _row(family, config, "(harness)", "(harness)", "harness error", f"{type(error).__name__}: {error}")
            ]
        rows += found
        with PROGRESS.open("a") as progress:  # (what a long sweep has done so far: each class's rows, a line each)
            progress.write("".join(json.dumps(row) + "\n" for row in found))
    return rows


PROGRESS = ROOT / "_build" / "config_sweep.progress"
"""The rows of each class swept, appended while the sweep runs (not committed)."""


def _row(family: str, config: Any, key: str, label: str, verdict: str, detail: str, seconds: float = 0.0) -> dict:
    return dict(
        family=family,
        config_class=type(config).__name__,
        key=key,
        change=label,
        verdict=verdict,
        detail=detail[:500],
        seconds=round(seconds, 3),
    )


def reading_hash() -> str:
    """The SHA-256 of posenc's reading code (:data:`READING_CODE`)."""
    digest = hashlib.sha256()
    for name in READING_CODE:
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()


def versions() -> dict[str, str]:
    import torch
    import transformers

    return {"transformers": transformers.__version__, "torch": torch.__version__.split("+")[0]}


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_verdict = Counter(row["verdict"] for row in rows)
    return {
        "families": len({row["family"] for row in rows}),
        "classes": len({row["config_class"] for row in rows}),
        "keys": len({(row["config_class"], row["key"]) for row in rows if row["key"] != "(defaults)"}),
        "cases": len(rows),
        "verdicts": {verdict: by_verdict.get(verdict, 0) for verdict in (*VERDICTS, "harness error")},
    }


def run_all(workers: int = 2) -> dict[str, Any]:
    """The whole sweep in ``workers`` processes (``POSENC_SWEEP_WORKERS``, default 2), as the report's dict."""
    start = time.perf_counter()
    count = len(census_configs())
    PROGRESS.parent.mkdir(exist_ok=True)
    PROGRESS.write_text("")
    chunks = [list(range(i, count, workers)) for i in range(workers)]
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(workers) as pool:
        for part in pool.map(_sweep_chunk, chunks):
            rows += part
    rows.sort(key=lambda row: (row["family"], row["config_class"]))
    return {
        "description": "tests/config_sweep.py: every census class, each key its code reads changed one at a time, "
        "posenc's plan against the tiny model (tests/rope_oracle.py)",
        "date": datetime.date.today().isoformat(),
        **versions(),
        "reading_code_sha256": reading_hash(),
        "seconds": round(time.perf_counter() - start, 1),
        "summary": summary(rows),
        "cases": rows,
    }


def main(argv: list[str]) -> int:
    if argv:
        chosen = [(family, config) for family, config in census_configs() if family in argv]
        for family, config in chosen:
            for row in sweep_config(family, config):
                print(f"{row['config_class']:28s} {row['change'][:60]:60s} {row['verdict']:26s} {row['detail'][:150]}")
        return 0
    report = run_all(int(os.environ.get("POSENC_SWEEP_WORKERS", "2")))
    REPORT.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report["summary"], indent=1), f"\n{report['seconds']} s")
    defects = [row for row in report["cases"] if row["verdict"] in (*DEFECTS, "harness error")]
    for row in defects:
        print(f"{row['config_class']:28s} {row['change'][:60]:60s} {row['verdict']:26s} {row['detail'][:200]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
