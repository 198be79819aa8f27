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

from posenc._validation import check_choice, check_flag, check_int, check_real, is_real

RopeType = Literal["default", "linear", "dynamic", "yarn", "llama3"]
"""The ``rope_type`` values :class:`RopeScaling` understands, named as in transformers' configs."""

ROPE_TYPES: tuple[RopeType, ...] = get_args(RopeType)
"""The values of :data:`RopeType`, in that order."""

# The keys of a rope_parameters dict for each rope_type: those it requires, then those it may carry. Every
# dict may also carry _COMMON_KEYS. A RopeScaling field outside its type's keys keeps its default.
_KEYS: dict[RopeType, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "default": ((), ()),
    "linear": (("factor",), ()),
    "dynamic": (("factor", "original_max_position_embeddings"), ()),
    "yarn": (
        ("factor", "original_max_position_embeddings"),
        ("attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate"),
    ),
    "llama3": (("factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"), ()),
}
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
    rope_type : {"default", "linear", "dynamic", "yarn", "llama3"}, default "default"
        The scaling, as in :func:`posenc.rotary_frequencies`.
    factor : float, default 1.0
        The context-extension factor :math:`s \ge 1` (every type but ``"default"``).
    original_max_position_embeddings : int or None, default None
        The trained context length :math:`L \ge 1` (``"dynamic"``, ``"yarn"`` and ``"llama3"`` require it).
    low_freq_factor, high_freq_factor : float or None, default None
        ``"llama3"``'s band edges, :math:`0 <` low :math:`<` high (required by ``"llama3"``).
    beta_fast, beta_slow : float, default 32.0 and 1.0
        ``"yarn"``'s ramp, in turns over the trained length; :math:`0 <` beta_slow :math:`\le` beta_fast.
    truncate : bool, default True
        ``"yarn"``: round the ramp's ends to whole pairs, as transformers does by default.
    mscale, mscale_all_dim : float or None, default None
        ``"yarn"``: DeepSeek's two temperature coefficients (see :func:`posenc.rotary_attention_factor`).
    attention_factor : float or None, default None
        ``"yarn"``: the attention scaling itself, ``> 0``; ``None`` derives it from ``factor`` (and
        ``mscale``, ``mscale_all_dim``).
    rope_theta : float or None, default None
        The base the dict was written for, ``> 1``; a call with another ``base`` is refused.

    Attributes
    ----------
    attention_scaling : float
        What the rotated queries and keys are multiplied by: :func:`posenc.rotary_attention_factor`
        (transformers' ``attention_scaling``). 1.0 for every type but ``"yarn"``.

    Raises
    ------
    TypeError, ValueError
        If a field has the wrong type or is out of range (a field the rope_type requires left at None
        included), or a field it does not use is set. Messages name the field as a key of the dict,
        ``scaling['factor']``.

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
    attention_scaling: float = field(init=False, compare=False)

    def __post_init__(self) -> None:
        rope_type = check_choice(self.rope_type, "scaling['rope_type']", ROPE_TYPES)
        required, optional = _KEYS[rope_type]
        unused = [
            item.name
            for item in fields(self)
            if item.init
            and item.name not in ("rope_type", "rope_theta", *required, *optional)
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
        resolved["factor"] = check_real(self.factor, "scaling['factor']", at_least=1.0)
        if "original_max_position_embeddings" in required:
            resolved["original_max_position_embeddings"] = check_int(
                self.original_max_position_embeddings, "scaling['original_max_position_embeddings']", minimum=1
            )
        if rope_type == "llama3":
            low = check_real(self.low_freq_factor, "scaling['low_freq_factor']", above=0.0)
            high = check_real(self.high_freq_factor, "scaling['high_freq_factor']", above=low)
            resolved.update(low_freq_factor=low, high_freq_factor=high)
        attention_scaling = 1.0
        if rope_type == "yarn":
            for key in ("attention_factor", "beta_fast", "beta_slow"):
                if key != "attention_factor" or self.attention_factor is not None:
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
        for key, value in resolved.items():  # the checked values, as float, int and bool
            object.__setattr__(self, key, value)

    @classmethod
    def from_dict(cls, scaling: Mapping[str, object], base: float | None = None) -> RopeScaling:
        """Parse a transformers-style ``rope_parameters`` (formerly ``rope_scaling``) dict.

        Parameters
        ----------
        scaling : Mapping[str, object]
            ``"rope_type"`` (or its old name ``"type"``; absent means ``"default"``) and the keys of that
            type, named as the fields of :class:`RopeScaling`; it may also carry ``"rope_theta"`` and
            ``"partial_rotary_factor"`` (only 1.0: pass the rotary dimension as ``head_dim``). Any other
            key is refused, so a misspelt key never goes unnoticed.
        base : float or None, default None
            The base the scaling will be used with: a ``"rope_theta"`` in the dict must equal it.

        Returns
        -------
        RopeScaling

        Raises
        ------
        TypeError, ValueError
            If ``scaling`` is not a mapping with str keys, names an unknown rope_type, misses a key its type
            requires or has one it does not use, or a value is out of range.
        """
        if not isinstance(scaling, Mapping):
            raise TypeError(
                f"scaling must be a dict such as {{'rope_type': 'linear', 'factor': 4.0}}, "
                f"got {type(scaling).__name__} {scaling!r}"
            )
        for key in scaling:
            if not isinstance(key, str):
                raise TypeError(f"scaling keys must be str, got {type(key).__name__} {key!r}")
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
        missing = [key for key in required if key not in scaling]
        if missing:
            raise ValueError(f"scaling for rope_type {rope_type!r} is missing the keys {missing}")
        if "partial_rotary_factor" in scaling:
            partial = scaling["partial_rotary_factor"]
            if not is_real(partial) or float(partial) != 1.0:
                raise ValueError(
                    f"scaling['partial_rotary_factor'] must be 1.0, got {partial!r}: to rotate only part of a head, "
                    "pass head_dim=int(head_dim * partial_rotary_factor) and leave the other features unrotated"
                )
        values: dict[str, Any] = {key: scaling[key] for key in (*required, *optional, "rope_theta") if key in scaling}
        return check_base_agrees(cls(rope_type, **values), base)

    def __repr__(self) -> str:
        required, optional = _KEYS[self.rope_type]
        shown = ["rope_type", *required, *optional, "rope_theta", "attention_scaling"]
        shown_values = (f"{key}={getattr(self, key)!r}" for key in shown if getattr(self, key) is not None)
        return f"RopeScaling({', '.join(shown_values)})"


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


def parse_scaling(scaling: object, base: float | None = None) -> RopeScaling:
    """``scaling`` (``None``, a dict or a :class:`RopeScaling`) as a checked :class:`RopeScaling`.

    ``base``, when given, must agree with a ``rope_theta`` the scaling carries, so that a dict copied from a
    config never silently rotates with another base.
    """
    if scaling is None:
        return DEFAULT
    if isinstance(scaling, RopeScaling):
        return check_base_agrees(scaling, base)
    if isinstance(scaling, Mapping):
        return RopeScaling.from_dict(scaling, base)
    raise TypeError(
        f"scaling must be None, a dict such as {{'rope_type': 'linear', 'factor': 4.0}} or a posenc.RopeScaling, "
        f"got {type(scaling).__name__} {scaling!r}"
    )


def check_head_dim(head_dim: int, scaling: RopeScaling, name: str = "head_dim") -> None:
    """Refuse ``head_dim < 4`` with ``"dynamic"``, whose base exponent ``d / (d - 2)`` needs ``d > 2``."""
    if scaling.rope_type == "dynamic" and head_dim < 4:
        raise ValueError(f"{name} must be >= 4 for rope_type 'dynamic' (its exponent is d / (d - 2)), got {head_dim}")


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
    factor = scaling.factor
    if rope_type == "linear":
        return inv_freq / factor
    assert trained is not None  # required by yarn and llama3: RopeScaling checked it
    if rope_type == "llama3":
        low, high = scaling.low_freq_factor, scaling.high_freq_factor
        assert low is not None and high is not None  # required by llama3
        with np.errstate(over="ignore"):  # a base near the float64 limit: an infinite wavelength is interpolated
            wavelength = 2 * math.pi / inv_freq
        smooth = (trained / wavelength - low) / (high - low)
        result = np.where(wavelength > trained / low, inv_freq / factor, inv_freq)
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
