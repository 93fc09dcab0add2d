"""Dispatch: which free slot takes which waiting job, and when.

A pool has ``workers`` processes of ``concurrency`` slots each. Its free slots
wait in a FIFO (the slot idle longest takes the next job, as Redis serves the
longest-blocked fetch first); at the start they are ordered so that jobs spread
over the workers (slot 0 of every worker, then slot 1, ...).

Dispatch is greedy and instantaneous: whenever something changes (a job is
enqueued, a slot frees, a queue reopens) every free slot that can start a job
starts one at the same simulated time, so at rest no pool has both a free slot
and a startable job. When a pool has a free slot, its policy picks the queue:

- ``priority``: the best head over all its open, non-empty queues (lowest
  priority number, then earliest enqueued);
- ``ordered``: the first listed open, non-empty queue;
- ``wrr``: smooth weighted round-robin (nginx's algorithm) over the open,
  non-empty queues: each adds its weight to its current value, the largest
  wins and gives back the total. One state per pool (the engine keeps one per
  process; the long-run shares are the same).

When several pools could take a job, the one whose head slot has been idle
longest fills first. A queue with a keyed rate limit is several lanes
(:mod:`qsim.model.lanes`): the policy picks the queue, then the lane whose
head comes first in the queue's order.

Priority aging (``queues[].aging = a`` seconds per level, the engine's rule
in :mod:`qsim.engine.limiter`): a waiting job's effective priority is
``priority - (now - ready) / a`` (``ready``: when it was enqueued first; a
retried or put-back job keeps it). ``now`` is common to all jobs of a queue,
so their order never changes while they wait: the model keys an aging
queue's heap by ``priority + ready / a`` (then FIFO) and the head is always
the job of lowest effective priority. The ``priority`` policy compares the
heads of a pool's queues by effective priority at the pick (key ``- now /
a``; a queue without aging: its priority). The engine compares only the
oldest job of each of the 32 best levels; the model takes the best of all
(the same job unless a retried job sits behind newer ones of its level, or
more than 32 levels wait).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from heapq import heappop

from qsim.model.queues import Queues
from qsim.spec.scenario import PoolSpec

__all__ = ["Pool", "Dispatcher", "make_picker"]

#: ``pick(now)``: the queue a free slot of the pool takes from next at time ``now``, or -1 for none.
Picker = Callable[[float], int]


def make_picker(policy: str, queues: Sequence[int], weights: Sequence[float], q: Queues,
                lanes: Sequence[Sequence[int]] | None = None) -> Picker:
    """The pool's :data:`Picker` for ``policy`` over its ``queues`` (``weights``: for ``wrr``).

    ``lanes``: per served queue, its lanes (heap indexes; see :mod:`qsim.model.lanes`); None when
    each queue is one lane, its own index. The picker returns a lane.
    """
    if policy not in ("priority", "ordered", "wrr"):
        raise ValueError(f"policy must be one of priority, ordered, wrr, got {policy!r}")
    groups = [tuple(g) for g in lanes] if lanes is not None else [(i,) for i in queues]
    if all(len(g) == 1 for g in groups):
        return _plain_picker(policy, [g[0] for g in groups], weights, q)
    if policy == "priority":  # the best head over every lane of every queue: the same order as one heap
        return _best_head([lane for g in groups for lane in g], q)
    bests = [_best_head(g, q) for g in groups]
    if policy == "ordered":
        def pick_ordered_lanes(now: float) -> int:
            for best in bests:
                lane = best(now)
                if lane >= 0:
                    return lane
            return -1
        return pick_ordered_lanes
    w = [float(x) for x in weights]
    current = [0.0] * len(groups)

    def pick_wrr_lanes(now: float) -> int:  # smooth WRR over the queues, then the best lane of the winner
        total, best, lane = 0.0, -1, -1
        for k, pick in enumerate(bests):
            got = pick(now)
            if got >= 0:
                current[k] += w[k]
                total += w[k]
                if best < 0 or current[k] > current[best]:
                    best, lane = k, got
        if best < 0:
            return -1
        current[best] -= total
        return lane
    return pick_wrr_lanes


def _best_head(lanes: Sequence[int], q: Queues) -> Picker:
    """The lane whose head comes first (effective priority with aging, then FIFO) among open, non-empty ones."""
    heaps, open_ = q.heaps, q.open
    ls = tuple(lanes)
    inv = {i: (1.0 / q.aging[i] if q.aging[i] > 0 else 0.0) for i in ls}

    def pick_best(now: float) -> int:
        best, head = -1, (0.0, 0)
        for i in ls:
            h = heaps[i]
            if h and open_[i]:
                key = (h[0][0] - now * inv[i], h[0][1])
                if best < 0 or key < head:
                    best, head = i, key
        return best
    return pick_best


def _plain_picker(policy: str, queues: Sequence[int], weights: Sequence[float], q: Queues) -> Picker:
    heaps, open_ = q.heaps, q.open  # mutated in place, never rebound
    qs = tuple(queues)
    if len(qs) == 1:
        only, heap = qs[0], heaps[qs[0]]

        def pick_only(now: float) -> int:
            return only if heap and open_[only] else -1
        return pick_only
    if policy == "priority" and any(q.aging[i] > 0 for i in qs):
        return _best_head(qs, q)
    if policy == "priority":
        def pick_priority(now: float) -> int:
            best, head = -1, None
            for i in qs:
                h = heaps[i]
                if h and open_[i] and (head is None or h[0] < head):
                    best, head = i, h[0]
            return best
        return pick_priority
    if policy == "ordered":
        def pick_ordered(now: float) -> int:
            for i in qs:
                if heaps[i] and open_[i]:
                    return i
            return -1
        return pick_ordered
    w = [float(x) for x in weights]
    current = [0.0] * len(qs)
    pairs = tuple(enumerate(qs))

    def pick_wrr(now: float) -> int:
        total, best = 0.0, -1
        for k, i in pairs:
            if heaps[i] and open_[i]:
                current[k] += w[k]
                total += w[k]
                if best < 0 or current[k] > current[best]:
                    best = k
        if best < 0:
            return -1
        current[best] -= total
        return qs[best]
    return pick_wrr


class Pool:
    """One pool's slots and policy during a run (``queues``: the lanes it serves)."""

    def __init__(self, index: int, spec: PoolSpec, queues: Sequence[int], first_slot: int,
                 first_worker: int, picker: Picker) -> None:
        self.index = index
        self.spec = spec
        self.queues = tuple(queues)
        self.workers = list(range(first_worker, first_worker + spec.workers))
        # slot s of worker w has id first_slot + w * concurrency + s
        self.slots = list(range(first_slot, first_slot + spec.slots))
        self.free: deque[int] = deque(
            first_slot + w * spec.concurrency + s for s in range(spec.concurrency) for w in range(spec.workers))
        self.pick = picker
        self.only = self.queues[0] if len(self.queues) == 1 else -1  # the pool's one lane, or -1

    def slot_worker(self, slot: int) -> int:
        """The worker (global index) a slot belongs to."""
        return self.workers[0] + (slot - self.slots[0]) // self.spec.concurrency


class Dispatcher:
    """Matches free slots with waiting jobs; ``start(job, queue, slot, now)`` runs a match."""

    def __init__(self, pools: Sequence[Pool], queues: Queues, n_slots: int,
                 start: Callable[[int, int, int, float], None]) -> None:
        self.pools = list(pools)
        self.queues = queues
        self.start = start
        self.pools_of: list[list[Pool]] = [[] for _ in queues.heaps]
        for p in self.pools:
            for q in p.queues:
                self.pools_of[q].append(p)
        self.pool_of_slot: list[Pool] = [self.pools[0]] * n_slots if self.pools else []
        for p in self.pools:
            for s in p.slots:
                self.pool_of_slot[s] = p
        self.idle_since = [0.0] * n_slots

    def fill(self, pool: Pool, now: float) -> None:
        """Start jobs on the pool's free slots while its policy finds one."""
        free, pick, heaps, start = pool.free, pool.pick, self.queues.heaps, self.start
        while free:
            q = pick(now)
            if q < 0:
                return
            start(heappop(heaps[q])[2], q, free.popleft(), now)

    def offer(self, q: int, now: float) -> None:
        """Queue ``q`` may have a startable job: let the pools that serve it and have a free slot take it."""
        pools = self.pools_of[q]
        if len(pools) == 1:
            if pools[0].free:
                self.fill(pools[0], now)
            return
        ready = [p for p in pools if p.free]
        if len(ready) > 1:
            idle = self.idle_since
            ready.sort(key=lambda p: idle[p.free[0]])
        heap, open_ = self.queues.heaps[q], self.queues.open
        for p in ready:
            if not heap or not open_[q]:  # nothing of q left to start (at rest, nothing else changed)
                return
            self.fill(p, now)
