"""Argument checks shared by the public functions.

Every public function validates its arguments here, before it allocates anything large, and raises a
``TypeError`` (wrong kind of value) or ``ValueError`` (right kind, wrong value) whose message names the
parameter and the accepted range.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

LAYOUTS = ("interleaved", "cos_first", "halves")
"""The column layouts of a sinusoidal table: see :func:`posenc.sinusoidal`."""

MAX_TABLE_ELEMENTS = 2**28
"""Largest table (``n_positions * d_model`` elements) any function will build: 1 GiB in float32."""


def check_count(value, name: str, *, minimum: int = 0) -> int:
    """Return ``value`` as an ``int`` if it is an integer (not a bool) that is at least ``minimum``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int >= {minimum}, got {type(value).__name__} {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value}")
    return value


def check_d_model(d_model, *, even: bool = True, name: str = "d_model") -> int:
    """Return a width as an ``int``: positive, at most :data:`MAX_TABLE_ELEMENTS`, even unless ``even=False``.

    ``name`` is the parameter the message names (``d_model``, or ``head_dim`` for :func:`check_head_dim`).
    """
    kind = f"a{' positive even' if even else ' positive'} int <= {MAX_TABLE_ELEMENTS}"
    if isinstance(d_model, (bool, np.bool_)) or not isinstance(d_model, numbers.Integral):
        raise TypeError(f"{name} must be {kind}, got {type(d_model).__name__} {d_model!r}")
    d_model = int(d_model)
    if not 0 < d_model <= MAX_TABLE_ELEMENTS or (even and d_model % 2):
        raise ValueError(f"{name} must be {kind}, got {d_model}")
    return d_model


def check_real(value, name: str) -> float:
    """Return ``value`` as a ``float`` if it is a finite real number (not a bool)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a finite real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value}")
    return value


def check_base(base) -> float:
    """Return ``base`` as a ``float``: finite and greater than 1."""
    if isinstance(base, (bool, np.bool_)) or not isinstance(base, numbers.Real):
        raise TypeError(f"base must be a finite real number > 1, got {type(base).__name__} {base!r}")
    base = float(base)
    if not (math.isfinite(base) and base > 1.0):
        raise ValueError(f"base must be a finite real number > 1, got {base}")
    return base


def check_layout(layout, name: str = "layout", accepted: tuple[str, ...] = LAYOUTS) -> str:
    """Return ``layout`` if it is one of ``accepted`` (:data:`LAYOUTS` unless given)."""
    if not isinstance(layout, str):
        raise TypeError(f"{name} must be one of {accepted}, got {type(layout).__name__} {layout!r}")
    if layout not in accepted:
        raise ValueError(f"{name} must be one of {accepted}, got {layout!r}")
    return layout


def check_float_dtype(dtype) -> np.dtype:
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


def check_positions(positions, d_model: int) -> np.ndarray:
    """Return the positions as a 1-D float64 array, refusing tables that would be too large.

    ``positions`` is either an int ``n >= 0`` (meaning ``0, 1, ..., n - 1``) or a 1-D array-like of finite
    real numbers. An int count is checked against :data:`MAX_TABLE_ELEMENTS` before it is expanded.
    """
    accepted = "an int >= 0 or a 1-D array of finite real numbers"
    if isinstance(positions, (bool, np.bool_)):
        raise TypeError(f"positions must be {accepted}, got bool {positions!r}")
    if isinstance(positions, numbers.Integral):
        n_positions = check_count(positions, "positions")
        check_table_size(n_positions, d_model)
        return np.arange(n_positions, dtype=np.float64)
    if isinstance(positions, (str, bytes, numbers.Number)) or not (
        hasattr(positions, "__len__") or hasattr(positions, "__array__")
    ):
        raise TypeError(f"positions must be {accepted}, got {type(positions).__name__} {positions!r}")
    array = np.asarray(positions)
    is_real = np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    if array.dtype == np.bool_ or not is_real:
        raise TypeError(f"positions must be {accepted}, got an array of dtype {array.dtype}")
    if array.ndim != 1:
        raise ValueError(f"positions must be {accepted}, got an array of shape {array.shape}")
    check_table_size(len(array), d_model)
    array = array.astype(np.float64)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"positions must be {accepted}: found NaN or infinity")
    return array


def check_table_size(n_rows: int, n_columns: int, rows_name: str = "positions", columns_name: str = "d_model") -> None:
    """Refuse a table of more than :data:`MAX_TABLE_ELEMENTS` elements before it is allocated."""
    if n_rows * n_columns > MAX_TABLE_ELEMENTS:
        smaller = rows_name if rows_name == columns_name else f"{rows_name} or {columns_name}"
        raise ValueError(
            f"{rows_name} x {columns_name} = {n_rows} x {n_columns} exceeds the limit of {MAX_TABLE_ELEMENTS} "
            f"elements: ask for a smaller {smaller}"
        )


ROTARY_LAYOUTS = ("interleaved", "halves")
"""Where the two members of each rotated pair sit in a rotary head: see :func:`posenc.rotate`."""


def check_head_dim(head_dim) -> int:
    """Return ``head_dim`` as an ``int``: positive, even, at most :data:`MAX_TABLE_ELEMENTS`."""
    return check_d_model(head_dim, name="head_dim")


def check_rotary_layout(layout, name: str = "layout") -> str:
    """Return ``layout`` if it is one of :data:`ROTARY_LAYOUTS`."""
    return check_layout(layout, name, accepted=ROTARY_LAYOUTS)


def check_flag(value, name: str) -> bool:
    """Return ``value`` if it is a bool (Python or NumPy); an int such as 0 or 1 is refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def check_int_in(value, name: str, *, minimum: int, maximum: int) -> int:
    """Return ``value`` as an ``int`` if it is an integer (not a bool) in ``[minimum, maximum]``."""
    accepted = f"an int in [{minimum}, {maximum}]"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {accepted}, got {type(value).__name__} {value!r}")
    value = int(value)
    if not minimum <= value <= maximum:
        raise ValueError(f"{name} must be {accepted}, got {value}")
    return value


MAX_OFFSET = 2**52
"""Largest ``|offset|`` (absolute position of query 0) the relative-position functions accept: with at most
:data:`MAX_TABLE_ELEMENTS` queries or keys, every position and difference of positions stays exact in float64."""


def check_query_key_lengths(q_len, k_len, offset, n_per_pair: int = 1, per_pair_name: str = "") -> tuple[int, int, int]:
    """Validate ``q_len``, ``k_len`` (``None``: ``q_len``) and ``offset`` (``None``: ``k_len - q_len``).

    Query ``i`` sits at absolute position ``offset + i`` and key ``j`` at ``j``. Refuses a result of more than
    :data:`MAX_TABLE_ELEMENTS` elements (``n_per_pair`` values per (query, key) pair, ``per_pair_name`` names
    that factor in the message).
    """
    q_len = check_count(q_len, "q_len")
    k_len = q_len if k_len is None else check_count(k_len, "k_len")
    rows_name = f"{per_pair_name} * q_len" if per_pair_name else "q_len"
    check_table_size(n_per_pair * q_len, k_len, rows_name, "k_len")
    if offset is None:
        offset = k_len - q_len
    else:
        offset = check_int_in(offset, "offset", minimum=-MAX_OFFSET, maximum=MAX_OFFSET)
    return q_len, k_len, offset
