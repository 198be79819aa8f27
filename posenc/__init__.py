"""posenc: positional encodings for transformers, small enough to read in one sitting.

The public surface, by scheme. NumPy reference functions are imported here, so ``import posenc`` needs
NumPy only; the PyTorch modules live in :mod:`posenc.nn`, and the book's own helpers (prototype codes,
plots, toy models, the benchmark) live with the book, in ``book/posenc_book``, outside this package.

Sinusoidal (Vaswani et al., 2017), :mod:`posenc.sinusoid`
    :func:`frequencies`, :func:`sinusoidal`, :func:`translation_matrix`, :func:`layout_permutation`

Rotary (Su et al., 2021), :mod:`posenc.rotary`
    :func:`rotary_frequencies`, :func:`rotary_attention_factor`, :func:`rotate`,
    :func:`rotary_weight_permutation`; :class:`RopeScaling`, a context-extension scaling parsed once from a
    transformers-style dict

ALiBi (Press et al., 2022), :mod:`posenc.alibi`
    :func:`alibi_slopes`, :func:`alibi_bias`

T5 relative buckets (Raffel et al., 2020), :mod:`posenc.t5`
    :func:`t5_relative_bucket`

Clipped relative positions (Shaw et al., 2018), :mod:`posenc.shaw`
    :func:`shaw_relative_indices`

Rotary on several axes (Heo et al., 2024; Wang et al., 2024), :mod:`posenc.multiaxis`
    :func:`axial_frequencies`, :func:`mrope_frequencies`, :func:`rotate_multiaxis`: axial 2D/3D RoPE,
    multimodal RoPE (``mrope_section``, chunked or interleaved) and any frequency matrix (RoPE-Mixed)

Xu et al.'s condition on a rotary head's frequencies (Xu et al., 2024), :mod:`posenc.base_condition`
    :func:`base_condition_holds` (does a head with these frequencies keep the sum of cos(m theta_i) non-negative
    at every distance m below a length?), :func:`base_condition_sum`, :func:`base_condition_error`

Position from content, each its own module: forgetting attention (Lin et al., 2025), :mod:`posenc.forgetting`
    :func:`forgetting_bias`; stick-breaking attention (Tan et al., 2025), :mod:`posenc.stick_breaking`
    :func:`stick_breaking_weights`; contextual positions (Golovneva et al., 2024), :mod:`posenc.cope`
    :func:`cope_positions`, :func:`cope_logits`; GPT-OSS's learned sink, :mod:`posenc.sink` :func:`sink_softmax`;
    PaTH's Householder products (Yang et al., 2025), :mod:`posenc.path_attention` :func:`path_logits`

A transformers model's positions, :mod:`posenc.config`
    :class:`RotaryPlan` (``RotaryPlan.from_config(config)``: which layers rotate, with which base, scaling, width,
    layout and axes, read from a transformers config object or ``config.json`` dict), :class:`LayerRotary` (one
    layer kind), :class:`QueryScaling` and :func:`query_scale` (the position-dependent query multipliers of
    Llama 4, Ministral 3 and Mistral 4); :func:`posenc.nn.rotary_embedding` builds a layer's module

What a configuration does with positions, and its pitfalls, :mod:`posenc.check`
    :func:`check_config` (a ``config.json``, a model directory, its dict or a config object: one
    :class:`KindCheck` per layer kind, the defaults filled in, a :class:`CheckWarning` per pitfall, Xu et al.'s
    condition at a context length as a :class:`ContextCheck`), :class:`ConfigCheck`; ``posenc check
    config.json`` on the command line

Types and constants
    :data:`Layout` and :data:`LAYOUTS` (sinusoidal table layouts), :data:`RotaryLayout` and
    :data:`ROTARY_LAYOUTS` (rotary pair layouts), :data:`RopeType` and :data:`ROPE_TYPES` (rotary
    scalings), :data:`MAX_TABLE_ELEMENTS` (the largest table any function builds). Every public callable
    is annotated; the package ships ``py.typed``.
"""

from importlib.metadata import version as _version

from posenc._validation import LAYOUTS, MAX_TABLE_ELEMENTS, ROTARY_LAYOUTS, Layout, RotaryLayout
from posenc.alibi import alibi_bias, alibi_slopes
from posenc.base_condition import base_condition_error, base_condition_holds, base_condition_sum
from posenc.check import CHECK_SCHEMA, CheckWarning, ConfigCheck, ContextCheck, KindCheck, check_config
from posenc.config import QUERY_SCALE_KINDS, LayerRotary, QueryScaleKind, QueryScaling, RotaryPlan, query_scale
from posenc.cope import cope_logits, cope_positions
from posenc.forgetting import forgetting_bias
from posenc.multiaxis import (
    MROPE_ASSIGNMENTS,
    MRopeAssignment,
    axial_frequencies,
    mrope_frequencies,
    rotate_multiaxis,
)
from posenc.path_attention import path_logits
from posenc.rotary import (
    ROPE_TYPES,
    RopeScaling,
    RopeType,
    rotary_attention_factor,
    rotary_frequencies,
    rotary_weight_permutation,
    rotate,
)
from posenc.shaw import shaw_relative_indices
from posenc.sink import sink_softmax
from posenc.sinusoid import frequencies, layout_permutation, sinusoidal, translation_matrix
from posenc.stick_breaking import stick_breaking_weights
from posenc.t5 import t5_relative_bucket

__all__ = [
    "LAYOUTS",
    "MAX_TABLE_ELEMENTS",
    "ROTARY_LAYOUTS",
    "Layout",
    "RotaryLayout",
    # sinusoidal
    "frequencies",
    "layout_permutation",
    "sinusoidal",
    "translation_matrix",
    # rotary
    "ROPE_TYPES",
    "RopeScaling",
    "RopeType",
    "rotary_attention_factor",
    "rotary_frequencies",
    "rotary_weight_permutation",
    "rotate",
    # rotary on several axes
    "MROPE_ASSIGNMENTS",
    "MRopeAssignment",
    "axial_frequencies",
    "mrope_frequencies",
    "rotate_multiaxis",
    # Xu et al.'s condition on the frequencies
    "base_condition_error",
    "base_condition_holds",
    "base_condition_sum",
    # a transformers model's positions
    "QUERY_SCALE_KINDS",
    "LayerRotary",
    "QueryScaleKind",
    "QueryScaling",
    "RotaryPlan",
    "query_scale",
    # what a configuration does with positions, and its pitfalls (posenc check)
    "CHECK_SCHEMA",
    "CheckWarning",
    "ConfigCheck",
    "ContextCheck",
    "KindCheck",
    "check_config",
    # relative-position biases
    "alibi_bias",
    "alibi_slopes",
    "shaw_relative_indices",
    "t5_relative_bucket",
    # position from content
    "cope_logits",
    "cope_positions",
    "forgetting_bias",
    "path_logits",
    "sink_softmax",
    "stick_breaking_weights",
]

__version__ = _version("posenc")
