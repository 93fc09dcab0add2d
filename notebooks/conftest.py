"""The notebooks run as tests (nbmake, configured in pyproject.toml) in the ``long`` step.

Executing them takes minutes (notebook 08 runs the fair contest of autoscaling policies: six policies
tuned on training seeds and judged on held-out ones over a six-hour day, then a slice of it on real
worker processes), so they are marked ``long``: the default run checks their committed outputs instead
(``tests/unit/test_notebooks.py``: every cell ran, no error, a figure, public API only), and ``--long``
(CI's second step) re-executes each and runs its Checks cell. Each gets :data:`NOTEBOOK_TIMEOUT`
instead of the suite's 120 s per test; notebook 08 gets :data:`LONGER`'s (a few minutes on two idle
cores, with room for a busy machine).
"""

from __future__ import annotations

import pytest

NOTEBOOK_TIMEOUT = 300
#: Notebooks that need more than :data:`NOTEBOOK_TIMEOUT` seconds, by file name.
LONGER = {"08_a_day_with_an_autoscaler.ipynb": 900}


@pytest.hookimpl(tryfirst=True)  # before tests/conftest.py leaves the long tests out of the default run
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.timeout(LONGER.get(item.path.name, NOTEBOOK_TIMEOUT)))
            item.add_marker(pytest.mark.long)
