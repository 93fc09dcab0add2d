"""Measured jobs from the qsim engine's own records in Redis (read-only).

Per queue (keys of :class:`qsim.engine.keys.QueueKeys`): the ``completed``
and ``dead`` sorted sets (score = finish time, ms) are read newest first down
to ``--since``, and the unfinished ones (``wait``, ``delayed``, ``active``,
``waiting-children``) by rank, all in batches and at most ``max_jobs`` jobs
(the most recently finished are kept). Then each job's hash (see
:mod:`qsim.engine.job`), pipelined:

- ``enqueued_at`` + ``delay`` -> when the job could first run;
- ``started_at`` (first attempt), ``attempt_started`` (last), ``finished_at``;
- ``log``: one ``start,end,outcome,worker`` entry per attempt -> the attempts
  table (completed -> ok, failed, stalled, released -> cutoff);
- ``priority``, ``max_attempts``, ``backoff`` (JSON), ``timeout``, ``worker``.

The queue's ``meta`` hash gives its limits (``concurrency_limit``,
``rate_max``/``rate_per_ms``/``rate_key``, ``aging_ms``) and its retention
(``keep_count``, else the workers' default of 10,000, and ``keep_age_ms``):
when the completed set is full to ``keep_count``, or reading stopped at
``max_jobs``, older jobs are gone and the window starts where the kept ones do.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from qsim.calibrate.measured import Measured, QueueConfig, measured_jobs, parse_when
from qsim.calibrate.redis_read import (
    all_members,
    hashes,
    key_type,
    newest_first,
    open_client,
    redis_now,
    scan_some,
)
from qsim.engine.jobinfo import attempt_log
from qsim.engine.keys import QueueKeys
from qsim.engine.queue import DEFAULT_KEEP_COMPLETED
from qsim.engine.safety import display_url
from qsim.errors import CalibrationError
from qsim.results.records import attempts_frame

__all__ = ["read_qsim", "FIELDS"]

logger = logging.getLogger(__name__)

FIELDS = ("name", "priority", "delay", "max_attempts", "backoff", "timeout", "enqueued_at", "started_at",
          "attempt_started", "finished_at", "state", "worker", "log")
_RESULT = {"completed": "ok", "failed": "failed", "timeout": "timeout", "stalled": "stalled", "released": "cutoff"}


def _f(v: str | None) -> float:
    try:
        return float(v) if v not in (None, "") else math.nan
    except ValueError:
        return math.nan


def _i(v: str | None, default: int) -> int:
    try:
        return int(float(v)) if v not in (None, "") else default
    except ValueError:
        return default


def _keys(queue: str, prefix: str, group: str | None) -> QueueKeys:
    try:
        return QueueKeys(queue, prefix=prefix, group=group)
    except ValueError as e:
        raise CalibrationError(str(e)) from None


def _check_queue(client: Any, k: QueueKeys, url: str) -> None:
    kinds = {key: key_type(client, key) for key in (k.completed, k.dead, k.wait, k.delayed, k.active, k.meta)}
    if all(t == "none" for t in kinds.values()):
        found = sorted({key[len(k.prefix) + 1:-len(":meta")].replace("{", "").replace("}", "")
                        for key in scan_some(client, f"{k.prefix}:*:meta")})
        hint = f" (queues seen under {k.prefix!r}: {', '.join(found)})" if found else \
            f" (no qsim queue under prefix {k.prefix!r}; is it a BullMQ Redis? then use --from bullmq)"
        raise CalibrationError(f"no qsim queue {k.queue!r} under prefix {k.prefix!r} at {display_url(url)}{hint}")
    for key, t in kinds.items():
        want = "hash" if key == k.meta else "zset"
        if t not in ("none", want):
            raise CalibrationError(f"{key} is a {t}, not a {want}: queue {k.queue!r} is not in the qsim "
                                   f"engine's layout (a BullMQ queue? then use --from bullmq)")


def _config(meta: dict[str, str]) -> QueueConfig:
    rate_max = _i(meta.get("rate_max"), 0) or None
    per_ms = _f(meta.get("rate_per_ms"))
    return QueueConfig(concurrency_limit=_i(meta.get("concurrency_limit"), 0) or None, rate_max=rate_max,
                       rate_per=per_ms / 1000 if rate_max and math.isfinite(per_ms) else None,
                       rate_key=meta.get("rate_key") or None, aging=max(0.0, _f(meta.get("aging_ms")) / 1000)
                       if meta.get("aging_ms") else 0.0)


def _backoff(text: str | None) -> tuple[str, float, float, float]:
    if not text:
        return "", math.nan, math.nan, 0.0
    try:
        raw = json.loads(text)
        cap = raw.get("max")
        return str(raw["kind"]), float(raw["delay"]), math.nan if cap is None else float(cap), \
            float(raw.get("jitter") or 0.0)
    except (ValueError, KeyError, TypeError):
        return "", math.nan, math.nan, 0.0


def read_qsim(url: str, queues: Sequence[str], *, prefix: str = "qsim", group: str | None = None,
              since: Any = None, max_jobs: int = 200_000,
              progress: Callable[[float], None] | None = None) -> tuple[Measured, float, float | None]:
    """Read the jobs of ``queues`` from a qsim engine Redis.

    Returns the measured jobs, the Redis clock's now, and the earliest time
    every job is known from (None: no job is missing).
    """
    if not queues:
        raise CalibrationError("name at least one --queue")
    client = open_client(url)
    try:
        now = redis_now(client)
        lo = parse_when(since, now=now, what="--since")
        low: float | str = "-inf" if lo is None else lo * 1000.0
        keysets = [_keys(q, prefix, group) for q in queues]
        for k in keysets:
            _check_queue(client, k, url)
        finished: list[tuple[float, int, str]] = []
        unfinished: list[tuple[int, str]] = []
        start: float | None = None
        configs: dict[str, QueueConfig] = {}
        notes: list[str] = []
        for qi, k in enumerate(keysets):
            meta = client.hgetall(k.meta) or {}
            configs[k.queue] = _config(meta)
            for key in (k.completed, k.dead):
                got = newest_first(client, key, low=low, limit=max_jobs)
                finished.extend((s, qi, m) for m, s in got)
                if len(got) >= max_jobs:
                    start = max(start or -math.inf, got[-1][1] / 1000.0)
            keep = _i(meta.get("keep_count"), DEFAULT_KEEP_COMPLETED)  # unset: the workers' default retention
            if keep >= 0 and client.zcard(k.completed) >= keep > 0:
                oldest = client.zrange(k.completed, 0, 0, withscores=True)
                if oldest:
                    start = max(start or -math.inf, float(oldest[0][1]) / 1000.0)
                    notes.append(f"queue {k.queue!r} keeps only its last {keep} completed jobs: the window "
                                 f"starts at the oldest one kept")
            age = _i(meta.get("keep_age_ms"), -1)
            if age > 0:
                start = max(start or -math.inf, now - age / 1000.0)
            for key in (k.wait, k.delayed, k.active, k.waiting_children):
                unfinished.extend((qi, m) for m in all_members(client, key, limit=max_jobs))
        if len(finished) > max_jobs:
            finished.sort(reverse=True)
            cut = finished[max_jobs - 1][0] / 1000.0
            finished = finished[:max_jobs]
            start = max(start or -math.inf, cut)
            notes.append(f"read the {max_jobs} most recently finished jobs (--max-jobs): the window starts at "
                         f"{cut:.3f}")
        refs = [(qi, m) for _, qi, m in finished] + unfinished[:max(0, max_jobs - len(finished))]
        if not refs:
            raise CalibrationError(f"no jobs in queue{'s' if len(queues) > 1 else ''} {', '.join(map(repr, queues))}"
                                   f" at {display_url(url)}" + (" since the given --since" if lo is not None else ""))
        rows = list(hashes(client, [keysets[qi].job(m) for qi, m in refs], FIELDS, progress))
    finally:
        client.close()
    return _measured(refs, rows, keysets, configs, url, prefix, notes), now, start


def _measured(refs: list[tuple[int, str]], rows: list[list[str | None]], keysets: list[QueueKeys],
              configs: dict[str, QueueConfig], url: str, prefix: str, notes: list[str]) -> Measured:
    cols: dict[str, list[Any]] = {c: [] for c in (
        "job_id", "type", "queue", "priority", "enqueued", "started", "last_start", "finished", "outcome",
        "attempts", "failed_attempts", "max_attempts", "worker", "backoff_kind", "backoff_delay", "backoff_max",
        "backoff_jitter", "timeout")}
    att: dict[str, list[Any]] = {c: [] for c in ("job_id", "attempt", "worker", "start", "end", "result")}
    for (qi, jid), row in zip(refs, rows):
        h = dict(zip(FIELDS, row))
        if h["name"] is None and h["enqueued_at"] is None:
            continue  # gone between the set read and the hash read
        enq = _f(h["enqueued_at"])
        if not math.isfinite(enq):
            continue
        state = h["state"] or ""
        outcome = state if state in ("completed", "dead") else "unfinished"
        log = []
        for entry in attempt_log(h).split(";"):
            parts = entry.split(",", 3)
            if len(parts) == 4:
                log.append((_f(parts[0]), _f(parts[1]), parts[2], parts[3]))
        jid_q = f"{keysets[qi].queue}:{jid}" if len(keysets) > 1 else jid
        made = [e for e in log if e[2] in ("completed", "failed", "timeout")]
        for n, (s, e, what, worker) in enumerate(log, 1):
            att["job_id"].append(jid_q)
            att["attempt"].append(n)
            att["worker"].append(worker)
            att["start"].append(s)
            att["end"].append(e)
            att["result"].append(_RESULT.get(what, "failed"))
        kind, delay, cap, jitter = _backoff(h["backoff"])
        values = (jid_q, h["name"] or "", keysets[qi].queue, _i(h["priority"], 0), enq + max(0.0, _f(h["delay"]) if
                  math.isfinite(_f(h["delay"])) else 0.0), _f(h["started_at"]), _f(h["attempt_started"]),
                  _f(h["finished_at"]) if outcome != "unfinished" else math.nan, outcome, len(made),
                  sum(e[2] != "completed" for e in made), _i(h["max_attempts"], 1), h["worker"] or "", kind, delay, cap,
                  jitter, max(0.0, _f(h["timeout"])) if math.isfinite(_f(h["timeout"])) else 0.0)
        for c, v in zip(cols, values, strict=True):
            cols[c].append(v)
    jobs = measured_jobs(cols)
    attempts = attempts_frame({k: np.asarray(v, dtype=object if k in ("job_id", "worker", "result") else None)
                               for k, v in att.items()}) if att["job_id"] else attempts_frame()
    source = f"qsim {display_url(url)} prefix {prefix!r} queue{'s' if len(keysets) > 1 else ''} " + \
        ", ".join(k.queue for k in keysets)
    return Measured(jobs=jobs, attempts=attempts, queues=configs, source=source, resolution=1e-6,
                    notes=tuple(notes), pickup_in_run=True)  # the engine's run: fetch stamp to ack stamp
