"""posenc: positional encodings for transformers, small enough to read in one sitting.

The public surface, by scheme. NumPy reference functions are imported here, so ``import posenc`` needs
NumPy only; the PyTorch modules live in :mod:`posenc.nn`, and the chapters' own helpers (prototype codes,
plots, toy models) in :mod:`posenc.chapters`, which no model needs.

Sinusoidal (Vaswani et al., 2017), :mod:`posenc.sinusoid`
    :func:`frequencies`, :func:`sinusoidal`, :func:`translation_matrix`, :func:`layout_permutation`

Rotary (Su et al., 2021), :mod:`posenc.rotary`
    :func:`rotary_frequencies`, :func:`rotary_attention_factor`, :func:`rotate`,
    :func:`rotary_weight_permutation`
"""

from importlib.metadata import version as _version

from posenc._validation import LAYOUTS, MAX_TABLE_ELEMENTS
from posenc.rotary import ROPE_TYPES, rotary_attention_factor, rotary_frequencies, rotary_weight_permutation, rotate
from posenc.sinusoid import frequencies, layout_permutation, sinusoidal, translation_matrix

__all__ = [
    "LAYOUTS",
    "MAX_TABLE_ELEMENTS",
    # sinusoidal
    "frequencies",
    "layout_permutation",
    "sinusoidal",
    "translation_matrix",
    # rotary
    "ROPE_TYPES",
    "rotary_attention_factor",
    "rotary_frequencies",
    "rotary_weight_permutation",
    "rotate",
]

__version__ = _version("posenc")
