"""What a model run returns: :class:`ModelResult`, its lazily built frames, a core run's attempts."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from qsim.errors import QsimError
from qsim.results.display import summary_html, summary_line
from qsim.results.records import Records, attempts_frame, copy_on_write, name_column
from qsim.results.summary import Summary
from qsim.spec.scenario import Scenario

__all__ = ["ModelResult", "LazyFrames", "core_attempts", "RecordsNotKept"]


def _same(frame: pd.DataFrame) -> pd.DataFrame:
    return frame


class LazyFrames(Mapping[str, pd.DataFrame]):
    """A read-only mapping of DataFrames, each built on first access (then kept).

    ``records.extra["timeseries"]`` costs nothing until someone reads it, so
    sweeps that only need the Summary don't pay for it.
    """

    def __init__(self, builders: Mapping[str, Callable[[], pd.DataFrame]]) -> None:
        self._builders = dict(builders)
        self._frames: dict[str, pd.DataFrame] = {}

    def __getitem__(self, key: str) -> pd.DataFrame:
        if key not in self._frames:
            self._frames[key] = self._builders[key]()
        return self._frames[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._builders)

    def __getstate__(self) -> dict[str, Any]:
        # pickling (e.g. results sent back from a process pool) builds every frame first
        return {"frames": {key: self[key] for key in self._builders}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._frames = dict(state["frames"])
        self._builders = {key: functools.partial(_same, frame) for key, frame in self._frames.items()}

    def __len__(self) -> int:
        return len(self._builders)


class RecordsNotKept(QsimError, RuntimeError):
    """Raised when a run's records are asked for but it ran with ``records=False``."""


@dataclass(frozen=True)
class ModelResult:
    """What one model run produced (``records`` is None when it ran with ``records=False``)."""

    scenario: Scenario
    seed: int
    records: Records | None
    summary: Summary

    def _kept(self, what: str) -> Records:
        if self.records is None:
            raise RecordsNotKept(f"result.{what} is not available: the run used records=False "
                                 "(only the Summary was kept); simulate with records=True for it")
        return self.records

    @property
    def jobs(self) -> pd.DataFrame:
        """The per-job records (``records.jobs``)."""
        return self._kept("jobs").jobs

    @property
    def timeseries(self) -> pd.DataFrame:
        """Queue depth and active jobs per queue over time (see :mod:`qsim.model.timeseries`)."""
        return self._kept("timeseries").extra["timeseries"]

    def __repr__(self) -> str:
        kept = "" if self.records is not None else ", records not kept"
        return f"ModelResult({self.scenario.name!r}, seed {self.seed}: {summary_line(self.summary)}{kept})"

    def _repr_html_(self) -> str:
        notes = [] if self.records is not None else ["records not kept (records=False): only the Summary"]
        return summary_html(self.summary, title=f"Model run of {self.scenario.name} (seed {self.seed})", notes=notes)


def core_attempts(jobs: pd.DataFrame) -> pd.DataFrame:
    """The attempts of a core run: each job that started ran one attempt, ok (cutoff: still running).

    Plain dtypes, as the jobs table's. When every job started (the usual case) the ``job_id``,
    ``worker``, ``start`` and ``end`` columns are the jobs table's own, shared under pandas'
    copy-on-write (a write to either table copies first; without copy-on-write they are copies).
    """
    started = jobs["started"]
    ran = ~np.isnan(started.to_numpy(float))
    end = jobs["finished"]
    if bool(ran.all()):
        cow = copy_on_write()
        same = {"job_id": jobs["job_id"], "worker": jobs["worker"], "start": started, "end": end}
        shared = {k: (v if cow else v.copy()).reset_index(drop=True) for k, v in same.items()}
        done = ~np.isnan(end.to_numpy(float))
        return attempts_frame({
            "job_id": shared["job_id"], "attempt": np.ones(len(jobs), dtype=np.int64), "worker": shared["worker"],
            "start": shared["start"], "end": shared["end"], "result": name_column(np.where(done, 0, 1), ("ok", "cutoff"))})
    end_ran = end.to_numpy(float)[ran]
    return attempts_frame({
        "job_id": jobs["job_id"].to_numpy()[ran],
        "attempt": np.ones(end_ran.size, dtype=np.int64),
        "worker": jobs["worker"].to_numpy()[ran],
        "start": started.to_numpy(float)[ran], "end": end_ran,
        "result": name_column(np.where(np.isnan(end_ran), 1, 0), ("ok", "cutoff"))})
