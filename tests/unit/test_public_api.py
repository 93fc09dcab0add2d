"""The public API: every module declares __all__, every name in it exists,
dependencies point down (nothing imports a layer above it), and no import
circle runs inside a layer."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import qsim

ROOT = Path(qsim.__file__).parent
MODULES = sorted(m.name for m in pkgutil.walk_packages([str(ROOT)], prefix="qsim.")
                 if m.name != "qsim.engine.lua"  # a folder of .lua files, no Python API
                 if not m.name.startswith("qsim.loadtest") and m.name != "qsim.__main__")

# Lower number = lower layer. A module may import only its own layer or below.
LAYERS = {
    "qsim.errors": 0, "qsim.results.records": 0, "qsim.results.summary": 0, "qsim.results.windows": 0, "qsim.spec.dists": 0, "qsim.engine.safety": 0, "qsim.spec.backoff": 0,
    "qsim.results.display": 0, "qsim.callable_module": 0, "qsim.results.outpath": 0,
    "qsim.spec.settings": 0,  # the worker settings a deployment shares: the engine's and the Scenario's [engine]
    "qsim.spec.scenario": 1, "qsim.spec.toml_writer": 1, "qsim.spec.autoscaler": 1, "qsim.scenarios": 1, "qsim.engine": 1,
    "qsim.spec.workload": 2,  # a scenario's drawn jobs: what the model and the harness both run
    "qsim.spec.offered_load": 2,  # a scenario's offered load and the engine overhead at that load
    "qsim.autoscale": 2,  # the controllers: pure policy code the model and the harness both run
    "qsim.model": 3, "qsim.harness": 3,
    "qsim.analysis": 4, "qsim.calibrate": 4, "qsim.advise": 4,
    "qsim.cli": 5, "qsim.loadtest": 5, "qsim.api": 5,
}


def layer(module: str) -> int | None:
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return LAYERS[prefix]
    return None


def test_package_reexports_exist() -> None:
    for name in qsim.__all__:
        assert hasattr(qsim, name), name
    assert len(set(qsim.__all__)) == len(qsim.__all__)
    assert set(qsim.__all__) <= set(dir(qsim))
    with pytest.raises(AttributeError, match="no attribute 'simulat'"):
        qsim.simulat  # noqa: B018  # a typo is an AttributeError naming it


@pytest.mark.parametrize("name", [m for m in MODULES if not m.rsplit(".", 1)[-1].startswith("_")])
def test_every_public_module_declares_all(name: str) -> None:
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    for symbol in module.__all__:
        assert hasattr(module, symbol), f"{name}.__all__ names {symbol!r}, which does not exist"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {m for m in found if m == "qsim" or m.startswith("qsim.")}


def _module_name(path: Path) -> str:
    return ("qsim." + ".".join(path.relative_to(ROOT).with_suffix("").parts)).removesuffix(".__init__")


def _module_graph() -> dict[str, set[str]]:
    """Each qsim module -> the qsim modules it imports (anywhere in the file, TYPE_CHECKING too).

    ``from pkg import sub`` imports the module ``pkg.sub`` (the package itself only
    when a name is not a submodule); a package's own ``__init__`` running first is
    not counted (every submodule would otherwise circle through its package).
    """
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = {f"{node.module}.{a.name}" for a in node.names} & modules.keys()
                edges |= subs
                if len(subs) < len(node.names):
                    edges.add(node.module)
        graph[name] = {m for m in edges if m in modules and m != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_dependencies_point_down() -> None:
    wrong = []
    for path in ROOT.rglob("*.py"):
        module = "qsim." + ".".join(path.relative_to(ROOT).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        mine = layer(module)
        if mine is None:
            continue
        for imported in _imports(path):
            theirs = layer(imported)
            if theirs is not None and theirs > mine:
                wrong.append(f"{module} (layer {mine}) imports {imported} (layer {theirs})")
    assert not wrong, "\n".join(wrong)


def test_no_import_circle_inside_a_layer() -> None:
    graph = _module_graph()
    layered = {m: {i for i in deps if layer(i) is not None} for m, deps in graph.items()
               if layer(m) is not None}
    layered = {m: deps & layered.keys() for m, deps in layered.items()}
    circles = _circles(layered)
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)


def test_the_circle_check_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_qsim_never_imports_pickle_or_locust_at_top() -> None:
    for path in ROOT.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for bad in ("import pickle", "from pickle", "import dill", "import cloudpickle"):
            assert bad not in text, f"{path} uses {bad}"
        if "loadtest" not in path.parts:
            assert "import locust" not in text, f"{path} imports locust outside qsim/loadtest"
