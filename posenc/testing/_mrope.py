"""The check of multimodal rotary embedding (M-RoPE): which axis each pair follows."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

import posenc
from posenc._validation import (
    ROTARY_LAYOUTS,
    RotaryLayout,
    check_choice,
    check_int,
    check_real,
)
from posenc.testing._common import (
    Implementation,
    as_array,
    as_tensor,
    call_implementation,
    check_implementation,
    expect_shape,
    is_torch_module,
    pairs_of,
    wrap_angle,
)

_MROPE_AXES = ("time", "height", "width")


def _axis_of_pairs(angles: NDArray[np.float64], atol: float) -> NDArray[np.intp]:
    """For angles ``(3, seq, n_pairs)``, one axis swept at a time: each pair's axis (-1 none, 3 several)."""
    moves = (np.abs(angles) > atol).any(axis=1)  # (3, n_pairs)
    axis = np.where(moves.sum(axis=0) == 1, moves.argmax(axis=0), np.where(moves.any(axis=0), 3, -1))
    return np.asarray(axis, dtype=np.intp)


def assert_mrope_axes_match(
    rotate_fn: Implementation,
    mrope_section: Sequence[int],
    *,
    assignment: posenc.MRopeAssignment = "chunked",
    head_dim: int = 128,
    base: float = 10000.0,
    layout: RotaryLayout = "interleaved",
    atol: float = 1e-5,
) -> None:
    r"""Check which axis (time, height, width) each rotated pair of a multimodal rotary embedding follows.

    Parameters
    ----------
    rotate_fn : callable
        ``rotate_fn(x, positions)`` rotates ``x`` ``(seq, head_dim)`` by the coordinates ``positions``
        ``(seq, 3)`` (time, height, width of each token) and returns the same shape; a ``torch.nn.Module``
        such as :class:`posenc.nn.MultiAxisRotaryEmbedding` is called ``rotate_fn(x, positions=positions)``.
    mrope_section : sequence of three ints
        The model's ``mrope_section``, as :func:`posenc.mrope_frequencies` takes it.
    assignment : {"chunked", "interleaved"}, default "chunked"
        The model's assignment of pairs to axes: Qwen2-VL's contiguous sections or Qwen3-VL's interleaving.
    head_dim : int, default 128
        Width of one head, all rotated; even, at most 4096.
    base : float, default 10000.0
        ``rope_theta``; greater than 1.
    layout : {"interleaved", "halves"}, default "interleaved"
        How ``rotate_fn`` pairs features, as in :func:`posenc.rotate_multiaxis`.
    atol : float, default 1e-5
        Largest accepted angle error in radians; also the smallest angle counted as a turn.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If some pair turns with another axis than ``mrope_frequencies(head_dim, mrope_section,
        assignment=assignment)`` gives it (the message lists the pairs, and says when the implementation
        follows the other assignment), if an angle is otherwise off by more than ``atol``, or if
        ``rotate_fn`` raises.
    TypeError, ValueError
        If an argument of the check is invalid.

    Notes
    -----
    A text token has equal time, height and width coordinates, so every assignment of pairs to axes gives it
    the same angles: a kernel that follows the wrong assignment is right on text and wrong on images and
    video. The check rotates the unit vector :math:`(1, 0)` in every pair at 16 tokens, three times, moving
    one axis at a time (coordinates 1 to 16 on that axis, 0 on the others), reads each pair's angle and
    compares it with :func:`posenc.rotate_multiaxis` and the frequencies of :func:`posenc.mrope_frequencies`.

    References
    ----------
    .. [1] P. Wang et al., "Qwen2-VL: Enhancing Vision-Language Model's Perception of the World at Any
       Resolution", arXiv:2409.12191.

    Examples
    --------
    >>> import posenc
    >>> f = posenc.mrope_frequencies(128, [24, 20, 20], assignment="interleaved")
    >>> assert_mrope_axes_match(lambda x, p: posenc.rotate_multiaxis(x, p, f), [24, 20, 20], assignment="interleaved")
    >>> chunked = posenc.mrope_frequencies(128, [24, 20, 20])
    >>> assert_mrope_axes_match(  # doctest: +ELLIPSIS
    ...     lambda x, p: posenc.rotate_multiaxis(x, p, chunked), [24, 20, 20], assignment="interleaved"
    ... )
    Traceback (most recent call last):
        ...
    AssertionError: ... of 64 pairs follow the wrong axis...the chunked assignment...
    """
    check_implementation(rotate_fn, "rotate_fn")
    head_dim = check_int(head_dim, "head_dim", minimum=2, maximum=4096, even=True)
    assignment = check_choice(assignment, "assignment", posenc.MROPE_ASSIGNMENTS)
    base = check_real(base, "base", above=1.0)
    layout = check_choice(layout, "layout", ROTARY_LAYOUTS)
    atol = check_real(atol, "atol", above=0.0)
    frequencies = posenc.mrope_frequencies(head_dim, mrope_section, assignment=assignment, base=base)
    seq = 16
    x = np.zeros((seq, head_dim))
    first, _ = pairs_of(x, layout)
    first[...] = 1.0  # (1, 0) in every pair: the output is (cos, sin) of each angle
    got_angles, want_angles = [], []
    for axis in range(3):
        positions = np.zeros((seq, 3))
        positions[:, axis] = np.arange(1, seq + 1)
        description = f"rotate_fn(x, positions) with {_MROPE_AXES[axis]} 1..{seq}, the other axes 0"
        if is_torch_module(rotate_fn):
            out = call_implementation(
                rotate_fn, description, as_tensor(x, "float32"), positions=as_tensor(positions, "float64")
            )
        else:
            out = call_implementation(rotate_fn, description, x.copy(), positions.copy())
        out = as_array(out, description)
        expect_shape(out, x.shape, description)
        got_cos, got_sin = pairs_of(out, layout)
        ref_cos, ref_sin = pairs_of(posenc.rotate_multiaxis(x, positions, frequencies, layout=layout), layout)
        got_angles.append(np.arctan2(got_sin, got_cos))
        want_angles.append(np.arctan2(ref_sin, ref_cos))
    got, want = np.array(got_angles), np.array(want_angles)  # (axis, token, pair)
    error = np.abs(wrap_angle(got - want))
    error = np.where(np.isfinite(error), error, np.inf)
    if error.max() <= atol:
        return
    got_axis, want_axis = _axis_of_pairs(got, atol), _axis_of_pairs(want, atol)
    wrong = np.flatnonzero(got_axis != want_axis)
    names = (*_MROPE_AXES, "several axes")
    if wrong.size == 0:
        worst_axis, token, pair = (int(i) for i in np.unravel_index(int(np.argmax(error)), error.shape))
        raise AssertionError(
            f"every pair follows the right axis, but angles are off by up to {error.max():.3g} rad (atol {atol:g}), "
            f"worst at pair {pair} of token {token} with {_MROPE_AXES[worst_axis]} {token + 1}: check the frequencies "
            f"and the base ({base:g})"
        )
    shown = ", ".join(
        f"pair {i} follows {names[got_axis[i]] if got_axis[i] >= 0 else 'no axis'}, not {names[want_axis[i]]}"
        for i in wrong[:4]
    )
    other: posenc.MRopeAssignment = "interleaved" if assignment == "chunked" else "chunked"
    try:  # the other assignment of the same sections, if they are valid for it
        other_frequencies = posenc.mrope_frequencies(head_dim, mrope_section, assignment=other, base=base)
    except ValueError:
        other_frequencies = None
    hint = ""
    if other_frequencies is not None and np.array_equal(got_axis, np.abs(other_frequencies).argmax(axis=0)):
        hint = (
            f" The pairs follow the {other} assignment of the same sections: the kernel ignores the model's "
            f"{assignment!r} assignment (Qwen2-VL's is chunked, Qwen3-VL's interleaved)."
        )
    more = f" and {wrong.size - 4} more" if wrong.size > 4 else ""
    raise AssertionError(
        f"{wrong.size} of {head_dim // 2} pairs follow the wrong axis for mrope_section {list(mrope_section)} and "
        f"assignment {assignment!r}: {shown}{more}.{hint} Text tokens, whose three "
        f"coordinates are equal, do not show this; images and video do."
    )
