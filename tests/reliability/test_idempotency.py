"""The idempotent handler of docs/explanation/reliability.md, under a crash between its side effect and its acknowledgement."""

from __future__ import annotations

import pytest
import redis

from qsim.engine import Queue
from reliability_helpers import spawn, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.chaos]


@pytest.mark.parametrize("handler, expected", [("charge", 100), ("charge_naive", 200)])
def test_a_job_run_twice_charges_once_only_with_the_idempotent_handler(
    redis_url: str, redis_client: redis.Redis, handler: str, expected: int
) -> None:
    # Given a job whose first run dies right after charging (SIGKILL-like: os._exit before the ack)
    q = Queue("ledger", redis=redis_url)
    q.add("charge", {"account": "acme", "amount": 100, "crash": True}, job_id="order-17")
    q.add_bulk([("charge", {"account": f"a{i}", "amount": 5}, {"job_id": f"other-{i}"}) for i in range(20)])
    args = ["-m", "qsim", "worker", f"idempotent_handlers:{handler}", "--queue", "ledger", "--redis", redis_url,
            "--lock-duration", "1", "--stalled-interval", "0.5", "--max-stalled", "3"]
    workers = [spawn(args, env={"LEDGER_REDIS_URL": redis_url}) for _ in range(2)]
    try:
        # When the other worker recovers the job once its lock expires
        wait_until(lambda: q.counts()["completed"] == 21, timeout=30, interval=0.05)
    finally:
        for w in workers:
            w.terminate()
            w.communicate(timeout=15)
    # Then the job ran twice (one run died), and only the idempotent handler charged once
    job = q.get_job("order-17")
    assert [a.outcome for a in job.attempts] == ["stalled", "completed"]
    assert sorted(w.returncode for w in workers) == [0, 1]
    assert int(redis_client.hget("ledger:balance", "acme")) == expected
    others = [int(redis_client.hget("ledger:balance", f"a{i}")) for i in range(20)]
    if handler == "charge":
        assert job.returnvalue == {"applied": False}  # the second run found the first one's marker
        assert others == [5] * 20
    else:  # jobs the dead worker had finished but not yet acknowledged were charged twice too
        assert set(others) <= {5, 10}
    q.close()
