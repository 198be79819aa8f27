"""PyTorch modules, one file per scheme, each tested against its NumPy reference in :mod:`posenc`.

- :class:`SinusoidalPositionalEncoding` (:mod:`posenc.nn.sinusoid`): adds :func:`posenc.sinusoidal`.
- :class:`LearnedPositionalEmbedding` (:mod:`posenc.nn.learned`): adds one trained vector per position.
- :class:`RotaryEmbedding` (:mod:`posenc.nn.rotary`): rotates queries or keys, :func:`posenc.rotate`.
"""

from posenc.nn.learned import LearnedPositionalEmbedding
from posenc.nn.rotary import RotaryEmbedding
from posenc.nn.sinusoid import SinusoidalPositionalEncoding

__all__ = ["SinusoidalPositionalEncoding", "LearnedPositionalEmbedding", "RotaryEmbedding"]
