r"""Rotary scalings parsed once into :class:`RopeScaling`, and the frequency kernel that reads them.

Shared by :mod:`posenc.rotary` (which re-exports :class:`RopeScaling`, :data:`RopeType` and
:data:`ROPE_TYPES`) and :mod:`posenc.nn.rotary`. :func:`parse_scaling` is the one entry point: ``None``, a
transformers-style dict or a :class:`RopeScaling` in, a validated :class:`RopeScaling` out.
:func:`inverse_frequencies` trusts its arguments: the public functions check them first.

To add a rope_type: a value in :data:`RopeType`, its keys in ``_KEYS``, any new field of :class:`RopeScaling`
(checked in ``__post_init__``), and its branch in :func:`inverse_frequencies` (and in the attention scaling
if it has one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from posenc._validation import check_choice, check_flag, check_int, check_real, is_int

RopeType = Literal["default", "linear", "dynamic", "yarn", "llama3", "longrope", "proportional"]
"""The ``rope_type`` values :class:`RopeScaling` understands, named as in transformers' configs."""

ROPE_TYPES: tuple[RopeType, ...] = get_args(RopeType)
"""The values of :data:`RopeType`, in that order."""

# The keys of a rope_parameters dict for each rope_type: those it requires, then those it may carry. Every
# dict may also carry _COMMON_KEYS. A RopeScaling field outside its type's keys keeps its default.
_KEYS: dict[RopeType, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "default": ((), ()),
    "linear": (("factor",), ()),
    "dynamic": (("factor",), ("original_max_position_embeddings",)),
    "yarn": (
        ("factor", "original_max_position_embeddings"),
        ("attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate"),
    ),
    "llama3": (("factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"), ()),
    "longrope": (("short_factor", "long_factor", "original_max_position_embeddings"), ("factor", "attention_factor")),
    "proportional": ((), ("factor",)),
}
# The rope_types that need the trained length: a RopeScaling of these requires original_max_position_embeddings
# (from_dict may take it from its max_position_embeddings argument, as transformers takes it from the config).
_NEEDS_LENGTH: tuple[RopeType, ...] = ("dynamic", "yarn", "llama3", "longrope")
# The rope_types and fields that callers written before them (posenc.nn.RotaryEmbedding) do not handle:
# parse_scaling refuses them unless the caller says it does (see its ``partial`` and ``rope_types``).
LEGACY_ROPE_TYPES: tuple[RopeType, ...] = ("default", "linear", "dynamic", "yarn", "llama3")
_COMMON_KEYS = ("rope_type", "type", "rope_theta", "partial_rotary_factor")


def _is_default(value: object, default: object) -> bool:
    """Whether a field still holds its default (an equal value of the same type: no array comparisons)."""
    return value is default or (type(value) is type(default) and value == default)


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature term ``0.1 * mscale * ln(scale) + 1`` (1 for ``scale <= 1``)."""
    return 1.0 if scale <= 1.0 else 0.1 * mscale * math.log(scale) + 1.0


@dataclass(frozen=True, repr=False)
class RopeScaling:
    r"""A rotary scaling (a transformers ``rope_parameters`` dict), checked and with its defaults resolved.

    :func:`posenc.rotary_frequencies`, :func:`posenc.rotary_attention_factor`, :func:`posenc.rotate` and
    :class:`posenc.nn.RotaryEmbedding` accept one wherever they accept the dict; build it once with
    :meth:`from_dict` (or by its fields), and its ``repr`` shows what was understood. Frozen and hashable.

    Parameters
    ----------
    rope_type : {"default", "linear", "dynamic", "yarn", "llama3", "longrope", "proportional"}, default "default"
        The scaling, as in :func:`posenc.rotary_frequencies`.
    factor : float, default 1.0
        The context-extension factor :math:`s \ge 1` (every type but ``"default"``; optional for
        ``"proportional"``, which divides its frequencies by it). For ``"longrope"`` it only
        sets the default attention factor: transformers' ``max_position_embeddings /
        original_max_position_embeddings`` when the dict has no ``"factor"`` (:meth:`from_dict` computes it).
    original_max_position_embeddings : int or None, default None
        The trained context length :math:`L \ge 1` (``"dynamic"``, ``"yarn"``, ``"llama3"`` and ``"longrope"``
        require it; ``"longrope"`` with ``factor > 1`` needs :math:`L \ge 2`). For ``"dynamic"`` it is the
        length transformers takes from ``config.max_position_embeddings``.
    low_freq_factor, high_freq_factor : float or None, default None
        ``"llama3"``'s band edges, :math:`0 <` low :math:`\le` high (required by ``"llama3"``). Equal edges
        (Llama 4) leave no band between: wavelengths longer than ``L / low_freq_factor`` are divided by
        ``factor``, the others kept, as transformers computes them.
    beta_fast, beta_slow : float, default 32.0 and 1.0
        ``"yarn"``'s ramp, in turns over the trained length; :math:`0 <` beta_slow :math:`\le` beta_fast.
    truncate : bool, default True
        ``"yarn"``: round the ramp's ends to whole pairs, as transformers does by default.
    mscale, mscale_all_dim : float or None, default None
        ``"yarn"``: DeepSeek's two temperature coefficients (see :func:`posenc.rotary_attention_factor`).
    attention_factor : float or None, default None
        ``"yarn"`` and ``"longrope"``: the attention scaling itself, ``> 0``; ``None`` derives it from
        ``factor`` (and ``mscale``, ``mscale_all_dim`` for ``"yarn"``, ``L`` for ``"longrope"``).
    short_factor, long_factor : sequence of float or None, default None
        ``"longrope"`` (Phi-3, Phi-3.5): one divisor :math:`> 0` per rotated pair, required. The short list
        applies while the sequence (largest position + 1) is at most ``L``, the long one beyond. Stored as
        tuples of float.
    rope_theta : float or None, default None
        The base the dict was written for, ``> 1``: the base of the public functions when they are given no
        ``base``; a call with another ``base`` is refused.
    partial_rotary_factor : float, default 1.0
        The fraction of each head that is rotated, in :math:`(0, 1]`: the first
        ``int(head_dim * partial_rotary_factor)`` features (the rotary dimension, computed as transformers
        does), the others pass through unchanged (GPT-NeoX/Pythia ``rotary_pct``, Phi-2, StableLM). For
        ``"proportional"`` (Gemma 4) it is the fraction of *pairs* that turn: the whole head is rotated in
        pairs ``(i, i + head_dim / 2)``, the first ``int(partial_rotary_factor * head_dim // 2)`` of them at
        the frequencies ``base ** (-2 i / head_dim)`` of the whole head, the others at frequency 0.

    Attributes
    ----------
    attention_scaling : float
        What the rotated queries and keys are multiplied by: :func:`posenc.rotary_attention_factor`
        (transformers' ``attention_scaling``). 1.0 for every type but ``"yarn"`` and ``"longrope"``.

    Raises
    ------
    TypeError, ValueError
        If a field has the wrong type or is out of range (a field the rope_type requires left at None
        included), or a field it does not use is set. Messages name the field as a key of the dict,
        ``scaling['factor']``.

    References
    ----------
    .. [1] transformers v5.23, ``src/transformers/modeling_rope_utils.py``: ``ROPE_INIT_FUNCTIONS`` and
       ``RotaryEmbeddingConfigMixin.standardize_rope_params``.

    Examples
    --------
    >>> RopeScaling.from_dict({"rope_type": "linear", "factor": 4.0})
    RopeScaling(rope_type='linear', factor=4.0, attention_scaling=1.0)
    >>> yarn = RopeScaling.from_dict({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096})
    >>> yarn  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
    RopeScaling(rope_type='yarn', factor=4.0, original_max_position_embeddings=4096, beta_fast=32.0,
                beta_slow=1.0, truncate=True, attention_scaling=1.138629...)
    >>> yarn == RopeScaling("yarn", factor=4.0, original_max_position_embeddings=4096)
    True
    >>> RopeScaling.from_dict({"rope_type": "dynamic", "factor": 2.0}, max_position_embeddings=2048)
    RopeScaling(rope_type='dynamic', factor=2.0, original_max_position_embeddings=2048, attention_scaling=1.0)
    >>> RopeScaling.from_dict({"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25})
    RopeScaling(rope_type='default', rope_theta=10000.0, partial_rotary_factor=0.25, attention_scaling=1.0)
    >>> RopeScaling.from_dict({"rope_type": "linear", "factr": 4.0})  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
        ...
    ValueError: scaling has keys ['factr'] that rope_type 'linear' does not use; it accepts
                ['factor', 'partial_rotary_factor', 'rope_theta', 'rope_type', 'type']
    """

    rope_type: RopeType = "default"
    factor: float = 1.0
    original_max_position_embeddings: int | None = None
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    truncate: bool = True
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None
    rope_theta: float | None = None
    short_factor: tuple[float, ...] | None = None
    long_factor: tuple[float, ...] | None = None
    partial_rotary_factor: float = 1.0
    attention_scaling: float = field(init=False, compare=False)

    def __post_init__(self) -> None:
        rope_type = check_choice(self.rope_type, "scaling['rope_type']", ROPE_TYPES)
        required, optional = _KEYS[rope_type]
        unused = [
            item.name
            for item in fields(self)
            if item.init
            and item.name not in ("rope_type", "rope_theta", "partial_rotary_factor", *required, *optional)
            and not _is_default(getattr(self, item.name), item.default)
        ]
        if unused:
            accepted = sorted((*_COMMON_KEYS, *required, *optional))
            raise ValueError(
                f"scaling has keys {unused} that rope_type {rope_type!r} does not use; it accepts {accepted}"
            )
        # A required field left at None is refused by its check below (TypeError: got NoneType None), as is a
        # key given as None in a dict; from_dict reports absent keys first.
        resolved: dict[str, Any] = {}
        if self.rope_theta is not None:
            resolved["rope_theta"] = check_real(self.rope_theta, "scaling['rope_theta']", above=1.0)
        resolved["partial_rotary_factor"] = check_real(
            self.partial_rotary_factor,
            "scaling['partial_rotary_factor']",
            above=0.0,
            accepted="a finite real number in (0, 1]",
        )
        if resolved["partial_rotary_factor"] > 1.0:
            raise ValueError(
                f"scaling['partial_rotary_factor'] must be a finite real number in (0, 1], "
                f"got {self.partial_rotary_factor!r}"
            )
        resolved["factor"] = check_real(self.factor, "scaling['factor']", at_least=1.0)
        if rope_type in _NEEDS_LENGTH:
            resolved["original_max_position_embeddings"] = check_int(
                self.original_max_position_embeddings,
                "scaling['original_max_position_embeddings']",
                minimum=2 if rope_type == "longrope" and resolved["factor"] > 1.0 else 1,
            )
        if rope_type == "llama3":
            low = check_real(self.low_freq_factor, "scaling['low_freq_factor']", above=0.0)
            high = check_real(self.high_freq_factor, "scaling['high_freq_factor']", at_least=low)
            resolved.update(low_freq_factor=low, high_freq_factor=high)
        if rope_type == "longrope":
            for key in ("short_factor", "long_factor"):
                resolved[key] = _check_factor_list(getattr(self, key), f"scaling[{key!r}]")
            if len(resolved["short_factor"]) != len(resolved["long_factor"]):
                raise ValueError(
                    f"scaling['short_factor'] and scaling['long_factor'] must have one entry per rotated pair each, "
                    f"got {len(resolved['short_factor'])} and {len(resolved['long_factor'])} entries"
                )
        if rope_type in ("yarn", "longrope") and self.attention_factor is not None:
            resolved["attention_factor"] = check_real(self.attention_factor, "scaling['attention_factor']", above=0.0)
        attention_scaling = resolved.get("attention_factor", 1.0)
        if rope_type == "longrope" and "attention_factor" not in resolved and resolved["factor"] > 1.0:
            # transformers' _compute_longrope_parameters: sqrt(1 + ln(factor) / ln(L)), 1 for factor <= 1.
            trained = resolved["original_max_position_embeddings"]
            attention_scaling = math.sqrt(1.0 + math.log(resolved["factor"]) / math.log(trained))
        if rope_type == "yarn":
            for key in ("beta_fast", "beta_slow"):
                resolved[key] = check_real(getattr(self, key), f"scaling[{key!r}]", above=0.0)
            if resolved["beta_fast"] < resolved["beta_slow"]:
                raise ValueError(
                    f"scaling['beta_fast'] must be >= scaling['beta_slow'] (defaults 32 and 1), "
                    f"got {resolved['beta_fast']} < {resolved['beta_slow']}"
                )
            for key in ("mscale", "mscale_all_dim"):
                if getattr(self, key) is not None:
                    resolved[key] = check_real(getattr(self, key), f"scaling[{key!r}]")
            resolved["truncate"] = check_flag(self.truncate, "scaling['truncate']")
            factor, mscale, mscale_all_dim = resolved["factor"], resolved.get("mscale"), resolved.get("mscale_all_dim")
            if "attention_factor" in resolved:
                attention_scaling = resolved["attention_factor"]
            elif mscale and mscale_all_dim:
                attention_scaling = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim)
            else:
                attention_scaling = _yarn_mscale(factor)
        resolved["attention_scaling"] = attention_scaling
        for key, value in resolved.items():  # the checked values, as float, int, bool and tuples of float
            object.__setattr__(self, key, value)

    @classmethod
    def from_dict(
        cls,
        scaling: Mapping[str, object],
        base: float | None = None,
        *,
        max_position_embeddings: int | None = None,
        original_max_position_embeddings: int | None = None,
        layer_type: str | None = None,
    ) -> RopeScaling:
        """Parse a transformers-style ``rope_parameters`` (formerly ``rope_scaling``) dict.

        Parameters
        ----------
        scaling : Mapping[str, object]
            ``"rope_type"`` (or its old name ``"type"``; absent means ``"default"``) and the keys of that
            type, named as the fields of :class:`RopeScaling`; it may also carry ``"rope_theta"`` and
            ``"partial_rotary_factor"``. Any other key is refused, so a misspelt key never goes unnoticed.
            Or the nested form of models with several layer types (Gemma 3: ``{"full_attention": {...},
            "sliding_attention": {...}}``), with ``layer_type``.
        base : float or None, default None
            The base the scaling will be used with: a ``"rope_theta"`` in the dict must equal it.
        max_position_embeddings : int or None, default None
            The config's ``max_position_embeddings``, ``>= 1``, for the keys transformers derives from it:
            ``"dynamic"``'s trained length (transformers reads ``config.max_position_embeddings`` and ignores
            the dict's ``"original_max_position_embeddings"``; a dict that carries a different one is refused),
            the ``"original_max_position_embeddings"`` of ``"yarn"``, ``"llama3"`` and ``"longrope"`` when the
            dict has none, and ``"longrope"``'s ``"factor"`` when the dict has none
            (``max_position_embeddings / original_max_position_embeddings``).
        original_max_position_embeddings : int or None, default None
            The config's top-level ``original_max_position_embeddings``, ``>= 1`` (Phi-3 keeps it outside the
            dict), for ``"yarn"``, ``"llama3"`` and ``"longrope"``: transformers gives it priority over the
            dict's, so a dict that carries a different one is refused.
        layer_type : str or None, default None
            With a nested ``scaling``, the layer type whose dict to parse, e.g. ``"sliding_attention"``.

        Returns
        -------
        RopeScaling

        Raises
        ------
        TypeError, ValueError
            If ``scaling`` is not a mapping with str keys, names an unknown rope_type, misses a key its type
            requires or has one it does not use, or a value is out of range; if ``scaling`` is nested and
            ``layer_type`` is not one of its keys (or is given for a flat dict).

        References
        ----------
        .. [1] transformers v5.23, ``modeling_rope_utils.py``: ``standardize_rope_params`` (which fills the
           trained length) and ``_compute_dynamic_ntk_parameters``, ``_compute_longrope_parameters``.

        Examples
        --------
        >>> gemma3 = {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
        ...           "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
        >>> RopeScaling.from_dict(gemma3, layer_type="full_attention")
        RopeScaling(rope_type='linear', factor=8.0, rope_theta=1000000.0, attention_scaling=1.0)
        >>> phi3 = {"type": "longrope", "short_factor": [1.0, 1.5], "long_factor": [2.0, 4.0]}
        >>> RopeScaling.from_dict(phi3, max_position_embeddings=131072, original_max_position_embeddings=4096)
        ... # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
        RopeScaling(rope_type='longrope', short_factor=(1.0, 1.5), long_factor=(2.0, 4.0),
                    original_max_position_embeddings=4096, factor=32.0, attention_scaling=1.190...)
        """
        if not isinstance(scaling, Mapping):
            raise TypeError(
                f"scaling must be a dict such as {{'rope_type': 'linear', 'factor': 4.0}}, "
                f"got {type(scaling).__name__} {scaling!r}"
            )
        for key in scaling:
            if not isinstance(key, str):
                raise TypeError(f"scaling keys must be str, got {type(key).__name__} {key!r}")
        scaling = _layer_dict(scaling, layer_type)
        if max_position_embeddings is not None:
            max_position_embeddings = check_int(max_position_embeddings, "max_position_embeddings", minimum=1)
        if original_max_position_embeddings is not None:
            original_max_position_embeddings = check_int(
                original_max_position_embeddings, "original_max_position_embeddings", minimum=1
            )
        if "rope_type" in scaling and "type" in scaling and scaling["type"] != scaling["rope_type"]:
            raise ValueError(
                f"scaling['type'] (an old name of rope_type) is {scaling['type']!r} but scaling['rope_type'] is "
                f"{scaling['rope_type']!r}: keep one"
            )
        rope_type = check_choice(
            scaling.get("rope_type", scaling.get("type", "default")), "scaling['rope_type']", ROPE_TYPES
        )
        required, optional = _KEYS[rope_type]
        accepted = (*_COMMON_KEYS, *required, *optional)
        unknown = sorted(key for key in scaling if key not in accepted)
        if unknown:
            raise ValueError(
                f"scaling has keys {unknown} that rope_type {rope_type!r} does not use; it accepts {sorted(accepted)}"
            )
        values: dict[str, Any] = {
            key: scaling[key] for key in (*required, *optional, "rope_theta", "partial_rotary_factor") if key in scaling
        }
        values.update(_trained_length(rope_type, values, max_position_embeddings, original_max_position_embeddings))
        if rope_type == "longrope" and "factor" not in values and max_position_embeddings is not None:
            trained = values.get("original_max_position_embeddings")
            if is_int(trained) and int(trained) >= 1:
                values["factor"] = max_position_embeddings / int(trained)
        missing = [key for key in required if key not in values]
        if rope_type in _NEEDS_LENGTH and "original_max_position_embeddings" not in (*values, *missing):
            missing.append("original_max_position_embeddings")
        if rope_type == "longrope" and "factor" not in values:
            missing.append("factor")
        if missing:
            hint = " (pass max_position_embeddings=config.max_position_embeddings, from which transformers derives them"
            if rope_type == "longrope":
                hint += ", and original_max_position_embeddings= if the config has one outside the dict"
            hint += ")"
            raise ValueError(f"scaling for rope_type {rope_type!r} is missing the keys {missing}{hint}")
        return check_base_agrees(cls(rope_type, **values), base)

    def __repr__(self) -> str:
        required, optional = _KEYS[self.rope_type]
        shown = ["rope_type", *required, *optional, "rope_theta"]
        if self.partial_rotary_factor != 1.0:
            shown.append("partial_rotary_factor")
        shown.append("attention_scaling")
        shown_values = (
            f"{key}={getattr(self, key)!r}" for key in dict.fromkeys(shown) if getattr(self, key) is not None
        )
        return f"RopeScaling({', '.join(shown_values)})"


def _check_factor_list(value: object, name: str) -> tuple[float, ...]:
    """``value`` (a list or tuple of finite reals > 0, at least one) as a tuple of float."""
    accepted = "a list of finite real numbers > 0, one per rotated pair"
    if not isinstance(value, (list, tuple)) or not value:
        raise TypeError(f"{name} must be {accepted}, got {type(value).__name__} {value!r}")
    return tuple(check_real(item, f"{name}[{index}]", above=0.0) for index, item in enumerate(value))


def _layer_dict(scaling: Mapping[str, object], layer_type: str | None) -> Mapping[str, object]:
    """The flat dict of ``layer_type`` in a nested ``scaling``, or ``scaling`` itself if flat (and no layer_type)."""
    nested = sorted(key for key, value in scaling.items() if isinstance(value, Mapping) or value is None)
    if layer_type is None:
        if nested and len(nested) == len(scaling):
            raise ValueError(
                f"scaling is nested by layer type (keys {nested}): pass layer_type= one of them, e.g. "
                f"RopeScaling.from_dict(scaling, layer_type={nested[0]!r})"
            )
        return scaling
    if not isinstance(layer_type, str):
        raise TypeError(f"layer_type must be None or a str, got {type(layer_type).__name__} {layer_type!r}")
    if not nested or len(nested) != len(scaling):
        raise ValueError(
            f"layer_type={layer_type!r} was given but scaling is a flat dict (one scaling for every layer): "
            "drop layer_type"
        )
    if layer_type not in scaling:
        raise ValueError(f"layer_type must be one of the keys of the nested scaling {nested}, got {layer_type!r}")
    layer = scaling[layer_type]
    if layer is None:
        raise ValueError(f"layer_type {layer_type!r} has no rotary scaling (None in the nested scaling: no RoPE)")
    assert isinstance(layer, Mapping)  # nested: every value a Mapping or None
    for key in layer:
        if not isinstance(key, str):
            raise TypeError(f"scaling keys must be str, got {type(key).__name__} {key!r}")
    return layer


def _trained_length(
    rope_type: RopeType, values: Mapping[str, object], max_positions: int | None, top_level: int | None
) -> dict[str, object]:
    """``original_max_position_embeddings`` as transformers resolves it from the config (see from_dict)."""
    key = "original_max_position_embeddings"
    given = values.get(key)
    if rope_type == "dynamic":
        # _compute_dynamic_ntk_parameters reads config.max_position_embeddings only.
        if max_positions is None:
            return {}
        if given is not None and given != max_positions:
            raise ValueError(
                f"scaling['{key}'] = {given!r} disagrees with max_position_embeddings = {max_positions}: "
                f"transformers' dynamic scaling uses max_position_embeddings and ignores the key; drop one"
            )
        return {key: max_positions}
    if rope_type not in _NEEDS_LENGTH:
        return {}
    # standardize_rope_params: the config's own original_max_position_embeddings first, then the dict's, then
    # max_position_embeddings.
    if top_level is not None:
        if given is not None and given != top_level:
            raise ValueError(
                f"scaling['{key}'] = {given!r} disagrees with original_max_position_embeddings = {top_level}: "
                "transformers uses the config's top-level value; drop one"
            )
        return {key: top_level}
    if given is None and key not in values and max_positions is not None:
        return {key: max_positions}
    return {}


def check_base_agrees(scaling: RopeScaling, base: float | None) -> RopeScaling:
    """Return ``scaling`` if its ``rope_theta`` is unset or equal to ``base`` (unless ``base`` is None)."""
    if base is not None and scaling.rope_theta is not None and scaling.rope_theta != base:
        raise ValueError(
            f"scaling['rope_theta'] = {scaling.rope_theta} disagrees with base = {base}: pass "
            f"base={scaling.rope_theta} (or drop the key)"
        )
    return scaling


DEFAULT = RopeScaling()
"""The scaling of ``scaling=None``: RoFormer's frequencies."""


def parse_scaling(
    scaling: object,
    base: float | None = None,
    *,
    partial: bool = False,
    rope_types: tuple[RopeType, ...] = LEGACY_ROPE_TYPES,
) -> RopeScaling:
    """``scaling`` (``None``, a dict or a :class:`RopeScaling`) as a checked :class:`RopeScaling`.

    ``base``, when given, must agree with a ``rope_theta`` the scaling carries, so that a dict copied from a
    config never silently rotates with another base. A caller that rotates part of a head (``partial``) and
    handles the rope_types ``rope_types`` says so; by default a ``partial_rotary_factor`` below 1 and
    ``"longrope"`` are refused, so that a caller written before them never silently ignores them.
    """
    if scaling is None:
        return DEFAULT
    if isinstance(scaling, RopeScaling):
        parsed = check_base_agrees(scaling, base)
    elif isinstance(scaling, Mapping):
        parsed = RopeScaling.from_dict(scaling, base)
    else:
        raise TypeError(
            f"scaling must be None, a dict such as {{'rope_type': 'linear', 'factor': 4.0}} or a posenc.RopeScaling, "
            f"got {type(scaling).__name__} {scaling!r}"
        )
    if parsed.rope_type not in rope_types:
        raise ValueError(
            f"scaling['rope_type'] {parsed.rope_type!r} is not supported here (only {list(rope_types)}): "
            "use posenc.rotate, which supports every rope_type"
        )
    if not partial and parsed.partial_rotary_factor != 1.0:
        raise ValueError(
            f"scaling['partial_rotary_factor'] must be 1.0 here, got {parsed.partial_rotary_factor}: to rotate only "
            "part of a head, pass head_dim=int(head_dim * partial_rotary_factor) and leave the other features "
            "unrotated, or use posenc.rotate"
        )
    return parsed


def resolve_base(base: float | None, scaling: RopeScaling) -> float:
    """The base of a call: ``base`` if given (it agrees with the scaling's), else its ``rope_theta``, else 10000."""
    if base is not None:
        return base
    return 10000.0 if scaling.rope_theta is None else scaling.rope_theta


def rotary_dim_of(head_dim: int, scaling: RopeScaling) -> int:
    """Features rotated per head: ``int(head_dim * partial_rotary_factor)``, as transformers computes ``dim``.

    ``"proportional"`` rotates the whole head (its factor sets how many pairs turn, see :func:`turning_pairs`).
    """
    if scaling.rope_type == "proportional":
        return head_dim
    return int(head_dim * scaling.partial_rotary_factor)


def turning_pairs(head_dim: int, scaling: RopeScaling) -> int:
    """The pairs of a ``"proportional"`` head that turn, ``int(partial_rotary_factor * head_dim // 2)``.

    The expression of transformers' ``_compute_proportional_rope_parameters`` (float floor division, then int).
    """
    return int(scaling.partial_rotary_factor * head_dim // 2)


def check_rotary_dim(head_dim: int, scaling: RopeScaling, rotary_dim: object, name: str = "head_dim") -> int:
    """The checked number of rotated features: ``rotary_dim`` if given, else from the partial rotary factor.

    ``name`` is how messages call ``head_dim`` (the NumPy ``rotate`` reads it from ``x.shape[-1]``).
    """
    from_factor = rotary_dim_of(head_dim, scaling)
    if rotary_dim is None:
        if from_factor < 2 or from_factor % 2:
            raise ValueError(
                f"int({name} * scaling['partial_rotary_factor']) = int({head_dim} * "
                f"{scaling.partial_rotary_factor}) = {from_factor} rotated features: must be even and >= 2"
            )
        return from_factor
    checked = check_int(rotary_dim, "rotary_dim", minimum=2, maximum=head_dim, even=True)
    if scaling.rope_type == "proportional" and checked != head_dim:
        raise ValueError(
            f"rotary_dim must be None or {name} = {head_dim} for rope_type 'proportional', which rotates the whole "
            f"head (its partial_rotary_factor sets the pairs that turn), got {checked}"
        )
    if scaling.partial_rotary_factor != 1.0 and scaling.rope_type != "proportional" and checked != from_factor:
        raise ValueError(
            f"rotary_dim = {checked} disagrees with scaling['partial_rotary_factor'] = "
            f"{scaling.partial_rotary_factor}, which rotates int({head_dim} * {scaling.partial_rotary_factor}) = "
            f"{from_factor} features: keep one"
        )
    return checked


def check_head_dim(head_dim: int, scaling: RopeScaling, name: str = "head_dim") -> None:
    """Refuse a rotary dimension ``head_dim`` the scaling cannot use.

    ``head_dim < 4`` with ``"dynamic"``, whose base exponent ``d / (d - 2)`` needs ``d > 2``; ``"longrope"``
    lists without one entry per pair (transformers only warns, and then broadcasts or fails in torch).
    """
    if scaling.rope_type == "dynamic" and head_dim < 4:
        raise ValueError(f"{name} must be >= 4 for rope_type 'dynamic' (its exponent is d / (d - 2)), got {head_dim}")
    if scaling.short_factor is not None and len(scaling.short_factor) != head_dim // 2:
        raise ValueError(
            f"{name} must have one rotated pair per entry of scaling['short_factor'] and scaling['long_factor'] "
            f"({len(scaling.short_factor)} pairs, {2 * len(scaling.short_factor)} rotated features), "
            f"got {head_dim} rotated features"
        )


def inverse_frequencies(head_dim: int, base: float, scaling: RopeScaling, seq_len: float | None) -> NDArray[np.float64]:
    """The inverse frequencies, one per pair, for checked arguments: see :func:`posenc.rotary_frequencies`."""
    exponents = np.arange(0, head_dim, 2, dtype=np.float64) / head_dim
    rope_type = scaling.rope_type
    trained = scaling.original_max_position_embeddings
    if rope_type == "dynamic":
        assert trained is not None  # required for this rope_type: RopeScaling checked it
        length = trained if seq_len is None else max(seq_len, trained)
        factor = np.float64(scaling.factor)
        with np.errstate(over="ignore"):  # an absurd factor or length sends the base to inf: frequencies -> 0
            base = base * (factor * length / trained - (factor - 1.0)) ** (head_dim / (head_dim - 2))
    inv_freq: NDArray[np.float64] = base**-exponents  # bit for bit posenc.frequencies(head_dim, base=base)
    if rope_type in ("default", "dynamic"):
        return inv_freq
    if rope_type == "proportional":
        # _compute_proportional_rope_parameters: the first pairs at the whole head's frequencies, the rest at 0.
        inv_freq[turning_pairs(head_dim, scaling) :] = 0.0
        return inv_freq / scaling.factor
    if rope_type == "longrope":
        # _compute_longrope_parameters: the long list once the sequence is longer than the trained length.
        assert scaling.short_factor is not None and scaling.long_factor is not None and trained is not None
        long = seq_len is not None and seq_len > trained
        divisors = np.array(scaling.long_factor if long else scaling.short_factor, dtype=np.float64)
        return inv_freq / divisors
    factor = scaling.factor
    if rope_type == "linear":
        return inv_freq / factor
    assert trained is not None  # required by yarn and llama3: RopeScaling checked it
    if rope_type == "llama3":
        low, high = scaling.low_freq_factor, scaling.high_freq_factor
        assert low is not None and high is not None  # required by llama3
        with np.errstate(over="ignore"):  # a base near the float64 limit: an infinite wavelength is interpolated
            wavelength = 2 * math.pi / inv_freq
        result = np.where(wavelength > trained / low, inv_freq / factor, inv_freq)
        if low == high:  # Llama 4: no band between (transformers divides 0 by 0 at wavelength == L / low exactly)
            return result
        smooth = (trained / wavelength - low) / (high - low)
        medium = (wavelength >= trained / high) & (wavelength <= trained / low)
        return np.where(medium, (1.0 - smooth) * inv_freq / factor + smooth * inv_freq, result)

    # yarn: pairs that turn more than beta_fast times over the trained length keep their frequency, pairs that
    # turn less than beta_slow times are interpolated (divided by factor), with a linear ramp between.
    def correction_pair(n_turns: float) -> float:
        return head_dim * math.log(trained / (n_turns * 2 * math.pi)) / (2 * math.log(base))

    low_pair, high_pair = correction_pair(scaling.beta_fast), correction_pair(scaling.beta_slow)
    if scaling.truncate:
        low_pair, high_pair = math.floor(low_pair), math.ceil(high_pair)
    low_pair, high_pair = max(low_pair, 0), min(high_pair, head_dim - 1)
    if low_pair == high_pair:
        high_pair += 0.001  # as transformers does, so that the ramp has a nonzero width
    ramp = np.clip((np.arange(head_dim // 2, dtype=np.float64) - low_pair) / (high_pair - low_pair), 0.0, 1.0)
    return (inv_freq / factor) * ramp + inv_freq * (1.0 - ramp)
