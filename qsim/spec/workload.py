"""The workload of a run: every job drawn once from a Scenario and a seed.

``Scenario -> Workload -> runner``: the model (:mod:`qsim.model`), the engine
harness (:mod:`qsim.harness.plan`) and through it the load test
(:mod:`qsim.loadtest`) all run the one :class:`Workload` drawn here, so with
the same seed they run the very same jobs, attempts and failures::

    w = draw_workload(scenario, seed=7)
    w.arrivals.time, w.arrivals.type, w.arrivals.service   # every arriving job
    w.attempts.own[k].service[row, n]                       # attempt n + 1 of a job (drawn on first use)

Randomness comes in independent streams, one per (job type, purpose), keyed by
the job type's *name* (not its position), so adding, removing or reordering a
job type never changes the draws of the others::

    rng = stream(seed, "cut", "arrival")   # numpy Generator, the same for the same seed

Arrivals (:func:`draw_jobs`): each type's arrival times in ``[0, duration)``
from its ``"arrival"`` stream and, in one vectorised call, the service time of
each of its jobs' first attempts from its ``"service"`` stream (the k-th job of
a type always gets the k-th sample). The types are merged in time order (ties:
the type listed first), and ``max_jobs`` keeps the earliest ``max_jobs``. A run
that could not fit in this machine's memory is refused before anything is
drawn (:func:`qsim.spec.run_size.check_run_size`).

Attempts (:func:`plan_attempts`), per job type over its ``n`` jobs in arrival
order (vectorised, in this order)::

    first   = the "service" sample above (the first attempt)
    failure = stream(seed, name, "failure")
    poison  = failure.random(n) < poison_prob            # every attempt fails
    fails   = failure.random((n, attempts)) < fail_prob  # attempt k fails
    retry   = service.sample(stream(seed, name, "retry_service"), n * (attempts - 1))

so ``service[i, k]`` is the service time of attempt ``k + 1`` of job ``i``
(``k = 0``: the first). An attempt that stalls or is cut off at shutdown does
not use up an attempt (as in the engine): the re-run uses the same column.

Children (fan-out and flow) draw from the streams of the name
``f"{type}/child"``, the same way (their first attempts from that name's
``"service"`` stream), in creation order: the children planned for the
arriving jobs in arrival order; for a flow parent one child of each child
type (in the listed order), for a fan-out parent ``count`` children. A
fan-out child is planned when its parent arrives, although the parent adds it
only when it completes, so its draws never depend on the order of events.

Later mechanisms take their own purposes from :data:`PURPOSES` (append, never
reorder): a run's backoff jitter, for one, is drawn as the run goes from the
``"backoff"`` stream, and an autoscaled pool's cold starts from its own
``"start_delay"`` stream (keyed by the pool's name, :class:`StartDelays`).
"""

from __future__ import annotations

import functools
import numbers
import zlib
from dataclasses import dataclass

import numpy as np

from qsim.spec.run_size import check_run_size
from qsim.spec.scenario import AutoscalerSpec, JobType, Scenario

__all__ = ["PURPOSES", "stream", "JobDraws", "draw_jobs", "Attempts", "draw_attempts", "child_types", "JobPlan",
           "plan_attempts", "Workload", "draw_workload", "check_seed", "StartDelays"]

#: Stream purposes; a stream is keyed by (job type name, purpose index).
PURPOSES = ("arrival", "service", "failure", "backoff", "retry_service", "start_delay")


def stream(seed: int, job_name: str, purpose: str) -> np.random.Generator:
    """The random stream of one job type for one purpose (see :data:`PURPOSES`)."""
    if purpose not in PURPOSES:
        raise ValueError(f"purpose must be one of {PURPOSES}, got {purpose!r}")
    key = (zlib.crc32(job_name.encode("utf-8")), PURPOSES.index(purpose))
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=key))


class StartDelays:
    """The cold starts of an autoscaled pool's new processes, in the order they are created.

    Drawn from the pool's own ``"start_delay"`` stream (keyed by the pool's
    name), so the model and the engine harness give the k-th process they
    start the same cold start.
    """

    def __init__(self, spec: AutoscalerSpec, seed: int) -> None:
        self.dist = spec.start_delay
        self.rng = stream(seed, spec.pool, "start_delay")
        self.drawn: list[float] = []
        self.used = 0

    def take(self, count: int) -> list[float]:
        """The next ``count`` cold starts (seconds)."""
        while len(self.drawn) < self.used + count:
            self.drawn.extend(float(x) for x in self.dist.sample(self.rng, 64))
        out = self.drawn[self.used:self.used + count]
        self.used += count
        return out


def check_seed(seed: object) -> int:
    """``seed`` as an int; ValueError unless it is an integer >= 0."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or int(seed) < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    return int(seed)


# --------------------------------------------------------------------------- arrivals


@dataclass(frozen=True)
class JobDraws:
    """The arriving jobs of one run, in arrival order (parallel arrays)."""

    time: np.ndarray  # float64, sorted arrival times in [0, duration)
    type: np.ndarray  # int64, index into scenario.jobs
    service: np.ndarray  # float64, service time of the first attempt

    def __len__(self) -> int:
        return int(self.time.size)


def draw_jobs(scenario: Scenario, *, seed: int | None = None, max_jobs: int | None = None) -> JobDraws:
    """Draw every arriving job of a run: arrival times, types and first-attempt service times."""
    seed = scenario.seed if seed is None else seed
    if max_jobs is not None and max_jobs < 0:
        raise ValueError(f"max_jobs must be >= 0, got {max_jobs}")
    check_run_size(scenario)
    times, types, services = [], [], []
    for k, job in enumerate(scenario.jobs):
        if job.arrival is None:
            continue
        t = np.asarray(job.arrival.times(stream(seed, job.name, "arrival"), scenario.duration), dtype=float)
        times.append(t)
        types.append(np.full(t.size, k, dtype=np.int64))
        services.append(np.asarray(job.service.sample(stream(seed, job.name, "service"), t.size), dtype=float))
    if not times:
        empty = np.zeros(0)
        return JobDraws(empty, np.zeros(0, dtype=np.int64), empty)
    if len(times) == 1 and bool(np.all(times[0][1:] >= times[0][:-1])):  # one type, in order: no merge
        end = None if max_jobs is None else max_jobs
        return JobDraws(time=times[0][:end], type=types[0][:end], service=services[0][:end])
    t, kinds, s = np.concatenate(times), np.concatenate(types), np.concatenate(services)
    order = np.lexsort((kinds, t))  # by time, then by type index; stable within a type
    if max_jobs is not None:
        order = order[:max_jobs]
    return JobDraws(time=t[order], type=kinds[order], service=s[order])


# --------------------------------------------------------------------------- attempts


@dataclass(frozen=True)
class Attempts:
    """Per-attempt draws of ``n`` jobs of one type (row ``i``: the type's ``i``-th job)."""

    poison: np.ndarray  # bool (n,)
    fails: np.ndarray  # bool (n, attempts): attempt k + 1 fails (transient)
    service: np.ndarray  # float (n, attempts): attempt k + 1's service time

    def __len__(self) -> int:
        return int(self.poison.size)

    def failed(self, row: int, k: int) -> bool:
        """Whether attempt ``k + 1`` of job ``row`` fails."""
        return bool(self.poison[row] or self.fails[row, k])


def draw_attempts(job: JobType, name: str, seed: int, n: int, first: np.ndarray | None = None) -> Attempts:
    """The draws of ``n`` jobs of type ``job`` from the streams of ``name`` (see the module docstring).

    ``first``: the first attempts' service times when already drawn (arrivals:
    :func:`draw_jobs`); else drawn from ``name``'s ``"service"`` stream.
    """
    a = job.attempts
    s0 = np.asarray(first, dtype=float) if first is not None else np.asarray(
        job.service.sample(stream(seed, name, "service"), n), dtype=float)
    failure = stream(seed, name, "failure")
    poison = failure.random(n) < job.poison_prob
    fails = failure.random((n, a)) < job.fail_prob
    retry = np.asarray(job.service.sample(stream(seed, name, "retry_service"), n * (a - 1)),
                       dtype=float).reshape(n, a - 1)
    return Attempts(poison=poison, fails=fails, service=np.concatenate([s0.reshape(n, 1), retry], axis=1))


def child_types(scenario: Scenario, k: int) -> list[int]:
    """The types of the children a job of type ``k`` plans (flow first: a flow type does no fan-out)."""
    job = scenario.jobs[k]
    index = {j.name: i for i, j in enumerate(scenario.jobs)}
    if job.flow is not None:
        return [index[c] for c in job.flow.children]
    if job.fan_out is not None:
        return [index[job.fan_out.job]] * job.fan_out.count
    return []


@dataclass(frozen=True)
class JobPlan:
    """Every attempt draw of one run's arriving jobs and their planned children.

    ``own[k]``: the draws of type ``k``'s arriving jobs (None: none arrive);
    job ``i`` is row ``rank[i]`` of ``own[type[i]]``. ``child[k]``: the draws of
    type ``k``'s children (None: none planned). ``kids[i]``: the children job
    ``i`` plans, as (type, row of ``child[type]``), in creation order.
    """

    own: list[Attempts | None]
    rank: np.ndarray
    child: list[Attempts | None]
    kids: dict[int, list[tuple[int, int]]]


def plan_attempts(scenario: Scenario, draws: JobDraws, seed: int) -> JobPlan:
    """The attempt draws of the jobs ``draws`` (see :class:`JobPlan`)."""
    types = np.asarray(draws.type, dtype=np.int64)
    nt = len(scenario.jobs)
    own: list[Attempts | None] = [None] * nt
    rank = np.zeros(types.size, dtype=np.int64)
    for k, job in enumerate(scenario.jobs):
        mine = np.flatnonzero(types == k)
        if mine.size:
            rank[mine] = np.arange(mine.size)
            own[k] = draw_attempts(job, job.name, seed, int(mine.size), np.asarray(draws.service)[mine])
    plans = [child_types(scenario, k) for k in range(nt)]
    kids: dict[int, list[tuple[int, int]]] = {}
    seq = [0] * nt
    if any(plans):
        for i in np.flatnonzero(np.isin(types, [k for k in range(nt) if plans[k]])).tolist():
            mine_kids = []
            for c in plans[int(types[i])]:
                mine_kids.append((c, seq[c]))
                seq[c] += 1
            kids[i] = mine_kids
    child: list[Attempts | None] = [
        draw_attempts(job, f"{job.name}/child", seed, seq[c]) if seq[c] else None
        for c, job in enumerate(scenario.jobs)]
    return JobPlan(own=own, rank=rank, child=child, kids=kids)


# --------------------------------------------------------------------------- the workload


@dataclass(frozen=True)
class Workload:
    """Every job of one run of ``scenario`` with ``seed``: what each runner plays.

    ``arrivals`` are drawn at once; ``attempts`` (every attempt's service time
    and failure flag, the children) on first use — a run whose jobs all succeed
    at the first attempt never needs them — and then kept. Either way they are
    the same draws for the same seed. Tests and notebooks may build one from
    hand-made arrivals: ``Workload(scenario, seed, JobDraws(time=..., type=..., service=...))``.
    """

    scenario: Scenario
    seed: int
    arrivals: JobDraws

    def __len__(self) -> int:
        return len(self.arrivals)

    @functools.cached_property
    def attempts(self) -> JobPlan:
        """Every attempt's draws, and the children each job plans (see :class:`JobPlan`)."""
        return plan_attempts(self.scenario, self.arrivals, self.seed)


def draw_workload(scenario: Scenario, *, seed: int | None = None, max_jobs: int | None = None) -> Workload:
    """The workload of one run (``seed`` overrides ``scenario.seed``; ``max_jobs`` keeps the earliest arrivals).

    Raises:
        ValueError: ``seed`` or ``max_jobs`` is negative (or ``seed`` not an integer).
    """
    seed = check_seed(scenario.seed if seed is None else seed)
    return Workload(scenario, seed, draw_jobs(scenario, seed=seed, max_jobs=max_jobs))
