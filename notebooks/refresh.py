"""Re-execute the notebooks in place and save their outputs (plots, tables, printed answers).

Usage, from the repository root::

    python notebooks/refresh.py                       # every notebooks/*.ipynb
    python notebooks/refresh.py notebooks/07_*.ipynb  # some of them

Each notebook runs top to bottom in a fresh ``python3`` kernel, with its own
folder as the working directory (as ``pytest --nbmake`` runs it) and this
checkout's ``qsim`` first on ``PYTHONPATH``. Old outputs are cleared first;
cell timings are not recorded, so a refresh with unchanged code and seeds
changes nothing but what really changed. A notebook that fails is left as it
was on disk and the script exits 1, naming the cell. At the end it prints each
notebook's size, figure count and largest figure:
``tests/unit/test_notebooks.py`` holds them to their limits.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def sizes(path: Path) -> tuple[int, int, int]:
    """(file bytes, PNG figures, largest PNG bytes) of a notebook on disk."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    pngs = [len(base64.b64decode("".join(out["data"]["image/png"])))
            for cell in nb["cells"] if cell["cell_type"] == "code"
            for out in cell.get("outputs", []) if "image/png" in out.get("data", {})]
    return path.stat().st_size, len(pngs), max(pngs, default=0)


def refresh(path: Path, *, timeout: int) -> None:
    """Execute one notebook and write it back with its outputs (unchanged on disk if a cell fails)."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            cell.metadata.pop("execution", None)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    nbformat.validate(nb)
    nbformat.write(nb, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Re-execute notebooks in place and save their outputs.")
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to refresh (default: every notebooks/*.ipynb)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds one cell may run (default 600)")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(HERE.glob("*.ipynb"))
    missing = [str(p) for p in paths if not p.is_file() or p.suffix != ".ipynb"]
    if missing:
        print(f"not a notebook file: {', '.join(missing)}", file=sys.stderr)
        return 2
    # the kernel imports this checkout's qsim, whatever is pip-installed
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    failed = 0
    for path in paths:
        began = time.perf_counter()
        try:
            refresh(path, timeout=args.timeout)
        except CellExecutionError as e:
            failed += 1
            print(f"{path}: FAILED, left unchanged\n{e}", file=sys.stderr)
            continue
        size, figures, largest = sizes(path)
        print(f"{path}: {time.perf_counter() - began:.0f} s, {size / 1024:.0f} KB, "
              f"{figures} figures (largest {largest / 1024:.0f} KB)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
