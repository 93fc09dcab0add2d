"""A worker's side tasks: batched lock renewal, stalled-job recovery, and its start-up check of Redis.

The side tasks get the worker's :class:`~qsim.engine.context.JobContext`
(client, scripts, limits, events), never the worker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from qsim.engine.connection import display_url
from qsim.engine.context import JobContext
from qsim.engine.job import Job
from qsim.engine.keys import QueueKeys
from qsim.engine.protocol import extend_lock_call, recover_stalled_call
from qsim.engine.scripts import REDIS_ERRORS, run_calls_async

__all__ = ["renew_locks", "recover_stalled", "check_eviction_policy"]

logger = logging.getLogger(__name__)


async def renew_locks(
    ctx: JobContext, keys: QueueKeys, lock_ms: int, interval: float, held: Callable[[], list[Job]]
) -> None:
    """Every ``interval`` s, renew the locks of all ``held()`` jobs of queue ``keys`` in one script call.

    A job whose lock turns out to be lost gets ``job.lock_lost = True`` (its
    completion will be refused); a job whose key turned out to hold another
    type is lost too (the script moved it to the DLQ). Redis errors are
    logged; the loop goes on.
    """
    maxlen = ctx.limits.events_maxlen
    while True:
        await asyncio.sleep(interval)
        jobs = held()
        if not jobs:
            continue
        try:
            lost = (await run_calls_async(ctx.client, ctx.scripts, [
                extend_lock_call(keys, lock_ms, [(j.id, j.token) for j in jobs], maxlen)]))[0]
        except REDIS_ERRORS as e:
            logger.warning("could not renew %s locks: %s", len(jobs), e)
            continue
        if lost:
            by_id = {j.id: j for j in jobs}
            for jid in lost:
                if jid in by_id and not by_id[jid].lock_lost:
                    by_id[jid].lock_lost = True
                    logger.warning("job %s: lock lost while running", jid)


async def recover_stalled(ctx: JobContext, keys: QueueKeys, max_stalled: int, interval: float) -> None:
    """Now and every ``interval`` s, put back (or kill) jobs of queue ``keys`` whose lock expired.

    Each stalled one is reported as a ``stalled`` event (``ctx.emit``); a job whose handler never started
    (fetched ahead by a worker that died or froze) is put back without counting a stall.
    """
    maxlen = ctx.limits.events_maxlen
    while True:
        try:
            reply = (await run_calls_async(ctx.client, ctx.scripts, [
                recover_stalled_call(keys, maxlen, max_stalled)]))[0]
            requeued, dead = reply[0], reply[1]
            unstarted = reply[2] if len(reply) > 2 else []
            if requeued or dead:
                logger.warning("queue %s: %s stalled jobs put back, %s moved to the DLQ (max_stalled=%s)",
                               keys.queue, len(requeued), len(dead), max_stalled)
                for jid in [*requeued, *dead]:
                    ctx.emit("stalled", jid)
            if unstarted:
                logger.warning("queue %s: %s jobs fetched ahead by a worker that stopped answering put back "
                               "unstarted (no stall counted)", keys.queue, len(unstarted))
        except REDIS_ERRORS as e:
            logger.warning("stalled-job check failed: %s", e)
        await asyncio.sleep(interval)


async def check_eviction_policy(client: Any, url: str) -> None:
    """Warn when Redis may evict keys under memory pressure (jobs would vanish: run it with noeviction)."""
    try:
        info = await client.info("memory")
    except REDIS_ERRORS as e:  # e.g. an ACL user without INFO
        logger.debug("cannot read Redis's maxmemory-policy (%s); it must be noeviction", e)
        return
    nodes = [info] if "maxmemory_policy" in info else [v for v in info.values() if isinstance(v, dict)]
    policies = sorted({str(n.get("maxmemory_policy")) for n in nodes if n.get("maxmemory_policy")})
    bad = [p for p in policies if p != "noeviction"]
    if bad:
        logger.warning("Redis at %s runs with maxmemory-policy %s: under memory pressure it may evict job "
                       "keys and lose jobs. Set maxmemory-policy noeviction (writes then fail with an "
                       "error instead, and nothing is lost).", display_url(url), ", ".join(bad))
