"""``mypy --strict`` stays clean on qsim (all but qsim/loadtest, whose Locust and gevent code is not typed yet)."""

from __future__ import annotations

from pathlib import Path

from mypy import api

import qsim

ROOT = Path(qsim.__file__).parent
UNTYPED = {"loadtest"}  # not checked yet


def test_mypy_strict_is_clean() -> None:
    # Given every module of qsim but the untyped packages
    paths = sorted(str(p) for p in ROOT.iterdir()
                   if p.name not in UNTYPED and (p.suffix == ".py" or (p / "__init__.py").exists()))
    assert any(p.endswith("engine") for p in paths) and not any(p.endswith("loadtest") for p in paths)
    # When mypy --strict checks them (the config in pyproject.toml; a cache next to the sources)
    repo = ROOT.parent
    out, err, code = api.run(["--strict", "--config-file", str(repo / "pyproject.toml"), "--cache-dir",
                              str(repo / ".mypy_cache"), *paths])
    # Then it finds nothing
    assert code == 0, out + err
