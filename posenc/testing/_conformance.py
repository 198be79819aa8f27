"""The rotary conformance suite: a rotary operator against posenc's float64 referee, across real configs.

:func:`assert_rotary_conforms` checks one operator ``rotate_fn(x, positions)`` against the rotation a config
describes; :class:`RotaryCase` is one configuration to check it at, and :func:`rotary_cases` the catalogue of them
that the pytest plugin (the ``rotary_case`` fixture) and :mod:`posenc.testing.strategies` draw from.
"""

from __future__ import annotations

import functools
import importlib
import importlib.resources
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

import posenc
from posenc._families import FAMILIES
from posenc._validation import ROTARY_LAYOUTS, RotaryLayout, check_choice, check_flag, check_int
from posenc.testing._cases import CORPUS, PUBLISHED
from posenc.testing._common import (
    MAX_CHECK_ELEMENTS,
    MAX_POSITION,
    MAX_SEED,
    Implementation,
    as_array,
    call_implementation,
    check_implementation,
    check_int_sequence,
    expect_shape,
    is_torch_module,
)

QkvFormat = Literal["bhsd", "bshd", "shd", "sd"]
DtypeName = Literal["float64", "float32", "float16", "bfloat16"]
ArrayKind = Literal["numpy", "torch"]

QKV_FORMATS: tuple[QkvFormat, ...] = ("bhsd", "bshd", "shd", "sd")
DTYPES: tuple[DtypeName, ...] = ("float64", "float32", "float16", "bfloat16")
ARRAY_KINDS: tuple[ArrayKind, ...] = ("numpy", "torch")

ANGLE_RTOL = 2.0**-20
"""Angle error allowed per radian of a pair's angle: eight times float32's relative precision, as every rotary
check of posenc.testing allows, so that an operator that computes its angles in float32 passes."""

UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
"""Half the distance from 1 to the next number of each dtype."""

DEFAULT_TRAINED_LENGTH = 4096
"""The trained length assumed for a config that names none (it only places the positions tried)."""


def _dtype_rtol(dtype: str) -> float:
    """Error allowed per unit of an entry's size for an operator that rounds its inputs and output to ``dtype``."""
    return max(ANGLE_RTOL, 4.0 * UNIT_ROUNDOFF[dtype])


# --- Which rotation, at which positions -----------------------------------------------------------------------


def _as_operator(kind: posenc.LayerRotary) -> posenc.LayerRotary:
    """``kind`` without what an operator does not see: its layer type's name, the softmax scale, query multipliers."""
    return replace(kind, layer_type="", softmax_scale=1.0, query_scaling=None)


def _rotary_of(
    config: object, layer_type: str | None, model_type: str | None
) -> tuple[posenc.LayerRotary, int, int | None, str]:
    """The rotating layer kind of ``config`` to check, its trained length, ``max_position_embeddings``, and a name."""
    if layer_type is not None and not isinstance(layer_type, str):
        raise TypeError(f"layer_type must be None or a str, got {type(layer_type).__name__}")
    if isinstance(config, posenc.LayerRotary):
        if layer_type is not None or model_type is not None:
            raise ValueError(
                "layer_type and model_type select a layer kind of a config: give neither with a LayerRotary"
            )
        kind, longest, label = config, None, "the layer kind"
    else:
        plan = posenc.RotaryPlan.from_config(config, model_type=model_type)
        longest, label = plan.max_position_embeddings, f"model_type {plan.model_type!r}"
        rotating = [k for k in plan.kinds if k.rotates]
        if layer_type is not None:
            chosen = [k for k in plan.kinds if k.layer_type == layer_type]
            if not chosen:
                raise ValueError(
                    f"layer_type must be one of the config's layer types {[k.layer_type for k in plan.kinds]}, "
                    f"got {layer_type!r}"
                )
            kind = chosen[0]
        else:
            distinct = {_as_operator(k) for k in rotating}
            if len(distinct) > 1:
                raise ValueError(
                    "layer_type must name which of the config's layer types to check: they rotate differently "
                    f"({', '.join(repr(k.layer_type) for k in rotating)})"
                )
            if not rotating:
                raise ValueError("config rotates no layer (every layer is NoPE): there is no rotation to check")
            kind = rotating[0]
    if not kind.rotates:
        raise ValueError(f"layer type {kind.layer_type!r} does not rotate (NoPE): there is no rotation to check")
    if kind.n_axes > 1:
        raise ValueError(
            f"layer type {kind.layer_type!r} rotates on several axes {kind.axes}: check it with "
            "posenc.testing.assert_mrope_axes_match"
        )
    trained = kind.scaling.original_max_position_embeddings or longest or DEFAULT_TRAINED_LENGTH
    return kind, trained, longest, label


def rotary_positions(
    trained_length: int, max_position_embeddings: int | None = None, *, beyond: bool = False
) -> tuple[int, ...]:
    """The positions the conformance checks try: within a trained length ``L``, or reaching beyond it.

    Parameters
    ----------
    trained_length : int
        ``L``, between 1 and ``2**24``.
    max_position_embeddings : int or None, default None
        The config's declared context, if any (at least 1).
    beyond : bool, default False
        Whether to reach beyond ``L``.

    Returns
    -------
    positions : tuple of int
        Sorted. Within: 0 to 7, ``2**k - 1`` below ``L``, and ``L - 1``. Beyond: those, and ``L``, ``L + 1``,
        ``2L - 1``, ``2L`` and ``max_position_embeddings - 1`` when that is past ``L``, each at most ``2**24``.
        At most 36 positions.

    Raises
    ------
    TypeError, ValueError
        If an argument is out of range or of the wrong type.

    Examples
    --------
    >>> rotary_positions(4096, 131072, beyond=True)[-7:]
    (2047, 4095, 4096, 4097, 8191, 8192, 131071)
    """
    length = check_int(trained_length, "trained_length", minimum=1, maximum=MAX_POSITION)
    if max_position_embeddings is not None:
        max_position_embeddings = check_int(max_position_embeddings, "max_position_embeddings", minimum=1)
    within = set(range(min(8, length))) | {2**k - 1 for k in range(4, 25) if 2**k - 1 < length} | {length - 1}
    if not check_flag(beyond, "beyond"):
        return tuple(sorted(within))
    reach = {length, length + 1, 2 * length - 1, 2 * length}
    if max_position_embeddings is not None and max_position_embeddings > length:
        reach.add(max_position_embeddings - 1)
    return tuple(sorted(within | {p for p in reach if p <= MAX_POSITION}))


# --- The operator's input and output ------------------------------------------------------------------------------


def _to_format(x: NDArray[np.float64], qkv_format: str) -> NDArray[np.float64]:
    """(batch, heads, seq, dim) -> the layout of ``qkv_format`` (batch and heads of 1 dropped where it has none)."""
    if qkv_format == "bshd":
        x = x.transpose(0, 2, 1, 3)
    elif qkv_format == "shd":
        x = x[0].transpose(1, 0, 2)
    elif qkv_format == "sd":
        x = x[0, 0]
    return np.ascontiguousarray(x)


def _from_format(y: NDArray[np.float64], qkv_format: str) -> NDArray[np.float64]:
    """The inverse of :func:`_to_format`: back to (batch, heads, seq, dim)."""
    canonical: NDArray[np.float64] = y
    if qkv_format == "bshd":
        canonical = y.transpose(0, 2, 1, 3)
    elif qkv_format == "shd":
        canonical = y.transpose(1, 0, 2)[None]
    elif qkv_format == "sd":
        canonical = y[None, None]
    return canonical


def _torch() -> Any:
    try:
        return importlib.import_module("torch")
    except ImportError as error:
        raise ImportError(
            'array="torch" needs PyTorch: pip install "posenc[torch]" (or pip install ".[torch]" in a clone)'
        ) from error


def _inputs(x: NDArray[np.float64], positions: NDArray[np.int64], dtype: str, array: str) -> tuple[Any, Any]:
    """``x`` in ``dtype`` and int64 ``positions``, as NumPy arrays or torch tensors."""
    if array == "torch":
        torch = _torch()
        return torch.as_tensor(x).to(getattr(torch, dtype)), torch.as_tensor(positions)
    return x.astype(dtype), positions.copy()


# --- The tolerance and the diagnosis ---------------------------------------------------------------------------


def _pair_features(kind: posenc.LayerRotary) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """The features holding the first and the second member of each rotated pair of ``kind``."""
    part = np.arange(kind.rotary_offset, kind.rotary_offset + kind.rotary_dim)
    if kind.feature_order:
        part = part[np.array(kind.feature_order)]
    half = kind.rotary_dim // 2
    if kind.layout == "interleaved":
        return part[0::2], part[1::2]
    return part[:half], part[half:]


def _tolerance(
    kind: posenc.LayerRotary, x: NDArray[np.float64], positions: NDArray[np.float64], dtype: str
) -> NDArray[np.float64]:
    r"""Per-entry tolerance of the rotation of ``x`` ``(..., seq, head_dim)`` by ``kind`` at ``positions``."""
    scale = float(np.abs(x).max())
    rtol = _dtype_rtol(dtype)
    tolerance = np.full(x.shape, rtol * scale)
    first, second = _pair_features(kind)
    angles = np.abs(np.outer(positions, kind.inverse_frequencies(seq_len=float(positions.max()) + 1.0)))
    amplitude = np.hypot(x[..., first], x[..., second])
    per_pair = max(1.0, kind.attention_factor) * (
        ANGLE_RTOL * amplitude * np.maximum(angles, 1.0) + rtol * (amplitude + scale)
    )
    tolerance[..., first] = per_pair
    tolerance[..., second] = per_pair
    return tolerance


def _misreadings(
    kind: posenc.LayerRotary, within: bool
) -> list[tuple[Callable[[NDArray[np.float64], NDArray[np.float64]], NDArray[np.float64]], str]]:
    """Known ways to get ``kind``'s rotation wrong: (the rotation they give, what to say when it matches)."""
    scaling = kind.scaling
    found: list[tuple[Callable[[NDArray[np.float64], NDArray[np.float64]], NDArray[np.float64]], str]] = []

    def add(build: Callable[[], posenc.LayerRotary], message: str) -> None:
        try:
            other = build()
        except ValueError:  # not a rotation posenc can build for this kind
            return
        found.append((other.rotate, message))

    flipped: RotaryLayout = "halves" if kind.layout == "interleaved" else "interleaved"
    add(
        lambda: replace(kind, layout=flipped),
        f"the pairs taken as {flipped}, not {kind.layout} as the check expects (the config's family's layout, "
        f"unless layout= says otherwise). If the operator is meant to pair them so (with the query and key weights "
        f"permuted, posenc.rotary_weight_permutation), check it with layout={flipped!r}",
    )
    found.append(
        (
            lambda x, p: kind.rotate(x, p + 1),
            "every row rotated by its position + 1: positions counted from 1, or an offset added twice",
        )
    )
    found.append((lambda x, p: kind.rotate(x, p - 1), "every row rotated by its position - 1"))
    if scaling.rope_type not in ("default", "proportional"):
        add(
            lambda: replace(kind, scaling=posenc.RopeScaling(rope_theta=scaling.rope_theta)),
            f"base {kind.base:g} without the config's {scaling.rope_type!r} scaling: the scaling not applied",
        )
    if kind.base != 10000.0:
        add(
            lambda: replace(kind, base=10000.0, scaling=replace(scaling, rope_theta=None)),
            f"the default base 10000 in place of the config's {kind.base:g}",
        )
    if kind.rotary_dim < kind.head_dim and scaling.rope_type != "proportional":
        add(
            lambda: replace(kind, rotary_dim=kind.head_dim),
            f"all {kind.head_dim} features rotated where the config rotates the first {kind.rotary_dim}: the partial "
            "rotary factor dropped",
        )
    if scaling.rope_type == "yarn":
        add(
            lambda: replace(kind, scaling=replace(scaling, truncate=not scaling.truncate)),
            f"YaRN with truncate={not scaling.truncate} where the config says truncate={scaling.truncate} (the "
            "correction range's bounds rounded to integers or not)",
        )
    if scaling.rope_type == "longrope" and scaling.short_factor != scaling.long_factor:
        if within:
            add(
                lambda: replace(kind, scaling=replace(scaling, short_factor=scaling.long_factor)),
                "longrope's long_factor within the trained length, where transformers divides by short_factor up to "
                "it and by long_factor beyond (mlx-lm's SuScaledRoPE keeps long_factor only)",
            )
        else:
            add(
                lambda: replace(kind, scaling=replace(scaling, long_factor=scaling.short_factor)),
                "longrope's short_factor beyond the trained length, where transformers divides by long_factor",
            )
    if kind.attention_factor != 1.0:
        first, second = _pair_features(kind)
        rotated = np.concatenate([first, second])

        def without_factor(x: NDArray[np.float64], p: NDArray[np.float64]) -> NDArray[np.float64]:
            out = kind.rotate(x, p)
            out[..., rotated] /= kind.attention_factor
            return out

        found.append(
            (
                without_factor,
                f"the angles right, but the rotated features not multiplied by the attention factor "
                f"{kind.attention_factor:.6g} (posenc.rotary_attention_factor)",
            )
        )
    found.append((lambda x, p: x.copy(), "x returned unrotated"))
    return found


# --- The check -----------------------------------------------------------------------------------------------


def _check_call(
    rotate_fn: Implementation,
    kind: posenc.LayerRotary,
    positions: NDArray[np.int64],
    *,
    what: str,
    call: str,
    within: bool,
    dtype: str,
    qkv_format: str,
    array: str,
    batch: int,
    heads: int,
    seed: int,
) -> None:
    """One call of ``rotate_fn`` at ``positions``, compared entry by entry with ``kind.rotate``."""
    seq = len(positions)
    if qkv_format == "shd":
        batch = 1
    elif qkv_format == "sd":
        batch, heads = 1, 1
    if batch * heads * seq * kind.head_dim > MAX_CHECK_ELEMENTS:
        raise ValueError(
            f"batch x heads x positions x head_dim must be at most {MAX_CHECK_ELEMENTS}, got "
            f"{batch} x {heads} x {seq} x {kind.head_dim}: pass fewer positions"
        )
    canonical = np.random.default_rng(seed).standard_normal((batch, heads, seq, kind.head_dim))
    x_in, positions_in = _inputs(_to_format(canonical, qkv_format), positions, dtype, array)
    shape = tuple(x_in.shape)
    description = f"rotate_fn(x of shape {shape} ({qkv_format}, {array} {dtype}), positions){call}"
    x = _from_format(as_array(x_in, "x"), qkv_format)  # the input as the operator got it, rounded to dtype
    if is_torch_module(rotate_fn):
        got = call_implementation(rotate_fn, description, x_in, positions=positions_in)
    else:
        got = call_implementation(rotate_fn, description, x_in, positions_in)
    out = as_array(got, description)
    expect_shape(out, shape, description)
    out = _from_format(out, qkv_format)
    grid = positions.astype(np.float64)
    expected = kind.rotate(x, grid)
    tolerance = _tolerance(kind, x, grid, dtype)
    error = np.abs(out - expected)
    excess = np.where(np.isfinite(error), error / tolerance, np.inf)
    if excess.max() <= 1.0:
        return
    wrong = excess > 1.0
    b, h, row, feature = (int(i) for i in np.unravel_index(int(np.argmax(excess)), excess.shape))
    message = (
        f"{description} differs from posenc's float64 rotation of {what} in {int(wrong.sum())} of {wrong.size} "
        f"entries; worst at batch {b}, head {h}, position {int(positions[row])}, feature {feature}: got "
        f"{out[b, h, row, feature]:.6g}, expected {expected[b, h, row, feature]:.6g}, |error| "
        f"{error[b, h, row, feature]:.3g} > tolerance {tolerance[b, h, row, feature]:.2g}."
    )
    for rotation, said in _misreadings(kind, within):
        if np.all(np.abs(out - rotation(x, grid)) <= tolerance):
            raise AssertionError(message + f" It matches a known misreading: {said}.")
    rows = np.flatnonzero(wrong.any(axis=(0, 1, 3)))
    first = int(positions[rows].min())
    if first >= 64 and (positions < first).any():
        message += (
            f" Every position below {first} is right: angles that lose precision as the position grows "
            "(positions, frequencies or angles held in float16 or bfloat16, or a table indexed past its end) "
            "give this."
        )
    raise AssertionError(message)


def _describe(kind: posenc.LayerRotary, name: str) -> str:
    scaling = kind.scaling
    shown = f"{name} ({kind.layer_type}: head_dim {kind.head_dim}"
    if kind.rotary_dim != kind.head_dim:
        shown += f", rotary_dim {kind.rotary_dim}"
    shown += f", layout {kind.layout!r}, base {kind.base:g}"
    if scaling.rope_type != "default":
        shown += f", rope_type {scaling.rope_type!r}"
    return shown + ")"


def _operator_kind(kind: posenc.LayerRotary, layout: RotaryLayout | None) -> posenc.LayerRotary:
    """``kind`` as an operator sees it: the features from the first rotated one on, in ``layout`` if given."""
    width = kind.head_dim - kind.rotary_offset
    return replace(kind, head_dim=width, rotary_offset=0, layout=kind.layout if layout is None else layout)


def assert_rotary_conforms(
    rotate_fn: Implementation,
    config: object,
    *,
    layer_type: str | None = None,
    model_type: str | None = None,
    positions: Sequence[int] | None = None,
    layout: RotaryLayout | None = None,
    dtype: DtypeName = "float32",
    qkv_format: QkvFormat = "bhsd",
    array: ArrayKind | None = None,
    batch: int = 2,
    heads: int = 3,
    seed: int = 0,
) -> None:
    r"""Check a rotary operator against posenc's float64 rotation of a config, within and beyond its trained length.

    Parameters
    ----------
    rotate_fn : callable
        ``rotate_fn(x, positions)`` rotates the queries or keys ``x`` and returns an array or tensor of ``x``'s
        shape (any floating dtype). ``x`` holds the features of one layer's heads from the first rotated feature
        on (all of them, except with multi-head latent attention, whose rotated features are the last ones: then
        those), ``head_dim - rotary_offset`` wide, in the layout ``qkv_format``; ``positions`` is ``(seq,)`` int64,
        one position per row, the same for every batch entry and head (not sorted, not from 0). A
        ``torch.nn.Module`` is called ``rotate_fn(x, positions=positions)``, as :class:`posenc.nn.RotaryEmbedding`
        takes them.
    config : transformers config object, Mapping[str, object], or posenc.LayerRotary
        The model's config, as :meth:`posenc.RotaryPlan.from_config` reads it (a ``config.json`` dict, for
        instance), or one layer kind of a plan.
    layer_type : str or None, default None
        Which layer type of the config to check; needed only when its layer types rotate differently.
    model_type : str or None, default None
        Passed on to :meth:`posenc.RotaryPlan.from_config`.
    positions : sequence of int or None, default None
        At most 64 positions in ``[0, 2**24]``, checked in one call. Default: two calls, the first with
        positions within the trained length ``L`` (the scaling's ``original_max_position_embeddings``, else the
        config's ``max_position_embeddings``, else 4096), the second with those and positions beyond it, up to
        ``2L`` and ``max_position_embeddings - 1`` (:func:`rotary_positions` lists them). Two
        calls, because an operator of a length-dependent scaling (dynamic, longrope) takes its frequencies from
        the largest position of the call.
    layout : {"interleaved", "halves"} or None, default None
        How the operator pairs the rotated features. ``None``: as the config's family does in transformers. An
        operator that pairs them the other way is right for a model whose query and key weights were permuted
        to match (:func:`posenc.rotary_weight_permutation`); say so here.
    dtype : {"float32", "float64", "float16", "bfloat16"}, default "float32"
        The dtype of ``x``. The reference rotates ``x`` as rounded to it, in float64.
    qkv_format : {"bhsd", "bshd", "shd", "sd"}, default "bhsd"
        The layout of ``x``: ``(batch, heads, seq, dim)`` as transformers' attention, ``(batch, seq, heads, dim)``
        as Meta's Llama code and flash-attn, ``(seq, heads, dim)`` as vLLM's tokens, or ``(seq, dim)``.
    array : {"numpy", "torch"} or None, default None
        Whether ``x`` and ``positions`` are NumPy arrays or torch tensors (on the CPU; bfloat16 needs torch).
        ``None``: torch for a ``torch.nn.Module``, NumPy otherwise.
    batch, heads : int, default 2 and 3
        Sizes of ``x``'s batch and head axes, between 1 and 64 (not used by the formats without them). Each
        entry of ``x`` is random, so a rotation along the wrong axis shows.
    seed : int, default 0
        Seed of the random ``x``.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If an entry of the output differs from the reference by more than its tolerance (see Notes), or
        ``rotate_fn`` raises or returns another shape. The message gives the call, the worst entry (batch, head,
        position, feature), and when the output matches a known mistake, which: the pairs in the other layout,
        positions off by one, the scaling dropped, the default base 10000, a partial rotary factor dropped,
        YaRN's ``truncate`` flipped, longrope's long factors within the trained length or its short ones beyond
        it, the attention factor missing, or ``x`` unrotated; or, when only large positions are wrong, that the
        angles lose precision there.
    TypeError, ValueError
        If an argument of the check is invalid, :meth:`posenc.RotaryPlan.from_config` cannot read ``config``,
        the layer type chosen does not rotate or rotates on several axes (see
        :func:`assert_mrope_axes_match`), or ``layer_type`` is needed and missing.
    ImportError
        If ``array`` is ``"torch"`` and PyTorch is not installed.

    Notes
    -----
    The reference is :meth:`posenc.LayerRotary.rotate` of the config's plan, in float64. An entry of a rotated
    pair may differ from it by :math:`a\,(2^{-20} a_p \max(1, |\phi|) + r\,(a_p + s))`, with :math:`\phi` the
    pair's angle, :math:`a_p` the pair's length, :math:`s` the largest entry of ``x``, :math:`a` the attention
    factor (if above 1), and :math:`r` the larger of :math:`2^{-20}` and four times the unit roundoff of
    ``dtype`` (:math:`2^{-9}` for float16, :math:`2^{-6}` for bfloat16); any other entry by :math:`r\,s`. The
    first term allows eight times float32's relative precision of the angle, so an operator that computes its
    angles in float32 passes and one that holds positions or angles in float16 or bfloat16 fails at large
    positions; the second allows the rounding of the input and output to ``dtype``.

    What is checked is the rotation, the attention factor that multiplies the rotated features, and that the
    other features pass through. What the attention does outside the rotation (the softmax scale, the query
    multipliers of a :class:`posenc.LayerRotary`) is not. :func:`assert_rotary_matches_config` checks a whole
    model layer by layer; this check is for one operator, across configs: :func:`rotary_cases` lists real ones.

    Examples
    --------
    >>> import posenc
    >>> config = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 1,
    ...           "max_position_embeddings": 8192, "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}}
    >>> def rope(x, positions):  # posenc's NumPy reference as an operator: halves, as Llama in transformers
    ...     return posenc.rotate(x, positions, base=5e5, layout="halves")
    >>> assert_rotary_conforms(rope, config)
    >>> assert_rotary_conforms(rope, config, layout="interleaved")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    AssertionError: ...It matches a known misreading: the pairs taken as halves, not interleaved...
    """
    check_implementation(rotate_fn, "rotate_fn")
    kind, trained, longest, name = _rotary_of(config, layer_type, model_type)
    if positions is None:
        calls = [
            (np.array(rotary_positions(trained, longest, beyond=False)), True),
            (np.array(rotary_positions(trained, longest, beyond=True)), False),
        ]
    else:
        chosen = check_int_sequence(positions, "positions", low=0, high=MAX_POSITION)
        calls = [(chosen, bool(chosen.max() < trained))]
    _run(rotate_fn, kind, calls, trained, name, layout, dtype, qkv_format, array, batch, heads, seed)


def _run(
    rotate_fn: Implementation,
    kind: posenc.LayerRotary,
    calls: list[tuple[NDArray[np.int64], bool]],
    trained: int,
    name: str,
    layout: object,
    dtype: object,
    qkv_format: object,
    array: object,
    batch: object,
    heads: object,
    seed: object,
) -> None:
    """The checks of :func:`assert_rotary_conforms` and :meth:`RotaryCase.check`, after their own arguments."""
    if layout is not None:
        layout = check_choice(layout, "layout", ROTARY_LAYOUTS)
    dtype = check_choice(dtype, "dtype", DTYPES)
    qkv_format = check_choice(qkv_format, "qkv_format", QKV_FORMATS)
    array = "torch" if array is None and is_torch_module(rotate_fn) else array
    array = check_choice("numpy" if array is None else array, "array", ARRAY_KINDS)
    if dtype == "bfloat16" and array == "numpy":
        raise ValueError('dtype "bfloat16" needs array="torch": NumPy has no bfloat16')
    batch = check_int(batch, "batch", minimum=1, maximum=64)
    heads = check_int(heads, "heads", minimum=1, maximum=64)
    seed = check_int(seed, "seed", maximum=MAX_SEED)
    operator = _operator_kind(kind, layout)
    what = _describe(operator, name)
    for positions, within in calls:
        if within:
            call = f" with positions within the trained length {trained} (up to {int(positions.max())})"
        else:
            call = f" with positions reaching beyond the trained length {trained} (up to {int(positions.max())})"
        _check_call(
            rotate_fn,
            operator,
            positions.astype(np.int64),
            what=what,
            call=call,
            within=within,
            dtype=dtype,
            qkv_format=qkv_format,
            array=array,
            batch=batch,
            heads=heads,
            seed=seed,
        )


# --- Cases: real configs to check an operator at -----------------------------------------------------------------


@dataclass(frozen=True)
class RotaryCase:
    r"""One configuration to check a rotary operator at: a layer kind of a real config, positions and a dtype.

    The pytest plugin's ``rotary_case`` fixture runs a test once per case of :func:`rotary_cases`;
    :func:`posenc.testing.strategies.rotary_cases` draws them with random positions and dtypes. Build the
    operator under test from the case (its ``config``, or the parsed ``rotary``), then call
    :meth:`check`.

    Parameters
    ----------
    name : str
        The checkpoint (``"meta-llama/Llama-3.1-8B-Instruct"``) or the family whose transformers configuration
        class supplied the config (``"llama (transformers 5.23 defaults)"``).
    config : Mapping[str, object]
        The config, as :meth:`posenc.RotaryPlan.from_config` reads it: a published ``config.json``'s rotary keys
        and sizes, or ``{"model_type": family}`` for a class's defaults.
    source : str
        Where the values come from.
    rotary : posenc.LayerRotary
        posenc's reading of the layer kind checked: the referee.
    trained_length : int
        The context the layer was trained on (the scaling's ``original_max_position_embeddings``, else the
        config's ``max_position_embeddings``, else 4096).
    max_position_embeddings : int or None
        The config's declared context.
    positions : tuple of int
        The positions of the one call :meth:`check` makes (at most 64, in ``[0, 2**24]``).
    dtype : {"float32", "float64", "float16", "bfloat16"}, default "float32"
        The dtype of ``x`` in that call.
    families : tuple of str, default ()
        Every family whose defaults give this same operator (for a case from class defaults).

    Attributes
    ----------
    head_dim : int
        The width of ``x`` the operator gets: ``rotary.head_dim - rotary.rotary_offset``.
    rotary_dim, layout, base, scaling
        The rotated width, pair layout, base (``rope_theta``) and :class:`posenc.RopeScaling` of the layer, as an
        operator takes them (``scaling`` carries no partial factor: ``rotary_dim`` says how many are rotated,
        the first ones, except for the ``"proportional"`` rope type, whose factor it keeps).
    attention_factor : float
        What the rotated features are multiplied by.
    beyond : bool
        Whether some position is at or beyond the trained length.
    id : str
        A short, unique name for test ids: ``name:layer_type:within|beyond:dtype``.
    """

    name: str
    config: Mapping[str, Any] = field(compare=False, repr=False)
    source: str = field(compare=False, repr=False)
    rotary: posenc.LayerRotary = field(repr=False)
    trained_length: int = field(repr=False)
    max_position_embeddings: int | None = field(repr=False)
    positions: tuple[int, ...] = field(repr=False)
    dtype: DtypeName = "float32"
    families: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("name", "source"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"{name} must be a str, got {type(getattr(self, name)).__name__}")
        if not isinstance(self.config, Mapping):
            raise TypeError(f"config must be a Mapping (a config.json dict), got {type(self.config).__name__}")
        if not isinstance(self.rotary, posenc.LayerRotary):
            raise TypeError(f"rotary must be a posenc.LayerRotary, got {type(self.rotary).__name__}")
        if not self.rotary.rotates or self.rotary.n_axes != 1:
            raise ValueError(f"rotary must rotate on one axis, got {self.rotary!r}")
        check_int(self.trained_length, "trained_length", minimum=1, maximum=MAX_POSITION)
        if self.max_position_embeddings is not None:
            check_int(self.max_position_embeddings, "max_position_embeddings", minimum=1)
        chosen = check_int_sequence(self.positions, "positions", low=0, high=MAX_POSITION)
        object.__setattr__(self, "positions", tuple(int(p) for p in chosen))
        check_choice(self.dtype, "dtype", DTYPES)
        if not isinstance(self.families, tuple) or not all(isinstance(f, str) for f in self.families):
            raise TypeError(f"families must be a tuple of str, got {self.families!r}")

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, Any],
        *,
        name: str | None = None,
        source: str = "",
        layer_type: str | None = None,
        beyond: bool = False,
        positions: Sequence[int] | None = None,
        dtype: DtypeName = "float32",
    ) -> RotaryCase:
        """The case of a config's rotating layer kind.

        Parameters
        ----------
        config : Mapping[str, object]
            A config, as :meth:`posenc.RotaryPlan.from_config` reads it.
        name : str or None, default None
            Default: the config's ``model_type``.
        source : str, default ""
            Where the config comes from.
        layer_type : str or None, default None
            As for :func:`assert_rotary_conforms`.
        beyond : bool, default False
            With ``positions`` None: :func:`rotary_positions` within the trained length (False) or reaching
            beyond it (True).
        positions : sequence of int or None, default None
            The positions, instead of the default ones.
        dtype : {"float32", "float64", "float16", "bfloat16"}, default "float32"

        Returns
        -------
        RotaryCase

        Raises
        ------
        TypeError, ValueError
            As :func:`assert_rotary_conforms`.
        """
        if not isinstance(config, Mapping):
            raise TypeError(f"config must be a Mapping (a config.json dict), got {type(config).__name__}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be None or a str, got {type(name).__name__}")
        beyond = check_flag(beyond, "beyond")
        kind, trained, longest, _ = _rotary_of(config, layer_type, None)
        if positions is None:
            positions = rotary_positions(trained, longest, beyond=beyond)
        else:
            positions = tuple(int(p) for p in check_int_sequence(positions, "positions", low=0, high=MAX_POSITION))
        label = str(config.get("model_type")) if name is None else name
        return cls(label, config, source, kind, trained, longest, tuple(positions), dtype)

    @property
    def head_dim(self) -> int:
        return self.rotary.head_dim - self.rotary.rotary_offset

    @property
    def rotary_dim(self) -> int:
        return self.rotary.rotary_dim

    @property
    def layout(self) -> RotaryLayout:
        return self.rotary.layout

    @property
    def base(self) -> float:
        return self.rotary.base

    @property
    def scaling(self) -> posenc.RopeScaling:
        return self.rotary.scaling

    @property
    def attention_factor(self) -> float:
        return self.rotary.attention_factor

    @property
    def layer_type(self) -> str:
        return self.rotary.layer_type

    @property
    def beyond(self) -> bool:
        return max(self.positions) >= self.trained_length

    @property
    def id(self) -> str:
        return f"{self.name}:{self.layer_type}:{'beyond' if self.beyond else 'within'}:{self.dtype}"

    def __repr__(self) -> str:
        shown = ", ".join(map(str, self.positions[:4])) + (", ..." if len(self.positions) > 4 else "")
        return (
            f"RotaryCase({self.name!r}, {self.layer_type!r}, head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, "
            f"layout={self.layout!r}, base={self.base:g}, rope_type={self.scaling.rope_type!r}, trained_length="
            f"{self.trained_length}, positions=({shown}) up to {max(self.positions)}, dtype={self.dtype!r})"
        )

    def check(
        self,
        rotate_fn: Implementation,
        *,
        layout: RotaryLayout | None = None,
        qkv_format: QkvFormat = "bhsd",
        array: ArrayKind | None = None,
        batch: int = 2,
        heads: int = 3,
        seed: int = 0,
    ) -> None:
        """Check ``rotate_fn(x, positions)`` at this case's positions and dtype.

        Parameters
        ----------
        rotate_fn : callable
            As for :func:`assert_rotary_conforms`: ``x`` is ``head_dim`` wide.
        layout, qkv_format, array, batch, heads, seed
            As for :func:`assert_rotary_conforms`.

        Returns
        -------
        None

        Raises
        ------
        AssertionError, TypeError, ValueError, ImportError
            As :func:`assert_rotary_conforms`.
        """
        check_implementation(rotate_fn, "rotate_fn")
        calls = [(np.array(self.positions, dtype=np.int64), not self.beyond)]
        _run(
            rotate_fn,
            self.rotary,
            calls,
            self.trained_length,
            self.name,
            layout,
            self.dtype,
            qkv_format,
            array,
            batch,
            heads,
            seed,
        )


def _operator_key(case: RotaryCase) -> tuple[object, ...]:
    """What makes two cases the same test of an operator: the rotation it must give, and where it is tried."""
    return (_as_operator(_operator_kind(case.rotary, None)), case.positions, case.trained_length)


@functools.cache
def _catalogue() -> tuple[RotaryCase, ...]:
    """Every distinct single-axis rotating layer kind of the published configs and the class defaults, within."""
    cases: list[RotaryCase] = []
    seen: dict[tuple[object, ...], int] = {}

    def add(plan: posenc.RotaryPlan, config: Mapping[str, Any], name: str, source: str, family: str | None) -> None:
        for kind in plan.kinds:
            if not kind.rotates or kind.n_axes != 1 or kind.feature_order:
                continue  # NoPE; M-RoPE and axial towers; a permuted feature order, which no operator takes
            longest = plan.max_position_embeddings
            trained = kind.scaling.original_max_position_embeddings or longest or DEFAULT_TRAINED_LENGTH
            positions = rotary_positions(trained, longest, beyond=False)
            case = RotaryCase(name, config, source, kind, trained, longest, positions)
            key = _operator_key(case)
            if key in seen:
                if family is not None:
                    index = seen[key]
                    cases[index] = replace(cases[index], families=(*cases[index].families, family))
                continue
            seen[key] = len(cases)
            cases.append(replace(case, families=(family,) if family else ()))

    for model_id, source, values in PUBLISHED:
        add(posenc.RotaryPlan.from_config(values), values, model_id, source, None)
    stored = importlib.resources.files("posenc.testing") / "configs"
    for checkpoint, file, repository, path, commit in CORPUS:
        values = json.loads((stored / file).read_text(encoding="utf-8"))
        source = f"a copy of the published config.json: {repository}, {path}, commit {commit[:7]}"
        add(posenc.RotaryPlan.from_config(values), values, checkpoint, source, None)
    for family in sorted(FAMILIES):
        try:
            plan = posenc.RotaryPlan.from_config({"model_type": family})
        except (TypeError, ValueError):  # a class whose defaults posenc refuses, or that names no rotation
            continue
        add(
            plan,
            {"model_type": family},
            f"{family} (transformers 5.23 defaults)",
            f"transformers 5.23's configuration class of {family!r}, as posenc reads its defaults",
            family,
        )
    return tuple(cases)


def rotary_cases(*, dtypes: Sequence[DtypeName] = ("float32",), beyond: bool | None = None) -> list[RotaryCase]:
    """The catalogue of real rotary configurations the pytest plugin runs an operator at.

    Every distinct rotating layer kind on one axis of 17 published configs and of every transformers 5.23
    configuration class whose defaults posenc reads, each once within its trained length and once reaching beyond
    it, in each dtype. The published configs: five whose keys the book checked against named sources (Llama 3.1's
    llama3 scaling, Gemma 3's linear scaling and local base, GPT-OSS's YaRN without truncation, DeepSeek-V3's
    latent attention with YaRN and interleaved pairs, Pythia's partial rotary), and twelve ``config.json`` files
    of the repository's corpus that add a rotation (Phi-3 and Phi-3.5's longrope, Llama 3.2, DeepSeek-V2-Lite,
    Phi-2, Phi-4, GLM-4.5, Qwen3-Next and others). The class defaults add Gemma 4's proportional rotation and more
    partial and interleaved families: bases from 1000 to ``10**9``, head widths from 32 to 512.

    Parameters
    ----------
    dtypes : sequence of {"float32", "float64", "float16", "bfloat16"}, default ("float32",)
        One case per dtype of each configuration and call.
    beyond : bool or None, default None
        Only the cases within the trained length (False), only those reaching beyond (True), or both.

    Returns
    -------
    cases : list of RotaryCase
        In a fixed order, each with its own ``id``.

    Raises
    ------
    TypeError, ValueError
        If ``dtypes`` is not a non-empty sequence of known dtype names, or ``beyond`` not None or a bool.

    Notes
    -----
    Left out: NoPE layers (nothing to rotate), layers that rotate on several axes (M-RoPE, axial image towers:
    :func:`assert_mrope_axes_match`), layers whose family reads its features in a permuted order (NanoChat,
    Gemma 4's vision tower), and dynamic NTK scaling, which no config here carries that posenc reads (the
    corpus's one, Hunyuan's, is of a family posenc does not read): pass such a config to
    :func:`assert_rotary_conforms` or :meth:`RotaryCase.from_config`.
    Families of the same rotation are one case; ``RotaryCase.families`` lists them.
    """
    if isinstance(dtypes, str) or not isinstance(dtypes, Sequence) or not dtypes:
        raise TypeError(f"dtypes must be a non-empty sequence of dtype names, got {dtypes!r}")
    chosen = [check_choice(d, "dtypes", DTYPES) for d in dtypes]
    sides = (False, True) if beyond is None else (check_flag(beyond, "beyond"),)
    cases = []
    for case in _catalogue():
        for side in sides:
            positions = rotary_positions(case.trained_length, case.max_position_embeddings, beyond=side)
            for dtype in chosen:
                cases.append(replace(case, positions=positions, dtype=dtype))
    return cases
