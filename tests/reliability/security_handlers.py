"""Handlers for the security tests, run by ``qsim worker security_handlers:NAME`` subprocesses."""

from __future__ import annotations

from typing import Any

from qsim.engine import Job


async def echo(job: Job) -> Any:
    """Return the payload; a job named ``fail`` raises (it goes to the DLQ)."""
    if job.name == "fail":
        raise RuntimeError(f"refused {job.id}")
    return job.data


async def leaky(job: Job) -> None:
    """A careless handler: reports a secret as progress, then puts the whole payload in its error."""
    await job.progress({"step": "charging", "token": job.data["token"]})
    raise ValueError(f"charge failed for {job.data!r} (card {job.data['card']}, key {job.data['nested']['api_key']})")
