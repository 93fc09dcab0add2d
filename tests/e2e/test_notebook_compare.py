"""The engine side works inside Jupyter: a real kernel (its event loop running) runs ``compare``
(sync, in a cell) and ``await compare_async`` on a throwaway Redis."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

SETUP = """
import asyncio, json, tempfile
from pathlib import Path
from qsim import Scenario
from qsim.analysis.fidelity.compare import compare, compare_async
from qsim.harness.server import RedisServer

asyncio.get_running_loop()  # the kernel's loop runs: asyncio.run would refuse here
s = Scenario.from_dict({"name": "nb", "seed": 4, "duration": 1.0,
                        "queues": [{"name": "q"}],
                        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "constant", "rate": 8.0},
                                  "service": {"kind": "constant", "mean": 0.05}}],
                        "pools": [{"name": "p", "queues": ["q"], "concurrency": 2}]})
tmp = tempfile.TemporaryDirectory()
server = RedisServer(Path(tmp.name)).start()
"""
SYNC = "doc = compare(s, server.url)\nprint(json.dumps(doc['engine']['jobs']))"
ASYNC = "doc2 = await compare_async(s, server.url)\nprint(json.dumps(doc2['ratios']))"
TEARDOWN = "server.stop(); tmp.cleanup()"


def test_compare_runs_in_a_notebook_cell(tmp_path: Path) -> None:
    # Given a notebook that starts a throwaway Redis, then calls compare and awaits compare_async
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in (SETUP, SYNC, ASYNC, TEARDOWN)]
    # When a real kernel executes it
    client = NotebookClient(nb, timeout=90, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    try:
        client.execute()
    except Exception as e:  # a cell error: show its traceback
        pytest.fail(f"the notebook failed: {e}")
    # Then both printed their document: the engine ran the model's jobs, none lost
    jobs = json.loads(nb.cells[1].outputs[0]["text"])
    assert jobs["completed"] == jobs["arrived"] == 8 and jobs["lost"] == 0
    ratios = json.loads(nb.cells[2].outputs[0]["text"])
    assert ratios["jobs.completed"] == 1.0
    assert 0.5 < ratios["latency.p50"] < 2.0
