"""Property checks for positional-encoding code: give one your implementation, get an AssertionError if it is wrong.

Each ``assert_*`` function here calls an implementation you pass in (a function, or a PyTorch module),
compares what it returns with a property that every correct implementation has, computed with posenc's own
float64 reference, and raises ``AssertionError`` with a message that says which input broke the property,
by how much, and what usually causes that. It returns ``None`` when the property holds. posenc's own
implementations pass every check; the book's chapter :doc:`/notebooks/10_bug_gallery` runs each check on
small faulty implementations that reproduce bugs reported in public issue trackers, and shows them failing.

Conventions shared by the checks:

* The implementation receives NumPy ``float64`` arrays, except a ``torch.nn.Module``, which receives
  ``float32`` tensors (and tensor positions). It may return a NumPy array, anything ``np.asarray``
  accepts, or a tensor of any floating dtype; the check converts the result to ``float64``.
* An implementation that raises an exception fails the check: the ``AssertionError`` names the call and
  chains the original exception.
* Bad arguments *to the check itself* (not an implementation, a negative size, an unknown layout) raise
  ``TypeError`` or ``ValueError`` naming the parameter, as everywhere in posenc.

Sinusoidal
    :func:`assert_sinusoidal_matches_reference`, :func:`assert_sinusoidal_odd_width_handled`
Rotary (RoPE)
    :func:`assert_rotary_angles_accurate`, :func:`assert_rotary_scores_depend_on_offset_only`,
    :func:`assert_rotary_offset_matches_slice`, :func:`assert_rotary_calls_independent`,
    :func:`assert_rotary_uses_sequence_axis`,
    :func:`assert_layouts_agree_after_permutation`, :func:`assert_yarn_attention_factor`,
    :func:`assert_mrope_axes_match`
A whole model, from its transformers config
    :func:`assert_rotary_matches_config`
A key cache that evicts tokens and shifts the positions of the rest
    :func:`assert_rerotated_keys_accurate`
A rotary operator, across real configs (the conformance suite)
    :func:`assert_rotary_conforms`, :class:`RotaryCase`, :func:`rotary_cases`, :func:`rotary_positions`; the pytest
    plugin's ``rotary_case`` fixture, and the Hypothesis strategies of :mod:`posenc.testing.strategies`
ALiBi and T5
    :func:`assert_alibi_slopes_match_reference`, :func:`assert_alibi_offset_matches_slice`,
    :func:`assert_t5_buckets_in_range`,
    :func:`assert_t5_buckets_exact`, :func:`t5_float32_boundaries`
"""

from __future__ import annotations

from posenc.testing._alibi import assert_alibi_offset_matches_slice, assert_alibi_slopes_match_reference
from posenc.testing._cache import assert_rerotated_keys_accurate
from posenc.testing._config import assert_rotary_matches_config
from posenc.testing._conformance import RotaryCase, assert_rotary_conforms, rotary_cases, rotary_positions
from posenc.testing._mrope import assert_mrope_axes_match
from posenc.testing._rotary import (
    assert_layouts_agree_after_permutation,
    assert_rotary_angles_accurate,
    assert_rotary_calls_independent,
    assert_rotary_offset_matches_slice,
    assert_rotary_scores_depend_on_offset_only,
    assert_rotary_uses_sequence_axis,
    assert_yarn_attention_factor,
)
from posenc.testing._sinusoidal import assert_sinusoidal_matches_reference, assert_sinusoidal_odd_width_handled
from posenc.testing._t5 import assert_t5_buckets_exact, assert_t5_buckets_in_range, t5_float32_boundaries

__all__ = [
    "assert_sinusoidal_matches_reference",
    "assert_sinusoidal_odd_width_handled",
    "assert_rotary_angles_accurate",
    "assert_rotary_scores_depend_on_offset_only",
    "assert_rotary_offset_matches_slice",
    "assert_rotary_calls_independent",
    "assert_rotary_uses_sequence_axis",
    "assert_layouts_agree_after_permutation",
    "assert_alibi_slopes_match_reference",
    "assert_t5_buckets_in_range",
    "assert_t5_buckets_exact",
    "t5_float32_boundaries",
    "assert_alibi_offset_matches_slice",
    "assert_yarn_attention_factor",
    "assert_mrope_axes_match",
    "assert_rotary_matches_config",
    "assert_rerotated_keys_accurate",
    "assert_rotary_conforms",
    "RotaryCase",
    "rotary_cases",
    "rotary_positions",
]
