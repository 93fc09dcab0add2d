"""The notebooks are committed with their outputs, and small (nothing is executed here).

A reader on a code host sees every plot without running anything, so every
code cell must have run without error and every notebook must show at least
one figure; the PNGs and the files stay small enough to review and clone.
``python notebooks/refresh.py`` re-executes the notebooks and saves their
outputs; plain ``pytest`` also re-executes them (the suite's configuration collects
``notebooks/`` with nbmake), and each ends with asserts on what its text claims.
They use only the public API: ``import qsim`` and the names in ``qsim.__all__``.
"""

from __future__ import annotations

import ast
import base64
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

import qsim

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MAX_PNG_BYTES = 120 * 1024
MAX_NOTEBOOK_BYTES = 1536 * 1024
MAX_TEXT_CHARS = 20_000  # one output's text: a table or a few printed lines, not a dump

REFRESH = "run `python notebooks/refresh.py NOTEBOOK` and commit the result"


def problems(notebook: dict[str, Any], size: int) -> list[str]:
    """What keeps a notebook (its JSON, and its file size) from being committed as it is."""
    found = []
    pngs = 0
    for number, cell in enumerate(notebook["cells"], start=1):
        if cell["cell_type"] != "code" or not "".join(cell["source"]).strip():
            continue
        if cell.get("execution_count") is None:
            found.append(f"cell {number} has not been executed")
        for out in cell.get("outputs", []):
            if out["output_type"] == "error":
                found.append(f"cell {number} ended in {out.get('ename', 'an error')}: {out.get('evalue', '')}")
            if out["output_type"] == "stream" and out.get("name") == "stderr":
                found.append(f"cell {number} wrote to stderr: {''.join(out['text'])[:200]!r}")
            data = out.get("data", {})
            if "image/png" in data:
                pngs += 1
                png = len(base64.b64decode("".join(data["image/png"])))
                if png > MAX_PNG_BYTES:
                    found.append(f"cell {number} has a {png // 1024} KB PNG (limit {MAX_PNG_BYTES // 1024} KB): "
                                 "lower its dpi or figsize")
            texts = {kind: "".join(value) for kind, value in data.items() if kind.startswith("text/")}
            if out["output_type"] == "stream":
                texts[out.get("name", "stream")] = "".join(out["text"])
            for kind, text in texts.items():
                if len(text) > MAX_TEXT_CHARS:
                    found.append(f"cell {number} prints {len(text)} characters of {kind} "
                                 f"(limit {MAX_TEXT_CHARS}): show a table of what matters")
    if pngs == 0:
        found.append("no figure (image/png output)")
    if size > MAX_NOTEBOOK_BYTES:
        found.append(f"the file is {size // 1024} KB (limit {MAX_NOTEBOOK_BYTES // 1024} KB)")
    return found


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 4, [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_committed_with_small_outputs(path: Path) -> None:
    # Given a committed notebook, When its JSON is read, Then it ran cleanly, shows a figure and is small
    found = problems(json.loads(path.read_text(encoding="utf-8")), path.stat().st_size)
    assert not found, f"{path.name}: " + "; ".join(found) + f" ({REFRESH})"


def _cell(source: str, count: int | None, outputs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"cell_type": "code", "source": source, "execution_count": count, "outputs": outputs, "metadata": {}}


def _png(nbytes: int) -> dict[str, Any]:
    return {"output_type": "display_data", "metadata": {},
            "data": {"image/png": base64.b64encode(b"\0" * nbytes).decode("ascii"), "text/plain": "<Figure>"}}


def test_problems_names_each_fault() -> None:
    # Given notebooks with one fault each (and a clean one)
    md = {"cell_type": "markdown", "source": "# title", "metadata": {}}
    clean = {"cells": [md, _cell("x = 1", 1, []), _cell("plot()", 2, [_png(1000)]), _cell("", None, [])]}
    unrun = {"cells": [_cell("x = 1", None, []), _cell("plot()", 2, [_png(1000)])]}
    failed = {"cells": [_cell("plot()", 1, [_png(1000),
                                            {"output_type": "error", "ename": "ZeroDivisionError", "evalue": "x"}])]}
    big = {"cells": [_cell("plot()", 1, [_png(MAX_PNG_BYTES + 1)])]}
    no_figure = {"cells": [_cell("x = 1", 1, [{"output_type": "stream", "name": "stdout", "text": "1\n"}])]}
    chatty = {"cells": [_cell("plot()", 1, [_png(10), {"output_type": "stream", "name": "stdout",
                                                       "text": "x" * (MAX_TEXT_CHARS + 1)}])]}
    warned = {"cells": [_cell("plot()", 1, [_png(10), {"output_type": "stream", "name": "stderr",
                                                       "text": "DeprecationWarning: old\n"}])]}
    # When each is checked, Then exactly its fault is named
    assert problems(clean, 10_000) == []
    assert problems(unrun, 10_000) == ["cell 1 has not been executed"]
    assert problems(failed, 10_000) == ["cell 1 ended in ZeroDivisionError: x"]
    assert [p.split(" PNG")[0] for p in problems(big, 10_000)] == ["cell 1 has a 120 KB"]
    assert problems(no_figure, 10_000) == ["no figure (image/png output)"]
    assert problems(chatty, 10_000) == [f"cell 1 prints {MAX_TEXT_CHARS + 1} characters of stdout "
                                        f"(limit {MAX_TEXT_CHARS}): show a table of what matters"]
    assert "wrote to stderr" in problems(warned, 10_000)[0]
    assert problems(clean, MAX_NOTEBOOK_BYTES + 1) == [f"the file is {MAX_NOTEBOOK_BYTES // 1024} KB (limit 1536 KB)"]


def private_uses(source: str) -> list[str]:
    """What a notebook's code uses of qsim beyond its public API: an import of any module but ``qsim``
    itself, a name not in ``qsim.__all__``, or an attribute of ``qsim`` not in it."""
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    public = set(qsim.__all__)
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.startswith("qsim.")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "qsim":
            if node.module != "qsim":
                found.append(f"from {node.module} import ...")
            else:
                found += [f"from qsim import {a.name}" for a in node.names if a.name not in public]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "qsim":
            if node.attr not in public:
                found.append(f"qsim.{node.attr}")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_uses_only_the_public_api(path: Path) -> None:
    # Given a notebook's code cells, Then every qsim name they use is the package's public API
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "import qsim" in code
    assert private_uses(code) == [], f"{path.name}: use the flat API (import qsim; qsim.__all__)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_ends_with_checks_on_its_answer(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    last = [c for c in nb["cells"] if c["cell_type"] == "code"][-1]
    assert "".join(last["source"]).count("assert ") >= 3, f"{path.name}: end with asserts on the answer"


def test_private_uses_names_each_kind() -> None:
    assert private_uses("%matplotlib inline\nimport qsim\nfrom qsim import Scenario\nqsim.simulate('x')") == []
    assert private_uses("import qsim.model\nfrom qsim.harness.run import run_scenario\nfrom qsim import _LAZY\n"
                        "qsim.analysis.plots") == ["import qsim.model", "from qsim.harness.run import ...",
                                                   "from qsim import _LAZY", "qsim.analysis"]


def test_plain_pytest_runs_the_notebooks() -> None:
    # Given the suite's configuration, Then a bare `pytest` collects notebooks/ and executes them (nbmake)
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert "notebooks" in options["testpaths"] and "--nbmake" in options["addopts"].split()
