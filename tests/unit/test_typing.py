"""``mypy`` stays clean on the whole of qsim, as configured in pyproject.toml (strict, every package).

The test runs mypy as a developer does, ``mypy`` in the repository, so the settings it checks with are
the configured ones: nothing here adds a flag or leaves a package out.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from mypy import api

import qsim

ROOT = Path(qsim.__file__).parent
REPO = ROOT.parent


def test_the_configuration_is_strict_over_the_whole_package() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config["strict"] is True and config["files"] == ["qsim"]
    relaxed = [o["module"] for o in config.get("overrides", []) if set(o) - {"module", "ignore_missing_imports"}]
    assert relaxed == [["qsim.loadtest.shape"]], "relax a module only where an untyped library forces it"


# mypy --strict of the whole package from a cold cache (a fresh clone): 1.5 min idle, more when busy; CI runs it
# in its long step, beside the notebooks (the default run stays within its minutes on a busy machine)
@pytest.mark.long
@pytest.mark.timeout(900)
def test_mypy_is_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the repository (its pyproject.toml says what to check and how; a cache next to the sources)
    monkeypatch.chdir(REPO)
    # When mypy runs as configured
    out, err, code = api.run([])
    # Then it checked every module of qsim, Locust's too, and found nothing
    assert code == 0, out + err
    checked = int(out.rsplit(" in ", 1)[1].split()[0])
    assert checked == len(list(ROOT.rglob("*.py"))), out
