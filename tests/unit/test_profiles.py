"""Rate profiles: exact non-homogeneous Poisson arrivals, profiled bursts, and their schema.

Given a profile, the counts of arrivals in windows follow Poisson laws whose
means are the profile's integrals over the windows; a chi-square test at
several seeds says so (each at the 0.1% level, so a correct sampler fails one
of the 24 tests below with a chance of about 2%; a wrong integral fails them
all).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

from qsim.errors import ScenarioError
from qsim.spec import dists
from qsim.spec.scenario import Scenario
from qsim.spec.workload import draw_workload

DAY = [[0, 5.0], [3600, 40.0], [7200, 12.0]]

PROFILES = {
    "linear": dists.RateProfile(points=((0, 5.0), (300, 40.0), (600, 12.0))),
    "step": dists.RateProfile(points=((0, 10.0), (200, 40.0), (400, 10.0)), shape="step"),
    "linear-period": dists.RateProfile(points=((60, 30.0), (200, 2.0)), period=300.0),
    "step-period-scaled": dists.RateProfile(points=((0, 4.0), (100, 20.0), (100, 1.0), (250, 8.0)),
                                            shape="step", period=300.0, scale=1.5),
}


@pytest.mark.parametrize("name", sorted(PROFILES))
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_counts_per_window_match_the_profile_integral(name: str, seed: int) -> None:
    profile = PROFILES[name]
    duration = 900.0
    t = dists.ProfileArrivals(profile=profile).times(np.random.default_rng(seed), duration)
    assert np.all(np.diff(t) >= 0) and t.min() >= 0 and t.max() < duration
    edges = np.arange(0, duration + 1e-9, 30.0)
    observed = np.histogram(t, bins=edges)[0]
    expected = np.diff(profile.cumulative(edges))
    assert expected.sum() == pytest.approx(profile.cumulative(duration))
    chi2 = float(np.sum((observed - expected) ** 2 / expected))
    assert stats.chi2.sf(chi2, df=len(expected)) > 1e-3, (observed, expected)


def test_rate_and_integral_by_hand() -> None:
    p = dists.RateProfile(points=((0, 5.0), (3600, 40.0), (7200, 12.0)))
    assert p.rate_at([0, 1800, 3600, 5400, 9000]).tolist() == pytest.approx([5, 22.5, 40, 26, 12])
    assert float(p.cumulative(3600)) == pytest.approx(22.5 * 3600)
    assert float(p.cumulative(9000)) == pytest.approx(22.5 * 3600 + 26 * 3600 + 12 * 1800)
    assert p.mean == pytest.approx((22.5 + 26) / 2) and p.peak == 40
    # step: two points at one time make a jump; the later rate holds from that time on
    s = dists.RateProfile(points=((0, 2.0), (10, 8.0), (10, 1.0), (20, 3.0)), shape="step")
    assert s.rate_at([0, 9.99, 10, 15, 20, 100]).tolist() == [2, 2, 1, 1, 3, 3]
    assert float(s.cumulative(30)) == pytest.approx(20 + 10 + 30)
    # the period wraps: linear from the last point back to the first one a period later
    w = dists.RateProfile(points=((100, 10.0), (200, 20.0)), period=300.0, scale=2.0)
    assert w.rate_at([0, 100, 150, 200, 250, 400, 650]).tolist() == pytest.approx([30, 20, 30, 40, 35, 20, 25])
    assert float(w.cumulative(600)) == pytest.approx(2 * float(w.cumulative(300)))


def test_invert_is_the_inverse_of_the_integral() -> None:
    for profile in PROFILES.values():
        t = np.linspace(0, 1000, 2001)
        y = profile.cumulative(t)
        back = profile.invert(y)
        # equal wherever the rate is > 0 (a zero-rate stretch has no unique inverse)
        assert np.allclose(profile.cumulative(back), y, rtol=1e-9, atol=1e-7)


def test_profiled_burst_follows_the_profile_in_batches() -> None:
    p = dists.RateProfile(points=((0, 10.0), (100, 40.0), (200, 10.0)), shape="step")
    b = dists.BurstArrivals(size=20, profile=p)
    t = b.times(np.random.default_rng(0), 300.0)
    batches, sizes = np.unique(t, return_counts=True)
    assert set(sizes.tolist()) == {20}
    gaps = np.diff(batches)
    assert gaps[batches[:-1] < 90] == pytest.approx(2.0)        # 20 jobs at 10/s
    assert gaps[(batches[:-1] > 110) & (batches[:-1] < 190)] == pytest.approx(0.5)   # at 40/s
    assert len(t) == pytest.approx(float(p.cumulative(300.0)), abs=20)
    assert b.rate == pytest.approx(p.mean)


def scenario(arrival: dict[str, Any], duration: float = 7200.0) -> dict[str, Any]:
    return {"name": "day", "duration": duration, "queues": [{"name": "q"}],
            "jobs": [{"name": "a", "queue": "q", "arrival": arrival,
                      "service": {"kind": "exponential", "mean": 0.1}}],
            "pools": [{"name": "p", "queues": ["q"], "workers": 8}]}


def test_the_toml_schema_and_round_trip() -> None:
    raw = scenario({"kind": "profile", "points": DAY, "shape": "linear", "period": 86400.0, "scale": 1.5})
    s = Scenario.from_dict(raw)
    arrival = s.jobs[0].arrival
    assert isinstance(arrival, dists.ProfileArrivals)
    assert arrival.profile.scale == 1.5 and arrival.profile.period == 86400.0
    assert Scenario.from_dict(s.to_dict()) == s
    burst = Scenario.from_dict(scenario({"kind": "burst", "size": 20, "points": DAY, "shape": "step"}))
    assert Scenario.from_dict(burst.to_dict()) == burst
    # the workload draws them once, for every runner
    w = draw_workload(s, seed=3)
    assert len(w) == pytest.approx(float(arrival.profile.cumulative(7200.0)), rel=0.02)


@pytest.mark.parametrize(("arrival", "expected"), [
    ({"kind": "profile"}, "jobs[0].arrival.points is required"),
    ({"kind": "profile", "points": []}, "jobs[0].arrival.points must be a non-empty list"),
    ({"kind": "profile", "points": [[0, 5], [10, 2], [5, 1]]},
     "jobs[0].arrival.points[2] time must not be before the previous point's (10)"),
    ({"kind": "profile", "points": [[0, 5], [10, -2]]}, "jobs[0].arrival.points[1] rate must be >= 0, got -2"),
    ({"kind": "profile", "points": [[0, 0], [10, 0]]}, "jobs[0].arrival.points must give some rate > 0"),
    ({"kind": "profile", "points": [[0, 5], [10]]}, "jobs[0].arrival.points[1] must be a pair [time s, rate jobs/s]"),
    ({"kind": "profile", "points": [[0, 5], [7200, 2]], "period": 3600},
     "jobs[0].arrival.period must not be shorter than the last point's time (7200), got 3600"),
    ({"kind": "profile", "points": [[0, 5]], "shape": "smooth"},
     "jobs[0].arrival.shape must be one of linear, step, got 'smooth'"),
    ({"kind": "profile", "points": [[0, 5]], "scale": 0}, "jobs[0].arrival.scale must be > 0, got 0"),
    ({"kind": "profile", "points": [[0, 5]], "rate": 3}, "jobs[0].arrival.rate is not a known key"),
    ({"kind": "burst", "size": 5, "rate": 2, "points": [[0, 5]]}, "jobs[0].arrival.rate must be left out"),
    ({"kind": "poisson", "rate": 2, "period": 60}, "jobs[0].arrival.period is not a known key"),
    ({"kind": "burst", "rate": 2, "size": 5, "period": 60}, "jobs[0].arrival.period belongs to a rate profile"),
])
def test_bad_profiles_name_the_key(arrival: dict[str, Any], expected: str) -> None:
    with pytest.raises(ScenarioError) as info:
        Scenario.from_dict(scenario(arrival), source="day.toml")
    assert str(info.value).startswith("day.toml: ") and expected in str(info.value)


def test_bad_profiles_in_python_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"points\[1\] time must not be before"):
        dists.RateProfile(points=((5, 1.0), (2, 1.0)))
    with pytest.raises(ValueError, match="period must be > 0"):
        dists.RateProfile(points=((0, 1.0), (50, 1.0)), period=10)
