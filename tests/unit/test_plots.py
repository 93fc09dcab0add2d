"""Plots: each returns a Figure with the lines and labels the notebooks rely on."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from qsim.analysis import plots
from qsim.analysis.plan.sweep import sweep
from qsim.analysis.slo.language import parse_slo
from qsim.model import simulate
from qsim.spec.scenario import Scenario


def mmc(concurrency: int = 2) -> Scenario:
    return Scenario.from_dict({
        "name": "mmc", "seed": 3, "duration": 200.0, "warmup": 20.0,
        "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 1.5},
                  "service": {"kind": "exponential", "mean": 1.0}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 1, "concurrency": concurrency}],
    })


def two_types() -> Scenario:
    return Scenario.from_dict({
        "name": "two", "seed": 2, "duration": 100.0,
        "queues": [{"name": "hi"}, {"name": "lo"}],
        "jobs": [{"name": "alert", "queue": "hi", "priority": 1, "arrival": {"kind": "poisson", "rate": 1.0},
                  "service": {"kind": "exponential", "mean": 1.0}},
                 {"name": "report", "queue": "lo", "priority": 5, "arrival": {"kind": "poisson", "rate": 0.5},
                  "service": {"kind": "lognormal", "mean": 2.0, "cv": 1.0}}],
        "pools": [{"name": "p", "queues": ["hi", "lo"], "workers": 2, "concurrency": 1}],
    })


def labels(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def point(params: dict[str, Any], p95: float | None, mean: float | None = 1.0) -> dict[str, Any]:
    wait = {"mean": mean, "p50": None, "p95": p95, "p99": None, "max": None}
    return {"params": params, "summary": {"wait": wait, "latency": wait, "by_type": {}, "throughput": 1.0,
                                          "utilization": 0.5, "jobs": {"dead": 0, "lost": 0}}}


def test_sweep_metric_draws_one_line_per_group_the_slo_and_the_recommendation() -> None:
    # Given sweep points over workers x concurrency, one of them undefined
    points = [point({"w": w, "c": c}, p95=10.0 / (w * c)) for c in (2, 1) for w in (1, 2, 3)]
    points.append(point({"w": 4, "c": 1}, p95=None))
    # When they are plotted against the SLO with a recommendation
    fig = plots.sweep_metric(points, "w", by="c", slo="p95_wait<=2", recommended={"w": 3, "c": 2})
    # Then there is a line per concurrency (numeric order), the SLO line and the star
    assert isinstance(fig, Figure)
    assert labels(fig) == ["c = 1", "c = 2", "recommended", "SLO p95_wait<=2"]
    ax = fig.axes[0]
    c1 = next(line for line in ax.get_lines() if line.get_label() == "c = 1")
    assert list(c1.get_xdata()) == [1, 2, 3]  # the undefined point is left out
    assert list(c1.get_ydata()) == pytest.approx([10.0, 5.0, 10.0 / 3])
    slo = next(line for line in ax.get_lines() if line.get_label().startswith("SLO"))
    assert list(slo.get_ydata()) == [2.0, 2.0]
    star = next(line for line in ax.get_lines() if line.get_label() == "recommended")
    assert (list(star.get_xdata()), list(star.get_ydata())) == ([3], pytest.approx([10.0 / 6]))


def test_sweep_metric_takes_a_function_for_x_and_per_type_metrics() -> None:
    # Given real sweep points of a two-type scenario
    points = sweep(two_types(), {"pools.p.workers": [2, 3]}, processes=1)
    # When the per-type metric is plotted over slots (a function of the params), on a symlog axis
    fig = plots.sweep_metric(points, lambda p: 2 * p["pools.p.workers"], metric="p95_wait[report]",
                             xlabel="slots", yscale="symlog", slo=parse_slo("p95_wait<=1"))
    # Then the one line holds the report p95 at x = slots; an SLO on another metric draws no line
    (line,) = [ln for ln in fig.axes[0].get_lines() if ln.get_label() == "p95_wait[report]"]
    assert list(line.get_xdata()) == [4, 6]
    assert list(line.get_ydata()) == [p["summary"]["by_type"]["report"]["wait"]["p95"] for p in points]
    assert fig.axes[0].get_xlabel() == "slots" and fig.axes[0].get_yscale() == "symlog"
    assert not any(lb.startswith("SLO") for lb in labels(fig))


def test_sweep_metric_refuses_an_unknown_metric() -> None:
    with pytest.raises(ValueError, match="p95_wait"):
        plots.sweep_metric([], "x", metric="p95 wait")
    with pytest.raises(ValueError):
        plots.sweep_metric([], "x", metric="p97_wait")


def test_model_theory_table_matches_predict_and_marks_unstable_points() -> None:
    # Given an M/M/c sweep crossing the stability boundary (1.5 jobs/s on 1, 2, 3 slots)
    scenario = mmc()
    points = sweep(scenario, {"pools.p.concurrency": [1, 2, 3]}, processes=1)
    # When the table is built
    table = plots.model_theory_table(scenario, points)
    # Then stable points carry Erlang C's values next to the model's, and the unstable one says why
    assert list(table["pools.p.concurrency"]) == [1, 2, 3]
    assert math.isnan(table.loc[0, "theory_mean"]) and "unstable" in table.loc[0, "note"]
    assert table.loc[1, "theory"] == "M/M/c" and table.loc[1, "rho"] == pytest.approx(0.75)
    from qsim.analysis.theory import mmc_wait_mean, mmc_wait_quantile
    assert table.loc[1, "theory_mean"] == pytest.approx(mmc_wait_mean(2, 1.5, 1.0))
    assert table.loc[2, "theory_p95"] == pytest.approx(mmc_wait_quantile(0.95, 3, 1.5, 1.0))
    assert table.loc[2, "model_p95"] == pytest.approx(points[2]["summary"]["wait"]["p95"])
    assert {f"{s}_{k}" for s in ("model", "theory") for k in ("mean", "p95", "p99")} <= set(table.columns)


def test_model_theory_table_per_job_type_uses_the_types_values() -> None:
    scenario = two_types()
    points = sweep(scenario, {"pools.p.workers": [3]}, processes=1)
    table = plots.model_theory_table(scenario, points, job_type="report", stats=("mean",))
    # lognormal service: no closed form for priorities, so theory is NaN with a reason
    assert table.loc[0, "model_mean"] == pytest.approx(points[0]["summary"]["by_type"]["report"]["wait"]["mean"])
    assert math.isnan(table.loc[0, "theory_mean"]) and table.loc[0, "note"]
    with pytest.raises(ValueError, match="job_type"):
        plots.model_theory_table(scenario, points, job_type="nope")
    with pytest.raises(ValueError, match="what"):
        plots.model_theory_table(scenario, points, what="service")


def test_model_vs_theory_draws_a_line_and_dots_per_stat() -> None:
    table = pd.DataFrame({"c": [3, 2], "model_mean": [0.1, 0.5], "theory_mean": [0.12, 0.48],
                          "model_p95": [0.4, 1.9], "theory_p95": [0.5, 2.0]})
    fig = plots.model_vs_theory(table, "c", stats=("mean", "p95"))
    assert labels(fig) == ["theory mean", "model mean", "theory p95", "model p95"]
    theory_mean = fig.axes[0].get_lines()[0]
    assert list(theory_mean.get_xdata()) == [2, 3] and list(theory_mean.get_ydata()) == [0.48, 0.12]
    with pytest.raises(ValueError, match="no column 'model_p99'"):
        plots.model_vs_theory(table, "c", stats=("p99",))


def test_wait_over_time_has_a_mean_and_a_tail_line_per_type() -> None:
    result = simulate(two_types())
    fig = plots.wait_over_time(result.jobs, bins=5, quantile=0.9)
    assert labels(fig) == ["alert mean", "alert p90", "report mean", "report p90"]
    for line in fig.axes[0].get_lines():
        assert len(line.get_xdata()) == 5
    with pytest.raises(ValueError, match="bins"):
        plots.wait_over_time(result.jobs, bins=0)


def test_service_time_tail_marks_the_quantile_and_the_grace_period() -> None:
    jobs = pd.DataFrame({"type": ["a"] * 1000, "started": np.zeros(1000), "finished": np.arange(1, 1001, dtype=float),
                         "enqueued": np.zeros(1000)})
    fig = plots.service_time_tail(jobs, quantile=0.99, grace=1200.0)
    assert labels(fig)[0].startswith("a (p99 990 s, n=1000)")
    assert labels(fig)[-1] == "grace 1200 s"
    assert fig.axes[0].get_yscale() == "log"
    curve = fig.axes[0].get_lines()[0]
    assert min(curve.get_ydata()) == pytest.approx(1 / 1000)  # P(T >= longest) > 0: it shows on a log axis
    assert max(curve.get_xdata()) == 1000.0
    with pytest.raises(ValueError, match="quantile"):
        plots.service_time_tail(jobs, quantile=1.0)


def test_existing_plots_still_return_figures() -> None:
    result = simulate(two_types())
    assert isinstance(plots.queue_depth(result.timeseries), Figure)
    assert isinstance(plots.wait_distribution(result.jobs), Figure)


def test_drain_times_gives_the_share_each_grace_period_cuts_off() -> None:
    # Given ten shutdowns of one pool: nine drained after 1..9 s, one cut off at 30 s
    drains = pd.DataFrame({"pool": ["p"] * 10, "process": [f"p-{i}" for i in range(10)],
                           "signalled_at": np.full(10, 100.0),
                           "drained_at": [100.0 + i for i in range(1, 10)] + [math.nan],
                           "cut_off_at": [math.nan] * 9 + [130.0], "jobs_cut_off": [0] * 9 + [1],
                           "active_at_signal": [1] * 10})
    # When two grace periods are drawn
    fig = plots.drain_times(drains, grace=(5.0, 30.0), quantile=0.9)
    # Then each says how many shutdowns took longer, and the cut-off one is counted at its cut-off
    texts = labels(fig)
    assert texts[0].startswith("p: p90") and "n=10, 1 cut off" in texts[0]
    assert texts[1] == "grace 5 s: 50.00% of shutdowns longer"
    assert texts[2] == "grace 30 s: 0.00% of shutdowns longer"
    assert max(fig.axes[0].get_lines()[0].get_xdata()) == 30.0
    assert fig.axes[0].get_yscale() == "log"


def test_drain_times_reads_the_models_drains() -> None:
    scenario = Scenario.from_dict({
        "name": "drain", "seed": 1, "duration": 60.0,
        "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 2.0},
                  "service": {"kind": "exponential", "mean": 3.0}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 4, "concurrency": 2}],
        "events": [{"at": 20.0, "kind": "sigterm", "pool": "p", "count": 2, "grace": 5.0}],
    })
    drains = simulate(scenario).records.extra["drains"]
    fig = plots.drain_times(drains, grace=(5.0,))
    assert "n=2" in labels(fig)[0]


def test_plan_plot_draws_intervals_the_slo_and_the_recommendation() -> None:
    # Given a plan over workers x concurrency with 3 replications (the overloaded points flagged)
    from qsim.analysis.plan import plan

    result = plan(mmc(), [parse_slo("p95_wait<=1")], {"pools.p.workers": [1, 2], "pools.p.concurrency": [1, 2, 3]},
                  replications=3, processes=1)
    # When it is plotted
    fig = plots.plan_plot(result)
    ax = fig.axes[0]
    # Then x is the path with the most values, one line per workers value, the SLO line and the star
    assert ax.get_xlabel() == "pools.p.concurrency"
    assert labels(fig)[:2] == ["workers = 1", "workers = 2"]
    assert "SLO p95_wait<=1" in labels(fig)
    best = result["recommended"]
    assert best is not None and any(t.startswith("recommended: workers = ") for t in labels(fig))
    # error bars span each point's interval
    bars = [c for c in ax.collections if c.get_segments()]
    spans = sorted(round(float(seg[1][1] - seg[0][1]), 6) for c in bars for seg in c.get_segments())
    expected = sorted(round(p["ci"]["p95_wait"][1] - p["ci"]["p95_wait"][0], 6) for p in result["points"])
    assert spans == expected
    assert "3 replications" in ax.get_title()
    with pytest.raises(ValueError, match="x must be one of the varied paths"):
        plots.plan_plot(result, x="pools.p.speed")
    # a metric other than the SLO's has no SLO line
    assert not any(t.startswith("SLO") for t in labels(plots.plan_plot(result, metric="utilization")))


def test_starts_over_time_stacks_retries_on_first_attempts_per_window() -> None:
    # Given a run whose 4 jobs start at once, 3 retry together 2 s later and 1 retries again at 4.5 s
    attempts = pd.DataFrame({"attempt": [1, 1, 1, 1, 2, 2, 2, 3],
                             "start": [0.1, 0.2, 0.3, 0.4, 2.1, 2.2, 2.3, 4.5]})
    # When the starts are counted in half-second windows
    fig = plots.starts_over_time(attempts, width=0.5)
    # Then the first attempts and the retries are two bands, in starts per second, with the peak retry rate
    (ax,) = fig.axes
    first, retries = ax.patches
    assert labels(fig) == ["first attempts", "retries (peak 6/s)"]
    assert list(first.get_data().values) == [8.0] + [0.0] * 9
    assert list(retries.get_data().values) == [8.0, 0.0, 0.0, 0.0, 6.0] + [0.0] * 4 + [2.0]
    assert list(retries.get_data().baseline) == list(first.get_data().values)
    assert ax.get_xlim() == (0.0, 5.0)
    with pytest.raises(ValueError, match="width"):
        plots.starts_over_time(attempts, width=0)


def test_starts_over_time_compares_runs_in_panels_on_shared_axes() -> None:
    # Given two runs of a scenario with retries: fixed backoff and full jitter
    def retrying(jitter: float) -> Scenario:
        return Scenario.from_dict({
            "name": "retry", "seed": 4, "duration": 10.0,
            "queues": [{"name": "q"}],
            "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "burst", "rate": 20.0, "size": 200},
                      "service": {"kind": "constant", "mean": 0.01}, "fail_prob": 0.9, "attempts": 3,
                      "backoff": {"kind": "fixed", "delay": 2.0, "jitter": jitter}}],
            "pools": [{"name": "p", "queues": ["q"], "workers": 1, "concurrency": 10}],
        })
    runs = {f"jitter {j:g}": simulate(retrying(j)).records.attempts for j in (0.0, 1.0)}
    # When they are drawn side by side
    fig = plots.starts_over_time(runs, width=0.5, until=8.0)
    # Then there is one panel per run, titled by its label, and the synchronized retries peak higher
    assert [ax.get_title(loc="left") for ax in fig.axes] == ["jitter 0", "jitter 1"]
    assert fig.axes[0].get_shared_y_axes().joined(fig.axes[0], fig.axes[1])
    peaks = [float(t.get_text().split("peak ")[1].split("/s")[0])
             for ax in fig.axes for t in ax.get_legend().get_texts() if t.get_text().startswith("retries")]
    assert peaks[0] > 2 * peaks[1]
    assert fig.axes[1].get_xlim() == (0.0, 8.0)


def test_model_vs_theory_takes_any_stat_and_a_ylabel() -> None:
    table = pd.DataFrame({"p": [0.0, 0.5], "model_attempts": [1.0, 1.74], "theory_attempts": [1.0, 1.75]})
    fig = plots.model_vs_theory(table, "p", stats=("attempts",), ylabel="attempts per job")
    assert fig.axes[0].get_ylabel() == "attempts per job"
    assert labels(fig) == ["theory attempts", "model attempts"]


def test_set_notebook_dpi_sets_the_dpi_of_figures_made_afterwards() -> None:
    import matplotlib

    with matplotlib.rc_context():
        plots.set_notebook_dpi()
        attempts = pd.DataFrame({"attempt": [1, 2], "start": [0.0, 1.0]})
        assert plots.starts_over_time(attempts).dpi == plots.NOTEBOOK_DPI
        plots.set_notebook_dpi(50)
        assert plots.starts_over_time(attempts).dpi == 50
        with pytest.raises(ValueError, match="dpi"):
            plots.set_notebook_dpi(0)


def test_quantile_comparison_draws_quantiles_or_differences_from_a_reference() -> None:
    # Given the same scenario with no overhead and with 5 ms in each slot (jobs enqueued before warmup left out)
    plain = simulate(mmc(3))
    slow = mmc(3)
    slow = Scenario.from_dict({**slow.to_dict(), "engine": {"ack_overhead": 0.005}})
    runs = {"plain": plain.jobs, "slow": simulate(slow).jobs}
    levels = (0.5, 0.9)
    # When both are drawn as quantiles, and as differences from `plain`
    fig = plots.quantile_comparison(runs, warmup=20.0, levels=levels)
    diff = plots.quantile_comparison(runs, warmup=20.0, levels=levels, reference="plain")
    # Then each panel has a line per run at the quantile levels, with the run's own quantiles
    wait_ax, latency_ax = fig.axes
    kept = plain.jobs[(plain.jobs["enqueued"] >= 20.0) & (plain.jobs["outcome"] == "completed")]
    lat = (kept["finished"] - kept["enqueued"]).to_numpy(float)
    assert [line.get_label() for line in latency_ax.lines] == ["plain", "slow"]
    assert list(latency_ax.lines[0].get_xdata()) == [50.0, 90.0]
    assert np.allclose(latency_ax.lines[0].get_ydata(), np.quantile(lat, levels))
    assert wait_ax.get_title() == "wait"
    # and the differences are in ms, the reference a zero line: the slow run's latency is later
    d = diff.axes[1]
    assert [line.get_label() for line in d.lines] == ["slow", "plain"]
    assert all(y > 0 for y in d.lines[0].get_ydata()) and "ms" in d.get_ylabel()
    with pytest.raises(ValueError, match="reference must be one of"):
        plots.quantile_comparison(runs, reference="engine")
    with pytest.raises(ValueError, match="levels"):
        plots.quantile_comparison(runs, levels=(0.5, 1.0))


def test_windows_plot_shades_the_p95_band_when_the_windows_have_bands() -> None:
    from qsim.model import simulate_replications

    s = mmc()
    plain = plots.windows_plot(simulate(s).summary)
    banded = plots.windows_plot(simulate_replications(s, 4).summary)
    wait_ax = banded.axes[2]
    labels = wait_ax.get_legend_handles_labels()[1]
    assert "model p95 5-95% band" in labels and len(wait_ax.collections) == 1
    assert "model p95 5-95% band" not in plain.axes[2].get_legend_handles_labels()[1]
    assert not plain.axes[2].collections
