"""Locust runs the whole scenario: burst and trace arrivals on their drawn schedule, flows through
the FlowProducer, and the scenario's [[events]] on the --start-workers pools (headless, short)."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from qsim.engine import Queue
from qsim.loadtest.schedule import Schedule, scheduled_types
from qsim.spec.scenario import Scenario
from waiting import timing_allowance

ROOT = Path(__file__).resolve().parents[2]
#: Seconds a scheduled add may come after its drawn time (gevent scheduling on a loaded machine).
LATE = 0.25


def locust(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_URL", "QSIM_", "LOCUST_"))}
    return subprocess.run([sys.executable, "-m", "locust", "-f", "loadtests", "--headless", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def stats(prefix: Path) -> dict[tuple[str, str], dict[str, str]]:
    with open(f"{prefix}_stats.csv", newline="") as f:
        return {(row["Type"], row["Name"]): row for row in csv.DictReader(f)}


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stderr ---\n{proc.stderr[-4000:]}\n--- stdout ---\n{proc.stdout[-2000:]}"


SCHEDULED = """
    name = "scheduled"
    seed = 5
    duration = 2.0
    [[queues]]
    name = "q"
    [[queues]]
    name = "inv"
    [[jobs]]
    name = "burst"
    queue = "q"
    arrival = { kind = "burst", rate = 10.0, size = 5 }    # 5 jobs at 0, 0.5, 1.0, 1.5 s
    service = { kind = "constant", mean = 0.02 }
    [[jobs]]
    name = "traced"
    queue = "q"
    arrival = { kind = "trace", path = "trace.csv" }
    service = { kind = "constant", mean = 0.02 }
    [[jobs]]
    name = "invoice"
    queue = "inv"
    arrival = { kind = "constant", rate = 2.0 }
    service = { kind = "constant", mean = 0.02 }
    flow = { children = ["fetch", "tax"] }
    [[jobs]]
    name = "fetch"
    queue = "q"
    service = { kind = "constant", mean = 0.1 }
    [[jobs]]
    name = "tax"
    queue = "inv"
    service = { kind = "constant", mean = 0.1 }
    [[pools]]
    name = "p"
    queues = ["q", "inv"]
    concurrency = 8
    """
TRACE = (0.2, 0.25, 1.2, 1.7)


@pytest.mark.redis
def test_bursts_and_traces_arrive_as_scheduled_and_flows_go_through_the_flow_producer(
        redis_url: str, tmp_path: Path) -> None:
    # Given a burst type, a trace type and a flow parent with two children on two queues
    path = tmp_path / "scheduled.toml"
    path.write_text(textwrap.dedent(SCHEDULED))
    (tmp_path / "trace.csv").write_text("t\n" + "\n".join(map(str, TRACE)) + "\n")
    # When Locust runs it for its duration with 3 producer users
    proc = locust("-u", "3", "--scenario", str(path), "--redis-url", redis_url, "--start-workers",
                  "--run-id", "lt-s", "--drain", "15", "--csv", str(tmp_path / "run"))
    assert proc.returncode == 0, explain(proc)
    rows = stats(tmp_path / "run")
    # Then the burst and trace types got exactly their drawn jobs, none failed
    assert int(rows[("enqueue", "burst")]["Request Count"]) == 20
    assert int(rows[("enqueue", "traced")]["Request Count"]) == len(TRACE)
    assert int(rows[("job", "burst")]["Request Count"]) == 20
    with Queue("q", redis=redis_url) as q, Queue("inv", redis=redis_url) as inv:
        burst = [q.get_job(f"lt-s-burst-{n}") for n in range(20)]
        traced = [q.get_job(f"lt-s-traced-{n}") for n in range(len(TRACE))]
        # at their drawn times (Redis clock): batches of 5 every 0.5 s, the trace as written; the schedule's origin
        # is its earliest add, so every add's lateness is >= 0 and the spread of them is what is checked
        drawn = [0.5 * (n // 5) for n in range(len(burst))] + list(TRACE)
        added = [float(job.enqueued_at) for job in [*burst, *traced]]  # type: ignore[union-attr,arg-type]
        t0 = min(a - d for a, d in zip(added, drawn))
        late = [a - t0 - d for a, d in zip(added, drawn)]
        assert max(late) < timing_allowance(LATE), list(zip(drawn, late))
        # and each flow parent came with its children, ran after them, and completed
        added = int(rows[("enqueue", "invoice")]["Request Count"])
        assert 1 <= added <= 7 and int(rows[("job", "invoice")]["Request Count"]) == added
        for n in range(added):
            parent = inv.get_job(f"lt-s-invoice-{n}")
            kids = [q.get_job(f"lt-s-invoice-{n}.0"), inv.get_job(f"lt-s-invoice-{n}.1")]
            assert [k.name for k in kids] == ["fetch", "tax"]
            assert all(k.parent == f"inv:lt-s-invoice-{n}" and k.state == "completed" for k in kids)
            assert parent.state == "completed"
            assert parent.started_at >= max(k.finished_at for k in kids)  # type: ignore[operator,type-var]


EVENTS = """
    name = "events"
    seed = 2
    duration = 3.0
    [[queues]]
    name = "q"
    [[jobs]]
    name = "work"
    queue = "q"
    arrival = { kind = "constant", rate = 12.0 }
    service = { kind = "constant", mean = 0.5 }   # 6 busy slots of the 4: every slot is taken at 0.8 s
    [[pools]]
    name = "p"
    queues = ["q"]
    workers = 2
    concurrency = 2
    [[events]]
    at = 0.8
    kind = "sigkill"
    pool = "p"
    [[events]]
    at = 1.0
    kind = "start"
    pool = "p"
    count = 2
    [[events]]
    at = 2.0
    kind = "sigterm"
    pool = "p"
    grace = 5.0
    [engine]
    lock_duration = 1.0
    stalled_interval = 0.5
    """


@pytest.mark.redis
def test_scenario_events_signal_and_start_the_local_pools(redis_url: str, tmp_path: Path) -> None:
    # Given a saturated pool of 2 processes, one SIGKILLed at 0.8 s, two started at 1 s, one SIGTERMed at 2 s
    path = tmp_path / "events.toml"
    path.write_text(textwrap.dedent(EVENTS))
    # When Locust runs it with the pools it starts
    proc = locust("-u", "2", "--scenario", str(path), "--redis-url", redis_url, "--start-workers",
                  "--run-id", "lt-e", "--drain", "20", "--csv", str(tmp_path / "run"))
    assert proc.returncode == 0, explain(proc)
    # Then each event happened to the process it names, at its time
    happened = dict(re.findall(r"qsim event t=[\d.]+ s: (\w+ p): (.*)", proc.stderr))
    assert happened == {"sigkill p": "p-0", "start p": "p-2, p-3", "sigterm p": "p-1"}, explain(proc)
    assert re.search(r"'p-0': -9", proc.stderr) and re.search(r"'p-1': 0\b", proc.stderr), explain(proc)
    # and no job was lost: the killed worker's jobs stalled and completed on the others, the new ones worked
    added = int(stats(tmp_path / "run")[("enqueue", "work")]["Request Count"])
    with Queue("q", redis=redis_url) as q:
        counts = q.counts()
        infos = q.job_records()
    assert counts["completed"] == added >= 30 and counts["dead"] == 0, counts
    assert sum(i.stalled for i in infos) >= 1
    assert {"p-2", "p-3"} & {i.worker for i in infos}


def _scenario(jobs: list[dict[str, object]], duration: float = 2.0) -> Scenario:
    return Scenario.from_dict({"name": "s", "seed": 1, "duration": duration, "queues": [{"name": "q"}],
                               "jobs": jobs, "pools": [{"name": "p", "queues": ["q"]}]})


def test_the_schedule_is_the_drawn_arrivals_shared_and_repeated() -> None:
    s = _scenario([{"name": "b", "queue": "q", "arrival": {"kind": "burst", "rate": 4.0, "size": 2},
                    "service": {"kind": "constant", "mean": 0.1}},
                   {"name": "p", "queue": "q", "arrival": {"kind": "poisson", "rate": 5.0},
                    "service": {"kind": "constant", "mean": 0.1}}])
    # only burst and trace types are scheduled, unless every type is (--pacing scenario)
    assert scheduled_types(s, "constant") == ["b"]
    assert scheduled_types(s, "scenario") == ["b", "p"]

    def entries(schedule: Schedule) -> list[tuple[float, str, int]]:
        out = []
        while (e := schedule.claim()) is not None:
            out.append(e)
        return out

    # batches of 2 every 0.5 s; at twice the rate every 0.25 s; a window of twice the duration repeats it
    drawn = [0, 0, .5, .5, 1, 1, 1.5, 1.5]
    assert entries(Schedule(s, ["b"], window=2.0)) == [(t, "b", n) for n, t in enumerate(drawn)]
    assert [e[0] for e in entries(Schedule(s, ["b"], scale=2.0, window=1.0))] == [0, 0, .25, .25, .5, .5, .75, .75]
    longer = entries(Schedule(s, ["b"], window=4.0))
    assert len(longer) == 16 and longer[8] == (2.0, "b", 8)
    # two processes share it: every other entry each, nothing twice
    halves = [entries(Schedule(s, ["b", "p"], window=2.0, node=i, nodes=2)) for i in (0, 1)]
    everything = entries(Schedule(s, ["b", "p"], window=2.0))
    assert sorted(halves[0] + halves[1]) == sorted(everything) and abs(len(halves[0]) - len(halves[1])) <= 1
    with pytest.raises(ValueError, match="node"):
        Schedule(s, ["b"], window=1.0, node=2, nodes=2)
