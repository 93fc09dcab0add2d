"""One worker process of a scenario pool: ``python -m qsim.harness.pool_worker``.

It runs an engine :class:`~qsim.engine.Worker` with the synthetic handler
:func:`make_synthetic`, which does what the job plan (:mod:`qsim.harness.plan`)
says: sleep the attempt's service time, then fail or succeed, and on success
add the planned fan-out children through the engine's own fan-out API
(:meth:`Job.add_children <qsim.engine.Job.add_children>`), as a user's handler
would. The harness (:mod:`qsim.harness.processes`) starts these processes,
signals them (SIGTERM, SIGKILL) and starts new ones, exactly as a deployment
would. Its flags are ``--ready-key`` and the engine's
:class:`~qsim.engine.settings.WorkerSettings` flags, the same as ``qsim worker``'s
(:class:`~qsim.harness.processes.PoolProcessSpec` writes and reads them).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from qsim.engine import Job, Worker
from qsim.engine.eventloop import run_process
from qsim.engine.hooks import ColdStart
from qsim.harness.plan import engine_options
from qsim.harness.processes import PoolProcessSpec

__all__ = ["make_synthetic", "build", "main", "PlannedFailure"]

Handler = Callable[[Job], Awaitable[dict[str, Any]]]


class PlannedFailure(Exception):
    """The failure the job plan asked for (a transient error or a poison job)."""


def make_synthetic(redis_url: str = "", prefix: str = "") -> Handler:
    """The synthetic handler: sleep the planned service time of this attempt, fail if
    planned, and on success add the planned fan-out children with ``job.add_children``
    (one round trip; ids derived from the plan, so a re-run adds none twice).

    A fan-out marked ``"wait": true`` in the payload also parks the parent with
    ``job.move_to_waiting_children()`` until its children are done (its slot is
    free meanwhile); the handler's re-run then returns at once. (The arguments
    are kept for callers of the old signature; the worker's own client is used.)
    """

    async def synthetic(job: Job) -> dict[str, Any]:
        plan = job.data
        fan = plan.get("fan")
        if fan and fan.get("wait") and (await job.children_values() or await job.children_failures()):
            return {"attempt": job.attempt, "resumed": True}  # parked until the children were done
        k = min(job.attempt, len(plan["s"])) - 1
        await asyncio.sleep(float(plan["s"][k]))
        if plan["x"][min(job.attempt, len(plan["x"])) - 1]:
            raise PlannedFailure(f"planned failure of attempt {job.attempt}")
        if fan:
            await job.add_children([(fan["queue"], fan["type"], data, engine_options(fan["options"], jid))
                                    for jid, data in fan["jobs"]])
            if fan.get("wait"):
                await job.move_to_waiting_children()
        return {"attempt": job.attempt}

    return synthetic


def build(argv: list[str] | None = None) -> tuple[Worker, PoolProcessSpec]:
    """The worker of the command line ``argv`` (:class:`PoolProcessSpec`'s), running :func:`make_synthetic`,
    with its cold start (no work before ``--take-work-at``, then its id on ``--ready-key``) as a lifecycle hook."""
    spec = PoolProcessSpec.parse(argv)
    worker = Worker(spec.settings, make_synthetic())
    worker.add_hook(ColdStart(spec.take_work_at, spec.ready_key))
    return worker, spec


def main(argv: list[str] | None = None) -> int:
    """Run one pool worker until SIGTERM (on uvloop when installed: see :mod:`qsim.engine.eventloop`);
    the exit code is the worker's."""
    worker, spec = build(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format=f"%(asctime)s {worker.id} %(levelname)s %(name)s: %(message)s")

    return run_process(worker.run())  # on uvloop when installed, unless QSIM_NO_UVLOOP=1


if __name__ == "__main__":
    sys.exit(main())
