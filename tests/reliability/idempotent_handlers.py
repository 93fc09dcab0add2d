"""The idempotent-handler example of docs/explanation/reliability.md (run by tests/reliability/test_idempotency.py).

Delivery is at-least-once: a job whose worker dies after the handler's side
effect but before the acknowledgement runs again. ``charge_naive`` applies
its effect twice then; ``charge`` applies it once, because the effect and an
"already done" marker keyed by the job id are written in one atomic step.
"""

from __future__ import annotations

import os
from typing import Any

import redis.asyncio

from qsim.engine import Job

_r: Any = None


def _redis() -> Any:
    global _r
    if _r is None:
        _r = redis.asyncio.Redis.from_url(os.environ["LEDGER_REDIS_URL"], decode_responses=True)
    return _r


# The effect and its "done" marker in one atomic step: a second run of the same job finds the
# marker and changes nothing. KEYS[1] done-set, KEYS[2] balance hash; ARGV: job id, account, amount.
_APPLY_ONCE = """
if redis.call('SADD', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[2], ARGV[2], ARGV[3])
return 1
"""


async def charge(job: Job) -> dict[str, Any]:
    """Idempotent: charges ``amount`` to ``account`` once per job id, however often the job runs."""
    r = _redis()
    applied = await r.eval(_APPLY_ONCE, 2, "ledger:charged", "ledger:balance", job.id, job.data["account"],
                           job.data["amount"])
    await _crash_once_after_the_effect(r, job)
    return {"applied": bool(applied)}


async def charge_naive(job: Job) -> dict[str, Any]:
    """Not idempotent: a second run charges again."""
    r = _redis()
    await r.hincrby("ledger:balance", job.data["account"], job.data["amount"])
    await _crash_once_after_the_effect(r, job)
    return {"applied": True}


async def _crash_once_after_the_effect(r: Any, job: Job) -> None:
    # the worst moment to die: the effect is done, the completion is not yet acknowledged
    if job.data.get("crash") and await r.set(f"ledger:crashed:{job.id}", 1, nx=True):
        os._exit(1)
