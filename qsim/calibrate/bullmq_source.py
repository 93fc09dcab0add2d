"""Measured jobs from a BullMQ (Node.js) Redis, 4.x, 5.x and 6.x layouts (read-only).

Keys of a queue ``Q`` under prefix ``P`` (default ``bull``), as BullMQ 4.x,
5.x and 6.x write them (checked against bullmq 4.18, 5.81 and 6.7):

===================  ======  ======================================================
``P:Q:completed``    zset    finished jobs, score = ``finishedOn`` (ms)
``P:Q:failed``       zset    jobs whose attempts are spent (BullMQ's dead letters)
``P:Q:wait``         list    waiting jobs (``paused`` too, in older 5.x and 4.x)
``P:Q:prioritized``  zset    waiting jobs with a priority
``P:Q:delayed``      zset    delayed jobs (an initial delay or a retry's backoff)
``P:Q:active``       list    running jobs
``P:Q:meta``         hash    ``version`` (``bullmq:5.81.5``), ``concurrency`` (global
                             concurrency), ``max``/``duration`` (global rate limit)
``P:Q:<id>``         hash    one job
===================  ======  ======================================================

Job hash fields used: ``name`` (the job type), ``timestamp`` (added, ms,
the producer's clock), ``opts`` (JSON: ``delay``, ``attempts``, ``backoff``
``{type, delay[, jitter]}`` or a number, ``priority``, ``removeOnComplete``),
``priority``, ``processedOn`` (start of the **last** attempt, the worker's
clock), ``finishedOn``, the attempt count — 5.x and 6.x: ``atm`` (attempts that
ended) and ``ats`` (started); 4.x: ``attemptsMade`` (started) — and 5.x/6.x
``pb`` (the worker's name, when the worker was given one).

What BullMQ does not record, and what that costs the fit:

- only the last attempt's ``processedOn``: a retried job's first start (so its
  wait) and its earlier runs are unknown; services come from successful last
  attempts, waits and the low-load overhead only from one-attempt jobs;
- no per-attempt log: failed attempts are counted (``atm - 1`` for a completed
  job, all for a failed one), their run times are not; a 4.x count also
  includes attempts cut short by a stall;
- times are milliseconds from the producer's and the worker's clocks: runs
  shorter than a few ms are coarse, and clock skew between machines shifts waits;
- no worker id unless the worker was named (5.x ``pb``): then the pool is one
  worker whose concurrency is the most jobs seen running at once;
- a worker's own ``limiter`` and ``concurrency`` are not stored (only the
  queue-wide ``meta`` values); there are no per-attempt timeouts in BullMQ;
- jobs removed on completion (``removeOnComplete``) are gone: the window starts
  at the oldest job kept.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from qsim.calibrate.measured import Measured, QueueConfig, measured_jobs, parse_when
from qsim.calibrate.redis_read import (
    all_members,
    hashes,
    key_type,
    list_members,
    newest_first,
    open_client,
    redis_now,
    scan_some,
)
from qsim.engine.safety import display_url
from qsim.errors import CalibrationError

__all__ = ["read_bullmq", "job_times", "JobTimes", "FIELDS", "LAYOUT"]

FIELDS = ("name", "timestamp", "opts", "priority", "processedOn", "finishedOn", "atm", "ats", "attemptsMade",
          "pb", "delay")
#: The queue keys read and the type BullMQ gives each.
LAYOUT = {"completed": "zset", "failed": "zset", "wait": "list", "paused": "list", "active": "list",
          "prioritized": "zset", "delayed": "zset", "waiting-children": "zset", "meta": "hash"}


def _f(v: Any) -> float:
    try:
        return float(v) if v not in (None, "") else math.nan
    except (TypeError, ValueError):
        return math.nan


def _check_queue(client: Any, base: str, queue: str, prefix: str, url: str) -> dict[str, str]:
    kinds = {name: key_type(client, base + name) for name in LAYOUT}
    if all(t == "none" for t in kinds.values()) and key_type(client, base + "id") == "none":
        found = sorted({k[len(prefix) + 1:-len(":meta")] for k in scan_some(client, f"{prefix}:*:meta")})
        if found:
            hint = f" (BullMQ queues seen under {prefix!r}: {', '.join(found)})"
        elif scan_some(client, "qsim:*", limit=1):
            hint = " (this Redis holds qsim engine queues: use --from qsim)"
        else:
            hint = f" (no BullMQ queue under prefix {prefix!r})"
        raise CalibrationError(f"no BullMQ queue {queue!r} under prefix {prefix!r} at {display_url(url)}{hint}")
    for name, t in kinds.items():
        if t not in ("none", LAYOUT[name]):
            raise CalibrationError(f"{base}{name} is a {t}, not a {LAYOUT[name]}: queue {queue!r} is not in "
                                   f"BullMQ's 4.x-6.x layout")
    return kinds


def _config(meta: dict[str, str]) -> QueueConfig:
    conc = _f(meta.get("concurrency"))
    rmax, dur = _f(meta.get("max")), _f(meta.get("duration"))
    ok = math.isfinite(rmax) and rmax >= 1 and math.isfinite(dur) and dur > 0
    return QueueConfig(concurrency_limit=int(conc) if math.isfinite(conc) and conc >= 1 else None,
                       rate_max=int(rmax) if ok else None, rate_per=dur / 1000.0 if ok else None)


def _backoff(b: Any) -> tuple[str, float, float, float]:
    if isinstance(b, (int, float)) and not isinstance(b, bool):
        return "fixed", float(b) / 1000.0, math.nan, 0.0
    if isinstance(b, dict) and b.get("type") in ("fixed", "exponential"):
        return str(b["type"]), _f(b.get("delay", 0)) / 1000.0, math.nan, min(max(_f(b.get("jitter", 0)) or 0.0, 0.0), 1.0)
    return "", math.nan, math.nan, 0.0


def _keep(opts: dict[str, Any]) -> int | None:
    """The ``removeOnComplete`` count (None: keeps all; 0: keeps none)."""
    r = opts.get("removeOnComplete")
    if r is True:
        return 0
    if isinstance(r, (int, float)) and not isinstance(r, bool):
        return int(r)
    if isinstance(r, dict) and isinstance(r.get("count"), (int, float)):
        return int(r["count"])
    return None


class JobTimes(NamedTuple):
    """One BullMQ job's times (seconds since the epoch; NaN: not recorded) and attempt counts."""

    enqueued: float  # timestamp + opts.delay: when the job could first run
    started: float  # start of its first attempt: known only when it made at most one
    last_start: float  # processedOn: start of its last attempt
    finished: float  # finishedOn (NaN while unfinished)
    attempts: int  # attempts made (5.x atm, 4.x attemptsMade)
    failed_attempts: int  # -1: not recorded


def job_times(h: Mapping[str, Any], opts: Mapping[str, Any], outcome: str) -> JobTimes:
    """The times of one job hash (fields of :data:`FIELDS`, ``opts`` parsed) whose fate is ``outcome``
    (completed | dead | unfinished), as BullMQ 4.x, 5.x and 6.x record them."""
    ts = _f(h.get("timestamp"))
    delay = _f(opts.get("delay"))
    made_f = _f(h["atm"]) if h.get("atm") is not None else _f(h.get("attemptsMade"))  # 5.x+ atm; 4.x attemptsMade
    made = int(made_f) if math.isfinite(made_f) else (1 if outcome != "unfinished" else 0)
    failed = made - 1 if outcome == "completed" else made if outcome == "dead" else made if h.get("atm") else -1
    last = _f(h.get("processedOn")) / 1000.0
    return JobTimes(enqueued=(ts + (delay if math.isfinite(delay) and delay > 0 else 0.0)) / 1000.0,
                    started=last if made <= 1 else math.nan, last_start=last,
                    finished=_f(h.get("finishedOn")) / 1000.0 if outcome != "unfinished" else math.nan,
                    attempts=made, failed_attempts=failed)


def read_bullmq(url: str, queues: Sequence[str], *, prefix: str = "bull", since: Any = None,
                max_jobs: int = 200_000,
                progress: Callable[[float], None] | None = None) -> tuple[Measured, float, float | None]:
    """Read the jobs of ``queues`` from a BullMQ Redis; returns (jobs, Redis now, window start or None)."""
    if not queues:
        raise CalibrationError("name at least one --queue")
    if not prefix or any(c in prefix for c in " \t\r\n"):
        raise CalibrationError(f"--prefix must be a non-empty key prefix, got {prefix!r}")
    client = open_client(url)
    try:
        now = redis_now(client)
        lo = parse_when(since, now=now, what="--since")
        low: float | str = "-inf" if lo is None else lo * 1000.0
        refs: list[tuple[float, int, str, str]] = []  # (finish ms or -inf, queue index, id, outcome)
        configs: dict[str, QueueConfig] = {}
        versions: set[str] = set()
        start: float | None = None
        notes: list[str] = []
        bases = [f"{prefix}:{q}:" for q in queues]
        for qi, (q, base) in enumerate(zip(queues, bases)):
            kinds = _check_queue(client, base, q, prefix, url)
            meta = client.hgetall(base + "meta") or {}
            configs[q] = _config(meta)
            if meta.get("version"):
                versions.add(str(meta["version"]))
            for key, outcome in (("completed", "completed"), ("failed", "dead")):
                got = newest_first(client, base + key, low=low, limit=max_jobs)
                refs.extend((s, qi, m, outcome) for m, s in got)
                if len(got) >= max_jobs:
                    start = max(start or -math.inf, got[-1][1] / 1000.0)
            for key in ("wait", "paused", "active"):
                if kinds[key] == "list":
                    refs.extend((-math.inf, qi, m, "unfinished") for m in list_members(client, base + key, limit=max_jobs))
            for key in ("prioritized", "delayed", "waiting-children"):
                if kinds[key] == "zset":
                    refs.extend((-math.inf, qi, m, "unfinished") for m in all_members(client, base + key, limit=max_jobs))
        finished = sorted((r for r in refs if r[3] != "unfinished"), key=lambda r: -r[0])
        if len(finished) > max_jobs:
            cut = finished[max_jobs - 1][0] / 1000.0
            start = max(start or -math.inf, cut)
            notes.append(f"read the {max_jobs} most recently finished jobs (--max-jobs): the window starts at {cut:.3f}")
        finished = finished[:max_jobs]
        refs = finished + [r for r in refs if r[3] == "unfinished"][:max(0, max_jobs - len(finished))]
        if not refs:
            raise CalibrationError(f"no jobs in BullMQ queue{'s' if len(queues) > 1 else ''} "
                                   f"{', '.join(map(repr, queues))} at {display_url(url)}"
                                   + (" since the given --since" if lo is not None else ""))
        rows = list(hashes(client, [bases[qi] + jid for _, qi, jid, _ in refs], FIELDS, progress))
        sizes = {qi: client.zcard(bases[qi] + "completed") for qi in range(len(queues))}
        oldest = {qi: client.zrange(bases[qi] + "completed", 0, 0, withscores=True) for qi in range(len(queues))}
    finally:
        client.close()
    m, keeps = _measured(refs, rows, list(queues), configs, notes)
    for qi, keep in keeps.items():
        if keep is not None and keep > 0 and sizes[qi] >= keep and oldest[qi]:
            start = max(start or -math.inf, float(oldest[qi][0][1]) / 1000.0)
            notes.append(f"queue {queues[qi]!r} keeps only its last {keep} completed jobs (removeOnComplete): "
                         "the window starts at the oldest one kept")
        elif keep == 0:
            notes.append(f"queue {queues[qi]!r} removes jobs on completion (removeOnComplete): only failed and "
                         "unfinished jobs are left to measure")
    version = ", ".join(sorted(versions)) or "BullMQ (no version in meta)"
    source = f"{version} {display_url(url)} prefix {prefix!r} queue{'s' if len(queues) > 1 else ''} {', '.join(queues)}"
    return Measured(jobs=m.jobs, queues=configs, source=source, resolution=1e-3, notes=tuple(notes)), now, start


def _measured(refs: list[tuple[float, int, str, str]], rows: list[list[str | None]], queues: list[str],
              configs: dict[str, QueueConfig], notes: list[str]) -> tuple[Measured, dict[int, int | None]]:
    cols: dict[str, list[Any]] = {c: [] for c in (
        "job_id", "type", "queue", "priority", "enqueued", "started", "last_start", "finished", "outcome",
        "attempts", "failed_attempts", "max_attempts", "worker", "backoff_kind", "backoff_delay", "backoff_max",
        "backoff_jitter")}
    keeps: dict[int, int | None] = {}
    seen = without_ts = 0
    named = False
    for (_, qi, jid, outcome), row in zip(refs, rows):
        h = dict(zip(FIELDS, row))
        if all(v is None for v in row):
            continue  # removed between the set read and the hash read
        seen += 1
        ts = _f(h["timestamp"])
        if not math.isfinite(ts):
            without_ts += 1
            continue
        try:
            opts = json.loads(h["opts"] or "{}")
            opts = opts if isinstance(opts, dict) else {}
        except ValueError:
            opts = {}
        keeps.setdefault(qi, _keep(opts))
        t = job_times(h, opts, outcome)
        made, failed, last = t.attempts, t.failed_attempts, t.last_start
        prio = _f(h["priority"])
        kind, bdelay, bmax, jitter = _backoff(opts.get("backoff"))
        allowed = _f(opts.get("attempts"))
        named = named or bool(h["pb"])
        values = (f"{queues[qi]}:{jid}" if len(queues) > 1 else jid, h["name"] or "", queues[qi],
                  int(prio) if math.isfinite(prio) else int(_f(opts.get("priority")) or 0),
                  t.enqueued, t.started, last, t.finished, outcome, made, max(failed, -1),
                  int(allowed) if math.isfinite(allowed) and allowed >= 1 else 1, h["pb"] or "",
                  kind, bdelay, bmax, jitter)
        for c, v in zip(cols, values, strict=True):
            cols[c].append(v)
    if seen and without_ts > seen / 2:
        raise CalibrationError(f"{without_ts} of {seen} job hashes have no 'timestamp' field: queue "
                               f"{', '.join(queues)} is not in BullMQ's 4.x-6.x layout")
    notes.append("BullMQ records only the last attempt's start (processedOn): retried jobs give no wait and no "
                 "earlier run times")
    if not named:
        notes.append("no worker names (pb) recorded: one pool of one worker whose concurrency is the most jobs "
                     "seen running at once")
    return Measured(jobs=measured_jobs(cols), queues=configs, resolution=1e-3), keeps
