"""Outputs held byte for byte: the Summary of every built-in scenario, `qsim autoscale`, `qsim plan` and
`qsim calibrate` on fixed inputs (tests/golden; `python tests/golden/regenerate.py` rewrites them)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _regenerate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("golden_regenerate", GOLDEN / "regenerate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REGENERATE = _regenerate()


def test_every_builtin_scenario_has_a_golden() -> None:
    from qsim.scenarios import BUILTIN

    assert list(REGENERATE.SCENARIOS) == list(BUILTIN)


@pytest.mark.parametrize("name", sorted(REGENERATE.CASES))
def test_output_is_byte_identical_to_its_golden(name: str) -> None:
    # Given the command of one golden, When it runs now, Then it prints exactly what the golden holds
    expected = (GOLDEN / f"{name}.json").read_text()
    assert REGENERATE.output(REGENERATE.CASES[name]) == expected, f"qsim {' '.join(REGENERATE.CASES[name])}"
