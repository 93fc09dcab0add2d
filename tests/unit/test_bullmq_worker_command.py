"""``qsim compare --worker-command``: its refusals (exit 2, before anything runs; no Redis or Node needed)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from qsim.cli import main

STEP = """
name = "scaled"
duration = 20.0
[[queues]]
name = "q"
[[jobs]]
name = "j"
queue = "q"
arrival = {{ kind = "poisson", rate = 5.0 }}
service = {{ kind = "constant", mean = 0.1 }}
[[pools]]
name = "p"
queues = ["q"]
workers = 1
[[autoscalers]]
pool = "p"
min = 1
max = 4
{policy}
"""
BULLMQ = ["--target", "bullmq", "--redis", "redis://127.0.0.1:1/0", "--queue", "orders"]


@pytest.fixture
def scenario(tmp_path: Path) -> Callable[..., str]:
    def write(policy: str = 'policy = "hpa"\nmetric = "in_flight"\ntarget = 2.0') -> str:
        path = tmp_path / "scaled.toml"
        path.write_text(STEP.format(policy=policy))
        return str(path)

    return write


@pytest.mark.parametrize("policy, args, message", [
    (None, ["--worker-command", "node worker.js"], "--worker-command starts BullMQ workers: use it with --target bullmq"),
    (None, [*BULLMQ], "[[autoscalers]] (pool p) cannot scale BullMQ workers qsim did not start: give "
                      "--worker-command"),
    (None, [*BULLMQ, "--worker-command", "  "], "--worker-command is empty"),
    (None, [*BULLMQ, "--worker-command", "node 'worker.js"], "--worker-command \"node 'worker.js\": No closing quotation"),
    ('policy = "step"\nmetric = "p95_wait"\nup_when = 1.0\ndown_when = 0.1', [*BULLMQ, "--worker-command", "node w.js"],
     "autoscaler of pool 'p': it reads p95_wait, which --target bullmq --worker-command does not measure"),
    ('policy = "qsim"\nslo = "p95_wait<=2"', [*BULLMQ, "--worker-command", "node w.js"],
     "the qsim policy scales on qsim advise's recommendation"),
])
def test_worker_command_refusals(policy: str | None, args: list[str], message: str, scenario: Callable[..., str],
                                 monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Given an autoscaled scenario and compare flags that cannot work together
    monkeypatch.delenv("REDIS_URL", raising=False)
    path = scenario() if policy is None else scenario(policy)
    # Then compare refuses them with exit 2 and a sentence naming the flag or the metric, before anything runs
    # (the Redis given is a closed port: reaching it would be another message)
    assert main(["compare", path, *args]) == 2
    assert message in capsys.readouterr().err
