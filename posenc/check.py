r"""What a transformers configuration does with positions, and the pitfalls its keys are known for.

:func:`~posenc.check_config` reads a configuration with :meth:`posenc.RotaryPlan.from_config` (a ``config.json``, the
directory that holds one, its dict, or a transformers config object) and returns a :class:`~posenc.ConfigCheck`: one
:class:`~posenc.KindCheck` per kind of layer (which layers, whether they rotate, the base, the scaling and its
parameters, the rotated features, the pair layout, the axes, the attention factor and the query multiplier),
the defaults the configuration class filled in, and a :class:`~posenc.CheckWarning` for each pitfall the book documents
that the configuration has. ``posenc check config.json`` (``python -m posenc check``) prints the same, or
``--json``. Each warning names the chapter of the book that shows the pitfall, and the threads or code its
claims about other engines were checked against.

The warnings, by code:

``base-only-in-rope-parameters``
    A ``config.json`` keeps its base (not 10000) only inside ``rope_parameters``, as transformers v5 writes
    it: code that reads the top-level ``rope_theta`` with 10000 as its default rotates with 10000.
``rotary-dim-key``
    Partial rotary stated by a ``rotary_dim`` key beside ``head_dim``, which code reading only
    ``partial_rotary_factor`` misses.
``partial-rotary``
    A kind rotates only the first features of each head.
``partial-key-not-read``
    The configuration carries a partial-rotary key that the family's transformers code does not read: it rotates
    the whole head, and an engine that reads the key does not.
``truncate``
    YaRN with ``truncate: false``, which engines that drop the key do not honour.
``nope-layers``
    Some attention layers do not rotate, or the configuration carries a key that switches rotation off; the
    keys' polarity is stated.
``static-yarn``
    YaRN's frequencies do not depend on the input's length: short inputs are scaled too.
``context-beyond-scaling``
    ``max_position_embeddings`` (or ``--context``) reaches beyond ``factor * original_max_position_embeddings``,
    the length the scaling stretches the trained positions to.
``context-beyond-declared``
    ``--context`` reaches beyond the configuration's ``max_position_embeddings``.
``context-condition``
    ``--context N``: a kind fails Xu et al.'s condition on the base at ``N`` positions (chapter 12).
"""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from posenc._families import NO_ATTENTION_TYPES
from posenc._validation import MAX_TABLE_ELEMENTS, check_int
from posenc.base_condition import base_condition_error, base_condition_holds, base_condition_sum
from posenc.config import LayerRotary, RotaryPlan

__all__ = ["CHECK_SCHEMA", "CheckWarning", "ConfigCheck", "ContextCheck", "KindCheck", "check_config"]

CHECK_SCHEMA = "posenc.check/1"
"""The ``"schema"`` of :meth:`ConfigCheck.to_dict` (and of ``posenc check --json``): changed when its keys change."""

_BOOK = {
    7: "chapter 7 (Rotate queries and keys)",
    10: "chapter 10 (Catch positional-encoding bugs)",
    12: "chapter 12 (Choosing the base)",
    13: "chapter 13 (Auditing implementations)",
    14: "chapter 14 (Auditing outside PyTorch)",
    15: "chapter 15 (Rotary embeddings across the model zoo)",
}

_GITHUB = "https://github.com/"


@dataclass(frozen=True)
class CheckWarning:
    """A pitfall a configuration has: what it is, where the book shows it, and what the claims were checked on.

    Attributes
    ----------
    code : str
        A stable name (see the module's notes): ``"truncate"``, ``"nope-layers"``, ...
    message : str
        What the configuration says, what transformers does with it, and what other engines were seen to do.
    see : str
        The chapter (and section or gallery family) of the book that shows the pitfall.
    sources : tuple of str
        The threads (GitHub issues and pull requests) and code each claim about another engine was checked
        against, as URLs or paths.
    """

    code: str
    message: str
    see: str
    sources: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("code", "message", "see"):
            _check_text(getattr(self, name), name)
        if not isinstance(self.sources, tuple) or not all(isinstance(item, str) and item for item in self.sources):
            raise TypeError(f"sources must be a tuple of non-empty str, got {type(self.sources).__name__}")

    def to_dict(self) -> dict[str, Any]:
        """``{"code", "message", "see", "sources"}``, JSON-ready."""
        return {"code": self.code, "message": self.message, "see": self.see, "sources": list(self.sources)}


@dataclass(frozen=True)
class ContextCheck:
    r"""Xu et al.'s condition on the base for one layer kind at a context length (chapter 12).

    The condition asks that :math:`B_m = \sum_i \cos(m\theta_i) \ge 0` at every distance :math:`m` below the
    length, with :math:`\theta_i` the kind's frequencies (its scaling included, at that length).

    Attributes
    ----------
    length : int
        The length :math:`N` checked: the context asked for, or a sliding layer's window where that is shorter.
    holds : bool or None
        Whether :math:`B_m \ge 0` for every :math:`m < N`; None where it cannot be told (a sum within rounding
        of zero) or does not apply (a NoPE layer, several axes).
    first_failure : int or None
        The smallest distance :math:`m < N` with :math:`B_m < 0`, when the condition fails.
    meaning : str
        What the result means, in a sentence.
    """

    length: int
    holds: bool | None
    first_failure: int | None
    meaning: str

    def __post_init__(self) -> None:
        check_int(self.length, "length", minimum=1)
        if self.holds is not None and not isinstance(self.holds, bool):
            raise TypeError(f"holds must be a bool or None, got {type(self.holds).__name__} {self.holds!r}")
        if self.first_failure is not None:
            check_int(self.first_failure, "first_failure", minimum=1, maximum=self.length - 1)
            if self.holds is not False:
                raise ValueError(f"first_failure must be None unless holds is False, got {self.first_failure}")
        _check_text(self.meaning, "meaning")

    def to_dict(self) -> dict[str, Any]:
        """``{"length", "holds", "first_failure", "meaning"}``, JSON-ready."""
        return {
            "length": self.length,
            "holds": self.holds,
            "first_failure": self.first_failure,
            "meaning": self.meaning,
        }


@dataclass(frozen=True)
class KindCheck:
    """One kind of layer of a :class:`~posenc.ConfigCheck`: the :class:`posenc.LayerRotary` and the layers that have it.

    Attributes
    ----------
    kind : LayerRotary
        What the layers do with positions (:attr:`posenc.RotaryPlan.kinds`).
    layers : tuple of int
        The indices of the layers of this kind.
    context : ContextCheck or None
        Xu et al.'s condition at the ``context`` length :func:`~posenc.check_config` was given, else None.
    """

    kind: LayerRotary
    layers: tuple[int, ...]
    context: ContextCheck | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, LayerRotary):
            raise TypeError(f"kind must be a posenc.LayerRotary, got {type(self.kind).__name__}")
        if not isinstance(self.layers, tuple) or not self.layers:
            raise TypeError(f"layers must be a non-empty tuple of layer indices, got {type(self.layers).__name__}")
        for index in self.layers:
            check_int(index, "layers", minimum=0, accepted="a tuple of layer indices (ints >= 0)")
        if self.context is not None and not isinstance(self.context, ContextCheck):
            raise TypeError(f"context must be a posenc.ContextCheck or None, got {type(self.context).__name__}")

    @property
    def attention(self) -> bool:
        """Whether the layers attend at all (False for recurrent and convolutional layers, which have no positions)."""
        return self.kind.layer_type not in NO_ATTENTION_TYPES

    @property
    def rotated_features(self) -> tuple[int, int] | None:
        """``(first, stop)``: features ``first`` to ``stop - 1`` of each head are rotated; None for a NoPE layer."""
        if not self.kind.rotates:
            return None
        return self.kind.rotary_offset, self.kind.rotary_offset + self.kind.rotary_dim

    def scaling_parameters(self) -> dict[str, Any]:
        """The scaling's parameters that differ from their defaults (YaRN's ramp and ``truncate`` always)."""
        scaling = self.kind.scaling
        shown: dict[str, Any] = {}
        for item in fields(scaling):
            if not item.init or item.name in ("rope_type", "rope_theta"):
                continue
            value = getattr(scaling, item.name)
            always = scaling.rope_type == "yarn" and item.name in ("beta_fast", "beta_slow", "truncate")
            if value is None or (value == item.default and not always):
                continue
            shown[item.name] = list(value) if isinstance(value, tuple) else value
        return shown

    def to_dict(self) -> dict[str, Any]:
        """The kind as JSON-ready values (see :meth:`ConfigCheck.to_dict`)."""
        kind = self.kind
        rotated = self.rotated_features
        query = kind.query_scaling
        return {
            "layer_type": kind.layer_type,
            "layers": list(self.layers),
            "attention": self.attention,
            "rotates": kind.rotates,
            "head_dim": kind.head_dim,
            "rotary_dim": kind.rotary_dim,
            "rotated_features": None if rotated is None else list(rotated),
            "layout": kind.layout if kind.rotates else None,
            "base": kind.base if kind.rotates else None,
            "scaling": {"rope_type": kind.scaling.rope_type, **self.scaling_parameters()} if kind.rotates else None,
            "axes": list(kind.axes) if kind.rotates else [],
            "attention_factor": kind.attention_factor,
            "softmax_scale": kind.softmax_scale,
            "query_multiplier": None
            if query is None
            else {"kind": query.kind, "scale": query.scale, "length": query.length},
            "context": None if self.context is None else self.context.to_dict(),
        }


@dataclass(frozen=True)
class ConfigCheck:
    """What :func:`~posenc.check_config` found: the plan, a :class:`~posenc.KindCheck` per layer kind, the warnings.

    Attributes
    ----------
    source : str
        What was read: a path, or ``"a <class name> object"``.
    part : str or None
        The sub-configuration read (``"text_config"`` of a composite ``config.json``), or None for the top level.
    plan : RotaryPlan
        The plan :meth:`posenc.RotaryPlan.from_config` read.
    kinds : tuple of KindCheck
        One per distinct layer kind, in order of first appearance.
    warnings : tuple of CheckWarning
        The pitfalls found, in the order of the module's notes; empty for none.
    context : int or None
        The context length the base and scaling were checked at, if one was given.
    """

    source: str
    part: str | None
    plan: RotaryPlan
    kinds: tuple[KindCheck, ...]
    warnings: tuple[CheckWarning, ...]
    context: int | None = None

    def __post_init__(self) -> None:
        _check_text(self.source, "source")
        if self.part is not None:
            _check_text(self.part, "part")
        if not isinstance(self.plan, RotaryPlan):
            raise TypeError(f"plan must be a posenc.RotaryPlan, got {type(self.plan).__name__}")
        if not isinstance(self.kinds, tuple) or not all(isinstance(kind, KindCheck) for kind in self.kinds):
            raise TypeError("kinds must be a tuple of posenc.KindCheck, one per kind of the plan")
        if tuple(kind.kind for kind in self.kinds) != self.plan.kinds or any(
            kind.layers != self.plan.layers_of(kind.kind) for kind in self.kinds
        ):
            raise ValueError("kinds must hold the plan's kinds, in its order, each with its layers")
        if not isinstance(self.warnings, tuple) or not all(isinstance(item, CheckWarning) for item in self.warnings):
            raise TypeError("warnings must be a tuple of posenc.CheckWarning")
        if self.context is not None:
            check_int(self.context, "context", minimum=2)

    def to_dict(self) -> dict[str, Any]:
        """The check as JSON-ready values, the schema :data:`posenc.CHECK_SCHEMA`.

        Keys: ``schema``, ``source``, ``part``, ``model_type``, ``config_class``, ``modeling_source``,
        ``num_layers``, ``max_position_embeddings``, ``context``, ``kinds`` (one dict per kind: ``layer_type``,
        ``layers``, ``attention``, ``rotates``, ``head_dim``, ``rotary_dim``, ``rotated_features``, ``layout``,
        ``base``, ``scaling``, ``axes``, ``attention_factor``, ``softmax_scale``, ``query_multiplier``,
        ``context``), ``defaults_used`` and ``warnings`` (each ``code``, ``message``, ``see``, ``sources``).
        """
        plan = self.plan
        return {
            "schema": CHECK_SCHEMA,
            "source": self.source,
            "part": self.part,
            "model_type": plan.model_type,
            "config_class": plan.config_class,
            "modeling_source": plan.source,
            "num_layers": len(plan.layers),
            "max_position_embeddings": plan.max_position_embeddings,
            "context": self.context,
            "kinds": [kind.to_dict() for kind in self.kinds],
            "defaults_used": {key: _json_value(value) for key, value in plan.defaults_used.items()},
            "warnings": [warning.to_dict() for warning in self.warnings],
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON (what ``posenc check --json`` prints)."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)

    def render(self, width: int = 80) -> str:
        """The check as text lines of at most ``width`` characters (what ``posenc check`` prints).

        Parameters
        ----------
        width : int, default 80
            The line width, at least 60.

        Returns
        -------
        str
        """
        width = check_int(width, "width", minimum=60)
        return "\n".join(_render(self, width))


def check_config(config: object, *, context: int | None = None, model_type: str | None = None) -> ConfigCheck:
    r"""Read a transformers configuration and say what each kind of layer does with positions, and its pitfalls.

    Parameters
    ----------
    config : str, os.PathLike, Mapping or transformers config object
        A path to a ``config.json`` or to the directory that holds one (a model directory), the dict of a
        ``config.json``, or a transformers config object. A composite configuration whose top level has no
        rotary keys of its own (a vision-language model) is read through its ``text_config``.
    context : int or None, default None
        A context length :math:`N \ge 2`: each rotating one-axis kind is checked against Xu et al.'s condition
        on the base at :math:`N` positions (its scaling at that length included), and :math:`N` against the
        declared context and the length the scaling was made for.
    model_type : str or None, default None
        Overrides the configuration's ``model_type`` (:meth:`posenc.RotaryPlan.from_config`).

    Returns
    -------
    ConfigCheck
        The plan, one :class:`~posenc.KindCheck` per layer kind, and the warnings.

    Raises
    ------
    TypeError
        If ``config`` is none of the above, or a value of it has the wrong type.
    ValueError
        If :meth:`posenc.RotaryPlan.from_config` refuses the configuration (the message names the key), the path
        holds no readable ``config.json``, or ``context`` is not an int :math:`\ge 2`.

    Notes
    -----
    The warnings about a key's place in the file (``base-only-in-rope-parameters``, ``rotary-dim-key``,
    ``partial-key-not-read``) need the file's dict: a config object, which transformers has already
    standardised, gets the others.

    Examples
    --------
    >>> gpt_oss = {"model_type": "gpt_oss", "hidden_size": 2880, "head_dim": 64, "num_attention_heads": 64,
    ...            "num_hidden_layers": 4, "max_position_embeddings": 131072, "sliding_window": 128,
    ...            "layer_types": ["sliding_attention", "full_attention"] * 2,
    ...            "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
    ...                             "truncate": False, "original_max_position_embeddings": 4096},
    ...            "rope_theta": 150000}
    >>> report = check_config(gpt_oss)
    >>> [kind.layers for kind in report.kinds], report.kinds[0].kind.base
    ([(0, 2), (1, 3)], 150000.0)
    >>> [warning.code for warning in report.warnings]
    ['truncate', 'static-yarn']
    """
    source, raw, part = _load(config)
    if context is not None:
        context = check_int(context, "context", minimum=2)
    plan, raw, part = _plan(raw, part, model_type)
    if context is not None:
        widest = max((kind.head_dim // 2 for kind in plan.kinds if kind.rotates), default=1)
        check_int(context, "context", minimum=2, maximum=MAX_TABLE_ELEMENTS // max(widest, 1))
    window = raw.get("sliding_window") if isinstance(raw, Mapping) else getattr(raw, "sliding_window", None)
    kinds = []
    for kind in plan.kinds:
        layers = plan.layers_of(kind)
        condition = None
        if context is not None:
            if "sliding" in kind.layer_type and isinstance(window, int) and 2 <= window < context:
                condition = _condition(kind, window, True)  # a sliding layer sees its window, not the context
            else:
                condition = _condition(kind, context)
        kinds.append(KindCheck(kind, layers, condition))
    file = raw if isinstance(raw, Mapping) else None
    warnings = _warnings(plan, tuple(kinds), file, context)
    return ConfigCheck(source, part, plan, tuple(kinds), warnings, context)


# --- Reading ------------------------------------------------------------------------------------------------


def _load(config: object) -> tuple[str, object, str | None]:
    """``(source, config, part)``: a path read as the dict of its ``config.json``, anything else as it is."""
    if isinstance(config, (str, os.PathLike)):
        path = Path(config)
        if path.is_dir():
            path = path / "config.json"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise ValueError(f"config: cannot read {str(path)!r}: {error.strerror or error}") from error
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"config: {str(path)!r} is not JSON: {error}") from error
        if not isinstance(data, dict):
            raise ValueError(f"config: {str(path)!r} holds a JSON {type(data).__name__}, not an object")
        return str(path), data, None
    if isinstance(config, Mapping):
        return "a dict", config, None
    return f"a {type(config).__name__} object", config, None


def _plan(raw: object, part: str | None, model_type: str | None) -> tuple[RotaryPlan, object, str | None]:
    """The plan of ``raw``, or of its ``text_config`` when the top level is a composite without rotary keys."""
    text = raw.get("text_config") if isinstance(raw, Mapping) else getattr(raw, "text_config", None)
    rotary_keys = ("rope_parameters", "rope_scaling", "rope_theta")
    if isinstance(raw, Mapping):
        composite = text is not None and not any(key in raw for key in rotary_keys)
    else:
        composite = text is not None and text is not raw and getattr(raw, "rope_parameters", None) is None
    if composite:
        if model_type is None and isinstance(text, Mapping) and "model_type" not in text:
            raise ValueError(
                "config['text_config'] has no model_type: pass model_type= (--model-type) for the text model"
            )
        return RotaryPlan.from_config(text, model_type=model_type), text, "text_config"
    return RotaryPlan.from_config(raw, model_type=model_type), raw, part


def _check_text(value: object, name: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a non-empty str, got {type(value).__name__} {value!r}")
    if not value:
        raise ValueError(f"{name} must be a non-empty str, got ''")


def _json_value(value: object) -> Any:
    """``value`` with tuples as lists and mappings as dicts, for JSON."""
    if isinstance(value, Mapping):
        return {str(key): _json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(item) for item in value]
    return value


# --- Xu et al.'s condition -----------------------------------------------------------------------------------


def _frequencies_at(kind: LayerRotary, length: int) -> np.ndarray:
    """The kind's inverse frequencies at a sequence of ``length`` positions (the dynamic and longrope ones too)."""
    return kind.inverse_frequencies(float(length) if kind.scaling.rope_type in ("dynamic", "longrope") else None)


def _condition(kind: LayerRotary, length: int, window: bool = False) -> ContextCheck | None:
    """Xu et al.'s condition for ``kind`` at ``length`` positions (None for a layer without attention); ``window``:
    ``length`` is the sliding window, the farthest a sliding layer looks back, not the context."""
    within = f" (a sliding layer looks back {length} positions at most: checked at its window)" if window else ""
    if not kind.rotates:
        if kind.layer_type in NO_ATTENTION_TYPES:
            return None
        meaning = "no rotation (NoPE): the condition is about rotated pairs and does not apply"
        return ContextCheck(length, None, None, meaning)
    if kind.n_axes != 1:
        meaning = f"rotates on {kind.n_axes} axes {kind.axes}: the condition is stated for one axis, not checked"
        return ContextCheck(length, None, None, meaning)
    theta = _frequencies_at(kind, length)
    first = _first_negative(theta, length, kind.head_dim)
    if first is None:
        meaning = (
            f"B_m >= 0 at every distance m < {length}: by Xu et al.'s criterion a key similar to the query still "
            f"scores above a random one, in expectation, at every distance it attends to{within}"
        )
        return ContextCheck(length, True, None, meaning)
    if first < 0:
        meaning = f"a sum B_m comes within rounding of zero below {length}: its sign cannot be told"
        return ContextCheck(length, None, None, meaning)
    meaning = (
        f"B_m < 0 first at distance m = {first}: there, by Xu et al.'s criterion, a key similar to the query "
        "can score below a random one in expectation. This base does not meet the condition for this context "
        f"(chapter 12 shows which bases do, and that the answer flickers with the base){within}"
    )
    return ContextCheck(length, False, first, meaning)


def _first_negative(theta: np.ndarray, length: int, head_dim: int) -> int | None:
    """The first distance ``m < length`` with ``B_m`` below minus its error bound; None if the condition holds; -1
    if no sum is clearly negative but one lies within its error of zero (its sign cannot be told)."""
    try:
        if base_condition_holds(theta, length, head_dim=head_dim):
            return None
    except ArithmeticError:
        pass
    sums = base_condition_sum(theta, length, head_dim=head_dim)
    tolerance = base_condition_error(theta, length, head_dim=head_dim)
    negative = np.flatnonzero(sums < -tolerance)
    return int(negative[0]) if negative.size else -1


# --- Warnings -----------------------------------------------------------------------------------------------


def _warnings(
    plan: RotaryPlan, kinds: tuple[KindCheck, ...], file: Mapping[str, Any] | None, context: int | None
) -> tuple[CheckWarning, ...]:
    found: list[CheckWarning] = []
    rotating = [kind for kind in kinds if kind.kind.rotates]
    if file is not None:
        found += _base_only_in_rope_parameters(file)
        found += _rotary_dim_key(file, rotating)
    found += _partial_rotary(rotating)
    if file is not None:
        found += _partial_key_not_read(file, rotating)
    found += _truncate(rotating, file)
    found += _nope_layers(plan, kinds, file)
    found += _static_yarn(rotating)
    found += _context_beyond(plan, rotating, context)
    if context is not None:
        found += _context_condition(rotating)
    return tuple(found)


def _rope_dict(file: Mapping[str, Any]) -> Mapping[str, Any] | None:
    parameters = file.get("rope_parameters")
    if not isinstance(parameters, Mapping):
        parameters = file.get("rope_scaling")
    return parameters if isinstance(parameters, Mapping) else None


def _inner_thetas(rope: Mapping[str, Any]) -> dict[str, object]:
    """``{where: rope_theta}`` of a rope dict, flat or nested by layer type."""
    found: dict[str, object] = {}
    if "rope_theta" in rope:
        found["rope_parameters['rope_theta']"] = rope["rope_theta"]
    for key, value in rope.items():
        if isinstance(value, Mapping) and "rope_theta" in value:
            found[f"rope_parameters[{key!r}]['rope_theta']"] = value["rope_theta"]
    return found


def _base_only_in_rope_parameters(file: Mapping[str, Any]) -> list[CheckWarning]:
    rope = _rope_dict(file)
    if rope is None or "rope_theta" in file:
        return []
    inner = {where: value for where, value in _inner_thetas(rope).items() if value != 10000 and value != 10000.0}
    if not inner:
        return []
    shown = ", ".join(f"{where} = {_number(value)}" for where, value in inner.items())
    message = (
        f"The base is only inside the rope dict ({shown}), as transformers v5 writes config.json; there is no "
        "top-level rope_theta. Code that reads the top-level rope_theta with 10000 as its default rotates with "
        "10000, silently: transformers v4 loading such a file, and vLLM's patch_rope_parameters under it "
        "(vllm-project/vllm#42624); LMDeploy's TurboMind read model_arg.get('rope_theta', 10000.0) until "
        "InternLM/lmdeploy#4304."
    )
    return [
        CheckWarning(
            "base-only-in-rope-parameters",
            message,
            f"{_BOOK[10]}, family 11: a base read where the config no longer keeps it",
            (f"{_GITHUB}vllm-project/vllm/pull/42624", f"{_GITHUB}InternLM/lmdeploy/pull/4304"),
        )
    ]


def _rotary_dim_key(file: Mapping[str, Any], rotating: list[KindCheck]) -> list[CheckWarning]:
    rotary_dim = file.get("rotary_dim")
    if not isinstance(rotary_dim, int) or isinstance(rotary_dim, bool):
        return []
    read = sorted({(kind.kind.rotary_dim, kind.kind.head_dim) for kind in rotating})
    understood = "; ".join(f"{r} of {h} features" for r, h in read) or "no rotating layer"
    message = (
        f"rotary_dim = {rotary_dim} states partial rotary outside rope_parameters (a key transformers v5's "
        f"rope_parameters do not hold). Read here as: {understood} rotated. Code that reads only "
        "partial_rotary_factor rotates the whole head: transformers did so for MiniMax-M2's checkpoints "
        "(seen in 5.12.1 and 5.16.0.dev0, huggingface/transformers#48241, fixed by #48486); vLLM applied the "
        "factor a second time to a rotary_dim already scaled (vllm-project/vllm#30384)."
    )
    return [
        CheckWarning(
            "rotary-dim-key",
            message,
            f"{_BOOK[10]}, family 13: two ways to rotate part of a head; {_BOOK[7]}, partial rotary",
            (
                f"{_GITHUB}huggingface/transformers/issues/48241",
                f"{_GITHUB}huggingface/transformers/pull/48486",
                f"{_GITHUB}vllm-project/vllm/pull/30384",
            ),
        )
    ]


def _partial_rotary(rotating: list[KindCheck]) -> list[CheckWarning]:
    partial = [
        kind
        for kind in rotating
        if kind.kind.rotary_offset == 0
        and (kind.kind.rotary_dim < kind.kind.head_dim or kind.kind.scaling.rope_type == "proportional")
    ]
    if not partial:
        return []
    described = []
    for kind in partial:
        k = kind.kind
        if k.scaling.rope_type == "proportional":
            turning = int(k.scaling.partial_rotary_factor * k.head_dim // 2)
            described.append(
                f"{k.layer_type}: proportional, {turning} of the {k.head_dim // 2} pairs turn, at the "
                f"frequencies of the whole head of {k.head_dim}"
            )
        else:
            pairs = f"pairs (i, i + {k.rotary_dim // 2})" if k.layout == "halves" else "pairs (2i, 2i + 1)"
            described.append(
                f"{k.layer_type}: features 0 to {k.rotary_dim - 1} of {k.head_dim} ({pairs}, frequencies "
                f"base^(-2i/{k.rotary_dim}))"
            )
    message = (
        "Only part of each head rotates: "
        + "; ".join(described)
        + ". Engines have dropped the partial factor or built the frequencies over the wrong width: MaxText "
        "rotated the whole head on its M-RoPE path (AI-Hypercomputer/maxtext#4616), vLLM's Bailing-MoE took "
        "rotary_dim as the head and the factor as 1 (vllm-project/vllm#43770), NxD Inference's Gemma 4 built its "
        "proportional frequencies over 128 features instead of 512 (aws-neuron/neuronx-distributed-inference#106)."
    )
    return [
        CheckWarning(
            "partial-rotary",
            message,
            f"{_BOOK[7]}, partial rotary; {_BOOK[10]}, family 13; {_BOOK[15]}, how much of each head rotates",
            (
                f"{_GITHUB}AI-Hypercomputer/maxtext/issues/4616",
                f"{_GITHUB}vllm-project/vllm/pull/43770",
                f"{_GITHUB}aws-neuron/neuronx-distributed-inference/pull/106",
            ),
        )
    ]


def _partial_keys(file: Mapping[str, Any]) -> dict[str, object]:
    """The partial-rotary keys of a config.json, where they are (top level, rope dict, nested rope dicts)."""
    found: dict[str, object] = {}
    if "partial_rotary_factor" in file:
        found["partial_rotary_factor"] = file["partial_rotary_factor"]
    rope = _rope_dict(file)
    if rope is not None:
        if "partial_rotary_factor" in rope:
            found["rope_parameters['partial_rotary_factor']"] = rope["partial_rotary_factor"]
        for key, value in rope.items():
            if isinstance(value, Mapping) and "partial_rotary_factor" in value:
                found[f"rope_parameters[{key!r}]['partial_rotary_factor']"] = value["partial_rotary_factor"]
    return {where: value for where, value in found.items() if value not in (1, 1.0, None)}


def _partial_key_not_read(file: Mapping[str, Any], rotating: list[KindCheck]) -> list[CheckWarning]:
    keys = _partial_keys(file)
    rotary_dim = file.get("rotary_dim")
    if isinstance(rotary_dim, int) and not isinstance(rotary_dim, bool):
        keys["rotary_dim"] = rotary_dim
    whole = [kind for kind in rotating if kind.kind.rotary_offset == 0 and kind.kind.rotary_dim == kind.kind.head_dim]
    if (
        not keys
        or not whole
        or len(whole) != len(rotating)
        or any(kind.kind.scaling.rope_type == "proportional" for kind in rotating)
    ):
        return []
    shown = ", ".join(f"{where} = {_number(value)}" for where, value in keys.items())
    message = (
        f"The config carries {shown}, but the family's transformers code does not read it for these layers: "
        "they rotate the whole head. An engine that reads the key rotates only part of each head, and disagrees "
        "with the checkpoint's reference model."
    )
    return [
        CheckWarning(
            "partial-key-not-read",
            message,
            f"{_BOOK[15]}, how much of each head rotates; {_BOOK[10]}, family 13",
        )
    ]


def _truncate(rotating: list[KindCheck], file: Mapping[str, Any] | None) -> list[CheckWarning]:
    yarn = [kind for kind in rotating if kind.kind.scaling.rope_type == "yarn"]
    untruncated = [kind for kind in yarn if not kind.kind.scaling.truncate]
    nested = []
    rope = None if file is None else _rope_dict(file)
    if rope is not None:
        nested = [key for key, value in rope.items() if isinstance(value, Mapping) and "truncate" in value]
    if not untruncated and not nested:
        return []
    parts = []
    if untruncated:
        names = ", ".join(sorted({kind.kind.layer_type for kind in untruncated}))
        parts.append(
            f"YaRN with truncate: false ({names}): the ramp's ends are not rounded to whole pairs. Engines that "
            "drop the key round them, which moves the ramp's angles by 1.8 rad at position 8191 on GPT-OSS's "
            "heads (chapter 13): vLLM before vllm-project/vllm#28244 (issue #27722), SGLang before "
            "sgl-project/sglang#14270, mlx-lm 0.32.2's YarnRoPE (chapter 14)."
        )
    if nested:
        parts.append(
            f"truncate inside the per-layer-type dict {nested}: transformers 5.23 reads truncate from the top of "
            "rope_parameters only (_compute_yarn_parameters), so there it is always True (chapter 13)."
        )
    return [
        CheckWarning(
            "truncate",
            " ".join(parts),
            f"{_BOOK[10]}, family 14: YaRN keys an engine does not read; {_BOOK[13]}; {_BOOK[14]}",
            (
                f"{_GITHUB}vllm-project/vllm/issues/27722",
                f"{_GITHUB}vllm-project/vllm/pull/28244",
                f"{_GITHUB}sgl-project/sglang/pull/14270",
            )
            + (
                ("transformers 5.23.0, src/transformers/modeling_rope_utils.py (_compute_yarn_parameters)",)
                if nested
                else ()
            ),
        )
    ]


_NOPE_KEYS = ("no_rope_layers", "no_rope_layer_interval", "position_embedding_type", "layer_rope_theta")
"""config.json keys that switch the rotation of some attention layers off."""


def _nope_layers(plan: RotaryPlan, kinds: tuple[KindCheck, ...], file: Mapping[str, Any] | None) -> list[CheckWarning]:
    nope = [index for kind in kinds if kind.attention and not kind.kind.rotates for index in kind.layers]
    attention = sum(len(kind.layers) for kind in kinds if kind.attention)
    keys = {} if file is None else {key: file[key] for key in _NOPE_KEYS if key in file}
    if plan.model_type != "granitemoehybrid":  # other families' position_embedding_type says something else
        keys.pop("position_embedding_type", None)
    if not nope and not keys:
        return []
    parts = []
    if nope:
        parts.append(
            f"{len(nope)} of the {attention} attention layers do not rotate (NoPE): layers {_indices(tuple(nope))}."
        )
    elif attention:
        parts.append("Every attention layer rotates.")
    sources = []
    if "no_rope_layers" in keys or "no_rope_layer_interval" in keys:
        sources.append(f"{_GITHUB}pytorch/executorch/issues/22043")
        parts.append(
            "In no_rope_layers a 1 marks a layer that rotates and a 0 a NoPE layer, despite the name "
            "(SmolLM3Config's docstring); without the list, no_rope_layer_interval n makes every n-th layer "
            "NoPE. ExecuTorch's Llama export declared no_rope_layer_interval and never applied it, rotating every "
            "layer of SmolLM3 (pytorch/executorch#22043)."
        )
    if "position_embedding_type" in keys:
        parts.append(
            f"position_embedding_type = {keys['position_embedding_type']!r}: GraniteMoeHybrid builds its rotary "
            "embedding only when it is 'rope'; any other value, and None (the class default, also when the key "
            "is absent), leaves every attention layer unrotated, whatever rope_theta says. An engine that "
            "rotates because rope_theta is present gets such a checkpoint wrong, and one that hard-coded NoPE got "
            "granite-4.0-1b's 'rope' wrong (onnxruntime/mobius#440)."
        )
        sources.append(f"{_GITHUB}onnxruntime/mobius/pull/440")
    if "layer_rope_theta" in keys:
        parts.append("In layer_rope_theta a 0 switches a layer's rotation off.")
    return [
        CheckWarning(
            "nope-layers",
            " ".join(parts),
            f"{_BOOK[10]}, family 15: NoPE layers rotated; {_BOOK[15]}, layers without rotation",
            tuple(sources),
        )
    ]


def _static_yarn(rotating: list[KindCheck]) -> list[CheckWarning]:
    yarn = [kind.kind for kind in rotating if kind.kind.scaling.rope_type == "yarn"]
    if not yarn:
        return []
    scaling = yarn[0].scaling
    message = (
        f"YaRN (factor {_number(scaling.factor)}, original_max_position_embeddings "
        f"{scaling.original_max_position_embeddings}) is static: transformers computes its frequencies once, "
        "whatever the input's length, so an input shorter than the trained length also has its slow pairs "
        "divided by up to the factor. Qwen's documentation says static YaRN may impact performance on shorter "
        "texts and advises adding rope_scaling only when long contexts are needed (QwenLM/Qwen3, "
        "docs/source/inference/transformers.md); a model trained with the scaling in place is another matter."
    )
    return [
        CheckWarning(
            "static-yarn",
            message,
            f"{_BOOK[12]}, what each scaling does to each band",
            (f"{_GITHUB}QwenLM/Qwen3/blob/main/docs/source/inference/transformers.md",),
        )
    ]


def _made_for(kind: LayerRotary) -> float | None:
    """``factor * original_max_position_embeddings`` for YaRN and longrope, whose factor is by definition the
    extended length over the trained one (YaRN's ``s = L' / L``; longrope's default factor is
    ``max_position_embeddings / original_max_position_embeddings``). llama3's factor is not: Llama 3.1 declares
    131072 positions with factor 8 over 8192."""
    scaling = kind.scaling
    trained = scaling.original_max_position_embeddings
    if scaling.rope_type not in ("yarn", "longrope") or trained is None or scaling.factor <= 1.0:
        return None
    return scaling.factor * trained


def _context_beyond(plan: RotaryPlan, rotating: list[KindCheck], context: int | None) -> list[CheckWarning]:
    found = []
    declared = plan.max_position_embeddings
    lengths = {"max_position_embeddings": declared} if declared is not None else {}
    if context is not None:
        lengths["--context"] = context
    beyond = []
    for kind in rotating:
        made_for = _made_for(kind.kind)
        if made_for is None:
            continue
        for name, length in lengths.items():
            if length > made_for:
                scaling = kind.kind.scaling
                beyond.append(
                    f"{name} {length} > factor {_number(scaling.factor)} x original_max_position_embeddings "
                    f"{scaling.original_max_position_embeddings} = {_number(made_for)} ({kind.kind.layer_type})"
                )
    if beyond:
        message = (
            "; ".join(dict.fromkeys(beyond))
            + ". The scaling's factor is the extended length over the trained one, so it stretches the trained "
            "positions to that length: past it, the pairs it divides by the factor turn through larger angles than "
            "any they had within the trained length."
        )
        found.append(
            CheckWarning(
                "context-beyond-scaling",
                message,
                f"{_BOOK[7]}, context extension is a change of wavelengths; {_BOOK[12]}, what each scaling does",
            )
        )
    if context is not None and declared is not None and context > declared:
        found.append(
            CheckWarning(
                "context-beyond-declared",
                f"--context {context} is beyond the config's max_position_embeddings {declared}: engines size "
                "their cos/sin tables and refuse or truncate inputs by the declared length.",
                f"{_BOOK[10]}, family 8: a rotary table shorter than the context",
            )
        )
    return found


def _context_condition(rotating: list[KindCheck]) -> list[CheckWarning]:
    failing = [kind for kind in rotating if kind.context is not None and kind.context.holds is False]
    if not failing:
        return []
    parts = [
        f"{kind.kind.layer_type} (base {_number(kind.kind.base)}, checked at {kind.context.length}): B_m < 0 first "
        f"at m = {kind.context.first_failure}"
        for kind in failing
        if kind.context is not None
    ]
    message = (
        "Xu et al.'s condition fails: "
        + "; ".join(parts)
        + ". At such distances, by their criterion, a key similar to the query can score below a random one in "
        "expectation: the base does not meet the condition for this context."
    )
    return [CheckWarning("context-condition", message, f"{_BOOK[12]}, the condition on the base")]


# --- Rendering ----------------------------------------------------------------------------------------------


def _number(value: object) -> str:
    """A number as a config shows it: 150000 for 150000.0, 0.5, 1e-05."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return f"{value:.6g}"


def _indices(layers: tuple[int, ...]) -> str:
    """Layer indices, short: ``0-23``, ``0, 2, ..., 22``, or runs ``0-2, 4-6, 8``."""
    if not layers:
        return "none"
    if len(layers) > 2:
        step = layers[1] - layers[0]
        if step > 1 and all(b - a == step for a, b in zip(layers, layers[1:])):
            return f"{layers[0]}, {layers[1]}, ..., {layers[-1]} (every {step})"
    runs: list[tuple[int, int]] = []
    for index in layers:
        if runs and index == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], index)
        else:
            runs.append((index, index))
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)
    return text if len(text) <= 60 else text[:56].rsplit(", ", 1)[0] + ", ..."


def _scaling_text(kind: KindCheck) -> str:
    scaling = kind.kind.scaling
    parameters = kind.scaling_parameters()
    shown = []
    for key, value in parameters.items():
        if isinstance(value, list):
            shown.append(f"{key} {len(value)} values, {_number(min(value))} to {_number(max(value))}")
        elif isinstance(value, bool):
            shown.append(f"{key} {str(value).lower()}")
        else:
            shown.append(f"{key} {_number(value)}")
    return scaling.rope_type + (": " + ", ".join(shown) if shown else "")


def _field(name: str, value: str, width: int) -> list[str]:
    """``  name  value``, the value wrapped under itself."""
    label = f"  {name:<18}"
    return textwrap.wrap(value, width, initial_indent=label, subsequent_indent=" " * len(label)) or [label.rstrip()]


def _paragraph(text: str, width: int, indent: str) -> list[str]:
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)


def _summary_row(number: int, kind: KindCheck) -> list[str]:
    """``#, n, layer type, base, scaling, rotated, layout`` of one kind (``rotated`` says NoPE and no attention)."""
    k = kind.kind
    rotated = kind.rotated_features
    if not kind.attention:
        return [str(number), str(len(kind.layers)), k.layer_type, "-", "-", "no attention", "-"]
    if rotated is None:
        return [str(number), str(len(kind.layers)), k.layer_type, "-", "-", "none (NoPE)", "-"]
    features = f"{rotated[0]}-{rotated[1] - 1} of {k.head_dim}"
    return [str(number), str(len(kind.layers)), k.layer_type, _number(k.base), k.scaling.rope_type, features, k.layout]


def _table(rows: list[list[str]], width: int) -> list[str]:
    """Rows in aligned columns, two spaces apart; without the layer type column if they are wider than ``width``."""
    for drop in ((), (2,)):
        kept = [[cell for column, cell in enumerate(row) if column not in drop] for row in rows]
        sizes = [max(len(row[column]) for row in kept) for column in range(len(kept[0]))]
        lines = [("  " + "  ".join(cell.ljust(size) for cell, size in zip(row, sizes))).rstrip() for row in kept]
        if max(map(len, lines)) <= width:
            return lines
    return [line[:width] for line in lines]


def _render(check: ConfigCheck, width: int) -> list[str]:
    plan = check.plan
    lines = ["posenc check"]
    lines += _field("read", check.source + (f", its {check.part}" if check.part else ""), width)
    lines += _field(
        "model_type",
        f"{plan.model_type}, read as transformers 5.23 reads it ({plan.config_class}, {plan.source})",
        width,
    )
    declared = "not given" if plan.max_position_embeddings is None else str(plan.max_position_embeddings)
    lines += _field("layers", f"{len(plan.layers)}; max_position_embeddings {declared}", width)
    if check.context is not None:
        lines += _field("context checked", str(check.context), width)
    header = ["#", "n", "layer type", "base", "scaling", "rotated", "layout"]
    rows = [header] + [_summary_row(number, kind) for number, kind in enumerate(check.kinds, 1)]
    lines += ["", "Layer kinds (n: how many layers; rotated: which features of each head)"]
    lines += _table(rows, width)
    for number, kind in enumerate(check.kinds, 1):
        k = kind.kind
        lines += ["", f"Kind {number}: {k.layer_type}"]
        lines += _field("layers", _indices(kind.layers), width)
        if not kind.attention:
            lines += _field("positions", "none: this layer does not attend", width)
            continue
        if not k.rotates:
            lines += _field("rotates", f"no (NoPE): head_dim {k.head_dim} passes through unrotated", width)
        else:
            rotated = kind.rotated_features
            assert rotated is not None
            lines += _field("base", _number(k.base), width)
            lines += _field("scaling", _scaling_text(kind), width)
            pairs = f"pairs (i, i + {k.rotary_dim // 2})" if k.layout == "halves" else "pairs (2i, 2i + 1)"
            features = f"{k.rotary_dim} of {k.head_dim}: {rotated[0]} to {rotated[1] - 1}; {k.layout}, {pairs}"
            lines += _field("rotated features", features, width)
            axes = ", ".join(k.axes) if k.n_axes == 1 else f"{k.n_axes}: " + ", ".join(k.axes)
            lines += _field("axes", axes, width)
            lines += _field("attention factor", f"{k.attention_factor:.6g} (multiplies cos and sin)", width)
        if k.softmax_scale != 1.0:
            lines += _field("softmax scale", f"{k.softmax_scale:.6g} x 1/sqrt(d)", width)
        query = k.query_scaling
        if query is None:
            multiplier = "none"
        elif query.scale is None:
            multiplier = f"{query.kind} (learned per head: weights, not config)"
        else:
            multiplier = f"{query.kind}: scale {_number(query.scale)}, length {_number(query.length)}"
        lines += _field("query multiplier", multiplier, width)
        if kind.context is not None:
            verdict = {True: "holds", False: "FAILS", None: "not decided"}[kind.context.holds]
            lines += _field(f"at {kind.context.length}", f"{verdict}: {kind.context.meaning}", width)
    lines += ["", f"Defaults filled in ({plan.config_class or 'the class'}'s, absent from the config)"]
    if plan.defaults_used:
        for key, value in plan.defaults_used.items():
            shown = json.dumps(_json_value(value))
            lines += _paragraph(f"{key} = {shown}", width, "  ")
    else:
        lines.append("  none" + ("" if check.source.endswith(".json") or check.source == "a dict" else " (an object)"))
    lines += ["", f"Warnings ({len(check.warnings)})"]
    if not check.warnings:
        lines.append("  none")
    for warning in check.warnings:
        lines += _paragraph(f"[{warning.code}] {warning.message}", width, "  ")
        lines += _paragraph(f"see: {warning.see}", width, "      ")
        for source in warning.sources:
            shown = source.removeprefix("https://")
            lines += textwrap.wrap(
                shown, width, initial_indent="      ", subsequent_indent="        ", break_long_words=False
            )
    return lines
