"""The engine's subcommands of ``qsim``: ``worker``, ``stats`` and ``dlq``.

:mod:`qsim.cli` calls :func:`register` with its subparsers; each subcommand sets
``func(args) -> int`` (the exit code, :func:`qsim.cli.common.exit_code`: 0
success, 2 bad input (arguments, a Redis URL that is malformed or cannot be
reached), 1 other failures; ``worker`` also returns 3 when jobs were cut off at
shutdown and handed back to the queue).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import inspect
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from qsim.cli.common import (EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, DEFAULT_REDIS_URL, err, exit_code,
                              pos_float, pos_int, redis_url, resolve_redis_url)
from qsim.engine import EXIT_CUT_OFF, Queue, Worker, WorkerSettings
from qsim.engine.eventloop import NO_UVLOOP_ENV, run_process
from qsim.engine.keys import DEFAULT_PREFIX
from qsim.engine.payload import DEFAULT_REDACT
from qsim.engine.safety import unreachable
from qsim.errors import EngineError, JobNotFound, RedisUnavailable

__all__ = ["register", "load_handler", "cmd_worker", "cmd_stats", "cmd_dlq"]



def load_handler(spec: str) -> Callable[..., Any]:
    """Import ``MODULE:FUNCTION`` (the current directory is importable); ValueError if unusable."""
    module, sep, func = spec.partition(":")
    if not sep or not module or not func:
        raise ValueError(f"handler must look like MODULE:FUNCTION, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise ValueError(f"cannot import module {module!r}: {e}") from e
    handler: Callable[..., Any] | None = getattr(mod, func, None)
    if handler is None:
        raise ValueError(f"module {module!r} has no attribute {func!r}")
    if not inspect.iscoroutinefunction(handler):
        raise ValueError(f"{spec} must be an async function (async def {func}(job): ...)")
    return handler


def _common(p: argparse.ArgumentParser, queue_required: bool = True) -> None:
    p.add_argument("--queue", required=queue_required, metavar="NAME", help="queue name")
    p.add_argument("--redis", type=redis_url, metavar="URL",
                   help=f"Redis URL (default: $REDIS_URL, then {DEFAULT_REDIS_URL})")
    p.add_argument("--prefix", default=DEFAULT_PREFIX, help=f"key prefix (default: {DEFAULT_PREFIX})")


def _redact_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--redact", action="append", default=[], metavar="FIELD",
                   help="also hide this payload field in logs, events and the DLQ listing (repeatable; always "
                        f"hidden: {', '.join(DEFAULT_REDACT)})")


def _redacted_fields(args: argparse.Namespace) -> tuple[str, ...]:
    return (*DEFAULT_REDACT, *getattr(args, "redact", []))


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``worker``, ``stats`` and ``dlq`` to the ``qsim`` command."""
    p = subparsers.add_parser(
        "worker", help="run a job handler on a queue",
        description="Run the async function MODULE:FUNCTION on the jobs of a queue until SIGTERM/SIGINT. "
                    "Exit code 0 when drained, 3 when jobs were cut off at the end of the grace period "
                    "(and handed back to the queue), 2 on bad arguments or a Redis that cannot be reached, 1 on other failures.")
    p.add_argument("handler", metavar="MODULE:FUNCTION", help="async def FUNCTION(job) -> JSON result")
    WorkerSettings.add_arguments(p, overrides={"redis": {"type": redis_url, "help": "Redis URL (default: "
                                                         f"$REDIS_URL, then {DEFAULT_REDIS_URL})"}})
    p.add_argument("--no-uvloop", action="store_true",
                   help=f"run on asyncio's own event loop even when uvloop is installed (the fast extra); "
                        f"also {NO_UVLOOP_ENV}=1")
    p.add_argument("--metrics-port", type=pos_int, metavar="P",
                   help="serve Prometheus metrics on http://0.0.0.0:P/metrics (see qsim.engine.metrics)")
    p.add_argument("--advise-slo", action="append", metavar="EXPR",
                   help="with --metrics-port: also export qsim_recommended_workers{queue} and "
                        "qsim_predicted_wait_seconds{queue,quantile} for this SLO, e.g. p95_wait<=2 (see qsim advise)")
    p.add_argument("--advise-every", type=pos_float, default=60.0, metavar="S",
                   help="seconds between recomputations of the advice (default 60)")
    p.add_argument("--advise-window", default="15m", metavar="W",
                   help="the advice comes from the jobs enqueued in the last W (default 15m)")
    p.set_defaults(func=cmd_worker)

    p = subparsers.add_parser("stats", help="job counts per queue",
                              description="Print waiting/active/delayed/completed/dead counts per queue.")
    _common(p, queue_required=False)
    p.add_argument("--group", metavar="TAG", help="the hash-tag group of --queue, if it has one")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_stats)

    p = subparsers.add_parser("dlq", help="inspect, retry or purge the dead-letter queue",
                              description="Dead-letter queue: list, show ID, retry ID... | --all, purge. "
                                          "Sensitive fields are redacted. show takes a dead job (exit 1 for "
                                          "another); list shows a job key overwritten by hand (not a hash) "
                                          "with state unknown and says so.")
    p.add_argument("action", choices=("list", "show", "retry", "purge"))
    p.add_argument("ids", nargs="*", metavar="ID", help="job id(s) for show / retry")
    _common(p)
    p.add_argument("--group", metavar="TAG", help="the hash-tag group of --queue, if it has one")
    p.add_argument("--all", action="store_true", dest="all_jobs", help="retry: every dead job")
    p.add_argument("--limit", type=pos_int, default=100, help="list: at most this many (default 100)")
    _redact_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_dlq)
    _ids_anywhere(p)


def _ids_anywhere(p: argparse.ArgumentParser) -> None:
    """Let ``dlq show --queue q ID`` take the ids after the options too: argparse fills the ``ids``
    positional (nargs="*") with nothing when an option follows the action, then calls a later id
    unrecognized. Those leftover plain words are the ids."""
    parse = p.parse_known_args

    def parse_known_args(args: Any = None, namespace: Any = None) -> Any:
        ns, rest = parse(args, namespace)
        words = [a for a in rest if not a.startswith("-")]
        if words and ns.action in ("show", "retry"):
            ns.ids = [*ns.ids, *words]
            rest = [a for a in rest if a.startswith("-")]
        return ns, rest

    p.parse_known_args = parse_known_args  # type: ignore[method-assign]  # this one parser's, on purpose



def cmd_worker(args: argparse.Namespace) -> int:
    """``qsim worker``."""
    if args.advise_slo and args.metrics_port is None:
        err("worker", "--advise-slo needs --metrics-port P (the advice is exported as metrics)")
        return EXIT_BAD_INPUT
    if args.advise_slo:  # checked before the handler is imported: the message names qsim worker's own options
        from qsim.advise.core import parse_slos, parse_window

        try:
            parse_slos(args.advise_slo, option="--advise-slo")
            parse_window(args.advise_window, option="--advise-window")
        except ValueError as e:
            err("worker", str(e))
            return EXIT_BAD_INPUT
    try:
        handler = load_handler(args.handler)
        settings = WorkerSettings.from_args(args, redis=resolve_redis_url(args.redis))
        worker = Worker(settings, handler)
    except ValueError as e:
        err("worker", str(e))
        return EXIT_BAD_INPUT
    from qsim.engine.metrics import PortUnavailable

    _add_lifecycle(worker, args, settings)
    try:
        code = run_process(worker.run(), use_uvloop=not args.no_uvloop)
    except RedisUnavailable as e:  # cannot be reached at start: bad input (exit 2, qsim.cli.common.exit_code)
        err("worker", _said(e, args))
        return exit_code(e)
    except PortUnavailable as e:
        err("worker", str(e))
        return EXIT_FAILURE
    if code == EXIT_CUT_OFF:
        err("worker", "stopped with jobs cut off (handed back to the queue)")
    return code


def _add_lifecycle(worker: Worker, args: argparse.Namespace, settings: WorkerSettings) -> None:
    """The worker's lifecycle hooks (qsim.engine.hooks): with ``--metrics-port`` the metrics server, and with
    ``--advise-slo`` the advisor, its gauges beside the worker's (no change to the engine)."""
    if args.metrics_port is None:
        return
    from qsim.engine.metrics import MetricsServer, WorkerMetrics

    advisor = _advisor(args, settings) if args.advise_slo else None
    metrics = WorkerMetrics(worker)

    def said(port: int) -> None:
        print(f"qsim worker: metrics on http://0.0.0.0:{args.metrics_port}/metrics", file=sys.stderr)

    worker.add_hook(MetricsServer(metrics, args.metrics_port, said=said))
    if advisor is not None:
        metrics.registry.register(advisor.collector)
        worker.add_hook(advisor)


def _said(error: EngineError, args: argparse.Namespace) -> str:
    """The message of an engine error; for an unreachable Redis one sentence naming the URL and the reason."""
    if isinstance(error, RedisUnavailable) and error.__cause__ is not None:
        return unreachable(resolve_redis_url(args.redis), error.__cause__)
    return str(error)


def _advisor(args: argparse.Namespace, settings: WorkerSettings) -> Any:
    """The background advisor of ``--advise-slo`` (qsim.advise: layer 3, imported only when asked for)."""
    from qsim.advise import Advisor
    from qsim.advise.core import parse_slos

    return Advisor(settings.redis, list(settings.names), parse_slos(args.advise_slo, option="--advise-slo"),
                   every=args.advise_every, window=args.advise_window, prefix=settings.prefix, group=settings.group,
                   concurrency=settings.concurrency)


def _queue(args: argparse.Namespace, cmd: str) -> Queue | None:
    try:
        return Queue(args.queue or "_", redis=resolve_redis_url(args.redis), prefix=args.prefix,
                     redact=_redacted_fields(args), group=getattr(args, "group", None))
    except ValueError as e:
        err(cmd, str(e))
        return None


_STATE_SETS = ("wait", "delayed", "active", "completed", "dead", "waiting-children")


def _queue_names(q: Queue, prefix: str) -> list[tuple[str, str | None]]:
    """``(queue, group)`` of every queue with a state set: ``p:{q}:wait`` or, in a group, ``p:{g}:q:wait``."""
    names = set()
    head = f"{prefix}:{{"
    for key in q.client.scan_iter(match=f"{prefix}:{{*}}:*", _type="zset", count=1000):
        if key.startswith(head) and "}:" in key:
            tag, tail = key[len(head) :].split("}:", 1)
            parts = tail.split(":")
            if len(parts) == 1 and parts[0] in _STATE_SETS:
                names.add((tag, None))
            elif len(parts) == 2 and parts[1] in _STATE_SETS:
                names.add((parts[0], tag))
    return sorted(names, key=lambda n: (n[1] or "", n[0]))


def cmd_stats(args: argparse.Namespace) -> int:
    """``qsim stats``."""
    q = _queue(args, "stats")
    if q is None:
        return EXIT_BAD_INPUT
    try:
        try:
            names = [(args.queue, args.group)] if args.queue else _queue_names(q, args.prefix)
        except Exception as e:  # noqa: BLE001 - redis-py errors, wrapped below
            raise RedisUnavailable(unreachable(resolve_redis_url(args.redis), e)) from e
        out = {}
        for name, group in names:
            qq = Queue(name, redis=q.client, prefix=args.prefix, group=group)
            label = name if group is None else f"{group}/{name}"
            out[label] = {**qq.counts(), "paused": qq.is_paused(), **({"group": group} if group else {})}
    except EngineError as e:  # Redis unreachable: 2 (qsim.cli.common.exit_code)
        err("stats", _said(e, args))
        return exit_code(e)
    finally:
        q.close()
    if args.json:
        print(json.dumps({"queues": out}, indent=2))
        return EXIT_OK
    cols = ("waiting", "active", "delayed", "completed", "dead", "waiting_children")
    heads = {"waiting_children": "children"}  # flow parents waiting for their children
    width = max([5, *map(len, out)])
    print(f"{'queue':<{width}}  " + "  ".join(f"{heads.get(c, c):>9}" for c in cols) + "  paused")
    for name, c in out.items():
        print(f"{name:<{width}}  " + "  ".join(f"{c[k]:>9}" for k in cols) + f"  {'yes' if c['paused'] else 'no'}")
    if not out:
        print("(no queues)")
    return EXIT_OK


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def cmd_dlq(args: argparse.Namespace) -> int:
    """``qsim dlq list|show|retry|purge``."""
    q = _queue(args, "dlq")
    if q is None:
        return EXIT_BAD_INPUT
    try:
        if args.action == "list":
            jobs = q.dead(limit=args.limit)
            if args.json:
                print(json.dumps([j.as_dict() for j in jobs], indent=2, default=str))
            else:
                for j in jobs:
                    first = (j.error or "").splitlines()[0][:100] if j.error else ""
                    print(f"{j.id}\t{j.name}\t{_when(j.finished_at)}\tattempts={j.attempts_made}\t{first}")
                print(f"{len(jobs)} dead job(s) in queue {args.queue}", file=sys.stderr)
        elif args.action == "show":
            if len(args.ids) != 1:
                err("dlq", "show takes exactly one job id")
                return EXIT_BAD_INPUT
            job = q.get_job(args.ids[0], redact=True)
            if job.state != "dead":
                err("dlq", f"job {job.id!r} is not in the dead-letter queue of queue {args.queue!r}: it is "
                           f"{job.state} (qsim dlq show shows dead jobs)")
                return EXIT_FAILURE
            print(json.dumps(job.as_dict(), indent=2, default=str))
        elif args.action == "retry":
            if bool(args.ids) == bool(args.all_jobs):
                err("dlq", "retry takes job ids or --all")
                return EXIT_BAD_INPUT
            moved = q.retry_dead(*args.ids, all_jobs=args.all_jobs)
            missing = sorted(set(args.ids) - set(moved))
            print(f"{len(moved)} job(s) moved back to queue {args.queue}")
            if missing:
                err("dlq", f"not moved back (not in the dead-letter queue, or its hash is gone or corrupt: "
                           f"qsim dlq list says which): {', '.join(missing)}")
                return EXIT_FAILURE
        else:
            print(f"{q.purge_dead()} dead job(s) deleted from queue {args.queue}")
    except JobNotFound as e:
        err("dlq", str(e))
        return EXIT_FAILURE
    except EngineError as e:  # Redis unreachable: 2 (qsim.cli.common.exit_code)
        err("dlq", _said(e, args))
        return exit_code(e)
    finally:
        q.close()
    return EXIT_OK
