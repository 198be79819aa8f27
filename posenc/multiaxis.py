r"""Rotary position embedding on more than one axis: axial 2D/3D RoPE and multimodal RoPE (M-RoPE).

A token of an image has two coordinates (row, column), a token of a video three (time, row, column). Rotary
position embedding extends to them by giving each rotated pair of a head a frequency *per axis*: pair ``i``
of a token at coordinates :math:`p = (p_0, \dots, p_{n-1})` turns by the angle

.. math:: \phi_i(p) = \sum_a p_a \, F_{a,i},

with a frequency matrix :math:`F` of shape ``(n_axes, n_pairs)``. The rotation at :math:`p` composed with
the inverse rotation at :math:`p'` is the rotation by :math:`\phi(p - p')`, so the scores
:math:`\langle R_p q, R_{p'} k\rangle` depend on the offset :math:`p - p'` along each axis only, whatever
:math:`F` is. The schemes differ in :math:`F`:

- *axial* (:func:`axial_frequencies`): each pair follows one axis; the pairs are split into ``n_axes``
  contiguous blocks, block ``a`` holding the frequencies of a 1-D rotary embedding of ``head_dim / n_axes``
  features, as in torchtune's ``VisionRotaryPositionalEmbeddings``, Qwen2-VL's vision encoder (Heo et al.,
  2024, "RoPE-Axial") and rotary-embedding-torch's ``get_axial_freqs`` with ``freqs_for="lang"`` (its
  ``freqs_for="pixel"`` mode spaces the frequencies linearly and spreads each axis over [-1, 1] instead);
- *M-RoPE* (:func:`mrope_frequencies`): each pair follows one of (time, height, width) with the frequency it
  has in a 1-D rotary embedding of the whole head, the pairs assigned in ``mrope_section`` contiguous
  chunks (Qwen2-VL) or in turn (Qwen3-VL);
- *mixed* (Heo et al., 2024, "RoPE-Mixed"): every entry of :math:`F` is free, and learned.

:func:`rotate_multiaxis` applies any :math:`F` in float64 (the reference of
:class:`posenc.nn.MultiAxisRotaryEmbedding`).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc._validation import (
    MAX_TABLE_ELEMENTS,
    ROTARY_LAYOUTS,
    RotaryLayout,
    check_choice,
    check_d_model,
    check_exact_integers,
    check_int,
    check_real,
    check_table_size,
)
from posenc.rotary import rotary_frequencies

__all__ = [
    "MROPE_ASSIGNMENTS",
    "MRopeAssignment",
    "axial_frequencies",
    "mrope_frequencies",
    "rotate_multiaxis",
]

MRopeAssignment = Literal["chunked", "interleaved"]
"""How M-RoPE assigns frequency pairs to (time, height, width): see :func:`posenc.mrope_frequencies`."""

MROPE_ASSIGNMENTS: tuple[MRopeAssignment, ...] = get_args(MRopeAssignment)
"""The values of :data:`MRopeAssignment`, in that order."""


def axial_frequencies(head_dim: int, n_axes: int, *, base: float = 10000.0) -> NDArray[np.float64]:
    r"""Frequency matrix of axial rotary embedding: the head's pairs split into one block per axis.

    Parameters
    ----------
    head_dim : int
        Features per head, all rotated; a positive multiple of ``2 * n_axes``.
    n_axes : int
        Coordinates per token: 1 (a sequence), 2 (an image: row, column), 3 (a video: time, row, column) ...;
        at least 1, at most ``head_dim // 2``.
    base : float, default 10000.0
        The constant :math:`\theta` of each axis's geometric progression; finite and greater than 1.

    Returns
    -------
    frequencies : (n_axes, head_dim // 2) ndarray of float64
        Row ``a`` is zero except on pairs ``a * k, ..., (a + 1) * k - 1`` (``k = head_dim // (2 * n_axes)``),
        which hold ``posenc.rotary_frequencies(head_dim // n_axes, base=base)``: pair ``a * k + j`` turns by
        ``positions[..., a] * base ** (-2 * j / (head_dim // n_axes))``.

    Raises
    ------
    TypeError
        If ``head_dim`` or ``n_axes`` is not an int or ``base`` not a real number.
    ValueError
        If ``head_dim`` is not positive, ``n_axes`` is outside ``[1, head_dim // 2]``, ``head_dim`` is not a
        multiple of ``2 * n_axes``, or ``base <= 1``.

    Notes
    -----
    This is RoPE-Axial of Heo et al. (2024): in their code (``compute_axial_cis``) the first half of a
    head's pairs turn with the x coordinate and the second half with
    y, each half at the frequencies ``theta ** (-4 k / head_dim)`` of a 1-D embedding of ``head_dim // 2``
    features. The same split is made by torchtune's ``VisionRotaryPositionalEmbeddings``
    (``dim = head_dim // 2``, x first, interleaved pairs), by Qwen2-VL's vision encoder in transformers
    (``Qwen2VLVisionRotaryEmbedding``: height first, the halves layout) and by rotary-embedding-torch's
    ``get_axial_freqs`` with ``freqs_for="lang"`` (one 1-D embedding per axis, concatenated; its
    ``freqs_for="pixel"`` mode, linearly spaced frequencies at coordinates spread over [-1, 1], is not this
    matrix). With ``n_axes=1`` the matrix is the single row ``rotary_frequencies(head_dim, base=base)``: plain
    rotary.

    References
    ----------
    .. [1] B. Heo, S. Park, D. Han and S. Yun, "Rotary Position Embedding for Vision Transformer", ECCV 2024,
       arXiv:2403.13298; code https://github.com/naver-ai/rope-vit (``self-attn/rope_self_attn.py``).
    .. [2] torchtune, ``torchtune/modules/position_embeddings.py`` (``VisionRotaryPositionalEmbeddings``).
    .. [3] transformers v5.23, ``models/qwen2_vl/modeling_qwen2_vl.py`` (``Qwen2VLVisionRotaryEmbedding``).

    Examples
    --------
    >>> axial_frequencies(8, 2, base=100.0)
    array([[1. , 0.1, 0. , 0. ],
           [0. , 0. , 1. , 0.1]])
    """
    head_dim = check_d_model(head_dim, name="head_dim")
    n_axes = check_int(
        n_axes, "n_axes", minimum=1, maximum=head_dim // 2, accepted=f"an int in [1, head_dim // 2 = {head_dim // 2}]"
    )
    base = check_real(base, "base", above=1.0)
    if head_dim % (2 * n_axes):
        raise ValueError(
            f"head_dim must be a multiple of 2 * n_axes = {2 * n_axes} (one block of whole pairs per axis), "
            f"got head_dim={head_dim}"
        )
    per_axis = rotary_frequencies(head_dim // n_axes, base=base)
    block = len(per_axis)
    frequencies = np.zeros((n_axes, head_dim // 2))
    for axis in range(n_axes):
        frequencies[axis, axis * block : (axis + 1) * block] = per_axis
    return frequencies


def _check_sections(mrope_section: object, n_pairs: int) -> tuple[int, int, int]:
    """``mrope_section`` as three ints ``>= 0`` summing to ``n_pairs``."""
    accepted = f"a list of three ints >= 0 (time, height, width) summing to head_dim // 2 = {n_pairs}"
    if isinstance(mrope_section, (str, bytes)) or not isinstance(mrope_section, Sequence):
        raise TypeError(f"mrope_section must be {accepted}, got {type(mrope_section).__name__} {mrope_section!r}")
    if len(mrope_section) != 3:
        raise ValueError(f"mrope_section must be {accepted}, got {len(mrope_section)} entries")
    sections = [check_int(value, "mrope_section", accepted=accepted) for value in mrope_section]
    if sum(sections) != n_pairs:
        raise ValueError(f"mrope_section must be {accepted}, got {list(sections)} (sum {sum(sections)})")
    return sections[0], sections[1], sections[2]


def mrope_frequencies(
    head_dim: int,
    mrope_section: Sequence[int],
    *,
    assignment: MRopeAssignment = "chunked",
    base: float = 10000.0,
) -> NDArray[np.float64]:
    r"""Frequency matrix of multimodal rotary embedding (M-RoPE): each pair follows time, height or width.

    Parameters
    ----------
    head_dim : int
        Features per head, all rotated; positive and even.
    mrope_section : sequence of three ints
        How many of the ``head_dim // 2`` pairs follow time, height and width (``rope_parameters["mrope_section"]``
        of a Qwen2-VL or Qwen3-VL config, e.g. ``[16, 24, 24]`` and ``[24, 20, 20]`` for ``head_dim=128``);
        each ``>= 0``, summing to ``head_dim // 2``.
    assignment : {"chunked", "interleaved"}, default "chunked"
        Which pairs follow which axis. ``"chunked"`` (Qwen2-VL): the first ``mrope_section[0]`` pairs time,
        the next ``mrope_section[1]`` height, the last ``mrope_section[2]`` width. ``"interleaved"``
        (Qwen3-VL): pair ``i`` follows height if ``i % 3 == 1`` and ``i < 3 * mrope_section[1]``, width if
        ``i % 3 == 2`` and ``i < 3 * mrope_section[2]``, time otherwise; the sections must then be the counts
        this gives (``3 * max(mrope_section[1], mrope_section[2]) <= head_dim // 2 + 2``).
    base : float, default 10000.0
        ``rope_theta``; finite and greater than 1.

    Returns
    -------
    frequencies : (3, head_dim // 2) ndarray of float64
        Row 0 is time, 1 height, 2 width. Column ``i`` has one nonzero entry,
        ``posenc.rotary_frequencies(head_dim, base=base)[i]``, in the row of the axis pair ``i`` follows.

    Raises
    ------
    TypeError
        If ``head_dim`` is not an int, ``mrope_section`` not a sequence of ints, ``assignment`` not a str or
        ``base`` not a real number.
    ValueError
        If ``head_dim`` is not positive and even, ``mrope_section`` does not have three entries ``>= 0``
        summing to ``head_dim // 2`` (or, interleaved, not the counts of the interleaving), ``assignment``
        is not one of the two, or ``base <= 1``.

    Notes
    -----
    M-RoPE came with Qwen2-VL (Wang et al., 2024). transformers' ``get_rope_index`` gives every token three
    position ids: equal ones to a text token, so that M-RoPE is 1-D RoPE on text; to the tokens of an image or
    a video, its grid's (time, row, column) added to the current position. The rotary module builds the
    cos/sin of all pairs for each of the three ids and keeps, for pair ``i``, those of the axis it follows:
    in contiguous sections (``Qwen2VLRotaryEmbedding.recomposition_frequencies``, v5.23) or every third pair
    from 1 (height) and 2 (width) up to three times the section
    (``Qwen3VLTextRotaryEmbedding.recomposition_frequencies``), the rest time. With chunks, time holds the
    highest frequencies and width the lowest; interleaving gives each axis pairs across the whole spectrum.

    References
    ----------
    .. [1] P. Wang et al., "Qwen2-VL: Enhancing Vision-Language Model's Perception of the World at Any
       Resolution", arXiv:2409.12191.
    .. [2] transformers v5.23, ``models/qwen2_vl/modeling_qwen2_vl.py`` and
       ``models/qwen3_vl/modeling_qwen3_vl.py``.

    Examples
    --------
    >>> mrope_frequencies(8, [2, 1, 1], base=100.0)
    array([[1.        , 0.31622777, 0.        , 0.        ],
           [0.        , 0.        , 0.1       , 0.        ],
           [0.        , 0.        , 0.        , 0.03162278]])
    >>> mrope_frequencies(8, [2, 1, 1], assignment="interleaved", base=100.0).argmax(axis=0)  # axis per pair
    array([0, 1, 2, 0])
    """
    head_dim = check_d_model(head_dim, name="head_dim")
    sections = _check_sections(mrope_section, head_dim // 2)
    assignment = check_choice(assignment, "assignment", MROPE_ASSIGNMENTS)
    base = check_real(base, "base", above=1.0)
    pairs = np.arange(head_dim // 2)
    if assignment == "chunked":
        axis_of_pair = np.repeat(np.arange(3), sections)
    else:
        axis_of_pair = np.zeros(head_dim // 2, dtype=np.intp)
        for axis in (1, 2):
            axis_of_pair[(pairs % 3 == axis) & (pairs < 3 * sections[axis])] = axis
        counts = tuple(int(np.sum(axis_of_pair == axis)) for axis in range(3))
        if counts != sections:
            raise ValueError(
                f"mrope_section must be the counts of the interleaved assignment: {list(sections)} gives "
                f"{list(counts)} pairs to (time, height, width) with head_dim // 2 = {head_dim // 2}"
            )
    frequencies = np.zeros((3, head_dim // 2))
    frequencies[axis_of_pair, pairs] = rotary_frequencies(head_dim, base=base)
    return frequencies


def _real_array(value: object, name: str, accepted: str) -> NDArray[np.float64]:
    """``value`` as a float64 array of finite reals (ints and floats only)."""
    if isinstance(value, (str, bytes, numbers.Number)) or not (
        hasattr(value, "__len__") or hasattr(value, "__array__")
    ):
        raise TypeError(f"{name} must be {accepted}, got {type(value).__name__} {value!r}")
    try:
        array = np.asarray(value)
    except ValueError as error:  # ragged nested lists
        raise TypeError(f"{name} must be {accepted}: {error}") from error
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise TypeError(f"{name} must be {accepted}, got an array of dtype {array.dtype}")
    if array.size > MAX_TABLE_ELEMENTS:
        raise ValueError(f"{name} must have at most {MAX_TABLE_ELEMENTS} elements, got {array.size}")
    check_exact_integers(array, name, accepted)
    converted = array.astype(np.float64)
    if not np.all(np.isfinite(converted)):
        raise ValueError(f"{name} must be {accepted}: found NaN or infinity")
    return converted


def check_frequency_matrix(frequencies: object, head_dim: int | None = None) -> NDArray[np.float64]:
    """``frequencies`` as a float64 ``(n_axes, n_pairs)`` array, both sizes ``>= 1`` (``2 n_pairs <= head_dim``)."""
    accepted = "a 2-D (n_axes, n_pairs) array of finite real frequencies"
    matrix = _real_array(frequencies, "frequencies", accepted)
    if matrix.ndim != 2 or 0 in matrix.shape:
        raise ValueError(f"frequencies must be {accepted}, both sizes >= 1, got shape {matrix.shape}")
    if head_dim is not None and 2 * matrix.shape[1] > head_dim:
        raise ValueError(
            f"frequencies has {matrix.shape[1]} pairs, which need {2 * matrix.shape[1]} features: more than "
            f"x.shape[-1] (head_dim) = {head_dim}"
        )
    return matrix


def multiaxis_angles(
    positions: object, frequencies: NDArray[np.float64], x_shape: tuple[int, ...]
) -> NDArray[np.float64]:
    """The float64 angles ``positions @ frequencies``, shape ``(..., seq, n_pairs)``, for ``x`` of shape ``x_shape``.

    Checks that ``positions`` is ``(..., seq, n_axes)`` of finite reals, broadcastable against ``x_shape[:-1]``,
    that the table is not too large, and that every angle is finite.
    """
    n_axes, n_pairs = frequencies.shape
    accepted = f"a (..., seq, n_axes={n_axes}) array of finite real coordinates"
    array = _real_array(positions, "positions", accepted)
    if array.ndim < 2 or array.shape[-1] != n_axes:
        raise ValueError(f"positions must be {accepted} (n_axes = frequencies.shape[0]), got shape {array.shape}")
    rows = x_shape[:-1]
    try:
        np.broadcast_shapes(array.shape[:-1], rows)
    except ValueError:
        raise ValueError(
            f"positions of shape {array.shape} do not broadcast against x: positions.shape[:-1] = "
            f"{array.shape[:-1]} must broadcast (aligned from the right) with x.shape[:-1] = {rows}"
        ) from None
    if array.shape[-2] != rows[-1]:
        raise ValueError(
            f"positions must have one coordinate row per row of x (seq = x.shape[-2] = {rows[-1]}), "
            f"got shape {array.shape}"
        )
    check_table_size(array.size // n_axes, n_pairs, "positions rows", "n_pairs")
    with np.errstate(over="ignore", invalid="ignore"):
        angles: NDArray[np.float64] = array @ frequencies
    if not np.all(np.isfinite(angles)):
        raise ValueError("positions @ frequencies overflows: positions or frequencies too large for float64 angles")
    return angles


def rotate_multiaxis(
    x: ArrayLike,
    positions: ArrayLike,
    frequencies: ArrayLike,
    *,
    layout: RotaryLayout = "interleaved",
) -> NDArray[np.float64]:
    r"""Rotate queries or keys by their coordinates on several axes: the float64 reference.

    Parameters
    ----------
    x : (..., seq, head_dim) array_like of real
        Queries or keys, one head per slice, e.g. ``(batch, heads, seq, head_dim)``.
    positions : (..., seq, n_axes) array_like of real
        The coordinates of each row of ``x`` (``positions[..., r, a]``: row ``r`` on axis ``a``), finite reals
        (integers at most ``2**53`` in magnitude); the leading axes broadcast against ``x.shape[:-2]`` from the
        right, so a ``(seq, n_axes)`` array serves every batch entry and head, and ``(batch, 1, seq, n_axes)`` gives
        each batch entry its own. transformers' M-RoPE ``position_ids`` of shape ``(3, batch, seq)`` are
        ``np.moveaxis(position_ids, 0, -1)[:, None]``.
    frequencies : (n_axes, n_pairs) array_like of real
        :math:`F`: pair ``i`` turns by ``sum_a positions[..., a] * frequencies[a, i]``. From
        :func:`axial_frequencies`, :func:`mrope_frequencies`, or any finite matrix (RoPE-Mixed's learned
        one). ``2 * n_pairs <= head_dim``: the first ``2 * n_pairs`` features are rotated, the others copied.
    layout : {"interleaved", "halves"}, default "interleaved"
        Which of the ``rotary_dim = 2 * n_pairs`` rotated features form pair ``i``: ``2i`` and ``2i + 1``
        (torchtune, rotary-embedding-torch) or ``i`` and ``i + rotary_dim // 2`` (transformers' Qwen2-VL and
        Qwen3-VL, with ``rotate_half``), as in :func:`posenc.rotate`.

    Returns
    -------
    rotated : (..., seq, head_dim) ndarray of float64
        The broadcast shape of ``x`` and ``positions``' leading axes: pair ``i`` of a row, :math:`(a, b)`,
        becomes the pair :math:`a\cos\phi_i - b\sin\phi_i` and :math:`a\sin\phi_i + b\cos\phi_i`.

    Raises
    ------
    TypeError
        If ``x``, ``positions`` or ``frequencies`` is not a real array, or ``layout`` not a str.
    ValueError
        If ``x`` has fewer than 2 dimensions, ``frequencies`` is not 2-D with ``2 * n_pairs <= head_dim``,
        ``positions`` does not have ``n_axes`` coordinates per row of ``x`` or does not broadcast against it,
        a value is not finite, the angles overflow, the angle table would exceed
        :data:`posenc.MAX_TABLE_ELEMENTS`, or ``layout`` is not one of the two.

    Notes
    -----
    The rotation is block-diagonal with angle :math:`\phi_i(p) = \sum_a p_a F_{a,i}`, linear in :math:`p`,
    so :math:`R_p^\top R_{p'} = R_{p' - p}` and :math:`\langle R_p q, R_{p'} k\rangle = q^\top R_{p'-p} k`
    depends on the per-axis offset :math:`p' - p` only, for any :math:`F`. With one axis and
    :math:`F` = ``rotary_frequencies(head_dim)[None]`` it is :func:`posenc.rotate`.

    References
    ----------
    .. [1] B. Heo, S. Park, D. Han and S. Yun, "Rotary Position Embedding for Vision Transformer", ECCV 2024,
       arXiv:2403.13298.
    .. [2] J. Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", arXiv:2104.09864.

    Examples
    --------
    >>> f = axial_frequencies(4, 2)  # pair 0 follows the row, pair 1 the column, both at frequency 1
    >>> rotate_multiaxis([[1.0, 0.0, 1.0, 0.0]], [[np.pi / 2, 0.0]], f).round(4)
    array([[0., 1., 1., 0.]])
    """
    layout = check_choice(layout, "layout", ROTARY_LAYOUTS)
    array = _real_array(x, "x", "a real array of shape (..., seq, head_dim)")
    if array.ndim < 2 or array.shape[-1] == 0:
        raise ValueError(f"x must be a real array of shape (..., seq, head_dim) with head_dim >= 1, got {array.shape}")
    matrix = check_frequency_matrix(frequencies, array.shape[-1])
    angles = multiaxis_angles(positions, matrix, array.shape)
    n_pairs = matrix.shape[1]
    pairs = np.arange(n_pairs)
    first, second = (2 * pairs, 2 * pairs + 1) if layout == "interleaved" else (pairs, n_pairs + pairs)
    shape = np.broadcast_shapes(array.shape[:-1], angles.shape[:-1]) + array.shape[-1:]
    rotated: NDArray[np.float64] = np.broadcast_to(array, shape).copy()
    cosines, sines = np.cos(angles), np.sin(angles)
    a, b = rotated[..., first], rotated[..., second]
    rotated[..., first] = a * cosines - b * sines
    rotated[..., second] = a * sines + b * cosines
    return rotated
