"""The book's autodoc extension (book/_ext/posenc_autodoc.py) names numpy.typing's aliases in signatures."""

import importlib.util
import inspect
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
from sphinx.util.inspect import stringify_signature

PATH = Path(__file__).resolve().parent.parent / "book" / "_ext" / "posenc_autodoc.py"
SPEC = importlib.util.spec_from_file_location("posenc_autodoc", PATH)
posenc_autodoc = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(posenc_autodoc)


def annotated(
    positions: int | npt.ArrayLike,
    layout: Literal["interleaved", "halves"] = "interleaved",
    dtype: npt.DTypeLike | None = None,
    pair: tuple[npt.NDArray[np.float64], npt.NDArray[np.floating]] | None = None,
    options: dict[str, int | str] | None = None,
) -> npt.NDArray[np.float64]:
    """A function annotated the way posenc's public functions are."""


def readable(function) -> tuple[str, str]:
    """Signature and return annotation as autodoc writes them (short type names), then made readable."""
    signature = stringify_signature(inspect.signature(function), unqualified_typehints=True)
    parameters, _, returned = signature.partition(" -> ")
    rewrite = posenc_autodoc._Readable("smart")
    return rewrite.signature(parameters), rewrite.annotation(returned)


def test_numpy_typing_aliases_are_shown_by_name():
    parameters, returned = readable(annotated)
    assert parameters == (
        "(positions: int | ~numpy.typing.ArrayLike, layout: ~typing.Literal['interleaved', 'halves'] = 'interleaved', "
        "dtype: ~numpy.typing.DTypeLike | None = None, "
        "pair: tuple[~numpy.typing.NDArray[~numpy.float64], ~numpy.typing.NDArray[~numpy.floating]] | None = None, "
        "options: dict[str, int | str] | None = None)"
    )
    assert returned == "~numpy.typing.NDArray[~numpy.float64]"


def test_a_union_with_only_some_members_of_an_alias_is_left_alone():
    rewrite = posenc_autodoc._Readable("smart")
    assert rewrite.annotation("int | str | bytes") == "int | str | bytes"
