"""How much a run holds in memory, checked against this machine before the run starts.

A scenario's size is not capped by a constant: a run of a billion jobs is fine
on a machine that can hold it. What is refused is a run that cannot fit, judged
from what it would draw and keep, at least:

- every job it draws (arriving jobs and the children they plan) costs
  :data:`BYTES_PER_JOB` bytes for its arrival time, type and first service time;
- every window of its Summary costs :func:`bytes_per_window` bytes (a dict of
  :data:`~qsim.results.windows.WINDOW_FIELDS` and the columns it is built from).

When that lower bound is more than the machine's physical memory the run could
only end in a ``MemoryError`` (or a swap storm), so it is a
:class:`~qsim.errors.ScenarioError` (exit 2) naming the key, before anything
is drawn. ``qsim`` calls :func:`check_run_size` when a scenario is loaded for a
run; :func:`qsim.spec.workload.draw_jobs` calls it too, so every runner (the model,
the engine harness, the load test) is covered.
"""

from __future__ import annotations

import functools
import math
import os
import sys

from qsim.errors import ScenarioError
from qsim.results.windows import WINDOW_FIELDS
from qsim.spec.scenario import Scenario

__all__ = ["BYTES_PER_JOB", "bytes_per_window", "machine_memory", "expected_jobs", "check_run_size"]

#: float64 arrival time + int64 type + float64 first service time: the least a drawn job costs.
BYTES_PER_JOB = 24


@functools.cache
def bytes_per_window() -> int:
    """The least one Summary window costs: its dict of figures (as Python holds it) and a float64 column each."""
    window = dict.fromkeys(WINDOW_FIELDS, 0.5)
    return sys.getsizeof(window) + len(WINDOW_FIELDS) * (sys.getsizeof(0.5) + 8)


def machine_memory() -> int | None:
    """This machine's physical memory in bytes (None where the system does not say)."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return None
    return pages * size if pages > 0 and size > 0 else None


def _children(scenario: Scenario, name: str, seen: frozenset[str] = frozenset()) -> float:
    """How many jobs one job of type ``name`` plans below it (children, their children, ...)."""
    if name in seen:
        return math.inf
    job = scenario.job(name)
    kids = list(job.flow.children) if job.flow else [job.fan_out.job] * job.fan_out.count if job.fan_out else []
    return sum(1.0 + _children(scenario, kid, seen | {name}) for kid in kids)


def expected_jobs(scenario: Scenario) -> dict[int, float]:
    """Per job type index with an arrival: the jobs a run draws for it (arrivals and their planned children)."""
    return {i: job.arrival.expected_count(scenario.duration) * (1.0 + _children(scenario, job.name))
            for i, job in enumerate(scenario.jobs) if job.arrival is not None}


def _size(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    raise AssertionError  # pragma: no cover


def check_run_size(scenario: Scenario, *, window_option: str | None = None, memory: int | None = None) -> None:
    """Refuse a run whose draws or windows cannot fit in memory (see the module docstring).

    Args:
        window_option: How the window length was given when not by the scenario's ``window`` (``"--window"``).
        memory: The memory to judge against (default: :func:`machine_memory`).

    Raises:
        ScenarioError: one sentence naming the job type's arrival or the window.
    """
    memory = machine_memory() if memory is None else memory
    if memory is None:
        return
    label = str(scenario.source) if scenario.source else scenario.name
    jobs = expected_jobs(scenario)
    total = sum(jobs.values())
    if total * BYTES_PER_JOB > memory:
        i = max(jobs, key=lambda k: jobs[k])
        job = scenario.jobs[i]
        assert job.arrival is not None
        kids = jobs[i] / max(job.arrival.expected_count(scenario.duration), 1e-300) - 1
        planned = f" and the {kids:.3g} children each plans" if kids >= 1 else ""
        raise ScenarioError(
            f"{label}: jobs[{i}].arrival: {job.arrival.rate:.3g} jobs/s for {scenario.duration:g} s{planned} is "
            f"about {jobs[i]:.3g} jobs, which need at least {_size(jobs[i] * BYTES_PER_JOB)} of memory "
            f"({BYTES_PER_JOB} bytes a job), more than this machine's {_size(memory)}: lower the rate or the duration")
    run = scenario.duration - scenario.warmup
    windows = run / scenario.window_length
    if windows * bytes_per_window() > memory:
        what = f"{window_option} {scenario.window_length:g}" if window_option else \
            f"{label}: window = {scenario.window_length:g}"
        raise ScenarioError(
            f"{what}: windows of {scenario.window_length:g} s over the measured run of {run:g} s are "
            f"{windows:.3g} windows, which need at least {_size(windows * bytes_per_window())} of memory "
            f"({bytes_per_window()} bytes a window), more than this machine's {_size(memory)}: use a longer window")
