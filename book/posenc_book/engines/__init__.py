"""The same model in every engine (chapter 17): one config, the rotation each engine applies, posenc's float64 referee.

A :class:`Case` is one model's ``config.json`` (the part that rotates, as published where a copy could be cited, and
as transformers 5.23 saves it). An *engine* builds its rotary embedding from that file the way its own loader does
(transformers' ``AutoConfig`` and the family's rotary class, mlx-lm's ``load_model``, ONNX Runtime GenAI's model
builder, ...) and is asked for the rotation of layer ``i``'s queries and keys at a position, one decoding step at a
time: the token at position ``p`` after ``p`` tokens, as a served model meets it. :func:`measure` compares every
rotating layer kind with :meth:`posenc.LayerRotary.rotate`, and every layer's NoPE flag with the plan's, and returns a
:class:`Cell`: the largest angle error, the largest error of a pair's length, the verdict and what failed.

The probe puts a unit vector at a random angle in every rotated pair, so an engine's output pair gives its angle and
its length directly; features that must pass through unrotated get random values. The tolerance of a pair (see
:func:`angle_tolerance`) is what float32 arithmetic allows for its angle; a pair whose tolerance exceeds
:data:`INFORMATIVE` radians (a fast pair far beyond the trained length, where float32 keeps no digit of the angle)
says nothing and is left out of the error, and the cell says how many were.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

import posenc

__all__ = [
    "EPS32",
    "INFORMATIVE",
    "LENGTH_TOLERANCE",
    "PASSTHROUGH_TOLERANCE",
    "Case",
    "Cell",
    "Engine",
    "LayerAnswer",
    "NotAsked",
    "NotServed",
    "angle_tolerance",
    "pair_angle_errors",
    "pair_frequencies",
    "measure",
    "positions_of",
    "probe",
    "with_rope_keys",
]

EPS32 = 2.0**-24
"""The unit roundoff of float32."""

INFORMATIVE = 0.1
"""A pair whose float32 tolerance exceeds this many radians is left out of a cell's error: its angle has no digits."""

LENGTH_TOLERANCE = 1e-5
"""Relative error allowed in the length of a rotated pair (the attention factor times 1): ten float32 roundings
of the cosine, the sine, the factor and the products, with a margin of about ten."""

PASSTHROUGH_TOLERANCE = 1e-6
"""Error allowed in a feature that is not rotated: it is only cast to float32 and back (at most 2**-24 relative for
the probe's values of size at most 1), with a margin."""


@dataclass(frozen=True)
class Case:
    """One model's configuration, as the engines are handed it.

    Parameters
    ----------
    name : str
        The row's label (``"GPT-OSS 20B"``).
    model_id : str
        The checkpoint the config is from (``"openai/gpt-oss-20b"``), or the configuration class for defaults.
    config : Mapping
        The ``config.json`` dict an engine reads, complete (every key the engines' loaders require).
    source : str
        Where the rotary keys come from.
    covers : tuple of str
        What the case is in the matrix for (``"YaRN, truncate: false"``, ``"NoPE layers"``, ...).
    text_key : str or None, default None
        The key of the text model's sub-config in a composite config (``"text_config"``), which posenc and
        transformers' text rotary read; None when the config is the text model's.
    text_model_type : str or None, default None
        The ``model_type`` posenc and transformers read the text model's keys as, when it is not the file's
        (Qwen2.5-VL's file says ``qwen2_5_vl`` and holds the text model's keys at its top level).
    """

    name: str
    model_id: str
    config: Mapping[str, Any]
    source: str
    covers: tuple[str, ...]
    text_key: str | None = None
    text_model_type: str | None = None

    def text_config(self) -> dict[str, Any]:
        """A deep copy of the text model's config (the whole config when it is not composite)."""
        config = copy.deepcopy(dict(self.config))
        if self.text_key is not None:
            config = dict(config[self.text_key])
        if self.text_model_type is not None:
            config["model_type"] = self.text_model_type
        return config

    def plan(self) -> posenc.RotaryPlan:
        """posenc's reading of the text model's config: the referee."""
        return posenc.RotaryPlan.from_config(self.text_config())


def positions_of(plan: posenc.RotaryPlan, kind: posenc.LayerRotary) -> tuple[int, ...]:
    """The positions a layer kind is probed at: within and beyond its trained length and its served context.

    ``0, 1, L - 1, L, 2L`` with ``L`` the trained length (``original_max_position_embeddings`` of a scaled rope, else
    ``max_position_embeddings``), and ``M - 1, M, 4M`` with ``M`` the context the config serves
    (``max_position_embeddings``), sorted.
    """
    served = plan.max_position_embeddings or 4096
    trained = kind.scaling.original_max_position_embeddings if kind.rotates else None
    trained = trained or served
    return tuple(sorted({0, 1, trained - 1, trained, 2 * trained, served - 1, served, 4 * served}))


def probe(head_dim: int, n_heads: int = 2, seed: int = 0) -> NDArray[np.float64]:
    """Random values in ``[-1, 1]``, ``(n_heads, head_dim)``: the head before the rotation (replaced per kind)."""
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=(n_heads, head_dim))


def _unit_pairs(kind: posenc.LayerRotary, x: NDArray[np.float64], seed: int) -> NDArray[np.float64]:
    """``x`` with a unit vector at a random angle in every rotated pair of ``kind`` (the model's feature order)."""
    x = x.copy()
    first, second = _pair_features(kind)
    angle = np.random.default_rng(seed + 1).uniform(-np.pi, np.pi, size=x.shape[:-1] + (len(first),))
    x[..., first], x[..., second] = np.cos(angle), np.sin(angle)
    return x


def _pair_features(kind: posenc.LayerRotary) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """The features of the model's head that form each rotated pair of ``kind``: (first members, second members)."""
    n = kind.rotary_dim // 2
    pairs = np.arange(n)
    first, second = (2 * pairs, 2 * pairs + 1) if kind.layout == "interleaved" else (pairs, pairs + n)
    order = np.array(kind.feature_order) if kind.feature_order else np.arange(kind.rotary_dim)
    return kind.rotary_offset + order[first], kind.rotary_offset + order[second]


def angle_tolerance(kind: posenc.LayerRotary, position: float) -> NDArray[np.float64]:
    """What float32 allows for each rotated pair's angle at ``position``, in radians, ``(rotary_dim // 2,)``.

    An engine forms the angle ``position * inv_freq`` in float32 from a float32 inverse frequency computed with a
    power of the base: its relative error is at most about ``(ln(base) + 4) * 2**-24`` (the exponent's rounding
    times ``ln(base)``, the power, the division, the product; scalings add a few roundings), then the cosine and sine
    add a few roundings of their own. The tolerance is twice ``|angle| * (ln(base) + 12) * 2**-24 + 8 * 2**-24``,
    the bound tests/test_model_zoo.py holds transformers to, plus ``2 * |angle| * 2**-24`` for a position an engine
    holds in float32 (exact below ``2**24``).
    """
    angle = abs(position) * pair_frequencies(kind, position)
    per_pair = angle * (math.log(kind.base) + 12.0) * EPS32 + 8.0 * EPS32
    return np.asarray(2.0 * per_pair + 2.0 * angle * EPS32, dtype=np.float64)


class NotAsked(Exception):
    """Raised by an adapter that cannot ask its engine what a case needs (the reason is the message): ``"n/a"``."""


class NotServed(Exception):
    """Raised by an engine asked for a position it does not serve (beyond the table it exported)."""


def pair_frequencies(kind: posenc.LayerRotary, position: int) -> NDArray[np.float64]:
    """Each rotated pair's frequency for the token at ``position`` after ``position`` tokens, ``(rotary_dim // 2,)``.

    ``"dynamic"`` and ``"longrope"`` scalings take the sequence length ``position + 1``, as posenc's
    :meth:`~posenc.LayerRotary.rotate` and transformers do; with several axes, every coordinate is ``position`` and a
    pair turns at the sum of its axes' frequencies (one of which is nonzero).
    """
    if kind.n_axes == 1:
        return kind.inverse_frequencies(seq_len=position + 1)
    return np.abs(kind.frequencies()).sum(axis=0)


@dataclass(frozen=True)
class LayerAnswer:
    """An engine's rotation of one layer's queries and keys at one position.

    ``q`` and ``k`` are ``(n_heads, head_dim)`` float64 (None for a layer the engine does not rotate: a NoPE layer,
    whose input it leaves as it is).
    """

    q: NDArray[np.float64] | None
    k: NDArray[np.float64] | None


@dataclass
class Engine:
    """An engine built from one case: ``rotates(i)`` and ``rotate(i, kind, q, k, position)``.

    ``rotates(i)`` says whether layer ``i`` rotates its queries and keys (False: NoPE); ``rotate`` returns the
    :class:`LayerAnswer` of layer ``i`` (whose posenc kind is ``kind``) for the unrotated ``q`` and ``k`` at
    ``position``. ``supports(kind)`` may say why a layer kind cannot be asked (several position axes for a text-only
    engine): a string is the reason, None means it can.
    """

    name: str
    version: str
    rotates: Callable[[int], bool]
    rotate: Callable[[int, posenc.LayerRotary, NDArray[np.float64], NDArray[np.float64], int], LayerAnswer]
    supports: Callable[[posenc.LayerRotary], str | None] = lambda kind: None
    note: str = ""


@dataclass
class Cell:
    """One case in one engine: the measured errors and the verdict.

    Attributes
    ----------
    angle_error : float
        The largest angle error of an informative pair, in radians (nan when nothing was measured).
    length_error : float
        The largest relative error of a rotated pair's length (the attention factor included).
    passthrough_error : float
        The largest error of a feature that passes through unrotated.
    worst_ratio : float
        The largest angle error divided by its pair's tolerance (a pass is at most 1).
    verdict : {"pass", "fail", "refused", "n/a"}
        ``"refused"``: the engine's loader raised on the config (the message is the detail); ``"n/a"``: the case
        asks for what the engine cannot be asked (the detail says why).
    detail : str
        What failed, where (layer, position, pair), or why nothing was measured.
    """

    case: str
    engine: str
    version: str
    angle_error: float = math.nan
    length_error: float = math.nan
    passthrough_error: float = math.nan
    worst_ratio: float = math.nan
    skipped_pairs: int = 0
    compared_pairs: int = 0
    verdict: str = "n/a"
    detail: str = ""
    failures: list[str] = field(default_factory=list)

    def short(self) -> str:
        """The matrix's text for the cell: the error and a mark."""
        if self.verdict in ("refused", "n/a"):
            return self.verdict
        mark = "✓" if self.verdict == "pass" else "✗"
        return f"{self.angle_error:.1e} {mark}"


def _wrapped(angle: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.abs(np.angle(np.exp(1j * angle)))


def measure(case: Case, engine: Engine | None, *, build_error: str = "", seed: int = 0) -> Cell:
    """Compare ``engine``'s rotations of ``case`` with posenc's referee, every layer kind at every probe position.

    Parameters
    ----------
    case : Case
    engine : Engine or None
        None when the engine's loader refused the config; ``build_error`` then says how.
    build_error : str, default ""
    seed : int, default 0
        The probe's random generator.

    Returns
    -------
    Cell
        ``"fail"`` if a rotating layer kind's angle exceeds its tolerance at an informative pair, a pair's length is
        off by more than :data:`LENGTH_TOLERANCE`, an unrotated feature moved by more than
        :data:`PASSTHROUGH_TOLERANCE`, or a layer's NoPE flag differs from the plan's.
    """
    if engine is None:
        return Cell(case.name, "", "", verdict="refused", detail=build_error)
    cell = Cell(case.name, engine.name, engine.version)
    plan = case.plan()
    angle_errors, ratios, lengths, passthrough = [0.0], [0.0], [0.0], [0.0]
    for index, layer in enumerate(plan.layers):
        theirs = engine.rotates(index)
        if theirs != layer.rotates:
            cell.failures.append(
                f"layer {index}: the engine {'rotates' if theirs else 'does not rotate'}, posenc's plan says "
                f"{'it rotates' if layer.rotates else 'NoPE'}"
            )
    reasons = []
    for kind in plan.kinds:
        if not kind.rotates:
            continue
        reason = engine.supports(kind)
        if reason is not None:
            reasons.append(f"{kind.layer_type}: {reason}")
            continue
        index = plan.layers_of(kind)[0]
        if not engine.rotates(index):
            continue  # already a failure above
        first, second = _pair_features(kind)
        rotated = np.zeros(kind.head_dim, bool)
        rotated[first] = rotated[second] = True
        for position in positions_of(plan, kind):
            q0 = _unit_pairs(kind, probe(kind.head_dim, seed=seed), seed)
            k0 = _unit_pairs(kind, probe(kind.head_dim, seed=seed + 10), seed + 10)
            try:
                answer = engine.rotate(index, kind, q0, k0, position)
            except NotServed as error:
                reasons.append(f"{kind.layer_type} at {position}: {error}")
                continue
            except (ValueError, TypeError, RuntimeError, IndexError) as error:  # the engine cannot run what it built
                cell.failures.append(
                    f"{kind.layer_type} (layer {index}) at {position}: raised {type(error).__name__}: {error}"
                )
                break
            tolerance = angle_tolerance(kind, position)
            informative = tolerance <= INFORMATIVE
            cell.skipped_pairs += int((~informative).sum())
            cell.compared_pairs += int(informative.sum())
            for label, x, got in (("q", q0, answer.q), ("k", k0, answer.k)):
                assert got is not None
                where = [position] if kind.n_axes == 1 else [[position] * kind.n_axes]
                want = kind.rotate(x[:, None, :], where)[:, 0, :]
                error = _wrapped(
                    np.arctan2(got[:, second], got[:, first]) - np.arctan2(want[:, second], want[:, first])
                )
                worst = np.where(informative, error, 0.0).max(axis=0)
                angle_errors.append(float(worst.max()))
                ratio = worst / tolerance
                ratios.append(float(ratio.max()))
                length = np.hypot(got[:, first], got[:, second]) / kind.attention_factor - 1.0
                lengths.append(float(np.abs(length).max()))
                still = np.abs(got[:, ~rotated] - x[:, ~rotated])
                passthrough.append(float(still.max()) if still.size else 0.0)
                if ratio.max() > 1.0:
                    pair = int(ratio.argmax())
                    cell.failures.append(
                        f"{kind.layer_type} (layer {index}), {label} at position {position}: pair {pair} off by "
                        f"{worst[pair]:.3g} rad (tolerance {tolerance[pair]:.2g})"
                    )
                if np.abs(length).max() > LENGTH_TOLERANCE:
                    cell.failures.append(
                        f"{kind.layer_type} (layer {index}), {label} at position {position}: a pair's length is "
                        f"off by {np.abs(length).max():.3g} (relative; attention factor {kind.attention_factor:.6g})"
                    )
                if still.size and still.max() > PASSTHROUGH_TOLERANCE:
                    cell.failures.append(
                        f"{kind.layer_type} (layer {index}), {label} at position {position}: a feature that posenc "
                        f"leaves unrotated moved by {still.max():.3g}"
                    )
    cell.angle_error, cell.worst_ratio = max(angle_errors), max(ratios)
    cell.length_error, cell.passthrough_error = max(lengths), max(passthrough)
    if cell.compared_pairs == 0 and not cell.failures:
        cell.verdict, cell.detail = "n/a", "; ".join(reasons) or "no rotating layer"
        return cell
    cell.verdict = "fail" if cell.failures else "pass"
    details = cell.failures[:3] + ([f"... {len(cell.failures) - 3} more"] if len(cell.failures) > 3 else [])
    cell.detail = "; ".join(details + [f"not measured: {reason}" for reason in reasons])
    return cell


def pair_angle_errors(
    case: Case, engine: Engine, position: int, *, layer_type: str | None = None, seed: int = 0
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The angle error of each rotated pair of a layer kind at ``position``, and its tolerance, in radians.

    The first rotating kind of ``case``'s plan (or the one of ``layer_type``), its first layer, the largest error
    over the probe's heads and over q and k. Returns ``(errors, tolerance)``, each ``(rotary_dim // 2,)``.
    """
    plan = case.plan()
    kinds = [kind for kind in plan.kinds if kind.rotates and (layer_type is None or kind.layer_type == layer_type)]
    if not kinds:
        raise ValueError(f"{case.name} has no rotating layer kind {layer_type!r}")
    kind = kinds[0]
    index = plan.layers_of(kind)[0]
    first, second = _pair_features(kind)
    q0 = _unit_pairs(kind, probe(kind.head_dim, seed=seed), seed)
    k0 = _unit_pairs(kind, probe(kind.head_dim, seed=seed + 10), seed + 10)
    answer = engine.rotate(index, kind, q0, k0, position)
    where = [position] if kind.n_axes == 1 else [[position] * kind.n_axes]
    worst = np.zeros(len(first))
    for x, got in ((q0, answer.q), (k0, answer.k)):
        assert got is not None
        want = kind.rotate(x[:, None, :], where)[:, 0, :]
        error = _wrapped(np.arctan2(got[:, second], got[:, first]) - np.arctan2(want[:, second], want[:, first]))
        worst = np.maximum(worst, error.max(axis=0))
    return worst, angle_tolerance(kind, position)


def with_rope_keys(case: Case, name: str, **keys: Any) -> Case:
    """``case`` with ``keys`` set in its rope dict (``rope_scaling`` or ``rope_parameters``, whichever it has).

    A ``rope_parameters`` that holds one dict per layer type (transformers 5's Gemma 3) has no single dict to set
    them in: a ``ValueError`` names the layer types rather than leaving the keys beside them, unread.
    """
    config = copy.deepcopy(dict(case.config))
    target = config.get("rope_scaling") or config.get("rope_parameters")
    if not isinstance(target, dict):
        raise ValueError(f"{case.name} has no rope dict to change")
    per_layer_type = sorted(key for key, value in target.items() if isinstance(value, dict))
    if per_layer_type:
        raise ValueError(
            f"{case.name}'s rope dict holds one dict per layer type ({', '.join(per_layer_type)}); "
            "with_rope_keys sets keys in a single rope dict"
        )
    target.update(keys)
    return Case(name, case.model_id, config, case.source, case.covers, case.text_key, case.text_model_type)
