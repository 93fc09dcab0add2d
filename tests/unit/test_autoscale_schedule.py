"""The schedule and predictive policies (KEDA cron floors beside the HPA's trigger) and the in_flight metric."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qsim import Scenario, ScenarioError
from qsim.analysis.autoscaling.contest import policy_table
from qsim.autoscale.build import controller
from qsim.autoscale.hpa import HPA, ScalingRules
from qsim.autoscale.k8s_read import apply_k8s, read_objects
from qsim.autoscale.manifest import manifest
from qsim.autoscale.observe import Observation
from qsim.autoscale.predictive import predictive_floors, workers_needed
from qsim.autoscale.schedule import DAY, Floors, Scheduled
from qsim.model import simulate
from qsim.spec.autoscaler import DEFAULT_SCALE_DOWN, FloorSpec

H = 3600.0


def floors(*spec: tuple[str, str, int]) -> Floors:
    return Floors.daily([FloorSpec(start=s, end=e, replicas=n) for s, e, n in spec])


def law(fl: Floors, *, target: float | None = 4.0, down: float = 0.0, **kw: Any) -> Scheduled:
    params: dict[str, Any] = {"min": 1, "max": 50, "target": target or 1.0, "metric": "list_length",
                              "scale_down": ScalingRules(policies=DEFAULT_SCALE_DOWN, stabilization=down)}
    params.update(kw)
    return Scheduled(floors=fl, reactive=target is not None, **params)


def obs(now: float, workers: int, waiting: int = 0) -> Observation:
    return Observation(now=now, workers=workers, ready=workers, list_length=waiting)


# ------------------------------------------------------------------ KEDA cron semantics


@pytest.mark.parametrize(("t", "active"), [
    (8 * H - 1e-6, False), (8 * H, True), (12 * H, True), (18 * H - 1e-6, True), (18 * H, False),
    (DAY + 8 * H, True), (DAY + 18 * H, False), (0.0, False)])
def test_a_floor_holds_from_start_inclusive_to_end_exclusive_every_day(t: float, active: bool) -> None:
    # Given a floor 08:00-18:00 of 6 (KEDA: active while the next end comes before the next start)
    fl = floors(("08:00", "18:00", 6))
    # Then it applies exactly at 08:00, no longer exactly at 18:00, and again the next day
    assert (fl.at(t) == 6) is active and (fl.at(t) is None) is not active


@pytest.mark.parametrize(("t", "active"), [(22 * H, True), (23.5 * H, True), (0.0, True), (6 * H - 1, True),
                                           (6 * H, False), (12 * H, False), (22 * H - 1, False)])
def test_a_floor_whose_end_is_before_its_start_crosses_midnight(t: float, active: bool) -> None:
    fl = floors(("22:00", "06:00", 3))
    assert (fl.at(t) is not None) is active


def test_overlapping_floors_give_their_largest() -> None:
    fl = floors(("08:00", "18:00", 6), ("12:00", "14:00", 9), ("17:00", "20:00", 2))
    assert [fl.at(h * H) for h in (7, 9, 12, 13.99, 14, 17, 18, 19.5, 20)] == [None, 6, 9, 9, 6, 6, 2, 2, None]


def test_the_controller_applies_the_floor_at_its_start_and_not_at_its_end() -> None:
    # Given a schedule with no stabilisation on the way down, a quiet queue (the reactive trigger asks 1)
    c = law(floors(("08:00", "18:00", 6)))
    # Then just before 08:00 it holds 1, exactly at 08:00 it goes to 6 (within the +4 / +100% rate limits:
    # 1 -> 5 -> 6), and exactly at 18:00 it falls back to what the reactive trigger asks
    assert c.decide(obs(8 * H - 15, 1)) == 1
    assert c.decide(obs(8 * H, 1)) == 5
    assert c.decide(obs(8 * H + 15, 5)) == 6
    assert c.decide(obs(18 * H - 15, 6)) == 6
    assert c.decide(obs(18 * H, 6)) == 1


def test_a_floor_ends_as_the_scale_down_window_allows() -> None:
    # Given Kubernetes' default 300 s scale-down stabilisation: the floor's proposals of the last 300 s count
    c = law(floors(("08:00", "18:00", 6)), down=300.0)
    c.decide(obs(8 * H, 6))
    for t in np.arange(8 * H + 15, 18 * H, 15):
        assert c.decide(obs(float(t), 6)) == 6
    # Then it stays at 6 until 300 s after the floor's last proposal (at 17:59:45) and drops then
    assert c.decide(obs(18 * H, 6)) == 6
    assert c.decide(obs(18 * H + 270, 6)) == 6
    assert c.decide(obs(18 * H + 285, 6)) == 1


@pytest.mark.parametrize(("waiting", "expected"), [(0, 6), (8, 6), (40, 10), (44, 11)])
def test_the_floor_and_the_reactive_trigger_combine_by_max(waiting: int, expected: int) -> None:
    # Given a floor of 6 and a list-length trigger of 4 per replica, 6 replicas running
    c = law(floors(("00:00", "12:00", 6)), target=4.0)
    # Then the count is the larger of the two proposals (ceil(waiting / 4) and 6)
    assert c.decide(obs(H, 6, waiting)) == expected == max(6, math.ceil(waiting / 4))


def test_the_floor_is_a_metric_like_any_other_within_the_tolerance() -> None:
    # KEDA's cron metric is desiredReplicas against an AverageValue target of 1: the HPA keeps its count
    # when that is within 10% of it, so 19 replicas do not go to a floor of 20, and 17 do
    c = law(floors(("00:00", "12:00", 20)), target=None)
    assert c.decide(obs(H, 19)) == 19
    assert law(floors(("00:00", "12:00", 20)), target=None).decide(obs(H, 17)) == 20


def test_an_active_floor_wakes_a_scaled_to_zero_target() -> None:
    # Given min = 0 and only a floor: KEDA scales 0 -> 1 when a trigger is active, the HPA takes it on
    c = law(floors(("08:00", "09:00", 4)), target=None, min=0)
    assert c.decide(obs(7 * H, 0)) == 0
    assert c.decide(obs(8 * H, 0)) == 1
    assert c.decide(obs(8 * H + 15, 1)) == 4


def test_floors_only_need_no_metric_and_an_unreadable_metric_only_keeps_the_count() -> None:
    assert law(floors(("08:00", "09:00", 4)), target=None).needs == frozenset()
    rec = law(floors(("08:00", "09:00", 4)), metric="recommended_workers", recommend=lambda o: None)
    assert rec.decide(obs(7 * H, 3)) == 3 and rec.decide(obs(8 * H, 3)) == 4


# ------------------------------------------------------------------ the scenario's tables


def day(autoscaler: dict[str, Any], *, points: list[list[float]] | None = None, duration: float = 7200.0,
        period: float | None = None) -> Scenario:
    arrival: dict[str, Any] = {"kind": "profile", "shape": "step",
                               "points": points or [[0, 2.0], [3600, 2.0], [3600, 8.0]]}
    if period is not None:
        arrival["period"] = period
    return Scenario.from_dict({
        "name": "day", "duration": duration, "seed": 3, "queues": [{"name": "orders"}],
        "jobs": [{"name": "j", "queue": "orders", "arrival": arrival,
                  "service": {"kind": "exponential", "mean": 0.5}}],
        "pools": [{"name": "p", "queues": ["orders"], "workers": 1}],
        "autoscalers": [{"pool": "p", "min": 1, "max": 20, "poll": 15.0,
                         "start_delay": {"kind": "constant", "mean": 60.0}, **autoscaler}]})


@pytest.mark.parametrize(("table", "message"), [
    ({"policy": "schedule"}, "autoscalers[0].floors is required for policy schedule"),
    ({"policy": "schedule", "floors": [{"start": "8:00", "end": "18:00", "replicas": 2}]},
     "autoscalers[0].floors[0].start must be a time of day HH:MM (00:00 to 23:59), got '8:00'"),
    ({"policy": "schedule", "floors": [{"start": "08:00", "end": "08:00", "replicas": 2}]},
     "autoscalers[0].floors[0].end must differ from start"),
    ({"policy": "schedule", "floors": [{"start": "08:00", "end": "09:00", "replicas": 0}]},
     "autoscalers[0].floors[0].replicas must be >= 1"),
    ({"policy": "schedule", "floors": [{"start": "08:00", "end": "09:00", "replicas": 2}], "timezone": "Mars/Base"},
     "autoscalers[0].timezone must be an IANA time zone"),
    ({"policy": "predictive", "utilization": 1.5}, "autoscalers[0].utilization must be in (0, 1]"),
    ({"policy": "predictive", "lead": -1}, "autoscalers[0].lead must be >= 0"),
    ({"policy": "hpa", "target": 2, "lead": 60}, "autoscalers[0].lead is a parameter of policy predictive, not hpa"),
])
def test_bad_floors_and_leads_are_named(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as e:
        day(table)
    assert message in str(e.value)


def test_a_schedule_keeps_its_floors_and_timezone_through_toml() -> None:
    s = day({"policy": "schedule", "timezone": "Europe/Paris", "target": 3, "metric": "in_flight",
             "floors": [{"start": "22:30", "end": "06:15", "replicas": 3}, {"start": "08:00", "end": "18:00",
                                                                             "replicas": 6}]})
    back = Scenario.from_dict(s.to_dict())
    assert back == s and back.autoscalers[0].params()["timezone"] == "Europe/Paris"
    assert back.autoscalers[0].floors == (FloorSpec(start="22:30", end="06:15", replicas=3),
                                         FloorSpec(start="08:00", end="18:00", replicas=6))


# ------------------------------------------------------------------ predictive


def test_predictive_floors_are_the_workers_the_profile_needs_raised_lead_seconds_ahead() -> None:
    # Given 2 then 8 jobs/s of 0.5 s jobs, concurrency 1, utilization 0.8, lead 120 s
    s = day({"policy": "predictive", "lead": 120.0})
    spec = s.autoscalers[0]
    before, after = math.ceil(2 * 0.5 / 0.8), math.ceil(8 * 0.5 / 0.8)
    # Then n(t) steps from ceil(1 / 0.8) to ceil(4 / 0.8) at the step, and the floor 120 s before it
    assert workers_needed(s, spec)[0] == [(0.0, 3600.0, before), (3600.0, math.inf, after)]
    fl = predictive_floors(s, spec)
    assert fl.at(3600 - 120 - 1e-6) == before and fl.at(3600 - 120) == after and fl.at(1e6) == after


def test_predictive_floors_follow_a_linear_profile_exactly_and_repeat_with_its_period() -> None:
    s = day({"policy": "predictive", "lead": 0.0, "utilization": 1.0},
            points=[[0, 0.0], [1000, 20.0]], period=2000.0)
    s = Scenario.from_dict({**s.to_dict(), "jobs": [{**s.to_dict()["jobs"][0], "arrival": {
        "kind": "profile", "shape": "linear", "points": [[0, 0.0], [1000, 20.0]], "period": 2000.0}}]})
    fl = predictive_floors(s, s.autoscalers[0])
    prof = s.jobs[0].arrival.profile  # type: ignore[union-attr]
    ts = np.linspace(0, 4000, 997)
    want = np.clip(np.ceil(prof.rate_at(ts) * 0.5 - 1e-9), 1, 20)
    got = [fl.at(float(t)) or 1 for t in ts]
    assert list(want.astype(int)) == got
    assert fl.period == 2000.0


def test_predictive_raises_the_workers_lead_seconds_before_the_step() -> None:
    # Given a step from 2 to 8 jobs/s at 3600 s, 60 s cold starts, polls every 15 s, lead = the cold start
    s = day({"policy": "predictive", "target": 8.0})
    floor = math.ceil(8 * 0.5 / 0.8)
    traj = simulate(s, seed=4).summary["autoscaling"]["p"]["trajectory"]
    lead = s.autoscalers[0].params()["lead"]
    assert lead == 60.0
    # Then the workers asked for reach the floor by step - lead, and the processes taking work by the step
    asked = next(t for t, n, _ in traj if n >= floor)
    ready = next(t for t, _, r in traj if r >= floor)
    assert asked <= 3600 - lead and ready <= 3600
    # and not long before: the floor below it holds until then
    assert asked >= 3600 - lead - s.autoscalers[0].poll


def test_an_emitted_predictive_policy_read_back_runs_the_same_day(tmp_path: Path) -> None:
    # Given a predictive policy over a one-day period whose floors fall on whole minutes
    s = day({"policy": "predictive", "target": 8.0, "metric": "in_flight"}, duration=7200.0, period=DAY,
            points=[[0, 2.0], [3600, 2.0], [3600, 8.0], [5400, 8.0], [5400, 2.0]])
    text = manifest("keda", s, "p", policy_table(s, "p"))
    (tmp_path / "so.yaml").write_text(text)
    read = read_objects([tmp_path / "so.yaml"], ("orders",))
    back = apply_k8s(s, "p", read)
    # Then it reads back as the schedule of those floors, and the simulated day is the same, bit for bit
    assert back.autoscalers[0].policy == "schedule"
    assert [f.replicas for f in back.autoscalers[0].floors or ()] and text.count("type: cron") == len(
        back.autoscalers[0].floors or ())
    a = simulate(s, seed=5).summary["autoscaling"]["p"]
    b = simulate(back, seed=5).summary["autoscaling"]["p"]
    assert a["trajectory"] == b["trajectory"] and a["worker_seconds"] == b["worker_seconds"]


def test_the_predictive_policy_needs_the_scenario() -> None:
    s = day({"policy": "predictive"})
    with pytest.raises(ValueError, match="reads the scenario's rate profile"):
        controller(s.autoscalers[0], s.pool("p"))
    assert isinstance(controller(s.autoscalers[0], s.pool("p"), scenario=s), Scheduled)


# ------------------------------------------------------------------ in_flight in the model


def test_in_flight_is_the_jobs_waiting_and_running_at_each_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given an hpa on in_flight over a Poisson day, the controller's observations recorded
    seen: list[Observation] = []
    decide = HPA.decide

    def spy(self: HPA, o: Observation) -> int:
        seen.append(o)
        return decide(self, o)

    monkeypatch.setattr(HPA, "decide", spy)
    s = day({"policy": "hpa", "metric": "in_flight", "target": 2.0, "start_delay": {"kind": "constant",
                                                                                   "mean": 7.0}})
    r = simulate(s, seed=6)
    jobs = r.records.jobs
    enq, fin = jobs["enqueued"].to_numpy(), jobs["finished"].to_numpy()
    started = jobs["started"].to_numpy()
    assert len(seen) > 100 and any(o.in_flight > o.list_length for o in seen)
    for o in seen:
        # Then in_flight is every job enqueued and not finished by the poll, list_length those not started
        assert o.in_flight == int(((enq <= o.now) & ~(fin <= o.now)).sum()), o
        assert o.list_length == int(((enq <= o.now) & ~(started <= o.now)).sum()), o


# ------------------------------------------------------------------ KEDA cron triggers read and written

CRON_OBJECT = """\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: orders-worker
spec:
  scaleTargetRef:
    name: orders-worker
  minReplicaCount: 1
  maxReplicaCount: 12
  triggers:
    - type: cron
      metadata:
        timezone: Asia/Kolkata
        start: 0 6 * * *
        end: 0 20 * * *
        desiredReplicas: "10"
    - type: cron
      metadata:
        timezone: Asia/Kolkata
        start: 30 22 * * *
        end: 5 2 * * *
        desiredReplicas: "3"
    - type: redis
      metadata:
        address: redis.default.svc:6379
        listName: bull:orders:wait
        listLength: "4"
"""


def test_cron_triggers_are_read_as_a_schedule_and_simulated(tmp_path: Path) -> None:
    # Given a ScaledObject like KEDA's docs show: two cron windows and a redis list trigger
    (tmp_path / "so.yaml").write_text(CRON_OBJECT)
    read = read_objects([tmp_path / "so.yaml"], ("orders",))
    # Then it is the schedule policy: one floor per cron trigger, the zone, the list trigger beside them
    a = read.autoscaler
    assert a["policy"] == "schedule" and a["timezone"] == "Asia/Kolkata"
    assert a["floors"] == [{"start": "06:00", "end": "20:00", "replicas": 10},
                           {"start": "22:30", "end": "02:05", "replicas": 3}]
    assert (a["metric"], a["target"]) == ("list_length", 4.0)
    # And it runs: the two hours from 00:00 lie in the night floor (22:30-02:05), so from the first poll on
    # at least 3 workers are asked for, whatever the list asks
    s = apply_k8s(day({"policy": "hpa", "target": 2}), "p", read)
    traj = simulate(s, seed=1).summary["autoscaling"]["p"]["trajectory"]
    assert traj[0][0] == 0.0 and min(n for _, n, _ in traj) >= 3


@pytest.mark.parametrize(("path", "value", "message"), [
    ("start", "0 6 * * 1-5", "spec.triggers[0].metadata.start is '0 6 * * 1-5': qsim reads daily cron expressions"),
    ("end", "*/5 * * * *", "spec.triggers[0].metadata.end is '*/5 * * * *'"),
    ("start", "0 24 * * *", "spec.triggers[0].metadata.start is '0 24 * * *'"),
    ("end", "0 6 * * *", "spec.triggers[0].metadata.end is '0 6 * * *', the same time as start"),
    ("timezone", "Mars/Base", "spec.triggers[0].metadata.timezone is 'Mars/Base', not a time zone"),
    ("timezone", None, "spec.triggers[0].metadata.timezone is required for a cron trigger"),
    ("desiredReplicas", "0", "spec.triggers[0].metadata.desiredReplicas must be a whole number >= 1"),
])
def test_a_cron_trigger_qsim_cannot_read_is_named(tmp_path: Path, path: str, value: str | None,
                                                   message: str) -> None:
    import yaml

    doc = yaml.safe_load(CRON_OBJECT)
    meta = doc["spec"]["triggers"][0]["metadata"]
    if value is None:
        del meta[path]
    else:
        meta[path] = value
    (tmp_path / "so.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ScenarioError) as e:
        read_objects([tmp_path / "so.yaml"], ("orders",))
    assert message in str(e.value)


def test_cron_triggers_in_two_zones_are_refused(tmp_path: Path) -> None:
    (tmp_path / "so.yaml").write_text(CRON_OBJECT.replace("timezone: Asia/Kolkata\n        start: 30",
                                                          "timezone: Europe/Paris\n        start: 30"))
    with pytest.raises(ScenarioError, match=r"spec.triggers\[1\].metadata.timezone is 'Europe/Paris', and "
                                            r"spec.triggers\[0\]'s is 'Asia/Kolkata'"):
        read_objects([tmp_path / "so.yaml"], ("orders",))


def test_floors_are_emitted_as_cron_triggers_only_for_keda() -> None:
    s = day({"policy": "schedule", "timezone": "Europe/Paris",
             "floors": [{"start": "22:30", "end": "06:15", "replicas": 3}]})
    text = manifest("keda", s, "p", policy_table(s, "p"))
    assert "start: 30 22 * * *" in text and "end: 15 6 * * *" in text and "desiredReplicas: '3'" in text
    assert "timezone: Europe/Paris" in text and "type: prometheus" not in text  # no target: the floors only
    with pytest.raises(ScenarioError, match="a plain HPA does not have: emit keda"):
        manifest("hpa", s, "p", policy_table(s, "p"))


def test_predictive_floors_off_whole_minutes_or_a_day_cannot_be_emitted() -> None:
    compressed = day({"policy": "predictive", "lead": 7.5}, period=1800.0, duration=2 * DAY,
                     points=[[0, 2.0], [900, 2.0], [900, 8.0]])
    with pytest.raises(ScenarioError, match="repeat every 1800 s"):
        manifest("keda", compressed, "p", policy_table(compressed, "p"))
    odd = day({"policy": "predictive", "lead": 7.5})
    with pytest.raises(ScenarioError, match="not on a whole minute"):
        manifest("keda", odd, "p", policy_table(odd, "p"))


def test_the_contest_gives_a_schedule_the_profile_floors_widened_to_minutes() -> None:
    from qsim.analysis.autoscaling.runs import with_policy
    from qsim.analysis.slo.language import parse_slo

    # Given a compressed day (a 1800 s period) and no floors: the schedule is the predictive floors written
    # out for the run as times of day, each widened to whole minutes (so never below the predictive floor)
    s = day({"policy": "predictive", "lead": 7.5}, period=1800.0, duration=3600.0,
            points=[[0, 2.0], [900, 2.0], [900, 8.0]])
    sched = with_policy(s, "p", "schedule", parse_slo("p95_wait<=2 in 90% of windows")).autoscaler("p")
    assert sched is not None and sched.floors
    written = Floors.daily(sched.floors)
    fl = predictive_floors(s, s.autoscalers[0])
    for t in np.arange(0.0, 3600.0, 7.5):
        assert (written.at(float(t)) or 1) >= (fl.at(float(t)) or 1), t


def test_a_schedule_is_derived_even_when_the_floors_do_not_repeat_daily() -> None:
    from qsim.analysis.autoscaling.runs import with_policy
    from qsim.analysis.slo.language import parse_slo

    # Given a two-day run of a profile repeating every 1800 s (no daily schedule can follow it exactly)
    s = day({"policy": "predictive", "lead": 7.5}, period=1800.0, duration=2 * DAY,
            points=[[0, 2.0], [900, 2.0], [900, 8.0]])
    sched = with_policy(s, "p", "schedule", parse_slo("p95_wait<=2 in 90% of windows")).autoscaler("p")
    # Then the contest still gets a schedule: the first day's floors, written out
    assert sched is not None and len(sched.floors or ()) >= 48


def test_emit_refuses_floors_it_cannot_write_before_any_run(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from qsim.cli import main
    from qsim.spec.toml_writer import write_toml

    # Given a predictive policy whose floors fall off whole minutes (a 7.5 s lead), and a schedule for --emit hpa
    path = tmp_path / "day.toml"
    write_toml(day({"policy": "predictive", "lead": 7.5, "target": 4.0}, duration=3600.0), path)
    out = tmp_path / "so.yaml"
    base = ["autoscale", str(path), "--slo", "p95_wait<=2 in 90% of windows", "--replications", "1", "--no-static"]
    # Then --emit exits 2 naming why, writing nothing
    assert main([*base, "--emit", "keda", str(out)]) == 2
    assert "not on a whole minute" in capsys.readouterr().err and not out.exists()
    assert main([*base, "--policy", "schedule", "--emit", "hpa", str(out)]) == 2
    assert "a plain HPA does not have: emit keda" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("policy", ["schedule", "predictive"])
def test_a_policy_with_no_reactive_trigger_is_run_and_emitted_without_one(policy: str) -> None:
    from qsim.analysis.autoscaling.runs import with_policy
    from qsim.analysis.slo.language import parse_slo

    # Given a floors-only autoscaler (a ScaledObject of cron triggers alone reads as one)
    table: dict[str, Any] = {"pool": "p", "policy": policy, "min": 1, "max": 10}
    if policy == "schedule":
        table["floors"] = [{"start": "00:03", "end": "00:08", "replicas": 6}]
    s = day(table)
    # When it runs as the contest runs it, Then no reactive trigger is derived from the SLO for it (a target
    # of 4 was: the run scaled on the queue, and the bundle carried a prometheus trigger beside the crons)
    run = with_policy(s, "p", policy, parse_slo("p95_wait<=2"))
    spec = run.autoscaler("p")
    assert spec is not None and spec.target is None
    # while a policy it is switched to still gets one
    hpa = with_policy(s, "p", "hpa", parse_slo("p95_wait<=2")).autoscaler("p")
    assert hpa is not None and hpa.target is not None
