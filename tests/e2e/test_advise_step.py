"""``qsim advise --watch`` on a real engine under a stepped load (the arrival rate doubles half-way).

Real redis-server, real ``qsim worker`` processes, a Poisson producer: 10 jobs/s
of exponential 0.2 s jobs on 2 workers x 2 (offered load 2 busy slots, p95 wait
~0.13 s), then 20 jobs/s (load 4: 2 workers are saturated). The watch (window
10 s, every 2 s) must raise its recommendation within two windows of the step;
that recommendation must equal an offline ``qsim plan`` of the scenario it
wrote; and with the recommended workers started the measured p95 wait meets
the SLO. ``benchmarks/advise.py`` is the longer version with figures.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from stepped_load import AdviceWatch, Producer, Workers, settled, waits
from waiting import wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(240)]

SLO, LIMIT = "p95_wait<=0.5", 0.5
RATE, MEAN, CONCURRENCY, START_WORKERS = 10.0, 0.2, 2, 2
WINDOW, EVERY = 10.0, 2.0
MEASURE = 12.0  # seconds of jobs enqueued after scaling whose waits are checked


def _recommendations(watch: AdviceWatch, after: float = 0.0) -> list[tuple[float, int]]:
    return [(t, doc["recommended_workers"]) for t, doc in watch.lines
            if t >= after and doc.get("recommended_workers") is not None]


def test_advice_follows_a_stepped_load(redis_url: str, tmp_path: Path) -> None:
    queue, prefix = "steps", "step"
    out = tmp_path / "advised.toml"
    workers = Workers(redis_url, queue, prefix, concurrency=CONCURRENCY, logdir=tmp_path)
    producer = Producer(redis_url, queue, prefix, rate=RATE, mean=MEAN)
    watch = AdviceWatch(redis_url, queue, prefix, slo=SLO, window=f"{WINDOW:g}s", every=EVERY, out=out)
    try:
        # Given the base load on 2 workers, watched for a window
        workers.start(START_WORKERS)
        producer.start()
        time.sleep(3)
        watch.start()
        time.sleep(WINDOW + 2)
        before = _recommendations(watch)
        assert before, f"no advice before the step: {watch.lines}"
        assert before[-1][1] == START_WORKERS  # 1 worker is saturated (load 2 on 2 slots), 2 meet the SLO easily

        # When the arrival rate doubles
        producer.rate = 2 * RATE
        t_step = time.monotonic() - watch.t0
        rise = wait_until(lambda: next(((t, doc) for t, doc in watch.lines if t > t_step and
                                        (doc.get("recommended_workers") or 0) > before[-1][1]), None),
                          timeout=2 * WINDOW + 3 * EVERY, interval=0.2)
        # Then the recommendation rises within two windows of the step
        t_rise, advice = rise
        kept = tmp_path / "risen.toml"
        shutil.copy(out, kept)
        assert t_rise - t_step <= 2 * WINDOW + EVERY, (t_rise - t_step, watch.lines)
        recommended = advice["recommended_workers"]
        assert recommended > START_WORKERS and advice["concurrency"] == CONCURRENCY
        assert advice["arrival_rate"] > 1.2 * RATE

        # and matches an offline `qsim plan` of the scenario the watch calibrated
        cmd = shlex.split(advice["plan_command"].replace(str(out), str(kept)))
        plan = subprocess.run([sys.executable, "-m", *cmd, "--processes", "1", "--json"], capture_output=True,
                              text=True, timeout=120)
        assert plan.returncode == 0, plan.stderr
        offline = json.loads(plan.stdout)["recommended"]
        assert offline == {advice["search"]["path"]: recommended}

        # When the recommended workers run (and the backlog of the saturated minutes is gone)
        t_scaled = time.time()
        workers.start(recommended - START_WORKERS)
        wait_until(lambda: settled(redis_url, queue, prefix, t_scaled, recommended), timeout=60, interval=1.0)
        t_settled = time.time()
        time.sleep(MEASURE)
        producer.stop()
        time.sleep(3)
    finally:
        producer.stop()
        code = watch.interrupt() if watch.proc is not None else 0
        workers.stop()
    # Then the measured p95 wait meets the SLO (jobs enqueued once the new workers are up and the backlog is gone)
    after = waits(redis_url, queue, prefix, t_settled, t_settled + MEASURE)
    assert after.size > 150
    p95_after = float(np.percentile(after, 95))
    assert p95_after <= LIMIT, (p95_after, recommended)
    # and Ctrl-C ended the watch cleanly
    assert code == 0 and "Traceback" not in watch.stderr, watch.stderr
    print(f"recommendations: {[(round(t, 1), r) for t, r in _recommendations(watch)]}; step at {t_step:.1f} s, "
          f"rise at {t_rise:.1f} s; settled {t_settled - t_scaled:.1f} s after scaling to {recommended}; p95 wait "
          f"after: {p95_after:.3f} s")
