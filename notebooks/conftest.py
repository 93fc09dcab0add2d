"""The notebooks run as tests (nbmake, configured in pyproject.toml). Each gets 300 s instead of the
suite's 120 s per test: notebook 08 simulates a six-hour day under five autoscaling policies and takes
about a minute on an idle two-core machine, twice that when the machine is busy."""

from __future__ import annotations

import pytest

NOTEBOOK_TIMEOUT = 300


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.timeout(NOTEBOOK_TIMEOUT))
