"""Sphinx extension for the API reference (book/api/): re-exported names, and readable NumPy types.

Re-exported names. The reference documents each object under the name a user imports
(``posenc.sinusoidal``, ``posenc.LAYOUTS``, ``posenc.nn.RotaryEmbedding``), while it is defined in another
module (``posenc.sinusoid``, ``posenc._validation``, ``posenc.nn.rotary``). Autodoc handles that for classes
only, by giving them a ``:canonical:`` name. Here

* functions get ``:canonical:`` too, so that a reference written inside the defining module, such as
  ``:func:`alibi_slopes``` in the docstring of ``posenc.alibi.MAX_HEADS``, resolves to the entry of
  ``posenc.alibi_slopes`` (a reference to a name documented nowhere still fails the ``-n`` build);
* a constant's docstring (the string after its assignment) is read from the module that assigns it;
  autodoc looks for it in the module it is documented under, finds none, and shows the docstring of
  ``int`` or ``tuple`` instead.

Readable NumPy types. Autodoc evaluates annotations, and ``numpy.typing.ArrayLike`` (a union of seven
types, private ones included) and ``DTypeLike`` come out expanded, and ``NDArray[np.float64]`` as
``ndarray[tuple[Any, ...], dtype[float64]]``. Signatures get the names back: a union that holds every
member of ``ArrayLike`` shows ``ArrayLike`` in their place, and the ``ndarray`` form shows as ``NDArray``.
(``autodoc_type_aliases`` cannot do this: its placeholders break ``int | ArrayLike`` in Sphinx 7.4, and a
function whose annotations fail to evaluate is shown with its raw annotation strings, whose names, such
as a ``Literal`` alias, resolve nowhere.)

Loaded from ``_config.yml`` (``local_extensions`` puts this folder on the build's path; the extension is
named in the ``extensions`` list there).
"""

from __future__ import annotations

import sys
import typing

import numpy.typing as npt
from sphinx.ext.autodoc import DataDocumenter, FunctionDocumenter
from sphinx.pycode import ModuleAnalyzer
from sphinx.util.typing import ExtensionMetadata, stringify_annotation

PACKAGE = "posenc"

UNION_ALIASES = {"numpy.typing.ArrayLike": npt.ArrayLike, "numpy.typing.DTypeLike": npt.DTypeLike}
"""Unions shown under their name when a signature holds all of their members."""


class ReexportedFunctionDocumenter(FunctionDocumenter):
    """``autofunction`` that names the defining module's path as the function's canonical name."""

    def add_directive_header(self, sig: str) -> None:
        super().add_directive_header(sig)
        module = getattr(self.object, "__module__", None)
        qualname = getattr(self.object, "__qualname__", None)
        if module and qualname and f"{module}.{qualname}" != self.fullname:
            self.add_line(f"   :canonical: {module}.{qualname}", self.get_sourcename())


class ReexportedDataDocumenter(DataDocumenter):
    """``autodata`` that finds a re-exported constant's docstring in the module that assigns it."""

    def get_module_comment(self, attrname: str) -> list[str] | None:
        comment = super().get_module_comment(attrname)
        if comment or self.modname.split(".")[0] != PACKAGE:
            return comment
        for name, module in sorted(sys.modules.items()):
            if name.split(".")[0] == PACKAGE and getattr(module, attrname, None) is self.object:
                analyzer = ModuleAnalyzer.for_module(name)
                analyzer.analyze()
                if ("", attrname) in analyzer.attr_docs:
                    return list(analyzer.attr_docs[("", attrname)])
        return None


def _balanced(text: str) -> bool:
    """Whether every bracket of ``text`` closes inside it."""
    depth = 0
    for char in text:
        depth += (char in "([{") - (char in ")]}")
        if depth < 0:
            return False
    return depth == 0


def _split(text: str, separator: str) -> list[str]:
    """``text`` split at each ``separator`` outside brackets and quotes."""
    parts, depth, quote, start, i = [], 0, None, 0, 0
    while i < len(text):
        char = text[i]
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(separator, i):
            parts.append(text[start:i])
            start = i + len(separator)
            i = start
            continue
        i += 1
    parts.append(text[start:])
    return parts


class _Readable:
    """Rewrites the annotations of a signature as autodoc wrote them (``mode``: its stringify mode)."""

    def __init__(self, mode: str):
        self.unions = {
            ("~" if mode == "smart" else "") + name: {stringify_annotation(arg, mode) for arg in typing.get_args(alias)}
            for name, alias in UNION_ALIASES.items()
        }
        anything = stringify_annotation(typing.Any, mode)
        template = stringify_annotation(npt.NDArray[typing.Any], mode)
        cut = template.rindex(anything)
        self.ndarray_prefix, self.ndarray_suffix = template[:cut], template[cut + len(anything) :]
        self.ndarray_name = ("~" if mode == "smart" else "") + "numpy.typing.NDArray"

    def annotation(self, text: str) -> str:
        members = [self._member(member) for member in _split(text, " | ")]
        for name, expansion in self.unions.items():
            if expansion <= set(members):
                first = min(members.index(member) for member in expansion)
                members = [*members[:first], name, *(m for m in members[first:] if m not in expansion)]
        return " | ".join(members)

    def _member(self, text: str) -> str:
        prefix, suffix = self.ndarray_prefix, self.ndarray_suffix
        inner = text[len(prefix) : -len(suffix)]
        if text.startswith(prefix) and text.endswith(suffix) and _balanced(inner):
            return f"{self.ndarray_name}[{self.annotation(inner)}]"
        head, bracket, rest = text.partition("[")
        if not bracket or not rest.endswith("]"):
            return text
        return f"{head}[{', '.join(self.annotation(arg) for arg in _split(rest[:-1], ', '))}]"

    def signature(self, text: str) -> str:
        if not (text.startswith("(") and text.endswith(")")):
            return text
        parameters = []
        for parameter in _split(text[1:-1], ", "):
            name, *annotated = _split(parameter, ": ")
            if annotated:
                annotation, *default = _split(": ".join(annotated), " = ")
                parameter = " = ".join([f"{name}: {self.annotation(annotation)}", *default])
            parameters.append(parameter)
        return f"({', '.join(parameters)})"


def _readable_signature(app, what, name, obj, options, signature, return_annotation):
    """``autodoc-process-signature``: the signature with ``ArrayLike``, ``DTypeLike`` and ``NDArray`` named."""
    if not name.split(".")[0] == PACKAGE or (signature is None and return_annotation is None):
        return None
    readable = _Readable("smart" if app.config.autodoc_typehints_format == "short" else "fully-qualified-except-typing")
    return (
        None if signature is None else readable.signature(signature),
        None if return_annotation is None else readable.annotation(return_annotation),
    )


def setup(app) -> ExtensionMetadata:
    app.setup_extension("sphinx.ext.autodoc")
    app.add_autodocumenter(ReexportedFunctionDocumenter, override=True)
    app.add_autodocumenter(ReexportedDataDocumenter, override=True)
    app.connect("autodoc-process-signature", _readable_signature)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
