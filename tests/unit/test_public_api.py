"""The public API: every module declares __all__, every name in it exists, and
dependencies point down (nothing imports a layer above it)."""

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
    "qsim.errors": 0, "qsim.records": 0, "qsim.summary": 0, "qsim.dists": 0, "qsim.safety": 0, "qsim.backoff": 0,
    "qsim.scenario": 1, "qsim.scenario_toml": 1, "qsim.scenarios": 1, "qsim.engine": 1,
    "qsim.model": 2, "qsim.harness": 2,
    "qsim.analysis": 3, "qsim.calibrate": 3,
    "qsim.cli": 4, "qsim.loadtest": 4,
}


def layer(module: str) -> int | None:
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return LAYERS[prefix]
    return None


def test_package_reexports_exist() -> None:
    for name in qsim.__all__:
        assert hasattr(qsim, name), name


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


def test_qsim_never_imports_pickle_or_locust_at_top() -> None:
    for path in ROOT.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for bad in ("import pickle", "from pickle", "import dill", "import cloudpickle"):
            assert bad not in text, f"{path} uses {bad}"
        if "loadtest" not in path.parts:
            assert "import locust" not in text, f"{path} imports locust outside qsim/loadtest"
