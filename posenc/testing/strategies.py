"""Hypothesis strategies for the rotary conformance suite: real configs, positions, dtypes and layouts.

Needs Hypothesis (``pip install "posenc[hypothesis]"``); the rest of :mod:`posenc.testing` and its pytest plugin do
not. Each :class:`~posenc.testing.RotaryCase` drawn is a layer kind of a real config (the catalogue of
:func:`posenc.testing.rotary_cases`) at drawn positions, within its trained length or beyond, in a drawn dtype::

    from hypothesis import given
    from posenc.testing import strategies

    @given(strategies.rotary_cases(dtypes=("float32", "bfloat16")))
    def test_my_rotary(case):
        case.check(my_rotary_for(case), array="torch")

Hypothesis then shrinks a failure to a small case: few positions, near 0 or near the trained length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

try:
    from hypothesis import strategies as st
except ModuleNotFoundError as error:  # the extra is optional: say which one
    raise ImportError(
        'posenc.testing.strategies needs Hypothesis: pip install "posenc[hypothesis]" (or pip install hypothesis)'
    ) from error

from posenc._validation import ROTARY_LAYOUTS, RotaryLayout, check_choice, check_int
from posenc.testing._common import MAX_POSITION
from posenc.testing._conformance import (
    DTYPES,
    QKV_FORMATS,
    DtypeName,
    QkvFormat,
    RotaryCase,
    rotary_positions,
)
from posenc.testing._conformance import (
    rotary_cases as catalogue,
)

__all__ = ["dtypes", "layouts", "positions", "qkv_formats", "rotary_cases"]


def positions(
    trained_length: int,
    max_position_embeddings: int | None = None,
    *,
    beyond: bool | None = None,
    max_size: int = 32,
) -> st.SearchStrategy[tuple[int, ...]]:
    """Positions of one call of a rotary operator: any order, repeats allowed.

    Parameters
    ----------
    trained_length : int
        ``L``, between 1 and ``2**24``.
    max_position_embeddings : int or None, default None
        The config's declared context: positions beyond ``L`` reach up to the larger of ``2L`` and
        ``max_position_embeddings - 1`` (at most ``2**24``).
    beyond : bool or None, default None
        All positions below ``L`` (False), at least one at ``L`` or beyond (True), or either.
    max_size : int, default 32
        At most this many positions, between 1 and 64.

    Returns
    -------
    strategy : SearchStrategy of tuple of int
        Each element drawn from the whole range or from the edges :func:`posenc.testing.rotary_positions`
        lists (0, ``L - 1``, ``L``, ``2L``, ...).

    Raises
    ------
    TypeError, ValueError
        If an argument is out of range or of the wrong type.
    """
    length = check_int(trained_length, "trained_length", minimum=1, maximum=MAX_POSITION)
    if max_position_embeddings is not None:
        max_position_embeddings = check_int(max_position_embeddings, "max_position_embeddings", minimum=1)
    if beyond is not None and not isinstance(beyond, bool):
        raise TypeError(f"beyond must be None or a bool, got {type(beyond).__name__}")
    max_size = check_int(max_size, "max_size", minimum=1, maximum=64)
    top = min(MAX_POSITION, max(2 * length, (max_position_embeddings or 0) - 1))
    edges = rotary_positions(length, max_position_embeddings, beyond=True)

    def element(low: int, high: int) -> st.SearchStrategy[int]:
        inside = [p for p in edges if low <= p <= high]
        return st.one_of(st.integers(low, high), st.sampled_from(inside)) if inside else st.integers(low, high)

    inside = st.lists(element(0, length - 1), min_size=1, max_size=max_size).map(tuple)
    if length > top:  # L = 2**24: nothing beyond it is tried
        return inside
    reaching = st.tuples(element(length, top), st.lists(element(0, top), max_size=max_size - 1)).flatmap(
        lambda drawn: st.permutations([drawn[0], *drawn[1]]).map(tuple)
    )
    if beyond is None:
        return st.one_of(inside, reaching)
    return reaching if beyond else inside


def dtypes(*, array: str = "torch") -> st.SearchStrategy[DtypeName]:
    """The dtypes of ``x`` a rotary operator is checked in.

    Parameters
    ----------
    array : {"torch", "numpy"}, default "torch"
        NumPy has no bfloat16: ``"numpy"`` leaves it out.

    Returns
    -------
    strategy : SearchStrategy of str
        float32, float64, float16 and (torch) bfloat16.
    """
    array = check_choice(array, "array", ("torch", "numpy"))
    return st.sampled_from([d for d in DTYPES if array == "torch" or d != "bfloat16"])


def layouts() -> st.SearchStrategy[RotaryLayout]:
    """The pair layouts: ``"interleaved"`` and ``"halves"``.

    Returns
    -------
    strategy : SearchStrategy of str
    """
    return st.sampled_from(ROTARY_LAYOUTS)


def qkv_formats() -> st.SearchStrategy[QkvFormat]:
    """The layouts of ``x``: ``"bhsd"``, ``"bshd"``, ``"shd"`` and ``"sd"`` (see
    :func:`posenc.testing.assert_rotary_conforms`).

    Returns
    -------
    strategy : SearchStrategy of str
    """
    return st.sampled_from(QKV_FORMATS)


def rotary_cases(
    *,
    dtypes: Sequence[DtypeName] = ("float32",),
    beyond: bool | None = None,
    rope_types: Sequence[str] | None = None,
    max_positions: int = 32,
) -> st.SearchStrategy[RotaryCase]:
    """Cases of the catalogue of :func:`posenc.testing.rotary_cases`, at drawn positions, in a drawn dtype.

    Parameters
    ----------
    dtypes : sequence of {"float32", "float64", "float16", "bfloat16"}, default ("float32",)
        The dtypes to draw from.
    beyond : bool or None, default None
        As for :func:`positions`.
    rope_types : sequence of str or None, default None
        Only layer kinds of these rope types (``"default"``, ``"linear"``, ``"llama3"``, ``"yarn"``,
        ``"longrope"``, ``"proportional"``: those of the catalogue); None: all.
    max_positions : int, default 32
        As ``max_size`` for :func:`positions`.

    Returns
    -------
    strategy : SearchStrategy of RotaryCase

    Raises
    ------
    TypeError, ValueError
        If an argument is invalid, or no case of the catalogue has one of ``rope_types``.
    """
    chosen = [check_choice(d, "dtypes", DTYPES) for d in dtypes]
    if not chosen:
        raise ValueError("dtypes must name at least one dtype")
    cases = catalogue(beyond=False)
    if rope_types is not None:
        wanted = {str(t) for t in rope_types}
        cases = [case for case in cases if case.scaling.rope_type in wanted]
        if not cases:
            raise ValueError(f"rope_types must name a rope type of the catalogue, got {sorted(wanted)}")

    @st.composite
    def draw_case(draw: st.DrawFn) -> RotaryCase:
        case = draw(st.sampled_from(cases))
        drawn = draw(
            positions(case.trained_length, case.max_position_embeddings, beyond=beyond, max_size=max_positions)
        )
        return replace(case, positions=drawn, dtype=draw(st.sampled_from(chosen)))

    return draw_case()
