"""The worker's outbox: results of attempts waiting to be sent to Redis.

The executor (:mod:`qsim.engine.executor`) puts completions, failures and
hand-backs here, and the jobs that started after their fetch marked them held
(the notice clears the mark: a job that started counts a stall if its worker
dies); the pipeline (:mod:`qsim.engine.pipeline`) takes them in batches and
sends each batch in one round trip. The jobs in the outbox still hold their
lock (their renewal goes on until the batch is acknowledged).
"""

from __future__ import annotations

import asyncio
from typing import Any

from qsim.engine.job import Job

__all__ = ["Outbox", "Ack", "Failure", "Release"]

#: A completed attempt: the job, its return value as JSON, the return value itself.
Ack = tuple[Job, str, Any]
#: A failed attempt: the job, the error text, the traceback, the retry delay in ms (-1: no retry), the exception.
Failure = tuple[Job, str, str, int, BaseException]
#: A job handed back to its queue: the job, whether its handler was started (False: no attempt counts).
Release = tuple[Job, bool]


class Outbox:
    """Completions, failures and hand-backs not yet sent; ``wake`` is set when there is news."""

    __slots__ = ("acks", "fails", "releases", "started", "wake")

    def __init__(self) -> None:
        self.acks: list[Ack] = []
        self.fails: list[Failure] = []
        self.releases: list[Release] = []
        #: Jobs marked held by their fetch whose handler started (notices for Redis).
        self.started: list[Job] = []
        self.wake = asyncio.Event()

    @property
    def pending(self) -> bool:
        """Whether anything waits to be sent."""
        return bool(self.acks or self.fails or self.releases or self.started)

    def take(self, n: int) -> tuple[list[Ack], list[Failure], list[Release], list[Job]]:
        """Up to ``n`` completions and ``n`` failures, and every hand-back and start notice, taken out in order."""
        acks, self.acks = self.acks[:n], self.acks[n:]
        fails, self.fails = self.fails[:n], self.fails[n:]
        rels, self.releases = self.releases, []
        started, self.started = self.started, []
        return acks, fails, rels, started

    def put_back(self, acks: list[Ack], fails: list[Failure], rels: list[Release], started: list[Job]) -> None:
        """Return what :meth:`take` gave (a batch that could not be sent), ahead of the rest."""
        self.acks[:0], self.fails[:0], self.releases[:0], self.started[:0] = acks, fails, rels, started

    def held(self) -> list[Job]:
        """The jobs whose result waits here (their lock is still this worker's)."""
        return [a[0] for a in self.acks] + [f[0] for f in self.fails]

    def __len__(self) -> int:
        return len(self.acks) + len(self.fails) + len(self.releases) + len(self.started)
