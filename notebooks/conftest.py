"""The notebooks run as tests (nbmake, configured in pyproject.toml) in the ``long`` step.

Executing them takes minutes (notebook 08 runs the fair contest of autoscaling policies: six policies
tuned on training seeds and judged on held-out ones over a six-hour day, then a slice of it on real
worker processes), so they are marked ``long``: the default run checks their committed outputs instead
(``tests/unit/test_notebooks.py``: every cell ran, no error, a figure, public API only), and ``--long``
(CI's second step) re-executes each and runs its Checks cell. Each gets :data:`NOTEBOOK_TIMEOUT`
instead of the suite's 120 s per test; notebook 08 gets :data:`LONGER`'s (a few minutes on two idle
cores, 13 minutes on a slow day, with room for a busy machine), and is marked ``alone``: its contest
keeps both cores busy, and CI runs it one at a time (beside another long test it took over 15 minutes).
"""

from __future__ import annotations

import pytest

NOTEBOOK_TIMEOUT = 300
#: Notebooks that need more than :data:`NOTEBOOK_TIMEOUT` seconds, by file name.
LONGER = {"08_a_day_with_an_autoscaler.ipynb": 1500}
#: Notebooks that need the machine to themselves (marker ``alone``), by file name.
ALONE = {"08_a_day_with_an_autoscaler.ipynb"}


@pytest.hookimpl(tryfirst=True)  # before tests/conftest.py leaves the long tests out of the default run
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.timeout(LONGER.get(item.path.name, NOTEBOOK_TIMEOUT)))
            item.add_marker(pytest.mark.long)
            if item.path.name in ALONE:
                item.add_marker(pytest.mark.alone)
