"""The checks of sinusoidal tables (Vaswani et al.)."""

from __future__ import annotations

import numpy as np

import posenc
from posenc._validation import (
    Layout,
    check_int,
    check_real,
    check_table_size,
)
from posenc.testing._common import (
    MAX_CHECK_ELEMENTS,
    Implementation,
    as_array,
    call_implementation,
    check_implementation,
    expect_shape,
)


def assert_sinusoidal_matches_reference(
    table_fn: Implementation,
    *,
    n_positions: int = 128,
    d_model: int = 64,
    base: float = 10000.0,
    layout: Layout = "interleaved",
    atol: float = 1e-5,
) -> None:
    r"""Check that ``table_fn(n_positions, d_model)`` is the sinusoidal table of Vaswani et al.

    Parameters
    ----------
    table_fn : callable
        ``table_fn(n_positions, d_model)`` returns the ``(n_positions, d_model)`` table (array or tensor) of
        positions ``0, ..., n_positions - 1``. To check a module that adds the encoding to its input, wrap it:
        ``lambda n, d: module(torch.zeros(1, n, d))[0]``.
    n_positions : int, default 128
        Rows to compare; at least 2, and ``n_positions * d_model`` at most ``2**22``.
    d_model : int, default 64
        Width of the table; positive and even.
    base : float, default 10000.0
        The base of the frequencies; greater than 1.
    layout : {"interleaved", "cos_first", "halves"}, default "interleaved"
        Where ``table_fn`` puts each sine and cosine (see :func:`posenc.sinusoidal`).
    atol : float, default 1e-5
        Largest accepted absolute difference from the float64 reference (float32 tables are within 1e-6).

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If the table has the wrong shape, holds a non-finite entry, differs from the reference by more than
        ``atol``, or if ``table_fn`` raises. The message names the worst entry, its pair and frequency.
    TypeError, ValueError
        If an argument of the check is invalid (named in the message).

    Notes
    -----
    The reference is :func:`posenc.sinusoidal` in float64:
    :math:`PE_{(p, 2i)} = \sin(p\,\omega_i)`, :math:`PE_{(p, 2i+1)} = \cos(p\,\omega_i)`,
    :math:`\omega_i = \text{base}^{-2i/d_{model}}`, with ``i`` counting *pairs* of columns. The classic
    mistakes (an exponent per column instead of per pair, ``(2i+1)/d`` for the cosine, ``x / d // 2``
    parsed as ``(x / d) // 2``, integer division, dividing by the sequence length, ``position / div_term``)
    all change whole columns, so one comparison catches them.

    References
    ----------
    .. [1] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017, arXiv:1706.03762, §3.5.

    Examples
    --------
    >>> import posenc
    >>> assert_sinusoidal_matches_reference(posenc.sinusoidal)
    >>> def per_column_exponent(n, d):  # 10000 ** (2 j / d) for column j
    ...     angles = np.outer(np.arange(n), 10000.0 ** (-2 * np.arange(d) / d))
    ...     return np.where(np.arange(d) % 2 == 0, np.sin(angles), np.cos(angles))
    >>> assert_sinusoidal_matches_reference(per_column_exponent)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    AssertionError: table_fn(128, 64) differs from the sinusoidal table in 63 of 64 columns...
    """
    check_implementation(table_fn, "table_fn")
    n_positions = check_int(n_positions, "n_positions", minimum=2, maximum=MAX_CHECK_ELEMENTS)
    d_model = check_int(d_model, "d_model", minimum=2, maximum=MAX_CHECK_ELEMENTS, even=True)
    check_table_size(n_positions, d_model, "n_positions", "d_model")
    if n_positions * d_model > MAX_CHECK_ELEMENTS:
        raise ValueError(f"n_positions x d_model must be at most {MAX_CHECK_ELEMENTS}, got {n_positions * d_model}")
    base = check_real(base, "base", above=1.0)
    reference = posenc.sinusoidal(n_positions, d_model, base=base, layout=layout, dtype=np.float64)
    atol = check_real(atol, "atol", above=0.0)

    call = f"table_fn({n_positions}, {d_model})"
    table = as_array(call_implementation(table_fn, call, n_positions, d_model), call)
    expect_shape(table, (n_positions, d_model), call)
    if not np.all(np.isfinite(table)):
        row, column = np.argwhere(~np.isfinite(table))[0]
        raise AssertionError(f"{call}[{row}, {column}] = {table[row, column]}: the table must be finite")
    error = np.abs(table - reference)
    if error.max() <= atol:
        return
    row, column = np.unravel_index(np.argmax(error), error.shape)
    sine_columns = posenc.layout_permutation(layout, "interleaved", d_model)  # interleaved column -> ours
    where = int(np.flatnonzero(sine_columns == column)[0])  # the interleaved column of `column`
    pair, kind = where // 2, ("sine" if where % 2 == 0 else "cosine")
    omega = posenc.frequencies(d_model, base=base)[pair]
    bad_columns = np.flatnonzero(error.max(axis=0) > atol)
    raise AssertionError(
        f"{call} differs from the sinusoidal table in {len(bad_columns)} of {d_model} columns (layout "
        f"{layout!r}, base {base:g}); worst at row {row}, column {column} (the {kind} of pair {pair}, "
        f"frequency base**(-2*{pair}/{d_model}) = {omega:.6g}): got {table[row, column]:.6g}, expected "
        f"{reference[row, column]:.6g}, |error| {error[row, column]:.3g} > atol {atol:g}. First wrong column: "
        f"{bad_columns[0]}. Both members of a pair share the exponent 2i/d_model, i counting pairs."
    )


def assert_sinusoidal_odd_width_handled(
    table_fn: Implementation, *, n_positions: int = 16, d_model: int = 7, base: float = 10000.0, atol: float = 1e-5
) -> None:
    r"""Check that an odd ``d_model`` is either refused with a ``ValueError`` or computed by the formula.

    Parameters
    ----------
    table_fn : callable
        ``table_fn(n_positions, d_model)`` returns the ``(n_positions, d_model)`` table in the paper's
        interleaved layout, or raises a ``ValueError`` naming ``d_model`` for a width it does not support.
    n_positions : int, default 16
        Rows to compare; between 1 and 4096.
    d_model : int, default 7
        An odd width, between 1 and 4095.
    base : float, default 10000.0
        The base of the frequencies; greater than 1.
    atol : float, default 1e-5
        Largest accepted absolute difference from the formula.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If ``table_fn`` raises anything but a ``ValueError`` whose message names ``d_model`` (or says "even"
        or "odd"), such as a shape mismatch deep inside, or returns a table that is not the formula's
        ``d_model`` columns.
    TypeError, ValueError
        If an argument of the check is invalid (``d_model`` even, for instance).

    Notes
    -----
    With an odd width the formula still defines every column: column ``j`` is the sine (``j`` even) or the
    cosine (``j`` odd) of ``p * base**(-2 * (j // 2) / d_model)``, so the last column is an unpaired
    sine. The reference is that table, computed with :func:`posenc.sinusoidal` at width ``d_model + 1`` and
    the base rescaled so that its exponents are over ``d_model``. A clear refusal is fine too (posenc
    refuses); crashing with an unrelated error, as a common implementation does when it assigns
    ``d_model // 2 + 1`` cosines to ``d_model // 2`` columns, is not.

    References
    ----------
    .. [1] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017, arXiv:1706.03762, §3.5.

    Examples
    --------
    >>> import posenc
    >>> assert_sinusoidal_odd_width_handled(posenc.sinusoidal)  # refuses odd widths with a ValueError
    """
    check_implementation(table_fn, "table_fn")
    n_positions = check_int(n_positions, "n_positions", minimum=1, maximum=4096)
    d_model = check_int(d_model, "d_model", minimum=1, maximum=4095)
    if d_model % 2 == 0:
        raise ValueError(f"d_model must be an odd int in [1, 4095], got {d_model}")
    base = check_real(base, "base", above=1.0)
    atol = check_real(atol, "atol", above=0.0)

    call = f"table_fn({n_positions}, {d_model})"
    try:
        result = table_fn(n_positions, d_model)
    except Exception as raised:  # a refusal is a ValueError that says what is wrong with d_model
        refusal = isinstance(raised, ValueError) and any(word in str(raised) for word in ("d_model", "even", "odd"))
        if refusal:
            return
        raise AssertionError(
            f"{call} raised {type(raised).__name__}: {raised}. An odd d_model must be refused with a ValueError "
            f"that names d_model, or computed by the formula (the last column an unpaired sine)"
        ) from raised
    table = as_array(result, call)
    expect_shape(table, (n_positions, d_model), call)
    # base**(-2i/d) = (base**((d+1)/d))**(-2i/(d+1)): the even table one column wider, last column dropped
    reference = posenc.sinusoidal(n_positions, d_model + 1, base=base ** ((d_model + 1) / d_model), dtype=np.float64)
    error = np.abs(table - reference[:, :d_model])
    if np.all(np.isfinite(table)) and error.max() <= atol:
        return
    column = int(np.argmax(np.where(np.isfinite(error), error, np.inf).max(axis=0)))
    raise AssertionError(
        f"{call} is not the formula's table: column {column} differs by up to {np.nanmax(error[:, column]):.3g} "
        f"(atol {atol:g}); column j must be sin/cos(p * base**(-2*(j//2)/{d_model}))"
    )
