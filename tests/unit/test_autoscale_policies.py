"""The autoscaling controllers against hand-computed sequences (qsim/autoscale).

Each sequence is worked out by hand from the rule in the module's docstring;
times are the polls' times in seconds.
"""

from __future__ import annotations

import math

import pytest

from qsim.autoscale import HPA, Observation, ScalingRules, Step, Tally, TargetTracking, WindowStats
from qsim.spec.autoscaler import ScalePolicySpec
from qsim.autoscale.hpa import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP, ScaleEvents, proposal, scale_down_limit, \
    scale_up_limit

NO_STABILIZATION = ScalingRules(policies=DEFAULT_SCALE_DOWN.policies, stabilization=0.0)


def run(policy: HPA, steps: list[tuple[float, float]], current: int, ready: int | None = None) -> list[int]:
    """Replicas after each (time, metric value) poll, each poll starting from the last decision."""
    out = []
    for t, value in steps:
        current = policy.step(t, current, current if ready is None else ready, value)
        out.append(current)
    return out


# ------------------------------------------------------------------ the HPA rule


@pytest.mark.parametrize("current, value, target, want", [
    (2, 20, 8, 3),    # ratio 20/16 = 1.25: ceil(20 / 8)
    (3, 26, 8, 3),    # ratio 26/24 = 1.083: within the 10% tolerance
    (4, 29, 8, 4),    # ratio 0.906: within
    (4, 28, 8, 4),    # ratio 0.875: ceil(3.5) = 4
    (4, 24, 8, 3),    # ratio 0.75: 3
    (5, 0, 8, 0),     # an empty queue asks for none (min applies later)
])
def test_average_value_proposal(current: int, value: float, target: float, want: int) -> None:
    assert proposal(current, current, value, target, metric_type="AverageValue") == want


def test_value_proposal_scales_the_ready_pods() -> None:
    # oldest age 3 s against 2 s: ratio 1.5 times 4 ready pods (a fifth still starting)
    assert proposal(5, 4, 3.0, 2.0, metric_type="Value") == 6
    assert proposal(5, 4, 2.1, 2.0, metric_type="Value") == 5          # within tolerance: current
    assert proposal(10, 10, 2.6, 2.0, metric_type="Value") == 13       # 1.3 x 10, no float artefact (14)


def test_tolerance_is_a_parameter() -> None:
    assert proposal(10, 10, 85, 8, tolerance=0.1) == 10               # ratio 1.0625: within 0.1
    assert proposal(10, 10, 85, 8, tolerance=0.05) == 11              # ceil(10.625)
    assert proposal(10, 10, 84, 8, tolerance=0.1) == 10


# ------------------------------------------------------------------ stabilisation


def test_scale_down_waits_for_the_stabilization_window() -> None:
    # defaults: 300 s scale-down window; the first poll counts the 10 replicas it finds
    hpa = HPA(min=1, max=20, target=8)
    polls = [(t, 32.0) for t in range(0, 331, 30)]                      # proposal ceil(32/8) = 4
    assert run(hpa, polls, 10) == [10] * 10 + [4, 4]                  # t = 300: (0, 10) is out of the window


def test_a_spike_holds_the_replicas_for_one_window() -> None:
    hpa = HPA(min=1, max=20, target=8, scale_up=ScalingRules(policies=DEFAULT_SCALE_UP.policies,
                                                               select="disabled"))
    polls = [(t, 64.0 if t == 120 else 32.0) for t in range(0, 451, 30)]  # one proposal of 8 at t = 120
    # up disabled: 10 stays up to 300, then the highest of (120, 420] is 8 until t = 420
    assert run(hpa, polls, 10) == [10] * 10 + [8, 8, 8, 8, 4, 4]


def test_scale_up_stabilization_takes_the_lowest_recent_proposal() -> None:
    up = ScalingRules(policies=DEFAULT_SCALE_UP.policies, stabilization=60.0)
    hpa = HPA(min=1, max=50, target=1, scale_up=up, scale_down=NO_STABILIZATION)
    # t = 0: lowest of {4 (the seed), 8} = 4; t = 30: of {4, 8, 12} = 4; t = 60: of {12, 12} = 12 (the
    # proposals of t = 0 are out), limited to max(4 + 4, 2 x 4) = 8; t = 90: 12
    assert run(hpa, [(0, 8), (30, 12), (60, 12), (90, 12)], 4) == [4, 4, 8, 12]


# ------------------------------------------------------------------ scaling policies


def test_default_scale_up_is_4_pods_or_double_per_15_s() -> None:
    hpa = HPA(min=1, max=50, target=1)
    # from 1: max(1 + 4, 2) = 5; at t = 10 the event of t = 0 is within 15 s: still 5;
    # at t = 15 it is not (strictly within): max(5 + 4, 10) = 10; t = 30: max(14, 20) = 20; then 40
    assert run(hpa, [(0, 40), (10, 40), (15, 40), (30, 40), (45, 40)], 1) == [5, 5, 10, 20, 40]


def test_pods_per_period_scale_down() -> None:
    down = ScalingRules(policies=(ScalePolicySpec(type="pods", value=1, period=120.0),), stabilization=0.0)
    hpa = HPA(min=1, max=20, target=8, scale_down=down)
    # one pod per 120 s from 10 towards ceil(16/8) = 2
    assert run(hpa, [(0, 16), (60, 16), (120, 16), (240, 16)], 10) == [9, 9, 8, 7]


def test_select_min_takes_the_policy_allowing_least() -> None:
    rules = ScalingRules(policies=DEFAULT_SCALE_UP.policies, select="min")
    assert scale_up_limit(0.0, 10, ScaleEvents(), rules) == 14          # min(10 + 4, 20)
    assert scale_up_limit(0.0, 10, ScaleEvents(), DEFAULT_SCALE_UP) == 20


def test_percent_rounds_up_when_scaling_up_and_down_when_scaling_down() -> None:
    up = ScalingRules(policies=(ScalePolicySpec(type="percent", value=10, period=60.0),))
    down = ScalingRules(policies=(ScalePolicySpec(type="percent", value=10, period=60.0),))
    assert scale_up_limit(0.0, 10, ScaleEvents(), up) == 11             # ceil(11.0), not 12
    assert scale_up_limit(0.0, 3, ScaleEvents(), up) == 4               # ceil(3.3)
    assert scale_down_limit(0.0, 10, ScaleEvents(), down) == 9
    assert scale_down_limit(0.0, 3, ScaleEvents(), down) == 2           # floor(2.7)


def test_period_start_counts_both_directions() -> None:
    events = ScaleEvents()
    events.changed(0.0, 10, 6, keep=60.0)    # 4 removed
    events.changed(20.0, 6, 8, keep=60.0)    # 2 added
    assert events.period_start(30.0, 8, 60.0) == 10   # 8 - 2 + 4
    assert events.period_start(70.0, 8, 60.0) == 6    # the removal at 0 is out of the period


def test_disabled_direction_never_moves() -> None:
    hpa = HPA(min=1, max=20, target=8, scale_down=ScalingRules(policies=(), select="disabled"))
    assert run(hpa, [(0, 0), (400, 0), (800, 0)], 6) == [6, 6, 6]


def test_bounds_apply_before_the_metric() -> None:
    hpa = HPA(min=2, max=5, target=8)
    assert hpa.step(0.0, 9, 9, 1000.0) == 5
    assert hpa.step(30.0, 1, 1, 0.0) == 2


# ------------------------------------------------------------------ KEDA: activation and cooldown


def test_activation_and_cooldown_between_zero_and_one() -> None:
    hpa = HPA(min=0, max=10, target=5, activation=2, cooldown=300, scale_down=NO_STABILIZATION)
    polls = [(0, 0), (30, 2), (60, 3), (90, 12), (120, 0), (390, 0), (420, 0), (450, 0), (480, 1)]
    # 0: never active; 2 is not above 2; 3 is: KEDA to 1; the HPA then ceil(12/5) = 3; an empty queue:
    # the HPA goes to its floor of 1; KEDA to 0 once 300 s have passed (strictly) since t = 90: at 420
    assert run(hpa, polls, 0) == [0, 0, 1, 3, 1, 1, 0, 0, 0]


def test_a_never_active_target_waits_the_initial_cooldown_from_creation() -> None:
    # KEDA's initialCooldownPeriod (default 0): a target never active goes to zero at the first check
    hpa = HPA(min=0, max=10, target=5, cooldown=60, scale_down=NO_STABILIZATION)
    assert run(hpa, [(0, 0), (60, 0), (90, 0)], 2) == [0, 0, 0]
    # 60 s of it: the HPA (min 1) holds one replica until 60 s after the first check
    hpa = HPA(min=0, max=10, target=5, cooldown=300, initial_cooldown=60, scale_down=NO_STABILIZATION)
    assert run(hpa, [(0, 0), (30, 0), (60, 0)], 2) == [1, 1, 0]


# ------------------------------------------------------------------ the metric an HPA reads


def test_decide_reads_its_metric_and_holds_without_a_recommendation() -> None:
    obs = Observation(now=0.0, workers=2, ready=2, list_length=40, oldest_age=6.0, p95_wait=None)
    assert HPA(min=1, max=20, target=8).decide(obs) == 5
    assert HPA(min=1, max=20, target=2, metric="oldest_age").decide(obs) == 6
    assert HPA(min=1, max=20, target=2, metric="p95_wait").decide(obs) == 2  # 0 s seen; held by the window
    rec = HPA(min=1, max=20, target=1, metric="recommended_workers", recommend=lambda o: None)
    assert rec.decide(obs) == 2
    assert rec.needs == {"arrival_rate", "service"}
    assert HPA(min=1, max=20, target=1, metric="recommended_workers", recommend=lambda o: 7).decide(obs) == 6


# ------------------------------------------------------------------ step policy


def test_step_policy_delays() -> None:
    step = Step(min=1, max=10, up_when=2.0, down_when=0.5, step=1, up_delay=60.0, down_delay=120.0)
    polls = [(0, 5.0), (30, 5.0), (60, 5.0), (90, 1.0), (120, 0.1), (150, 0.1), (180, 0.1), (210, 0.1),
             (300, 0.1), (420, 0.1)]
    current, out = 1, []
    for t, latency in polls:
        current = step.step(t, current, latency)
        out.append(current)
    # up at 0 and 60 (not 30: the up delay); hold at 1.0 s; down only 120 s after the last change (60):
    # at 180, then at 300; at the minimum it stays
    assert out == [2, 2, 3, 3, 3, 3, 2, 2, 1, 1]


def test_step_size_and_bounds() -> None:
    step = Step(min=2, max=7, up_when=1.0, down_when=0.1, step=3, up_delay=0.0, down_delay=0.0)
    assert [step.step(t, c, 5.0) for t, c in [(0, 2), (1, 5), (2, 9)]] == [5, 7, 7]
    assert step.step(3, 3, 0.0) == 2
    assert step.step(4, 1, 0.5) == 2        # below min: min first


def test_step_reads_oldest_age_or_p95() -> None:
    obs = Observation(now=0.0, workers=3, ready=3, oldest_age=5.0, p95_wait=0.2)
    assert Step(min=1, max=9, up_when=2, down_when=0.5).decide(obs) == 4
    assert Step(min=1, max=9, up_when=2, down_when=0.5, metric="p95_wait").decide(obs) == 2


# ------------------------------------------------------------------ target tracking


def test_target_tracking_scales_out_at_once_and_in_after_cooldowns() -> None:
    tt = TargetTracking(min=1, max=20, acceptable_latency=10.0, concurrency=2,
                        scale_out_cooldown=60.0, scale_in_cooldown=300.0)
    assert tt.target(0.5) == 40.0                        # 10 s x 2 slots / 0.5 s
    polls = [(0, 100), (30, 0), (60, 0), (90, 200), (120, 41), (150, 41), (360, 41), (390, 41)]
    current, out = 1, []
    for t, backlog in polls:
        current = tt.step(t, current, backlog, 0.5)
        out.append(current)
    # ceil(100/40) = 3 at once; in to 1 only at 60 (scale-out cooldown); out to 5; in to 2 at 360
    # (scale-in cooldown from 60); 41 jobs ask for 2 and it stays
    assert out == [3, 3, 1, 5, 5, 5, 2, 2]
    assert tt.step(400, 2, 1000, None) == 2             # no service measured: hold


# ------------------------------------------------------------------ tally and window


def test_tally_counts_flaps_within_the_window_and_worker_seconds() -> None:
    tally = Tally(workers=2, end=100.0, flap_window=30.0)
    tally.polled(10, 2, 3)
    tally.polled(20, 3, 2)      # 10 s after an up: a flap
    tally.polled(60, 2, 3)      # 40 s after the down: not a flap
    tally.polled(70, 3, 3)      # no change
    tally.polled(120, 3, 1)     # 60 s after: not a flap
    # two processes from the start, one from 10 to 25 (drained), one from 60, both gone after the end
    s = tally.section(140.0, [(0.0, 130.0), (0.0, math.inf), (10.0, 25.0), (60.0, 130.0)])
    assert (s["scale_events"], s["scale_ups"], s["scale_downs"]) == (4, 2, 2)
    assert s["flaps"] == 1
    assert s["worker_seconds"] == pytest.approx(100 + 100 + 15 + 40)
    assert s["workers"]["min"] == 1 and s["workers"]["max"] == 3
    assert s["workers"]["mean"] == pytest.approx((2 * 10 + 3 * 10 + 2 * 40 + 3 * 40) / 100)
    assert s["polls"] == 5
    assert s["trajectory"][0] == [0.0, 2, 2] and s["trajectory"][-1] == [120, 1, 2]


def test_window_stats() -> None:
    w = WindowStats(10.0)
    for t in range(20):
        w.started(float(t), float(t))
        w.arrived(float(t), 2)
        w.ended(float(t), 1.0 if t % 2 else 3.0)
    assert w.p95_wait(19.0) == pytest.approx(float(__import__("numpy").percentile(range(10, 20), 95)))
    assert w.arrival_rate(19.0) == pytest.approx(2.0)
    mean, cv = w.service(19.0) or (0, 0)
    assert mean == pytest.approx(2.0) and cv == pytest.approx(0.5)
    assert w.p95_wait(40.0) is None and w.service(40.0) is None
    assert WindowStats(60.0).arrival_rate(0.0, since=0.0) == 0.0
    with pytest.raises(ValueError):
        WindowStats(math.nan)
