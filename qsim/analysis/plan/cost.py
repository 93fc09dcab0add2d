"""A cost over the varied parameters: ``workers*concurrency``, ``workers*0.05 + concurrency*0.01``.

The expression is parsed with :mod:`ast` and only this is allowed: numbers,
names, ``+ - * / **``, unary ``+``/``-`` and parentheses; anything else (calls,
attributes of objects, subscripts, comparisons...) is refused. User text is
never passed to ``eval``: :class:`Cost` walks the parsed tree itself, in floats
(an overflow is an infinite cost).

An expression is at most :data:`MAX_LENGTH` characters and :data:`MAX_DEPTH`
operators or parentheses deep: deeper ones (``((((...))))`` 5,000 times) are
refused with one sentence before the walk, whose recursion they would exhaust.

A name is either a varied parameter's full path (``pools.web.workers``), the
last part of exactly one varied path (``workers``), or the path of any
scenario field (``pools.web.concurrency`` when only the workers vary: its
value in the scenario).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qsim.analysis.plan.sweep import param_value
from qsim.errors import ScenarioError
from qsim.spec.scenario import Scenario

__all__ = ["Cost", "parse_cost", "MAX_LENGTH", "MAX_DEPTH"]

#: The longest cost expression accepted, in characters.
MAX_LENGTH = 2000
#: The deepest nesting accepted: operators inside operators, parentheses inside parentheses.
MAX_DEPTH = 100


class _Undefined(ArithmeticError):
    """A negative number to a fractional power (Python would give a complex number)."""


def _pow(base: float, exponent: float) -> float:
    result = base ** exponent
    if isinstance(result, complex):
        raise _Undefined
    return float(result)


_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Pow: _pow}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of attribute accesses on a name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


@dataclass(frozen=True)
class Cost:
    """A parsed cost expression; call it with a point's params."""

    text: str
    tree: ast.Expression
    names: Mapping[str, str]  # name as written -> varied path, or "" for a scenario field
    fixed: Mapping[str, float]  # name as written -> value, for names that are not varied

    def __call__(self, params: Mapping[str, Any]) -> float:
        """The cost of a point (``inf`` on overflow).

        Raises:
            ScenarioError: the expression divides by zero at this point.
        """
        try:
            return self._eval(self.tree.body, params)
        except OverflowError:
            return math.inf
        except (ZeroDivisionError, _Undefined):
            raise ScenarioError(f"--minimize {_shown(self.text)} is undefined (division by zero or a negative "
                                f"number to a fractional power) at {dict(params)}") from None

    def _eval(self, node: ast.expr, params: Mapping[str, Any]) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):  # parse_cost admits no other
            return float(node.value)
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](self._eval(node.left, params), self._eval(node.right, params))
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](self._eval(node.operand, params))
        name = _dotted(node)
        assert name is not None  # parse_cost admits nothing else
        path = self.names[name]
        return float(params[path]) if path else self.fixed[name]


def _check(node: ast.AST, text: str) -> list[str]:
    """The names used in ``node``; raises on anything outside the whitelist."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise ScenarioError(f"--minimize {_shown(text)}: only numbers, names and + - * / ** are allowed, "
                                f"got {node.value!r}")
        return []
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _BINARY:
            raise ScenarioError(f"--minimize {_shown(text)}: operator {type(node.op).__name__} is not allowed "
                                "(only + - * / **)")
        return _check(node.left, text) + _check(node.right, text)
    if isinstance(node, ast.UnaryOp):
        if type(node.op) not in _UNARY:
            raise ScenarioError(f"--minimize {_shown(text)}: operator {type(node.op).__name__} is not allowed")
        return _check(node.operand, text)
    name = _dotted(node) if isinstance(node, ast.expr) else None
    if name is None:
        raise ScenarioError(f"--minimize {_shown(text)}: {type(node).__name__} is not allowed "
                            "(only numbers, parameter names and + - * / **)")
    return [name]


def _shown(text: str) -> str:
    """The expression as messages quote it (a long one cut short)."""
    text = text.strip()
    return repr(text if len(text) <= 60 else text[:40] + "..." + text[-15:])


def _depth(tree: ast.AST) -> int:
    """The nesting depth of a parsed tree, counted without recursion."""
    deepest, todo = 0, [(tree, 1)]
    while todo:
        node, d = todo.pop()
        deepest = max(deepest, d)
        todo.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _paren_depth(text: str) -> int:
    depth = deepest = 0
    for c in text:
        depth += (c == "(") - (c == ")")
        deepest = max(deepest, depth)
    return deepest


def parse_cost(text: str, varied: Sequence[str], scenario: Scenario | None = None) -> Cost:
    """Parse a cost expression over the varied paths (see the module docstring).

    Raises:
        ScenarioError: bad syntax, a construct outside the whitelist, nesting deeper than
            :data:`MAX_DEPTH` (or text longer than :data:`MAX_LENGTH`), or a name that is not a
            varied parameter (nor, with ``scenario``, a scenario field).
    """
    if not text.strip():
        raise ScenarioError("--minimize needs an expression such as workers*concurrency")
    too_deep = ScenarioError(f"--minimize {_shown(text)} is nested too deeply (at most {MAX_DEPTH} levels of "
                             "parentheses and operators); write a flat sum such as workers*0.05 + concurrency*0.01")
    if _paren_depth(text) > MAX_DEPTH:
        raise too_deep
    if len(text.strip()) > MAX_LENGTH:
        raise ScenarioError(f"--minimize {_shown(text)} is {len(text.strip())} characters long; at most "
                            f"{MAX_LENGTH} are accepted")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise ScenarioError(f"--minimize {_shown(text)} is not an expression such as workers*concurrency") from None
    except (RecursionError, MemoryError):  # the parser's own limits, before ours could count
        raise too_deep from None
    if _depth(tree.body) > MAX_DEPTH:
        raise too_deep
    names: dict[str, str] = {}
    fixed: dict[str, float] = {}
    for name in _check(tree.body, text):
        if name in varied:
            names[name] = name
            continue
        matches = [p for p in varied if p.rsplit(".", 1)[-1] == name or p.endswith("." + name)]
        if len(matches) == 1:
            names[name] = matches[0]
            continue
        if len(matches) > 1:
            raise ScenarioError(f"--minimize {_shown(text)}: {name!r} could be any of {', '.join(matches)}; "
                                "write the full path")
        value = _scenario_value(scenario, name) if scenario is not None and "." in name else None
        if value is None:
            raise ScenarioError(f"--minimize {_shown(text)}: {name!r} is not a varied parameter "
                                f"(varied: {', '.join(varied)}); vary it, or write a scenario path "
                                "such as pools.NAME.workers")
        names[name], fixed[name] = "", value
    return Cost(text=text.strip(), tree=tree, names=names, fixed=fixed)


def _scenario_value(scenario: Scenario, path: str) -> float | None:
    try:
        value = param_value(scenario, path)
    except ScenarioError:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
