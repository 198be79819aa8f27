r"""From a transformers configuration to a model's positions: which layers rotate, how, and by what.

:meth:`posenc.RotaryPlan.from_config` reads a transformers configuration, the config object or the plain dict of a
``config.json`` (the v5 ``rope_parameters`` or the legacy ``rope_scaling``), without importing transformers,
and says what each layer does with positions: whether it rotates its queries and keys at all (NoPE layers),
with which base and scaling (per layer type), how many features of each head and which ones (partial rotary,
the last ``qk_rope_head_dim`` features of multi-head latent attention), in which pair layout, on which
position axes (M-RoPE sections, axial image axes), and by what the attention factor, the softmax scale and the
queries are multiplied. What a config does not say, the family's modeling code does: the pair layout, the NoPE
rule, the multi-axis assignment. posenc keeps that in a table keyed by ``model_type``, each entry read from the
modeling file it names (:data:`posenc.config.MODEL_TYPES` lists them; tests/test_model_zoo.py checks every one against
transformers' own rotary classes). A config posenc cannot serve is refused with a ``ValueError`` naming the key,
never given a default transformers would not give it.

:func:`posenc.nn.rotary_embedding` builds the PyTorch module of a layer from its :class:`LayerRotary`;
:meth:`posenc.LayerRotary.rotate` is the float64 reference. :func:`query_scale` computes the position-dependent query
multipliers some families apply outside their rotary embedding (Llama 4's attention-temperature tuning,
``llama_4_scaling_beta`` of Ministral 3 and Mistral 4); the plan also names Mistral Large 4's learned one, whose
values are weights (``QueryScaling("learned_log")``).
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc._families import (
    COMPOSITES,
    FAMILIES,
    LEGACY_LAYER_TYPES,
    NO_ATTENTION_TYPES,
    ROTATES_UNREAD,
    Family,
    LayerPattern,
    mrope_axes_of_pairs,
)
from posenc._rope import DEFAULT, RopeScaling, check_base_agrees, check_head_dim, inverse_frequencies
from posenc._validation import ROTARY_LAYOUTS, RotaryLayout, check_choice, check_int, check_real, is_int, is_real
from posenc.multiaxis import rotate_multiaxis
from posenc.rotary import rotate

__all__ = [
    "MODEL_TYPES",
    "QUERY_SCALE_KINDS",
    "LayerRotary",
    "QueryScaleKind",
    "QueryScaling",
    "RotaryPlan",
    "query_scale",
]

MODEL_TYPES: tuple[str, ...] = tuple(sorted(FAMILIES))
"""The ``model_type`` values :meth:`posenc.RotaryPlan.from_config` knows: those of transformers v5.23 that rotate."""

QueryScaleKind = Literal["llama4_temperature", "llama4_beta", "scalable_softmax", "learned_log"]
"""The position-dependent query multipliers of :class:`QueryScaling`."""

QUERY_SCALE_KINDS: tuple[QueryScaleKind, ...] = get_args(QueryScaleKind)
"""The values of :data:`QueryScaleKind`, in that order."""


@dataclass(frozen=True)
class QueryScaling:
    r"""A multiplier of the queries that grows with the position, applied outside the rotary embedding.

    Parameters
    ----------
    kind : {"llama4_temperature", "llama4_beta", "scalable_softmax", "learned_log"}
        The formula, with :math:`p` the position, :math:`s` = ``scale`` and :math:`L` = ``length``:

        - ``"llama4_temperature"`` (Llama 4's ``attn_temperature_tuning``, on its NoPE layers):
          :math:`1 + s \ln(1 + \lfloor (p + 1) / L \rfloor)`, ``scale = attn_scale``, ``length = floor_scale``,
          :math:`p` the cache position ``arange(seq) + past_seen_tokens``, not ``position_ids``;
        - ``"llama4_beta"`` (``rope_parameters["llama_4_scaling_beta"]`` of Ministral 3 and Mistral 4, on every
          layer, after the rotation): :math:`1 + s \ln(1 + \lfloor p / L \rfloor)`, ``scale`` the beta and
          ``length`` the dict's ``original_max_position_embeddings``;
        - ``"scalable_softmax"`` (the NoPE full-attention layers of ``beam``):
          :math:`(1 + (p + 1) / L)^{s}`, ``scale = 0.1``, ``length = 2048``, as its modeling code fixes them;
        - ``"learned_log"`` (Mistral Large 4's ``MistralLarge4TextSoftmaxScaling``, on the queries of every layer,
          NoPE layers included, after the rotation, and on its indexer's queries): :math:`a_h \ln(1 + p) + b_h`,
          with :math:`a_h` and :math:`b_h` learned per head (the module's ``scale`` and ``bias`` weights), which
          no config holds: ``scale`` and ``length`` are None, and :func:`query_scale` refuses it. The plan says
          the multiplier exists; the caller takes its values from the checkpoint.
    scale : float or None, default None
        :math:`s`, finite; None for ``"learned_log"`` only.
    length : float or None, default None
        :math:`L`, finite and ``> 0``; None for ``"learned_log"`` only.

    References
    ----------
    .. [1] transformers v5.23: ``models/llama4/modeling_llama4.py`` (``Llama4TextAttention``),
       ``models/ministral3/modeling_ministral3.py`` and ``models/mistral4/modeling_mistral4.py``
       (``get_llama_4_attn_scale``), ``models/beam/modeling_beam.py`` (``compute_attention_scaling``),
       ``models/mistral_large4/modeling_mistral_large4.py`` (``MistralLarge4TextSoftmaxScaling``).
    .. [2] Llama 4 cites "Scalable-Softmax Is Superior for Attention", arXiv:2501.19399.

    Examples
    --------
    >>> QueryScaling("llama4_beta", 0.1, 16384.0).factors([0, 16383, 16384, 49152]).round(6)
    array([1.      , 1.      , 1.069315, 1.138629])
    """

    kind: QueryScaleKind
    scale: float | None = None
    length: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", check_choice(self.kind, "kind", QUERY_SCALE_KINDS))
        if self.kind == "learned_log":
            for name in ("scale", "length"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"{name} must be None for kind 'learned_log': its multipliers are learned per head (weights)"
                    )
            return
        object.__setattr__(self, "scale", check_real(self.scale, "scale", at_least=None))
        object.__setattr__(self, "length", check_real(self.length, "length", above=0.0))

    def factors(self, positions: ArrayLike) -> NDArray[np.float64]:
        """The multiplier of the query at each position: :func:`query_scale` of ``positions``."""
        return query_scale(positions, self)

    def formula_values(self) -> tuple[float, float]:
        """``(scale, length)``; a ``ValueError`` for ``"learned_log"``, whose values are weights, not config."""
        if self.scale is None or self.length is None:
            raise ValueError(
                f"scaling is of kind {self.kind!r}: a_h * ln(1 + p) + b_h with a_h, b_h learned per head (Mistral "
                "Large 4's softmax_scaling.scale and .bias), which no config holds; take them from the model's weights"
            )
        return self.scale, self.length


def query_scale(positions: ArrayLike, scaling: QueryScaling) -> NDArray[np.float64]:
    r"""The factor a :class:`QueryScaling` multiplies each query by, at float64.

    Parameters
    ----------
    positions : array_like of real
        Positions :math:`p \ge 0`, any shape, e.g. ``(batch, seq)``. transformers passes ``position_ids`` for
        ``"llama4_beta"`` and ``"scalable_softmax"``; Llama 4's ``"llama4_temperature"`` uses the cache positions
        ``arange(seq) + past_seen_tokens`` (the tokens already in its key-value cache), not ``position_ids``,
        which are the same unless the caller passes other positions (padding on the left, packed sequences).
    scaling : QueryScaling
        The multiplier, e.g. ``LayerRotary.query_scaling`` of a layer of a :class:`RotaryPlan`.

    Returns
    -------
    factors : ndarray of float64
        The shape of ``positions``: the formula of ``scaling.kind`` (see :class:`QueryScaling`).

    Raises
    ------
    TypeError
        If ``scaling`` is not a :class:`QueryScaling` or ``positions`` is not real.
    ValueError
        If a position is negative or not finite, or ``scaling.kind`` is ``"learned_log"`` (its multipliers are
        weights of the model, not in its config).

    Notes
    -----
    transformers computes these in float32 from the positions (``torch.floor`` of a float32 quotient);
    the floor can differ from the float64 one only where :math:`p / L` is within float32 rounding of an integer
    without being one, which integer positions below :math:`2^{24}` and integer :math:`L` never are.
    :func:`posenc.nn.query_scale` is the same in torch.

    Examples
    --------
    >>> query_scale([0, 8191, 8192], QueryScaling("llama4_temperature", 0.1, 8192.0)).round(6)
    array([1.      , 1.069315, 1.069315])
    """
    if not isinstance(scaling, QueryScaling):
        raise TypeError(f"scaling must be a posenc.QueryScaling, got {type(scaling).__name__}")
    s, length = scaling.formula_values()
    array = np.asarray(positions)
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise TypeError(f"positions must be an array of real numbers, got dtype {array.dtype}")
    p = array.astype(np.float64)
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError("positions must be finite and >= 0")
    if scaling.kind == "llama4_temperature":
        factors: NDArray[np.float64] = 1.0 + s * np.log1p(np.floor((p + 1.0) / length))
    elif scaling.kind == "llama4_beta":
        factors = 1.0 + s * np.log1p(np.floor(p / length))
    else:  # scalable_softmax
        factors = np.exp(s * np.log1p((p + 1.0) / length))
    return factors


@dataclass(frozen=True)
class LayerRotary:
    r"""How one kind of layer of a model rotates its queries and keys: a row of a :class:`RotaryPlan`.

    Built by :meth:`posenc.RotaryPlan.from_config` (or by its fields, checked). Frozen and hashable; its ``repr``
    shows what was understood.

    Parameters
    ----------
    layer_type : str
        The config's name of the layer's type (``"full_attention"``, ``"sliding_attention"``, ...), or
        ``"full_attention"`` for a model with one type.
    rotates : bool
        False for a NoPE layer: queries and keys pass through unrotated (the other fields then describe the
        head only).
    head_dim : int
        Features of each query head, ``>= 1`` (multi-head latent attention: ``qk_nope_head_dim +
        qk_rope_head_dim``).
    rotary_dim : int, default 0
        Features rotated, even, in ``[2, head_dim - rotary_offset]`` (0 for a NoPE layer).
    rotary_offset : int, default 0
        The first rotated feature, in ``[0, head_dim - rotary_dim]``: features ``rotary_offset`` to
        ``rotary_offset + rotary_dim - 1`` are rotated, the others pass through. The families of transformers
        use 0 (partial rotary turns the first features) or ``head_dim - rotary_dim`` (multi-head latent
        attention and DeepSeek-V4 turn the last ones).
    layout : {"interleaved", "halves"}, default "halves"
        Which of the rotated features form pair ``i``: ``2i`` and ``2i + 1``, or ``i`` and
        ``i + rotary_dim // 2`` (transformers' ``rotate_half``).
    base : float, default 10000.0
        The base (``rope_theta``) the frequencies are computed with, ``> 1``.
    scaling : RopeScaling, default RopeScaling()
        The rotary scaling, with ``partial_rotary_factor`` 1 (the rotated width is ``rotary_dim``): its
        ``attention_scaling`` multiplies the rotated features.
    axes : tuple of str, default ("position",)
        The position axes: one for text, ``("time", "height", "width")`` for M-RoPE, ``("height", "width")``
        for an axial image tower.
    axis_of_pair, frequency_of_pair : tuple of int, default ()
        With several axes: pair ``i`` turns with coordinate ``axis_of_pair[i]`` at the frequency
        ``rotary_frequencies(frequency_dim)[frequency_of_pair[i]]``. Empty with one axis.
    frequency_dim : int, default 0
        The width whose frequencies the pairs take, even (0: ``rotary_dim``). An axial tower of two axes
        takes those of ``rotary_dim // 2`` features on each axis.
    frequency_scale : float, default 1.0
        What the frequencies of several axes are multiplied by (:math:`2\pi` where the coordinates are fractions
        of the image, as in DINOv3's patch centres in :math:`[-1, 1]`).
    feature_order : tuple of int, default ()
        A permutation of the ``rotary_dim`` rotated features: the layout reads the model's feature
        ``feature_order[j]`` as its feature ``j`` (empty: the model's order). NanoChat's ``rotate_half`` turns
        the other way, which is the halves layout with the halves swapped; Gemma 4's vision tower pairs features
        within each axis's block, which is the halves layout with the middle quarters swapped.
    softmax_scale : float, default 1.0
        What the attention multiplies its softmax scale :math:`1/\sqrt{d}` by (multi-head latent attention
        with YaRN: :math:`m(s, \text{mscale\_all\_dim})^2`, DeepSeek's ``yarn_get_mscale``).
    query_scaling : QueryScaling or None, default None
        A position-dependent multiplier of the queries applied outside the rotation (see :func:`query_scale`).

    Attributes
    ----------
    attention_factor : float
        What the rotated features are multiplied by (``scaling.attention_scaling``; 1.0 for a NoPE layer).
    n_axes : int
        ``len(axes)``.

    Raises
    ------
    TypeError, ValueError
        If a field has the wrong type or is out of range, or the fields disagree (a ``scaling.rope_theta`` other
        than ``base``, for one).
    """

    layer_type: str
    rotates: bool
    head_dim: int
    rotary_dim: int = 0
    rotary_offset: int = 0
    layout: RotaryLayout = "halves"
    base: float = 10000.0
    scaling: RopeScaling = DEFAULT
    axes: tuple[str, ...] = ("position",)
    axis_of_pair: tuple[int, ...] = ()
    frequency_of_pair: tuple[int, ...] = ()
    frequency_dim: int = 0
    frequency_scale: float = 1.0
    feature_order: tuple[int, ...] = ()
    softmax_scale: float = 1.0
    query_scaling: QueryScaling | None = None
    attention_factor: float = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.layer_type, str):
            raise TypeError(f"layer_type must be a str, got {type(self.layer_type).__name__}")
        if not isinstance(self.rotates, bool):
            raise TypeError(f"rotates must be a bool, got {type(self.rotates).__name__}")
        check_int(self.head_dim, "head_dim", minimum=1)
        object.__setattr__(self, "layout", check_choice(self.layout, "layout", ROTARY_LAYOUTS))
        object.__setattr__(self, "base", check_real(self.base, "base", above=1.0))
        if not isinstance(self.scaling, RopeScaling):
            raise TypeError(f"scaling must be a posenc.RopeScaling, got {type(self.scaling).__name__}")
        check_base_agrees(self.scaling, self.base)  # a scaling's rope_theta must be the base
        if self.query_scaling is not None and not isinstance(self.query_scaling, QueryScaling):
            raise TypeError(f"query_scaling must be None or a QueryScaling, got {type(self.query_scaling).__name__}")
        object.__setattr__(self, "softmax_scale", check_real(self.softmax_scale, "softmax_scale", above=0.0))
        for name in ("axes", "axis_of_pair", "frequency_of_pair", "feature_order"):
            if not isinstance(getattr(self, name), tuple):
                raise TypeError(f"{name} must be a tuple, got {type(getattr(self, name)).__name__}")
        object.__setattr__(self, "attention_factor", self.scaling.attention_scaling if self.rotates else 1.0)
        if not self.rotates:
            if self.rotary_dim != 0:
                raise ValueError(f"rotary_dim must be 0 for a layer that does not rotate, got {self.rotary_dim}")
            return
        check_int(self.rotary_dim, "rotary_dim", minimum=2, maximum=self.head_dim, even=True)
        check_int(self.rotary_offset, "rotary_offset", minimum=0, maximum=self.head_dim - self.rotary_dim)
        check_head_dim(self.rotary_dim, self.scaling, "rotary_dim")  # LongRoPE's lists: one entry per rotated pair
        if self.scaling.partial_rotary_factor != 1.0 and self.scaling.rope_type != "proportional":
            raise ValueError(
                "scaling.partial_rotary_factor must be 1.0 in a LayerRotary: rotary_dim says how many features "
                f"are rotated, got {self.scaling.partial_rotary_factor}"
            )
        if not self.axes or not all(isinstance(axis, str) for axis in self.axes):
            raise TypeError(f"axes must be a non-empty tuple of str, got {self.axes!r}")
        n_pairs = self.rotary_dim // 2
        if self.feature_order and sorted(self.feature_order) != list(range(self.rotary_dim)):
            raise ValueError(f"feature_order must be empty or a permutation of range(rotary_dim = {self.rotary_dim})")
        object.__setattr__(self, "frequency_scale", check_real(self.frequency_scale, "frequency_scale", above=0.0))
        if len(self.axes) == 1:
            if self.frequency_scale != 1.0:
                raise ValueError("frequency_scale is for several axes only (one axis: use base and scaling)")
            if self.axis_of_pair or self.frequency_of_pair or self.frequency_dim:
                raise ValueError("axis_of_pair, frequency_of_pair and frequency_dim are for several axes only")
            return
        frequency_dim = self.frequency_dim or self.rotary_dim
        check_int(frequency_dim, "frequency_dim", minimum=2, even=True)
        if len(self.axis_of_pair) != n_pairs or len(self.frequency_of_pair) != n_pairs:
            raise ValueError(
                f"axis_of_pair and frequency_of_pair must have one entry per rotated pair ({n_pairs}), got "
                f"{len(self.axis_of_pair)} and {len(self.frequency_of_pair)}"
            )
        if not all(is_int(a) and 0 <= int(a) < len(self.axes) for a in self.axis_of_pair):
            raise ValueError(f"axis_of_pair must hold axis indices in [0, {len(self.axes)})")
        if not all(is_int(f) and 0 <= int(f) < frequency_dim // 2 for f in self.frequency_of_pair):
            raise ValueError(f"frequency_of_pair must hold pair indices in [0, {frequency_dim // 2})")
        if self.scaling.rope_type in ("dynamic", "longrope") or self.scaling.attention_scaling != 1.0:
            raise ValueError(
                f"a rotation on several axes takes fixed frequencies and no attention factor: rope_type "
                f"{self.scaling.rope_type!r} with attention factor {self.scaling.attention_scaling} is not supported"
            )

    @property
    def n_axes(self) -> int:
        """The number of position axes."""
        return len(self.axes)

    def inverse_frequencies(self, seq_len: float | None = None) -> NDArray[np.float64]:
        """The inverse frequencies of the rotated pairs of a one-axis layer, as :func:`posenc.rotary_frequencies`.

        Parameters
        ----------
        seq_len : float or None, default None
            The current sequence length, for ``"dynamic"`` and ``"longrope"`` scalings.

        Returns
        -------
        inv_freq : (rotary_dim // 2,) ndarray of float64

        Raises
        ------
        ValueError
            For a NoPE layer or a layer of several axes (see :meth:`frequencies`).
        """
        self._check_rotates()
        if self.n_axes != 1:
            raise ValueError(f"the layer rotates on {self.n_axes} axes {self.axes}: use frequencies()")
        if seq_len is not None:
            seq_len = check_real(seq_len, "seq_len", at_least=0.0)
        return inverse_frequencies(self.rotary_dim, self.base, self.scaling, seq_len)

    def frequencies(self) -> NDArray[np.float64]:
        """The frequency matrix: pair ``i`` turns by ``positions @ frequencies()[:, i]``.

        Returns
        -------
        frequencies : (n_axes, rotary_dim // 2) ndarray of float64
            One nonzero entry per column with several axes; the row of :meth:`inverse_frequencies` with one.

        Raises
        ------
        ValueError
            For a NoPE layer.
        """
        self._check_rotates()
        if self.n_axes == 1:
            return self.inverse_frequencies()[None]
        per_pair = inverse_frequencies(self.frequency_dim or self.rotary_dim, self.base, self.scaling, None)
        per_pair = per_pair * self.frequency_scale
        matrix = np.zeros((self.n_axes, self.rotary_dim // 2))
        pairs = np.arange(self.rotary_dim // 2)
        matrix[np.array(self.axis_of_pair), pairs] = per_pair[np.array(self.frequency_of_pair)]
        return matrix

    def rotate(self, x: ArrayLike, positions: ArrayLike) -> NDArray[np.float64]:
        """Rotate queries or keys as this layer does: the float64 reference (a copy for a NoPE layer).

        Parameters
        ----------
        x : (..., seq, head_dim) array_like of real
            Queries or keys of this layer, one head per slice.
        positions : (seq,) or (seq, n_axes) array_like of real
            Each row's position (one axis) or coordinates (several axes).

        Returns
        -------
        rotated : (..., seq, head_dim) ndarray of float64
            The features ``rotary_offset .. rotary_offset + rotary_dim`` rotated (and multiplied by the attention
            factor), the others copied. The query multiplier (``query_scaling``) is not applied.

        Raises
        ------
        TypeError, ValueError
            As :func:`posenc.rotate` and :func:`posenc.rotate_multiaxis`, or if ``x`` does not end in
            ``head_dim``.
        """
        array = np.array(x, dtype=np.float64)
        if array.ndim < 2 or array.shape[-1] != self.head_dim:
            raise ValueError(f"x must have shape (..., seq, head_dim={self.head_dim}), got {array.shape}")
        if not self.rotates:
            return array
        part = np.arange(self.rotary_offset, self.rotary_offset + self.rotary_dim)
        if self.feature_order:
            part = part[np.array(self.feature_order)]
        if self.n_axes == 1:
            array[..., part] = rotate(
                array[..., part], positions, base=self.base, layout=self.layout, scaling=self.scaling
            )
        else:
            array[..., part] = rotate_multiaxis(array[..., part], positions, self.frequencies(), layout=self.layout)
        return array

    def _check_rotates(self) -> None:
        if not self.rotates:
            raise ValueError(f"layer type {self.layer_type!r} does not rotate (NoPE): it has no frequencies")

    def __repr__(self) -> str:
        if not self.rotates:
            shown = [f"layer_type={self.layer_type!r}", "rotates=False", f"head_dim={self.head_dim}"]
        else:
            shown = [
                f"layer_type={self.layer_type!r}",
                f"head_dim={self.head_dim}",
                f"rotary_dim={self.rotary_dim}",
            ]
            if self.rotary_offset:
                shown.append(f"rotary_offset={self.rotary_offset}")
            shown += [f"layout={self.layout!r}", f"base={self.base}"]
            if self.scaling.rope_type != "default":  # (a default scaling says no more than the base)
                shown.append(f"scaling={self.scaling!r}")
            if self.n_axes > 1:
                counts = Counter(self.axis_of_pair)
                shown.append("axes=" + repr({axis: counts[index] for index, axis in enumerate(self.axes)}))
                if self.frequency_scale != 1.0:
                    shown.append(f"frequency_scale={self.frequency_scale}")
            if self.feature_order:
                shown.append("feature_order=(" + ", ".join(map(str, self.feature_order[:8])) + ", ...)")
            if self.softmax_scale != 1.0:
                shown.append(f"softmax_scale={self.softmax_scale}")
        if self.query_scaling is not None:
            shown.append(f"query_scaling={self.query_scaling!r}")
        return f"LayerRotary({', '.join(shown)})"


@dataclass(frozen=True, repr=False)
class RotaryPlan:
    r"""What every layer of a transformers model does with positions, read from its configuration.

    Build it with :meth:`from_config`. ``plan.layers[i]`` is layer ``i``'s :class:`LayerRotary`;
    :attr:`kinds` the distinct ones, in order of first appearance. Frozen; its ``repr`` shows what was
    understood, and which values the configuration class supplied because the config lacked them.

    Parameters
    ----------
    model_type : str
        The config's ``model_type`` (a key of the family table, :data:`posenc.config.MODEL_TYPES`).
    layers : tuple of LayerRotary
        One per layer, in order (layers of one kind share the object).
    max_position_embeddings : int or None
        The config's ``max_position_embeddings`` (the context the model is served with), if it has one.
    source : str
        The modeling file of transformers v5.23 the family's facts were read from.
    config_class : str, default ""
        The transformers configuration class whose defaults fill what a config.json leaves out
        (``"LlamaConfig"``, ``"Gemma3TextConfig"``, ...).
    defaults_used : Mapping[str, object], default {}
        Each key the config (a dict of a ``config.json``) lacked, mapped to the value ``config_class`` gives it and
        the plan used: ``{"rope_theta": 10000.0, "max_position_embeddings": 2048}`` for a minimal Llama dict. Keys
        are config.json names (``rope_local_base_freq``, ``sliding_window_pattern``, ...); ``layer_types`` maps to
        the derived tuple, ``rope_parameters`` to the dict the class supplies, and a nested default to its path
        (``"rope_parameters['sliding_attention']['rope_theta']"``); ``mrope_section`` to the modeling code's
        default. Empty when the config said everything, and for a config object (transformers filled it in).
        Read-only; not compared: two plans that rotate alike are equal.

    Attributes
    ----------
    kinds : tuple of LayerRotary
        The distinct layer kinds, in order of first appearance.
    """

    model_type: str
    layers: tuple[LayerRotary, ...]
    max_position_embeddings: int | None
    source: str
    config_class: str = ""
    defaults_used: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for name in ("model_type", "source", "config_class"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"{name} must be a str, got {type(getattr(self, name)).__name__}")
        if not isinstance(self.layers, tuple) or not all(isinstance(layer, LayerRotary) for layer in self.layers):
            raise TypeError("layers must be a tuple of posenc.LayerRotary, one per layer")
        if not self.layers:
            raise ValueError("layers must hold at least one layer")
        if self.max_position_embeddings is not None:
            check_int(self.max_position_embeddings, "max_position_embeddings", minimum=1)
        if not isinstance(self.defaults_used, Mapping) or not all(isinstance(key, str) for key in self.defaults_used):
            raise TypeError(f"defaults_used must be a mapping with str keys, got {type(self.defaults_used).__name__}")
        object.__setattr__(self, "defaults_used", MappingProxyType(dict(self.defaults_used)))

    @property
    def kinds(self) -> tuple[LayerRotary, ...]:
        """The distinct layer kinds, in order of first appearance."""
        return tuple(dict.fromkeys(self.layers))

    def layers_of(self, kind: LayerRotary) -> tuple[int, ...]:
        """The indices of the layers of ``kind`` (one of :attr:`kinds`)."""
        return tuple(index for index, layer in enumerate(self.layers) if layer == kind)

    def __repr__(self) -> str:
        lines = [f"RotaryPlan(model_type={self.model_type!r}, {len(self.layers)} layers, source={self.source!r}"]
        for kind in self.kinds:
            indices = self.layers_of(kind)
            shown = ", ".join(map(str, indices[:6])) + (", ..." if len(indices) > 6 else "")
            lines.append(f"  {len(indices)} x {kind!r} (layers {shown})")
        if self.defaults_used:
            lines.append(f"  absent from the config, {self.config_class}'s defaults:")
            lines += [f"    {key} = {_shown(value)}" for key, value in self.defaults_used.items()]
        return "\n".join(lines) + ")"

    @classmethod
    def from_config(cls, config: object, *, model_type: str | None = None) -> RotaryPlan:
        r"""Read a transformers configuration: the object, or the plain dict of a ``config.json``.

        Parameters
        ----------
        config : transformers config object or Mapping[str, object]
            The configuration of the part of the model that rotates: a text model's config, or the
            ``text_config`` / ``vision_config`` of a composite one (as an object or a dict). Read by attribute
            (objects) or key (dicts): ``model_type``, ``rope_parameters`` (v5) or ``rope_scaling`` (legacy) with
            the top-level ``rope_theta`` and ``partial_rotary_factor`` it may lean on, ``head_dim`` or
            ``hidden_size // num_attention_heads``, ``num_hidden_layers``, ``layer_types``,
            ``max_position_embeddings`` and ``original_max_position_embeddings``, and the family's own keys
            (``no_rope_layers``, ``qk_rope_head_dim``, ``rope_interleave``, ``mrope_section``, ``per_layer_config``,
            ...). A key a dict lacks takes the default the family's transformers configuration class gives it
            (the base, the local base, the layer types it derives, Gemma 4's ``global_head_dim``, ...), and the
            plan's ``defaults_used`` names it.
        model_type : str or None, default None
            Overrides the config's ``model_type`` (a dict of a ``text_config`` may lack one).

        Returns
        -------
        RotaryPlan
            Its ``defaults_used`` maps each key a dict lacked to the class default used (empty for an object).

        Raises
        ------
        TypeError
            If ``config`` is neither a mapping nor an object with attributes, or a value has the wrong type.
        ValueError
            If the ``model_type`` is not one posenc knows (:data:`posenc.config.MODEL_TYPES`), the config has no rotary
            parameters (a composite config: pass its ``text_config``), a key posenc needs is missing and the
            configuration class gives it no default either (a Laguna rope dict without ``rope_theta``), or derives
            it by a rule posenc does not carry (DeepSeek-V4's and dots.note's ``layer_types``), a key the family
            does not read is present (``llama_4_scaling_beta`` outside Ministral 3 and Mistral 4), or the values
            disagree (a ``qk_rope_head_dim`` that is not the rotated width). The message names the key.

        References
        ----------
        .. [1] transformers v5.23, ``src/transformers/modeling_rope_utils.py``
           (``RotaryEmbeddingConfigMixin.convert_rope_params_to_dict`` and ``standardize_rope_params``), and the
           modeling file of each family (``source``).

        Examples
        --------
        >>> llama31 = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
        ...            "num_hidden_layers": 32, "max_position_embeddings": 131072, "rope_theta": 500000.0,
        ...            "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
        ...                             "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
        >>> plan = RotaryPlan.from_config(llama31)
        >>> len(plan.kinds), plan.layers[0].rotary_dim, plan.layers[0].layout, plan.layers[0].base
        (1, 128, 'halves', 500000.0)

        A dict that leaves the base out reads with the class's default, and says so:

        >>> sparse = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2}
        >>> plan = RotaryPlan.from_config(sparse)
        >>> plan.layers[0].base, plan.config_class, dict(plan.defaults_used)
        (10000.0, 'LlamaConfig', {'rope_theta': 10000.0, 'max_position_embeddings': 2048})
        """
        return _read(config, model_type)


def _shown(value: object) -> str:
    """A default as the plan's repr shows it: a long list or tuple (derived layer types) by its first entries."""
    if isinstance(value, (list, tuple)) and len(value) > 6:
        return "(" + ", ".join(map(repr, value[:6])) + f", ... {len(value)} entries)"
    return repr(value)


# --- Reading ------------------------------------------------------------------------------------------------

_MISSING: Any = object()

_FILLED_BY_ROPE = frozenset({"rope_parameters", "rope_theta", "partial_rotary_factor"})
"""Defaults the rope dict's construction applies itself (only where a dict lacks them), not :meth:`_Config.get`."""


class _Config:
    """Attribute (object) or key (dict) access to a config, per layer for transformers' heterogeneous ones.

    A dict that lacks a key the family's configuration class gives a default (:attr:`Family.defaults`) reads that
    default, and :attr:`used` records it (shared with the per-layer views).
    """

    def __init__(self, config: object, name: str = "config") -> None:
        if isinstance(config, (str, bytes)) or config is None or is_real(config):
            raise TypeError(
                f"config must be a transformers config object or a dict of config.json, got {type(config).__name__}"
            )
        self.raw = config
        self.name = name
        self.is_dict = isinstance(config, Mapping)
        self.heterogeneous = not self.is_dict and getattr(config, "is_heterogeneous", False) is True
        self.aliases: dict[str, str] = {}
        self.defaults: Mapping[str, Any] = {}
        self.used: dict[str, Any] = {}
        self.overrides: dict[int, dict[str, Any]] = {}

    def key_of(self, key: str) -> str:
        """The config.json key ``key`` is read under: itself, or its name in the class's ``attribute_map``."""
        assert isinstance(self.raw, Mapping)
        return self.aliases[key] if key not in self.raw and key in self.aliases else key

    def get(self, key: str, default: Any = None) -> Any:
        if self.is_dict:
            assert isinstance(self.raw, Mapping)
            name = self.key_of(key)
            if name in self.raw:
                return self.raw[name]
            if name in self.defaults and name not in _FILLED_BY_ROPE:
                return self.default(name)
            return default
        return getattr(self.raw, key, default)

    def given(self, key: str) -> bool:
        """Whether the config itself has ``key`` (not its class's default)."""
        if self.is_dict:
            assert isinstance(self.raw, Mapping)
            return self.key_of(key) in self.raw
        return hasattr(self.raw, key)

    def default(self, key: str) -> Any:
        """The class's default of ``key`` (a copy), recorded in :attr:`used`."""
        value = copy.deepcopy(self.defaults[key])
        self.used[key] = value
        return copy.deepcopy(value)

    def layer(self, index: int) -> _Config:
        """The config of layer ``index``: its per-layer view (transformers' ``per_layer_config``) if any."""
        if self.heterogeneous:
            return _Config(self.raw.per_layer_config[index], f"{self.name}.per_layer_config[{index}]")  # type: ignore[attr-defined]
        overrides = self.get("per_layer_config")
        if self.is_dict and isinstance(overrides, Mapping) and overrides:
            for key, value in overrides.items():
                if (int(key) if isinstance(key, str) and key.isdigit() else key) == index:
                    return self._view(value, f"{self.name}['per_layer_config'][{key!r}]")
        if index in self.overrides:  # a per_layer_config the class derives when the config has none
            return self._view(self.overrides[index], f"{self.name} (layer {index})")
        return self

    def _view(self, overrides: Mapping[str, Any], name: str) -> _Config:
        assert isinstance(self.raw, Mapping)
        view = _Config({**self.raw, **overrides}, name)
        view.aliases, view.defaults, view.used = self.aliases, self.defaults, self.used
        return view


def _read(config: object, model_type: str | None) -> RotaryPlan:
    reader = _Config(config)
    if model_type is None:
        model_type = reader.get("model_type")
        if not model_type:
            raise ValueError("config has no model_type: pass model_type= (one of posenc.config.MODEL_TYPES)")
    if not isinstance(model_type, str):
        raise TypeError(f"model_type must be a str, got {type(model_type).__name__} {model_type!r}")
    family = FAMILIES.get(model_type)
    if family is None and model_type in ROTATES_UNREAD:
        raise ValueError(
            f"config['model_type'] = {model_type!r}: transformers' {model_type} rotates its queries and keys, but "
            f"posenc does not read it: {ROTATES_UNREAD[model_type]}"
        )
    if family is None and model_type in COMPOSITES:
        raise ValueError(
            f"config['model_type'] = {model_type!r} is a composite model whose language model is a "
            f"{COMPOSITES[model_type]!r} model: pass its text_config (a config.json that keeps the language model's "
            f"keys at its top level: with model_type={COMPOSITES[model_type]!r}, where transformers reads them there)"
        )
    if family is None:
        raise ValueError(
            f"config['model_type'] = {model_type!r} is not a family posenc knows (transformers v5.23 families that "
            "rotate: posenc.config.MODEL_TYPES); a family it does not know may lay out its pairs or skip layers in "
            "ways its config does not say"
        )
    reader.aliases = dict(family.attribute_map)
    if reader.is_dict:
        if reader.given("text_config") and not any(
            reader.given(key) for key in ("rope_parameters", "rope_scaling", "rope_theta")
        ):
            # a composite config.json whose language model is its text_config: the top level would read as the
            # class's defaults, not as the model (a vision or audio tower's class keeps its rope at the top level)
            sub_configs = [key for key in ("text_config", "vision_config", "audio_config") if reader.given(key)]
            raise ValueError(
                f"config has no rope_parameters, rope_scaling or rope_theta of its own: pass one of its sub-configs "
                f"{sub_configs}"
            )
        reader.defaults = family.defaults.values
    layer_types = _layer_types(reader, family)
    rope = _rope_parameters(reader, family, layer_types)
    if family.rope_switch is not None and reader.get(family.rope_switch[0]) != family.rope_switch[1]:
        switch, value = family.rope_switch
        if family.switch_off == "absolute":
            raise ValueError(
                f"config[{switch!r}] = {reader.get(switch)!r}: {family.source} adds absolute position embeddings and "
                f"rotates nothing unless it is {value!r}"
            )
        if family.switch_off == "alibi":
            raise ValueError(
                f"config[{switch!r}] = {reader.get(switch)!r}: {family.source} adds ALiBi biases to the logits and "
                f"rotates nothing unless it is {value!r} (posenc.alibi_bias computes such biases)"
            )
        # Granite 4.0-H builds its rotary embedding only for position_embedding_type "rope" (its checkpoints say
        # "nope", its class None), Zamba2 only for use_mem_rope true (its class's default is false): every
        # attention layer then runs unrotated, whatever the rope dict says
        rope = None
    n_layers = _n_layers(reader, family, layer_types)
    max_positions = reader.get("max_position_embeddings")
    if max_positions is not None:
        max_positions = check_int(max_positions, "config['max_position_embeddings']", minimum=1)
    _per_layer_defaults(reader, family, layer_types)
    nested = _nested_keys(rope, layer_types, family)
    cache: dict[tuple[object, ...], LayerRotary] = {}
    layers = []
    for index in range(n_layers):
        layer_type = layer_types[index] if layer_types else "full_attention"
        view = reader.layer(index)
        if layer_type in NO_ATTENTION_TYPES:  # a recurrent or convolutional layer: no attention to rotate
            key: tuple[object, ...] = (layer_type, _head_dim(view, family))
            if key not in cache:
                cache[key] = LayerRotary(layer_type, False, _head_dim(view, family))
            layers.append(cache[key])
            continue
        layer_dict, where = _layer_dict(rope, nested, family, layer_type)
        rotates = rope is not None and _rotates(reader, family, layer_dict, layer_type, index)
        if rotates and family.per_layer_theta and reader.get("layer_rope_theta") is not None:
            # Granite SWA: one rotary per distinct nonzero theta of config.layer_rope_theta, layer i takes its own
            assert isinstance(layer_dict, dict)
            layer_dict = {**layer_dict, "rope_theta": reader.get("layer_rope_theta")[index]}
            where = f"config['layer_rope_theta'][{index}]"
        dims = _mla_dims(view) if family.rotary == "mla" else ()
        theta = layer_dict.get("rope_theta") if isinstance(layer_dict, dict) else None
        key = (layer_type, rotates, _head_dim(view, family), dims, theta)
        if key not in cache:
            if rotates:
                assert isinstance(layer_dict, dict)
                _check_layer_truncate(rope, nested, layer_dict, where)
                cache[key] = _read_layer(reader, view, family, layer_dict, where, layer_type, max_positions)
            else:
                head_dim = dims[0] if dims else _head_dim(view, family)
                cache[key] = LayerRotary(
                    layer_type, False, head_dim, query_scaling=_query_scaling(reader, family, {}, None)
                )
        layers.append(cache[key])
    return RotaryPlan(
        model_type, tuple(layers), max_positions, family.source, family.defaults.config_class, dict(reader.used)
    )


def _per_layer_defaults(reader: _Config, family: Family, layer_types: list[str] | None) -> None:
    """The ``per_layer_config`` a class derives when a config.json has none (Gemma 4: the full layers' head size)."""
    if not reader.is_dict or reader.given("per_layer_config"):
        return
    if family.per_layer_required:
        raise ValueError(
            f"config has no per_layer_config, which {family.defaults.config_class} derives from keys of its own "
            "(the sliding layers' head sizes) by a rule posenc does not carry; add per_layer_config"
        )
    if family.full_head_dim_key is not None and layer_types:
        key = family.full_head_dim_key
        head_dim = reader.get(key) if reader.given(key) else reader.default(key)
        head_dim = check_int(head_dim, f"config[{key!r}]", minimum=1)
        reader.overrides = {
            index: {"head_dim": head_dim} for index, kind in enumerate(layer_types) if kind == "full_attention"
        }


def _layer_dict(
    rope: dict[str, Any] | None, nested: list[str], family: Family, layer_type: str
) -> tuple[dict[str, Any] | None, str]:
    """The rope dict of a layer of ``layer_type`` (None: the layer type has none), and how messages name it."""
    if rope is None:
        return None, "config['rope_parameters']"
    if not nested:
        return rope, "config['rope_parameters']"
    label = family.rope_label_of(layer_type) if family.rope_labels else layer_type
    if label not in rope:
        raise ValueError(f"config['rope_parameters'] is nested by layer type {nested} but has no {label!r}")
    return rope[label], f"config['rope_parameters'][{label!r}]"


def _rope_parameters(reader: _Config, family: Family, layer_types: list[str] | None) -> dict[str, Any] | None:
    """The rope dict as the family's configuration class builds it: v5 ``rope_parameters`` or legacy
    ``rope_scaling``, else the class's default dict, with the top-level ``rope_theta`` and ``partial_rotary_factor``
    (and the family's legacy names) moved in, and the class's defaults where a dict of a config.json has neither
    (:data:`posenc._families.RopeForm`). None for a family that runs without rotation when its base is None (OLMo
    Hybrid)."""
    if family.rope_form == "fixed":
        fixed: dict[str, Any] = {"rope_type": "default", "rope_theta": family.fixed_theta}  # the code's constant
        width_key = family.rotary_dim_key
        if width_key is not None and reader.get(width_key) is not None:
            # GPT-J's attention turns the first rotary_dim features (None: all of them)
            width = check_int(reader.get(width_key), f"config[{width_key!r}]", minimum=1)
            fixed["partial_rotary_factor"] = width / _head_dim(reader, family)
        return fixed
    if family.rope_form == "theta_only":
        theta = reader.get("rope_theta") if reader.given("rope_theta") else None
        if theta is None and reader.is_dict:
            theta = reader.default("rope_theta")
        return {"rope_type": "default", "rope_theta": theta}
    parameters = reader.get("rope_parameters")
    legacy = reader.get("rope_scaling")
    if parameters is not None and legacy is not None and parameters is not legacy and dict(parameters) != dict(legacy):
        raise ValueError(
            "config has both rope_parameters and rope_scaling and they differ: transformers v5 reads rope_scaling "
            "first; keep one"
        )
    given = legacy if legacy else parameters
    if given is not None and not isinstance(given, Mapping):
        raise TypeError(f"config['rope_parameters'] must be a dict, got {type(given).__name__}")
    rope = {key: (dict(value) if isinstance(value, Mapping) else value) for key, value in (given or {}).items()}
    if reader.is_dict and family.rope_form == "by_layer_type":
        rope = _rope_by_layer_type(reader, family, rope, layer_types)
    elif reader.is_dict:
        if family.rope_form == "not_carried" and not _nested_keys(rope, layer_types, family):
            raise ValueError(
                f"config has no rope_parameters by layer type, which {family.defaults.config_class} builds from keys "
                "of its own by a rule posenc does not carry; add rope_parameters"
            )
        if not rope and "rope_parameters" in reader.defaults:
            rope = reader.default("rope_parameters")  # what the class's __post_init__ supplies
        if family.rope_form in ("mixin", "not_carried"):
            _fill_rope_defaults(reader, family, rope, layer_types)
    elif family.rope_form in ("mixin", "by_layer_type"):
        # an object: its rope_parameters are standardised; the top-level values fill what a dict still lacks (a
        # class that takes its rope dicts as given leaves them as they are, and so does its modeling code: DeepSeek-V4
        # rotates the whole head of a nested dict without partial_rotary_factor, whatever the top-level factor)
        top_level: dict[str, Any] = {}
        for legacy_key, key in (
            *family.aliases,
            ("rope_theta", "rope_theta"),
            ("partial_rotary_factor", "partial_rotary_factor"),
        ):
            value = reader.get(legacy_key)
            if value is not None:
                top_level.setdefault(key, value)
        for layer_dict in _dicts_of(rope, layer_types, family):
            for key, value in top_level.items():
                layer_dict.setdefault(key, value)
    dicts = _dicts_of(rope, layer_types, family)
    if family.rope_optional and all(layer_dict.get("rope_theta") is None for layer_dict in dicts):
        return None  # the modeling code builds no rotary embedding: every layer is NoPE
    if not rope:
        sub_configs = [key for key in ("text_config", "vision_config", "audio_config") if reader.given(key)]
        hint = f": pass one of its sub-configs {sub_configs}" if sub_configs else ""
        raise ValueError(f"config has no rope_parameters, rope_scaling or rope_theta{hint}")
    return rope


def _dicts_of(rope: dict[str, Any], layer_types: list[str] | None, family: Family) -> list[dict[str, Any]]:
    """The rope dicts of a (possibly nested) rope dict: one per layer type (None entries left out), or itself."""
    nested = _nested_keys(rope, layer_types, family)
    return [rope[key] for key in nested if rope[key] is not None] if nested else [rope]


def _fill_rope_defaults(reader: _Config, family: Family, rope: dict[str, Any], layer_types: list[str] | None) -> None:
    """``RotaryEmbeddingConfigMixin.convert_rope_params_to_dict``: each rope dict takes the top-level
    ``rope_theta`` and ``partial_rotary_factor`` where it has none, else the class's defaults of those."""
    for key in ("rope_theta", "partial_rotary_factor"):
        names = [legacy for legacy, canonical in family.aliases if canonical == key] + [key]
        given = next((reader.get(name) for name in names if reader.given(name)), _MISSING)
        width_key = family.rotary_dim_key
        if key == "partial_rotary_factor" and given is _MISSING and width_key and reader.get(width_key) is not None:
            # MiniMax-M2's convert_rope_params_to_dict: a legacy width, kwargs.setdefault("partial_rotary_factor",
            # rotary_dim / head_dim), where neither the file's factor nor the rope dict's says otherwise
            width = check_int(reader.get(width_key), f"config[{width_key!r}]", minimum=1)
            given = width / _head_dim(reader, family)
        if key == "partial_rotary_factor" and family.partial_hardcoded and given is not _MISSING:
            # Bamba's __post_init__ replaces the top-level value by its default before the rope dict takes it
            given = family.defaults.values[key]
        if given is None:
            continue  # an explicit null: transformers fills nothing either
        for layer_dict in _dicts_of(rope, layer_types, family):
            if key in layer_dict:
                continue
            if given is not _MISSING:
                layer_dict[key] = given
            elif key in reader.defaults:
                layer_dict[key] = reader.default(key)


def _rope_by_layer_type(
    reader: _Config, family: Family, rope: dict[str, Any], layer_types: list[str] | None
) -> dict[str, Any]:
    """Gemma 3's, ModernBERT's, OLMo 3's and NeoMME's ``convert_rope_params_to_dict``: one dict per layer type,
    each with its own base (:class:`posenc._families.LayerBase`); a flat (legacy) dict scales the full layers."""
    if not _nested_keys(rope, [base.layer_type for base in family.layer_bases], family):
        flat, rope = rope, {}
        for base in family.layer_bases:
            rope[base.layer_type] = {"rope_type": "default"}
            if flat and base.layer_type in family.scaling_layers:
                rope[base.layer_type].update(copy.deepcopy(flat))
    shared = Counter(base.key for base in family.layer_bases)
    for base in family.layer_bases:
        layer_dict = rope.get(base.layer_type)
        if layer_dict is None:
            layer_dict = rope[base.layer_type] = {"rope_type": "default"}
        where = f"rope_parameters[{base.layer_type!r}]"
        if "rope_theta" not in layer_dict:
            if base.key is not None and reader.given(base.key):
                layer_dict["rope_theta"] = reader.get(base.key)
            else:
                name = base.key if base.key is not None and shared[base.key] == 1 else f"{where}['rope_theta']"
                layer_dict["rope_theta"] = reader.used[name] = base.default
        if base.partial is not None and "partial_rotary_factor" not in layer_dict:
            layer_dict["partial_rotary_factor"] = reader.used[f"{where}['partial_rotary_factor']"] = base.partial
    return rope


def _nested_keys(rope: Mapping[str, Any] | None, layer_types: Sequence[str] | None, family: Family) -> list[str]:
    """The keys a rope dict is nested under (layer types, or the family's own labels), or [] for a flat dict."""
    if rope is None:
        return []
    labels = set(layer_types or ()) | set(family.rope_labels)
    return [key for key in rope if key in labels]


def _layer_types(reader: _Config, family: Family) -> list[str] | None:
    if reader.is_dict and family.derived in ("bamba", "falcon_h1", "recurrent_gemma", "all_sliding"):
        # a property of the config class, not written to config.json: computed as the class computes it
        n_layers = check_int(reader.get("num_hidden_layers"), "config['num_hidden_layers']", minimum=1)
        if family.derived == "bamba":
            indices = reader.get("attn_layer_indices") or ()
            return ["full_attention" if i in indices else "linear_attention" for i in range(n_layers)]
        if family.derived == "falcon_h1":
            return ["hybrid"] * n_layers
        if family.derived == "all_sliding":
            return ["sliding_attention"] * n_layers
        blocks = reader.get("block_types")
        if not blocks:
            raise ValueError("config has no block_types, which say which layers of RecurrentGemma attend")
        cycled = [blocks[i % len(blocks)] for i in range(n_layers)]
        return ["linear_attention" if block == "recurrent" else "sliding_attention" for block in cycled]
    layer_types = reader.get("layer_types")
    if layer_types is None and reader.is_dict and family.layer_pattern is not None:
        derived = _derived_layer_types(reader, family, family.layer_pattern)
        reader.used["layer_types"] = tuple(derived)
        return derived
    if layer_types is None:
        return None
    if isinstance(layer_types, (str, bytes)) or not isinstance(layer_types, Sequence):
        raise TypeError(f"config['layer_types'] must be a list of str, got {type(layer_types).__name__}")
    if not all(isinstance(item, str) for item in layer_types):
        raise TypeError("config['layer_types'] must be a list of str")
    return [LEGACY_LAYER_TYPES.get(str(kind), str(kind)) for kind in layer_types]


def _derived_layer_types(reader: _Config, family: Family, pattern: LayerPattern) -> list[str]:
    """The ``layer_types`` the family's configuration class derives when a config.json has none."""
    if pattern.kind == "not_carried":
        raise ValueError(
            f"config has no layer_types, which {family.defaults.config_class} derives by a rule posenc does not "
            "carry; add layer_types"
        )
    n = _layer_count(reader, family)
    if n is None:
        raise ValueError(f"config has no layer count (none of {list(family.layer_count_keys)}) and no layer_types")
    full, other = pattern.full, pattern.other
    if pattern.kind == "constant":
        return [full] * n
    if pattern.kind == "listed":
        return list(pattern.cycle)
    if pattern.kind == "cycle":
        return [other if i in pattern.first else pattern.cycle[i % len(pattern.cycle)] for i in range(n)]
    if pattern.kind == "periodic":

        def periodic(count: int, key: str | None, period: int) -> list[str]:
            if key is not None:
                period = check_int(reader.get(key), f"config[{key!r}]", minimum=1)
            kinds = []
            for i in range(count):
                j = count - 1 - i if pattern.from_end else i
                last = pattern.last == "always" and i == count - 1
                kinds.append(full if (j + pattern.shift) % period == 0 or i in pattern.first or last else other)
            if pattern.last == "if_none" and count and full not in kinds:
                kinds[-1] = full
            return kinds

        prefix = 0
        if pattern.prefix_key is not None:
            prefix = check_int(reader.get(pattern.prefix_key, 0), f"config[{pattern.prefix_key!r}]", minimum=0)
        return [
            *periodic(prefix, pattern.prefix_period_key, pattern.period),
            *periodic(n - prefix, pattern.period_key, pattern.period),
        ]
    gate = bool(reader.get(pattern.gate_key)) if pattern.gate_key is not None else True
    window = reader.get("sliding_window")
    if pattern.kind == "windowed":
        start = reader.get("max_window_layers") or 0
        return [other if gate and window is not None and i >= start else full for i in range(n)]
    if pattern.kind == "windowed_alternating":
        stop = reader.get("max_window_layers") or 0
        return [other if gate and i % 2 == 0 and i < stop else full for i in range(n)]
    if pattern.kind == "indices":
        assert pattern.period_key is not None
        indices = reader.get(pattern.period_key)
        return [full if indices is None or i in indices else other for i in range(n)]
    flags = _no_rope_flags(reader, family, n)  # "no_rope"
    if pattern.gate_key is not None:
        return [other if gate and window is not None and not flags[i] else full for i in range(n)]
    return [other if flags[i] else full for i in range(n)]


def _no_rope_flags(reader: _Config, family: Family, n: int) -> list[bool]:
    """``no_rope_layers`` (1: the layer rotates), or every ``no_rope_layer_interval``-th layer NoPE without it."""
    flags = reader.get("no_rope_layers")
    if not flags:
        interval = reader.get("no_rope_layer_interval")
        if interval is None:
            raise ValueError(
                f"config has neither no_rope_layers nor no_rope_layer_interval, which say which layers of "
                f"{family.source} skip the rotation; add one"
            )
        interval = check_int(interval, "config['no_rope_layer_interval']", minimum=1)
        return [(index + 1) % interval != 0 for index in range(n)]
    if isinstance(flags, (str, bytes)) or not isinstance(flags, Sequence) or len(flags) < n:
        raise ValueError(f"config['no_rope_layers'] must have one entry per layer, got {flags!r}")
    return [bool(flag) for flag in flags]


def _layer_count(reader: _Config, family: Family) -> int | None:
    """The config's number of layers (its class's default if it has none), or None if it names none."""
    if reader.is_dict and family.derived == "longcat" and reader.get("num_layers") is not None:
        # LongCat-Flash's num_hidden_layers is a property, 2 * num_layers: two attentions per layer
        return 2 * check_int(reader.get("num_layers"), "config['num_layers']", minimum=1)
    if reader.is_dict and family.derived == "hrm" and reader.get("num_layers_per_stack") is None:
        # HRM's __post_init__: a file without num_layers_per_stack gives the count of one stack as
        # num_hidden_layers, which becomes num_layers_per_stack * H_cycles * (L_cycles + 1), a cache layer per call
        per_stack = check_int(reader.get("num_hidden_layers"), "config['num_hidden_layers']", minimum=1)
        h_cycles = check_int(reader.get("H_cycles"), "config['H_cycles']", minimum=1)
        l_cycles = check_int(reader.get("L_cycles"), "config['L_cycles']", minimum=0)
        return per_stack * h_cycles * (l_cycles + 1)
    for key in family.layer_count_keys:
        value = reader.get(key)
        if value is not None:
            return check_int(value, f"config[{key!r}]", minimum=1)
    return None


def _n_layers(reader: _Config, family: Family, layer_types: list[str] | None) -> int:
    count = _layer_count(reader, family)
    if count is None:
        if layer_types:
            return len(layer_types)
        raise ValueError(f"config has no layer count (none of {list(family.layer_count_keys)}) and no layer_types")
    if layer_types is not None and len(layer_types) < count:
        raise ValueError(f"config['layer_types'] has {len(layer_types)} entries for {count} layers")
    return count


def _head_dim(layer: _Config, family: Family) -> int:
    if family.head_rule == "sam_memory":
        # the memory attention's heads: memory_attention_hidden_size // (downsample_rate * num_attention_heads)
        keys = (
            "memory_attention_hidden_size",
            "memory_attention_downsample_rate",
            "memory_attention_num_attention_heads",
        )
        hidden, rate, heads = (check_int(layer.get(key), f"config[{key!r}]", minimum=1) for key in keys)
        return hidden // (rate * heads)
    if layer.is_dict and family.rotary == "mla" and family.mla_head == "rope":
        return _mla_dims(layer)[2]  # the class sets head_dim = qk_rope_head_dim, whatever config.json says
    head_dim = layer.get("head_dim") if family.head_rule != "derived" else None
    if head_dim is None and family.head_rule == "double_hidden":
        # Zamba 2's attention_head_dim: 2 * hidden_size // num_attention_heads (its attention sees [x, embedding])
        return (
            2
            * check_int(layer.get("hidden_size"), "config['hidden_size']", minimum=1)
            // check_int(layer.get("num_attention_heads"), "config['num_attention_heads']", minimum=1)
        )
    if head_dim is not None:
        return check_int(head_dim, f"{layer.name}['head_dim']", minimum=1)
    hidden_key, heads_key = family.head_keys
    hidden, heads = layer.get(hidden_key), layer.get(heads_key)
    if hidden is None or heads is None:
        raise ValueError(f"config has no head_dim and no {hidden_key} and {heads_key} to derive it from")
    return check_int(hidden, f"config[{hidden_key!r}]", minimum=1) // check_int(
        heads, f"config[{heads_key!r}]", minimum=1
    )


def _rotates(reader: _Config, family: Family, layer_dict: object, layer_type: str, index: int) -> bool:
    """Whether layer ``index`` rotates, by the family's rule (its modeling code) and the config."""
    if layer_dict is None:
        return False  # a nested rope dict with None for this layer type (beam's full attention)
    rule = family.nope
    if rule is None:
        return True
    if rule == "no_rope_layers":
        return _no_rope_flags(reader, family, index + 1)[index]
    if rule == "sliding_only":
        return layer_type == "sliding_attention"
    if rule == "sliding_or_dense_prefix":
        mlp_types = reader.get("mlp_layer_types") or ()
        dense = index < len(mlp_types) and mlp_types[index] == "dense"
        return layer_type == "sliding_attention" or (dense and reader.get("prefix_dense_sliding_window_pattern") == 1)
    if rule == "sliding_only_if_hybrid":
        return reader.get("sliding_window") is None or layer_type == "sliding_attention"
    if rule == "layer_rope_theta":
        thetas = reader.get("layer_rope_theta")
        if thetas is None and reader.is_dict and family.nope_on_full_layers:
            # MUSE's __post_init__: layer_rope_theta is 0 (NoPE) on the layers its pattern makes full attention
            assert family.layer_pattern is not None
            full = _derived_layer_types(reader, family, family.layer_pattern)
            theta = layer_dict.get("rope_theta") if isinstance(layer_dict, dict) else None
            reader.used["layer_rope_theta"] = tuple(0 if kind == family.layer_pattern.full else theta for kind in full)
            return full[index] != family.layer_pattern.full
        if thetas is None:
            return True
        return bool(thetas[index])
    raise AssertionError(rule)


def _check_layer_truncate(
    rope: Mapping[str, Any] | None, nested: list[str], layer_dict: Mapping[str, Any], where: str
) -> None:
    """transformers 5.23 reads YaRN's ``truncate`` from the top level of ``rope_parameters``
    (``_compute_yarn_parameters``: ``config.rope_parameters.get("truncate", True)``), not from a layer type's dict: a
    layer dict whose ``truncate`` differs from that is refused, naming the key, rather than read either way."""
    if not nested or rope is None or "truncate" not in layer_dict:
        return
    if layer_dict.get("rope_type", layer_dict.get("type")) != "yarn":
        return
    used = rope.get("truncate", True)
    if layer_dict["truncate"] != used:
        raise ValueError(
            f"{where}['truncate'] = {layer_dict['truncate']!r}: transformers 5.23 reads YaRN's truncate from the top "
            f"level of rope_parameters (modeling_rope_utils._compute_yarn_parameters), not from a layer type's dict, "
            f"so its model uses truncate = {used!r} for these layers; posenc refuses rather than read the key either "
            "way"
        )


def _read_layer(
    reader: _Config,
    layer: _Config,
    family: Family,
    layer_dict: dict[str, Any],
    where: str,
    layer_type: str,
    max_positions: int | None,
) -> LayerRotary:
    """The :class:`LayerRotary` of a rotating layer, from its rope dict ``layer_dict``."""
    config_head_dim = _head_dim(layer, family)
    if family.rotary == "mla" and reader.is_dict and family.mla_head != "config":
        # the config class sets head_dim in __post_init__, whatever config.json says: qk_rope_head_dim (DeepSeek)
        # or qk_nope_head_dim + qk_rope_head_dim (Mistral 4, with partial_rotary_factor = rope / head)
        _, nope_dim, rope_dim = _mla_dims(layer)
        config_head_dim = rope_dim if family.mla_head == "rope" else nope_dim + rope_dim
    parameters = dict(layer_dict)
    if parameters.get("rope_theta") is None:
        raise ValueError(
            f"{where} has no rope_theta, and {family.defaults.config_class} fills in none (its rope dict is taken "
            "as the config gives it); add 'rope_theta'"
        )
    family_values = {
        key: parameters.pop(key) for key in (*family.rope_keys, "max_position_embeddings") if key in parameters
    }
    if family.multiaxis is not None and "mrope" in (parameters.get("rope_type"), parameters.get("type")):
        # Qwen2-VL's convert_rope_params_to_dict: the legacy rope_type "mrope" is the default frequencies (the
        # standardised dict keeps "type": "mrope" beside "rope_type": "default")
        rope_type = parameters.get("rope_type", "default")
        parameters = {key: value for key, value in parameters.items() if key not in ("rope_type", "type")}
        parameters["rope_type"] = "default" if rope_type == "mrope" else rope_type
    if family.multiaxis is not None and family.multiaxis.startswith("axial"):
        # transformers marks an axial tower's default frequencies with rope_type "axial" (default_rope_type)
        if parameters.get("rope_type", parameters.get("type")) == "axial":
            parameters = {key: value for key, value in parameters.items() if key not in ("rope_type", "type")}
    if "partial_rotary_factor" not in parameters and family.rotary == "mla" and family.mla_head != "rope":
        # Mistral 4's __post_init__ and dots.note's conversion: partial_rotary_factor = qk_rope_head_dim / head_dim
        parameters["partial_rotary_factor"] = _mla_dims(layer)[2] / config_head_dim
        if reader.is_dict:
            reader.used["partial_rotary_factor"] = parameters["partial_rotary_factor"]
    base = check_real(parameters["rope_theta"], f"{where}['rope_theta']", above=1.0)
    if (
        family.alpha_key
        and family_values.get("alpha")
        and parameters.get("rope_type", parameters.get("type")) == "dynamic"
    ):
        # HunYuan: "dynamic" with a fixed alpha is a fixed NTK base, base * alpha ** (d / (d - 2)).
        # Its compute_ntk_alpha_rope_parameters reads rope_theta, alpha and config.head_dim, nothing else: the
        # other keys its checkpoints ship (factor, YaRN's beta_fast, mscale, ...) are ignored, and the whole head turns.
        alpha = check_real(family_values["alpha"], f"{where}['alpha']", above=0.0)
        base = base * alpha ** (config_head_dim / (config_head_dim - 2))
        parameters = {"rope_type": "default", "rope_theta": base}
    given_type = parameters.get("rope_type", parameters.get("type", "default"))
    if given_type in dict(family.rope_type_aliases):
        # Phi-3's convert_rope_params_to_dict: the legacy "su" and "yarn" are LongRoPE (a YaRN reading would be
        # a rotation transformers never computes). It renames them after standardize_rope_params, which moves a
        # top-level original_max_position_embeddings into the dict for "yarn" but not for "su": transformers 5.23
        # then fails on such an "su" dict (KeyError: original_max_position_embeddings)
        if given_type == "su" and "original_max_position_embeddings" not in parameters:
            raise ValueError(
                f"{where}['rope_type'] = 'su' without {where}['original_max_position_embeddings']: "
                f"{family.defaults.config_class} reads 'su' as 'longrope' but does not take the top-level "
                "original_max_position_embeddings for it, so transformers refuses this config; write 'longrope'"
            )
        parameters = {key: value for key, value in parameters.items() if key not in ("rope_type", "type")}
        parameters["rope_type"] = dict(family.rope_type_aliases)[given_type]
    if family.rope_types and parameters.get("rope_type", parameters.get("type", "default")) not in family.rope_types:
        raise ValueError(
            f"{where}['rope_type'] = {given_type!r}: {family.defaults.config_class} accepts only "
            f"{list(family.rope_types)}, so transformers refuses this config"
        )
    scaling = RopeScaling.from_dict(
        parameters,
        max_position_embeddings=max_positions,
        original_max_position_embeddings=reader.get("original_max_position_embeddings"),
    )
    if family.partial_ignored and scaling.rope_type == "default" and scaling.partial_rotary_factor != 1.0:
        # Llama's compute_default_rope_parameters (and its copies) never reads the factor: the whole head turns
        scaling = replace(scaling, partial_rotary_factor=1.0)
    rotary_dim = family.axial_rotary_dim(config_head_dim) or _rotary_dim(config_head_dim, scaling, where)
    if family.partial_ignored and family.rotary != "mla" and scaling.rope_type != "proportional":
        if rotary_dim != config_head_dim:
            raise ValueError(
                f"{where}['partial_rotary_factor'] = {scaling.partial_rotary_factor}: the {scaling.rope_type!r} "
                f"frequencies cover int({config_head_dim} * {scaling.partial_rotary_factor}) = {rotary_dim} features, "
                f"but {family.source} turns every feature of the head (its default frequencies ignore the factor, "
                "its apply_rotary_pos_emb does not slice), so transformers fails on this config"
            )
    head_dim, offset = config_head_dim, 0
    if family.rotary == "mla":
        nope_dim, rope_dim = _mla_dims(layer)[1:]
        if rotary_dim != rope_dim:
            summed = config_head_dim == nope_dim + rope_dim  # (Mistral 4's head_dim: the two widths' sum)
            raise ValueError(
                f"config['qk_rope_head_dim'] = {rope_dim} but the rotary width transformers computes, "
                f"int(head_dim * partial_rotary_factor) = int({config_head_dim} * {scaling.partial_rotary_factor}), "
                f"is {rotary_dim}"
                + (f" (head_dim = qk_nope_head_dim + qk_rope_head_dim = {nope_dim} + {rope_dim})" if summed else "")
            )
        head_dim, offset = nope_dim + rope_dim, nope_dim
    elif family.rotary == "last":
        offset = config_head_dim - rotary_dim
    layout = family.layout
    if family.interleave_key is not None and not reader.get(family.interleave_key):
        layout = "halves"  # DeepSeek-V3's rope_interleave (default True) switches to apply_rotary_pos_emb
    if scaling.rope_type != "proportional" and scaling.partial_rotary_factor != 1.0:
        scaling = replace(scaling, partial_rotary_factor=1.0)
    multiaxis: dict[str, Any] = {}
    if family.multiaxis is not None:
        multiaxis = _multiaxis(reader, family, family_values, rotary_dim, where)
        if family.frequency_scale != 1.0:
            multiaxis["frequency_scale"] = family.frequency_scale
    if family.feature_order == "swapped_halves":
        half = rotary_dim // 2
        multiaxis["feature_order"] = (*range(half, rotary_dim), *range(half))
    elif family.feature_order == "halves_per_axis":
        quarter = rotary_dim // 4
        multiaxis["feature_order"] = (
            *range(quarter),
            *range(2 * quarter, 3 * quarter),
            *range(quarter, 2 * quarter),
            *range(3 * quarter, rotary_dim),
        )
    softmax_scale = 1.0
    if family.softmax_mscale and scaling.rope_type != "default" and scaling.mscale_all_dim:
        softmax_scale = _mscale(scaling.factor, scaling.mscale_all_dim) ** 2
    return LayerRotary(
        layer_type,
        True,
        head_dim,
        rotary_dim,
        offset,
        layout,
        base,
        scaling,
        softmax_scale=softmax_scale,
        query_scaling=_query_scaling(reader, family, family_values, scaling),
        **multiaxis,
    )


def _mscale(factor: float, mscale: float) -> float:
    """DeepSeek's ``yarn_get_mscale``: ``0.1 * mscale * ln(factor) + 1`` (1 for ``factor <= 1``)."""
    return 1.0 if factor <= 1.0 else 0.1 * mscale * math.log(factor) + 1.0


def _rotary_dim(head_dim: int, scaling: RopeScaling, where: str) -> int:
    if scaling.rope_type == "proportional":
        if head_dim % 2:
            raise ValueError(f"rope_type 'proportional' needs an even head_dim, got {head_dim}")
        return head_dim
    rotary_dim = int(head_dim * scaling.partial_rotary_factor)
    if rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(
            f"{where}['partial_rotary_factor'] = {scaling.partial_rotary_factor} rotates int({head_dim} * "
            f"{scaling.partial_rotary_factor}) = {rotary_dim} features of each head: must be even and >= 2"
        )
    return rotary_dim


def _mla_dims(layer: _Config) -> tuple[int, int, int]:
    """(qk_head_dim, qk_nope_head_dim, qk_rope_head_dim) of multi-head latent attention."""
    nope = check_int(layer.get("qk_nope_head_dim"), "config['qk_nope_head_dim']", minimum=0)
    rope = check_int(layer.get("qk_rope_head_dim"), "config['qk_rope_head_dim']", minimum=2, even=True)
    return nope + rope, nope, rope


def _multiaxis(
    reader: _Config, family: Family, values: Mapping[str, Any], rotary_dim: int, where: str
) -> dict[str, Any]:
    recipe = family.multiaxis
    assert recipe is not None
    n_pairs = rotary_dim // 2
    if recipe.startswith("mrope"):
        section = values.get("mrope_section")
        if section is None and family.mrope_section is not None and reader.is_dict:
            # the modeling code's default (Qwen2-VL's get("mrope_section", [16, 24, 24]))
            section = reader.used["mrope_section"] = family.mrope_section
        section = section if section is not None else family.mrope_section
        if section is None:
            raise ValueError(f"{where} has no mrope_section, which {family.source} needs")
        if recipe == "mrope_unpaired":
            raise ValueError(
                f"{where}['mrope_section'] = {section!r}: {family.source} splits the doubled cos/sin table into "
                "sections, so the two features of a pair can follow different axes: not a rotation posenc can serve"
            )
        section = tuple(check_int(value, f"{where}['mrope_section']") for value in section)
        interleaved = values.get("mrope_interleaved")
        if (
            interleaved is not None
            and recipe != "mrope_hw_alternating"
            and bool(interleaved) != (recipe == "mrope_interleaved")
        ):
            raise ValueError(
                f"{where}['mrope_interleaved'] = {interleaved!r}, but {family.source} assigns the pairs "
                f"{'in turn' if recipe == 'mrope_interleaved' else 'in contiguous sections'} whatever it says"
            )
        axes, frequency = mrope_axes_of_pairs(recipe, section, n_pairs, where)
        return dict(axes=("time", "height", "width"), axis_of_pair=axes, frequency_of_pair=frequency)
    axes_names, axes, frequency, frequency_dim = family.axial_pairs(rotary_dim)
    return dict(axes=axes_names, axis_of_pair=axes, frequency_of_pair=frequency, frequency_dim=frequency_dim)


def _query_scaling(
    reader: _Config, family: Family, values: Mapping[str, Any], scaling: RopeScaling | None
) -> QueryScaling | None:
    """The family's query multiplier for a layer (``scaling`` None: a NoPE layer), or None."""
    rule = family.query_scaling
    rotates = scaling is not None
    if rule is None:
        return None
    if rule == "llama4_temperature":
        if rotates or not reader.get("attn_temperature_tuning"):
            return None
        return QueryScaling(
            "llama4_temperature",
            check_real(reader.get("attn_scale"), "config['attn_scale']", at_least=None),
            check_real(reader.get("floor_scale"), "config['floor_scale']", above=0.0),
        )
    if rule == "llama4_beta":
        if not rotates:
            return None
        beta = values.get("llama_4_scaling_beta")
        if beta is None:
            raise ValueError(
                f"config['rope_parameters'] has no llama_4_scaling_beta, which {family.source} multiplies the queries "
                "by (1 + beta * ln(1 + floor(p / L)))"
            )
        assert scaling is not None
        if scaling.original_max_position_embeddings is None:
            raise ValueError(
                f"config['rope_parameters'] has no original_max_position_embeddings, which {family.source} divides the "
                "positions by in its llama_4_scaling_beta multiplier"
            )
        return QueryScaling(
            "llama4_beta",
            check_real(beta, "config['rope_parameters']['llama_4_scaling_beta']", at_least=None),
            float(scaling.original_max_position_embeddings),
        )
    if rule == "scalable_softmax":
        return None if rotates else QueryScaling("scalable_softmax", 0.1, 2048.0)
    if rule == "learned_log":
        return QueryScaling("learned_log")  # every layer, NoPE or not; its values are weights
    raise AssertionError(rule)
