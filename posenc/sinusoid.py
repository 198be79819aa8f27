"""The sinusoidal positional encoding of Vaswani et al. (2017), its layouts and its translation matrix.

Every formula of the book lives here once: the frequencies, the table, where each sine and cosine sits in
a row (the *layout*), and the block-diagonal matrix that shifts a row by a fixed offset.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from posenc._validation import (
    LAYOUTS,
    Layout,
    check_choice,
    check_d_model,
    check_float_dtype,
    check_int,
    check_positions,
    check_real,
    check_table_size,
    is_int,
)

__all__ = ["frequencies", "sinusoidal", "translation_matrix", "layout_permutation"]

# Rows are computed in blocks of at most this many angles, so the float64 temporaries stay small
# (2 MiB per thread) whatever the size of the table.
_ANGLES_PER_BLOCK = 2**18


def frequencies(d_model: int, *, base: float = 10000.0) -> NDArray[np.float64]:
    r"""Angular frequencies of the sinusoidal encoding, one per (sine, cosine) pair.

    Parameters
    ----------
    d_model : int
        Width of the encoding; positive and even.
    base : float, default 10000.0
        The constant of the geometric progression; finite and greater than 1.

    Returns
    -------
    omega : (d_model // 2,) ndarray of float64
        ``omega[i] = base ** (-2 * i / d_model)`` for ``i = 0, ..., d_model // 2 - 1``: from 1 down to
        ``base ** (-(d_model - 2) / d_model)``, never reaching ``1 / base``.

    Notes
    -----
    Vaswani et al. (2017, §3.5) write the pair ``i`` of the encoding as

    .. math::

        PE_{(pos, 2i)} = \sin(pos \cdot \omega_i), \quad PE_{(pos, 2i+1)} = \cos(pos \cdot \omega_i),
        \quad \omega_i = 10000^{-2i / d_{model}}.

    Both members of a pair share the exponent ``2i / d_model``: ``i`` counts pairs, not columns. The
    wavelength of pair ``i`` is ``2 * pi / omega[i]``.

    References
    ----------
    .. [1] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017, arXiv:1706.03762, §3.5.

    Examples
    --------
    >>> frequencies(8)
    array([1.   , 0.1  , 0.01 , 0.001])
    """
    return _frequencies(check_d_model(d_model), check_real(base, "base", above=1.0))


def _frequencies(d_model: int, base: float) -> NDArray[np.float64]:
    """:func:`frequencies` for checked arguments."""
    omega: NDArray[np.float64] = base ** (-np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    return omega


def _pair_columns(layout: Layout, d_model: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Column of the sine and of the cosine of each pair ``i`` in a table of the given layout."""
    pairs = np.arange(d_model // 2)
    if layout == "interleaved":
        return 2 * pairs, 2 * pairs + 1
    if layout == "cos_first":
        return 2 * pairs + 1, 2 * pairs
    return pairs, d_model // 2 + pairs  # "halves": [sin | cos]


def _pair_slices(layout: Layout, d_model: int) -> tuple[slice, slice]:
    """The columns of the sines and of the cosines as slices, for writing through strided views."""
    half = d_model // 2
    if layout == "interleaved":
        return slice(0, d_model, 2), slice(1, d_model, 2)
    if layout == "cos_first":
        return slice(1, d_model, 2), slice(0, d_model, 2)
    return slice(0, half), slice(half, d_model)  # "halves": [sin | cos]


def _phasors(angles: NDArray[np.float64]) -> NDArray[np.complex128]:
    """``exp(1j * angles)`` from float64 ``np.cos`` and ``np.sin``, the only transcendental calls of the fast path."""
    phasors = np.empty(angles.shape, dtype=np.complex128)
    np.cos(angles, out=phasors.real)
    np.sin(angles, out=phasors.imag)
    return phasors


def _fill_by_doubling(rows: NDArray[np.complex128], generators: NDArray[np.complex128]) -> None:
    """Fill ``rows[m]`` with ``rows[0] * prod(generators[j] for each set bit j of m)``, in place.

    Row ``m + 2**j`` (for ``m < 2**j``) is row ``m`` times ``generators[j]``: every row is a product of at
    most ``log2(len(rows))`` exact phasors, so the float64 rounding stays below ``1e-14`` and never grows
    with the row number. The value of a row does not depend on ``len(rows)``.
    """
    filled = 1
    for generator in generators:
        if filled >= len(rows):
            break
        count = min(filled, len(rows) - filled)
        np.multiply(rows[:count], generator, out=rows[filled : filled + count])
        filled += count


def _block_length(half: int) -> int:
    """Rows per block: a power of two, so that one block of float64 phasors (16 bytes each) is <= 256 KiB."""
    return int(min(256, max(8, 2 ** int(np.log2(max(1, 2**14 // half))))))


_THREADED_MIN_ELEMENTS = 2**21
"""Tables of at least this many elements are built by two threads (when two cores are available)."""

_TILE_ELEMENTS = 2**15
"""Complex values per scratch tile (512 KiB of float64 pairs) on the paths that cannot write in place."""


def _available_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _progression_table(
    start: float,
    step: float,
    n_positions: int,
    d_model: int,
    *,
    base: float,
    layout: Layout,
    dtype: np.dtype[Any],
    n_threads: int | None = None,
) -> NDArray[np.floating[Any]]:
    """The table of the positions ``start + step * r``, ``r < n_positions``, by blocked angle addition.

    Arguments are already validated. ``n_threads`` forces the number of threads (tests use it); ``None``
    uses two threads for tables of at least ``_THREADED_MIN_ELEMENTS`` elements when two cores are
    available, one otherwise. The result is the same bit for bit whatever the number of threads: every
    entry is the product of the same two float64 phasors, whichever thread computes it.
    """
    omega = _frequencies(d_model, base)
    half = d_model // 2
    table = np.empty((n_positions, d_model), dtype=dtype)
    if n_positions == 0:
        return table
    block = _block_length(half)
    n_blocks = -(-n_positions // block)
    # Generator j is exp(-i * step * 2**j * omega): bits 0 .. log2(block) - 1 build the offsets inside a
    # block, the higher bits the block starts. Scaling by 2**j is exact, so each angle is rounded once.
    n_generators = max(1, int(n_blocks - 1).bit_length() + block.bit_length() - 1)
    generators = _phasors(np.multiply.outer(step * 2.0 ** np.arange(n_generators), omega))
    np.conjugate(generators, out=generators)  # exp(-i * step * 2**j * omega)
    log_block = block.bit_length() - 1

    # The table's own complex form is w = sin + i cos (an interleaved pair read as one complex number), and
    # w(a + b) = w(a) * exp(-i * b * omega): the 2 x 2 block of the translation matrix T(b) as a product.
    offset_factors = np.empty((min(block, n_positions), half), dtype=np.complex128)  # exp(-i step k omega)
    offset_factors[0] = 1.0
    _fill_by_doubling(offset_factors, generators[:log_block])
    start_factors = np.empty((n_blocks, half), dtype=np.complex128)  # w(start + step * q * block)
    start_angles = start * omega
    np.sin(start_angles, out=start_factors[0].real)
    np.cos(start_angles, out=start_factors[0].imag)
    _fill_by_doubling(start_factors, generators[log_block:])
    del generators

    sine_columns, cosine_columns = _pair_slices(layout, d_model)
    if layout == "interleaved" and dtype == np.float32:
        # Write w straight into the table read as complex64: the ufunc computes in complex128 and rounds
        # each part once, through its own small buffer.
        complex_table = table.view(np.complex64)

        def build_blocks(first: int, stop: int) -> None:
            full_stop = min(stop, n_positions // block)
            if full_stop > first:
                rows = complex_table[first * block : full_stop * block].reshape(-1, block, half)
                np.multiply(start_factors[first:full_stop, None, :], offset_factors, out=rows, dtype=np.complex128)
            if stop > full_stop:  # the last, shorter block
                rows = complex_table[full_stop * block :]
                np.multiply(start_factors[full_stop], offset_factors[: len(rows)], out=rows, dtype=np.complex128)

    else:
        # Other layouts and dtypes: compute w for a few rows in a scratch tile that stays in cache, then
        # round its two parts into the sine and cosine columns. A tile is a power of two of rows (so it
        # never straddles two blocks unless it holds whole blocks), at most a quarter of the table's bytes.
        tile_rows = min(_TILE_ELEMENTS // half, table.nbytes // (4 * 16 * half))
        tile_rows = 2 ** max(0, int(tile_rows).bit_length() - 1)

        def fill_tile(tile: NDArray[np.complex128], rows: slice) -> None:
            """``tile[j]`` = w of row ``rows.start + j``: whole blocks in one call, else block by block."""
            first_block, stop_block = rows.start // block, -(-rows.stop // block)
            if rows.start % block == 0 and rows.stop - rows.start == (stop_block - first_block) * block:
                np.multiply(
                    start_factors[first_block:stop_block, None, :], offset_factors, out=tile.reshape(-1, block, half)
                )
                return
            for q in range(first_block, stop_block):
                low, high = max(rows.start, q * block), min(rows.stop, (q + 1) * block)
                np.multiply(
                    start_factors[q],
                    offset_factors[low - q * block : high - q * block],
                    out=tile[low - rows.start : high - rows.start],
                )

        def build_blocks(first: int, stop: int) -> None:
            stop_row = min(stop * block, n_positions)
            scratch = np.empty((min(tile_rows, stop_row - first * block), half), dtype=np.complex128)
            for first_row in range(first * block, stop_row, tile_rows):
                rows = slice(first_row, min(first_row + tile_rows, stop_row))
                tile = scratch[: rows.stop - rows.start]
                fill_tile(tile, rows)
                table[rows, sine_columns] = tile.real
                table[rows, cosine_columns] = tile.imag

    _run_in_threads(build_blocks, n_blocks, table.size, n_threads)
    return table


def _run_in_threads(work: Callable[[int, int], None], n_items: int, n_elements: int, n_threads: int | None) -> None:
    """Call ``work(first, stop)`` on contiguous parts of ``range(n_items)``, one thread per part.

    ``n_threads=None`` means two threads when the table has at least ``_THREADED_MIN_ELEMENTS`` elements
    and two cores are available, else one; an int forces the count (tests use this to compare paths).
    """
    if n_threads is None:
        n_threads = 2 if n_elements >= _THREADED_MIN_ELEMENTS and _available_cores() >= 2 else 1
    n_threads = max(1, min(n_threads, n_items))
    if n_threads == 1:
        work(0, n_items)
        return
    bounds = [n_items * part // n_threads for part in range(n_threads + 1)]
    with ThreadPoolExecutor(max_workers=n_threads) as pool:
        parts = [pool.submit(work, bounds[part], bounds[part + 1]) for part in range(n_threads)]
        for part in parts:
            part.result()


def sinusoidal(
    positions: int | ArrayLike,
    d_model: int,
    *,
    base: float = 10000.0,
    layout: Layout = "interleaved",
    dtype: DTypeLike = np.float32,
    start: float = 0.0,
    step: float = 1.0,
    n_threads: int | None = None,
) -> NDArray[np.floating[Any]]:
    r"""The sinusoidal positional-encoding table.

    Parameters
    ----------
    positions : int or (n_positions,) array_like of real
        An int ``n >= 0`` for the positions ``0, 1, ..., n - 1`` (``start, start + step, ...,
        start + (n - 1) * step`` when ``start`` or ``step`` is given), or the positions themselves: any
        finite real numbers, negative and fractional included (integers at most ``2**53`` in magnitude, which
        float64 holds exactly).
    d_model : int
        Width of the encoding; positive and even.
    base : float, default 10000.0
        The constant of the geometric progression of frequencies (see :func:`frequencies`).
    layout : {"interleaved", "cos_first", "halves"}, default "interleaved"
        Where the sine and cosine of pair ``i`` go. ``"interleaved"`` is the paper's: sine in column
        ``2i``, cosine in ``2i + 1``. ``"cos_first"`` swaps each pair (cosine in ``2i``), as Kernes' code
        does. ``"halves"`` puts all sines first and all cosines after, ``[sin | cos]``, as the TensorFlow
        tutorial does; tensor2tensor and fairseq use that order too, but with other frequencies (see
        Notes).
    dtype : floating dtype, default np.float32
        Dtype of the returned table.
    start, step : float, default 0.0 and 1.0
        First position and spacing when ``positions`` is an int count; any finite real numbers (a
        negative or fractional ``step`` included). Only for an int count.
    n_threads : int or None, default None
        Threads that build the table. ``None`` uses two for tables of at least 2**21 elements when two
        cores are available, else one; an int ``>= 1`` forces the count. The result is the same bits
        whatever the count.

    Returns
    -------
    table : (n_positions, d_model) ndarray of ``dtype``
        Row ``r`` encodes ``positions[r]``.

    Raises
    ------
    TypeError
        If an argument has the wrong type: a bool or str size, a non-real position array, a non-float dtype.
    ValueError
        If ``d_model`` is odd or not positive, a position, ``base``, ``start`` or ``step`` is not finite,
        ``base <= 1``, ``positions`` is negative or not 1-D, ``layout`` is unknown, ``start`` or ``step``
        is given with a position array, or the table would have more than ``posenc.MAX_TABLE_ELEMENTS``
        elements.

    Notes
    -----
    With :math:`\omega_i = \text{base}^{-2i/d_{model}}` (:func:`frequencies`), the interleaved table is

    .. math::

        PE_{(pos, 2i)} = \sin(pos\,\omega_i), \qquad PE_{(pos, 2i+1)} = \cos(pos\,\omega_i).

    The other layouts hold the same numbers in other columns (:func:`layout_permutation`).

    *How a float32 table is computed.* For evenly spaced positions (an int count, with ``start`` and
    ``step``, or an array that is exactly ``p[0] + (p[1] - p[0]) * r``) a float32 or float16 table is built
    from the translation property :math:`PE(x + \Delta) = PE(x)\,T(\Delta)` (:func:`translation_matrix`).
    Read pair ``i`` of a row as one complex number :math:`w = \sin\theta + i\cos\theta`; the 2 × 2 block of
    :math:`T(\Delta)` multiplies it by :math:`e^{-i\omega_i\Delta}`. Rows are grouped in blocks of
    :math:`B` (a power of two from 8 to 256, set by ``d_model`` alone), and row :math:`r = qB + k` is

    .. math::

        w_i(\text{start} + \text{step}\,r) = w_i(\text{start} + \text{step}\,qB)\,
        e^{-i\omega_i\,\text{step}\,k}.

    The block starts and the offsets are themselves built by doubling from float64 phasors
    :math:`e^{-i\omega\,\text{step}\,2^j}`, one row per binary digit of the row number, so only about
    :math:`(\log_2 n + 1)\,d_{model}` sines and cosines are evaluated. Every entry is then one float64
    product of factors that each hold at most :math:`\log_2 n + 1` roundings, never a running recurrence,
    and is rounded to ``dtype`` once. The error of a float32 entry is at most
    :math:`2^{-25} + 2^{-52}\,|pos|\,\omega_0 + 10^{-14}`, the same as computing the angle ``pos * omega``
    in float64 and rounding its sine (about ``3e-8`` for positions up to :math:`2^{20}`); forming the
    angles in float32, as many implementations do, loses about ``pos * 2**-24`` radians instead. A row's
    bits depend on its index, ``start`` and ``step``, not on the length of the table. Tables of at least
    ``2**21`` elements are split between two threads (NumPy releases the GIL), with the same bits. The
    block-start phasors take :math:`2/B \le 1/4` of the table's bytes and everything else at most about
    0.5 MiB, so building a table of 4 MiB or more peaks below 1.5 times its size.

    Float64 and wider tables, and position arrays that are not evenly spaced, take the direct path:
    float64 angles, ``np.sin`` and ``np.cos``, in blocks of rows, on two threads for large tables.

    tensor2tensor's ``get_timing_signal_1d`` and fairseq's ``SinusoidalPositionalEmbedding`` use the
    ``"halves"`` layout but space their frequencies by ``log(base) / (d_model // 2 - 1)``, so that the last
    is exactly ``1 / base``; fairseq also numbers positions from ``padding_idx + 1``, zeroes the padding row
    and pads an odd width with a zero column. Their tables are therefore not column permutations of this
    one, which keeps the paper's frequencies in every layout and numbers positions from 0.

    References
    ----------
    .. [1] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017, arXiv:1706.03762, §3.5.

    Examples
    --------
    >>> table = sinusoidal(3, 4)
    >>> table.shape, table.dtype
    ((3, 4), dtype('float32'))
    >>> table[1].round(4)  # [sin(1), cos(1), sin(0.01), cos(0.01)]
    array([0.8415, 0.5403, 0.01  , 1.    ], dtype=float32)
    >>> evenly = sinusoidal(3, 4, start=1.0, step=2.0)  # positions 1, 3, 5
    >>> bool(np.array_equal(evenly, sinusoidal([1.0, 3.0, 5.0], 4)))
    True
    """
    d_model = check_d_model(d_model)
    base = check_real(base, "base", above=1.0)
    layout = check_choice(layout, "layout", LAYOUTS)
    resolved = check_float_dtype(dtype)
    position_array: NDArray[np.float64] | None
    if is_int(positions):
        n_positions = check_int(positions, "positions")
        check_table_size(n_positions, d_model)
        position_array = None
    else:
        position_array = check_positions(positions, d_model)
        n_positions = len(position_array)
    start = check_real(start, "start")
    step = check_real(step, "step")
    if n_threads is not None:
        n_threads = check_int(n_threads, "n_threads", minimum=1)
    if position_array is not None and (start != 0.0 or step != 1.0):
        raise ValueError(
            f"start and step apply to an int count of positions only, got start={start}, step={step} "
            "with a position array: add them to the array instead"
        )
    if position_array is None and not math.isfinite(start + step * max(n_positions - 1, 0)):
        raise ValueError(f"start + step * (positions - 1) must be finite, got start={start}, step={step}")

    if resolved.itemsize <= 4:  # float16 and float32: evenly spaced positions take the fast path
        if position_array is not None and n_positions >= 2:
            first, spacing = position_array[0], position_array[1] - position_array[0]
            if np.array_equal(first + spacing * np.arange(n_positions), position_array):
                start, step, position_array = float(first), float(spacing), None
        # Generator angles reach |step| * 2 * (n_positions + 256): keep them finite, else go direct.
        if position_array is None and math.isfinite(abs(step) * 2.0 * (n_positions + 256)):
            return _progression_table(
                start, step, n_positions, d_model, base=base, layout=layout, dtype=resolved, n_threads=n_threads
            )
    if position_array is None:
        position_array = start + step * np.arange(n_positions, dtype=np.float64)
    return _direct_table(position_array, d_model, base=base, layout=layout, dtype=resolved, n_threads=n_threads)


def _direct_table(
    positions: NDArray[np.float64],
    d_model: int,
    *,
    base: float,
    layout: Layout,
    dtype: DTypeLike,
    n_threads: int | None = None,
) -> NDArray[np.floating[Any]]:
    """The table of any float64 ``positions``: float64 angles, ``np.sin`` and ``np.cos``, in blocks of rows.

    ``n_threads`` as in :func:`_run_in_threads`; ``np.sin`` and ``np.cos`` give the same bits for an
    element wherever it sits in an array, so the split between threads does not change the result.
    """
    omega = _frequencies(d_model, base)
    sine_columns, cosine_columns = _pair_slices(layout, d_model)
    table: NDArray[np.floating[Any]] = np.empty((len(positions), d_model), dtype=dtype)
    rows_per_block = max(1, _ANGLES_PER_BLOCK // len(omega))

    def build_rows(first: int, stop: int) -> None:
        for block_start in range(first, stop, rows_per_block):
            rows = slice(block_start, min(stop, block_start + rows_per_block))
            angles = np.multiply.outer(positions[rows], omega)
            table[rows, sine_columns] = np.sin(angles)
            table[rows, cosine_columns] = np.cos(angles)

    _run_in_threads(build_rows, len(positions), table.size, n_threads)
    return table


def translation_matrix(
    offset: float, d_model: int, *, base: float = 10000.0, layout: Layout = "interleaved"
) -> NDArray[np.float64]:
    r"""The matrix that shifts every row of a sinusoidal table by ``offset`` positions.

    Parameters
    ----------
    offset : float
        The shift :math:`\Delta`; any finite real number.
    d_model : int
        Width of the encoding; positive and even.
    base : float, default 10000.0
        As in :func:`sinusoidal`.
    layout : {"interleaved", "cos_first", "halves"}, default "interleaved"
        The layout of the rows the matrix acts on. A matrix built for one layout is wrong, by O(1), for
        another.

    Returns
    -------
    T : (d_model, d_model) ndarray of float64
        Orthogonal, with ``sinusoidal(x + offset) == sinusoidal(x) @ T`` up to rounding, for every ``x``
        (rows are row vectors).

    Notes
    -----
    Write :math:`c_i = \cos(\omega_i \Delta)` and :math:`s_i = \sin(\omega_i \Delta)`. By the angle-addition
    formulas, the interleaved pair :math:`[\sin \omega_i x, \cos \omega_i x]` times the block

    .. math::

        B_i = \begin{pmatrix} c_i & -s_i \\ s_i & c_i \end{pmatrix}

    is :math:`[\sin \omega_i (x + \Delta), \cos \omega_i (x + \Delta)]`. ``T`` carries :math:`B_i` on the
    rows and columns of pair ``i``: block diagonal for ``"interleaved"`` (and for ``"cos_first"``, where
    each block is transposed), a permuted block diagonal for ``"halves"``. ``T`` does not depend on ``x``,
    and :math:`T(a)\,T(b) = T(a + b)`, :math:`T(-a) = T(a)^\top`.

    References
    ----------
    .. [1] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017, arXiv:1706.03762, §3.5.
    .. [2] T. Denk, "Linear Relationships in the Transformer's Positional Encoding", 2019.

    Examples
    --------
    >>> T = translation_matrix(3, 8)
    >>> bool(np.allclose(sinusoidal([2.0], 8, dtype=np.float64) @ T, sinusoidal([5.0], 8, dtype=np.float64)))
    True
    """
    offset = check_real(offset, "offset")
    d_model = check_d_model(d_model)
    base = check_real(base, "base", above=1.0)
    layout = check_choice(layout, "layout", LAYOUTS)
    check_table_size(d_model, d_model, "d_model")

    angles = _frequencies(d_model, base) * offset
    cosines, sines = np.cos(angles), np.sin(angles)
    sine_columns, cosine_columns = _pair_columns(layout, d_model)
    matrix = np.zeros((d_model, d_model))
    matrix[sine_columns, sine_columns] = cosines
    matrix[cosine_columns, cosine_columns] = cosines
    matrix[sine_columns, cosine_columns] = -sines
    matrix[cosine_columns, sine_columns] = sines
    return matrix


def layout_permutation(source: Layout, target: Layout, d_model: int) -> NDArray[np.intp]:
    """Column permutation that turns a table of one layout into the same table in another.

    Parameters
    ----------
    source, target : {"interleaved", "cos_first", "halves"}
        The layouts to convert from and to.
    d_model : int
        Width of the encoding; positive and even.

    Returns
    -------
    permutation : (d_model,) ndarray of int
        ``sinusoidal(p, d_model, layout=target) == sinusoidal(p, d_model, layout=source)[:, permutation]``
        exactly, for any positions ``p``. An added encoding is summed into the residual stream, so moving a
        model trained on one layout to the other permutes the whole residual basis the same way: the
        embedding's columns, the input rows of every matrix that reads the stream, the output columns of
        every matrix that writes it, and the LayerNorm gains and biases. Permuting only the first weight
        matrix's input rows (``W[permutation]``) does not.

    Examples
    --------
    >>> layout_permutation("interleaved", "halves", 6)
    array([0, 2, 4, 1, 3, 5])
    """
    source = check_choice(source, "source", LAYOUTS)
    target = check_choice(target, "target", LAYOUTS)
    d_model = check_d_model(d_model)

    source_sines, source_cosines = _pair_columns(source, d_model)
    target_sines, target_cosines = _pair_columns(target, d_model)
    permutation = np.empty(d_model, dtype=np.intp)
    permutation[target_sines] = source_sines
    permutation[target_cosines] = source_cosines
    return permutation
