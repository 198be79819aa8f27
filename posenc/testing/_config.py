"""The check of a whole model's rotation, layer by layer, against its transformers config."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

import posenc
from posenc._families import NO_ATTENTION_TYPES
from posenc._validation import (
    RotaryLayout,
    check_int,
)
from posenc.testing._common import (
    MAX_CHECK_ELEMENTS,
    MAX_POSITION,
    MAX_SEED,
    Implementation,
    as_array,
    as_tensor,
    call_implementation,
    check_implementation,
    check_int_sequence,
    expect_shape,
    is_torch_module,
)

_CONFIG_RTOL = 2.0**-20
"""Angle error allowed per radian of a pair's angle (eight times float32's relative precision), as in
:func:`assert_rotary_angles_accurate`; a pass-through feature may differ by this much relative to the input."""


def _trained_lengths(plan: posenc.RotaryPlan) -> list[int]:
    lengths = {kind.scaling.original_max_position_embeddings or plan.max_position_embeddings for kind in plan.kinds}
    return sorted(length for length in lengths if length is not None) or [4096]


_LENGTH_DEPENDENT = ("dynamic", "longrope")
"""Rope types whose frequencies depend on the call's length (transformers takes it from the largest position)."""


def _calls(
    kind: posenc.LayerRotary, plan: posenc.RotaryPlan, grid: NDArray[np.float64]
) -> list[tuple[NDArray[np.bool_], str, bool]]:
    """The calls a layer is checked with: the rows of ``grid`` each takes, how the messages name it, and whether its
    positions are all within the trained length of a length-dependent scaling.

    One call with every position; for a scaling whose frequencies depend on the length (dynamic, longrope) and a
    grid on both sides of the trained length, first a call with the positions within it, apart: within one call
    that reaches beyond, every row takes the long frequencies, so that call alone cannot tell an engine that takes
    them at every length.
    """
    every = np.ones(len(grid), dtype=bool)
    length = kind.scaling.original_max_position_embeddings or plan.max_position_embeddings
    if not kind.rotates or kind.scaling.rope_type not in _LENGTH_DEPENDENT or length is None:
        return [(every, "", False)]
    within = grid < length
    if within.all() or not within.any():
        return [(every, "", False)]
    return [
        (within, f" in the call with the positions within the trained length {length}", True),
        (every, f" in the call whose positions reach beyond the trained length {length}", False),
    ]


def _config_tolerance(
    kind: posenc.LayerRotary, x: NDArray[np.float64], positions: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Per-entry tolerance ``(seq, head_dim)`` of the rotation of ``x`` by ``kind`` at ``positions``."""
    scale = float(np.abs(x).max())
    tolerance = np.full(x.shape, _CONFIG_RTOL * scale)
    if not kind.rotates:
        return tolerance
    part = np.arange(kind.rotary_offset, kind.rotary_offset + kind.rotary_dim)
    if kind.feature_order:
        part = part[np.array(kind.feature_order)]
    half = kind.rotary_dim // 2
    first, second = (part[0::2], part[1::2]) if kind.layout == "interleaved" else (part[:half], part[half:])
    inv_freq = kind.inverse_frequencies(seq_len=float(positions.max()) + 1.0)
    angles = np.abs(np.outer(positions, inv_freq))
    amplitude = np.hypot(x[:, first], x[:, second])
    per_pair = max(1.0, kind.attention_factor) * _CONFIG_RTOL * (amplitude * np.maximum(angles, 1.0) + scale)
    tolerance[:, first] = per_pair
    tolerance[:, second] = per_pair
    return tolerance


def _config_candidates(
    kind: posenc.LayerRotary, plan: posenc.RotaryPlan, within: bool = False
) -> list[tuple[posenc.LayerRotary, str]]:
    """Misreadings of a config that implementations are known to make, each with what to say when it matches.

    ``within``: the call's positions are all within the trained length of a length-dependent scaling.
    """
    from dataclasses import replace

    scaling = kind.scaling
    width = kind.head_dim - kind.rotary_offset
    found: list[tuple[posenc.LayerRotary, str]] = []

    def add(build: Callable[[], posenc.LayerRotary], message: str) -> None:
        try:
            found.append((build(), message))
        except ValueError:  # the misreading is not a rotation posenc can build for this layer
            pass

    if kind.base != 10000.0:
        add(
            lambda: replace(kind, base=10000.0, scaling=replace(scaling, rope_theta=None)),
            f"the default base 10000 in place of the config's {kind.base:g}: rope_theta looked for where the config "
            "does not keep it (transformers v5 writes it inside rope_parameters, v4 at the top level)",
        )

    def as_other(other: posenc.LayerRotary) -> Callable[[], posenc.LayerRotary]:
        return lambda: replace(other, layer_type=kind.layer_type)

    for other in plan.kinds:
        if other.rotates and other.n_axes == 1 and other.head_dim == kind.head_dim and other != kind:
            add(
                as_other(other),
                f"the rotation of the config's {other.layer_type!r} layers (base {other.base:g}, rope_type "
                f"{other.scaling.rope_type!r}): the per-layer-type rope parameters not wired to this layer type (one "
                "flat rope dict for every layer?)",
            )
    if scaling.rope_type not in ("default", "proportional"):
        add(
            lambda: replace(kind, scaling=posenc.RopeScaling(rope_theta=scaling.rope_theta)),
            f"base {kind.base:g} without the config's {scaling.rope_type!r} scaling: the scaling not applied",
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
                "longrope's long_factor within the trained length, where transformers divides by short_factor up "
                "to it and by long_factor beyond (mlx-lm's SuScaledRoPE keeps long_factor only)",
            )
        else:
            add(
                lambda: replace(kind, scaling=replace(scaling, long_factor=scaling.short_factor)),
                "longrope's short_factor beyond the trained length, where transformers divides by long_factor",
            )
    if kind.rotary_dim < width and scaling.rope_type != "proportional":
        add(
            lambda: replace(kind, rotary_dim=width),
            f"all {width} features rotated with base^(-2i/{width}) where the config rotates the first "
            f"{kind.rotary_dim}: the partial_rotary_factor dropped",
        )
        add(
            lambda: replace(
                kind,
                rotary_dim=width,
                scaling=posenc.RopeScaling(
                    rope_type="proportional",
                    partial_rotary_factor=kind.rotary_dim / width,
                    rope_theta=scaling.rope_theta,
                ),
            ),
            f"the proportional convention (Gemma 4's full layers: base^(-2i/{width}) on pairs (i, i + {width // 2})) "
            f"applied to a partial-rotary layer, whose {kind.rotary_dim} rotated features take "
            f"base^(-2i/{kind.rotary_dim}) on pairs (i, i + {kind.rotary_dim // 2})",
        )
    if scaling.rope_type == "proportional":
        rotated = 2 * int(scaling.partial_rotary_factor * width // 2)
        add(
            lambda: replace(
                kind,
                rotary_dim=rotated,
                scaling=posenc.RopeScaling(rope_theta=scaling.rope_theta),
            ),
            f"partial rotary's convention (base^(-2i/{rotated}) on the first {rotated} features) applied to a "
            f"proportional layer, whose frequencies are base^(-2i/{width}) on pairs (i, i + {width // 2})",
        )
    flipped: RotaryLayout = "halves" if kind.layout == "interleaved" else "interleaved"
    add(
        lambda: replace(kind, layout=flipped),
        f"the pairs taken as {flipped} where this family pairs its features as {kind.layout}",
    )
    return found


def assert_rotary_matches_config(
    rotate_fn: Implementation,
    config: object,
    *,
    model_type: str | None = None,
    positions: Sequence[int] | None = None,
    seed: int = 0,
) -> None:
    r"""Check that a model's rotation, layer by layer, is the one its transformers config describes.

    Parameters
    ----------
    rotate_fn : callable
        ``rotate_fn(x, positions, layer)`` rotates ``x`` ``(seq, head_dim)``, one query head of layer ``layer``
        (an ``int``, from 0), at ``positions`` ``(seq,)`` as that layer of the model does, and returns the same
        shape: the features the layer rotates turned (and multiplied by its attention factor), the others
        unchanged, a NoPE layer's head unchanged. The output must keep the input's feature order: feature ``j``
        of the output is feature ``j`` of ``x`` turned. An engine that permutes the rotated features of queries
        and keys alike (transformers' ``apply_rotary_pos_emb_interleave``, which DeepSeek-V3 and other latent
        attention models call, returns the pairs de-interleaved) leaves the attention scores unchanged but
        fails this check; permute its output back first (:func:`posenc.rotary_weight_permutation` gives the
        order). ``head_dim`` is that of the layer's :class:`posenc.LayerRotary`
        (multi-head latent attention: ``qk_nope_head_dim + qk_rope_head_dim``, the rotated features last). A
        ``torch.nn.Module`` gets a float32 tensor and ``positions=`` and ``layer=`` keywords. It is not called
        for layers without attention (the ``"linear_attention"``, ``"conv"`` and ``"mamba"`` layers of hybrid
        models).
    config : transformers config object or Mapping[str, object]
        The model's config, as :meth:`posenc.RotaryPlan.from_config` reads it (a ``config.json`` dict, v5
        ``rope_parameters`` or legacy ``rope_scaling``).
    model_type : str or None, default None
        Passed on to :meth:`posenc.RotaryPlan.from_config`.
    positions : sequence of int or None, default None
        At most 64 positions in ``[0, 2**24]``. Default: 0 to 3, and ``L - 1``, ``L`` and ``2L`` for each
        trained length ``L`` of the config (a scaling's ``original_max_position_embeddings``, else
        ``max_position_embeddings``, else 4096), capped at ``2**24``. A layer whose frequencies depend on the
        length of the call (``"dynamic"``, ``"longrope"``: transformers takes the length from the largest
        position) is called twice when the positions lie on both sides of its trained length: first with
        those within it, then with all of them. (In one call that reaches beyond, every row takes the long
        frequencies, so that call alone passes an engine that takes them at every length.)
    seed : int, default 0
        Seed of the random heads.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If some layer's output differs from :meth:`posenc.LayerRotary.rotate` of the config's plan by more than
        the tolerance (see Notes), or ``rotate_fn`` raises. The message names the layers and layer types that
        differ, the first layer's worst entry, and, when the output matches a known misreading of the config,
        which: a NoPE layer rotated or a rotating layer left alone, the default base 10000 in place of the
        config's, another layer type's parameters, the scaling left out, YaRN's ``truncate`` or attention factor
        not honoured, a ``partial_rotary_factor`` dropped, the partial and proportional conventions swapped,
        the pair layout flipped, longrope's long factors within the trained length or its short factors beyond
        it, or the rotation right but its output de-interleaved (see ``rotate_fn``). For a layer called twice
        (see ``positions``) it says which call differs.
    TypeError, ValueError
        If an argument of the check is invalid, or :meth:`posenc.RotaryPlan.from_config` cannot read ``config``
        (the message names the key), or a layer rotates on several axes (check those with
        :func:`assert_mrope_axes_match`).

    Notes
    -----
    Each layer gets its own random head (standard normal, ``seed``) at every position. An entry of a rotated
    pair may differ from posenc's float64 reference by :math:`2^{-20}\,a\,(|a_p \max(1, \phi)| + s)`, with
    :math:`\phi` the pair's angle at that position, :math:`a_p` the pair's length, :math:`s` the largest input
    entry and :math:`a` the attention factor (if above 1): eight times float32's relative precision of the
    angle, as :func:`assert_rotary_angles_accurate` allows, so that a float32 implementation passes; any other
    entry by :math:`2^{-20} s`. The config is read once, by :meth:`posenc.RotaryPlan.from_config`, which
    tests/test_model_zoo.py checks against transformers' own rotary classes for every family of transformers
    5.23 whose model rotates with its config, except the three posenc cannot serve (listed there from
    ``posenc_book.zoo.LEFT_OUT``); five classes whose defaults posenc refuses run there with a published value
    in their place (``posenc_book.zoo.OVERRIDES``).

    What is checked is the rotation of one head, feature by feature, and the attention factor that multiplies
    its rotated features. What the attention does outside the rotation is not checked: the softmax scale
    (the ``softmax_scale`` of a :class:`posenc.LayerRotary`, such as latent attention's YaRN factor from
    ``mscale_all_dim``) and the position-dependent query multipliers (its ``query_scaling``: Llama 4's
    temperature tuning, ``llama_4_scaling_beta``, Mistral Large 4's learned multiplier). An engine that drops
    them passes; compare them with the plan yourself.

    Examples
    --------
    >>> import posenc
    >>> config = {"model_type": "gemma3_text", "hidden_size": 64, "head_dim": 16, "num_attention_heads": 4,
    ...           "num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"],
    ...           "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    ...                               "full_attention": {"rope_type": "linear", "factor": 8.0,
    ...                                                  "rope_theta": 1000000.0}}}
    >>> plan = posenc.RotaryPlan.from_config(config)
    >>> assert_rotary_matches_config(lambda x, p, layer: plan.layers[layer].rotate(x, p), config)
    >>> full = plan.layers[1]
    >>> assert_rotary_matches_config(lambda x, p, layer: full.rotate(x, p), config)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    AssertionError: rotate_fn differs ... in 1 of 2 layers (layer 0, of type 'sliding_attention')...misreading...
    """
    check_implementation(rotate_fn, "rotate_fn")
    plan = posenc.RotaryPlan.from_config(config, model_type=model_type)
    several = [kind for kind in plan.kinds if kind.rotates and kind.n_axes > 1]
    if several:
        raise ValueError(
            f"config's {several[0].layer_type!r} layers rotate on several axes {several[0].axes}: check them with "
            "posenc.testing.assert_mrope_axes_match"
        )
    if positions is None:
        chosen = {0, 1, 2, 3}
        for length in _trained_lengths(plan):
            chosen |= {min(p, MAX_POSITION) for p in (length - 1, length, 2 * length)}
        grid = np.array(sorted(chosen), dtype=np.float64)
    else:
        grid = check_int_sequence(positions, "positions", low=0, high=MAX_POSITION).astype(np.float64)
    seed = check_int(seed, "seed", maximum=MAX_SEED)
    if len(plan.layers) * len(grid) * max(kind.head_dim for kind in plan.kinds) > 16 * MAX_CHECK_ELEMENTS:
        raise ValueError("config has too many layers and features for positions: pass fewer positions")
    rng = np.random.default_rng(seed)
    Array = NDArray[np.float64]
    wrong: list[tuple[int, float, Array, Array, Array, Array, str, bool]] = []
    for layer, kind in enumerate(plan.layers):
        x = rng.standard_normal((len(grid), kind.head_dim))
        if kind.layer_type in NO_ATTENTION_TYPES:
            continue  # a recurrent or convolutional layer: no queries or keys to rotate
        for rows, call, within in _calls(kind, plan, grid):
            description = f"rotate_fn(x, positions, {layer}){call}"
            x_call, grid_call = x[rows], grid[rows]
            if is_torch_module(rotate_fn):
                got = call_implementation(
                    rotate_fn,
                    description,
                    as_tensor(x_call, "float32"),
                    positions=as_tensor(grid_call, "float64"),
                    layer=layer,
                )
            else:
                got = call_implementation(rotate_fn, description, x_call.copy(), grid_call.copy(), layer)
            out = as_array(got, description)
            expect_shape(out, x_call.shape, description)
            expected = kind.rotate(x_call, grid_call)
            excess = np.abs(out - expected) / _config_tolerance(kind, x_call, grid_call)
            excess = np.where(np.isfinite(excess), excess, np.inf)
            if excess.max() > 1.0:
                wrong.append((layer, float(excess.max()), x_call, out, expected, grid_call, call, within))
                break  # the layer is wrong: its later call adds nothing to the message
    if not wrong:
        return
    layer, _, x, out, expected, grid, call, within = wrong[0]
    kind = plan.layers[layer]
    tolerance = _config_tolerance(kind, x, grid)
    row, feature = (int(i) for i in np.unravel_index(int(np.argmax(np.abs(out - expected) / tolerance)), x.shape))
    types = sorted({plan.layers[i].layer_type for i, *_ in wrong})
    shown = ", ".join(str(i) for i, *_ in wrong[:8]) + (", ..." if len(wrong) > 8 else "")
    message = (
        f"rotate_fn differs from the rotation that config (model_type {plan.model_type!r}) describes in "
        f"{len(wrong)} of {len(plan.layers)} layers (layer{'s' if len(wrong) > 1 else ''} {shown}, of type "
        f"{', '.join(map(repr, types))}): layer {layer} by {abs(out - expected)[row, feature]:.3g} at position "
        f"{int(grid[row])}, feature {feature} (tolerance {tolerance[row, feature]:.2g}){call}."
    )

    def matches(reference: NDArray[np.float64], kind_for_tolerance: posenc.LayerRotary) -> bool:
        bound = np.maximum(tolerance, _config_tolerance(kind_for_tolerance, x, grid))
        return bool(np.all(np.abs(out - reference) <= bound))

    if not kind.rotates:
        rotating = [other for other in plan.kinds if other.rotates and other.head_dim == kind.head_dim]
        hint = (
            f" Layer {layer} is a NoPE layer in this config (its family's rule and the config's "
            "no_rope_layers / layer types leave it unrotated), but rotate_fn rotates it"
        )
        if rotating and matches(rotating[0].rotate(x, grid), rotating[0]):
            hint += f" as the config's {rotating[0].layer_type!r} layers rotate"
        raise AssertionError(message + hint + ".")
    if matches(x, kind):
        raise AssertionError(
            message + f" rotate_fn leaves layer {layer} unrotated, but the config rotates it "
            f"({kind.rotary_dim} of its {kind.head_dim} features): a NoPE rule applied to the wrong layers?"
        )
    part = np.arange(kind.rotary_offset, kind.rotary_offset + kind.rotary_dim)
    rotated_norm = np.linalg.norm(out[:, part], axis=-1) / np.linalg.norm(x[:, part], axis=-1)
    measured = float(np.median(rotated_norm))
    if abs(measured - kind.attention_factor) > 1e-6 * kind.attention_factor and matches(
        expected * np.where(np.isin(np.arange(kind.head_dim), part), measured / kind.attention_factor, 1.0), kind
    ):
        raise AssertionError(
            message + f" The angles are right, but the rotated features are multiplied by {measured:.6g} where the "
            f"config's attention factor is {kind.attention_factor:.6g} (YaRN's attention_factor, or mscale and "
            "mscale_all_dim, not read as transformers reads them?)."
        )
    if kind.layout == "interleaved":
        # transformers' apply_rotary_pos_emb_interleave returns pair i at features i and i + rotary_dim / 2
        order = part[posenc.rotary_weight_permutation("interleaved", "halves", kind.rotary_dim)]
        deinterleaved, bound = expected.copy(), tolerance.copy()
        deinterleaved[:, part], bound[:, part] = expected[:, order], np.maximum(tolerance[:, part], tolerance[:, order])
        if np.all(np.abs(out - deinterleaved) <= bound):
            raise AssertionError(
                message + f" Layer {layer} matches a known misreading: the rotation right, but its output "
                f"de-interleaved (pair i returned at features i and i + {kind.rotary_dim // 2} of the rotated "
                f"{kind.rotary_dim}, as transformers' apply_rotary_pos_emb_interleave returns them). Scores are "
                "unchanged when queries and keys are permuted alike, but this check compares features in the "
                "input's order: re-interleave the output (posenc.rotary_weight_permutation) before the check."
            )
    for candidate, what in _config_candidates(kind, plan, within):
        if matches(candidate.rotate(x, grid), candidate):
            raise AssertionError(message + f" Layer {layer} matches a known misreading: {what}.")
    raise AssertionError(message)
