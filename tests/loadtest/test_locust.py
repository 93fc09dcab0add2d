"""The Locust harness, run for real: ``locust -f loadtests --headless`` against the session's Redis.

Locust monkey-patches the process for gevent when imported, so it only ever
runs in a subprocess here; this module imports just the Locust-free parts of
``qsim.loadtest`` (and checks that they stay Locust-free).
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from qsim.engine import Queue
from qsim.engine.safety import CONFIRM_OPTION
from qsim.errors import NotSupportedError
from qsim.harness.server import free_port
from qsim.loadtest.config import LoadTestConfig
from qsim.loadtest.mix import JobMix, PayloadSource, arrival_rates
from qsim.scenarios import load
from qsim.spec.scenario import Scenario

ROOT = Path(__file__).resolve().parents[2]
#: Enqueue count tolerance: constant pacing on a fixed grid gives rate x window within
#: one add per producer user; allow that plus one.
COUNT_SLACK = 3


def locust(*args: str, timeout: float = 60, locustfile: str = "loadtests") -> subprocess.CompletedProcess[str]:
    """Run Locust headless in a process group of its own, which is killed when it ends: a ``--processes`` run
    that exits can leave a worker process behind (Locust polls each child once), and one that times out
    leaves all of them; neither may run on into the rest of the session."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_URL", "QSIM_", "LOCUST_"))}
    with subprocess.Popen([sys.executable, "-m", "locust", "-f", locustfile, "--headless", *args], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def stats(prefix: Path) -> dict[tuple[str, str], dict[str, str]]:
    with open(f"{prefix}_stats.csv", newline="") as f:
        return {(row["Type"], row["Name"]): row for row in csv.DictReader(f)}


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stderr ---\n{proc.stderr[-4000:]}\n--- stdout ---\n{proc.stdout[-2000:]}"


# --------------------------------------------------------------------------- Locust, for real

@pytest.mark.redis
def test_workshop_headless_adds_at_the_scenario_rate_and_reports_job_latency(redis_url: str, tmp_path: Path) -> None:
    # Given the built-in workshop (6 jobs/s, one queue) and its pool started by the load test
    scenario = load("workshop")
    rate, window = scenario.jobs[0].arrival.rate, 4  # type: ignore[union-attr]
    # When Locust runs it headless for 4 s with 2 producer users
    # and thresholds it meets (--slo: judged on the run's Summary at the end)
    proc = locust("-u", "2", "-r", "2", "-t", f"{window}s", "--scenario", "workshop", "--redis-url", redis_url,
                  "--start-workers", "--run-id", "lt-test", "--drain", "15", "--compare-model",
                  "--slo", "p95_wait<=5", "--slo", "lost==0", "--slo", "p95_latency[cut]<10",
                  "--csv", str(tmp_path / "run"))
    # Then it succeeds, and added rate x window jobs, none failed
    assert proc.returncode == 0, explain(proc)
    assert "Traceback" not in proc.stderr, explain(proc)
    # and the verdict table says every threshold was met, on this run's jobs (engine target)
    assert "qsim load test lt-test (qsim engine)" in proc.stderr, explain(proc)
    assert "thresholds passed: 3 of 3" in proc.stderr, explain(proc)
    assert re.search(r"lost==0 +0 +pass", proc.stderr), explain(proc)
    rows = stats(tmp_path / "run")
    enqueue = rows[("enqueue", "cut")]
    added = int(enqueue["Request Count"])
    assert abs(added - rate * window) <= COUNT_SLACK, f"{added} adds, expected {rate * window} +- {COUNT_SLACK}"
    assert int(enqueue["Failure Count"]) == 0
    assert float(enqueue["95%"]) < 500  # an add is one round trip to a local Redis
    # and every job's latency and wait were reported (the shape drains until all ended)
    job, wait = rows[("job", "cut")], rows[("wait", "cut")]
    assert int(job["Request Count"]) == added and int(job["Failure Count"]) == 0
    assert int(wait["Request Count"]) == added
    # latency = wait + service: lognormal service with mean 0.5 s (median about 0.35 s)
    assert 50 < float(job["50%"]) < 3000, job
    assert float(job["95%"]) >= float(job["50%"]) >= float(wait["50%"])
    # and the jobs really are in Redis, under the scenario's queue name and the run's ids
    with Queue("orders", redis=redis_url) as q:
        counts = q.counts()
        assert counts["completed"] == added, counts
        assert counts["waiting"] == counts["active"] == counts["dead"] == 0, counts
        first = q.get_job("lt-test-cut-0")
        assert first.state == "completed" and first.data["s"] and first.enqueued_at is not None
        assert q.limits()["concurrency_limit"] is None  # the scenario's limit of 4 was put back
    # and the model, replaying these enqueue times with the same service draws, predicts what
    # was measured (Locust rounds response times above 1 s to 2 significant digits)
    with open(tmp_path / "run_model.csv", newline="") as f:
        model = {(r["type"], r["metric"]): r for r in csv.DictReader(f)}
    lat, wt = model[("cut", "latency")], model[("cut", "wait")]
    assert int(lat["measured_count"]) == added
    for q in ("p50", "p95"):
        assert 0.7 < float(lat[f"measured_{q}"]) / float(lat[f"model_{q}"]) < 1.4, lat
        assert abs(float(wt[f"measured_{q}"]) - float(wt[f"model_{q}"])) < 0.3, wt


@pytest.mark.redis
@pytest.mark.long
def test_two_types_on_two_queues_keep_their_own_rates_across_locust_processes(redis_url: str,
                                                                               tmp_path: Path) -> None:
    # Given two job types with different rates on two queues, one pool serving both
    path = tmp_path / "two.toml"
    path.write_text(textwrap.dedent("""
        name = "two"
        seed = 3
        duration = 60.0
        [[queues]]
        name = "fast"
        [[queues]]
        name = "slow"
        [[jobs]]
        name = "ping"
        queue = "fast"
        arrival = { kind = "poisson", rate = 8.0 }
        service = { kind = "constant", mean = 0.02 }
        [[jobs]]
        name = "report"
        queue = "slow"
        arrival = { kind = "constant", rate = 2.0 }
        service = { kind = "exponential", mean = 0.1 }
        [[pools]]
        name = "all"
        queues = ["fast", "slow"]
        workers = 1
        concurrency = 4
        """))
    # When Locust runs it distributed (a master and 2 worker processes) for 2 s with 5 producers
    # (the window comes from -t, not the file)
    port = str(free_port())  # not Locust's default 5557: another run on this machine may use that
    proc = locust("--processes", "2", "--master-bind-port", port, "--master-port", port,
                  "-u", "5", "-r", "20", "-t", "2s", "--scenario", str(path),
                  "--redis-url", redis_url, "--start-workers", "--drain", "15", "--csv", str(tmp_path / "run"))
    # Then each type got its own rate x window and each its latency row, in the master's stats
    assert proc.returncode == 0, explain(proc)
    rows = stats(tmp_path / "run")
    counts = {}
    for name, rate, queue in (("ping", 8.0, "fast"), ("report", 2.0, "slow")):
        added = counts[name] = int(rows[("enqueue", name)]["Request Count"])
        # distributed start-up on a loaded machine can stretch the window, never shrink it
        assert rate * 2 - COUNT_SLACK <= added <= rate * 4 + COUNT_SLACK, f"{name}: {added} adds, expected ~{rate * 2}"
        assert int(rows[("job", name)]["Request Count"]) == added
        with Queue(queue, redis=redis_url) as q:
            assert q.counts()["completed"] == added
    # and the two types keep their 4:1 rates relative to each other
    assert 2.5 <= counts["ping"] / counts["report"] <= 6, counts


@pytest.mark.redis
def test_dead_letter_jobs_are_job_failures_and_an_own_producer_sets_payloads(redis_url: str, tmp_path: Path) -> None:
    # Given a type whose jobs are poison 40% of the time, retried once after 50 ms
    path = tmp_path / "poison.toml"
    path.write_text(textwrap.dedent("""
        name = "poison"
        seed = 11
        duration = 2.0
        [[queues]]
        name = "q"
        [[jobs]]
        name = "risky"
        queue = "q"
        arrival = { kind = "constant", rate = 10.0 }
        service = { kind = "constant", mean = 0.01 }
        poison_prob = 0.4
        attempts = 2
        backoff = { kind = "fixed", delay = 0.05 }
        [[pools]]
        name = "p"
        queues = ["q"]
        concurrency = 8
        """))
    # and a locustfile of one's own whose producer adds a field to each payload
    locustfile = tmp_path / "own_locustfile.py"
    locustfile.write_text(textwrap.dedent("""
        from locust import events
        from qsim.loadtest import QueueObserverUser, ScenarioShape, register, users

        class TaggingProducer(users.ProducerUser):
            def make_payload(self, job_type, job_id, planned):
                return {**planned, "tag": job_id}

        register(events)
        """))
    # When Locust runs the scenario for its own duration (no -t)
    proc = locust("--scenario", str(path), "--redis-url", redis_url, "--start-workers", "--run-id", "lt-own",
                  "--csv", str(tmp_path / "run"), locustfile=str(locustfile))
    # Then the dead jobs are the failures of the job row (so Locust exits 1), and the completed
    # ones its successes; the adds themselves did not fail
    assert proc.returncode == 1, explain(proc)
    rows = stats(tmp_path / "run")
    added = int(rows[("enqueue", "risky")]["Request Count"])
    assert abs(added - 20) <= COUNT_SLACK and int(rows[("enqueue", "risky")]["Failure Count"]) == 0
    with Queue("q", redis=redis_url) as q:
        counts = q.counts()
    job = rows[("job", "risky")]
    assert 0 < counts["dead"] < added, counts
    assert int(job["Failure Count"]) == counts["dead"]
    assert int(job["Request Count"]) == counts["dead"] + counts["completed"] == added
    assert "JobDead" in (tmp_path / "run_failures.csv").read_text()
    # and the payloads were the producer's own
    with Queue("q", redis=redis_url) as q:
        assert q.get_job("lt-own-risky-0").data["tag"] == "lt-own-risky-0"


@pytest.mark.redis
def test_a_missed_threshold_fails_the_run_with_exit_code_1(redis_url: str, tmp_path: Path) -> None:
    # Given the workshop (lognormal 0.5 s service) and a latency threshold no such job can meet
    # When Locust runs it for 2 s against the engine, with its pool started
    proc = locust("-u", "1", "-t", "1s", "--scenario", "workshop", "--redis-url", redis_url, "--start-workers",
                  "--run-id", "lt-slo", "--drain", "15", "--slo", "p95_latency<=0.05", "--slo", "lost==0",
                  "--slo", "p95_wait<=60 in 90% of windows", "--slo", "p95_wait<=0.0001 in every window")
    # Then the verdict table shows the misses and Locust's exit code is 1, though no request failed
    assert proc.returncode == 1, explain(proc)
    assert re.search(r"p95_latency<=0.05 +[0-9.]+ +FAIL", proc.stderr), explain(proc)
    assert "thresholds FAILED: 2 of 4 missed: p95_latency<=0.05, p95_wait<=0.0001 in every window" in proc.stderr, \
        explain(proc)
    assert re.search(r"lost==0 +0 +pass", proc.stderr), explain(proc)
    # the per-window forms are judged on the run's windows: the share of windows met (1: all), the worst window
    assert re.search(r"p95_wait<=60 in 90% of windows +1 +pass", proc.stderr), explain(proc)
    assert re.search(r"p95_wait<=0.0001 in every window +[0-9.]+ +FAIL", proc.stderr), explain(proc)


def test_a_bad_threshold_is_refused_before_anything_runs() -> None:
    proc = locust("-t", "2s", "--slo", "lost==0", "--slo", "p95_wait=<2", timeout=30)
    assert proc.returncode == 2, explain(proc)
    assert "--slo 'p95_wait=<2': '=<' is not a comparison qsim knows; use <=" in proc.stderr, explain(proc)


def test_a_non_local_redis_is_refused_without_the_flag(tmp_path: Path) -> None:
    # Given a Redis URL that is not on this machine (a non-routable address: never connected to)
    url = "redis://10.255.255.1:6379/0"
    # When Locust is started against it without the confirmation flag
    proc = locust("-t", "2s", "--redis-url", url, "--csv", str(tmp_path / "run"), timeout=30)
    # Then it stops before connecting, with a message naming the option
    assert proc.returncode == 2, explain(proc)
    assert CONFIRM_OPTION in proc.stderr, explain(proc)
    assert "10.255.255.1" in proc.stderr
    assert not (tmp_path / "run_stats.csv").exists() or "enqueue" not in (tmp_path / "run_stats.csv").read_text()


def test_an_unreachable_redis_is_a_clear_error() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    proc = locust("-t", "2s", "--redis-url", url, timeout=30)
    assert proc.returncode == 1, explain(proc)
    assert "Redis unavailable" in proc.stderr and "Traceback" not in proc.stderr, explain(proc)


def test_a_bad_scenario_is_refused_with_its_name(tmp_path: Path) -> None:
    proc = locust("-t", "2s", "--scenario", str(tmp_path / "missing.toml"), timeout=30)
    assert proc.returncode == 2, explain(proc)
    assert "missing.toml" in proc.stderr


def test_engine_limits_of_the_scenario_are_refused_before_workers_start(tmp_path: Path) -> None:
    # Given a wrr pool with a fractional weight (it was a traceback with --start-workers; 1.9 ran as 1)
    path = tmp_path / "w.toml"
    path.write_text('name = "w"\nduration = 5.0\n[[queues]]\nname = "a"\n[[queues]]\nname = "b"\n[[jobs]]\n'
                    'name = "j"\nqueue = "a"\narrival = { kind = "poisson", rate = 2.0 }\n'
                    'service = { kind = "constant", mean = 0.01 }\n[[pools]]\nname = "p"\nqueues = ["a", "b"]\n'
                    'policy = "wrr"\nweights = { a = 0.5 }\n')
    proc = locust("-t", "2s", "--scenario", str(path), "--start-workers", timeout=30)
    # Then Locust exits 2 naming the key, with no traceback
    assert proc.returncode == 2, explain(proc)
    assert "pools[0].weights.a must be a whole number >= 1" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("extra, said", [("window = 1e-9", "window = 1e-09: windows of 1e-09 s"),
                                         ("rate = 1e12", "jobs[0].arrival: 1e+12 jobs/s for 60 s")])
def test_a_run_too_large_for_memory_is_refused_before_any_producer_starts(extra: str, said: str,
                                                                          tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    rate = extra.split("= ")[1] if extra.startswith("rate") else "5.0"
    path.write_text(f'name = "big"\nduration = 60.0\n{extra if extra.startswith("window") else ""}\n[[queues]]\n'
                    f'name = "q"\n[[jobs]]\nname = "a"\nqueue = "q"\narrival = {{ kind = "poisson", rate = {rate} }}\n'
                    'service = { kind = "constant", mean = 0.01 }\n[[pools]]\nname = "p"\nqueues = ["q"]\n')
    proc = locust("-t", "2s", "--scenario", str(path), "--redis-url", f"redis://127.0.0.1:{free_port()}/0",
                  timeout=60)
    assert proc.returncode == 2, explain(proc)
    assert said in proc.stderr and "more than this machine's" in proc.stderr and "Traceback" not in proc.stderr


def test_qsim_help_lists_every_qsim_option() -> None:
    from qsim.loadtest.config import HELP_OPTION, add_arguments

    class Group:
        def __init__(self) -> None:
            self.options: list[str] = []

        def add_argument(self, *names: str, **_: object) -> None:
            self.options += [n for n in names if n.startswith("--")]

    group = Group()
    add_arguments(type("Parser", (), {"add_argument_group": lambda self, *a, **k: group})())
    assert {"--target", "--time-scale", "--redis-url", "--scenario", HELP_OPTION} <= set(group.options)
    proc = subprocess.run([sys.executable, "-m", "locust", "-f", "loadtests", HELP_OPTION], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, explain(proc)
    help_text = proc.stdout
    missing = [o for o in group.options if o not in help_text]
    assert not missing and "--headless" in help_text, (missing, help_text[-3000:])
    # Locust's own --help is printed before the locustfile is imported (locustio/locust#2917): when a Locust
    # release lists a locustfile's options there, docs/how-to/locust.md and qsim/loadtest/config.py can say so
    plain = subprocess.run([sys.executable, "-m", "locust", "-f", "loadtests", "--help"], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    assert plain.returncode == 0 and "--time-scale" not in plain.stdout and "--headless" in plain.stdout


# --------------------------------------------------------------------------- the Locust-free parts

def test_locust_free_parts_do_not_import_locust() -> None:
    code = ("import sys, qsim.loadtest.config, qsim.loadtest.mix, qsim.loadtest.run, qsim.loadtest.workers; "
            "assert 'locust' not in sys.modules and 'gevent' not in sys.modules, 'imported locust'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=30)


def test_job_mix_follows_the_rates_exactly() -> None:
    mix = JobMix({"a": 6.0, "b": 3.0, "c": 1.0})
    picks = [mix.next() for _ in range(1000)]
    assert (picks.count("a"), picks.count("b"), picks.count("c")) == (600, 300, 100)
    assert picks[:10].count("c") == 1  # spread out, not in runs
    with pytest.raises(ValueError, match="positive"):
        JobMix({"a": 0.0})


def _scenario(**job: object) -> Scenario:
    raw = {"name": "s", "seed": 1, "duration": 10.0, "queues": [{"name": "q"}],
           "jobs": [{"name": "parent", "queue": "q", "arrival": {"kind": "constant", "rate": 2.0},
                     "service": {"kind": "constant", "mean": 0.1}, **job},
                    {"name": "kid", "queue": "q", "service": {"kind": "constant", "mean": 0.1}},
                    {"name": "kid2", "queue": "q", "service": {"kind": "constant", "mean": 0.1}}],
           "pools": [{"name": "p", "queues": ["q"]}]}
    return Scenario.from_dict(raw)


def test_payloads_cycle_the_plan_under_ids_of_the_run() -> None:
    s = _scenario(fan_out={"job": "kid", "count": 2}, attempts=3)
    source = PayloadSource(s, "lt-x", node="-w1", cap=5)
    ids = [source.next("parent")[0] for _ in range(7)]
    assert ids == [f"lt-x-w1-parent-{i}" for i in range(7)]
    job_id, payload, options = source.next("parent")
    assert payload["s"] and len(payload["x"]) == 3 and options["attempts"] == 3 and options["job_id"] == job_id
    assert [c[0] for c in payload["fan"]["jobs"]] == [f"{job_id}.0", f"{job_id}.1"]
    assert source.payloads["parent"][0]["fan"]["jobs"][0][0] == "kid-c0"  # the plan itself is untouched


def test_rates_scale_and_flow_parents_count_once() -> None:
    # (flows were refused before issue 10: the producer now adds them through SyncFlowProducer)
    assert arrival_rates(_scenario(), 2.5) == {"parent": 5.0}
    assert arrival_rates(_scenario(flow={"children": ["kid", "kid2"]})) == {"parent": 2.0}


def test_config_sizes_producers_and_validates() -> None:
    assert LoadTestConfig().producer_count(6.0) == 1
    assert LoadTestConfig().producer_count(300.0) == 15
    assert LoadTestConfig(producers=4).producer_count(300.0) == 4
    with pytest.raises(ValueError, match="--rate-scale"):
        LoadTestConfig(rate_scale=0)
    with pytest.raises(ValueError, match="--run-id"):
        LoadTestConfig(run_id="has space")
    with pytest.raises(ValueError, match="--target"):
        LoadTestConfig(target="celery")
    with pytest.raises(ValueError, match="with --target bullmq your BullMQ workers take the jobs"):
        LoadTestConfig(target="bullmq", start_workers=True)
    with pytest.raises(ValueError, match="--abort-on-fail needs at least one --slo"):
        LoadTestConfig(abort_on_fail=True)
    with pytest.raises(ValueError, match="is not a comparison qsim knows"):
        LoadTestConfig(slos=("p95_wait=<2",))
    assert [str(s) for s in LoadTestConfig(slos=("p95_wait<=2", "lost==0")).thresholds()] == ["p95_wait<=2",
                                                                                               "lost==0"]


def test_model_scenario_of_a_load_test() -> None:
    from qsim.loadtest.compare import load_test_scenario, predict
    from qsim.spec.dists import ConstantArrivals, PoissonArrivals, TraceArrivals

    s = _scenario()
    # rates x scale, the pacing's arrival kind, the window as duration, no warm-up
    paced = load_test_scenario(s, scale=2.0, window=7.0, pacing="poisson")
    assert paced.duration == 7.0 and paced.warmup == 0.0
    assert isinstance(paced.job("parent").arrival, PoissonArrivals) and paced.job("parent").arrival.rate == 4.0
    assert isinstance(load_test_scenario(s, scale=1, window=7, pacing="constant").job("parent").arrival,
                      ConstantArrivals)
    # replayed enqueue times start at 0; the model then runs exactly those jobs, once
    replay = load_test_scenario(s, scale=1, window=1.0, pacing="constant",
                                arrivals={"parent": [100.5, 100.0, 101.5]})
    arrival = replay.job("parent").arrival
    assert isinstance(arrival, TraceArrivals) and arrival.at == (0.0, 0.5, 1.5) and replay.duration > 1.5
    got = predict(replay)["parent"]
    assert got["jobs"] == 3 and got["runs"] == 1
    assert got["latency"]["p50"] == pytest.approx(0.1, abs=1e-6)  # constant 0.1 s service, no queueing


@pytest.mark.redis
@pytest.mark.long
def test_a_distributed_run_is_judged_by_the_master_on_every_workers_jobs(redis_url: str, tmp_path: Path) -> None:
    # Given a Locust master and one worker, two separate processes as on two machines, with thresholds
    # (whole-run and per-window) the master is to judge
    port = str(free_port())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_URL", "QSIM_", "LOCUST_"))}
    worker = subprocess.Popen([sys.executable, "-m", "locust", "-f", "loadtests", "--worker", "--master-port", port,
                               "--scenario", "workshop", "--redis-url", redis_url],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # When the master runs the workshop for 3 s with its pool started
        proc = locust("--master", "--expect-workers", "1", "--master-bind-port", port, "-u", "2", "-r", "2",
                      "-t", "3s", "--scenario", "workshop", "--redis-url", redis_url, "--start-workers",
                      "--run-id", "lt-dist", "--drain", "15", "--slo", "lost==0",
                      "--slo", "p95_wait<=60 in 90% of windows", "--slo", "p95_wait<=0.0001 in every window",
                      timeout=120)
    finally:
        try:
            worker_out, _ = worker.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker_out, _ = worker.communicate()
    why = explain(proc) + "\n--- worker ---\n" + worker_out[-3000:]
    # Then the master judged the jobs the worker added (it added none itself), whole-run and per window,
    # and the missed threshold fails the run
    assert "judging the jobs of 1 Locust worker(s)" in proc.stderr, why
    title = re.search(r"qsim load test lt-dist \(qsim engine\): (\d+) jobs, (\d+) completed", proc.stderr)
    assert title, why
    with Queue("orders", redis=redis_url) as q:
        added = q.counts()["completed"] + q.counts()["dead"]
    assert int(title.group(1)) == added >= 6 * 3 - COUNT_SLACK, why
    assert re.search(r"lost==0 +0 +pass", proc.stderr), why
    assert re.search(r"p95_wait<=60 in 90% of windows +1 +pass", proc.stderr), why
    assert re.search(r"p95_wait<=0.0001 in every window +[0-9.]+ +FAIL", proc.stderr), why
    assert proc.returncode == 1, why


def test_abort_on_fail_is_refused_in_a_distributed_run() -> None:
    # (on a port of its own: with Locust's default 5557 taken by another run, its worker processes joined that
    # run's master and the refused test hung past its timeout)
    port = str(free_port())
    proc = locust("--processes", "2", "--master-bind-port", port, "--master-port", port, "-t", "2s",
                  "--slo", "lost==0", "--abort-on-fail", timeout=100)
    assert proc.returncode == 2, explain(proc)
    assert "--abort-on-fail watches the jobs one Locust process sees" in proc.stderr, explain(proc)


@pytest.mark.redis
def test_a_bullmq_load_test_on_a_host_name_ends(redis_url: str, tmp_path: Path) -> None:
    # Given the BullMQ target on a Redis named by host name (`localhost`: asyncio resolves it in its default
    # executor, whose threads once outlived the loop, so Locust hung at exit) and no BullMQ worker
    scenario_file = tmp_path / "short.toml"
    scenario_file.write_text(textwrap.dedent("""
        name = "short"
        seed = 1
        duration = 6.0
        [[queues]]
        name = "orders"
        [[jobs]]
        name = "cut"
        queue = "orders"
        arrival = { kind = "poisson", rate = 20.0 }
        service = { kind = "constant", mean = 0.01 }
        [[pools]]
        name = "workers"
        queues = ["orders"]
        """))
    url = re.sub(r"//[^:/]+:", "//localhost:", redis_url)
    # When the load test runs (its jobs stay waiting: no worker takes them)
    proc = locust("--scenario", str(scenario_file), "--redis-url", url, "--target", "bullmq", "--drain", "2",
                  "--run-id", "lt-host", "--slo", "lost==0", timeout=90)
    # Then Locust reports and exits by itself, with the verdict of its threshold
    assert "qsim load test lt-host (BullMQ)" in proc.stderr and "thresholds passed: 1 of 1" in proc.stderr, \
        explain(proc)
    assert proc.returncode == 0, explain(proc)
