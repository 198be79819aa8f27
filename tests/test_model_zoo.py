"""The census: every rotary configuration of the pinned transformers, read by posenc and rotated as transformers does.

For every configuration class of transformers 5.23 that builds with its defaults and carries rotary parameters
(:func:`posenc_book.zoo.rotary_configs`: 236 classes in 193 model directories, the families), the test reads the
config with :meth:`posenc.RotaryPlan.from_config` and, layer kind by layer kind, rotates random queries and keys
(uniform in [-1, 1], two heads) with :func:`posenc.nn.rotary_embedding` and with the family's own rotary embedding
class and ``apply_rotary_pos_emb`` (or the function its attention calls instead: ``apply_rotary_pos_emb_vision``,
``apply_rotary_pos_emb_interleave``, Llama 4's complex ``apply_rotary_emb``, ...), at positions 0, 1, L - 1, L and 4L,
L the config's ``max_position_embeddings`` (multi-axis kinds: those positions on the first axis and others on the
rest, see :func:`coordinates`), in float32. NoPE layers are checked against the attention classes themselves in
:func:`test_nope_layers_are_those_transformers_leaves_unrotated`.

*What transformers does not serve is not tested against it*, and is listed here as data: configuration classes
whose defaults transformers' own rotary cannot run (:data:`REFUSED_BY_BOTH`: posenc must refuse them too, and
the test shows transformers failing), classes that rotate nothing (:data:`NOT_ROTARY`), and the families posenc
cannot serve (:data:`posenc_book.zoo.LEFT_OUT`, at most 5% of the families, which chapter 15 lists from there).
:data:`posenc_book.zoo.OVERRIDES` replaces a default that gives an odd rotary width (transformers rounds it up;
posenc refuses it, which :func:`test_odd_rotary_widths_are_refused` checks) or a broken default, with the value a
published config ships.

*Tolerance*, per rotated feature: transformers forms the angle ``position * inv_freq`` in float32 from a float32
inverse frequency (relative error at most ``(ln(base) + 4) * 2**-24``: the exponent's rounding times ``ln(base)``,
the power, the division and the product; a position above ``2**24`` adds its own rounding), posenc in float64,
rounded once. Pair ``i`` of a row at angle ``phi_i`` therefore differs by at most ``|phi_i| * (ln(base) + 4) *
2**-24`` radians, and its features, of size at most 1 here, by that plus a few float32 roundings of the cosine, the
sine and ``x * cos + rotate_half(x) * sin``; both sides multiply by the attention factor. The test allows twice
``|phi_i| * (ln(base) + 12) * 2**-24 + 8 * 2**-24`` times ``max(1, attention factor)``, plus ``4 * 2**-24``. At
4L the high-frequency pairs turn by up to about 4e6 radians (L = 1048576, the census's longest), where float32 keeps
no digit of the angle: the bound grows with the angle, so there the comparison only says that both computed *some*
angle, while the low-frequency pairs (those the scalings change) stay within the bound: about 2 * (ln(base) + 12)
float32 roundings of their angle, a few tens. A wrong layout, base, scaling or width
moves some feature by O(1) (:func:`test_the_census_sees_a_wrong_family_entry` shows four).
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import rope_oracle
import torch

import posenc
from posenc._families import _GEMMA3_BASES as _GEMMA3
from posenc._families import FAMILIES, LEGACY_LAYER_TYPES
from posenc.nn import rotary_embedding
from posenc_book.zoo import LEFT_OUT, OVERRIDES, model_type_of, rotary_configs

pytestmark = pytest.mark.usefixtures("quiet_transformers")

EPS32 = 2.0**-24

NOT_ROTARY = {
    "InternLM3Config": "no modeling code in transformers 5.23 (the model runs from the Hub's remote code)",
    "IQuestCoderConfig": "no modeling code in transformers 5.23 (the model runs from the Hub's remote code)",
    "BltConfig": "composite: no module reads its own rope_parameters (each of its four sub-configs builds its rotary)",
}
"""Configuration classes that carry rotary parameters but whose model rotates nothing with them."""

UNROTATED_AT_DEFAULTS = {
    "esm": "EsmConfig's position_embedding_type is 'absolute' by default: it rotates only for 'rotary' (ESM-2's "
    "published configs), which tests/test_rope_oracle.py checks on the corpus",
}
"""Families posenc reads whose configuration class does not rotate at its defaults (not in the census)."""

REFUSED_BY_BOTH = {
    "Glm4vTextConfig": "mrope_section [8, 12, 12] for 64 pairs (the split fails)",
    "GlmImageTextConfig": "mrope_section [8, 12, 12] for 64 pairs (the split fails)",
    "Qwen3OmniMoeTextConfig": "hidden_size 2048 / 28 heads = 73 features per head (the rotation fails)",
    "HunYuanVLTextConfig": "no mrope_section (len(None) fails)",
}
"""Default configs transformers' own rotary cannot run (the error it raises is shown): posenc refuses them too."""

ROTARY_CLASS = {
    "Qwen3OmniMoeTalkerCodePredictorConfig": "Qwen3OmniMoeRotaryEmbedding",
    "Qwen3OmniMoeCode2WavConfig": "Qwen3OmniMoeRotaryEmbedding",
    "Qwen3OmniMoeTalkerTextConfig": "Qwen3OmniMoeTalkerRotaryEmbedding",
    "Qwen3OmniMoeTextConfig": "Qwen3OmniMoeThinkerTextRotaryEmbedding",
    "Qwen2_5OmniTextConfig": "Qwen2_5OmniRotaryEmbedding",
    "Qwen2_5OmniTalkerConfig": "Qwen2_5OmniRotaryEmbedding",
    "Llama4VisionConfig": "Llama4VisionRotaryEmbedding",
    "Sam3ViTConfig": "Sam3ViTRotaryEmbedding",
}
"""The rotary class of configs whose model builds it from a parent config class (annotated with another name)."""

INTERLEAVE_FUNCTION: dict[str, Callable[[Any], bool]] = {
    # Configs whose modeling file has apply_rotary_pos_emb_interleave: whether their attention calls it (read from the
    # attention's forward; the probes below check it on the code itself). Every other config: apply_rotary_pos_emb.
    **dict.fromkeys(
        ["DeepseekV3Config", "AXK1Config", "Glm4MoeLiteConfig", "Mistral4Config", "YoutuConfig"],
        lambda config: bool(config.rope_interleave),
    ),
    **dict.fromkeys(
        [
            "DeepseekV32Config", "AXK2Config", "GlmMoeDsaConfig", "MistralLarge4TextConfig", "BailingHybridConfig",
            "LongcatFlashConfig", "Dots3NoteTextConfig",
        ],
        lambda config: True,
    ),
}  # fmt: skip

ROPE_LABEL: dict[str, Callable[[str], str]] = {
    # modeling_deepseek_v4.py, DeepseekV4DecoderLayer: sliding layers take the "main" rope, CSA/HCA the "compress" one
    "deepseek_v4": lambda layer_type: "main" if layer_type == "sliding_attention" else "compress",
}


def rotary_class(config: Any) -> tuple[Any, type]:
    """The modeling module of ``config``'s family and the rotary embedding class its model builds from it."""
    family = type(config).__module__.split(".")[2]
    name = type(config).__name__
    modules = [
        importlib.import_module(f"transformers.models.{family}.{stem}")
        for stem in (f"modeling_{family}",)
        if importlib.util.find_spec(f"transformers.models.{family}.{stem}") is not None
    ]
    if not modules:
        raise LookupError(f"{name}: transformers.models.{family} has no modeling module")
    module = modules[0]
    candidates = [
        cls
        for cls_name, cls in vars(module).items()
        if inspect.isclass(cls)
        and cls.__module__ == module.__name__
        and ("Rotary" in cls_name or "Rope" in cls_name)
        and "Attention" not in cls_name
    ]
    if name in ROTARY_CLASS:
        return module, next(cls for cls in candidates if cls.__name__ == ROTARY_CLASS[name])

    def annotated(cls: type) -> str:
        parameters = list(inspect.signature(cls.__init__).parameters.values())
        annotation = parameters[1].annotation if len(parameters) > 1 else None
        return str(getattr(annotation, "__name__", annotation)).split(".")[-1].strip("'\"")

    matches = [cls for cls in candidates if annotated(cls) == name]
    if len(matches) != 1:  # the one rotary of its kind (vision or not) in the module
        vision = "Vision" in name
        matches = [cls for cls in candidates if ("Vision" in cls.__name__) == vision]
    if len(matches) != 1:
        raise LookupError(f"{name}: rotary class among {[cls.__name__ for cls in candidates]}")
    return module, matches[0]


def coordinates(kind: posenc.LayerRotary, positions: list[int]) -> np.ndarray:
    """The positions (one axis) or coordinates (several) of the test rows: the given positions on the first axis, and
    others on the rest, so that a wrong assignment of pairs to axes shows."""
    p = np.array(positions, dtype=np.float64)
    if kind.n_axes == 1:
        return p
    if kind.n_axes == 3:
        return np.stack([p, p // 2 + 1, p // 3 + 2], axis=-1)
    return np.stack([p, p[::-1] // 2], axis=-1)


# --- transformers' side: its rotary class and the function its attention calls --------------------------------


def _apply(module: Any, config: Any, kind: posenc.LayerRotary, out: Any, q: torch.Tensor, k: torch.Tensor):
    """transformers' rotation of ``q``, ``k`` ``(1, heads, seq, head_dim)`` from its rotary class's output ``out``."""
    part = slice(kind.rotary_offset, None)
    qp, kp = q[..., part], k[..., part]
    if isinstance(out, torch.Tensor) and out.is_complex():  # Llama 4, DeepSeek-V2: freqs_cis and apply_rotary_emb
        if type(config).__module__.split(".")[2] == "llama4":  # (batch, seq, heads, head_dim)
            tq, tk = module.apply_rotary_emb(qp.transpose(1, 2), kp.transpose(1, 2), out)
            tq, tk = tq.transpose(1, 2), tk.transpose(1, 2)
        else:
            tq, tk = module.apply_rotary_emb(qp, kp, out)
    else:
        cos, sin = out
        vision = kind.n_axes == 2 or "Vision" in type(config).__name__
        name = type(config).__name__
        interleave = name in INTERLEAVE_FUNCTION and INTERLEAVE_FUNCTION[name](config)
        if vision and hasattr(module, "apply_rotary_pos_emb_vision"):  # (seq, heads, head_dim)
            tq, tk = module.apply_rotary_pos_emb_vision(qp[0].transpose(0, 1), kp[0].transpose(0, 1), cos, sin)
            tq, tk = tq.transpose(0, 1)[None], tk.transpose(0, 1)[None]
        else:
            if vision and cos.ndim == 2:
                cos, sin = cos[None], sin[None]
            function = module.apply_rotary_pos_emb_interleave if interleave else module.apply_rotary_pos_emb
            if list(inspect.signature(function).parameters)[:2] == ["x", "cos"]:  # Gemma 3n, Gemma 4: one tensor
                tq, tk = function(qp, cos, sin), function(kp, cos, sin)
            else:
                try:
                    tq, tk = function(qp, kp, cos, sin)
                except RuntimeError:  # partial rotary whose attention slices the rotated features off first (Phi)
                    width = cos.shape[-1]
                    tq, tk = function(qp[..., :width], kp[..., :width], cos, sin)
                    tq, tk = torch.cat([tq, qp[..., width:]], -1), torch.cat([tk, kp[..., width:]], -1)
        if interleave:  # DeepSeek's apply_rotary_pos_emb_interleave returns the pairs de-interleaved (halves order)
            order = torch.from_numpy(posenc.rotary_weight_permutation("interleaved", "halves", tq.shape[-1]))
            tq, tk = torch.empty_like(tq).index_copy_(-1, order, tq), torch.empty_like(tk).index_copy_(-1, order, tk)
    return torch.cat([q[..., : kind.rotary_offset], tq], -1), torch.cat([k[..., : kind.rotary_offset], tk], -1)


def _theirs_default(module, rope, config, kind, q, k, positions):
    coords = coordinates(kind, positions)
    family = type(config).__module__.split(".")[2]
    if kind.n_axes == 1:
        position_ids = torch.tensor([positions])
    elif "Vision" in type(config).__name__ or kind.axes == ("height", "width"):
        position_ids = torch.tensor(coords, dtype=torch.long)  # (seq, n_axes)
    else:  # M-RoPE and NeoMME's rows and columns: (n_axes, batch, seq)
        position_ids = torch.tensor(coords.T[:, None, :], dtype=torch.long)
    arguments = [torch.zeros(1), position_ids]
    if "layer_type" in inspect.signature(rope.forward).parameters:
        arguments.append(ROPE_LABEL.get(family, lambda layer_type: layer_type)(kind.layer_type))
    return coords, *_apply(module, config, kind, rope(*arguments), q, k)


def _theirs_llama4(module, rope, config, kind, q, k, positions):
    if kind.n_axes == 1:
        return _theirs_default(module, rope, config, kind, q, k, positions)
    # The vision tower's table holds every patch of the image (x = column + 1, y = row + 1) and the class token.
    side = config.image_size // config.patch_size
    rows = torch.tensor([0, 1, side - 1, side, side * side - 1])
    coords = torch.stack([rows % side + 1, rows // side + 1], dim=-1).double().numpy()
    tq, tk = module.vision_apply_rotary_emb(q.transpose(1, 2), k.transpose(1, 2), rope(torch.zeros(1))[rows])
    return coords, tq.transpose(1, 2), tk.transpose(1, 2)


def _theirs_eomt(module, rope, config, kind, q, k, positions):
    # The rotary computes the patch centres of the image itself (in [-1, 1]): a 3 x 4 grid of patches.
    cos, sin = rope(torch.zeros(1, 3, 3 * config.patch_size, 4 * config.patch_size))
    coords = module.get_patches_center_coordinates(3, 4, dtype=torch.float64, device="cpu").numpy()
    generator = torch.Generator().manual_seed(1)
    q, k = (torch.rand(1, 2, 12, kind.head_dim, generator=generator) * 2 - 1 for _ in range(2))
    return coords, *module.apply_rotary_pos_emb(q, k, cos, sin), q, k


def _theirs_sam(module, rope, config, kind, q, k, positions):
    coords = coordinates(kind, positions)
    cos, sin = rope(torch.zeros(1), torch.tensor(coords, dtype=torch.long))
    function = getattr(module, "apply_rotary_pos_emb_2d", None) or module.apply_rotary_pos_emb_2d_self_attn
    return coords, *function(q, k, cos=cos, sin=sin)


def _theirs_gemma4(module, rope, config, kind, q, k, positions):
    if kind.n_axes == 1:
        return _theirs_default(module, rope, config, kind, q, k, positions)
    coords = coordinates(kind, positions)
    position_ids = torch.tensor(coords, dtype=torch.long)[None]
    cos, sin = rope(torch.zeros(1), position_ids)
    rotated = (module.apply_multidimensional_rope(x.transpose(1, 2), cos, sin, position_ids) for x in (q, k))
    return coords, *(x.transpose(1, 2) for x in rotated)


THEIRS = {
    "llama4": _theirs_llama4,
    "eomt_dinov3": _theirs_eomt,
    "sam2_video": _theirs_sam,
    "edgetam_video": _theirs_sam,
    "sam3_tracker_video": _theirs_sam,
    "sam3": _theirs_sam,
    "gemma4": _theirs_gemma4,
}
"""Families whose rotary is called otherwise (a fixed table, the image itself, 5-D or 2-D tensors)."""


# --- posenc's side ----------------------------------------------------------------------------------------------


def ours(kind: posenc.LayerRotary, x: torch.Tensor, coords: np.ndarray) -> torch.Tensor:
    """``x`` rotated by :func:`posenc.nn.rotary_embedding` of ``kind``, in the model's feature order."""
    order = torch.arange(kind.head_dim)
    rotated = slice(kind.rotary_offset, kind.rotary_offset + kind.rotary_dim)
    if kind.feature_order:  # posenc's layout reads the model's features in this order (NanoChat, Gemma 4 vision)
        order[rotated] = kind.rotary_offset + torch.tensor(kind.feature_order)
    module = rotary_embedding(dataclasses.replace(kind, feature_order=()))
    permuted = x[..., order]
    tail = permuted[..., kind.rotary_offset :]
    y = module(tail, positions=torch.tensor(coords)) if kind.n_axes == 1 else module(tail, torch.tensor(coords))
    y = torch.cat([permuted[..., : kind.rotary_offset], y], -1)
    return torch.empty_like(y).index_copy_(-1, order, y)


def tolerance(kind: posenc.LayerRotary, coords: np.ndarray) -> torch.Tensor:
    """The per-feature tolerance of the module docstring, ``(seq, head_dim)``."""
    angles = np.abs(coords.reshape(len(coords), -1)) @ np.abs(kind.frequencies())
    per_pair = angles * (math.log(kind.base) + 12) * EPS32 + 8 * EPS32
    bound = np.zeros((len(coords), kind.head_dim))
    pairs = np.arange(kind.rotary_dim // 2)
    first, second = (2 * pairs, 2 * pairs + 1) if kind.layout == "interleaved" else (pairs, pairs + len(pairs))
    order = np.arange(kind.rotary_dim) if not kind.feature_order else np.array(kind.feature_order)
    for members in (first, second):
        bound[:, kind.rotary_offset + order[members]] = per_pair
    return torch.from_numpy(2 * max(1.0, kind.attention_factor) * bound + 4 * EPS32).float()


def compare(config: Any) -> list[str]:
    """Rotate with posenc and with transformers, layer kind by layer kind; the rotating kinds compared.

    Raises AssertionError on a difference beyond :func:`tolerance`, naming the config, layer type, tensor and row.
    """
    name = type(config).__name__
    if FAMILIES[model_type_of(config)].rope_form == "fixed":
        return compare_by_oracle(config)
    module, rotary = rotary_class(config)
    rope = rotary(config).eval()
    plan = posenc.RotaryPlan.from_config(config, model_type=model_type_of(config))
    family = type(config).__module__.split(".")[2]
    length = plan.max_position_embeddings or 4096
    positions = [0, 1, length - 1, length, 4 * length]
    compared = []
    for kind in plan.kinds:
        if not kind.rotates:
            continue
        generator = torch.Generator().manual_seed(0)
        q, k = (torch.rand(1, 2, len(positions), kind.head_dim, generator=generator) * 2 - 1 for _ in range(2))
        coords, theirs_q, theirs_k, *given = THEIRS.get(family, _theirs_default)(
            module, rope, config, kind, q, k, positions
        )
        if given:
            q, k = given
        bound = tolerance(kind, coords)
        for label, x, theirs in (("q", q, theirs_q), ("k", k, theirs_k)):
            difference = (ours(kind, x, coords) - theirs).abs()[0]
            if (difference > bound).any():
                head, row, feature = torch.nonzero(difference > bound)[0].tolist()
                raise AssertionError(
                    f"{name} {kind.layer_type}: {label} differs by {float(difference[head, row, feature]):.3g} at row "
                    f"{row}, feature {feature} (tolerance {float(bound[row, feature]):.3g})"
                )
        compared.append(kind.layer_type)
    return compared


def compare_by_oracle(config: Any) -> list[str]:
    """A family without a rotary class (GPT-J, CodeGen: a sinusoid table in the attention): its tiny model, built from
    the class's config.json, held against posenc's plan by tests/rope_oracle.py (positions 0, 1, L - 1; the table ends
    at L)."""
    values = config.to_dict()
    built, differences = rope_oracle.check(values, max_layers=2)
    assert differences == [], f"{type(config).__name__}: {differences}"
    return ["full_attention"]


@pytest.fixture(scope="module")
def zoo():
    return rotary_configs()


def with_overrides(config: Any) -> Any:
    overrides, _ = OVERRIDES[type(config).__name__]
    return type(config)(**overrides)


def test_every_rotary_configuration_rotates_as_transformers(zoo, subtests):
    """Layer kind by layer kind, at positions 0, 1, L - 1, L and 4L: posenc's rotation is transformers'."""
    compared = 0
    for family, config in zoo:
        name = type(config).__name__
        if name in NOT_ROTARY or family in LEFT_OUT or (name in REFUSED_BY_BOTH and name not in OVERRIDES):
            continue
        with subtests.test(config=name):
            compared += len(compare(with_overrides(config) if name in OVERRIDES else config))
    assert compared >= 250  # layer kinds compared (a config with sliding and full layers counts two)


def test_the_census_covers_every_family_and_leaves_out_at_most_five_percent(zoo):
    """Every configuration class is compared, refused by both, or listed with its reason; the lists are not stale."""
    families = {family for family, _ in zoo}
    names = {type(config).__name__ for _, config in zoo}
    rotating_families = {family for family, config in zoo if type(config).__name__ not in NOT_ROTARY}
    assert set(NOT_ROTARY) <= names and set(REFUSED_BY_BOTH) <= names and set(OVERRIDES) <= names
    assert set(LEFT_OUT) <= families
    assert len(rotating_families) == 193 and len(names) == 238
    assert len(LEFT_OUT) <= 0.05 * len(rotating_families)
    known = {model_type_of(config) for _, config in zoo if type(config).__name__ not in NOT_ROTARY}
    known |= set(UNROTATED_AT_DEFAULTS)
    assert set(FAMILIES) <= known, f"table entries no config has: {sorted(set(FAMILIES) - known)}"


def test_posenc_refuses_what_it_leaves_out_and_what_transformers_cannot_run(zoo, subtests):
    """The left-out families get a ValueError; so do the defaults transformers' rotary cannot run, and it fails too."""
    for family, config in zoo:
        name = type(config).__name__
        if family not in LEFT_OUT and name not in REFUSED_BY_BOTH:
            continue
        with subtests.test(config=name):
            with pytest.raises(ValueError):
                posenc.RotaryPlan.from_config(config, model_type=model_type_of(config))
            if name in REFUSED_BY_BOTH:
                module, rotary = rotary_class(config)
                with pytest.raises((RuntimeError, TypeError)):
                    rope = rotary(config)
                    cos, sin = rope(torch.zeros(1), torch.arange(4)[None])
                    q = torch.zeros(1, 1, 4, config.hidden_size // config.num_attention_heads)
                    module.apply_rotary_pos_emb(q, q, cos, sin)


def test_odd_rotary_widths_are_refused(zoo):
    """GLM-4.5's default head of 42 features rotates 21: transformers rounds up to 11 pairs; posenc refuses."""
    config = next(config for _, config in zoo if type(config).__name__ == "Glm4MoeConfig")
    with pytest.raises(ValueError, match="partial_rotary_factor"):
        posenc.RotaryPlan.from_config(config)


def test_the_census_sees_a_wrong_family_entry(zoo, monkeypatch):
    """Four deliberate errors in posenc's family table, each caught far beyond the tolerance: Cohere's interleaved
    pairs read as halves, NanoChat's reversed rotation left out, Qwen3-VL's interleaved M-RoPE read as chunked, and
    Llama 4's complex (interleaved) pairs read as halves."""
    by_name = {type(config).__name__: config for _, config in zoo}
    bugs = {
        "CohereConfig": ("cohere", dict(layout="halves")),
        "NanoChatConfig": ("nanochat", dict(feature_order="natural")),
        "Qwen3VLTextConfig": ("qwen3_vl_text", dict(multiaxis="mrope_chunked")),
        "Llama4TextConfig": ("llama4_text", dict(layout="halves")),
    }
    for name, (model_type, change) in bugs.items():
        compare(by_name[name])  # right as it stands
        with monkeypatch.context() as patch:
            patch.setitem(FAMILIES, model_type, dataclasses.replace(FAMILIES[model_type], **change))
            try:
                compare(by_name[name])
            except (AssertionError, ValueError) as error:
                message = str(error)
            else:
                message = ""
        assert message, f"{name}: the census did not see {change}"


# --- What the attention classes do with it: NoPE layers and the latent attention's rotated features ------------

ATTENTION = {
    "AfmoeConfig": "AfmoeAttention",  # (found by tests/config_sweep.py: only its sliding layers rotate)
    "Cohere2Config": "Cohere2Attention",
    "FlintConfig": "FlintAttention",  # (found by tests/config_sweep.py: only its sliding layers rotate)
    "Cohere2MoeConfig": "Cohere2MoeAttention",
    "Exaone4Config": "Exaone4Attention",
    "ExaoneMoeConfig": "ExaoneMoeAttention",
    "Kolibri1Config": "Kolibri1Attention",
    "Llama4TextConfig": "Llama4TextAttention",
    "SmolLM3Config": "SmolLM3Attention",
    "MistralLarge4TextConfig": "MistralLarge4TextAttention",
    "DeepseekV2Config": "DeepseekV2Attention",
    "DeepseekV3Config": "DeepseekV3Attention",
    "DeepseekV32Config": "DeepseekV32Attention",
    "AXK1Config": "AXK1Attention",
    "AXK2Config": "AXK2Attention",
    "Glm4MoeLiteConfig": "Glm4MoeLiteAttention",
    "GlmMoeDsaConfig": "GlmMoeDsaAttention",
    "HYV4Config": "HYV4Attention",
    "MiniCPM3Config": "MiniCPM3Attention",
    "Mistral4Config": "Mistral4Attention",
    "YoutuConfig": "YoutuAttention",
}
"""Families whose attention class decides what a config does not say: which layers skip the rotation, and (multi-head
latent attention) which features of the query head it hands to the rotation."""


Call = tuple[str, int, int]
"""A rotation the attention called: (function, first feature of the query slice, its width)."""

ROTATION_FUNCTIONS = ("apply_rotary_pos_emb", "apply_rotary_emb", "apply_rotary_pos_emb_interleave")


def probe_attention(config: Any, attention: type, layers: list[int]) -> list[Call | None]:
    """Per layer: the first rotation the attention calls on its queries, or None if it calls none.

    Each layer's attention is built and run on the meta device (shapes only) with the module's rotation functions
    replaced by a recorder. The first feature is the query slice's offset within its head: 0 for a whole head or its
    first features, ``qk_nope_head_dim`` for the split ``(..., qk_nope | qk_rope)`` of latent attention.
    """
    family = type(config).__module__.split(".")[2]
    module = importlib.import_module(attention.__module__)
    calls: list[Call] = []

    def recorder(name: str) -> Callable[..., Any]:
        def record(q, k, *args, **kwargs):
            offset = q.storage_offset() % q.stride(-2) if q.ndim > 1 else 0
            calls.append((name, offset, q.shape[-1]))
            return q, k

        return record

    names = [name for name in ROTATION_FUNCTIONS if hasattr(module, name)]
    saved = {name: getattr(module, name) for name in names}
    config._attn_implementation = "eager"
    result: list[Call | None] = []
    try:
        for name in names:
            setattr(module, name, recorder(name))
        for index in layers:
            calls.clear()
            with torch.device("meta"):
                layer = attention(config, index)
                hidden = torch.empty(1, 3, config.hidden_size)
                width = getattr(config, "qk_rope_head_dim", None) or getattr(layer, "head_dim", None) or 8
                if family in ("llama4", "deepseek_v2"):  # freqs_cis, complex
                    position_embeddings: Any = torch.empty(1, 3, width // 2, dtype=torch.complex64)
                else:
                    position_embeddings = (torch.empty(1, 3, width), torch.empty(1, 3, width))
                extra: dict[str, Any] = {}
                if family == "mistral_large4":  # the layers share their latent keys through this dict
                    extra["shared_kv_states"] = module.KVSharingDict()
                if family == "hy_v4":  # a shared DSA layer reuses the previous indexer layer's top-k tokens
                    extra["prev_topk_indices"] = torch.zeros(1, 3, 3, dtype=torch.long)
                layer(
                    hidden_states=hidden,
                    position_embeddings=position_embeddings,
                    attention_mask=torch.zeros(1, 1, 3, 3),
                    position_ids=torch.zeros(1, 3, dtype=torch.long),
                    **extra,
                )
            result.append(calls[0] if calls else None)
    finally:
        for name, function in saved.items():
            setattr(module, name, function)
    return result


def expected_call(config: Any, layer: posenc.LayerRotary) -> tuple[bool, int, set[int]]:
    """What the census takes the attention of ``layer`` to call (the interleaved function?) and what the plan says
    it rotates: (interleaved?, first feature, possible widths: the rest of the head or the rotated features)."""
    name = type(config).__name__
    interleave = name in INTERLEAVE_FUNCTION and INTERLEAVE_FUNCTION[name](config)
    return interleave, layer.rotary_offset, {layer.head_dim - layer.rotary_offset, layer.rotary_dim}


def text_attention(config: Any) -> type | None:
    """The attention class of a one-axis config: the module's ``*Attention`` class built from ``(config, layer_idx)``
    and annotated with ``config``'s class, else the only one whose name says no other part (Vision, Audio, DiT ...)."""
    family = type(config).__module__.split(".")[2]
    module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    found = [
        cls
        for name, cls in vars(module).items()
        if inspect.isclass(cls)
        and cls.__module__ == module.__name__
        and name.endswith("Attention")
        and len(inspect.signature(cls.__init__).parameters) >= 3
    ]

    def annotated(cls: type) -> str:
        annotation = list(inspect.signature(cls.__init__).parameters.values())[1].annotation
        return str(getattr(annotation, "__name__", annotation))

    exact = [cls for cls in found if annotated(cls) == type(config).__name__]
    if len(exact) == 1:
        return exact[0]
    other = ("Vision", "Audio", "Cross", "Perceiver", "DiT", "Delta", "Linear", "Indexer", "Talker", "Code", "Encoder")
    found = [cls for cls in found if not any(word in cls.__name__ for word in other)]
    return found[0] if len(found) == 1 else None


NOT_PROBED = {
    "GPTJConfig", "CodeGenConfig",  # (their attention takes layer_past and a sinusoid table: the oracle runs them)
    "DeepseekOcr2VisionEncoderConfig", "DiaDecoderConfig", "Dots3NoteAudioConfig", "Qwen2_5OmniDiTConfig",
    "DbrxConfig", "DeepseekV4Config", "DiffusionGemmaTextConfig", "FalconConfig", "FlintConfig", "Gemma3nTextConfig",
    "Gemma4TextConfig", "Gemma4UnifiedTextConfig", "HunYuanDenseV1Config", "HunYuanMoEV1Config", "IdeficsConfig",
    "JetMoeConfig", "LagunaConfig", "LongcatFlashConfig", "MinistralConfig", "MoonshineConfig",
    "MoonshineStreamingConfig", "MuseGlimmerAssistantConfig", "NemotronConfig", "UnlimitedOcrTextConfig",
    "Zamba2Config", "ZayaConfig",
}  # fmt: skip
"""One-axis configs whose attention does not run from (hidden_states, position_embeddings, attention_mask,
position_ids) alone, or is not one ``*Attention`` class of its module (an extra argument, a sub-config, a
per-layer head size): the rotation parity above still covers them."""


def test_each_attention_rotates_the_slice_and_calls_the_function_the_plan_names(zoo, subtests):
    """For every one-axis config but :data:`NOT_PROBED`: the attention of its first rotating layer hands the rotation
    the query features the plan names (the whole head, its first ``rotary_dim`` features, or latent attention's last
    ``qk_rope_head_dim``), through the interleaved function exactly when the census calls that one."""
    probed = set()
    for family, config in zoo:
        name = type(config).__name__
        if name in NOT_ROTARY or family in LEFT_OUT or name in REFUSED_BY_BOTH or name in NOT_PROBED:
            continue
        config = with_overrides(config) if name in OVERRIDES else config
        plan = posenc.RotaryPlan.from_config(config, model_type=model_type_of(config))
        index = next((i for i, layer in enumerate(plan.layers) if layer.rotates), None)
        attention = text_attention(config)
        if index is None or plan.layers[index].n_axes != 1 or attention is None:
            continue
        with subtests.test(config=name):
            (call,) = probe_attention(config, attention, [index])
            assert call is not None, "the attention called no rotation"
            function, offset, width = call
            interleave, expected_offset, widths = expected_call(config, plan.layers[index])
            assert (function == "apply_rotary_pos_emb_interleave", offset) == (interleave, expected_offset)
            assert width in widths
        probed.add(name)
    assert len(probed) >= 133


VARIANTS = {"Cohere2MoeConfig": dict(first_k_dense_replace=2), "DeepseekV3Config": dict(rope_interleave=False)}
"""Configs probed again with a value that changes the rule: Cohere 2 MoE's dense prefix layers are full attention
and rotate (its attention's ``force_rope``); DeepSeek-V3 without ``rope_interleave`` calls ``apply_rotary_pos_emb``."""

PROBED_LAYERS = 10
"""The first layers probed (and the last two): more than a period of every family's pattern (at most 5 here)."""


def test_nope_layers_and_latent_rotated_features_are_those_of_the_attention_code(zoo, subtests):
    """Layer by layer, the attention of each listed family rotates exactly where posenc's plan says it does, hands
    the rotation the features the plan names, and calls the interleaved function exactly when the census does."""
    by_name = {type(config).__name__: config for _, config in zoo}
    cases = [(name, by_name[name]) for name in ATTENTION]
    cases += [(f"{name}({overrides})", type(by_name[name])(**overrides)) for name, overrides in VARIANTS.items()]
    for label, config in cases:
        with subtests.test(config=label):
            plan = posenc.RotaryPlan.from_config(config)
            family = type(config).__module__.split(".")[2]
            module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
            layers = [*range(min(PROBED_LAYERS, len(plan.layers))), len(plan.layers) - 2, len(plan.layers) - 1]
            theirs = probe_attention(config, getattr(module, ATTENTION[type(config).__name__]), layers)
            for index, call in zip(layers, theirs):
                layer = plan.layers[index]
                assert (call is not None) == layer.rotates, f"layer {index}"
                if call is not None:
                    interleave, offset, widths = expected_call(config, layer)
                    assert (call[0] == "apply_rotary_pos_emb_interleave", call[1]) == (interleave, offset), index
                    assert call[2] in widths, f"layer {index}"


def test_every_default_config_reads_the_same_from_its_config_json(zoo, subtests):
    """The dict that ``save_pretrained`` writes (``config.to_dict()``) gives the plan the object gives: posenc reads a
    config.json as transformers reads its object (per-layer overrides, nested rope dicts, legacy keys included)."""
    for family, config in zoo:
        name = type(config).__name__
        if name in NOT_ROTARY or family in LEFT_OUT or name in REFUSED_BY_BOTH:
            continue
        config = with_overrides(config) if name in OVERRIDES else config
        with subtests.test(config=name):
            model_type = model_type_of(config)
            from_object = posenc.RotaryPlan.from_config(config, model_type=model_type)
            from_dict = posenc.RotaryPlan.from_config(config.to_dict(), model_type=model_type)
            assert from_dict.layers == from_object.layers


def test_the_attribute_maps_posenc_reads_dicts_with_are_the_config_classes(zoo):
    """A config.json names some attributes as its class's ``attribute_map`` does (``num_heads`` for
    ``num_attention_heads``, ...): posenc's copy of the maps, for the names it reads, is the classes' own."""
    read = {"num_attention_heads", "hidden_size", "head_dim", "num_hidden_layers", "max_position_embeddings"}
    read |= {"layer_types", "sliding_window"}
    for _, config in zoo:
        model_type = model_type_of(config)
        if model_type in FAMILIES:
            theirs = {key: value for key, value in (type(config).attribute_map or {}).items() if key in read}
            assert dict(FAMILIES[model_type].attribute_map) == theirs, model_type


# --- Defaults: what a configuration class fills in for a key a config.json leaves out --------------------------


class Recording(dict):
    """A config.json dict that records the keys posenc looks up in it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read: set[str] = set()

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)


ABSENT: Any = object()
"""In :data:`REMOVAL_VARIANTS`, a key taken out of the config.json."""

REMOVAL_VARIANTS: list[tuple[str, dict[str, Any], tuple[tuple[str, ...], ...]]] = [
    # (class, changes to its config.json, keys then removed together): inputs of the derivations other than the
    # defaults themselves, so that a rule is checked, not only its value at the class's defaults
    ("LlamaConfig", dict(hidden_size=2048, num_attention_heads=8), (("head_dim",),)),
    ("Gemma3TextConfig", dict(sliding_window_pattern=3, num_hidden_layers=8), (("layer_types",),)),
    (  # the v4 form of gemma-3-4b-it's text_config: a flat rope_scaling, the two bases as separate keys
        "Gemma3TextConfig",
        dict(rope_parameters=ABSENT, rope_scaling={"rope_type": "linear", "factor": 8.0}, rope_local_base_freq=2e4),
        ((), ("rope_local_base_freq",), ("rope_scaling",)),
    ),
    ("Cohere2Config", dict(sliding_window_pattern=3), (("layer_types",),)),
    ("Cohere2MoeConfig", dict(first_k_dense_replace=4, prefix_dense_sliding_window_pattern=2), (("layer_types",),)),
    ("Qwen2Config", dict(use_sliding_window=True, max_window_layers=20), (("layer_types",),)),
    ("Qwen2Config", dict(use_sliding_window=True), (("layer_types", "max_window_layers"),)),
    ("Qwen2MoeConfig", dict(use_sliding_window=True, max_window_layers=10), (("layer_types",),)),
    ("SmolLM3Config", dict(use_sliding_window=True, sliding_window=1024), (("layer_types",),)),
    ("ModernBertConfig", dict(global_attn_every_n_layers=2), (("layer_types",),)),
    (
        "ModernBertConfig",
        dict(rope_parameters=ABSENT, global_rope_theta=8e4, local_rope_theta=5e3),
        ((), ("global_rope_theta",), ("local_rope_theta",)),
    ),
    ("Qwen3NextConfig", dict(full_attention_interval=3), (("layer_types",),)),
    ("Exaone4Config", dict(sliding_window_pattern=3), (("layer_types",),)),
    ("AfmoeConfig", dict(global_attn_every_n_layers=2), (("layer_types",),)),
    ("Llama4TextConfig", dict(no_rope_layer_interval=3), (("no_rope_layers", "layer_types"),)),
    ("MistralLarge4TextConfig", dict(no_rope_layer_interval=3), (("no_rope_layers",),)),
    ("Lfm2Config", dict(full_attn_idxs=[0, 3]), (("layer_types",),)),
    ("OlmoHybridConfig", dict(num_hidden_layers=3), (("layer_types",),)),
    ("MuseGlimmerTextConfig", dict(num_hidden_layers=10), (("layer_types", "layer_rope_theta"),)),
    ("Gemma4TextConfig", dict(global_head_dim=256), (("per_layer_config",),)),
    ("Mistral4Config", dict(qk_rope_head_dim=32), (("rope_parameters", "head_dim"),)),
    ("GPTNeoXConfig", dict(rope_parameters=ABSENT, rotary_pct=0.5, rotary_emb_base=2e4), ((), ("rotary_pct",))),
    ("Olmo3Config", dict(rope_parameters=ABSENT, rope_theta=123456.0), ((),)),  # the sliding layers keep 500000
    ("GptOssConfig", dict(rope_parameters=ABSENT, rope_theta=5e5), ((),)),  # the default YaRN dict takes it
    ("ApertusConfig", dict(rope_parameters=ABSENT, rope_theta=5e5), ((),)),  # the default llama3 dict keeps its own
    ("GlmConfig", dict(rope_parameters=ABSENT, rope_theta=2e4), ((),)),
    ("NeoMMEConfig", dict(rope_parameters=ABSENT, rope_theta=2e4), ((),)),
    (  # Bamba's __post_init__ sets partial_rotary_factor to 0.5 whatever the top-level key says
        "BambaConfig", dict(rope_parameters=ABSENT, partial_rotary_factor=0.25, attn_layer_indices=[1]), ((),),
    ),
]  # fmt: skip

NOT_CARRIED = {
    ("DeepseekV4Config", "layer_types"): "layer_types",
    ("DeepseekV4Config", "rope_parameters"): "rope_parameters",
    ("DeepseekV4Config", "all"): "layer_types",
    ("DeepseekV4Config", "all the table's keys"): "layer_types",
    ("Dots3NoteTextConfig", "layer_types"): "layer_types",
    ("Dots3NoteTextConfig", "rope_parameters"): "rope_parameters",
    ("Dots3NoteTextConfig", "per_layer_config"): "per_layer_config",
    ("Dots3NoteTextConfig", "all"): "layer_types",
    ("Dots3NoteTextConfig", "all the table's keys"): "layer_types",
}
"""(class, key removed) for which the class derives a value by a rule posenc does not carry (DeepSeek-V4's compressed
attention layers and its two rope dicts; dots.note's sliding layers' sizes): posenc refuses, naming the key."""


def plan_or_refusal(values: dict[str, Any], model_type: str, config_class: type | None = None) -> Any:
    """The plan's layers and context that posenc reads from ``values`` (or from ``config_class.from_dict(values)``,
    the object transformers builds from that config.json), or the error that refused it."""
    try:
        config = copy.deepcopy(values) if config_class is None else config_class.from_dict(copy.deepcopy(values))
        plan = posenc.RotaryPlan.from_config(config, model_type=model_type)
    except (ValueError, TypeError, KeyError, AttributeError, ZeroDivisionError) as error:
        return error
    return plan.layers, plan.max_position_embeddings


def removal_cases(config: Any) -> list[tuple[str, dict[str, Any]]]:
    """(label, config.json) for ``config``'s dict with each key posenc reads removed in turn, each rope dict's base
    and partial factor removed in turn (alone, and with the top-level key of that name), all the keys posenc reads
    removed at once (``"all"``), and with them every key the family's table has a default for (a key read only when
    another is absent, such as Llama 4's ``no_rope_layer_interval`` without ``no_rope_layers``), and the class's
    :data:`REMOVAL_VARIANTS`."""
    name = type(config).__name__
    values = config.to_dict()
    recording = Recording(values)
    posenc.RotaryPlan.from_config(recording, model_type=model_type_of(config))
    read = [key for key in values if key in recording.read and key != "model_type"]
    cases = [(key, {k: v for k, v in values.items() if k != key}) for key in read]
    rope = values.get("rope_parameters") or {}
    nested = [label for label, layer_dict in rope.items() if isinstance(layer_dict, dict)]
    for label in (nested or [None]) if "rope_parameters" in values else []:  # (GPT-J: no rope dict)
        for key in ("rope_theta", "partial_rotary_factor"):
            changed = copy.deepcopy(values)
            layer_dict = changed["rope_parameters"] if label is None else changed["rope_parameters"][label]
            if key in layer_dict:
                del layer_dict[key]
                where = f"rope_parameters{'' if label is None else [label]}[{key!r}]"
                cases.append((where, changed))
                if key in changed:  # and the top-level key the dict would take it from: the class's default
                    cases.append((f"{where} and {key!r}", {k: v for k, v in changed.items() if k != key}))
    cases.append(("all", {k: v for k, v in values.items() if k not in read}))
    table = set(FAMILIES[model_type_of(config)].defaults.values) | set(read)
    if set(values) & table - set(read):  # keys posenc does not read while others are there (no_rope_layer_interval)
        cases.append(("all the table's keys", {k: v for k, v in values.items() if k not in table}))
    for variant, changes, removals in REMOVAL_VARIANTS:
        if variant == name:
            changed = {k: v for k, v in {**values, **changes}.items() if v is not ABSENT}
            for removed in removals:
                cases.append(
                    (f"{changes} without {list(removed)}", {k: v for k, v in changed.items() if k not in removed})
                )
    return cases


def check_defaults(config: Any) -> int:
    """Every case of :func:`removal_cases` reads with posenc as transformers builds it: the same plan, or a refusal
    by both (posenc's a ValueError), or a refusal of :data:`NOT_CARRIED` naming the key. The plan of a dict
    records, in ``defaults_used``, only keys the dict lacks; with all keys removed, the dict with those values put
    back reads the same, with nothing left to default. Returns the number of cases."""
    name, model_type = type(config).__name__, model_type_of(config)
    cases = removal_cases(config)
    for label, values in cases:
        theirs = plan_or_refusal(values, model_type, type(config))
        ours = plan_or_refusal(values, model_type)
        where = f"{name} {label}"
        if (name, label) in NOT_CARRIED:
            assert isinstance(ours, ValueError) and NOT_CARRIED[name, label] in str(ours), f"{where}: {ours!r}"
            assert not isinstance(theirs, Exception), f"{where}: transformers refuses too: {theirs!r}"
        elif isinstance(theirs, Exception):
            assert isinstance(ours, ValueError), f"{where}: transformers refuses ({theirs!r}), posenc does not"
        else:
            assert not isinstance(ours, Exception), f"{where}: posenc refuses: {ours!r}"
            assert ours == theirs, f"{where}: posenc's plan differs from the class's"
            plan = posenc.RotaryPlan.from_config(copy.deepcopy(values), model_type=model_type)
            claimed = [key for key in plan.defaults_used if "[" not in key and key != "mrope_section"]
            assert not set(claimed) & set(values), f"{where}: defaults_used names keys the dict has"
            if label == "all":
                filled = {**values, **{key: plan.defaults_used[key] for key in claimed}}
                again = posenc.RotaryPlan.from_config(copy.deepcopy(filled), model_type=model_type)
                assert (again.layers, again.max_position_embeddings) == ours, f"{where}: defaults put back"
                assert not [key for key in again.defaults_used if "[" not in key and key != "mrope_section"], where
    return len(cases)


def test_a_config_json_without_a_key_reads_as_its_class_fills_it_in(zoo, subtests):
    """For every census class: its config.json with each key posenc reads removed in turn (and each rope dict's base
    and partial factor, and all of them at once, and the :data:`REMOVAL_VARIANTS`) gives the plan of the class built
    from the same dict (``from_dict``): posenc fills each gap with the default the class applies."""
    checked = 0
    for family, config in zoo:
        name = type(config).__name__
        if name in NOT_ROTARY or family in LEFT_OUT or (name in REFUSED_BY_BOTH and name not in OVERRIDES):
            continue
        with subtests.test(config=name):
            checked += check_defaults(with_overrides(config) if name in OVERRIDES else config)
    assert checked >= 1680  # cases (about 7 per class)


def captured_defaults(cls: type, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], Any]:
    """The rope dict and ``partial_rotary_factor`` the class hands ``convert_rope_params_to_dict`` when built without
    arguments: what its ``__post_init__`` supplies before the conversion fills in ``rope_theta``."""
    seen: list[tuple[Any, Any]] = []
    convert = cls.convert_rope_params_to_dict

    def record(self: Any, **kwargs: Any) -> Any:
        partial = kwargs.get("partial_rotary_factor", getattr(self, "partial_rotary_factor", None))
        seen.append((copy.deepcopy(self.rope_parameters) or {}, partial))
        return convert(self, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(cls, "convert_rope_params_to_dict", record)
        cls()
    return seen[0] if seen else ({}, None)


KEYWORD_DEFAULTS = {
    "sliding_window_pattern", "full_attention_interval", "global_attn_every_n_layers", "no_rope_layer_interval",
    "first_k_dense_replace", "global_head_dim",
}  # fmt: skip
"""Defaults a class's ``__post_init__`` takes from its keyword arguments (``kwargs.get(key, default)``), not from a
field: checked in its source text, and by :func:`test_a_config_json_without_a_key_reads_as_its_class_fills_it_in`."""

COMPUTED_IN_ROPE = {
    "Mistral4Config": {"max_position_embeddings", "partial_rotary_factor"},
    "Ministral3Config": {"max_position_embeddings"},
}
"""Keys of a class's default rope dict that its ``__post_init__`` computes from other keys: ``max_position_embeddings``
(which posenc's rope dict leaves out, as it leaves out the top-level one in a dict) and Mistral 4's
``partial_rotary_factor``, ``qk_rope_head_dim / head_dim``, which posenc computes the same way."""


def keyword_default(cls: type, key: str) -> float:
    """The default of ``key`` in ``kwargs.get(key, default)`` or ``kwargs.pop(key, default)`` in the class's source."""
    pattern = rf"kwargs\.(?:get|pop)\(\s*\"{key}\",\s*([0-9_.]+)\s*\)"
    found = {float(match) for match in re.findall(pattern, inspect.getsource(cls))}
    assert len(found) == 1, f"{cls.__name__}: kwargs defaults of {key} in its source: {found}"
    return found.pop()


def check_table_defaults(config: Any, monkeypatch: pytest.MonkeyPatch) -> int:
    """Every value of the family's :attr:`posenc._families.Family.defaults` is ``config``'s class's own: a field's
    default, its ``default_theta`` (or ``rope_theta`` field), the rope dict and ``partial_rotary_factor`` its
    ``__post_init__`` hands the conversion, a keyword default in its source; each per-layer-type base is the base
    the class builds without arguments. Returns the number of values checked."""
    cls, family = type(config), FAMILIES[model_type_of(config)]
    fields = {field.name: field for field in dataclasses.fields(cls)}
    mapped = {target: name for name, target in (cls.attribute_map or {}).items() if name in fields}
    rope, partial = captured_defaults(cls, monkeypatch)
    for key, value in family.defaults.values.items():
        if key == "rope_theta":
            theirs = fields["rope_theta"].default if "rope_theta" in fields else cls.default_theta
        elif key == "rope_parameters":
            theirs = {k: v for k, v in rope.items() if k not in COMPUTED_IN_ROPE.get(cls.__name__, ())}
        elif key == "partial_rotary_factor":
            legacy = [name for name, canonical in family.aliases if canonical == key]  # GPT-NeoX's rotary_pct
            theirs = partial if partial is not None else keyword_default(cls, legacy[0])
        elif key in fields or key in mapped:
            field = fields[key] if key in fields else fields[mapped[key]]
            theirs = field.default if field.default is not dataclasses.MISSING else field.default_factory()
        else:
            assert key in KEYWORD_DEFAULTS, f"{cls.__name__}: {key} is neither a field nor a keyword default"
            theirs = keyword_default(cls, key)
        assert value == theirs, f"{cls.__name__}: {key} = {theirs!r}, table {value!r}"
    for base in family.layer_bases:
        built = cls().rope_parameters[base.layer_type]
        assert built["rope_theta"] == base.default, f"{cls.__name__}: {base}"
        if base.partial is not None:
            assert built["partial_rotary_factor"] == base.partial, f"{cls.__name__}: {base}"
    return len(family.defaults.values) + len(family.layer_bases)


def test_the_tables_defaults_are_the_configuration_classes(zoo, monkeypatch):
    """For every census class: the table's defaults are its own (:func:`check_table_defaults`), under its name; the
    legacy layer-type names are transformers'."""
    from transformers.configuration_utils import _LEGACY_LAYER_TYPE_REMAP

    classes: dict[str, set[str]] = {}
    for _, config in zoo:
        classes.setdefault(model_type_of(config), set()).add(type(config).__name__)
    checked = 0
    for _, config in zoo:
        if model_type_of(config) in FAMILIES:
            assert FAMILIES[model_type_of(config)].defaults.config_class in classes[model_type_of(config)]
            checked += check_table_defaults(config, monkeypatch)
    assert checked >= 1310  # values checked
    assert LEGACY_LAYER_TYPES == _LEGACY_LAYER_TYPE_REMAP


def test_the_defaults_checks_see_a_wrong_default(zoo, monkeypatch):
    """Six planted errors in the table, each caught by the removal check: Llama's base, Gemma 3's sliding-window
    pattern, its local base, GLM's partial factor (wrong values: the table check sees them too), Gemma 3's head size
    left out (posenc would derive 2304 / 8 = 288) and GPT-OSS's alternation of layer types (a rule, not a value)."""
    by_name = {type(config).__name__: config for _, config in zoo}
    bugs = [
        ("LlamaConfig", "values", dict(rope_theta=500000.0), True),
        ("Gemma3TextConfig", "values", dict(sliding_window_pattern=5), True),
        ("Gemma3TextConfig", "layer_bases", (_GEMMA3[0], dataclasses.replace(_GEMMA3[1], default=1e5)), True),
        ("GlmConfig", "values", dict(partial_rotary_factor=0.25), True),
        ("Gemma3TextConfig", "values", dict(head_dim=None), False),
        ("GptOssConfig", "layer_pattern", dataclasses.replace(FAMILIES["gpt_oss"].layer_pattern, period=3), False),
    ]
    for name, what, change, is_value in bugs:
        config = by_name[name]
        model_type = model_type_of(config)
        check_defaults(config)  # right as it stands
        check_table_defaults(config, monkeypatch)
        family = FAMILIES[model_type]
        if what == "values":
            values = {key: value for key, value in {**family.defaults.values, **change}.items() if value is not None}
            wrong = dataclasses.replace(family, defaults=dataclasses.replace(family.defaults, values=values))
        else:
            wrong = dataclasses.replace(family, **{what: change})
        with monkeypatch.context() as patch:
            patch.setitem(FAMILIES, model_type, wrong)
            with pytest.raises(AssertionError):
                check_defaults(config)
            if is_value:
                with pytest.raises(AssertionError):
                    check_table_defaults(config, monkeypatch)


def test_the_families_whose_default_frequencies_ignore_the_partial_factor_are_those_of_the_code(zoo):
    """posenc's :data:`posenc._families.PARTIAL_IGNORED` is the set of census families whose rotary class's
    ``compute_default_rope_parameters`` never mentions ``partial_rotary_factor`` (nor a legacy width): read from the
    source of each class, so that a family that changes either way shows here."""
    from posenc._families import PARTIAL_IGNORED

    ignoring, reading = set(), set()
    for _, config in zoo:
        name = type(config).__name__
        if name in NOT_ROTARY or model_type_of(config) not in FAMILIES:
            continue
        if FAMILIES[model_type_of(config)].rope_form == "fixed":
            continue  # GPT-J, CodeGen: no rope dict, no factor to ignore
        _, rotary = rotary_class(config)
        default = getattr(rotary, "compute_default_rope_parameters", None)
        if default is None:
            continue  # a multi-axis tower: no default frequencies to ignore a factor in
        source = inspect.getsource(default)
        mentions = re.search(r"partial_rotary_factor|rotary_dim|rotary_pct", source)
        (reading if mentions else ignoring).add(model_type_of(config))
    assert not ignoring & reading
    assert PARTIAL_IGNORED == ignoring
    assert len(ignoring) >= 150 and {"llama", "mistral", "qwen2", "qwen3", "gemma", "mixtral"} <= ignoring


# --- Every family that rotates, with or without rope_parameters ----------------------------------------------------


def test_every_family_whose_code_rotates_is_read_or_listed_with_its_reason():
    """Every model directory whose modeling code calls a rotation function (found from the code by
    :func:`posenc_book.zoo.rotating_directories`, not from posenc's table) is a family posenc reads or has its
    ``model_type`` values in ``posenc._families.ROTATES_UNREAD`` with a reason; every directory posenc reads does
    rotate; and posenc's refusal of a listed family says that it rotates, never that it is not a family that does."""
    from transformers import CONFIG_MAPPING

    from posenc._families import ROTATES_UNREAD
    from posenc_book.zoo import rotating_directories

    rotating = rotating_directories()
    read = {family.directory for family in FAMILIES.values()}
    types_of: dict[str, set[str]] = {}
    for model_type, cls in CONFIG_MAPPING.items():
        types_of.setdefault(cls.__module__.split(".")[2], set()).add(model_type)
    unread = set(rotating) - read
    assert read <= set(rotating), f"families posenc reads whose code calls no rotation: {sorted(read - set(rotating))}"
    assert set(ROTATES_UNREAD) <= {model_type for directory in unread for model_type in types_of.get(directory, ())}
    assert all(types_of.get(directory, set()) & set(ROTATES_UNREAD) for directory in unread), sorted(unread)
    assert len(rotating) == 204 and len(unread) == 12
    for model_type, reason in ROTATES_UNREAD.items():
        with pytest.raises(ValueError, match="rotates its queries and keys, but posenc does not read it") as error:
            posenc.RotaryPlan.from_config({"model_type": model_type, "num_hidden_layers": 1})
        assert reason in str(error.value) and "not a family" not in str(error.value)


def test_a_composite_config_is_refused_with_the_name_of_its_language_model():
    """``posenc._families.COMPOSITES`` maps every composite ``model_type`` of transformers whose default language
    model posenc reads to that model's ``model_type``, as each class builds it; the refusal names it."""
    import warnings

    from huggingface_hub.errors import StrictDataclassClassValidationError
    from transformers import CONFIG_MAPPING

    from posenc._families import COMPOSITES

    found = {}
    for model_type, cls in CONFIG_MAPPING.items():
        if model_type in FAMILIES or "text_config" not in (getattr(cls, "sub_configs", None) or {}):
            continue
        with warnings.catch_warnings(record=True):  # (some classes warn about their own defaults)
            try:
                text = cls().get_text_config(decoder=True)
            except StrictDataclassClassValidationError:  # a class its own defaults fail (Gemma 4's assistant)
                continue
        if text.model_type in FAMILIES:
            found[model_type] = text.model_type
    assert found == COMPOSITES
    with pytest.raises(ValueError, match="'qwen2_vl_text' model: pass its text_config"):
        posenc.RotaryPlan.from_config({"model_type": "qwen2_vl", "rope_theta": 1e6, "num_hidden_layers": 1})
