"""``qsim simulate --replications N``: the first replication's Summary with per-window bands, the bands'
coverage of a further replication on M/M/c, the table and CSV columns, and bad N."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from qsim.cli import main
from qsim.model import simulate, simulate_replications
from qsim.results.windows import BAND_FIELDS, window_bands
from qsim.spec.scenario import Scenario


def mmc(*, duration: float, rate: float = 8.0, mean: float = 0.4, workers: int = 4, window: float = 10.0) -> Scenario:
    """M/M/c at load rate * mean / workers (0.8 by default), windows of ``window`` seconds after 20 s warm-up."""
    return Scenario.from_dict({
        "name": "mmc", "seed": 3, "duration": duration, "warmup": 20.0, "window": window,
        "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": rate},
                  "service": {"kind": "exponential", "mean": mean}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": workers}]})


def test_the_summary_is_the_first_replications_with_bands_over_all_of_them() -> None:
    # Given an M/M/c scenario and 6 replications from seed 40
    s = mmc(duration=320.0)
    banded = simulate_replications(s, 6, seed=40).summary
    # Then the Summary is seed 40's run, field for field, apart from the windows' bands
    alone = simulate(s, seed=40).summary
    assert {k: v for k, v in banded.items() if k != "windows"} == {k: v for k, v in alone.items() if k != "windows"}
    assert [{k: v for k, v in w.items() if k != "bands"} for w in banded["windows"]] == alone["windows"]
    # and each window's bands are the 5-95% ranges over seeds 40..45 of its p95 and mean wait
    runs = [simulate(s, seed=k).summary["windows"] for k in range(40, 46)]
    for field in BAND_FIELDS:
        want = window_bands(runs, field)
        got = [w["bands"][field] for w in banded["windows"]]
        assert got == [None if b is None else pytest.approx(list(b)) for b in want[:len(got)]]
    assert all(lo <= hi for w in banded["windows"] for b in w["bands"].values() if b for lo, hi in [b])


def test_too_few_replications_are_refused() -> None:
    with pytest.raises(ValueError, match="replications must be an integer >= 2, got 1"):
        simulate_replications(mmc(duration=100.0), 1)


def coverage(scenario: Scenario, replications: int, held_out: int) -> dict[str, tuple[float, int]]:
    """Per banded field: the share of the held-out runs' window values inside the bands from
    ``replications`` runs of other seeds, and how many window values were judged."""
    runs = [simulate(scenario, seed=100 + k, records=False).summary["windows"] for k in range(replications)]
    tests = [simulate(scenario, seed=10_000 + k, records=False).summary["windows"] for k in range(held_out)]
    out = {}
    for field in BAND_FIELDS:
        bands = window_bands(runs, field)
        inside = [b[0] <= w[i][field] <= b[1] for w in tests for i, b in enumerate(bands)
                  if b is not None and i < len(w) and w[i][field] is not None]
        out[field] = (float(np.mean(inside)), len(inside))
    return out


@pytest.mark.parametrize("replications", [20, 40])
def test_bands_cover_a_further_replication_at_their_nominal_rate_on_mmc(replications: int) -> None:
    # Given M/M/4 at 80% load, 300 windows of 10 s, bands from 20 or 40 replications
    s = mmc(duration=3020.0)
    # When 8 further replications (seeds none of the bands used) are judged window by window
    got = coverage(s, replications, held_out=8)
    # Then their p95 and mean wait fall inside the 5-95% bands 90% +- 5% of the time
    for field, (share, n) in got.items():
        assert n >= 2000, field
        assert 0.85 <= share <= 0.95, (field, share, n)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def mmc_toml(tmp_path: Path) -> Path:
    path = tmp_path / "mmc.toml"
    path.write_text('name = "mmc"\nseed = 5\nduration = 200.0\nwarmup = 20.0\nwindow = 30.0\n'
                    '[[queues]]\nname = "q"\n[[jobs]]\nname = "a"\nqueue = "q"\n'
                    'arrival = { kind = "poisson", rate = 8.0 }\nservice = { kind = "exponential", mean = 0.4 }\n'
                    '[[pools]]\nname = "p"\nqueues = ["q"]\nworkers = 4\n')
    return path


@pytest.mark.parametrize("bad", ["1", "0", "-3", "two"])
def test_a_bad_replication_count_exits_2_naming_the_flag(capsys: pytest.CaptureFixture[str], mmc_toml: Path,
                                                        bad: str) -> None:
    with pytest.raises(SystemExit) as e:
        main(["simulate", str(mmc_toml), "--replications", bad])
    assert e.value.code == 2
    assert "--replications" in capsys.readouterr().err


def test_the_windows_table_shows_the_bands(capsys: pytest.CaptureFixture[str], mmc_toml: Path) -> None:
    code, out, _ = run(capsys, "simulate", str(mmc_toml), "--replications", "4", "--windows")
    assert code == 0
    head = next(line for line in out.splitlines() if line.lstrip().startswith("window"))
    assert all(c in head for c in ("p95 band", "mean wait", "mean band"))
    assert "bands: the 5-95% range over 4 replications (seeds 5 to 8); the other figures are seed 5's run" in out
    # without --replications: the mean wait but no band columns
    code, out, _ = run(capsys, "simulate", str(mmc_toml), "--windows")
    assert "mean wait" in out and "band" not in out


def test_json_and_csv_carry_the_bands(capsys: pytest.CaptureFixture[str], mmc_toml: Path, tmp_path: Path) -> None:
    code, out, _ = run(capsys, "simulate", str(mmc_toml), "--replications", "3", "--json")
    assert code == 0
    wins: list[dict[str, Any]] = json.loads(out)["windows"]
    assert wins and all(set(w["bands"]) == {"wait_p95", "mean_wait"} for w in wins)
    code, _, _ = run(capsys, "simulate", str(mmc_toml), "--replications", "3", "--out", str(tmp_path / "o"))
    frame = pd.read_csv(tmp_path / "o" / "windows.csv")
    for field in BAND_FIELDS:
        lo = [np.nan if w["bands"][field] is None else w["bands"][field][0] for w in wins]
        assert frame[f"{field}_lo"].tolist() == pytest.approx(lo, nan_ok=True)
