"""The package's layers as a test: dependencies point down (STYLE's order), and no two parts import each other.

A *part* is a subpackage of ``qsim`` (``spec``, ``results``, ``engine``, ...), a top-level module, or, inside
``qsim.analysis``, one of its concerns (``analysis.slo``, ``analysis.plan``, ...). Every import counts: at
module level, inside a function, and under ``TYPE_CHECKING`` alike.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

QSIM = Path(__file__).resolve().parents[2] / "qsim"

#: From the bottom up; a part may import its own layer's parts and those below, never one above.
LAYERS: list[set[str]] = [
    {"errors", "callable_module", "names"},
    {"results"},
    {"spec", "scenarios", "scenario", "dists", "records", "summary"},  # the old paths re-export spec and results
    {"engine", "autoscale"},
    {"model", "harness"},
    {"calibrate"},
    {"analysis.stats", "analysis.theory"},
    {"analysis.slo"},
    {"analysis.plan"},
    {"analysis.fidelity", "analysis.autoscaling"},
    {"analysis.plots", "analysis"},
    {"advise"},
    {"bullmq"},
    {"api", "cli", "loadtest", "__init__", "__main__"},
]
LEVEL = {part: i for i, layer in enumerate(LAYERS) for part in layer}


def part_of(module: str) -> str:
    """``qsim.analysis.plan.sweep`` -> ``analysis.plan``; ``qsim.spec.scenario`` -> ``spec``; ``qsim`` -> ``__init__``."""
    names = module.split(".")[1:]
    if not names:
        return "__init__"
    if names[0] == "analysis" and len(names) > 1 and names[1] != "__init__":
        return f"analysis.{names[1]}"
    return names[0]


def module_name(path: Path) -> str:
    rel = path.relative_to(QSIM.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> Iterator[tuple[str, int]]:
    """The qsim modules ``path`` imports, with the line of each import."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "qsim")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base == "qsim" or base.startswith("qsim."):
                # `from qsim import dists`: the module imported is qsim.dists when there is one
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    known = (QSIM.parent / sub.replace(".", "/")).with_suffix(".py").exists() or \
                        (QSIM.parent / sub.replace(".", "/")).is_dir()
                    yield (sub if known else base), node.lineno


def edges() -> list[tuple[str, str, str]]:
    """(importing part, imported part, where) for every import between two different parts."""
    out = []
    for path in sorted(QSIM.rglob("*.py")):
        src = part_of(module_name(path))
        for target, line in imports(path):
            dst = part_of(target)
            if dst != src:
                out.append((src, dst, f"{path.relative_to(QSIM.parent)}:{line} imports {target}"))
    return out


def test_every_part_has_a_layer() -> None:
    parts = {part_of(module_name(p)) for p in QSIM.rglob("*.py")}
    assert parts - set(LEVEL) == set(), "add the new part to LAYERS"


def test_no_part_imports_a_layer_above_it() -> None:
    upward = [where for src, dst, where in edges() if LEVEL[dst] > LEVEL[src]]
    assert upward == []


def test_no_two_parts_import_each_other() -> None:
    # Given the graph of parts, When its strongly connected components are found, Then each is one part
    graph: dict[str, set[str]] = {}
    for src, dst, _ in edges():
        graph.setdefault(src, set()).add(dst)
        graph.setdefault(dst, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                loops.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert loops == []


@pytest.mark.parametrize("module", ["qsim.spec", "qsim.results", "qsim.analysis.slo", "qsim.analysis.plan",
                                    "qsim.analysis.fidelity", "qsim.analysis.autoscaling"])
def test_the_tree_names_the_architecture(module: str) -> None:
    # the rooms a newcomer looks for are packages with a docstring saying what they hold
    path = QSIM.parent / module.replace(".", "/") / "__init__.py"
    assert ast.get_docstring(ast.parse(path.read_text()))


def test_few_loose_modules_at_the_top() -> None:
    loose = sorted(p.name for p in QSIM.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(loose) <= 8, loose
