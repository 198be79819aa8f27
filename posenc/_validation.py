"""Argument checks shared by the library: the one place where a bad argument becomes an error.

Every public function checks its arguments here, before it allocates anything large, and raises a
``TypeError`` (wrong kind of value) or ``ValueError`` (right kind, wrong value) whose message names the
parameter and what it accepts. Four general checks do the work: :func:`check_int`, :func:`check_real`,
:func:`check_flag` and :func:`check_choice` (each refuses a bool where a number is expected); the others are
the parameters several modules share (a width, positions, a dtype, a table size, query and key lengths).
Checks of tensors live in :mod:`posenc.nn._checks`, built on these.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Literal, TypeGuard, TypeVar, get_args

import numpy as np
from numpy.typing import DTypeLike, NDArray

Layout = Literal["interleaved", "cos_first", "halves"]
"""The column layouts of a sinusoidal table: see :func:`posenc.sinusoidal`."""

LAYOUTS: tuple[Layout, ...] = get_args(Layout)
"""The values of :data:`Layout`, in that order."""

RotaryLayout = Literal["interleaved", "halves"]
"""Where the two members of each rotated pair sit in a rotary head: see :func:`posenc.rotate`."""

ROTARY_LAYOUTS: tuple[RotaryLayout, ...] = get_args(RotaryLayout)
"""The values of :data:`RotaryLayout`, in that order."""

MAX_TABLE_ELEMENTS = 2**28
"""Largest table (``n_positions * d_model`` elements) any function will build: 1 GiB in float32."""

MAX_OFFSET = 2**52
"""Largest ``|offset|`` (absolute position of query 0) the relative-position functions accept: with at most
:data:`MAX_TABLE_ELEMENTS` queries or keys, every position and difference of positions stays exact in float64."""

MAX_EXACT_INTEGER = 2**53
"""Largest magnitude of an integer position the library accepts: every integer in ``[-2**53, 2**53]`` converts to
float64 exactly, and ``2**53 + 1`` would become ``2**53`` (``posenc.nn.RotaryEmbedding`` bounds ``offset + seq`` by
the same number)."""

Choice = TypeVar("Choice", bound=str)


# --- The general checks ------------------------------------------------------------------------------------


def is_int(value: object) -> TypeGuard[numbers.Integral]:
    """Whether ``value`` is an integer (a Python int of any size or a NumPy integer), a bool excluded."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def is_real(value: object) -> TypeGuard[numbers.Real]:
    """Whether ``value`` is a real number (int, float, NumPy integer or floating, Fraction), a bool excluded."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def check_int(
    value: object,
    name: str,
    *,
    minimum: int | None = 0,
    maximum: int | None = None,
    even: bool = False,
    accepted: str | None = None,
) -> int:
    """Return ``value`` as an ``int`` if it is an integer (not a bool) in ``[minimum, maximum]``, even if asked.

    ``None`` leaves a bound open. ``accepted`` replaces the description of the accepted values in the message
    (by default "an int >= 0", "an int in [1, 64]", "an even int in [2, 4096]" ...).
    """
    if accepted is None:
        kind = "an even int" if even else "an int"
        if minimum is not None and maximum is not None:
            accepted = f"{kind} in [{minimum}, {maximum}]"
        elif minimum is not None or maximum is not None:
            accepted = f"{kind} >= {minimum}" if minimum is not None else f"{kind} <= {maximum}"
        else:
            accepted = kind
    if not is_int(value):
        raise TypeError(f"{name} must be {accepted}, got {type(value).__name__} {value!r}")
    number = int(value)
    if (
        (minimum is not None and number < minimum)
        or (maximum is not None and number > maximum)
        or (even and number % 2)
    ):
        raise ValueError(f"{name} must be {accepted}, got {number}")
    return number


def check_real(
    value: object,
    name: str,
    *,
    above: float | None = None,
    at_least: float | None = None,
    below: float | None = None,
    accepted: str | None = None,
) -> float:
    """Return ``value`` as a ``float`` if it is a finite real number (not a bool) within the bounds given.

    ``above`` and ``below`` are strict bounds, ``at_least`` an inclusive one. ``accepted`` replaces the
    description of the accepted values in the message (by default "a finite real number > 1" ...).
    """
    if accepted is None:
        accepted = "a finite real number"
        if at_least is not None and below is not None:
            accepted += f" in [{at_least:g}, {below:g})"
        else:
            bounds = [(">", above), (">=", at_least), ("<", below)]
            accepted += "".join(f" {sign} {bound:g}" for sign, bound in bounds if bound is not None)
    if not is_real(value):
        raise TypeError(f"{name} must be {accepted}, got {type(value).__name__} {value!r}")
    try:
        number = float(value)
    except OverflowError:  # an int beyond the float range
        raise ValueError(f"{name} must be {accepted}, got {value}") from None
    if (
        not math.isfinite(number)
        or (above is not None and number <= above)
        or (at_least is not None and number < at_least)
        or (below is not None and number >= below)
    ):
        raise ValueError(f"{name} must be {accepted}, got {number}")
    return number


def check_flag(value: object, name: str) -> bool:
    """Return ``value`` if it is a bool (Python or NumPy); an int such as 0 or 1 is refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def check_choice(value: object, name: str, choices: tuple[Choice, ...]) -> Choice:
    """Return ``value`` if it is one of the strings ``choices``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {choices}, got {type(value).__name__} {value!r}")
    for choice in choices:
        if value == choice:
            return choice
    raise ValueError(f"{name} must be one of {choices}, got {value!r}")


# --- Parameters several modules share ----------------------------------------------------------------------


def check_d_model(d_model: object, *, even: bool = True, name: str = "d_model") -> int:
    """Return a width as an ``int``: positive, at most :data:`MAX_TABLE_ELEMENTS`, even unless ``even=False``.

    ``name`` is the parameter the message names (``d_model``, ``head_dim``, ...).
    """
    accepted = f"a positive{' even' if even else ''} int <= {MAX_TABLE_ELEMENTS}"
    return check_int(d_model, name, minimum=1, maximum=MAX_TABLE_ELEMENTS, even=even, accepted=accepted)


def check_table_size(
    n_rows: int, n_columns: int, rows_name: str = "positions", columns_name: str = "d_model", *, hint: str = ""
) -> None:
    """Refuse a table of more than :data:`MAX_TABLE_ELEMENTS` elements before it is allocated.

    ``hint``, when given, ends the message (another way to get the result without the table).
    """
    if n_rows * n_columns > MAX_TABLE_ELEMENTS:
        smaller = rows_name if rows_name == columns_name else f"{rows_name} or {columns_name}"
        raise ValueError(
            f"{rows_name} x {columns_name} = {n_rows} x {n_columns} exceeds the limit of {MAX_TABLE_ELEMENTS} "
            f"elements: ask for a smaller {smaller}{f', or {hint}' if hint else ''}"
        )


def check_float_dtype(dtype: DTypeLike) -> np.dtype[Any]:
    """Return ``dtype`` as a NumPy floating dtype (float16, float32, float64 or longdouble)."""
    accepted = "a NumPy floating dtype such as np.float32 or np.float64"
    if dtype is None or isinstance(dtype, bool):
        raise TypeError(f"dtype must be {accepted}, got {dtype!r}")
    try:
        resolved = np.dtype(dtype)
    except TypeError as error:
        raise TypeError(f"dtype must be {accepted}, got {dtype!r}") from error
    if not np.issubdtype(resolved, np.floating):
        raise TypeError(f"dtype must be {accepted}, got {resolved}")
    return resolved


def check_exact_integers(array: NDArray[Any], name: str, accepted: str) -> None:
    """Refuse an integer ``array`` holding a value beyond :data:`MAX_EXACT_INTEGER` in magnitude.

    Such a value would change when converted to float64 (``2**53 + 1`` becomes ``2**53``): a position rounded so
    would be rotated or encoded as another position, with no message. Floating arrays are what they are.
    """
    if np.issubdtype(array.dtype, np.integer) and array.size:
        beyond = (array > MAX_EXACT_INTEGER) | (array < -MAX_EXACT_INTEGER)
        if np.any(beyond):
            raise ValueError(
                f"{name} must be {accepted}: integers beyond 2**53 in magnitude do not convert to float64 exactly, "
                f"got {array[beyond].flat[0]}"
            )


def check_positions(positions: object, d_model: int) -> NDArray[np.float64]:
    """Return the positions as a 1-D float64 array, refusing tables that would be too large.

    ``positions`` is either an int ``n >= 0`` (meaning ``0, 1, ..., n - 1``) or a 1-D array-like of finite
    real numbers (integers at most ``2**53`` in magnitude, which float64 holds exactly). An int count is checked
    against :data:`MAX_TABLE_ELEMENTS` before it is expanded.
    """
    accepted = "an int >= 0 or a 1-D array of finite real numbers"
    if is_int(positions):
        n_positions = check_int(positions, "positions")
        check_table_size(n_positions, d_model)
        return np.arange(n_positions, dtype=np.float64)
    if isinstance(positions, (bool, np.bool_, str, bytes, numbers.Number)) or not (
        hasattr(positions, "__len__") or hasattr(positions, "__array__")
    ):
        raise TypeError(f"positions must be {accepted}, got {type(positions).__name__} {positions!r}")
    array = np.asarray(positions)
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise TypeError(f"positions must be {accepted}, got an array of dtype {array.dtype}")
    if array.ndim != 1:
        raise ValueError(f"positions must be {accepted}, got an array of shape {array.shape}")
    check_table_size(len(array), d_model)
    check_exact_integers(array, "positions", accepted)
    array = array.astype(np.float64)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"positions must be {accepted}: found NaN or infinity")
    return array


def check_query_key_lengths(
    q_len: object, k_len: object, offset: object, n_per_pair: int = 1, per_pair_name: str = "", *, hint: str = ""
) -> tuple[int, int, int]:
    """Validate ``q_len``, ``k_len`` (``None``: ``q_len``) and ``offset`` (``None``: ``k_len - q_len``).

    Query ``i`` sits at absolute position ``offset + i`` and key ``j`` at ``j``. Refuses a result of more than
    :data:`MAX_TABLE_ELEMENTS` elements (``n_per_pair`` values per (query, key) pair, ``per_pair_name`` names
    that factor in the message, ``hint`` ends it as in :func:`check_table_size`). An empty result (no queries,
    or no keys) passes whatever the other length: every caller returns it before it computes anything per query
    or per key (tests/test_positions.py, ``test_an_empty_bias_allocates_nothing_of_the_other_length``).
    """
    queries = check_int(q_len, "q_len")
    keys = queries if k_len is None else check_int(k_len, "k_len")
    rows_name = f"{per_pair_name} * q_len" if per_pair_name else "q_len"
    check_table_size(n_per_pair * queries, keys, rows_name, "k_len", hint=hint)
    if offset is None:
        return queries, keys, keys - queries
    return queries, keys, check_int(offset, "offset", minimum=-MAX_OFFSET, maximum=MAX_OFFSET)


def check_t5_buckets(bidirectional: object, num_buckets: object, max_distance: object) -> tuple[bool, int, int]:
    """Validate a T5 bucket configuration: see :func:`posenc.t5_relative_bucket` for the accepted values."""
    bidirectional = check_flag(bidirectional, "bidirectional")
    buckets = check_int(num_buckets, "num_buckets", minimum=4 if bidirectional else 2, maximum=2**16)
    if bidirectional and buckets % 2:
        raise ValueError(
            f"num_buckets must be even when bidirectional=True (half for keys before the query, half for keys "
            f"after), got {buckets}"
        )
    max_exact = (buckets // 2 if bidirectional else buckets) // 2
    accepted = (
        f"an int > max_exact = {max_exact} (num_buckets={buckets}, bidirectional={bidirectional}) and <= {MAX_OFFSET}"
    )
    return (
        bidirectional,
        buckets,
        check_int(max_distance, "max_distance", minimum=max_exact + 1, maximum=MAX_OFFSET, accepted=accepted),
    )


def check_real_array(
    value: object, name: str, accepted: str, *, min_ndim: int = 0, allow_neginf: bool = False
) -> NDArray[np.float64]:
    """``value`` (ints or floats, not bools) as a float64 array with at least ``min_ndim`` axes.

    Every entry must be finite, or ``-inf`` as well when ``allow_neginf``; at most :data:`MAX_TABLE_ELEMENTS`
    entries. ``accepted`` describes the accepted values in the message.
    """
    if isinstance(value, (str, bytes, numbers.Number)) or not (
        hasattr(value, "__len__") or hasattr(value, "__array__")
    ):
        raise TypeError(f"{name} must be {accepted}, got {type(value).__name__} {value!r}")
    try:
        array = np.asarray(value)
    except ValueError as error:  # a ragged nested sequence
        raise TypeError(f"{name} must be {accepted}: {error}") from error
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise TypeError(f"{name} must be {accepted}, got an array of dtype {array.dtype}")
    if array.ndim < min_ndim:
        raise ValueError(f"{name} must be {accepted}, got an array of shape {array.shape}")
    if array.size > MAX_TABLE_ELEMENTS:
        raise ValueError(f"{name} must have at most {MAX_TABLE_ELEMENTS} elements, got {array.size}")
    converted = array.astype(np.float64)
    allowed = np.isfinite(converted) | (np.isneginf(converted) if allow_neginf else False)
    if not np.all(allowed):
        found = "NaN or +inf" if allow_neginf else "NaN or infinity"
        raise ValueError(f"{name} must be {accepted}: found {found}")
    return converted
