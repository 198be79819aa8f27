"""What transformers does with positions that a config.json does not say: one entry per ``model_type``.

Read from transformers v5.23. Two kinds of fact, each entry holding both:

- what the family's modeling code decides (the pair layout, the NoPE rule, the assignment of pairs to axes), read
  from the modeling file its :attr:`Family.source` names (the directory ``transformers/models/<directory>/``);
- what its configuration class fills in for a key the file leaves out (:attr:`Family.defaults`, copied from the
  class named there: its field defaults, its ``default_theta``, the rope dict and ``partial_rotary_factor`` its
  ``__post_init__`` supplies, and the layer types it derives, :attr:`Family.layer_pattern`).

Used by :mod:`posenc.config`; tests/test_model_zoo.py checks every entry against that family's rotary embedding
class and ``apply_rotary_pos_emb``, and the defaults against the configuration class itself (built without
arguments, and from a config.json with each key removed in turn).

An entry holds only what differs from the common case: pairs ``(i, i + rotary_dim / 2)`` (``rotate_half``) on the
first ``int(head_dim * partial_rotary_factor)`` features of every attention layer of a ``(head_dim or
hidden_size // num_attention_heads)``-wide head, one position axis, the configuration class's rope dict built as
``RotaryEmbeddingConfigMixin.convert_rope_params_to_dict`` builds it (:data:`RopeForm` ``"mixin"``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal

from posenc._validation import RotaryLayout

NoPERule = Literal[
    "no_rope_layers", "sliding_only", "sliding_or_dense_prefix", "sliding_only_if_hybrid", "layer_rope_theta"
]
"""Which attention layers skip the rotation, as the family's attention code decides:

- ``"no_rope_layers"``: layer ``i`` rotates iff ``config.no_rope_layers[i]`` (Llama 4, SmolLM3, Mistral Large 4);
- ``"sliding_only"``: only ``"sliding_attention"`` layers rotate (Cohere 2's ``if self.sliding_window is not None``);
- ``"sliding_or_dense_prefix"``: as ``"sliding_only"``, and also the dense-MLP layers when
  ``prefix_dense_sliding_window_pattern == 1`` (Cohere 2 MoE's ``force_rope``);
- ``"sliding_only_if_hybrid"``: with a ``sliding_window``, only sliding layers rotate; without, all (EXAONE 4);
- ``"layer_rope_theta"``: layer ``i`` rotates iff ``config.layer_rope_theta[i]`` is nonzero (when the list exists);
  with ``per_layer_theta`` that nonzero value is also the layer's base (Granite SWA), else the base is the config's
  (MUSE).
"""

MultiAxis = Literal[
    "mrope_chunked",
    "mrope_interleaved",
    "mrope_hw_alternating",
    "mrope_unpaired",
    "axial_hw",
    "axial_wh",
    "axial_xy",
    "axial_wh_pairs",
    "axial_hw_split_even_odd",
    "axial_alternating",
    "axial_thw",
]
"""How a multi-axis family assigns its rotated pairs to axes (see :meth:`Family.axial_pairs` and
:func:`mrope_axes_of_pairs`)."""

FeatureOrder = Literal["natural", "swapped_halves", "halves_per_axis"]
"""How the model's features map onto posenc's pair layout: as they are; the two halves swapped (a rotation by
minus the angle, NanoChat); or pairs ``(j, j + k)`` within each axis's own block of ``2k`` features (Gemma 4's
vision tower), which posenc's halves layout reads after swapping the middle quarters."""

QueryRule = Literal["llama4_temperature", "llama4_beta", "scalable_softmax", "learned_log"]

DerivedAttributes = Literal["bamba", "falcon_h1", "recurrent_gemma", "all_sliding", "longcat", "hrm"]
"""Attributes a config class computes (properties not written to config.json), derived the same way from a dict:
``layers_block_type`` from ``attn_layer_indices`` (Bamba), ``"hybrid"`` everywhere (Falcon-H1), ``block_types``
cycled (RecurrentGemma), ``"sliding_attention"`` everywhere (Qwen3-Omni's Code2Wav), ``num_hidden_layers = 2 *
num_layers`` (LongCat-Flash: two attentions per layer), ``num_hidden_layers = num_layers_per_stack * H_cycles *
(L_cycles + 1)`` when a file gives no ``num_layers_per_stack`` (HRM: one cache layer per attention call)."""

NO_ATTENTION_TYPES = ("linear_attention", "conv", "mamba")
"""Layer types without softmax attention (recurrent or convolutional layers): they never rotate."""

LEGACY_LAYER_TYPES: dict[str, str] = {
    "mamba": "linear_attention",
    "attention": "full_attention",
    "deepseek_sparse_attention": "indexed_attention",
    "qwen_sparse_attention": "indexed_attention",
}
"""The layer types of older config.json files and the names transformers reads them as
(``configuration_utils._LEGACY_LAYER_TYPE_REMAP``, applied to every config's ``layer_types``)."""


RopeForm = Literal["mixin", "by_layer_type", "as_given", "not_carried", "fixed", "theta_only"]
"""How a configuration class builds ``rope_parameters`` from a config.json:

- ``"mixin"`` (``RotaryEmbeddingConfigMixin.convert_rope_params_to_dict``): ``rope_scaling``, else
  ``rope_parameters``, else the class's default dict (``defaults["rope_parameters"]``, else ``{}``); each dict (one,
  or one per layer type) takes the top-level ``rope_theta`` and ``partial_rotary_factor`` where it has none, or the
  class's defaults of those;
- ``"by_layer_type"`` (Gemma 3, ModernBERT, OLMo 3, NeoMME): one dict per layer type, ``{"rope_type":
  "default"}`` unless given; ``rope_scaling`` updates those of :attr:`Family.scaling_layers`; each takes its base
  from its own key (:class:`LayerBase`);
- ``"as_given"`` (Gemma 4, Laguna, MiMo-V2-Flash, ...): ``rope_parameters`` as given, else the class's default
  dict; nothing is filled in;
- ``"not_carried"`` (DeepSeek-V4, dots3.note): as ``"as_given"``, but the class builds its nested dict from keys of
  its own by a rule posenc does not carry: a config without a nested ``rope_parameters`` is refused.
- ``"fixed"`` (GPT-J, CodeGen): no rope dict at all; the modeling code fixes the base (:attr:`Family.fixed_theta`)
  and reads no scaling, whatever the config says;
- ``"theta_only"`` (ESM): the rotary embedding reads ``config.rope_theta`` (its class's default where the file has
  none) and nothing else: no scaling, no partial factor.
"""


@dataclass(frozen=True)
class LayerBase:
    """Where the rope dict of one layer type takes its base from, in a ``"by_layer_type"`` family.

    ``key`` is the config.json key (``rope_theta``, ``rope_local_base_freq``, ``global_rope_theta``, ...), None
    where the class always takes ``default`` (OLMo 3's sliding layers: its ``rope_theta`` was popped for the full
    layers); ``partial`` the ``partial_rotary_factor`` the dict takes when it has none (NeoMME), or None.
    """

    layer_type: str
    key: str | None
    default: float
    partial: float | None = None


@dataclass(frozen=True)
class LayerPattern:
    """How a configuration class fills in ``layer_types`` when config.json has none (in its ``__post_init__``).

    ``kind``:

    - ``"periodic"``: layer ``i`` of ``n`` is ``full`` when ``(j + shift) % period == 0`` with ``j = i`` (or
      ``n - 1 - i`` with ``from_end``), or ``i`` is in ``first``, or it is the last layer and ``last`` is
      ``"always"`` (``"if_none"``: when no other layer is ``full``); else ``other``. ``period`` comes from the
      config's ``period_key`` if it names one (its default in :attr:`Family.defaults`). With ``prefix_key``, the
      first ``prefix_key`` layers follow the period of ``prefix_period_key`` and the rest restart the count
      (Cohere 2 MoE);
    - ``"windowed"``: every layer ``other`` from ``max_window_layers`` on (0 without that key) when the config has a
      ``sliding_window`` and, with ``gate_key``, that flag is true; else ``full`` (Qwen 2);
    - ``"windowed_alternating"``: layer ``i`` is ``other`` when ``i`` is even, below ``max_window_layers``, and
      ``gate_key`` is true (Qwen 2 MoE);
    - ``"constant"``: every layer ``full``;
    - ``"indices"``: layer ``i`` is ``full`` when ``i`` is in the config's ``period_key`` list (every layer without
      one), else ``other`` (LFM 2);
    - ``"listed"``: the layer types ``cycle``, whatever the number of layers (Zamba 2);
    - ``"cycle"``: layer ``i`` is ``cycle[i % len(cycle)]``, or ``other`` if ``i`` is in ``first`` (LFM 3);
    - ``"no_rope"``: from ``no_rope_layers``: a layer that rotates is ``other`` (Llama 4's chunked attention); with
      ``gate_key``, a NoPE layer is ``other`` when the flag is true and the config has a ``sliding_window``
      (SmolLM3); else ``full``;
    - ``"not_carried"``: a rule posenc does not carry: a config without ``layer_types`` is refused.
    """

    kind: Literal[
        "periodic",
        "windowed",
        "windowed_alternating",
        "constant",
        "indices",
        "listed",
        "cycle",
        "no_rope",
        "not_carried",
    ]
    period: int = 0
    period_key: str | None = None
    shift: int = 1
    from_end: bool = False
    first: tuple[int, ...] = ()
    last: Literal["no", "always", "if_none"] = "no"
    full: str = "full_attention"
    other: str = "sliding_attention"
    gate_key: str | None = None
    prefix_key: str | None = None
    prefix_period_key: str | None = None
    cycle: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClassDefaults:
    """The defaults a family's configuration class applies to keys a config.json leaves out.

    ``values`` maps a config.json key to the value the class gives it when the file has none: a field default
    (``hidden_size``, ``max_position_embeddings``, a constant ``head_dim``, ...), a keyword default of its
    ``__post_init__`` (``sliding_window_pattern``, ``full_attention_interval``, ...), ``rope_theta`` (the class's
    ``default_theta``, or its ``rope_theta`` field), ``partial_rotary_factor``, and ``rope_parameters`` (the dict
    its ``__post_init__`` supplies when the file has none). Keys whose class default is None, or derived from other
    keys (``head_dim = hidden_size // num_attention_heads``), are not here: posenc derives them as the class does.
    """

    config_class: str
    values: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))


@dataclass(frozen=True)
class Family:
    """The facts of one ``model_type`` (see the module docstring for the defaults)."""

    directory: str
    defaults: ClassDefaults
    layout: RotaryLayout = "halves"
    interleave_key: str | None = None  # a config flag (its default in defaults) that picks layout (else halves)
    nope: NoPERule | None = None
    rotary: Literal["first", "mla", "last"] = "first"
    head_keys: tuple[str, str] = ("hidden_size", "num_attention_heads")
    layer_count_keys: tuple[str, ...] = ("num_hidden_layers", "depth", "num_layers", "encoder_layers")
    aliases: tuple[tuple[str, str], ...] = ()
    rope_labels: tuple[str, ...] = ()
    rope_keys: tuple[str, ...] = ("max_position_embeddings",)
    alpha_key: bool = False
    multiaxis: MultiAxis | None = None
    mrope_section: tuple[int, ...] | None = None
    softmax_mscale: bool = False
    query_scaling: QueryRule | None = None
    modeling: str | None = None
    head_rule: Literal["default", "sam_memory", "double_hidden", "derived"] = "default"
    feature_order: FeatureOrder = "natural"
    frequency_scale: float = 1.0
    rope_optional: bool = False
    mla_head: Literal["rope", "nope_plus_rope", "config"] = "rope"
    attribute_map: tuple[tuple[str, str], ...] = ()  # the config class's attribute_map: (name, key in config.json)
    derived: DerivedAttributes | None = None
    per_layer_theta: bool = False
    rope_form: RopeForm = "mixin"
    layer_bases: tuple[LayerBase, ...] = ()
    scaling_layers: tuple[str, ...] = ("full_attention",)
    layer_pattern: LayerPattern | None = None
    full_head_dim_key: str | None = None  # Gemma 4: full-attention layers' head_dim, when per_layer_config is absent
    per_layer_required: bool = False  # a per_layer_config the class derives by a rule posenc does not carry
    nope_on_full_layers: bool = False  # MUSE: without layer_rope_theta, the layer pattern's full layers are NoPE
    partial_hardcoded: bool = False  # Bamba: __post_init__ sets the top-level partial_rotary_factor to its default
    rotary_dim_key: str | None = None  # MiniMax-M2: a legacy width, partial_rotary_factor = value / head_dim
    rope_switch: tuple[str, object] | None = None  # Granite 4.0-H: the model rotates only when config[key] == value
    switch_off: Literal["nope", "absolute", "alibi"] = "nope"  # what it does otherwise (ESM: absolute embeddings)
    fixed_theta: float | None = None  # rope_form "fixed": the base the modeling code fixes
    partial_ignored: bool = False  # the default frequencies never read partial_rotary_factor (PARTIAL_IGNORED)
    rope_type_aliases: tuple[tuple[str, str], ...] = ()  # Phi-3: legacy types the config class renames
    rope_types: tuple[str, ...] = ()  # Phi-3: the only rope types the config class accepts (empty: any)

    @property
    def source(self) -> str:
        """The modeling file the facts were read from, relative to transformers' ``src/transformers``."""
        return f"models/{self.directory}/{self.modeling or 'modeling_' + self.directory}.py"

    def rope_label_of(self, layer_type: str) -> str:
        """The key of the nested rope dict a layer of ``layer_type`` reads (DeepSeek-V4: ``main`` or ``compress``)."""
        if self.directory == "deepseek_v4":
            return "main" if layer_type == "sliding_attention" else "compress"
        return layer_type

    def axial_rotary_dim(self, head_dim: int) -> int | None:
        """The rotated width of an axial tower whose modeling code fixes it (MiniMax-M3's three axes), else None."""
        if self.multiaxis == "axial_thw":
            return 3 * 2 * (head_dim // 3 // 2)  # compute_axial_rope_parameters: spatial_dim = 2 * (dim // 3 // 2)
        return None

    def axial_pairs(self, rotary_dim: int) -> tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...], int]:
        """(axes, axis of each pair, frequency index of each pair, frequency width) of an axial tower."""
        n_pairs = rotary_dim // 2
        quarter = rotary_dim // 4
        if self.multiaxis in ("axial_hw", "axial_wh", "axial_xy"):
            # recomposition_frequencies: cat([freq_a, freq_b]), each at the frequencies of rotary_dim // 2 features
            names = {"axial_hw": ("height", "width"), "axial_wh": ("height", "width"), "axial_xy": ("x", "y")}
            axes = tuple(i // quarter for i in range(n_pairs))
            if self.multiaxis == "axial_wh":  # width first (flip of (h, w))
                axes = tuple(1 - axis for axis in axes)
            return names[self.multiaxis], axes, tuple(i % quarter for i in range(n_pairs)), rotary_dim // 2
        if self.multiaxis == "axial_thw":
            # MiniMax-M3: cat([freq_t, freq_h, freq_w]), each at the frequencies of rotary_dim // 3 features
            third = n_pairs // 3
            return (
                ("time", "height", "width"),
                tuple(i // third for i in range(n_pairs)),
                tuple(i % third for i in range(n_pairs)),
                rotary_dim // 3,
            )
        if self.multiaxis == "axial_alternating":
            # NeoMME: the row's even frequencies and the column's odd ones, side by side
            return ("row", "column"), tuple(i % 2 for i in range(n_pairs)), tuple(range(n_pairs)), rotary_dim
        if self.multiaxis == "axial_wh_pairs":
            # (w, h) of one frequency side by side: pair 2j follows width, 2j + 1 height, both at frequency j
            return (
                ("height", "width"),
                tuple(1 - i % 2 for i in range(n_pairs)),
                tuple(i // 2 for i in range(n_pairs)),
                rotary_dim // 2,
            )
        if self.multiaxis == "axial_hw_split_even_odd":
            # Pixtral: the whole head's frequencies, even ones to height, odd ones to width
            axes = tuple(i // quarter for i in range(n_pairs))
            return (
                ("height", "width"),
                axes,
                tuple(2 * (i % quarter) + i // quarter for i in range(n_pairs)),
                rotary_dim,
            )
        raise AssertionError(self.multiaxis)


def mrope_axes_of_pairs(
    recipe: str, section: tuple[int, ...], n_pairs: int, where: str
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(axis of each pair, frequency index of each pair) of M-RoPE with ``mrope_section`` ``section``.

    ``"mrope_chunked"`` (Qwen2-VL's ``recomposition_frequencies``): contiguous sections, time, height, width.
    ``"mrope_interleaved"`` (Qwen3-VL's): pair ``i`` follows height if ``i % 3 == 1`` and ``i < 3 * section[1]``,
    width if ``i % 3 == 2`` and ``i < 3 * section[2]``, time otherwise.
    """
    if len(section) != 3 or (recipe != "mrope_interleaved" and sum(section) != n_pairs):
        # Qwen3-VL's interleaving slices the pairs with section * 3 as a bound, which needs no sum: as transformers
        # does, a section longer than the head just gives its axis every third pair to the end.
        raise ValueError(
            f"{where}['mrope_section'] must be three counts (time, height, width) summing to the {n_pairs} rotated "
            f"pairs, got {list(section)}"
        )
    if recipe == "mrope_chunked":
        axes = tuple(axis for axis, count in enumerate(section) for _ in range(count))
    elif recipe == "mrope_hw_alternating":
        # ERNIE 4.5 VL: the first section[0] + section[1] pairs alternate height and width, the last section[2] time
        if section[0] != section[1]:
            raise ValueError(f"{where}['mrope_section'] must give height and width equal counts, got {list(section)}")
        axes = tuple(1 + i % 2 if i < 2 * section[0] else 0 for i in range(n_pairs))
    else:
        axes = tuple(
            1 if i % 3 == 1 and i < 3 * section[1] else 2 if i % 3 == 2 and i < 3 * section[2] else 0
            for i in range(n_pairs)
        )
    return axes, tuple(range(n_pairs))


def _f(directory: str, defaults: ClassDefaults, **facts: Any) -> Family:
    return Family(directory, defaults, **facts)


def _d(config_class: str, **values: Any) -> ClassDefaults:
    return ClassDefaults(config_class, values)


_GPT_NAMES = (
    ("max_position_embeddings", "n_positions"),
    ("hidden_size", "n_embd"),
    ("num_attention_heads", "n_head"),
    ("num_hidden_layers", "n_layer"),
)
"""GPT-J's and CodeGen's ``attribute_map``: the config.json names of the sizes."""
_VISION = dict(layer_count_keys=("depth", "num_hidden_layers"))
_VISION_MAP = dict(_VISION, attribute_map=(("num_attention_heads", "num_heads"), ("num_hidden_layers", "depth")))
_MROPE = ("mrope_section", "mrope_interleaved", "max_position_embeddings")
_PHI3_ROPE_TYPES = dict(
    rope_type_aliases=(("su", "longrope"), ("yarn", "longrope")),
    rope_types=("default", "longrope"),
)
"""Phi-3's convert_rope_params_to_dict renames the legacy types "su" and "yarn" to "longrope", and its validate_rope
refuses every type but "default" and "longrope"."""
_MLA = dict(rotary="mla", layout="interleaved", interleave_key="rope_interleave", softmax_mscale=True)
_MLA_INTERLEAVED = dict(rotary="mla", layout="interleaved", softmax_mscale=True)
_MLA_HALVES = dict(rotary="mla", softmax_mscale=True)
_SAM_MEMORY = dict(
    multiaxis="axial_xy",
    layout="interleaved",
    head_rule="sam_memory",
    layer_count_keys=("memory_attention_num_layers",),
)

_GEMMA3_BASES = (
    LayerBase("full_attention", "rope_theta", 1000000.0),
    LayerBase("sliding_attention", "rope_local_base_freq", 10000.0),
)
"""Gemma 3's ``convert_rope_params_to_dict``: the full layers' base from ``rope_theta``, the sliding layers' from
``rope_local_base_freq`` (its ``default_theta``, ``{"global": 1e6, "local": 1e4}``)."""
_ZAMBA2_BLOCKS = (
    "linear_attention",
    *(["linear_attention"] * 5 + ["hybrid"]) * 7,
    *["linear_attention"] * 4,
    "hybrid",
    *["linear_attention"] * 3,
    "hybrid",
    *["linear_attention"] * 2,
)
"""Zamba 2's ``layers_block_type`` when the config has none: 54 layers, the shared attention in 9 of them."""
_MODERNBERT_BASES = (
    LayerBase("full_attention", "global_rope_theta", 160000.0),
    LayerBase("sliding_attention", "local_rope_theta", 10000.0),
)

FAMILIES: dict[str, Family] = {
    "afmoe": _f(
        "afmoe",
        _d(
            "AfmoeConfig",
            hidden_size=2048,
            num_attention_heads=16,
            head_dim=128,
            max_position_embeddings=16384,
            num_hidden_layers=32,
            global_attn_every_n_layers=4,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("periodic", period_key="global_attn_every_n_layers"),
        nope="sliding_only",  # AfmoeAttention rotates only where is_local_attention (found by tests/config_sweep.py)
    ),
    "apertus": _f(
        "apertus",
        _d(
            "ApertusConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=65536,
            num_hidden_layers=32,
            rope_theta=12000000.0,
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 12000000.0,
                "factor": 8.0,
                "original_max_position_embeddings": 8192,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
            },
        ),
    ),
    "arcee": _f(
        "arcee",
        _d(
            "ArceeConfig",
            hidden_size=2560,
            num_attention_heads=32,
            max_position_embeddings=4096,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "aria_text": _f(
        "aria",
        _d(
            "AriaTextConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "axk1": _f(
        "axk1",
        _d(
            "AXK1Config",
            hidden_size=7168,
            num_attention_heads=64,
            max_position_embeddings=32768,
            num_hidden_layers=61,
            qk_nope_head_dim=128,
            qk_rope_head_dim=64,
            rope_interleave=True,
            rope_theta=10000.0,
        ),
        **_MLA,
    ),
    "axk2": _f(
        "axk2",
        _d(
            "AXK2Config",
            hidden_size=2048,
            num_attention_heads=32,
            max_position_embeddings=131072,
            num_hidden_layers=48,
            qk_nope_head_dim=64,
            qk_rope_head_dim=32,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("constant", full="indexed_attention"),
        **_MLA_INTERLEAVED,
    ),
    "bailing_hybrid": _f(
        "bailing_hybrid",
        _d(
            "BailingHybridConfig",
            hidden_size=2560,
            num_attention_heads=32,
            num_hidden_layers=42,
            model_max_length=262144,
            qk_nope_head_dim=128,
            qk_rope_head_dim=64,
            layer_group_size=6,
            rope_theta=6000000.0,
            rope_parameters={"rope_type": "default", "rope_theta": 6000000.0},
        ),
        layer_pattern=LayerPattern("periodic", period_key="layer_group_size", other="linear_attention"),
        attribute_map=(("max_position_embeddings", "model_max_length"),),
        rotary="mla",
        layout="interleaved",
        softmax_mscale=True,
    ),
    "bamba": _f(
        "bamba",
        _d(
            "BambaConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=262144,
            num_hidden_layers=32,
            rope_theta=10000.0,
            partial_rotary_factor=0.5,
        ),
        attribute_map=(("layer_types", "layers_block_type"),),
        derived="bamba",
        partial_hardcoded=True,  # kwargs["partial_rotary_factor"] = 0.5  # hardcode for BC
    ),
    "beam": _f(
        "beam",
        _d(
            "BeamConfig",
            hidden_size=5120,
            num_attention_heads=48,
            head_dim=128,
            max_position_embeddings=8192,
            num_hidden_layers=52,
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": None,
            },
        ),
        rope_form="as_given",
        layer_pattern=LayerPattern("periodic", period=6, last="always"),
        query_scaling="scalable_softmax",
    ),
    "bitnet": _f(
        "bitnet",
        _d(
            "BitNetConfig",
            hidden_size=2560,
            num_attention_heads=20,
            max_position_embeddings=2048,
            num_hidden_layers=30,
            rope_theta=500000.0,
        ),
    ),
    "blt_global_transformer": _f(
        "blt",
        _d(
            "BltGlobalTransformerConfig",
            hidden_size=2048,
            num_attention_heads=16,
            max_position_embeddings=4096,
            num_hidden_layers=25,
            rope_theta=500000.0,
        ),
        layout="interleaved",
    ),
    "blt_local_decoder": _f(
        "blt",
        _d(
            "BltLocalDecoderConfig",
            hidden_size=1024,
            num_attention_heads=16,
            max_position_embeddings=24576,
            num_hidden_layers=9,
            rope_theta=500000.0,
        ),
        layout="interleaved",
    ),
    "blt_local_encoder": _f(
        "blt",
        _d(
            "BltLocalEncoderConfig",
            hidden_size=1024,
            num_attention_heads=16,
            max_position_embeddings=24576,
            num_hidden_layers=1,
            rope_theta=500000.0,
        ),
        layout="interleaved",
    ),
    "blt_patcher": _f(
        "blt",
        _d(
            "BltPatcherConfig",
            hidden_size=768,
            num_attention_heads=12,
            max_position_embeddings=8192,
            num_hidden_layers=14,
            rope_theta=10000.0,
        ),
        layout="interleaved",
    ),
    "chameleon": _f(
        "chameleon",
        _d(
            "ChameleonConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=4096,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "cohere": _f(
        "cohere",
        _d(
            "CohereConfig",
            hidden_size=8192,
            num_attention_heads=64,
            max_position_embeddings=8192,
            num_hidden_layers=40,
            rope_theta=500000.0,
        ),
        layout="interleaved",
    ),
    "cohere2": _f(
        "cohere2",
        _d(
            "Cohere2Config",
            hidden_size=8192,
            num_attention_heads=64,
            max_position_embeddings=8192,
            num_hidden_layers=40,
            rope_theta=10000.0,
            sliding_window_pattern=4,
        ),
        layer_pattern=LayerPattern("periodic", period_key="sliding_window_pattern"),
        layout="interleaved",
        nope="sliding_only",
    ),
    "cohere2_moe": _f(
        "cohere2_moe",
        _d(
            "Cohere2MoeConfig",
            hidden_size=8192,
            num_attention_heads=64,
            head_dim=128,
            max_position_embeddings=8192,
            num_hidden_layers=40,
            prefix_dense_sliding_window_pattern=1,
            sliding_window_pattern=4,
            rope_theta=10000.0,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
            first_k_dense_replace=0,
        ),
        layer_pattern=LayerPattern(
            "periodic",
            period_key="sliding_window_pattern",
            prefix_key="first_k_dense_replace",
            prefix_period_key="prefix_dense_sliding_window_pattern",
        ),
        layout="interleaved",
        nope="sliding_or_dense_prefix",
    ),
    "cohere_compass_vision": _f(
        "cohere_compass",
        _d("CohereCompassVisionConfig", hidden_size=1152, num_heads=16, depth=27, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION_MAP,
    ),
    "cosmos3_edge_text": _f(
        "cosmos3_edge",
        _d(
            "Cosmos3EdgeTextConfig",
            hidden_size=2048,
            num_attention_heads=16,
            head_dim=128,
            max_position_embeddings=131072,
            num_hidden_layers=28,
            rope_theta=100000000.0,
            rope_parameters={"rope_type": "default", "rope_theta": 100000000.0, "mrope_section": [24, 20, 20]},
        ),
        multiaxis="mrope_interleaved",
        rope_keys=_MROPE,
        mrope_section=(24, 20, 20),
    ),
    "csm": _f(
        "csm",
        _d(
            "CsmConfig",
            hidden_size=2048,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=16,
            rope_theta=500000.0,
        ),
    ),
    "csm_depth_decoder_model": _f(
        "csm",
        _d(
            "CsmDepthDecoderConfig",
            hidden_size=1024,
            num_attention_heads=8,
            max_position_embeddings=33,
            num_hidden_layers=4,
            rope_theta=500000.0,
        ),
    ),
    "cwm": _f(
        "cwm",
        _d(
            "CwmConfig",
            hidden_size=6144,
            num_attention_heads=48,
            head_dim=128,
            max_position_embeddings=131072,
            num_hidden_layers=64,
            rope_theta=1000000.0,
            rope_parameters={
                "rope_theta": 1000000.0,
                "factor": 16.0,
                "high_freq_factor": 4.0,
                "low_freq_factor": 1.0,
                "original_max_position_embeddings": 8192,
                "rope_type": "llama3",
            },
        ),
        layer_pattern=LayerPattern("periodic", period=4, shift=0),
    ),
    "dbrx": _f(
        "dbrx",
        _d("DbrxConfig", d_model=2048, n_heads=16, max_seq_len=2048, n_layers=24, rope_theta=10000.0),
        attribute_map=(
            ("num_attention_heads", "n_heads"),
            ("hidden_size", "d_model"),
            ("num_hidden_layers", "n_layers"),
            ("max_position_embeddings", "max_seq_len"),
        ),
    ),
    "deepseek_ocr2_encoder": _f(
        "deepseek_ocr2",
        _d(
            "DeepseekOcr2VisionEncoderConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=32768,
            num_hidden_layers=32,
            use_sliding_window=False,
            sliding_window=4096,
            max_window_layers=28,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("windowed", gate_key="use_sliding_window"),
    ),
    "deepseek_ocr2_text": _f(
        "deepseek_ocr2",
        _d(
            "DeepseekOcr2TextConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "deepseek_v2": _f(
        "deepseek_v2",
        _d(
            "DeepseekV2Config",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            qk_nope_head_dim=128,
            qk_rope_head_dim=64,
            rope_theta=10000.0,
        ),
        rotary="mla",
        layout="interleaved",
        softmax_mscale=True,
    ),
    "deepseek_v3": _f(
        "deepseek_v3",
        _d(
            "DeepseekV3Config",
            hidden_size=7168,
            num_attention_heads=128,
            max_position_embeddings=4096,
            num_hidden_layers=61,
            qk_nope_head_dim=128,
            qk_rope_head_dim=64,
            rope_interleave=True,
            rope_theta=10000.0,
        ),
        **_MLA,
    ),
    "deepseek_v32": _f(
        "deepseek_v32",
        _d(
            "DeepseekV32Config",
            hidden_size=7168,
            num_attention_heads=128,
            max_position_embeddings=163840,
            num_hidden_layers=61,
            qk_nope_head_dim=128,
            qk_rope_head_dim=64,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("constant", full="indexed_attention"),
        **_MLA_INTERLEAVED,
    ),
    "deepseek_v4": _f(
        "deepseek_v4",
        _d(
            "DeepseekV4Config",
            hidden_size=4096,
            num_attention_heads=64,
            head_dim=512,
            max_position_embeddings=1048576,
            num_hidden_layers=43,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("not_carried"),
        rope_form="not_carried",
        layout="interleaved",
        rotary="last",
        rope_labels=("main", "compress"),
    ),
    "dia_decoder": _f(
        "dia",
        _d(
            "DiaDecoderConfig",
            hidden_size=2048,
            num_attention_heads=16,
            head_dim=128,
            max_position_embeddings=3072,
            num_hidden_layers=18,
            rope_theta=10000.0,
        ),
    ),
    "dia_encoder": _f(
        "dia",
        _d(
            "DiaEncoderConfig",
            hidden_size=1024,
            num_attention_heads=16,
            head_dim=128,
            max_position_embeddings=1024,
            num_hidden_layers=12,
            rope_theta=10000.0,
        ),
    ),
    "diffllama": _f(
        "diffllama",
        _d(
            "DiffLlamaConfig",
            hidden_size=2048,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=16,
            rope_theta=10000.0,
        ),
    ),
    "diffusion_gemma_text": _f(
        "diffusion_gemma",
        _d(
            "DiffusionGemmaTextConfig",
            hidden_size=2304,
            num_attention_heads=8,
            head_dim=256,
            max_position_embeddings=131072,
            num_hidden_layers=30,
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
            },
            global_head_dim=512,
        ),
        rope_form="as_given",
        layer_pattern=LayerPattern("periodic", period=6, last="always"),
        full_head_dim_key="global_head_dim",
    ),
    "doge": _f(
        "doge",
        _d(
            "DogeConfig",
            hidden_size=1024,
            num_attention_heads=8,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "dots1": _f(
        "dots1",
        _d(
            "Dots1Config",
            hidden_size=4608,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=62,
            sliding_window=4096,
            max_window_layers=62,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("windowed"),
    ),
    "dots3_note_audio_encoder": _f(
        "dots3_note",
        _d(
            "Dots3NoteAudioConfig",
            hidden_size=1280,
            num_attention_heads=20,
            max_position_embeddings=6000,
            num_hidden_layers=32,
            rope_theta=10000.0,
            partial_rotary_factor=0.5,
        ),
    ),
    "dots3_note_text": _f(
        "dots3_note",
        _d(
            "Dots3NoteTextConfig",
            hidden_size=5120,
            num_attention_heads=128,
            head_dim=256,
            max_position_embeddings=524288,
            num_hidden_layers=46,
            qk_nope_head_dim=128,
            qk_rope_head_dim=64,
            rope_theta=80000000.0,
        ),
        layer_pattern=LayerPattern("not_carried"),
        rope_form="not_carried",
        per_layer_required=True,
        **_MLA_INTERLEAVED,
        mla_head="config",
    ),
    "dots3_note_vision_encoder": _f(
        "dots3_note",
        _d("Dots3NoteVisionConfig", hidden_size=1536, num_attention_heads=24, num_hidden_layers=42, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION,
    ),
    "edgetam_video": _f(
        "edgetam_video",
        _d(
            "EdgeTamVideoConfig",
            memory_attention_num_layers=2,
            memory_attention_hidden_size=256,
            memory_attention_downsample_rate=1,
            memory_attention_num_attention_heads=1,
            rope_theta=10000.0,
        ),
        **_SAM_MEMORY,
    ),
    "embedding_gemma2_text": _f(
        "embedding_gemma2",
        _d(
            "EmbeddingGemma2TextConfig",
            hidden_size=512,
            num_attention_heads=4,
            head_dim=256,
            max_position_embeddings=262144,
            num_hidden_layers=24,
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
            },
            sliding_window_pattern=6,
            global_head_dim=512,
        ),
        rope_form="as_given",
        layer_pattern=LayerPattern("periodic", period_key="sliding_window_pattern", last="always"),
        full_head_dim_key="global_head_dim",
    ),
    "emu3_text_model": _f(
        "emu3",
        _d(
            "Emu3TextConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=9216,
            num_hidden_layers=32,
            rope_theta=1000000.0,
        ),
    ),
    "eomt_dinov3": _f(
        "eomt_dinov3",
        _d("EomtDinov3Config", hidden_size=1024, num_attention_heads=16, num_hidden_layers=24, rope_theta=100.0),
        multiaxis="axial_hw",
        frequency_scale=2 * math.pi,
    ),
    "ernie4_5": _f(
        "ernie4_5",
        _d(
            "Ernie4_5Config",
            hidden_size=1024,
            num_attention_heads=16,
            head_dim=128,
            max_position_embeddings=131072,
            num_hidden_layers=18,
            rope_theta=500000.0,
        ),
        layout="interleaved",
    ),
    "ernie4_5_moe": _f(
        "ernie4_5_moe",
        _d(
            "Ernie4_5_MoeConfig",
            hidden_size=2560,
            num_attention_heads=20,
            max_position_embeddings=131072,
            num_hidden_layers=28,
            rope_theta=500000.0,
        ),
        layout="interleaved",
    ),
    "ernie4_5_vl_moe_text": _f(
        "ernie4_5_vl_moe",
        _d(
            "Ernie4_5_VLMoeTextConfig",
            hidden_size=2560,
            num_attention_heads=20,
            max_position_embeddings=131072,
            num_hidden_layers=28,
            rope_theta=500000.0,
        ),
        layout="interleaved",
        multiaxis="mrope_hw_alternating",
        rope_keys=_MROPE,
        mrope_section=(22, 22, 20),
    ),
    "ernie4_5_vl_moe_vision": _f(
        "ernie4_5_vl_moe",
        _d("Ernie4_5_VLMoeVisionConfig", hidden_size=1280, num_heads=16, depth=32, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION_MAP,
    ),
    "esmc": _f(
        "esmc",
        _d(
            "EsmcConfig",
            hidden_size=2560,
            num_attention_heads=40,
            max_position_embeddings=2048,
            num_hidden_layers=80,
            rope_theta=10000.0,
        ),
    ),
    "eurobert": _f(
        "eurobert",
        _d(
            "EuroBertConfig",
            hidden_size=768,
            num_attention_heads=12,
            max_position_embeddings=8192,
            num_hidden_layers=12,
            rope_theta=10000.0,
        ),
    ),
    "evolla": _f(
        "evolla",
        _d(
            "EvollaConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=8192,
            num_hidden_layers=32,
            rope_theta=500000.0,
        ),
    ),
    "exaone4": _f(
        "exaone4",
        _d(
            "Exaone4Config",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            sliding_window=4096,
            sliding_window_pattern=4,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("periodic", period_key="sliding_window_pattern"),
        nope="sliding_only_if_hybrid",
    ),
    "exaone4_5_vision": _f(
        "exaone4_5",
        _d("Exaone4_5_VisionConfig", hidden_size=3584, num_heads=16, depth=32, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION_MAP,
    ),
    "exaone_moe": _f(
        "exaone_moe",
        _d(
            "ExaoneMoeConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            sliding_window=4096,
            sliding_window_pattern=4,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("periodic", period_key="sliding_window_pattern"),
        nope="sliding_only_if_hybrid",
    ),
    "falcon": _f(
        "falcon",
        _d(
            "FalconConfig",
            hidden_size=4544,
            num_attention_heads=71,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
            alibi=False,
        ),
        # FalconModel: use_alibi = config.alibi; its attention rotates only when no ALiBi tensor is passed
        rope_switch=("alibi", False),
        switch_off="alibi",
    ),
    "falcon_h1": _f(
        "falcon_h1",
        _d(
            "FalconH1Config",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=8192,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
        attribute_map=(("layer_types", "layers_block_type"),),
        derived="falcon_h1",
    ),
    "flex_olmo": _f(
        "flex_olmo",
        _d(
            "FlexOlmoConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=4096,
            num_hidden_layers=32,
            rope_theta=500000.0,
        ),
    ),
    "flint": _f(
        "flint",
        _d(
            "FlintConfig",
            hidden_size=2048,
            num_attention_heads=32,
            head_dim=128,
            max_position_embeddings=262144,
            num_hidden_layers=49,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("periodic", period=4, shift=3, first=(0, 1), last="always"),
        nope="sliding_only",  # FlintAttention rotates only its sliding layers (found by tests/config_sweep.py)
    ),
    "gemma": _f(
        "gemma",
        _d(
            "GemmaConfig",
            hidden_size=3072,
            num_attention_heads=16,
            head_dim=256,
            max_position_embeddings=8192,
            num_hidden_layers=28,
            rope_theta=10000.0,
        ),
    ),
    "gemma2": _f(
        "gemma2",
        _d(
            "Gemma2Config",
            hidden_size=2304,
            num_attention_heads=8,
            head_dim=256,
            max_position_embeddings=8192,
            num_hidden_layers=26,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("periodic", period=2),
    ),
    "gemma3_text": _f(
        "gemma3",
        _d(
            "Gemma3TextConfig",
            hidden_size=2304,
            num_attention_heads=8,
            head_dim=256,
            max_position_embeddings=131072,
            num_hidden_layers=26,
            sliding_window_pattern=6,
        ),
        rope_form="by_layer_type",
        layer_bases=_GEMMA3_BASES,
        layer_pattern=LayerPattern("periodic", period_key="sliding_window_pattern"),
    ),
    "gemma3n_text": _f(
        "gemma3n",
        _d(
            "Gemma3nTextConfig",
            hidden_size=2048,
            num_attention_heads=8,
            head_dim=256,
            max_position_embeddings=32768,
            num_hidden_layers=35,
        ),
        rope_form="by_layer_type",
        layer_bases=_GEMMA3_BASES,
        layer_pattern=LayerPattern("periodic", period=5),
    ),
    "gemma4_text": _f(
        "gemma4",
        _d(
            "Gemma4TextConfig",
            hidden_size=2304,
            num_attention_heads=8,
            head_dim=256,
            max_position_embeddings=131072,
            num_hidden_layers=30,
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
            },
            global_head_dim=512,
        ),
        rope_form="as_given",
        layer_pattern=LayerPattern("periodic", period=6, last="always"),
        full_head_dim_key="global_head_dim",
    ),
    "gemma4_unified_text": _f(
        "gemma4_unified",
        _d(
            "Gemma4UnifiedTextConfig",
            hidden_size=2304,
            num_attention_heads=8,
            head_dim=256,
            max_position_embeddings=262144,
            num_hidden_layers=30,
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
            },
            global_head_dim=512,
        ),
        rope_form="as_given",
        layer_pattern=LayerPattern("periodic", period=6, last="always"),
        full_head_dim_key="global_head_dim",
    ),
    "gemma4_vision": _f(
        "gemma4",
        _d(
            "Gemma4VisionConfig",
            hidden_size=768,
            num_attention_heads=12,
            head_dim=64,
            max_position_embeddings=131072,
            num_hidden_layers=16,
            rope_theta=100.0,
        ),
        multiaxis="axial_hw",
        feature_order="halves_per_axis",
    ),
    "glm": _f(
        "glm",
        _d(
            "GlmConfig",
            hidden_size=4096,
            num_attention_heads=32,
            head_dim=128,
            max_position_embeddings=131072,
            num_hidden_layers=40,
            rope_theta=10000.0,
            partial_rotary_factor=0.5,
        ),
        layout="interleaved",
    ),
    "glm4": _f(
        "glm4",
        _d(
            "Glm4Config",
            hidden_size=4096,
            num_attention_heads=32,
            head_dim=128,
            max_position_embeddings=131072,
            num_hidden_layers=40,
            rope_theta=10000.0,
            partial_rotary_factor=0.5,
        ),
        layout="interleaved",
    ),
    "glm4_moe": _f(
        "glm4_moe",
        _d(
            "Glm4MoeConfig",
            hidden_size=4096,
            num_attention_heads=96,
            max_position_embeddings=131072,
            num_hidden_layers=46,
            rope_theta=10000.0,
            partial_rotary_factor=0.5,
        ),
    ),
    "glm4_moe_lite": _f(
        "glm4_moe_lite",
        _d(
            "Glm4MoeLiteConfig",
            hidden_size=2048,
            num_attention_heads=20,
            qk_rope_head_dim=64,
            max_position_embeddings=202752,
            num_hidden_layers=47,
            qk_nope_head_dim=192,
            rope_interleave=True,
            rope_theta=10000.0,
        ),
        attribute_map=(("head_dim", "qk_rope_head_dim"),),
        **_MLA,
    ),
    "glm4v_moe_text": _f(
        "glm4v_moe",
        _d(
            "Glm4vMoeTextConfig",
            hidden_size=4096,
            num_attention_heads=96,
            max_position_embeddings=65536,
            num_hidden_layers=46,
            rope_theta=10000.0,
            partial_rotary_factor=0.5,
        ),
        multiaxis="mrope_chunked",
        rope_keys=_MROPE,
        mrope_section=(8, 12, 12),
    ),
    "glm4v_moe_vision": _f(
        "glm4v_moe",
        _d("Glm4vMoeVisionConfig", hidden_size=1536, num_heads=12, depth=24, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION_MAP,
    ),
    "glm4v_text": _f(
        "glm4v",
        _d(
            "Glm4vTextConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=32768,
            num_hidden_layers=40,
            rope_theta=10000.0,
        ),
        layout="interleaved",
        multiaxis="mrope_chunked",
        rope_keys=_MROPE,
        mrope_section=(8, 12, 12),
    ),
    "glm4v_vision": _f(
        "glm4v",
        _d("Glm4vVisionConfig", hidden_size=1536, num_heads=12, depth=24, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION_MAP,
    ),
    "glm5_next_vision": _f(
        "glm5_next",
        _d("Glm5NextVisionConfig", hidden_size=1024, num_heads=16, depth=24, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION_MAP,
    ),
    "glm_image_text": _f(
        "glm_image",
        _d(
            "GlmImageTextConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=131072,
            num_hidden_layers=40,
            rope_theta=10000.0,
        ),
        multiaxis="mrope_chunked",
        rope_keys=_MROPE,
        mrope_section=(8, 12, 12),
    ),
    "glm_moe_dsa": _f(
        "glm_moe_dsa",
        _d(
            "GlmMoeDsaConfig",
            hidden_size=6144,
            num_attention_heads=64,
            max_position_embeddings=202752,
            num_hidden_layers=78,
            qk_nope_head_dim=192,
            qk_rope_head_dim=64,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("constant", full="indexed_attention"),
        rotary="mla",
        layout="interleaved",
        softmax_mscale=True,
    ),
    "glm_ocr_text": _f(
        "glm_ocr",
        _d(
            "GlmOcrTextConfig",
            hidden_size=1024,
            num_attention_heads=16,
            max_position_embeddings=131072,
            num_hidden_layers=16,
            rope_theta=10000.0,
        ),
        layout="interleaved",
        multiaxis="mrope_chunked",
        rope_keys=_MROPE,
        mrope_section=(8, 12, 12),
    ),
    "glm_ocr_vision": _f(
        "glm_ocr",
        _d("GlmOcrVisionConfig", hidden_size=1024, num_heads=16, depth=24, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION_MAP,
    ),
    "glmasr_encoder": _f(
        "glmasr",
        _d(
            "GlmAsrEncoderConfig",
            hidden_size=1280,
            num_attention_heads=20,
            max_position_embeddings=1500,
            num_hidden_layers=32,
            rope_theta=10000.0,
            partial_rotary_factor=0.5,
        ),
    ),
    "gpt_neox": _f(
        "gpt_neox",
        _d(
            "GPTNeoXConfig",
            hidden_size=6144,
            num_attention_heads=64,
            max_position_embeddings=2048,
            num_hidden_layers=44,
            rope_theta=10000.0,
            partial_rotary_factor=0.25,
        ),
        aliases=(("rotary_emb_base", "rope_theta"), ("rotary_pct", "partial_rotary_factor")),
    ),
    "gpt_neox_japanese": _f(
        "gpt_neox_japanese",
        _d(
            "GPTNeoXJapaneseConfig",
            hidden_size=2560,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
        aliases=(("rotary_emb_base", "rope_theta"), ("rotary_pct", "partial_rotary_factor")),
    ),
    "gpt_oss": _f(
        "gpt_oss",
        _d(
            "GptOssConfig",
            hidden_size=2880,
            num_attention_heads=64,
            head_dim=64,
            max_position_embeddings=131072,
            num_hidden_layers=36,
            rope_theta=150000.0,
            rope_parameters={
                "rope_type": "yarn",
                "factor": 32.0,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
                "original_max_position_embeddings": 4096,
            },
        ),
        layer_pattern=LayerPattern("periodic", period=2),
    ),
    "gradium_phonon_tts": _f(
        "gradium_phonon_tts",
        _d(
            "GradiumPhononTTSConfig",
            hidden_size=768,
            num_attention_heads=12,
            max_position_embeddings=8192,
            num_hidden_layers=6,
            rope_theta=10000.0,
        ),
    ),
    "granite": _f(
        "granite",
        _d(
            "GraniteConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "granite4_vision_text": _f(
        "granite4_vision",
        _d(
            "Granite4VisionTextConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "granite_docling_text": _f(
        "granite_docling",
        _d(
            "GraniteDoclingTextConfig",
            hidden_size=1024,
            num_attention_heads=16,
            max_position_embeddings=32768,
            num_hidden_layers=28,
            rope_theta=10000.0,
        ),
    ),
    "granite_swa": _f(
        "granite_swa",
        _d(
            "GraniteSWAConfig",
            hidden_size=2560,
            num_attention_heads=20,
            max_position_embeddings=8192,
            num_hidden_layers=24,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("periodic", period=4, shift=0),
        nope="layer_rope_theta",
        per_layer_theta=True,
    ),
    "granitemoe": _f(
        "granitemoe",
        _d(
            "GraniteMoeConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "granitemoe_swa": _f(
        "granitemoe_swa",
        _d(
            "GraniteMoeSWAConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("periodic", period=4, shift=0),
        nope="layer_rope_theta",
        per_layer_theta=True,
    ),
    "granitemoehybrid": _f(
        "granitemoehybrid",
        _d(
            "GraniteMoeHybridConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("constant", full="linear_attention"),
        rope_switch=("position_embedding_type", "rope"),  # GraniteMoeHybridModel: rotary_emb only for "rope"
    ),
    "granitemoeshared": _f(
        "granitemoeshared",
        _d(
            "GraniteMoeSharedConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "gte": _f(
        "gte",
        _d(
            "GteConfig",
            hidden_size=768,
            num_attention_heads=12,
            max_position_embeddings=8192,
            num_hidden_layers=12,
            rope_theta=160000.0,
        ),
    ),
    "helium": _f(
        "helium",
        _d(
            "HeliumConfig",
            hidden_size=2560,
            num_attention_heads=20,
            head_dim=128,
            max_position_embeddings=4096,
            num_hidden_layers=24,
            rope_theta=100000.0,
        ),
        layout="interleaved",
    ),
    "higgs_audio_v2": _f(
        "higgs_audio_v2",
        _d(
            "HiggsAudioV2Config",
            hidden_size=3072,
            num_attention_heads=24,
            head_dim=128,
            max_position_embeddings=2048,
            num_hidden_layers=28,
            rope_theta=10000.0,
            rope_parameters={
                "factor": 32.0,
                "rope_theta": 500000.0,
                "high_freq_factor": 0.5,
                "low_freq_factor": 0.125,
                "original_max_position_embeddings": 1024,
                "rope_type": "llama3",
            },
        ),
    ),
    "hrm_text": _f(
        "hrm_text",
        _d(
            "HrmTextConfig",
            hidden_size=1536,
            num_attention_heads=12,
            head_dim=128,
            max_position_embeddings=2048,
            num_hidden_layers=16,
            rope_theta=10000.0,
            H_cycles=2,
            L_cycles=3,
        ),
        derived="hrm",
    ),
    "hunyuan_v1_dense": _f(
        "hunyuan_v1_dense",
        _d(
            "HunYuanDenseV1Config",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
        alpha_key=True,
        rope_keys=("alpha", "max_position_embeddings"),
    ),
    "hunyuan_v1_moe": _f(
        "hunyuan_v1_moe",
        _d(
            "HunYuanMoEV1Config",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
        alpha_key=True,
        rope_keys=("alpha", "max_position_embeddings"),
    ),
    "hunyuan_vl_text": _f(
        "hunyuan_vl",
        _d(
            "HunYuanVLTextConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
        multiaxis="mrope_unpaired",
        rope_keys=_MROPE,
    ),
    "hy_v3": _f(
        "hy_v3",
        _d(
            "HYV3Config",
            hidden_size=4096,
            num_attention_heads=64,
            head_dim=128,
            max_position_embeddings=131072,
            num_hidden_layers=80,
            rope_theta=11158840.0,
        ),
    ),
    "hy_v4": _f(
        "hy_v4",
        _d(
            "HYV4Config",
            hidden_size=2816,
            num_attention_heads=32,
            head_dim=256,
            max_position_embeddings=262144,
            num_hidden_layers=34,
            qk_nope_head_dim=192,
            qk_rope_head_dim=64,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("constant", full="indexed_attention"),
        **_MLA_HALVES,
    ),
    "hyperclovax": _f(
        "hyperclovax",
        _d(
            "HyperCLOVAXConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "idefics": _f(
        "idefics",
        _d(
            "IdeficsConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "inkling2_vision": _f(
        "inkling2",
        _d("Inkling2VisionConfig", hidden_size=1024, num_attention_heads=16, num_hidden_layers=23, rope_theta=10000.0),
        multiaxis="axial_wh",
        layout="interleaved",
    ),
    "jais2": _f(
        "jais2",
        _d(
            "Jais2Config",
            hidden_size=3328,
            num_attention_heads=26,
            max_position_embeddings=8192,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "jetmoe": _f(
        "jetmoe",
        _d(
            "JetMoeConfig",
            hidden_size=2048,
            kv_channels=128,
            max_position_embeddings=4096,
            num_hidden_layers=12,
            rope_theta=10000.0,
        ),
        attribute_map=(("head_dim", "kv_channels"),),
    ),
    "jina_embeddings_v3": _f(
        "jina_embeddings_v3",
        _d(
            "JinaEmbeddingsV3Config",
            hidden_size=1024,
            num_attention_heads=16,
            max_position_embeddings=8194,
            num_hidden_layers=24,
            rope_theta=20000.0,
        ),
    ),
    "kimi_k25_vision": _f(
        "kimi_k25",
        _d("Kimi_K25VisionConfig", hidden_size=1152, num_attention_heads=16, num_hidden_layers=27, rope_theta=10000.0),
        multiaxis="axial_wh_pairs",
    ),
    "kolibri1": _f(
        "kolibri1",
        _d(
            "Kolibri1Config",
            hidden_size=2560,
            num_attention_heads=48,
            head_dim=128,
            max_position_embeddings=262144,
            num_hidden_layers=50,
            sliding_window=513,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("periodic", period=5),
        nope="sliding_only_if_hybrid",
    ),
    "kyutai_speech_to_text": _f(
        "kyutai_speech_to_text",
        _d(
            "KyutaiSpeechToTextConfig",
            hidden_size=2048,
            num_attention_heads=32,
            max_position_embeddings=750,
            num_hidden_layers=48,
            rope_theta=10000.0,
        ),
    ),
    "laguna": _f(
        "laguna",
        _d(
            "LagunaConfig",
            hidden_size=2048,
            num_attention_heads=48,
            head_dim=128,
            max_position_embeddings=131072,
            num_hidden_layers=40,
            rope_parameters={
                "full_attention": {"rope_type": "default", "rope_theta": 500000.0, "partial_rotary_factor": 0.5},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0},
            },
        ),
        rope_form="as_given",
        layer_pattern=LayerPattern("constant"),
    ),
    "lasr_encoder": _f(
        "lasr",
        _d(
            "LasrEncoderConfig",
            hidden_size=512,
            num_attention_heads=8,
            max_position_embeddings=10000,
            num_hidden_layers=17,
            rope_theta=10000.0,
        ),
    ),
    "lfm2": _f(
        "lfm2",
        _d(
            "Lfm2Config",
            hidden_size=2560,
            num_attention_heads=32,
            max_position_embeddings=128000,
            num_hidden_layers=32,
            rope_theta=1000000.0,
        ),
        layer_pattern=LayerPattern("indices", period_key="full_attn_idxs", other="conv"),
    ),
    "lfm2_moe": _f(
        "lfm2_moe",
        _d(
            "Lfm2MoeConfig",
            hidden_size=2048,
            num_attention_heads=32,
            max_position_embeddings=128000,
            num_hidden_layers=32,
            rope_theta=1000000.0,
        ),
    ),
    "lfm3": _f(
        "lfm3",
        _d(
            "Lfm3Config",
            hidden_size=2048,
            num_attention_heads=16,
            head_dim=128,
            max_position_embeddings=128000,
            num_hidden_layers=24,
            rope_theta=1000000.0,
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "proportional", "rope_theta": 1000000.0, "partial_rotary_factor": 0.5},
            },
        ),
        layer_pattern=LayerPattern(
            "cycle", cycle=("sliding_attention", "conv", "full_attention", "conv"), first=(0,), other="conv"
        ),
    ),
    "lfm3_vl_vision": _f(
        "lfm3_vl",
        _d("Lfm3VlVisionConfig", hidden_size=1024, num_attention_heads=16, num_hidden_layers=14, rope_theta=1000000.0),
        layer_pattern=LayerPattern("cycle", cycle=("full_attention", "conv"), first=(0, 1), other="conv"),
        multiaxis="axial_hw",
    ),
    "llama": _f(
        "llama",
        _d(
            "LlamaConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "llama4_text": _f(
        "llama4",
        _d(
            "Llama4TextConfig",
            hidden_size=5120,
            num_attention_heads=40,
            head_dim=128,
            max_position_embeddings=131072,
            num_hidden_layers=48,
            no_rope_layer_interval=4,
            attn_temperature_tuning=True,
            attn_scale=0.1,
            floor_scale=8192,
            rope_theta=500000.0,
        ),
        layer_pattern=LayerPattern("no_rope", other="chunked_attention"),
        layout="interleaved",
        nope="no_rope_layers",
        query_scaling="llama4_temperature",
    ),
    "llama4_vision_model": _f(
        "llama4",
        _d("Llama4VisionConfig", hidden_size=768, num_attention_heads=16, num_hidden_layers=34, rope_theta=10000.0),
        multiaxis="axial_xy",
        layout="interleaved",
    ),
    "longcat_flash": _f(
        "longcat_flash",
        _d(
            "LongcatFlashConfig",
            hidden_size=6144,
            num_attention_heads=64,
            head_dim=64,
            max_position_embeddings=131072,
            num_layers=28,
            qk_nope_head_dim=128,
            qk_rope_head_dim=64,
            rope_theta=10000000.0,
        ),
        derived="longcat",
        rotary="mla",
        layout="interleaved",
        softmax_mscale=True,
    ),
    "mellum": _f(
        "mellum",
        _d(
            "MellumConfig",
            hidden_size=2304,
            num_attention_heads=32,
            head_dim=128,
            max_position_embeddings=131072,
            num_hidden_layers=28,
            rope_parameters={
                "full_attention": {"rope_type": "default", "rope_theta": 500000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            },
        ),
        rope_form="as_given",
        layer_pattern=LayerPattern("constant"),
    ),
    "mimi": _f(
        "mimi",
        _d(
            "MimiConfig",
            hidden_size=512,
            num_attention_heads=8,
            max_position_embeddings=8000,
            num_hidden_layers=8,
            rope_theta=10000.0,
        ),
    ),
    "mimi_decoder": _f(
        "mimi",
        _d(
            "MimiDecoderConfig",
            hidden_size=512,
            num_attention_heads=8,
            max_position_embeddings=8000,
            num_hidden_layers=8,
            rope_theta=10000.0,
        ),
    ),
    "mimi_encoder": _f(
        "mimi",
        _d(
            "MimiEncoderConfig",
            hidden_size=512,
            num_attention_heads=8,
            max_position_embeddings=8000,
            num_hidden_layers=8,
            rope_theta=10000.0,
        ),
    ),
    "mimo_v2_flash": _f(
        "mimo_v2_flash",
        _d(
            "MiMoV2FlashConfig",
            hidden_size=4096,
            num_attention_heads=64,
            head_dim=192,
            max_position_embeddings=131072,
            num_hidden_layers=48,
            rope_parameters={
                "full_attention": {"rope_type": "default", "rope_theta": 5000000.0, "partial_rotary_factor": 0.334},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.334},
            },
        ),
        rope_form="as_given",
        layer_pattern=LayerPattern("periodic", period=6, first=(0,)),
    ),
    "minicpm3": _f(
        "minicpm3",
        _d(
            "MiniCPM3Config",
            hidden_size=2560,
            num_attention_heads=40,
            max_position_embeddings=32768,
            num_hidden_layers=62,
            qk_nope_head_dim=64,
            qk_rope_head_dim=32,
            rope_theta=10000.0,
        ),
        rotary="mla",
        softmax_mscale=True,
    ),
    "minimax": _f(
        "minimax",
        _d(
            "MiniMaxConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=131072,
            num_hidden_layers=32,
            rope_theta=1000000.0,
        ),
        layer_pattern=LayerPattern("periodic", period=2, shift=0, other="linear_attention"),
    ),
    "minimax_m2": _f(
        "minimax_m2",
        _d(
            "MiniMaxM2Config",
            hidden_size=3072,
            num_attention_heads=48,
            head_dim=128,
            max_position_embeddings=196608,
            num_hidden_layers=62,
            rope_theta=5000000.0,
        ),
        rotary_dim_key="rotary_dim",  # MiniMaxM2Config.convert_rope_params_to_dict
    ),
    "minimax_m3_vl_text": _f(
        "minimax_m3_vl",
        _d(
            "MiniMaxM3VLTextConfig",
            hidden_size=6144,
            num_attention_heads=64,
            head_dim=128,
            max_position_embeddings=524288,
            num_hidden_layers=60,
            rope_theta=5000000.0,
        ),
        layer_pattern=LayerPattern("constant"),
    ),
    "minimax_m3_vl_vision": _f(
        "minimax_m3_vl",
        _d(
            "MiniMaxM3VLVisionConfig",
            hidden_size=1280,
            num_attention_heads=16,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
        multiaxis="axial_thw",
    ),
    "ministral": _f(
        "ministral",
        _d(
            "MinistralConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=131072,
            num_hidden_layers=32,
            sliding_window=4096,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("windowed"),
    ),
    "ministral3": _f(
        "ministral3",
        _d(
            "Ministral3Config",
            hidden_size=4096,
            num_attention_heads=32,
            head_dim=128,
            max_position_embeddings=262144,
            num_hidden_layers=34,
            rope_theta=10000.0,
            rope_parameters={
                "type": "yarn",
                "rope_theta": 1000000.0,
                "factor": 16.0,
                "original_max_position_embeddings": 16384,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "mscale_all_dim": 1.0,
                "mscale": 1.0,
                "llama_4_scaling_beta": 0.1,
            },
        ),
        query_scaling="llama4_beta",
        rope_keys=("llama_4_scaling_beta", "max_position_embeddings"),
    ),
    "mistral": _f(
        "mistral",
        _d(
            "MistralConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=131072,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "mistral4": _f(
        "mistral4",
        _d(
            "Mistral4Config",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=1048576,
            num_hidden_layers=36,
            qk_nope_head_dim=64,
            qk_rope_head_dim=64,
            rope_interleave=True,
            rope_theta=10000.0,
            rope_parameters={
                "type": "yarn",
                "rope_theta": 10000.0,
                "factor": 128.0,
                "original_max_position_embeddings": 8192,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "mscale_all_dim": 1.0,
                "mscale": 1.0,
                "llama_4_scaling_beta": 0.1,
            },
        ),
        rotary="mla",
        mla_head="nope_plus_rope",
        layout="interleaved",
        interleave_key="rope_interleave",
        softmax_mscale=True,
        query_scaling="llama4_beta",
        rope_keys=("llama_4_scaling_beta", "max_position_embeddings"),
    ),
    "mistral_large4_text": _f(
        "mistral_large4",
        _d(
            "MistralLarge4TextConfig",
            hidden_size=6144,
            num_attention_heads=64,
            head_dim=64,
            max_position_embeddings=1048576,
            num_hidden_layers=72,
            qk_nope_head_dim=64,
            qk_rope_head_dim=64,
            rope_theta=10000.0,
            rope_parameters={
                "rope_type": "yarn",
                "rope_theta": 10000.0,
                "factor": 2048.0,
                "original_max_position_embeddings": 512,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "attention_factor": 1.0,
            },
            no_rope_layer_interval=4,
        ),
        layer_pattern=LayerPattern("constant", full="indexed_attention"),
        rotary="mla",
        layout="interleaved",
        nope="no_rope_layers",
        softmax_mscale=True,
        query_scaling="learned_log",  # MistralLarge4TextSoftmaxScaling: learned per head, on every layer
    ),
    "mixtral": _f(
        "mixtral",
        _d(
            "MixtralConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=131072,
            num_hidden_layers=32,
            rope_theta=1000000.0,
        ),
    ),
    "mlcd_vision_model": _f(
        "mlcd",
        _d("MLCDVisionConfig", hidden_size=1664, num_attention_heads=16, num_hidden_layers=48, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION,
    ),
    "mllama_text_model": _f(
        "mllama",
        _d(
            "MllamaTextConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=131072,
            num_hidden_layers=40,
            rope_theta=500000.0,
        ),
    ),
    "modernbert": _f(
        "modernbert",
        _d(
            "ModernBertConfig",
            hidden_size=768,
            num_attention_heads=12,
            max_position_embeddings=8192,
            num_hidden_layers=22,
            global_attn_every_n_layers=3,
        ),
        rope_form="by_layer_type",
        layer_bases=_MODERNBERT_BASES,
        scaling_layers=("full_attention", "sliding_attention"),
        layer_pattern=LayerPattern("periodic", period_key="global_attn_every_n_layers", shift=0),
    ),
    "modernbert-decoder": _f(
        "modernbert_decoder",
        _d(
            "ModernBertDecoderConfig",
            hidden_size=768,
            num_attention_heads=12,
            max_position_embeddings=8192,
            num_hidden_layers=22,
            global_attn_every_n_layers=3,
        ),
        rope_form="by_layer_type",
        layer_bases=_MODERNBERT_BASES,
        scaling_layers=("full_attention", "sliding_attention"),
        layer_pattern=LayerPattern("periodic", period_key="global_attn_every_n_layers", shift=0),
    ),
    "molmo2_text": _f(
        "molmo2",
        _d(
            "Molmo2TextConfig",
            hidden_size=4096,
            num_attention_heads=32,
            head_dim=128,
            max_position_embeddings=36864,
            num_hidden_layers=36,
            rope_theta=10000.0,
        ),
    ),
    "moonshine": _f(
        "moonshine",
        _d(
            "MoonshineConfig",
            hidden_size=288,
            decoder_num_attention_heads=8,
            max_position_embeddings=512,
            decoder_num_hidden_layers=6,
            rope_theta=10000.0,
            partial_rotary_factor=0.9,
        ),
        attribute_map=(
            ("num_attention_heads", "decoder_num_attention_heads"),
            ("num_hidden_layers", "decoder_num_hidden_layers"),
        ),
        layout="interleaved",
    ),
    "moonshine_streaming": _f(
        "moonshine_streaming",
        _d(
            "MoonshineStreamingConfig",
            hidden_size=320,
            num_attention_heads=8,
            max_position_embeddings=4096,
            num_hidden_layers=6,
            rope_theta=10000.0,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.8},
        ),
        layout="interleaved",
    ),
    "moshi": _f(
        "moshi",
        _d(
            "MoshiConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=3000,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "muse_glimmer_assistant": _f(
        "muse_glimmer_assistant",
        _d(
            "MuseGlimmerAssistantConfig",
            hidden_size=6656,
            num_attention_heads=32,
            head_dim=128,
            max_position_embeddings=131072,
            num_hidden_layers=5,
            rope_theta=500000.0,
        ),
        layer_pattern=LayerPattern("constant", full="sliding_attention"),
    ),
    "muse_glimmer_text": _f(
        "muse_glimmer",
        _d(
            "MuseGlimmerTextConfig",
            hidden_size=6656,
            num_attention_heads=32,
            head_dim=128,
            max_position_embeddings=131072,
            num_hidden_layers=52,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("periodic", period=4, shift=0, from_end=True),
        nope="layer_rope_theta",
        nope_on_full_layers=True,
    ),
    "muse_glimmer_vision": _f(
        "muse_glimmer",
        _d(
            "MuseGlimmerVisionConfig",
            hidden_size=1536,
            num_attention_heads=16,
            max_position_embeddings=1024,
            num_hidden_layers=50,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("periodic", period=4, last="always", other="window_attention"),
        multiaxis="axial_hw",
        **_VISION,
    ),
    "muse_spark_text": _f(
        "muse_spark",
        _d(
            "MuseSparkTextConfig",
            hidden_size=8192,
            num_attention_heads=128,
            head_dim=64,
            max_position_embeddings=1048576,
            num_hidden_layers=62,
            rope_theta=10000.0,
            rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
        ),
        layer_pattern=LayerPattern("periodic", period=4, shift=0, from_end=True),
        nope="layer_rope_theta",
        nope_on_full_layers=True,
    ),
    "muse_spark_vision": _f(
        "muse_spark",
        _d(
            "MuseSparkVisionConfig",
            hidden_size=1536,
            num_attention_heads=16,
            max_position_embeddings=1024,
            num_hidden_layers=50,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("periodic", period=4, last="always", other="window_attention"),
        multiaxis="axial_hw",
        **_VISION,
    ),
    "nanochat": _f(
        "nanochat",
        _d(
            "NanoChatConfig",
            hidden_size=768,
            num_attention_heads=6,
            max_position_embeddings=2048,
            num_hidden_layers=12,
            rope_theta=10000.0,
        ),
        feature_order="swapped_halves",
    ),
    "nemotron": _f(
        "nemotron",
        _d(
            "NemotronConfig",
            hidden_size=6144,
            num_attention_heads=48,
            max_position_embeddings=4096,
            num_hidden_layers=32,
            rope_theta=10000.0,
            partial_rotary_factor=0.5,
        ),
    ),
    "nemotron3_5_transcribe_asr_audio": _f(
        "nemotron3_5_transcribe",
        _d(
            "Nemotron3_5TranscribeAsrAudioConfig",
            hidden_size=1280,
            num_attention_heads=10,
            max_position_embeddings=5000,
            num_hidden_layers=32,
            rope_theta=10000.0,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
            partial_rotary_factor=1.0,
        ),
    ),
    "nemotron3_5_transcribe_word_timestamp": _f(
        "nemotron3_5_transcribe",
        _d(
            "Nemotron3_5TranscribeWordTimestampConfig",
            hidden_size=1280,
            num_attention_heads=16,
            max_position_embeddings=5000,
            num_hidden_layers=2,
            rope_theta=10000.0,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        ),
    ),
    "nemotron3_diarization_audio": _f(
        "nemotron3_diarization",
        _d(
            "Nemotron3DiarizationAudioConfig",
            hidden_size=512,
            num_attention_heads=8,
            max_position_embeddings=5000,
            num_hidden_layers=31,
            rope_theta=10000.0,
            partial_rotary_factor=1.0,
        ),
    ),
    "neomme": _f(
        "neomme",
        _d(
            "NeoMMEConfig",
            hidden_size=1024,
            num_attention_heads=16,
            head_dim=64,
            max_position_embeddings=16384,
            num_hidden_layers=17,
        ),
        rope_form="by_layer_type",
        layer_bases=(
            LayerBase("full_attention", "rope_theta", 1000000.0, 0.25),
            LayerBase("sliding_attention", "rope_theta", 10000.0, 1.0),
        ),
        layer_pattern=LayerPattern("periodic", period=6, last="always"),
        multiaxis="axial_alternating",
    ),
    "neucodec": _f(
        "neucodec",
        _d(
            "NeuCodecConfig",
            hidden_size=1024,
            num_attention_heads=16,
            head_dim=64,
            max_position_embeddings=4096,
            num_hidden_layers=12,
            rope_theta=10000.0,
        ),
    ),
    "nomic_bert": _f(
        "nomic_bert",
        _d(
            "NomicBertConfig",
            hidden_size=768,
            num_attention_heads=12,
            max_position_embeddings=2048,
            num_hidden_layers=12,
            rope_theta=1000.0,
        ),
    ),
    "olmo": _f(
        "olmo",
        _d(
            "OlmoConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "olmo2": _f(
        "olmo2",
        _d(
            "Olmo2Config",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "olmo3": _f(
        "olmo3",
        _d("Olmo3Config", hidden_size=4096, num_attention_heads=32, max_position_embeddings=2048, num_hidden_layers=32),
        rope_form="by_layer_type",
        layer_bases=(
            LayerBase("full_attention", "rope_theta", 500000.0),
            LayerBase("sliding_attention", None, 500000.0),
        ),
        layer_pattern=LayerPattern("periodic", period=4),
    ),
    "olmo_hybrid": _f(
        "olmo_hybrid",
        _d(
            "OlmoHybridConfig",
            hidden_size=3840,
            num_attention_heads=30,
            max_position_embeddings=65536,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("periodic", period=4, last="if_none", other="linear_attention"),
        rope_optional=True,
    ),
    "olmoe": _f(
        "olmoe",
        _d(
            "OlmoeConfig",
            hidden_size=2048,
            num_attention_heads=16,
            max_position_embeddings=4096,
            num_hidden_layers=16,
            rope_theta=10000.0,
        ),
    ),
    "openai_privacy_filter": _f(
        "openai_privacy_filter",
        _d(
            "OpenAIPrivacyFilterConfig",
            hidden_size=640,
            num_attention_heads=14,
            head_dim=64,
            max_position_embeddings=131072,
            num_hidden_layers=8,
            rope_theta=150000.0,
            rope_parameters={
                "rope_type": "yarn",
                "factor": 32.0,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
                "original_max_position_embeddings": 4096,
            },
        ),
        layout="interleaved",
    ),
    "paddleocr_vl_text": _f(
        "paddleocr_vl",
        _d(
            "PaddleOCRTextConfig",
            hidden_size=1024,
            num_attention_heads=16,
            head_dim=128,
            max_position_embeddings=131072,
            num_hidden_layers=18,
            rope_theta=500000.0,
        ),
        multiaxis="mrope_chunked",
        rope_keys=_MROPE,
        mrope_section=(16, 24, 24),
    ),
    "paddleocr_vl_vision": _f(
        "paddleocr_vl",
        _d("PaddleOCRVisionConfig", hidden_size=1152, num_attention_heads=16, num_hidden_layers=27, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION,
    ),
    "pe_audio_encoder": _f(
        "pe_audio",
        _d(
            "PeAudioEncoderConfig",
            hidden_size=1792,
            num_attention_heads=14,
            head_dim=128,
            max_position_embeddings=10000,
            num_hidden_layers=6,
            rope_theta=20000,
        ),
        layout="interleaved",
    ),
    "pe_audio_video_encoder": _f(
        "pe_audio_video",
        _d(
            "PeAudioVideoEncoderConfig",
            hidden_size=1792,
            num_attention_heads=14,
            head_dim=128,
            max_position_embeddings=10000,
            num_hidden_layers=6,
            rope_theta=20000,
        ),
        layout="interleaved",
    ),
    "pe_video_encoder": _f(
        "pe_video",
        _d(
            "PeVideoEncoderConfig",
            hidden_size=1792,
            num_attention_heads=14,
            head_dim=128,
            max_position_embeddings=10000,
            num_hidden_layers=6,
            rope_theta=20000,
        ),
        layout="interleaved",
    ),
    "persimmon": _f(
        "persimmon",
        _d(
            "PersimmonConfig",
            hidden_size=4096,
            num_attention_heads=64,
            max_position_embeddings=16384,
            num_hidden_layers=36,
            rope_theta=10000.0,
            partial_rotary_factor=0.5,
        ),
    ),
    "phi": _f(
        "phi",
        _d(
            "PhiConfig",
            hidden_size=2048,
            num_attention_heads=32,
            max_position_embeddings=2048,
            num_hidden_layers=24,
            rope_theta=10000.0,
            partial_rotary_factor=0.5,
        ),
    ),
    "phi3": _f(
        "phi3",
        _d(
            "Phi3Config",
            hidden_size=3072,
            num_attention_heads=32,
            max_position_embeddings=4096,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
        **_PHI3_ROPE_TYPES,
    ),
    "phi4_multimodal": _f(
        "phi4_multimodal",
        _d(
            "Phi4MultimodalConfig",
            hidden_size=3072,
            num_attention_heads=32,
            max_position_embeddings=131072,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
        **_PHI3_ROPE_TYPES,
    ),
    "phimoe": _f(
        "phimoe",
        _d(
            "PhimoeConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=131072,
            num_hidden_layers=32,
            rope_theta=1000000.0,
        ),
    ),
    "pixtral": _f(
        "pixtral",
        _d("PixtralVisionConfig", hidden_size=1024, num_attention_heads=16, num_hidden_layers=24, rope_theta=10000.0),
        multiaxis="axial_hw_split_even_odd",
    ),
    "pocket_tts": _f(
        "pocket_tts",
        _d(
            "PocketTTSConfig",
            hidden_size=1024,
            num_attention_heads=16,
            max_position_embeddings=8192,
            num_hidden_layers=6,
            rope_theta=10000.0,
        ),
    ),
    "pocket_tts_audio_tokenizer": _f(
        "pocket_tts_audio_tokenizer",
        _d(
            "PocketTTSAudioTokenizerConfig",
            hidden_size=512,
            num_attention_heads=8,
            max_position_embeddings=8000,
            num_hidden_layers=2,
            rope_theta=10000.0,
        ),
    ),
    "pocket_tts_audio_tokenizer_decoder": _f(
        "pocket_tts_audio_tokenizer",
        _d(
            "PocketTTSAudioTokenizerDecoderConfig",
            hidden_size=512,
            num_attention_heads=8,
            max_position_embeddings=8000,
            num_hidden_layers=2,
            rope_theta=10000.0,
        ),
    ),
    "pocket_tts_audio_tokenizer_encoder": _f(
        "pocket_tts_audio_tokenizer",
        _d(
            "PocketTTSAudioTokenizerEncoderConfig",
            hidden_size=512,
            num_attention_heads=8,
            max_position_embeddings=8000,
            num_hidden_layers=2,
            rope_theta=10000.0,
        ),
    ),
    "qwen2": _f(
        "qwen2",
        _d(
            "Qwen2Config",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=32768,
            num_hidden_layers=32,
            use_sliding_window=False,
            sliding_window=4096,
            max_window_layers=28,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("windowed", gate_key="use_sliding_window"),
    ),
    "qwen2_5_omni_dit": _f(
        "qwen2_5_omni",
        _d(
            "Qwen2_5OmniDiTConfig",
            hidden_size=1024,
            num_attention_heads=16,
            head_dim=64,
            max_position_embeddings=32768,
            num_hidden_layers=22,
            rope_theta=10000.0,
        ),
    ),
    "qwen2_5_omni_talker": _f(
        "qwen2_5_omni",
        _d(
            "Qwen2_5OmniTalkerConfig",
            hidden_size=3584,
            num_attention_heads=28,
            head_dim=128,
            max_position_embeddings=32768,
            num_hidden_layers=28,
            use_sliding_window=False,
            sliding_window=32768,
            max_window_layers=28,
            rope_theta=1000000.0,
        ),
        layer_pattern=LayerPattern("windowed", gate_key="use_sliding_window"),
        multiaxis="mrope_chunked",
        rope_keys=_MROPE,
        mrope_section=(16, 24, 24),
    ),
    "qwen2_5_omni_text": _f(
        "qwen2_5_omni",
        _d(
            "Qwen2_5OmniTextConfig",
            hidden_size=3584,
            num_attention_heads=28,
            max_position_embeddings=32768,
            num_hidden_layers=28,
            use_sliding_window=False,
            sliding_window=32768,
            max_window_layers=28,
            rope_theta=1000000.0,
        ),
        layer_pattern=LayerPattern("windowed", gate_key="use_sliding_window"),
        multiaxis="mrope_chunked",
        rope_keys=_MROPE,
        mrope_section=(16, 24, 24),
    ),
    "qwen2_5_omni_vision_encoder": _f(
        "qwen2_5_omni",
        _d("Qwen2_5OmniVisionEncoderConfig", hidden_size=3584, num_heads=16, depth=32, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION_MAP,
    ),
    "qwen2_5_vl_text": _f(
        "qwen2_5_vl",
        _d(
            "Qwen2_5_VLTextConfig",
            hidden_size=8192,
            num_attention_heads=64,
            max_position_embeddings=32768,
            num_hidden_layers=80,
            use_sliding_window=False,
            sliding_window=4096,
            max_window_layers=80,
            rope_theta=1000000.0,
        ),
        layer_pattern=LayerPattern("windowed", gate_key="use_sliding_window"),
        multiaxis="mrope_chunked",
        rope_keys=_MROPE,
        mrope_section=(16, 24, 24),
    ),
    "qwen2_5_vl_vision": _f(
        "qwen2_5_vl",
        _d("Qwen2_5_VLVisionConfig", hidden_size=3584, num_heads=16, depth=32, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION_MAP,
    ),
    "qwen2_moe": _f(
        "qwen2_moe",
        _d(
            "Qwen2MoeConfig",
            hidden_size=2048,
            num_attention_heads=16,
            max_position_embeddings=32768,
            num_hidden_layers=24,
            use_sliding_window=False,
            max_window_layers=28,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("windowed_alternating", gate_key="use_sliding_window"),
    ),
    "qwen2_vl_text": _f(
        "qwen2_vl",
        _d(
            "Qwen2VLTextConfig",
            hidden_size=8192,
            num_attention_heads=64,
            max_position_embeddings=32768,
            num_hidden_layers=80,
            use_sliding_window=False,
            sliding_window=4096,
            max_window_layers=80,
            rope_theta=1000000.0,
        ),
        layer_pattern=LayerPattern("windowed", gate_key="use_sliding_window"),
        multiaxis="mrope_chunked",
        rope_keys=_MROPE,
        mrope_section=(16, 24, 24),
    ),
    "qwen2_vl_vision": _f(
        "qwen2_vl",
        _d("Qwen2VLVisionConfig", embed_dim=1280, num_heads=16, depth=32, rope_theta=10000.0),
        multiaxis="axial_hw",
        head_keys=("embed_dim", "num_heads"),
        **_VISION_MAP,
    ),
    "qwen3": _f(
        "qwen3",
        _d(
            "Qwen3Config",
            hidden_size=4096,
            num_attention_heads=32,
            head_dim=128,
            max_position_embeddings=32768,
            num_hidden_layers=32,
            use_sliding_window=False,
            sliding_window=4096,
            max_window_layers=28,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("windowed", gate_key="use_sliding_window"),
    ),
    "qwen3_5_moe_text": _f(
        "qwen3_5_moe",
        _d(
            "Qwen3_5MoeTextConfig",
            hidden_size=2048,
            num_attention_heads=16,
            head_dim=256,
            max_position_embeddings=32768,
            num_hidden_layers=40,
            rope_theta=10000.0,
            partial_rotary_factor=0.25,
            full_attention_interval=4,
        ),
        layer_pattern=LayerPattern("periodic", period_key="full_attention_interval", other="linear_attention"),
        multiaxis="mrope_interleaved",
        rope_keys=_MROPE,
        mrope_section=(11, 11, 10),
    ),
    "qwen3_5_moe_vision": _f(
        "qwen3_5_moe",
        _d("Qwen3_5MoeVisionConfig", hidden_size=1152, num_heads=16, depth=27, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION_MAP,
    ),
    "qwen3_5_text": _f(
        "qwen3_5",
        _d(
            "Qwen3_5TextConfig",
            hidden_size=4096,
            num_attention_heads=16,
            head_dim=256,
            max_position_embeddings=32768,
            num_hidden_layers=32,
            rope_theta=10000.0,
            partial_rotary_factor=0.25,
            full_attention_interval=4,
        ),
        layer_pattern=LayerPattern("periodic", period_key="full_attention_interval", other="linear_attention"),
        multiaxis="mrope_interleaved",
        rope_keys=_MROPE,
        mrope_section=(11, 11, 10),
    ),
    "qwen3_5_vision": _f(
        "qwen3_5",
        _d("Qwen3_5VisionConfig", hidden_size=1152, num_heads=16, depth=27, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION_MAP,
    ),
    "qwen3_moe": _f(
        "qwen3_moe",
        _d(
            "Qwen3MoeConfig",
            hidden_size=2048,
            num_attention_heads=32,
            max_position_embeddings=32768,
            num_hidden_layers=24,
            rope_theta=10000.0,
        ),
    ),
    "qwen3_next": _f(
        "qwen3_next",
        _d(
            "Qwen3NextConfig",
            hidden_size=2048,
            num_attention_heads=16,
            head_dim=256,
            max_position_embeddings=32768,
            num_hidden_layers=48,
            rope_theta=10000.0,
            partial_rotary_factor=0.25,
            full_attention_interval=4,
        ),
        layer_pattern=LayerPattern("periodic", period_key="full_attention_interval", other="linear_attention"),
    ),
    "qwen3_omni_moe_code2wav": _f(
        "qwen3_omni_moe",
        _d(
            "Qwen3OmniMoeCode2WavConfig",
            hidden_size=1024,
            num_attention_heads=16,
            max_position_embeddings=8000,
            num_hidden_layers=8,
            rope_theta=10000.0,
        ),
        derived="all_sliding",
    ),
    "qwen3_omni_moe_talker_code_predictor": _f(
        "qwen3_omni_moe",
        _d(
            "Qwen3OmniMoeTalkerCodePredictorConfig",
            hidden_size=1024,
            num_attention_heads=16,
            head_dim=128,
            max_position_embeddings=32768,
            num_hidden_layers=5,
            max_window_layers=28,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("windowed"),
    ),
    "qwen3_omni_moe_talker_text": _f(
        "qwen3_omni_moe",
        _d(
            "Qwen3OmniMoeTalkerTextConfig",
            hidden_size=1024,
            num_attention_heads=16,
            max_position_embeddings=32768,
            num_hidden_layers=20,
            rope_theta=10000.0,
        ),
        multiaxis="mrope_interleaved",
        rope_keys=_MROPE,
        mrope_section=(24, 20, 20),
    ),
    "qwen3_omni_moe_text": _f(
        "qwen3_omni_moe",
        _d(
            "Qwen3OmniMoeTextConfig",
            hidden_size=2048,
            num_attention_heads=28,
            max_position_embeddings=32768,
            num_hidden_layers=28,
            rope_theta=1000000.0,
        ),
        multiaxis="mrope_interleaved",
        rope_keys=_MROPE,
        mrope_section=(24, 20, 20),
    ),
    "qwen3_omni_moe_vision_encoder": _f(
        "qwen3_omni_moe",
        _d("Qwen3OmniMoeVisionEncoderConfig", hidden_size=1152, num_heads=16, depth=27, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION_MAP,
    ),
    "qwen3_vl_moe_text": _f(
        "qwen3_vl_moe",
        _d(
            "Qwen3VLMoeTextConfig",
            hidden_size=2048,
            num_attention_heads=16,
            max_position_embeddings=128000,
            num_hidden_layers=24,
            rope_theta=500000.0,
        ),
        multiaxis="mrope_interleaved",
        rope_keys=_MROPE,
        mrope_section=(24, 20, 20),
    ),
    "qwen3_vl_moe_vision": _f(
        "qwen3_vl_moe",
        _d("Qwen3VLMoeVisionConfig", hidden_size=1152, num_heads=16, depth=27, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION_MAP,
    ),
    "qwen3_vl_text": _f(
        "qwen3_vl",
        _d(
            "Qwen3VLTextConfig",
            hidden_size=4096,
            num_attention_heads=32,
            head_dim=128,
            max_position_embeddings=128000,
            num_hidden_layers=32,
            rope_theta=500000.0,
        ),
        multiaxis="mrope_interleaved",
        rope_keys=_MROPE,
        mrope_section=(24, 20, 20),
    ),
    "qwen3_vl_vision": _f(
        "qwen3_vl",
        _d("Qwen3VLVisionConfig", hidden_size=1152, num_heads=16, depth=27, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION_MAP,
    ),
    "qwen4_exp_text": _f(
        "qwen4_exp",
        _d(
            "Qwen4ExpTextConfig",
            hidden_size=2048,
            num_attention_heads=16,
            head_dim=256,
            max_position_embeddings=32768,
            num_hidden_layers=40,
            rope_theta=10000.0,
            full_attention_interval=4,
        ),
        layer_pattern=LayerPattern(
            "periodic", period_key="full_attention_interval", full="indexed_attention", other="linear_attention"
        ),
        multiaxis="mrope_interleaved",
        rope_keys=_MROPE,
        mrope_section=(11, 11, 10),
    ),
    "qwen4_exp_vision": _f(
        "qwen4_exp",
        _d("Qwen4ExpVisionConfig", hidden_size=1152, num_heads=16, depth=27, rope_theta=10000.0),
        multiaxis="axial_hw",
        **_VISION_MAP,
    ),
    "recurrent_gemma": _f(
        "recurrent_gemma",
        _d(
            "RecurrentGemmaConfig",
            hidden_size=2560,
            num_attention_heads=10,
            num_hidden_layers=26,
            block_types=("recurrent", "recurrent", "attention"),
            rope_theta=10000.0,
            partial_rotary_factor=0.5,
        ),
        attribute_map=(("sliding_window", "attention_window_size"), ("layer_types", "layers_block_type")),
        derived="recurrent_gemma",
    ),
    "sam2_video": _f(
        "sam2_video",
        _d(
            "Sam2VideoConfig",
            memory_attention_num_layers=4,
            memory_attention_hidden_size=256,
            memory_attention_downsample_rate=1,
            memory_attention_num_attention_heads=1,
            rope_theta=10000.0,
        ),
        **_SAM_MEMORY,
    ),
    "sam3_tracker_video": _f(
        "sam3_tracker_video",
        _d(
            "Sam3TrackerVideoConfig",
            memory_attention_num_layers=4,
            memory_attention_hidden_size=256,
            memory_attention_downsample_rate=1,
            memory_attention_num_attention_heads=1,
            rope_theta=10000.0,
        ),
        **_SAM_MEMORY,
    ),
    "sam3_vit_model": _f(
        "sam3",
        _d("Sam3ViTConfig", hidden_size=1024, num_attention_heads=16, num_hidden_layers=32, rope_theta=10000.0),
        multiaxis="axial_hw",
        layout="interleaved",
    ),
    "seed_oss": _f(
        "seed_oss",
        _d(
            "SeedOssConfig",
            hidden_size=4096,
            num_attention_heads=80,
            head_dim=128,
            max_position_embeddings=524288,
            num_hidden_layers=64,
            rope_theta=10000.0,
        ),
    ),
    "smollm3": _f(
        "smollm3",
        _d(
            "SmolLM3Config",
            hidden_size=2048,
            num_attention_heads=16,
            max_position_embeddings=32768,
            num_hidden_layers=36,
            no_rope_layer_interval=4,
            use_sliding_window=False,
            rope_theta=2000000.0,
        ),
        layer_pattern=LayerPattern("no_rope", gate_key="use_sliding_window"),
        nope="no_rope_layers",
    ),
    "solar_open": _f(
        "solar_open",
        _d(
            "SolarOpenConfig",
            hidden_size=4096,
            num_attention_heads=64,
            head_dim=128,
            max_position_embeddings=131072,
            num_hidden_layers=48,
            rope_theta=1000000.0,
        ),
    ),
    "stablelm": _f(
        "stablelm",
        _d(
            "StableLmConfig",
            hidden_size=2560,
            num_attention_heads=32,
            max_position_embeddings=4096,
            num_hidden_layers=32,
            rope_theta=10000.0,
            partial_rotary_factor=0.25,
        ),
    ),
    "starcoder2": _f(
        "starcoder2",
        _d(
            "Starcoder2Config",
            hidden_size=3072,
            num_attention_heads=24,
            max_position_embeddings=4096,
            num_hidden_layers=30,
            rope_theta=10000.0,
        ),
    ),
    "step3p5": _f(
        "step3p7",
        _d(
            "Step3p7TextConfig",
            hidden_size=4096,
            num_attention_heads=64,
            head_dim=128,
            max_position_embeddings=128000,
            num_hidden_layers=45,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("constant"),
    ),
    "step3p5_vision": _f(
        "step3p7",
        _d(
            "Step3p7VisionConfig",
            hidden_size=1536,
            num_attention_heads=16,
            max_position_embeddings=2704,
            num_hidden_layers=47,
            rope_theta=10000.0,
        ),
        multiaxis="axial_wh",
    ),
    "t5_gemma_module": _f(
        "t5gemma",
        _d(
            "T5GemmaModuleConfig",
            hidden_size=2304,
            num_attention_heads=8,
            head_dim=256,
            max_position_embeddings=8192,
            num_hidden_layers=26,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("periodic", period=2),
    ),
    "t5gemma2_decoder": _f(
        "t5gemma2",
        _d(
            "T5Gemma2DecoderConfig",
            hidden_size=2304,
            num_attention_heads=8,
            head_dim=256,
            max_position_embeddings=131072,
            num_hidden_layers=26,
            sliding_window_pattern=6,
        ),
        rope_form="by_layer_type",
        layer_bases=_GEMMA3_BASES,
        layer_pattern=LayerPattern("periodic", period_key="sliding_window_pattern"),
    ),
    "t5gemma2_text": _f(
        "t5gemma2",
        _d(
            "T5Gemma2TextConfig",
            hidden_size=2304,
            num_attention_heads=8,
            head_dim=256,
            max_position_embeddings=131072,
            num_hidden_layers=26,
            sliding_window_pattern=6,
        ),
        rope_form="by_layer_type",
        layer_bases=_GEMMA3_BASES,
        layer_pattern=LayerPattern("periodic", period_key="sliding_window_pattern"),
    ),
    "timesfm2_5": _f(
        "timesfm2_5",
        _d(
            "TimesFm2_5Config",
            hidden_size=1280,
            num_attention_heads=16,
            head_dim=80,
            max_position_embeddings=16384,
            num_hidden_layers=20,
            rope_theta=10000.0,
        ),
    ),
    "ultrabert": _f(
        "ultrabert",
        _d(
            "UltrabertConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=32768,
            num_hidden_layers=32,
            rope_theta=10000.0,
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "default", "rope_theta": 2560000.0},
            },
        ),
        layer_pattern=LayerPattern("periodic", period=3),
    ),
    "unlimited_ocr_text": _f(
        "unlimited_ocr",
        _d(
            "UnlimitedOcrTextConfig",
            hidden_size=1280,
            num_attention_heads=10,
            max_position_embeddings=32768,
            num_hidden_layers=12,
            sliding_window=128,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("windowed", other="reference_sliding_attention"),
        head_rule="derived",  # __post_init__ sets head_dim = hidden_size // num_attention_heads, whatever is given
    ),
    "vaultgemma": _f(
        "vaultgemma",
        _d(
            "VaultGemmaConfig",
            hidden_size=2304,
            num_attention_heads=8,
            head_dim=256,
            max_position_embeddings=8192,
            num_hidden_layers=26,
            rope_theta=10000.0,
        ),
        layer_pattern=LayerPattern("periodic", period=2),
    ),
    "video_llama_3_vision": _f(
        "video_llama_3",
        _d(
            "VideoLlama3VisionConfig", hidden_size=768, num_attention_heads=12, num_hidden_layers=12, rope_theta=10000.0
        ),
        multiaxis="axial_hw",
    ),
    "voxtral_realtime_encoder": _f(
        "voxtral_realtime",
        _d(
            "VoxtralRealtimeEncoderConfig",
            hidden_size=1280,
            num_attention_heads=32,
            head_dim=64,
            max_position_embeddings=1500,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "voxtral_realtime_text": _f(
        "voxtral_realtime",
        _d(
            "VoxtralRealtimeTextConfig",
            hidden_size=4096,
            num_attention_heads=32,
            max_position_embeddings=131072,
            num_hidden_layers=32,
            rope_theta=10000.0,
        ),
    ),
    "xcodec2": _f(
        "xcodec2",
        _d(
            "Xcodec2Config",
            hidden_size=1024,
            num_attention_heads=16,
            head_dim=64,
            max_position_embeddings=4096,
            num_hidden_layers=12,
            rope_theta=10000.0,
        ),
    ),
    "youtu": _f(
        "youtu",
        _d(
            "YoutuConfig",
            hidden_size=2048,
            num_attention_heads=16,
            max_position_embeddings=131072,
            num_hidden_layers=32,
            qk_nope_head_dim=128,
            qk_rope_head_dim=64,
            rope_interleave=True,
            rope_theta=10000.0,
        ),
        **_MLA,
    ),
    "zamba2": _f(
        "zamba2",
        _d(
            "Zamba2Config",
            hidden_size=2560,
            num_attention_heads=32,
            max_position_embeddings=4096,
            num_hidden_layers=54,
            rope_theta=10000.0,
            use_mem_rope=False,
        ),
        rope_switch=("use_mem_rope", True),  # Zamba2Model builds rotary_emb, and its attention rotates, only if true
        layer_pattern=LayerPattern("listed", cycle=_ZAMBA2_BLOCKS),
        head_rule="double_hidden",
        attribute_map=(("layer_types", "layers_block_type"), ("head_dim", "attention_head_dim")),
    ),
    "codegen": _f(
        "codegen",
        _d("CodeGenConfig", n_embd=4096, n_head=16, n_layer=28, n_positions=2048, rotary_dim=64),
        layout="interleaved",  # rotate_every_two: pairs (2i, 2i + 1)
        rope_form="fixed",
        fixed_theta=10000.0,  # create_sinusoidal_positions: 10000 ** (arange(0, dim, 2) / dim)
        rotary_dim_key="rotary_dim",  # the first rotary_dim features (None: all of them)
        attribute_map=_GPT_NAMES,
        head_rule="derived",  # its attention's head_dim is n_embd // n_head: a head_dim key is not read
    ),
    "esm": _f(
        "esm",
        _d(
            "EsmConfig",
            hidden_size=768,
            num_attention_heads=12,
            num_hidden_layers=12,
            max_position_embeddings=1026,
            rope_theta=10000.0,
            position_embedding_type="absolute",
        ),
        rope_form="theta_only",
        rope_switch=("position_embedding_type", "rotary"),  # EsmModel: rotary_embeddings only for "rotary"
        switch_off="absolute",
    ),
    "gptj": _f(
        "gptj",
        _d("GPTJConfig", n_embd=4096, n_head=16, n_layer=28, n_positions=2048, rotary_dim=64),
        layout="interleaved",
        rope_form="fixed",
        fixed_theta=10000.0,
        rotary_dim_key="rotary_dim",
        attribute_map=_GPT_NAMES,
        head_rule="derived",  # its attention's head_dim is n_embd // n_head: a head_dim key is not read
    ),
    "zaya": _f(
        "zaya",
        _d(
            "ZayaConfig",
            hidden_size=2048,
            num_attention_heads=8,
            head_dim=128,
            max_position_embeddings=131072,
            num_hidden_layers=40,
            rope_parameters={
                "hybrid": {"rope_type": "default", "rope_theta": 5000000.0, "partial_rotary_factor": 0.5},
                "hybrid_sliding": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
            },
        ),
        rope_form="as_given",
        layer_pattern=LayerPattern("constant", full="hybrid"),
    ),
}
"""The families of transformers v5.23 whose configuration builds with its defaults and rotates, by ``model_type``."""

PARTIAL_IGNORED = frozenset(
    """
    afmoe apertus arcee aria_text axk1 axk2 bailing_hybrid beam bitnet blt_global_transformer blt_local_decoder
    blt_local_encoder blt_patcher chameleon cohere cohere2 cohere2_moe cosmos3_edge_text csm
    csm_depth_decoder_model cwm dbrx deepseek_ocr2_encoder deepseek_ocr2_text deepseek_v2 deepseek_v3
    deepseek_v32 dia_decoder dia_encoder diffllama doge dots1 embedding_gemma2_text emu3_text_model eomt_dinov3
    ernie4_5 ernie4_5_moe ernie4_5_vl_moe_text esmc eurobert evolla exaone4 exaone_moe falcon falcon_h1
    flex_olmo flint gemma gemma2 gemma3_text gemma3n_text gemma4_text gemma4_unified_text glm_moe_dsa gpt_oss
    gradium_phonon_tts granite granite4_vision_text granite_docling_text granite_swa granitemoe granitemoe_swa
    granitemoehybrid granitemoeshared gte helium higgs_audio_v2 hrm_text hunyuan_v1_dense hunyuan_v1_moe
    hunyuan_vl_text hy_v3 hy_v4 hyperclovax idefics jais2 jetmoe jina_embeddings_v3 kolibri1
    kyutai_speech_to_text lasr_encoder lfm2 lfm2_moe lfm3 llama llama4_text longcat_flash mimi mimi_decoder
    mimi_encoder minicpm3 minimax ministral ministral3 mistral mistral4 mistral_large4_text mixtral
    mllama_text_model modernbert modernbert-decoder molmo2_text moshi muse_glimmer_assistant muse_glimmer_text
    muse_spark_text nanochat neucodec nomic_bert olmo olmo2 olmo3 olmo_hybrid olmoe openai_privacy_filter
    paddleocr_vl_text pe_audio_encoder pe_audio_video_encoder pe_video_encoder phimoe pocket_tts
    pocket_tts_audio_tokenizer pocket_tts_audio_tokenizer_decoder pocket_tts_audio_tokenizer_encoder qwen2
    qwen2_5_omni_dit qwen2_5_omni_talker qwen2_5_omni_text qwen2_5_vl_text qwen2_moe qwen2_vl_text qwen3
    qwen3_moe qwen3_omni_moe_code2wav qwen3_omni_moe_talker_code_predictor qwen3_omni_moe_talker_text
    qwen3_omni_moe_text qwen3_vl_moe_text qwen3_vl_text seed_oss smollm3 starcoder2 t5_gemma_module
    t5gemma2_decoder t5gemma2_text timesfm2_5 ultrabert unlimited_ocr_text vaultgemma voxtral_realtime_encoder
    voxtral_realtime_text xcodec2 youtu zamba2
    """.split()
)
"""The families whose rotary embedding's ``compute_default_rope_parameters`` never reads ``partial_rotary_factor``
(Llama's and its copies): under the default rope type they turn the whole head whatever the factor says, while the
other rope types' frequencies (``modeling_rope_utils``) cover ``int(head_dim * factor)`` features, which their
``apply_rotary_pos_emb`` cannot apply to the whole head. tests/test_model_zoo.py reads this set from each family's
rotary class."""

for _name in PARTIAL_IGNORED:
    FAMILIES[_name] = replace(FAMILIES[_name], partial_ignored=True)

ROTATES_UNREAD: dict[str, str] = {
    **dict.fromkeys(
        ("clvp", "clvp_decoder", "clvp_encoder"),
        "CLVP's speech encoders rotate max(projection_dim // (2 * num_attention_heads), 32) features at base 10000, "
        "a width its module derives from sizes; posenc has no entry for it",
    ),
    "dinov3_vit": "an image tower: its angles are patch-centre coordinates the module computes from the image (with "
    "training-time shift, jitter and rescale), not positions a caller gives",
    "sapiens2": "an image tower: its angles are patch-centre coordinates the module computes from the image, not "
    "positions a caller gives",
    "efficientloftr": "its rotary covers the whole hidden size at 4 x the head's frequencies (partial_rotary_factor "
    "4.0) on an image grid computed inside the module; posenc refuses partial_rotary_factor > 1",
    "esmfold2": "protein-structure coordinates and unit ids, rotated at frequencies of both kinds the module "
    "concatenates, not positions a caller gives",
    "lightglue": "its angles come from keypoint coordinates through a learned projection, not from positions",
    "musicflamingo": "its angles are audio timestamps times a window position, computed inside the module from "
    "timestamps; no position or coordinate posenc could be given",
    "roformer": "its angles come from a sinusoidal table indexed by the sequence's own offsets, not position_ids, and "
    "it rotates the values too when rotary_value is set",
    "seamless_m4t": "a speech encoder (conformer) that rotates when position_embeddings_type is 'rotary', at "
    "rotary_embedding_base; posenc has no entry for it",
    "vjepa2": "a video tower: three axes (time, height, width) of a third of the head each, on patch coordinates "
    "the module computes",
    "wav2vec2-bert": "a speech encoder (conformer) that rotates when position_embeddings_type is 'rotary', at "
    "rotary_embedding_base; posenc has no entry for it",
    "wav2vec2-conformer": "a speech encoder (conformer) that rotates when position_embeddings_type is 'rotary', at "
    "rotary_embedding_base; posenc has no entry for it",
}
"""The ``model_type`` values of transformers v5.23 whose modeling code rotates but that posenc does not read, with the
reason (tests/test_model_zoo.py finds every modeling file that calls a rotation function: each is a family of
:data:`FAMILIES` or listed here)."""
COMPOSITES: dict[str, str] = {
    "aria": "aria_text",
    "audioflamingo3": "qwen2",
    "aya_vision": "cohere2",
    "cohere2_vision": "cohere2",
    "cosmos3_edge": "cosmos3_edge_text",
    "cosmos3_omni": "qwen3_vl_text",
    "deepseek_ocr2": "deepseek_ocr2_text",
    "deepseek_vl": "llama",
    "deepseek_vl_hybrid": "llama",
    "diffusion_gemma": "diffusion_gemma_text",
    "dots3_note": "dots3_note_text",
    "embedding_gemma2": "embedding_gemma2_text",
    "emu3": "emu3_text_model",
    "ernie4_5_vl_moe": "ernie4_5_vl_moe_text",
    "exaone4_5": "exaone4",
    "fast_vlm": "qwen2",
    "fun_asr_nano": "qwen3",
    "fuyu": "persimmon",
    "gemma3": "gemma3_text",
    "gemma3n": "gemma3n_text",
    "gemma4": "gemma4_text",
    "gemma4_unified": "gemma4_unified_text",
    "gemma4_unified_assistant": "gemma4_unified_text",
    "glm46v": "glm4v_text",
    "glm4v": "glm4v_text",
    "glm4v_moe": "glm4v_moe_text",
    "glm_image": "glm_image_text",
    "glm_ocr": "glm_ocr_text",
    "glmasr": "llama",
    "glmga": "glm4v_text",
    "got_ocr2": "qwen2",
    "granite4_vision": "granite4_vision_text",
    "granite_docling": "granite_docling_text",
    "granite_speech": "granite",
    "granite_speech_plus": "granite",
    "hunyuan_vl": "hunyuan_vl_text",
    "hyperclovax_vision_v2": "hyperclovax",
    "idefics2": "mistral",
    "idefics3": "llama",
    "internvl": "qwen2",
    "janus": "llama",
    "jev": "qwen3_5_text",
    "kimi_k25": "deepseek_v3",
    "lfm2_vl": "lfm2",
    "lfm3_vl": "lfm3",
    "lighton_ocr": "qwen3",
    "llama4": "llama4_text",
    "llava": "llama",
    "llava_next": "llama",
    "llava_next_video": "llama",
    "llava_onevision": "qwen2",
    "minicpm_ocr": "qwen3_5_text",
    "minicpmv4_6": "qwen3_5_text",
    "minicpmv4_7": "qwen3_5_text",
    "minimax_m3_vl": "minimax_m3_vl_text",
    "mistral3": "mistral",
    "mistral_large4": "mistral_large4_text",
    "mllama": "mllama_text_model",
    "modernvbert": "modernbert",
    "molmo2": "molmo2_text",
    "moss_transcribe_diarize": "qwen3",
    "muse_glimmer": "muse_glimmer_text",
    "muse_spark": "muse_spark_text",
    "musicflamingo": "qwen2",
    "ovis2": "qwen2",
    "paddleocr_vl": "paddleocr_vl_text",
    "paligemma": "gemma",
    "pe_audio": "modernbert",
    "pe_audio_video": "modernbert",
    "pe_video": "modernbert",
    "perception_lm": "llama",
    "pp_chart2table": "qwen2",
    "qianfan_ocr": "qwen3",
    "qwen2_5_omni_thinker": "qwen2_5_omni_text",
    "qwen2_5_vl": "qwen2_5_vl_text",
    "qwen2_audio": "qwen2",
    "qwen2_vl": "qwen2_vl_text",
    "qwen3_5": "qwen3_5_text",
    "qwen3_5_moe": "qwen3_5_moe_text",
    "qwen3_asr": "qwen3",
    "qwen3_omni_moe_thinker": "qwen3_omni_moe_text",
    "qwen3_vl": "qwen3_vl_text",
    "qwen3_vl_moe": "qwen3_vl_moe_text",
    "qwen4_exp": "qwen4_exp_text",
    "shieldgemma2": "gemma3_text",
    "smolvlm": "llama",
    "step3p7": "step3p5",
    "t5gemma2_encoder": "t5gemma2_text",
    "ultravbert": "ultrabert",
    "unlimited_ocr": "unlimited_ocr_text",
    "vibevoice": "qwen2",
    "vibevoice_asr": "qwen2",
    "video_llama_3": "qwen2",
    "video_llava": "llama",
    "vipllava": "llama",
    "voxtral": "llama",
    "voxtral_realtime": "voxtral_realtime_text",
}
"""Composite ``model_type`` values of transformers v5.23 (a language model inside, built from their ``text_config``)
and the ``model_type`` of the language model their class builds by default, where posenc reads that family: a
composite config is refused with this name, for the caller to pass its ``text_config``. tests/test_model_zoo.py
builds each class to check the names."""
