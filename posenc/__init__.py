"""posenc: positional encodings for transformers, small enough to read in one sitting.

The NumPy core is imported here; the PyTorch modules live in :mod:`posenc.nn` and the book's plotting
helpers in :mod:`posenc.plotting`, so that ``import posenc`` needs NumPy only.
"""

from posenc._validation import LAYOUTS, MAX_TABLE_ELEMENTS
from posenc.encoding import frequencies, layout_permutation, sinusoidal, translation_matrix
from posenc.prototypes import binary_code, dyadic_dials, normalised_count, raw_count

__all__ = [
    "LAYOUTS",
    "MAX_TABLE_ELEMENTS",
    "frequencies",
    "layout_permutation",
    "sinusoidal",
    "translation_matrix",
    "raw_count",
    "normalised_count",
    "binary_code",
    "dyadic_dials",
]

__version__ = "0.1.0"
