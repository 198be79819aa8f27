"""PyTorch modules, one file per scheme, each tested against its NumPy reference in :mod:`posenc`.

- :class:`SinusoidalPositionalEncoding` (:mod:`posenc.nn.sinusoid`): adds :func:`posenc.sinusoidal`.
- :class:`LearnedPositionalEmbedding` (:mod:`posenc.nn.learned`): adds one trained vector per position.
- :class:`RotaryEmbedding` (:mod:`posenc.nn.rotary`): rotates queries or keys, :func:`posenc.rotate`.
- :class:`MultiAxisRotaryEmbedding` (:mod:`posenc.nn.multiaxis`): on several axes, :func:`posenc.rotate_multiaxis`.
- :class:`ALiBiBias` (:mod:`posenc.nn.alibi`): the fixed linear bias of :func:`posenc.alibi_bias`.
- :class:`T5RelativeBias` (:mod:`posenc.nn.t5`): a learned scalar per :func:`posenc.t5_relative_bucket`.
- :class:`ShawRelativeAttention` (:mod:`posenc.nn.shaw`): attention with :func:`posenc.shaw_relative_indices`.
- :func:`causal_mask_mod` (:mod:`posenc.nn.flex`): the causal mask for FlexAttention, whose ``score_mod`` the
  ``score_mod()`` methods of :class:`ALiBiBias` and :class:`T5RelativeBias` give.
- Position from content: :class:`ForgettingGate`, :func:`forgetting_bias` and :func:`forgetting_score_mod`
  (:mod:`posenc.nn.forgetting`, forgetting attention), :func:`stick_breaking_weights` and
  :func:`stick_breaking_attention` (:mod:`posenc.nn.stick_breaking`), :class:`CoPE` (:mod:`posenc.nn.cope`),
  :class:`AttentionSink` (:mod:`posenc.nn.sink`, a learned sink logit per head), :class:`PaTHGate` and
  :func:`path_logits` (:mod:`posenc.nn.path_attention`, PaTH's Householder products).
- :func:`rotary_embedding` and :func:`query_scale` (:mod:`posenc.nn.config`): the module of one layer kind of a
  :class:`posenc.RotaryPlan` (a transformers config, read), and the query multipliers some families apply.

No forward path reads a tensor's values on the host (no ``.item()``, ``.tolist()``, NumPy or copy to the CPU): a
tensor offset or positions stays on its device, and its values are checked there (``tests/test_host_reads.py``).
Importing it calls ``posenc.nn._vml.settle_vml_dispatch()`` once: on the CPU, oneMKL picks the kernel of PyTorch's
``cos``, ``sin``, ``exp`` and other vectorised functions on their first call, and a first call split across threads can
run a low-accuracy kernel on one thread's part (pytorch/pytorch#188792; one element of each, on one thread, first).
Needs PyTorch, which posenc installs only with its ``torch`` extra.
"""

try:
    import torch  # noqa: F401 - only to say which extra is missing, before the submodules fail on it
except ImportError as error:
    raise ImportError(
        'posenc.nn needs PyTorch: pip install "posenc[torch]" (from a clone of the repository: pip install ".[torch]")'
    ) from error

from posenc.nn._vml import settle_vml_dispatch
from posenc.nn.alibi import ALiBiBias
from posenc.nn.config import query_scale, rotary_embedding
from posenc.nn.cope import CoPE
from posenc.nn.flex import causal_mask_mod
from posenc.nn.forgetting import ForgettingGate, forgetting_bias, forgetting_score_mod
from posenc.nn.learned import LearnedPositionalEmbedding
from posenc.nn.multiaxis import MultiAxisRotaryEmbedding
from posenc.nn.path_attention import PaTHGate, path_logits
from posenc.nn.rotary import RotaryEmbedding
from posenc.nn.shaw import ShawRelativeAttention
from posenc.nn.sink import AttentionSink
from posenc.nn.sinusoid import SinusoidalPositionalEncoding
from posenc.nn.stick_breaking import stick_breaking_attention, stick_breaking_weights
from posenc.nn.t5 import T5RelativeBias

# Before any forward path computes a cos or sin table on several threads: see posenc.nn._vml.
settle_vml_dispatch()

__all__ = [
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "RotaryEmbedding",
    "MultiAxisRotaryEmbedding",
    "ALiBiBias",
    "T5RelativeBias",
    "ShawRelativeAttention",
    "causal_mask_mod",
    "rotary_embedding",
    "query_scale",
    "ForgettingGate",
    "forgetting_bias",
    "forgetting_score_mod",
    "stick_breaking_weights",
    "stick_breaking_attention",
    "CoPE",
    "AttentionSink",
    "PaTHGate",
    "path_logits",
]
