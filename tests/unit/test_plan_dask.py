"""Plans and sweeps on a Dask cluster: the same answer as the local process pool for the same seeds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import distributed  # in the dev extra: this test runs in CI
import pytest

from qsim.analysis.slo.language import parse_slo

from qsim.analysis.plan import plan
from qsim.analysis.plan.runner import DaskRunner, Task, connect_dask
from qsim.analysis.plan.sweep import sweep
from qsim.spec.scenario import Scenario


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    # two worker processes, as a small real cluster; no dashboard (it would need bokeh and a port)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as c:
            yield c


def mmc() -> Scenario:
    return Scenario.from_dict({
        "name": "mmc", "seed": 21, "duration": 300.0, "warmup": 30.0,
        "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 8.0},
                  "service": {"kind": "exponential", "mean": 1.0}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 1, "concurrency": 1}],
    })


def test_plan_on_a_local_cluster_equals_the_local_pool(client: Any) -> None:
    slos = [parse_slo("p95_wait<=0.9")]
    vary = {"pools.p.workers": [1, 2], "pools.p.concurrency": list(range(4, 13))}
    on_dask = plan(mmc(), slos, vary, replications=4, client=client, minimize="workers*concurrency")
    local = plan(mmc(), slos, vary, replications=4, processes=2, minimize="workers*concurrency")
    assert on_dask["recommended"] is not None
    assert on_dask["recommended"] == local["recommended"] and on_dask["next"] == local["next"]
    assert on_dask["points"] == local["points"]  # every figure, interval and warning


def test_search_and_auto_replications_on_a_local_cluster(client: Any) -> None:
    slos = [parse_slo("p95_wait<=0.6")]
    vary = {"pools.p.concurrency": list(range(1, 65))}
    on_dask = plan(mmc(), slos, vary, replications="auto", search="auto", client=client)
    local = plan(mmc(), slos, vary, replications="auto", search="auto", processes=2)
    assert on_dask["recommended"] == local["recommended"] is not None
    assert on_dask["search"]["points_simulated"] == local["search"]["points_simulated"] <= 12


def test_sweep_with_a_client_runs_there(client: Any) -> None:
    vary = {"pools.p.concurrency": [10, 12]}
    assert sweep(mmc(), vary, client=client, replications=2) == sweep(mmc(), vary, processes=1, replications=2)
    # only a Scenario and a seed travel; only the Summary (and the first part's two numbers) come back
    result = DaskRunner(client).map([Task(mmc(), 3, first_part=True)])[0]
    assert set(result) == {"summary", "first_part"} and result["summary"]["seed"] == 3
    assert set(result["first_part"]) == {"jobs", "wait_mean"}


def test_connect_dask_refuses_a_bad_address_and_reaches_a_real_one(client: Any) -> None:
    with pytest.raises(ValueError, match="expected a scheduler address like tcp://HOST:8786"):
        connect_dask("localhost")
    with pytest.raises(OSError, match="no Dask scheduler answered at tcp://127.0.0.1:9 within 0.5 s"):
        connect_dask("tcp://127.0.0.1:9", timeout=0.5)
    other = connect_dask(client.scheduler.address)
    try:
        assert other.submit(sum, [1, 2]).result() == 3
    finally:
        other.close()
