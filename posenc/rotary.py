r"""Rotary position embedding (RoPE) of Su et al. (2021): frequencies, context-extension scalings, rotation.

RoPE does not add anything to the token embeddings. It rotates each query and each key, pair of
features by pair of features, by an angle proportional to the token's position, so that the dot
product of a query at position ``m`` with a key at position ``n`` depends on ``m - n`` only. The
rotation at position ``m`` is the translation matrix :math:`T(m)` of the sinusoidal encoding
(:func:`posenc.translation_matrix`, acting on column vectors).

A context-extension scaling is given as the ``rope_parameters`` dict of a transformers config or as the
:class:`~posenc.RopeScaling` parsed from one (:meth:`~posenc.RopeScaling.from_dict`). Everything here is
NumPy float64: the reference the PyTorch module :class:`posenc.nn.RotaryEmbedding` is tested against.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc._rope import (
    ROPE_TYPES,
    RopeScaling,
    RopeType,
    check_head_dim,
    check_rotary_dim,
    inverse_frequencies,
    parse_scaling,
    resolve_base,
)
from posenc._validation import (
    ROTARY_LAYOUTS,
    RotaryLayout,
    check_choice,
    check_d_model,
    check_int,
    check_positions,
    check_real,
    check_table_size,
)

__all__ = [
    "ROPE_TYPES",
    "RopeScaling",
    "RopeType",
    "rotary_frequencies",
    "rotary_attention_factor",
    "rotate",
    "rotary_weight_permutation",
]


def rotary_frequencies(
    head_dim: int,
    *,
    base: float | None = None,
    scaling: RopeScaling | Mapping[str, object] | None = None,
    seq_len: float | None = None,
) -> NDArray[np.float64]:
    r"""Inverse frequencies of rotary position embedding, one per rotated pair, with an optional scaling.

    Parameters
    ----------
    head_dim : int
        Features per head; positive and even. With a ``partial_rotary_factor`` in ``scaling``, the first
        ``int(head_dim * partial_rotary_factor)`` of them are rotated (that rotary dimension must be even and
        positive), as transformers computes ``dim``.
    base : float or None, default None
        The constant :math:`\theta` of the geometric progression (``rope_theta`` in transformers' configs);
        finite and greater than 1. ``None``: the scaling's ``"rope_theta"`` if it carries one, else 10000.0.
    scaling : RopeScaling, dict or None, default None
        The ``rope_parameters`` (formerly ``rope_scaling``) dict of a transformers config, or the
        :class:`RopeScaling` parsed from one. ``None`` or ``{"rope_type": "default"}``: RoFormer's
        frequencies. Otherwise ``"rope_type"`` (or its old name ``"type"``) is one of:

        - ``"linear"`` (position interpolation): key ``"factor"``;
        - ``"dynamic"`` (dynamic NTK-aware): keys ``"factor"`` and ``"original_max_position_embeddings"``,
          the trained context length (transformers reads it from ``config.max_position_embeddings``);
        - ``"yarn"``: keys ``"factor"``, ``"original_max_position_embeddings"``, and optionally
          ``"beta_fast"`` (default 32), ``"beta_slow"`` (default 1), ``"truncate"`` (default True),
          ``"attention_factor"``, ``"mscale"``, ``"mscale_all_dim"`` (see :func:`rotary_attention_factor`);
        - ``"llama3"``: keys ``"factor"``, ``"original_max_position_embeddings"``, ``"low_freq_factor"``,
          ``"high_freq_factor"`` (equal factors, as Llama 4 ships them, are accepted);
        - ``"longrope"`` (Phi-3, Phi-3.5): keys ``"short_factor"``, ``"long_factor"`` (one divisor per
          rotated pair), ``"original_max_position_embeddings"``, ``"factor"``, and optionally
          ``"attention_factor"``;
        - ``"proportional"`` (Gemma 4's full-attention layers): optionally ``"factor"``; its
          ``"partial_rotary_factor"`` says how many pairs turn, not how many features are rotated (see Notes).

        A dict as config.json carries it may lack keys transformers derives from the config (``"dynamic"``'s
        trained length, ``"longrope"``'s ``"factor"``): parse it with :meth:`RopeScaling.from_dict` and its
        ``max_position_embeddings``. ``"factor"`` is a finite real ``>= 1``. The dict may also carry
        ``"rope_theta"`` (the base when ``base`` is None; it must otherwise equal ``base``) and
        ``"partial_rotary_factor"`` in ``(0, 1]``. Any other key is refused, so a misspelt key never goes
        unnoticed.
    seq_len : float or None, default None
        The current sequence length (largest position + 1), used by ``"dynamic"`` and ``"longrope"``:
        ``None`` means the trained length, and lengths up to it leave the frequencies unchanged
        (``"longrope"``: use ``"short_factor"``). Ignored by the other types.

    Returns
    -------
    inv_freq : (rotary_dim // 2,) ndarray of float64
        With ``rotary_dim = int(head_dim * partial_rotary_factor)`` (``head_dim`` without one, and for
        ``"proportional"``).
        The angle of pair ``i`` at position ``m`` is ``m * inv_freq[i]``.

    Raises
    ------
    TypeError
        If ``head_dim`` is not an int, ``base`` or ``seq_len`` not a real number, ``scaling`` not a dict or a
        :class:`RopeScaling`, or a scaling value has the wrong type.
    ValueError
        If ``head_dim`` is odd or not positive (or the rotary dimension odd, below 2, or 2 with
        ``"dynamic"``), ``base <= 1`` or disagrees with the dict's ``"rope_theta"``, the rope_type is unknown,
        a key is missing or unknown, or a value is out of range (``factor < 1``,
        ``high_freq_factor < low_freq_factor``, ``beta_fast < beta_slow``, ``"longrope"`` lists without one
        entry per rotated pair ...).

    Notes
    -----
    RoFormer (Su et al., 2021, §3.2) uses :math:`\theta_i = \text{base}^{-2i/d}` for
    :math:`i = 0, \dots, d/2 - 1`: the frequencies of :func:`posenc.frequencies`. The scalings change
    them so that a model trained on ``L = original_max_position_embeddings`` positions reads a longer
    context; with :math:`s` = ``factor``:

    - linear (Chen et al., 2023): :math:`\theta_i / s`, every wavelength stretched :math:`s` times, as if
      positions were divided by :math:`s`;
    - dynamic: the base becomes :math:`b\,(s\,\ell/L - (s - 1))^{d/(d-2)}` for the current length
      :math:`\ell > L` (unchanged for :math:`\ell \le L`);
    - yarn (Peng et al., 2023): with :math:`r_i = L\,\theta_i / 2\pi` turns of pair ``i`` over the trained
      context, pairs with :math:`r_i > \beta_{fast}` keep :math:`\theta_i`, pairs with
      :math:`r_i < \beta_{slow}` become :math:`\theta_i / s`, and a linear ramp in the pair index joins them;
    - llama3: wavelengths :math:`\lambda_i = 2\pi/\theta_i` shorter than ``L / high_freq_factor`` keep
      :math:`\theta_i`, longer than ``L / low_freq_factor`` become :math:`\theta_i / s`, and in between
      :math:`(1 - g)\,\theta_i / s + g\,\theta_i` with
      :math:`g = (L/\lambda_i - \text{low}) / (\text{high} - \text{low})`. With equal factors there is
      no band between (transformers divides 0 by 0, a NaN, for a wavelength exactly ``L / low``; here that
      pair keeps :math:`\theta_i`);
    - longrope (Ding et al., 2024): :math:`\theta_i / f_i` with :math:`f` = ``short_factor`` while
      :math:`\ell \le L`, ``long_factor`` beyond; the attention factor is
      :math:`\sqrt{1 + \ln s / \ln L}` (1 for :math:`s \le 1`) unless given;
    - proportional (Gemma 4): :math:`\theta_i / s` for the first ``int(partial_rotary_factor * head_dim // 2)``
      pairs, 0 for the others, with the whole head's :math:`\theta_i = \text{base}^{-2i/d}`: the whole head
      is rotated (pairs ``(i, i + d/2)`` in transformers' halves layout) and the last pairs do not turn. Partial
      rotary instead computes :math:`\text{base}^{-2i/d'}` over the :math:`d'` rotated features only.

    With ``dynamic``, transformers' ``dynamic_rope_update`` keeps the frequencies of the longest length seen
    so far; here each call uses its own ``seq_len``.

    The numbers are those of transformers' ``ROPE_INIT_FUNCTIONS`` (``modeling_rope_utils.py``, v5.23) and
    of ``LlamaRotaryEmbedding.compute_default_rope_parameters``, computed here in float64 where transformers
    uses float32 (they agree to float32 rounding).

    References
    ----------
    .. [1] J. Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", arXiv:2104.09864.
    .. [2] S. Chen et al., "Extending Context Window of Large Language Models via Positional
       Interpolation", arXiv:2306.15595.
    .. [3] B. Peng et al., "YaRN: Efficient Context Window Extension of Large Language Models",
       arXiv:2309.00071.
    .. [4] Y. Ding et al., "LongRoPE: Extending LLM Context Window Beyond 2 Million Tokens",
       arXiv:2402.13753.
    .. [5] transformers v5.23, ``src/transformers/modeling_rope_utils.py`` (``ROPE_INIT_FUNCTIONS``).

    Examples
    --------
    >>> rotary_frequencies(8)
    array([1.   , 0.1  , 0.01 , 0.001])
    >>> rotary_frequencies(8, scaling={"rope_type": "linear", "factor": 4.0})
    array([0.25   , 0.025  , 0.0025 , 0.00025])
    >>> rotary_frequencies(8, scaling={"rope_theta": 100.0, "partial_rotary_factor": 0.5})  # 4 features, base 100
    array([1. , 0.1])
    """
    head_dim = check_d_model(head_dim, name="head_dim")
    if base is not None:
        base = check_real(base, "base", above=1.0)
    parsed = parse_scaling(scaling, base, partial=True, rope_types=ROPE_TYPES)
    if seq_len is not None:
        seq_len = check_real(seq_len, "seq_len", at_least=0.0, accepted="None or a finite real number >= 0")
    rotary_dim = check_rotary_dim(head_dim, parsed, None)
    check_head_dim(rotary_dim, parsed, "head_dim" if rotary_dim == head_dim else "the rotary dimension")
    return inverse_frequencies(rotary_dim, resolve_base(base, parsed), parsed, seq_len)


def rotary_attention_factor(scaling: RopeScaling | Mapping[str, object] | None) -> float:
    r"""The factor a scaling multiplies the rotated queries and keys by: YaRN's temperature, 1.0 otherwise.

    Parameters
    ----------
    scaling : RopeScaling, dict or None
        As in :func:`rotary_frequencies`.

    Returns
    -------
    factor : float
        ``attention_scaling`` of the parsed scaling.
        For ``"yarn"``: ``scaling["attention_factor"]`` if given; else, if ``"mscale"`` and
        ``"mscale_all_dim"`` are both given and nonzero, ``m(s, mscale) / m(s, mscale_all_dim)``; else
        ``m(s, 1)``, with :math:`m(s, a) = 0.1\,a\ln s + 1` (1 for :math:`s \le 1`).
        For ``"longrope"``: ``scaling["attention_factor"]`` if given, else :math:`\sqrt{1 + \ln s / \ln L}`
        (1 for :math:`s \le 1`), as transformers' ``_compute_longrope_parameters``. 1.0 for every other type.

    Raises
    ------
    TypeError, ValueError
        As :func:`rotary_frequencies` for a bad ``scaling``.

    Notes
    -----
    Peng et al. (2023) divide the attention logits by a temperature :math:`t` with
    :math:`\sqrt{1/t} = 0.1 \ln s + 1`, applied by scaling both the rotated query and the rotated key by
    :math:`\sqrt{1/t}`. transformers multiplies its cos and sin tables by this factor, and
    :func:`rotate` and :class:`posenc.nn.RotaryEmbedding` do the same, so the logits grow by its square.

    References
    ----------
    .. [1] B. Peng et al., "YaRN: Efficient Context Window Extension of Large Language Models",
       arXiv:2309.00071; reference code https://github.com/jquesnelle/yarn (``get_mscale``).

    Examples
    --------
    >>> yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
    >>> round(rotary_attention_factor(yarn), 6)
    1.138629
    >>> rotary_attention_factor(None)
    1.0
    """
    return parse_scaling(scaling, partial=True, rope_types=ROPE_TYPES).attention_scaling


def _pair_indices(layout: RotaryLayout, head_dim: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Feature index of the first and of the second member of each pair ``i`` in a head of this layout."""
    pairs = np.arange(head_dim // 2)
    if layout == "interleaved":
        return 2 * pairs, 2 * pairs + 1
    return pairs, head_dim // 2 + pairs  # "halves"


def rotate(
    x: ArrayLike,
    positions: int | ArrayLike,
    *,
    base: float | None = None,
    layout: RotaryLayout = "interleaved",
    scaling: RopeScaling | Mapping[str, object] | None = None,
    rotary_dim: int | None = None,
) -> NDArray[np.float64]:
    r"""Rotate queries or keys by rotary position embedding: the float64 reference.

    Parameters
    ----------
    x : (..., seq, head_dim) array_like of real
        Queries or keys, one head per slice; ``head_dim`` positive, and even unless only part of the head is
        rotated.
    positions : int or (seq,) array_like of real
        The position of each of the ``seq`` rows: any finite real numbers (integers at most ``2**53`` in
        magnitude, which float64 holds exactly), or an int ``seq`` for ``0, 1, ..., seq - 1``.
    base : float or None, default None
        As in :func:`rotary_frequencies`: ``None`` is the scaling's ``"rope_theta"``, else 10000.0.
    layout : {"interleaved", "halves"}, default "interleaved"
        Which features form pair ``i`` (of the ``rotary_dim`` rotated ones). ``"interleaved"``: features
        ``2i`` and ``2i + 1`` (RoFormer, GPT-J, Meta's Llama code, rotary-embedding-torch). ``"halves"``:
        features ``i`` and ``i + rotary_dim // 2`` (GPT-NeoX, transformers' ``rotate_half``).
        :func:`rotary_weight_permutation` converts weights between the two.
    scaling : RopeScaling, dict or None, default None
        As in :func:`rotary_frequencies`. For ``"dynamic"`` and ``"longrope"`` the current length is
        ``max(positions) + 1``, as transformers takes it from the position ids. For ``"yarn"`` and
        ``"longrope"`` the rotated features are also multiplied by :func:`rotary_attention_factor`, as
        transformers' cos and sin tables are.
    rotary_dim : int or None, default None
        Partial rotary: rotate only the first ``rotary_dim`` features of each head (even, in
        ``[2, head_dim]``) and pass the others through unchanged, as GPT-J (``rotary_dim``), GPT-NeoX and
        Pythia (``rotary_pct``), Phi-2 and StableLM (``partial_rotary_factor``) do. ``None``:
        ``int(head_dim * partial_rotary_factor)`` of the scaling (all of ``head_dim`` without one); given
        with a ``partial_rotary_factor``, the two must agree. The frequencies are those of ``rotary_dim``
        features.

    Returns
    -------
    rotated : (..., seq, head_dim) ndarray of float64
        Pair ``i`` of row ``r``, :math:`(a, b)`, becomes the pair :math:`a\cos\phi - b\sin\phi` and
        :math:`a\sin\phi + b\cos\phi` with :math:`\phi` =
        ``positions[r] * rotary_frequencies(rotary_dim, ...)[i]``; features from ``rotary_dim`` on are
        copied.

    Raises
    ------
    TypeError
        If ``x`` or ``positions`` is not real-valued, or another argument has the wrong type.
    ValueError
        If ``x`` has fewer than 2 dimensions or an odd last dimension (when all of it is rotated),
        ``positions`` is not 1-D, not finite or does not have ``seq`` entries, ``rotary_dim`` is odd, outside
        ``[2, head_dim]`` or disagrees with the scaling's ``partial_rotary_factor``, or another argument is out
        of range.

    Notes
    -----
    Su et al. (2021, §3.2) write the rotation at position :math:`m` as the block-diagonal matrix
    :math:`R^d_{\Theta,m}` with blocks :math:`\begin{pmatrix}\cos m\theta_i & -\sin m\theta_i\\
    \sin m\theta_i & \cos m\theta_i\end{pmatrix}`. It is orthogonal and :math:`R_m^\top R_n = R_{n-m}`,
    so :math:`\langle R_m q, R_n k\rangle = q^\top R_{n-m} k` depends on :math:`n - m` only. For the
    interleaved layout :math:`R_m` equals ``posenc.translation_matrix(m, head_dim)`` (the sinusoid's
    translation matrix applied to column vectors); for ``"halves"``, the same with ``layout="halves"``.

    Partial rotary is transformers' ``apply_rotary_pos_emb`` of GPT-NeoX and Phi (``q[..., :rotary_ndims]``
    rotated with ``rotate_half``, the rest concatenated back) for ``"halves"``, and GPT-J's
    (``rotate_every_two`` on ``[..., :rotary_dim]``) for ``"interleaved"``. The scores then depend on
    :math:`n - m` through the rotated features only; the others add a position-independent term.

    References
    ----------
    .. [1] J. Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", arXiv:2104.09864,
       §3.2.
    .. [2] transformers v5.23, ``models/gpt_neox/modeling_gpt_neox.py`` and ``models/phi/modeling_phi.py``
       (``apply_rotary_pos_emb`` with ``partial_rotary_factor``), ``models/gptj/modeling_gptj.py``.

    Examples
    --------
    >>> rotate([[1.0, 0.0, 1.0, 0.0]], [np.pi / 2], base=100.0).round(4)  # pair 0 turns by pi / 2
    array([[0.    , 1.    , 0.9877, 0.1564]])
    >>> rotate([[1.0, 0.0, 1.0, 0.0]], [np.pi / 2], rotary_dim=2).round(4)  # features 2 and 3 pass through
    array([[0., 1., 1., 0.]])
    """
    layout = check_choice(layout, "layout", ROTARY_LAYOUTS)
    if base is not None:
        base = check_real(base, "base", above=1.0)
    parsed = parse_scaling(scaling, base, partial=True, rope_types=ROPE_TYPES)
    array = _check_rotary_array(x, odd_allowed=rotary_dim is not None or parsed.partial_rotary_factor != 1.0)
    head_dim = array.shape[-1]
    position_array = check_positions(positions, head_dim)
    if len(position_array) != array.shape[-2]:
        raise ValueError(
            f"positions must have one entry per row of x (seq = x.shape[-2] = {array.shape[-2]}), "
            f"got {len(position_array)}"
        )
    rotated_dim = check_rotary_dim(head_dim, parsed, rotary_dim, "x.shape[-1] (head_dim)")
    check_head_dim(rotated_dim, parsed, "x.shape[-1] (head_dim)" if rotary_dim is None else "rotary_dim")
    seq_len = float(position_array.max()) + 1.0 if len(position_array) else None
    inv_freq = inverse_frequencies(rotated_dim, resolve_base(base, parsed), parsed, seq_len)
    angles = np.multiply.outer(position_array, inv_freq)
    scale = parsed.attention_scaling
    cosines, sines = scale * np.cos(angles), scale * np.sin(angles)
    first, second = _pair_indices(layout, rotated_dim)
    a, b = array[..., first], array[..., second]
    rotated: NDArray[np.float64] = array.copy()  # the features past rotated_dim pass through
    with np.errstate(invalid="ignore", over="ignore"):  # inf or nan in x propagate, as in any product
        rotated[..., first] = a * cosines - b * sines
        rotated[..., second] = a * sines + b * cosines
    return rotated


def _check_rotary_array(x: object, odd_allowed: bool = False) -> NDArray[np.float64]:
    """``x`` as a float64 array of shape ``(..., seq, head_dim)`` with a positive (and even) ``head_dim``."""
    accepted = "a real array of shape (..., seq, head_dim) with head_dim positive" + (
        "" if odd_allowed else " and even"
    )
    if isinstance(x, (str, bytes, numbers.Number)) or not (hasattr(x, "__len__") or hasattr(x, "__array__")):
        raise TypeError(f"x must be {accepted}, got {type(x).__name__}")
    try:
        array = np.asarray(x)
    except ValueError as error:  # ragged nested lists
        raise TypeError(f"x must be {accepted}: {error}") from error
    is_real = np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    if array.dtype == np.bool_ or not is_real:
        raise TypeError(f"x must be {accepted}, got an array of dtype {array.dtype}")
    if array.ndim < 2 or array.shape[-1] == 0 or (array.shape[-1] % 2 and not odd_allowed):
        raise ValueError(f"x must be {accepted}, got shape {array.shape}")
    return array.astype(np.float64, copy=False)


def rotary_weight_permutation(
    source: RotaryLayout, target: RotaryLayout, head_dim: int, *, n_heads: int = 1
) -> NDArray[np.intp]:
    """Row order that moves a query or key projection from one rotary layout to the other.

    Parameters
    ----------
    source, target : {"interleaved", "halves"}
        The rotary layout the weights were trained with, and the one of the code that will run them.
    head_dim : int
        Features per head; positive and even.
    n_heads : int, default 1
        Heads stacked in the projection's output (the key/value heads for a grouped-query key projection).

    Returns
    -------
    permutation : (n_heads * head_dim,) ndarray of int
        ``W_target = W_source[permutation]`` for a ``torch.nn.Linear`` weight ``(out_features, in_features)``
        (and ``b_target = b_source[permutation]`` for its bias): then ``rotate(x @ W_target.T, p,
        layout=target)`` equals ``rotate(x @ W_source.T, p, layout=source)[..., permutation]``, and the
        attention scores, which sum over features, are unchanged. Each head is permuted within itself.

    Raises
    ------
    TypeError, ValueError
        If a layout is not one of the two, ``head_dim`` is not a positive even int, ``n_heads`` not an int
        ``>= 1``, or the projection would have more than ``posenc.MAX_TABLE_ELEMENTS`` rows.

    Notes
    -----
    Feature ``2i`` of an interleaved head moves to ``i``, feature ``2i + 1`` to ``head_dim // 2 + i``: the
    ``permute`` of transformers' ``convert_llama_weights_to_hf.py``, which converts Meta's interleaved
    Llama checkpoints to the ``rotate_half`` layout. Query and key projections must both be permuted (with
    the same layouts); values and the output projection are not rotated and stay as they are.

    Examples
    --------
    >>> rotary_weight_permutation("interleaved", "halves", 8)
    array([0, 2, 4, 6, 1, 3, 5, 7])
    >>> rotary_weight_permutation("halves", "interleaved", 4, n_heads=2)
    array([0, 2, 1, 3, 4, 6, 5, 7])
    """
    source = check_choice(source, "source", ROTARY_LAYOUTS)
    target = check_choice(target, "target", ROTARY_LAYOUTS)
    head_dim = check_d_model(head_dim, name="head_dim")
    n_heads = check_int(n_heads, "n_heads", minimum=1)
    check_table_size(n_heads, head_dim, "n_heads", "head_dim")
    source_first, source_second = _pair_indices(source, head_dim)
    target_first, target_second = _pair_indices(target, head_dim)
    within = np.empty(head_dim, dtype=np.intp)
    within[target_first] = source_first
    within[target_second] = source_second
    return (np.arange(n_heads, dtype=np.intp)[:, None] * head_dim + within).reshape(-1)
