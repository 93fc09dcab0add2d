"""The worker's outbox: results of attempts waiting to be sent to Redis.

The executor (:mod:`qsim.engine.executor`) puts completions, failures and
hand-backs here, and the jobs that started after their fetch marked them held
(a notice, sent with the queue's next completions, clears the mark: a job that
started counts a stall if its worker dies); the pipeline
(:mod:`qsim.engine.pipeline`) takes them in batches and sends each batch in one
round trip. The jobs in the outbox still hold their
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
        """Whether results wait to be sent (start notices alone do not: they ride with completions)."""
        return bool(self.acks or self.fails or self.releases)

    def take(self, n: int) -> tuple[list[Ack], list[Failure], list[Release]]:
        """Up to ``n`` completions and ``n`` failures, and every hand-back, taken out in order."""
        acks, self.acks = self.acks[:n], self.acks[n:]
        fails, self.fails = self.fails[:n], self.fails[n:]
        rels, self.releases = self.releases, []
        return acks, fails, rels

    def put_back(self, acks: list[Ack], fails: list[Failure], rels: list[Release], started: list[Job]) -> None:
        """Return what a batch took (it could not be sent), ahead of the rest."""
        self.acks[:0], self.fails[:0], self.releases[:0], self.started[:0] = acks, fails, rels, started

    def held(self) -> list[Job]:
        """The jobs whose result waits here (their lock is still this worker's)."""
        return [a[0] for a in self.acks] + [f[0] for f in self.fails]

    def __len__(self) -> int:
        return len(self.acks) + len(self.fails) + len(self.releases) + len(self.started)
