"""Names at the engine's limits, as the scenario allows them, run on the engine: every key, job id and
log file made of them fits (tests/unit/test_cli_edges.py checks one character more is refused at load)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qsim.cli import main
from qsim.names import FILE_NAME_MAX, MAX_JOB_TYPE, MAX_NAME

pytestmark = [pytest.mark.redis]


def test_names_at_the_limits_run_on_the_engine(tmp_path: Path, redis_url: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # Given a queue name of 256 characters, a job type's of 192 and a pool's that just fits a log file's name
    queue, job, pool = "q" * MAX_NAME, "j" * MAX_JOB_TYPE, "p" * (FILE_NAME_MAX - len("-999999.log"))
    path = tmp_path / "s.toml"
    path.write_text(f'name = "s"\nduration = 2.0\n[[queues]]\nname = "{queue}"\n[[jobs]]\nname = "{job}"\n'
                    f'queue = "{queue}"\narrival = {{ kind = "poisson", rate = 10.0 }}\n'
                    f'service = {{ kind = "constant", mean = 0.01 }}\n[[pools]]\nname = "{pool}"\nqueues = ["{queue}"]\n')
    # When run on the engine
    code = main(["run", str(path), "--redis", redis_url, "--json"])
    out, err = capsys.readouterr()
    # Then it runs, and loses nothing
    assert code == 0, err[-2000:]
    doc = json.loads(out)
    assert doc["jobs"]["lost"] == 0 and doc["jobs"]["completed"] == doc["jobs"]["arrived"] > 0
