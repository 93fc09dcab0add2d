"""Wires the qsim load test into Locust's events: arguments, checks, start and stop.

:func:`register` adds listeners to Locust's ``events``:

- ``init_command_line_parser``: the custom arguments of :mod:`qsim.loadtest.config`.
- ``init``: the safety check (:func:`qsim.engine.safety.require_local_or_confirmed`)
  and the scenario check, before anything connects; a refusal prints one
  line naming the problem and exits with code 2. The master (or the single
  process) also fixes what every process must agree on: the run id, the
  number of producer users and the arrival window.
  With ``--start-workers`` it starts the scenario's pools as local processes
  and waits until they run (stopped at ``quitting``).
- ``test_start``: connects, then opens the arrival window: the users start
  only after this. The master (or the single process) tells its workers how
  many share the scheduled arrivals, and with ``--start-workers`` plays the
  scenario's ``[[events]]`` on the local pools at their times (a greenlet).
  With ``--slo ... --abort-on-fail`` a greenlet checks once a second whether
  a threshold can no longer be met (:func:`qsim.loadtest.thresholds.doomed`)
  and then stops the test.
- ``test_stop``: logs what was added and observed, and what Redis holds;
  with ``--compare-model``, the model's prediction next to the measurement;
  with ``--slo``, the verdict table of the thresholds on this run's Summary
  (:mod:`qsim.analysis.slo.thresholds`), on stderr. Distributed
  (``--master``/``--worker``, ``--processes``), each worker sends the master
  its jobs (message ``qsim_jobs``: :func:`qsim.loadtest.thresholds.job_rows`)
  when it stops, or when the master asks (``qsim_report``: a master told to
  quit stops before its workers do); the master waits for every worker of
  the run (at most :data:`REPORT_TIMEOUT` s) and judges the thresholds on
  the Summary of all their jobs, whole-run and per-window alike. A worker
  missing at the end fails the verdict. ``--abort-on-fail`` needs one process
  (no process sees the whole run while it goes).
- ``quitting``: stops the local pools; with ``--slo``, sets Locust's exit
  code: 0 when every threshold was met (dead jobs then count only through a
  ``dead`` threshold), 1 when one was missed or an add failed.
"""

from __future__ import annotations

import logging
import sys
import time
import weakref
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gevent
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from qsim.analysis.slo.thresholds import format_verdicts, judge
from qsim.engine.connection import connect, display_url
from qsim.engine.safety import require_local_or_confirmed
from qsim.engine.scripts import redis_errors
from qsim.errors import QsimError
from qsim.loadtest.compare import comparison_rows, load_test_scenario, predict, write_comparison
from qsim.loadtest.config import LoadTestConfig, add_arguments
from qsim.loadtest.mix import peak_rates
from qsim.loadtest.run import LoadTestRun
from qsim.loadtest.schedule import scheduled_types
from qsim.loadtest.thresholds import doomed, job_rows, merge_rows, rows_summary, run_summary
from qsim.loadtest.timescale import time_scaled
from qsim.loadtest.workers import WorkerPool
from qsim.results.display import fixed
from qsim.results.summary import Summary
from qsim.scenarios import load
from qsim.spec.run_size import check_run_size
from qsim.spec.scenario import Scenario

__all__ = ["register", "run_of", "REPORT_TIMEOUT"]

logger = logging.getLogger(__name__)

_RUNS: weakref.WeakKeyDictionary[Environment, LoadTestRun] = weakref.WeakKeyDictionary()
_POOLS: weakref.WeakKeyDictionary[Environment, WorkerPool] = weakref.WeakKeyDictionary()
_STARTS: weakref.WeakKeyDictionary[Environment, int] = weakref.WeakKeyDictionary()
_EVENTS: weakref.WeakKeyDictionary[Environment, gevent.Greenlet] = weakref.WeakKeyDictionary()
_WATCH: weakref.WeakKeyDictionary[Environment, gevent.Greenlet] = weakref.WeakKeyDictionary()
#: The threshold verdict of the last run of this process: True passed, False missed.
_VERDICT: weakref.WeakKeyDictionary[Environment, bool] = weakref.WeakKeyDictionary()
#: Thresholds the --abort-on-fail watch found could no longer be met.
_DOOMED: weakref.WeakKeyDictionary[Environment, list[str]] = weakref.WeakKeyDictionary()
#: On a master: per run id, the jobs each worker (by node id) sent (``qsim_jobs``).
_WORKER_ROWS: weakref.WeakKeyDictionary[Environment, dict[str, dict[str, Any]]] = weakref.WeakKeyDictionary()
#: On a worker: the run ids whose jobs it sent its master.
_SENT: weakref.WeakKeyDictionary[Environment, set[str]] = weakref.WeakKeyDictionary()
#: How long (s) a master waits at the end of a run for its workers' jobs before judging without them.
REPORT_TIMEOUT = 60.0


def run_of(environment: Environment) -> LoadTestRun | None:
    """The running load test of this process (None before ``test_start`` or after ``test_stop``)."""
    return _RUNS.get(environment)


def register(events: Any) -> None:
    """Add the qsim listeners to Locust's ``events`` (once, however many locustfiles call it)."""
    if getattr(events, "_qsim_registered", False):
        return
    events._qsim_registered = True
    events.init_command_line_parser.add_listener(add_arguments)
    events.init.add_listener(_on_init)
    events.test_start.add_listener(_on_test_start)
    events.test_stop.add_listener(_on_test_stop)
    events.quitting.add_listener(_on_quitting)


def _refuse(message: str) -> None:
    sys.stderr.write(f"qsim load test: {message}\n")
    sys.stderr.flush()
    raise SystemExit(2)


def _check(options: Any) -> tuple[LoadTestConfig, Scenario, float]:
    """The settings, the scenario as played (``--time-scale``) and its total rate at the peaks of its
    rate profiles; raises QsimError/ValueError when refused."""
    config = LoadTestConfig.from_options(options)
    require_local_or_confirmed(config.redis_url, config.confirmed)
    scenario = time_scaled(load(config.scenario), config.time_scale)
    check_run_size(scenario)  # a run that cannot fit in memory is refused before any producer starts
    if config.target == "bullmq":
        from qsim.bullmq.options import check_supported
        from qsim.bullmq.producer import require_package

        check_supported(scenario)
        require_package()
    else:
        from qsim.harness.run import check_supported as check_engine

        check_engine(scenario)
    return config, scenario, sum(peak_rates(scenario, config.rate_scale).values())


def _decide(options: Any, starts: int) -> None:
    """Fix what every process of the run must agree on, in the options that Locust sends to its
    workers: the run id (a new one for each start of the same process: a restart from the web
    UI must not reuse job ids), the producer users, the arrival window, the spawn rate.
    ``-u``/``-r``/``-t`` as given on the command line (``qsim_cli``), not Locust's defaults."""
    cli = dict(getattr(options, "qsim_cli", None) or {})
    config, scenario, rate = _check(SimpleNamespace(**{**vars(options), **cli, "qsim_producers": None,
                                                      "qsim_window": None, "run_id": options.qsim_base_run_id}))
    options.run_id = config.run_id if starts == 0 else f"{config.run_id}-r{starts}"
    options.qsim_producers = config.producer_count(rate)
    options.qsim_window = config.run_time if config.run_time is not None else scenario.duration
    options.qsim_spawn_rate = config.spawn_rate
    prefix = config.bullmq_prefix if config.target == "bullmq" else config.prefix
    logger.info("qsim load test %s: scenario %s, %.3g jobs/s (at the peak) over %d producer users for %.0f s, Redis %s, "
                "target %s, prefix %s", options.run_id, scenario.name, rate, options.qsim_producers,
                options.qsim_window, display_url(config.redis_url), config.target, prefix)
    if config.target == "bullmq" and starts == 0:
        from qsim.bullmq.options import notes

        for note in notes(scenario):
            logger.info("BullMQ: %s", note)


def _ping(url: str) -> None:
    """Raises RedisUnavailable (a clear message, no traceback) when Redis cannot be reached."""
    client = connect(url, socket_connect_timeout=5.0)
    try:
        with redis_errors(f"at {display_url(url)}"):
            client.ping()
    finally:
        client.close()


def _on_init(environment: Environment, runner: Any = None, **_: Any) -> None:
    options = environment.parsed_options
    try:
        config, scenario, _rate = _check(options)
    except (QsimError, ValueError) as e:
        _refuse(str(e))
        return
    distributed = isinstance(runner, (MasterRunner, WorkerRunner)) or bool(getattr(options, "processes", None))
    if config.slos and config.abort_on_fail and distributed:
        _refuse("--abort-on-fail watches the jobs one Locust process sees while the test runs: run the test in "
                "one process (without --processes, --master or --worker), or leave it out (the master judges "
                "--slo on every worker's jobs at the end)")
        return
    # (a worker learns --slo from the master only when the test starts: it listens whatever its own options)
    if isinstance(runner, MasterRunner):
        runner.register_message("qsim_jobs", _on_worker_jobs)
    elif isinstance(runner, WorkerRunner):
        runner.register_message("qsim_report", _on_report_asked, concurrent=True)
    if options is None or isinstance(runner, WorkerRunner):
        return  # a worker takes the shared values from the master with each spawn message
    # -u/-r/-t as given (Locust fills in headless defaults later)
    options.qsim_cli = {"num_users": options.num_users, "spawn_rate": options.spawn_rate,
                        "run_time": options.run_time}
    options.qsim_base_run_id = config.run_id or LoadTestConfig.new_run_id()
    _decide(options, 0)
    try:
        _ping(config.redis_url)
    except QsimError as e:
        sys.stderr.write(f"qsim load test: {e}\n")
        raise SystemExit(1) from e
    if config.start_workers:
        # Up before any test starts (a master's workers would otherwise add jobs while the
        # pools boot), and kept for every run of this process: stopped when Locust quits.
        pool = WorkerPool(scenario, config.redis_url, prefix=config.prefix, run_id=options.qsim_base_run_id)
        _POOLS[environment] = pool
        try:
            pool.start()
            pool.wait_ready()
        except (QsimError, OSError) as e:
            pool.stop(timeout=5.0)
            sys.stderr.write(f"qsim load test: could not start the worker pools: {e}\n")
            raise SystemExit(1) from e


def _on_test_start(environment: Environment, **_: Any) -> None:
    runner = environment.runner
    options = environment.parsed_options
    try:
        if options is not None and not isinstance(runner, WorkerRunner) and hasattr(options, "qsim_cli"):
            starts = _STARTS.get(environment, 0)
            _STARTS[environment] = starts + 1
            if starts:
                _decide(options, starts)  # a restart (web UI): new run id, options as edited there
        if isinstance(runner, MasterRunner) and options is not None:
            _share_out(options, runner.worker_count)
        config = LoadTestConfig.from_options(options)
        node = f"-w{runner.worker_index}" if isinstance(runner, WorkerRunner) else ""
        nodes = max(1, int(getattr(options, "qsim_nodes", None) or 1))
        share = (runner.worker_index % nodes, nodes) if isinstance(runner, WorkerRunner) else (0, 1)
        run = LoadTestRun(config, node=node, share=share)
        run.connect()
    except (QsimError, ValueError, OSError) as e:
        logger.error("qsim load test cannot start: %s", e)
        environment.process_exit_code = 1
        if runner is not None:
            headless = bool(getattr(options, "headless", False))
            gevent.spawn_later(0, runner.quit if headless else runner.stop)
        return
    run.open_window()
    _RUNS[environment] = run
    _DOOMED.pop(environment, None)
    _VERDICT.pop(environment, None)
    pool = _POOLS.get(environment)
    if pool is not None and run.scenario.events:
        _EVENTS[environment] = gevent.spawn(_play_events, pool, run)
    if config.abort_on_fail and config.slos:
        _WATCH[environment] = gevent.spawn(_watch, environment, run)


def _watch(environment: Environment, run: LoadTestRun, every: float = 1.0) -> None:
    """``--abort-on-fail``: once a second, stop the test when a threshold can no longer be met."""
    slos = run.config.thresholds()
    while True:
        gevent.sleep(every)
        try:
            lost = doomed(run, slos)
        except Exception as e:  # never let the watch break the run; the end still judges
            logger.warning("--abort-on-fail check failed: %s", e)
            continue
        if lost:
            logger.warning("qsim load test %s: threshold%s %s can no longer be met: stopping the test "
                           "(--abort-on-fail)", run.run_id, "s" if len(lost) > 1 else "", ", ".join(lost))
            _DOOMED[environment] = lost
            runner = environment.runner
            if runner is not None:
                headless = bool(getattr(environment.parsed_options, "headless", False))
                gevent.spawn(runner.quit if headless else runner.stop)
            return


def _share_out(options: Any, workers: int) -> None:
    """On a master: how many Locust workers share the scheduled arrivals (each takes every
    ``n``-th), with at least one producer user each."""
    options.qsim_nodes = max(1, workers)
    config, scenario, _ = _check(options)
    if scheduled_types(scenario, config.pacing) and (options.qsim_producers or 1) < options.qsim_nodes:
        logger.info("%d producer users raised to %d: one per Locust worker, each adds its share of the "
                    "scheduled arrivals", options.qsim_producers or 1, options.qsim_nodes)
        options.qsim_producers = options.qsim_nodes


def _play_events(pool: WorkerPool, run: LoadTestRun) -> None:
    """The scenario's ``[[events]]`` on the local pools, each at its time after the window opened."""
    assert run.t0 is not None
    for event in sorted(run.scenario.events, key=lambda e: e.at):
        gevent.sleep(max(0.0, run.t0 + event.at - time.monotonic()))
        try:
            ids = pool.apply(event)
        except (QsimError, OSError) as e:
            logger.error("event %s %s at %.1f s failed: %s", event.kind, event.pool, event.at, e)
            continue
        logger.info("qsim event t=%.2f s: %s %s: %s", run.elapsed(), event.kind, event.pool,
                    ", ".join(ids) or "no process left")


def _measured(environment: Environment) -> dict[tuple[str, str], dict[str, float]]:
    out = {}
    for (name, kind), entry in environment.stats.entries.items():
        if kind in ("job", "wait") and entry.num_requests:
            metric = "latency" if kind == "job" else "wait"
            out[(name, metric)] = {"count": entry.num_requests,
                                   "p50": entry.get_response_time_percentile(0.5) / 1000.0,
                                   "p95": entry.get_response_time_percentile(0.95) / 1000.0}
    return out


def _compare(environment: Environment, run: LoadTestRun) -> None:
    """Log the model's prediction for this run next to the measurement (and write it as CSV)."""
    c = run.config
    window = run.window if run.t0 is None else min(run.window, run.elapsed())
    try:
        replay = run.arrivals if run.arrivals and not isinstance(environment.runner, MasterRunner) else None
        predicted = predict(load_test_scenario(run.scenario, scale=c.rate_scale, window=window, pacing=c.pacing,
                                               arrivals=replay, events=c.start_workers))
    except (QsimError, ValueError) as e:
        logger.warning("no model prediction for this run: %s", e)
        return
    rows = comparison_rows(predicted, _measured(environment))

    lines = [f"{'type':<20} {'metric':<8} {'model p50':>10} {'model p95':>10} {'measured p50':>13} "
             f"{'measured p95':>13} {'n':>7}"]
    lines += [f"{r['type']:<20} {r['metric']:<8} {fixed(r['model_p50']):>10} {fixed(r['model_p95']):>10} "
              f"{fixed(r['measured_p50']):>13} {fixed(r['measured_p95']):>13} {r['measured_count']:>7}" for r in rows]
    how = "replaying this run's enqueue times" if replay else f"at the load test's rates, {c.pacing} arrivals"
    logger.info("model vs load test (seconds; the model ran the same scenario %s):\n%s", how, "\n".join(lines))
    prefix = getattr(environment.parsed_options, "csv_prefix", None)
    if prefix:
        write_comparison(Path(f"{prefix}_model.csv"), rows)


def _on_quitting(environment: Environment, **_: Any) -> None:
    pool = _POOLS.pop(environment, None)
    if pool is not None:
        codes = pool.stop()
        logger.info("worker processes stopped: %s", codes)
    verdict = _VERDICT.get(environment)
    if verdict is not None and environment.process_exit_code is None:
        failed_adds = sum(e.num_failures for (_, kind), e in environment.stats.entries.items() if kind == "enqueue")
        environment.process_exit_code = 0 if verdict and not failed_adds else 1


def _swept(run: LoadTestRun) -> dict[str, str]:
    try:
        return run.sweep()
    except QsimError as e:
        logger.warning("could not read the jobs never seen to end (counted unfinished): %s", e)
        return {}


def _judge(environment: Environment, run: LoadTestRun) -> None:
    """``--slo``: the verdict of every threshold on this run's Summary, printed; kept for the exit code."""
    _verdict(environment, run, run_summary(run, _swept(run)))


def _verdict(environment: Environment, run: LoadTestRun, summary: Summary, *, missing: str = "") -> None:
    doomed_now = _DOOMED.get(environment, [])
    notes = {t: "could no longer be met: the test was stopped early" for t in doomed_now}
    rows = judge(summary, run.config.thresholds(), notes=notes)
    jobs = summary["jobs"]
    title = (f"qsim load test {run.run_id} ({run.target.label}): {jobs['arrived']} jobs, {jobs['completed']} "
             f"completed, {jobs['dead']} dead, {jobs['unfinished']} unfinished, {jobs['lost']} lost")
    text = format_verdicts(rows, title=title)
    if missing:
        text += f"\nFAILED: {missing}"
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
    _VERDICT[environment] = all(r.passed for r in rows) and not missing


# ---------------------------------------------------------------------- distributed: the master judges


def _send_jobs(environment: Environment, run: LoadTestRun) -> None:
    """On a worker: this run's jobs to the master (once per run)."""
    sent = _SENT.setdefault(environment, set())
    if run.run_id in sent or environment.runner is None:
        return
    sent.add(run.run_id)
    rows = job_rows(run, _swept(run))
    environment.runner.send_message("qsim_jobs", {"run_id": run.run_id, "rows": rows})
    logger.info("qsim load test %s: sent the master %d jobs", run.run_id, len(rows["job_id"]))


def _on_report_asked(environment: Environment, msg: Any, **_: Any) -> None:
    """On a worker: the master is judging (it stops before its workers when told to quit): send the jobs now."""
    run = _RUNS.get(environment)
    if run is not None and run.run_id == msg.data:
        _send_jobs(environment, run)


def _on_worker_jobs(environment: Environment, msg: Any, **_: Any) -> None:
    """On a master: a worker's jobs (``{"run_id", "rows"}``)."""
    data = msg.data or {}
    runs = _WORKER_ROWS.setdefault(environment, {})
    runs.setdefault(str(data.get("run_id")), {})[str(msg.node_id)] = data.get("rows") or {}


def _judge_workers(environment: Environment, run: LoadTestRun, *, timeout: float | None = None) -> None:
    """On a master: wait for every worker's jobs of this run, then the verdict on all of them."""
    expected = max(1, int(getattr(environment.parsed_options, "qsim_nodes", None) or 1))
    got = _WORKER_ROWS.setdefault(environment, {}).setdefault(run.run_id, {})
    if len(got) < expected and environment.runner is not None:
        environment.runner.send_message("qsim_report", run.run_id)
    deadline = time.monotonic() + (REPORT_TIMEOUT if timeout is None else timeout)
    while len(got) < expected and time.monotonic() < deadline:
        gevent.sleep(0.1)
    missing = "" if len(got) >= expected else \
        f"{expected - len(got)} of {expected} Locust workers sent no jobs: the verdict covers only the others"
    summary = rows_summary(merge_rows(list(got.values())), run.scenario,
                           source="bullmq" if run.config.target == "bullmq" else "engine")
    _WORKER_ROWS[environment].pop(run.run_id, None)
    logger.info("qsim load test %s: judging the jobs of %d Locust worker(s)", run.run_id, len(got))
    _verdict(environment, run, summary, missing=missing)


def _on_test_stop(environment: Environment, **_: Any) -> None:
    events = _EVENTS.pop(environment, None)
    if events is not None and not events.dead:
        events.kill(block=False)
        logger.info("the test stopped before the scenario's last events: those were not carried out")
    watch = _WATCH.pop(environment, None)
    if watch is not None and not watch.dead and watch is not gevent.getcurrent():
        watch.kill(block=False)
    run = _RUNS.pop(environment, None)
    if run is None:
        return
    try:
        if run.config.slos and isinstance(environment.runner, WorkerRunner):
            _send_jobs(environment, run)
        elif run.config.slos and isinstance(environment.runner, MasterRunner):
            _judge_workers(environment, run)
        elif run.config.slos:
            _judge(environment, run)
        if run.config.compare_model and not isinstance(environment.runner, WorkerRunner):
            _compare(environment, run)
        if not isinstance(environment.runner, MasterRunner):
            logger.info("qsim load test %s: added %d jobs; observed %d completed, %d dead", run.run_id, run.added,
                        run.completed, run.dead)
        logger.info("queue counts: %s", run.counts())
    except QsimError as e:
        logger.warning("could not read the queue counts: %s", e)
    finally:
        run.close()
