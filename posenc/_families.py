"""What transformers' modeling code does with positions that a config does not say: one entry per ``model_type``.

Read from transformers v5.23, each entry from the modeling file its :attr:`Family.source` names (the directory
``transformers/models/<directory>/``). Used by :mod:`posenc.config`; tests/test_model_zoo.py checks every entry
against that family's rotary embedding class and ``apply_rotary_pos_emb``.

An entry holds only what differs from the common case: pairs ``(i, i + rotary_dim / 2)`` (``rotate_half``) on the
first ``int(head_dim * partial_rotary_factor)`` features of every attention layer of a ``(head_dim or
hidden_size // num_attention_heads)``-wide head, one position axis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
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

QueryRule = Literal["llama4_temperature", "llama4_beta", "scalable_softmax"]

DerivedAttributes = Literal["bamba", "falcon_h1", "recurrent_gemma", "all_sliding", "longcat"]
"""Attributes a config class computes (properties not written to config.json), derived the same way from a dict:
``layers_block_type`` from ``attn_layer_indices`` (Bamba), ``"hybrid"`` everywhere (Falcon-H1), ``block_types``
cycled (RecurrentGemma), ``"sliding_attention"`` everywhere (Qwen3-Omni's Code2Wav), ``num_hidden_layers = 2 *
num_layers`` (LongCat-Flash: two attentions per layer)."""

NO_ATTENTION_TYPES = ("linear_attention", "conv", "mamba")
"""Layer types without softmax attention (recurrent or convolutional layers): they never rotate."""


@dataclass(frozen=True)
class Family:
    """The facts of one ``model_type`` (see the module docstring for the defaults)."""

    directory: str
    layout: RotaryLayout = "halves"
    interleave_key: str | None = None  # a config flag, default True, that picks layout (else halves)
    nope: NoPERule | None = None
    rotary: Literal["first", "mla", "last"] = "first"
    head_keys: tuple[str, str] = ("hidden_size", "num_attention_heads")
    layer_count_keys: tuple[str, ...] = ("num_hidden_layers", "depth", "num_layers", "encoder_layers")
    aliases: tuple[tuple[str, str], ...] = ()
    rope_labels: tuple[str, ...] = ()
    rope_keys: tuple[str, ...] = ("max_position_embeddings",)
    partial_default: float | None = None
    alpha_key: bool = False
    multiaxis: MultiAxis | None = None
    mrope_section: tuple[int, ...] | None = None
    softmax_mscale: bool = False
    query_scaling: QueryRule | None = None
    modeling: str | None = None
    head_rule: Literal["default", "sam_memory"] = "default"
    feature_order: FeatureOrder = "natural"
    frequency_scale: float = 1.0
    rope_optional: bool = False
    mla_head: Literal["rope", "nope_plus_rope", "config"] = "rope"
    attribute_map: tuple[tuple[str, str], ...] = ()  # the config class's attribute_map: (name, key in config.json)
    derived: DerivedAttributes | None = None
    per_layer_theta: bool = False
    local_base_key: bool = False
    sliding_pattern_key: bool = False

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


def _f(directory: str, **facts: Any) -> Family:
    return Family(directory, **facts)


_VISION = dict(layer_count_keys=("depth", "num_hidden_layers"))
_VISION_MAP = dict(_VISION, attribute_map=(("num_attention_heads", "num_heads"), ("num_hidden_layers", "depth")))
_MROPE = ("mrope_section", "mrope_interleaved", "max_position_embeddings")
_MLA = dict(rotary="mla", layout="interleaved", interleave_key="rope_interleave", softmax_mscale=True)
_MLA_INTERLEAVED = dict(rotary="mla", layout="interleaved", softmax_mscale=True)
_MLA_HALVES = dict(rotary="mla", softmax_mscale=True)
_SAM_MEMORY = dict(
    multiaxis="axial_xy",
    layout="interleaved",
    head_rule="sam_memory",
    layer_count_keys=("memory_attention_num_layers",),
)

FAMILIES: dict[str, Family] = {
    "afmoe": _f("afmoe"),
    "apertus": _f("apertus"),
    "arcee": _f("arcee"),
    "aria_text": _f("aria"),
    "axk1": _f("axk1", **_MLA),
    "axk2": _f("axk2", **_MLA_INTERLEAVED),
    "bailing_hybrid": _f(
        "bailing_hybrid",
        attribute_map=(("max_position_embeddings", "model_max_length"),),
        rotary="mla",
        layout="interleaved",
        softmax_mscale=True,
    ),
    "bamba": _f("bamba", attribute_map=(("layer_types", "layers_block_type"),), derived="bamba", partial_default=0.5),
    "beam": _f("beam", query_scaling="scalable_softmax"),
    "bitnet": _f("bitnet"),
    "blt_global_transformer": _f("blt", layout="interleaved"),
    "blt_local_decoder": _f("blt", layout="interleaved"),
    "blt_local_encoder": _f("blt", layout="interleaved"),
    "blt_patcher": _f("blt", layout="interleaved"),
    "chameleon": _f("chameleon"),
    "cohere": _f("cohere", layout="interleaved"),
    "cohere2": _f("cohere2", layout="interleaved", nope="sliding_only", sliding_pattern_key=True),
    "cohere2_moe": _f("cohere2_moe", layout="interleaved", nope="sliding_or_dense_prefix"),
    "cohere_compass_vision": _f("cohere_compass", multiaxis="axial_hw", **_VISION_MAP),
    "cosmos3_edge_text": _f(
        "cosmos3_edge", multiaxis="mrope_interleaved", rope_keys=_MROPE, mrope_section=(24, 20, 20)
    ),
    "csm": _f("csm"),
    "csm_depth_decoder_model": _f("csm"),
    "cwm": _f("cwm"),
    "dbrx": _f(
        "dbrx",
        attribute_map=(
            ("num_attention_heads", "n_heads"),
            ("hidden_size", "d_model"),
            ("num_hidden_layers", "n_layers"),
            ("max_position_embeddings", "max_seq_len"),
        ),
    ),
    "deepseek_ocr2_encoder": _f("deepseek_ocr2"),
    "deepseek_ocr2_text": _f("deepseek_ocr2"),
    "deepseek_v2": _f("deepseek_v2", rotary="mla", layout="interleaved", softmax_mscale=True),
    "deepseek_v3": _f("deepseek_v3", **_MLA),
    "deepseek_v32": _f("deepseek_v32", **_MLA_INTERLEAVED),
    "deepseek_v4": _f("deepseek_v4", layout="interleaved", rotary="last", rope_labels=("main", "compress")),
    "dia_decoder": _f("dia"),
    "dia_encoder": _f("dia"),
    "diffllama": _f("diffllama"),
    "diffusion_gemma_text": _f("diffusion_gemma"),
    "doge": _f("doge"),
    "dots1": _f("dots1"),
    "dots3_note_audio_encoder": _f("dots3_note"),
    "dots3_note_text": _f("dots3_note", **_MLA_INTERLEAVED, mla_head="config"),
    "dots3_note_vision_encoder": _f("dots3_note", multiaxis="axial_hw", **_VISION),
    "edgetam_video": _f("edgetam_video", **_SAM_MEMORY),
    "embedding_gemma2_text": _f("embedding_gemma2"),
    "emu3_text_model": _f("emu3"),
    "eomt_dinov3": _f("eomt_dinov3", multiaxis="axial_hw", frequency_scale=2 * math.pi),
    "ernie4_5": _f("ernie4_5", layout="interleaved"),
    "ernie4_5_moe": _f("ernie4_5_moe", layout="interleaved"),
    "ernie4_5_vl_moe_text": _f(
        "ernie4_5_vl_moe",
        layout="interleaved",
        multiaxis="mrope_hw_alternating",
        rope_keys=_MROPE,
        mrope_section=(22, 22, 20),
    ),
    "ernie4_5_vl_moe_vision": _f("ernie4_5_vl_moe", multiaxis="axial_hw", **_VISION_MAP),
    "esmc": _f("esmc"),
    "eurobert": _f("eurobert"),
    "evolla": _f("evolla"),
    "exaone4": _f("exaone4", nope="sliding_only_if_hybrid"),
    "exaone4_5_vision": _f("exaone4_5", multiaxis="axial_hw", **_VISION_MAP),
    "exaone_moe": _f("exaone_moe", nope="sliding_only_if_hybrid"),
    "falcon": _f("falcon"),
    "falcon_h1": _f("falcon_h1", attribute_map=(("layer_types", "layers_block_type"),), derived="falcon_h1"),
    "flex_olmo": _f("flex_olmo"),
    "flint": _f("flint"),
    "gemma": _f("gemma"),
    "gemma2": _f("gemma2"),
    "gemma3_text": _f("gemma3", local_base_key=True, sliding_pattern_key=True),
    "gemma3n_text": _f("gemma3n", local_base_key=True),
    "gemma4_text": _f("gemma4"),
    "gemma4_unified_text": _f("gemma4_unified"),
    "gemma4_vision": _f("gemma4", multiaxis="axial_hw", feature_order="halves_per_axis"),
    "glm": _f("glm", layout="interleaved", partial_default=0.5),
    "glm4": _f("glm4", layout="interleaved", partial_default=0.5),
    "glm4_moe": _f("glm4_moe", partial_default=0.5),
    "glm4_moe_lite": _f("glm4_moe_lite", attribute_map=(("head_dim", "qk_rope_head_dim"),), **_MLA),
    "glm4v_moe_text": _f(
        "glm4v_moe", multiaxis="mrope_chunked", rope_keys=_MROPE, partial_default=0.5, mrope_section=(8, 12, 12)
    ),
    "glm4v_moe_vision": _f("glm4v_moe", multiaxis="axial_hw", **_VISION_MAP),
    "glm4v_text": _f(
        "glm4v", layout="interleaved", multiaxis="mrope_chunked", rope_keys=_MROPE, mrope_section=(8, 12, 12)
    ),
    "glm4v_vision": _f("glm4v", multiaxis="axial_hw", **_VISION_MAP),
    "glm5_next_vision": _f("glm5_next", multiaxis="axial_hw", **_VISION_MAP),
    "glm_image_text": _f("glm_image", multiaxis="mrope_chunked", rope_keys=_MROPE, mrope_section=(8, 12, 12)),
    "glm_moe_dsa": _f("glm_moe_dsa", rotary="mla", layout="interleaved", softmax_mscale=True),
    "glm_ocr_text": _f(
        "glm_ocr", layout="interleaved", multiaxis="mrope_chunked", rope_keys=_MROPE, mrope_section=(8, 12, 12)
    ),
    "glm_ocr_vision": _f("glm_ocr", multiaxis="axial_hw", **_VISION_MAP),
    "glmasr_encoder": _f("glmasr", partial_default=0.5),
    "gpt_neox": _f(
        "gpt_neox",
        aliases=(("rotary_emb_base", "rope_theta"), ("rotary_pct", "partial_rotary_factor")),
        partial_default=0.25,
    ),
    "gpt_neox_japanese": _f(
        "gpt_neox_japanese", aliases=(("rotary_emb_base", "rope_theta"), ("rotary_pct", "partial_rotary_factor"))
    ),
    "gpt_oss": _f("gpt_oss"),
    "gradium_phonon_tts": _f("gradium_phonon_tts"),
    "granite": _f("granite"),
    "granite4_vision_text": _f("granite4_vision"),
    "granite_docling_text": _f("granite_docling"),
    "granite_swa": _f("granite_swa", nope="layer_rope_theta", per_layer_theta=True),
    "granitemoe": _f("granitemoe"),
    "granitemoe_swa": _f("granitemoe_swa", nope="layer_rope_theta", per_layer_theta=True),
    "granitemoehybrid": _f("granitemoehybrid"),
    "granitemoeshared": _f("granitemoeshared"),
    "gte": _f("gte"),
    "helium": _f("helium", layout="interleaved"),
    "higgs_audio_v2": _f("higgs_audio_v2"),
    "hrm_text": _f("hrm_text"),
    "hunyuan_v1_dense": _f("hunyuan_v1_dense", alpha_key=True, rope_keys=("alpha", "max_position_embeddings")),
    "hunyuan_v1_moe": _f("hunyuan_v1_moe", alpha_key=True, rope_keys=("alpha", "max_position_embeddings")),
    "hunyuan_vl_text": _f("hunyuan_vl", multiaxis="mrope_unpaired", rope_keys=_MROPE),
    "hy_v3": _f("hy_v3"),
    "hy_v4": _f("hy_v4", **_MLA_HALVES),
    "hyperclovax": _f("hyperclovax"),
    "idefics": _f("idefics"),
    "inkling2_vision": _f("inkling2", multiaxis="axial_wh", layout="interleaved"),
    "jais2": _f("jais2"),
    "jetmoe": _f("jetmoe", attribute_map=(("head_dim", "kv_channels"),)),
    "jina_embeddings_v3": _f("jina_embeddings_v3"),
    "kimi_k25_vision": _f("kimi_k25", multiaxis="axial_wh_pairs"),
    "kolibri1": _f("kolibri1", nope="sliding_only_if_hybrid"),
    "kyutai_speech_to_text": _f("kyutai_speech_to_text"),
    "laguna": _f("laguna"),
    "lasr_encoder": _f("lasr"),
    "lfm2": _f("lfm2"),
    "lfm2_moe": _f("lfm2_moe"),
    "lfm3": _f("lfm3"),
    "lfm3_vl_vision": _f("lfm3_vl", multiaxis="axial_hw"),
    "llama": _f("llama"),
    "llama4_text": _f("llama4", layout="interleaved", nope="no_rope_layers", query_scaling="llama4_temperature"),
    "llama4_vision_model": _f("llama4", multiaxis="axial_xy", layout="interleaved"),
    "longcat_flash": _f("longcat_flash", derived="longcat", rotary="mla", layout="interleaved", softmax_mscale=True),
    "mellum": _f("mellum"),
    "mimi": _f("mimi"),
    "mimi_decoder": _f("mimi"),
    "mimi_encoder": _f("mimi"),
    "mimo_v2_flash": _f("mimo_v2_flash"),
    "minicpm3": _f("minicpm3", rotary="mla", softmax_mscale=True),
    "minimax": _f("minimax"),
    "minimax_m2": _f("minimax_m2"),
    "minimax_m3_vl_text": _f("minimax_m3_vl"),
    "minimax_m3_vl_vision": _f("minimax_m3_vl", multiaxis="axial_thw"),
    "ministral": _f("ministral"),
    "ministral3": _f(
        "ministral3", query_scaling="llama4_beta", rope_keys=("llama_4_scaling_beta", "max_position_embeddings")
    ),
    "mistral": _f("mistral"),
    "mistral4": _f(
        "mistral4",
        rotary="mla",
        mla_head="nope_plus_rope",
        layout="interleaved",
        interleave_key="rope_interleave",
        softmax_mscale=True,
        query_scaling="llama4_beta",
        rope_keys=("llama_4_scaling_beta", "max_position_embeddings"),
    ),
    "mistral_large4_text": _f(
        "mistral_large4", rotary="mla", layout="interleaved", nope="no_rope_layers", softmax_mscale=True
    ),
    "mixtral": _f("mixtral"),
    "mlcd_vision_model": _f("mlcd", multiaxis="axial_hw", **_VISION),
    "mllama_text_model": _f("mllama"),
    "modernbert": _f("modernbert"),
    "modernbert-decoder": _f("modernbert_decoder"),
    "molmo2_text": _f("molmo2"),
    "moonshine": _f(
        "moonshine",
        attribute_map=(
            ("num_attention_heads", "decoder_num_attention_heads"),
            ("num_hidden_layers", "decoder_num_hidden_layers"),
        ),
        layout="interleaved",
    ),
    "moonshine_streaming": _f("moonshine_streaming", layout="interleaved"),
    "moshi": _f("moshi"),
    "muse_glimmer_assistant": _f("muse_glimmer_assistant"),
    "muse_glimmer_text": _f("muse_glimmer", nope="layer_rope_theta"),
    "muse_glimmer_vision": _f("muse_glimmer", multiaxis="axial_hw", **_VISION),
    "muse_spark_text": _f("muse_spark", nope="layer_rope_theta"),
    "muse_spark_vision": _f("muse_spark", multiaxis="axial_hw", **_VISION),
    "nanochat": _f("nanochat", feature_order="swapped_halves"),
    "nemotron": _f("nemotron", partial_default=0.5),
    "nemotron3_5_transcribe_asr_audio": _f("nemotron3_5_transcribe", partial_default=0.5),
    "nemotron3_5_transcribe_word_timestamp": _f("nemotron3_5_transcribe", partial_default=0.5),
    "nemotron3_diarization_audio": _f("nemotron3_diarization"),
    "neomme": _f("neomme", multiaxis="axial_alternating"),
    "neucodec": _f("neucodec"),
    "nomic_bert": _f("nomic_bert"),
    "olmo": _f("olmo"),
    "olmo2": _f("olmo2"),
    "olmo3": _f("olmo3"),
    "olmo_hybrid": _f("olmo_hybrid", rope_optional=True),
    "olmoe": _f("olmoe"),
    "openai_privacy_filter": _f("openai_privacy_filter", layout="interleaved"),
    "paddleocr_vl_text": _f("paddleocr_vl", multiaxis="mrope_chunked", rope_keys=_MROPE, mrope_section=(16, 24, 24)),
    "paddleocr_vl_vision": _f("paddleocr_vl", multiaxis="axial_hw", **_VISION),
    "pe_audio_encoder": _f("pe_audio", layout="interleaved"),
    "pe_audio_video_encoder": _f("pe_audio_video", layout="interleaved"),
    "pe_video_encoder": _f("pe_video", layout="interleaved"),
    "persimmon": _f("persimmon", partial_default=0.5),
    "phi": _f("phi", partial_default=0.5),
    "phi3": _f("phi3"),
    "phi4_multimodal": _f("phi4_multimodal"),
    "phimoe": _f("phimoe"),
    "pixtral": _f("pixtral", multiaxis="axial_hw_split_even_odd"),
    "pocket_tts": _f("pocket_tts"),
    "pocket_tts_audio_tokenizer": _f("pocket_tts_audio_tokenizer"),
    "pocket_tts_audio_tokenizer_decoder": _f("pocket_tts_audio_tokenizer"),
    "pocket_tts_audio_tokenizer_encoder": _f("pocket_tts_audio_tokenizer"),
    "qwen2": _f("qwen2"),
    "qwen2_5_omni_dit": _f("qwen2_5_omni"),
    "qwen2_5_omni_talker": _f("qwen2_5_omni", multiaxis="mrope_chunked", rope_keys=_MROPE, mrope_section=(16, 24, 24)),
    "qwen2_5_omni_text": _f("qwen2_5_omni", multiaxis="mrope_chunked", rope_keys=_MROPE, mrope_section=(16, 24, 24)),
    "qwen2_5_omni_vision_encoder": _f("qwen2_5_omni", multiaxis="axial_hw", **_VISION_MAP),
    "qwen2_5_vl_text": _f("qwen2_5_vl", multiaxis="mrope_chunked", rope_keys=_MROPE, mrope_section=(16, 24, 24)),
    "qwen2_5_vl_vision": _f("qwen2_5_vl", multiaxis="axial_hw", **_VISION_MAP),
    "qwen2_moe": _f("qwen2_moe"),
    "qwen2_vl_text": _f("qwen2_vl", multiaxis="mrope_chunked", rope_keys=_MROPE, mrope_section=(16, 24, 24)),
    "qwen2_vl_vision": _f("qwen2_vl", multiaxis="axial_hw", head_keys=("embed_dim", "num_heads"), **_VISION_MAP),
    "qwen3": _f("qwen3"),
    "qwen3_5_moe_text": _f(
        "qwen3_5_moe", multiaxis="mrope_interleaved", rope_keys=_MROPE, partial_default=0.25, mrope_section=(11, 11, 10)
    ),
    "qwen3_5_moe_vision": _f("qwen3_5_moe", multiaxis="axial_hw", **_VISION_MAP),
    "qwen3_5_text": _f(
        "qwen3_5", multiaxis="mrope_interleaved", rope_keys=_MROPE, partial_default=0.25, mrope_section=(11, 11, 10)
    ),
    "qwen3_5_vision": _f("qwen3_5", multiaxis="axial_hw", **_VISION_MAP),
    "qwen3_moe": _f("qwen3_moe"),
    "qwen3_next": _f("qwen3_next", partial_default=0.25),
    "qwen3_omni_moe_code2wav": _f("qwen3_omni_moe", derived="all_sliding"),
    "qwen3_omni_moe_talker_code_predictor": _f("qwen3_omni_moe"),
    "qwen3_omni_moe_talker_text": _f(
        "qwen3_omni_moe", multiaxis="mrope_interleaved", rope_keys=_MROPE, mrope_section=(24, 20, 20)
    ),
    "qwen3_omni_moe_text": _f(
        "qwen3_omni_moe", multiaxis="mrope_interleaved", rope_keys=_MROPE, mrope_section=(24, 20, 20)
    ),
    "qwen3_omni_moe_vision_encoder": _f("qwen3_omni_moe", multiaxis="axial_hw", **_VISION_MAP),
    "qwen3_vl_moe_text": _f(
        "qwen3_vl_moe", multiaxis="mrope_interleaved", rope_keys=_MROPE, mrope_section=(24, 20, 20)
    ),
    "qwen3_vl_moe_vision": _f("qwen3_vl_moe", multiaxis="axial_hw", **_VISION_MAP),
    "qwen3_vl_text": _f("qwen3_vl", multiaxis="mrope_interleaved", rope_keys=_MROPE, mrope_section=(24, 20, 20)),
    "qwen3_vl_vision": _f("qwen3_vl", multiaxis="axial_hw", **_VISION_MAP),
    "qwen4_exp_text": _f("qwen4_exp", multiaxis="mrope_interleaved", rope_keys=_MROPE, mrope_section=(11, 11, 10)),
    "qwen4_exp_vision": _f("qwen4_exp", multiaxis="axial_hw", **_VISION_MAP),
    "recurrent_gemma": _f(
        "recurrent_gemma",
        attribute_map=(("sliding_window", "attention_window_size"), ("layer_types", "layers_block_type")),
        derived="recurrent_gemma",
        partial_default=0.5,
    ),
    "sam2_video": _f("sam2_video", **_SAM_MEMORY),
    "sam3_tracker_video": _f("sam3_tracker_video", **_SAM_MEMORY),
    "sam3_vit_model": _f("sam3", multiaxis="axial_hw", layout="interleaved"),
    "seed_oss": _f("seed_oss"),
    "smollm3": _f("smollm3", nope="no_rope_layers"),
    "solar_open": _f("solar_open"),
    "stablelm": _f("stablelm", partial_default=0.25),
    "starcoder2": _f("starcoder2"),
    "step3p5": _f("step3p7"),
    "step3p5_vision": _f("step3p7", multiaxis="axial_wh"),
    "t5_gemma_module": _f("t5gemma"),
    "t5gemma2_decoder": _f("t5gemma2"),
    "t5gemma2_text": _f("t5gemma2"),
    "timesfm2_5": _f("timesfm2_5"),
    "ultrabert": _f("ultrabert"),
    "unlimited_ocr_text": _f("unlimited_ocr"),
    "vaultgemma": _f("vaultgemma"),
    "video_llama_3_vision": _f("video_llama_3", multiaxis="axial_hw"),
    "voxtral_realtime_encoder": _f("voxtral_realtime"),
    "voxtral_realtime_text": _f("voxtral_realtime"),
    "xcodec2": _f("xcodec2"),
    "youtu": _f("youtu", **_MLA),
    "zamba2": _f("zamba2", attribute_map=(("layer_types", "layers_block_type"), ("head_dim", "attention_head_dim"))),
    "zaya": _f("zaya", partial_default=0.5),
}
"""The families of transformers v5.23 whose configuration builds with its defaults and rotates, by ``model_type``."""
