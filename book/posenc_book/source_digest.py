"""What a committed result's staleness hash reads of a source file: its code, without docstrings or comments.

``make check-position-from-content`` (:func:`posenc_book.content_position.sources_sha256`) and ``make
check-seeds`` (``tests/check_seeds.py``) record a hash of the code their numbers come from, and their tests refuse
a file whose hash is not the current one. Both hash the code as :mod:`ast` reads it, so that a change to a
comment, the layout or a docstring does not ask for a new run; :class:`WithoutDocstrings` is what they leave out.
"""

from __future__ import annotations

import ast

__all__ = ["WithoutDocstrings", "code_of"]


class WithoutDocstrings(ast.NodeTransformer):
    """Every statement that is a bare string (a docstring, an attribute's docstring) becomes ``pass``."""

    def visit_Expr(self, node: ast.Expr) -> ast.stmt:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return ast.copy_location(ast.Pass(), node)
        return node


def code_of(source: str) -> str:
    r"""``source``'s code as :func:`ast.unparse` writes it, docstrings replaced by ``pass`` and comments gone.

    Examples
    --------
    >>> code_of("def f(x):\n    'Twice x.'\n    return 2 * x  # doubled\n")
    'def f(x):\n    pass\n    return 2 * x'
    """
    return ast.unparse(WithoutDocstrings().visit(ast.parse(source)))
