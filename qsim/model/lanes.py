"""Lanes: the waiting lines of a run, and their gates. A keyed rate limit splits its queue into lanes.

Most queues are one lane: one waiting line (by priority, FIFO within a
level) under the queue's gates (:mod:`qsim.model.limits`). A queue with a
**keyed** rate limit (``queues[].rate_limit.key = "tenant"``) keeps one
sliding window per value of that payload field. The engine reads the value
when a job is added (``rate_key_value``: text, ``""`` when the payload has no
such field) and serves one lane per value (``lua/fetch.lua``, keys in
:mod:`qsim.engine.keys`): a fetch takes the best job of the first lane whose
window has room, by the queue's own order. The model's jobs carry their
type's ``jobs[].data``, so the value is fixed per job type, and the model
splits such a queue into the same lanes, one per value among its job types:

- each lane has its own waiting line and its own :class:`~qsim.model.limits.RateLimit`;
- the queue's ``concurrency_limit`` is one :class:`~qsim.model.limits.ConcurrencyLimit`
  shared by its lanes (a start in one lane can close them all);
- a pool serves every lane of the queues it serves; its policy picks a
  *queue* as before, then the lane whose head comes first in the queue's own
  order (priority, then FIFO; with aging, effective priority) among those
  open and not empty — the engine's rule: one lane's backlog, whatever its
  size, never delays another lane that has room.

Lane ``i`` is queue ``i`` when no queue is keyed (the common case costs
nothing). With aging, the engine compares the best jobs of the first 32 open
lanes (by their wait score) and the model every open lane's head: the same
unless more than 32 lanes are open at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from qsim.spec.scenario import Scenario

__all__ = ["Lanes", "key_text"]


def key_text(data: object, field: str) -> str:
    """The key value a job with payload fields ``data`` has under the engine's rule (``""`` when absent)."""
    from qsim.engine.protocol import rate_key_value  # the engine's own rule, one place for it

    return rate_key_value(dict(data) if isinstance(data, dict) else {}, field)


@dataclass(frozen=True)
class Lanes:
    """The lanes of a scenario: which queue each belongs to and which lane each job type joins."""

    queue: tuple[int, ...]  # lane -> queue index
    key: tuple[str, ...]  # lane -> its key value ("" for an unkeyed queue)
    of_queue: tuple[tuple[int, ...], ...]  # queue -> its lanes, in order
    of_type: tuple[int, ...]  # job type -> its lane

    @classmethod
    def of(cls, scenario: Scenario) -> Lanes:
        """One lane per queue, and per key value in a queue with a keyed rate limit."""
        qindex = {q.name: i for i, q in enumerate(scenario.queues)}
        queue: list[int] = []
        key: list[str] = []
        of_queue: list[tuple[int, ...]] = []
        of_type = [0] * len(scenario.jobs)
        for i, spec in enumerate(scenario.queues):
            field = spec.rate_limit.key if spec.rate_limit is not None else None
            types = [k for k, j in enumerate(scenario.jobs) if qindex[j.queue] == i]
            values = [key_text(scenario.jobs[k].data or {}, field) if field else "" for k in types]
            mine: list[int] = []
            for value in dict.fromkeys(values or [""]):
                mine.append(len(queue))
                queue.append(i)
                key.append(value)
            of_queue.append(tuple(mine))
            for k, value in zip(types, values):
                of_type[k] = mine[list(dict.fromkeys(values)).index(value)]
        return cls(tuple(queue), tuple(key), tuple(of_queue), tuple(of_type))

    @property
    def keyed(self) -> bool:
        """Whether some queue has more than one lane."""
        return len(self.queue) > len(self.of_queue)

    def family(self) -> list[tuple[int, ...]]:
        """Per lane: the lanes of its queue (itself included)."""
        return [self.of_queue[q] for q in self.queue]

    def served(self, queues: Sequence[int]) -> list[tuple[int, ...]]:
        """The lanes of each of ``queues`` (queue indexes), in order."""
        return [self.of_queue[q] for q in queues]
