"""``qsim autoscale``: autoscaling policies tried on a scenario before the deploy, tuned, and emitted."""

from __future__ import annotations

import argparse
import logging
import math
from pathlib import Path
from typing import Any

from qsim.cli.common import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, Progress, add_redis_flags, err, fmt, load_scenario, \
    seed_int, parse_vary, pos_int, print_json
from qsim.errors import ScenarioError
from qsim.results.outpath import out_file
from qsim.spec.redis_cost import describe
from qsim.spec.run_size import check_run_size

__all__ = ["register", "cmd_autoscale", "format_autoscale"]

logger = logging.getLogger(__name__)

_COLUMNS = (("worker-hours", "worker_hours"), ("attainment", "attainment"), ("flaps", "flaps"),
            ("scale events", "scale_events"), ("cut jobs", "cut_jobs"), ("recover s", "recover_seconds"),
            ("p95 wait", "p95_wait"), ("workers", "mean_workers"))


def _row(name: str, f: dict[str, Any], money: bool) -> str:
    cells = []
    for _, key in _COLUMNS:
        v = f.get(key)
        cells.append(f"{v:.1%}" if key == "attainment" and v is not None else fmt(v))
    e = f.get("elasticity") or {}
    cells += [fmt(e.get("under_accuracy")), fmt(e.get("over_accuracy"))]
    if money:
        cells.append(fmt(f.get("cost")))
    return f"{name:<22}" + "".join(f"{c:>13}" for c in cells) + f"  {'yes' if f['meets_slo'] else 'no'}"


def format_autoscale(doc: dict[str, Any]) -> str:
    """The policies side by side (means over the replications), the static peak, the tuned points (on the
    held-out seeds, beside the policy as configured on the same seeds)."""
    money = doc.get("cost_per_worker_hour") is not None
    header = f"{'policy':<22}" + "".join(f"{label:>13}" for label, _ in _COLUMNS) + f"{'under acc':>13}" \
        f"{'over acc':>13}" + (f"{'cost':>13}" if money else "") + "  meets"
    lines = [f"SLO {doc['slo']}   pool {doc['pool']}   {doc['replications']} replication(s), seeds from {doc['seed']}",
             header]
    rows: list[tuple[str, dict[str, Any]]] = list(doc["policies"].items())
    peak = doc.get("static_peak")
    if peak and peak.get("workers") is not None:
        rows.append((f"static peak ({peak['workers']})", peak))
    for name, f in rows:
        lines.append(_row(name, f, money))
    tuned = {p: f["tuned"] for p, f in doc["policies"].items() if f.get("tuned")}
    if tuned:
        seeds = doc.get("held_out_seeds") or []
        lines.append(f"\non {len(seeds)} held-out seed(s) from {seeds[0] if seeds else '-'} "
                     "(as configured, then tuned on the training seeds):")
        lines.append(header)
        for p, t in tuned.items():
            if t.get("configured_held_out") is not None:
                lines.append(_row(p, t["configured_held_out"], money))
            if t.get("held_out") is not None:
                lines.append(_row(f"{p} tuned", t["held_out"], money))
    if peak and peak.get("workers") is None:
        lines.append(f"static peak: {peak.get('reason')}")
    for p, t in tuned.items():
        if t.get("point") is None:
            lines.append(f"\ntuned {p}: no point searched meets the SLO on the training seeds "
                         f"({len(t['points'])} points, {t.get('runs', 0)} runs)")
        else:
            point = ", ".join(f"{k.rsplit('.', 1)[-1]} = {fmt(v) if isinstance(v, float) else v}"
                              for k, v in t["point"].items()) or "as configured"
            lines.append(f"\ntuned {p}: {point}  ({len(t['points'])} points, {t.get('runs', 0)} runs)")
    tied = doc.get("tied") or ([doc["best"]] if doc.get("best") else [])
    if len(tied) > 1:
        lines.append(f"\nbest (tied within {doc.get('tie', 0.01):.0%} of worker-hours): {', '.join(tied)}")
    else:
        lines.append(f"\nbest: {tied[0]}" if tied else "\nno policy meets the SLO")
    if doc.get("redis"):
        lines.append(describe(doc["redis"]))
    return "\n".join(lines)


def cmd_autoscale(args: argparse.Namespace) -> int:
    """Run the autoscaling policies of SCENARIO against the SLO, the static peak beside them."""
    from qsim.advise.load import advisors
    from qsim.analysis.autoscaling.contest import autoscale
    from qsim.analysis.plan.runner import connect_dask
    from qsim.analysis.slo.language import parse_slo
    from qsim.autoscale.k8s_read import in_object_terms

    if args.prefix is not None and args.target != "bullmq":
        raise ScenarioError("--prefix goes with --target bullmq (BullMQ's key prefix)")
    if args.target != "qsim" and not args.emit:
        raise ScenarioError("--target goes with --emit keda|hpa FILE (whose queue the emitted trigger reads)")
    args.prefix = args.prefix or "bull"
    scenario = load_scenario(args.scenario)
    slo = parse_slo(args.slo)
    read = None
    if args.k8s:
        scenario, read = _read_k8s(args, scenario, slo)
    elif args.ignore_unknown:
        raise ScenarioError("--ignore-unknown goes with --k8s FILE ...")
    check_run_size(scenario)
    _check_emit_files(args)
    vary = _vary(args)
    if args.emit:
        scenario, vary = _whole_list_length(args, scenario, slo, vary)
        try:
            _check_emit(args, scenario, slo, vary)
        except ScenarioError as e:
            if read is None:
                raise
            raise ScenarioError(in_object_terms(str(e), read)) from None
    client = None
    if args.dask:
        try:
            client = connect_dask(args.dask)
        except (ImportError, OSError, ValueError) as e:
            err("autoscale", f"--dask: {e}")
            return EXIT_BAD_INPUT
    progress = Progress(f"autoscale {scenario.name}")
    try:
        policies = [read.autoscaler["policy"]] if read is not None else args.policy
        doc = autoscale(scenario, slo, policies=policies, tune_policy=args.tune, vary=vary,
                        replications=args.replications, seed=args.seed, pool=args.pool, static=not args.no_static,
                        processes=args.processes, client=client, advisors=advisors, progress=progress,
                        held_out=args.held_out, budget=args.budget, cost_per_worker_hour=args.cost_per_worker_hour,
                        flap_size=args.flap_size, flap_window=args.flap_window, tie=args.tie,
                        redis_ceiling=args.redis_ceiling, redis_cpu_per_job_us=args.redis_cpu_per_job)
    finally:
        progress.close()
        if client is not None:
            client.close()
    if read is not None:
        _as_k8s(doc, read, scenario)
    unmet = bool(args.emit and args.tune and not (doc.get("tuned") or {}).get("params"))
    if args.emit and not unmet:
        _write_emitted(args, doc, scenario, slo, read)
    for warning in doc.get("warnings", []):
        err("autoscale", f"warning: {warning}")
    if args.json:
        print_json(doc)
    else:
        _print_text(args, doc, scenario, wrote=bool(args.emit and not unmet))
    if unmet:
        err("autoscale", f"--emit: no point --tune {args.tune} searched meets {slo} on the training seeds: "
                         f"nothing written to {args.emit[1]} (widen the search with --vary or --budget)")
        return EXIT_FAILURE
    return EXIT_OK


def _check_emit_files(args: argparse.Namespace) -> None:
    """``--emit KIND FILE``: a kind qsim writes, and a file (and, for ``hpa``, its adapter rule's) whose folder
    exists and is writable, checked before any run."""
    from qsim.autoscale.k8s_deployment import adapter_rule_path, monitor_path

    if not args.emit:
        return
    kind, path = args.emit
    if kind not in ("keda", "hpa"):
        raise ScenarioError(f"--emit must be keda or hpa (then FILE), got {kind!r}")
    out_file(path, f"--emit {kind}")
    if kind == "hpa":
        out_file(adapter_rule_path(path), f"--emit {kind}'s adapter rule")
    out_file(monitor_path(path), f"--emit {kind}'s ServiceMonitor")


def _vary(args: argparse.Namespace) -> dict[str, list[Any]] | None:
    """``--vary``'s grid for ``--tune POLICY`` (None: none given).

    Raises:
        ScenarioError: ``--vary`` without one policy to tune, or ``--emit`` with ``--tune all``.
    """
    vary = None
    if args.vary:
        if not args.tune:
            raise ScenarioError("--vary needs --tune POLICY")
        if args.tune == "all":
            raise ScenarioError("--vary names one policy's parameters: give --tune POLICY with it, not --tune all")
        vary = parse_vary(args.vary)
    if args.emit and args.tune == "all":
        raise ScenarioError("--emit writes one policy: give --tune POLICY (or --policy) with it, not --tune all")
    return vary


def _write_emitted(args: argparse.Namespace, doc: Any, scenario: Any, slo: Any, read: Any) -> None:
    """``--emit KIND FILE``: write the tuned point (else the policy as configured) as a manifest, and note it in
    ``doc["emitted"]``."""
    from qsim.analysis.autoscaling.contest import policy_table
    from qsim.analysis.autoscaling.runs import with_policy
    from qsim.autoscale.emit import emit
    from qsim.autoscale.k8s_deployment import adapter_rule_path, monitor_path, service_monitors

    kind, path = args.emit
    pool = doc["pool"]
    tuned = doc.get("tuned")
    if tuned and tuned.get("params"):
        table, what = tuned["params"], f"{tuned['policy']} tuned by qsim autoscale"
    else:
        policy = args.policy[0] if args.policy else str(doc["policies"][next(iter(doc["policies"]))]
                                                            ["params"]["policy"])
        table, what = policy_table(with_policy(scenario, pool, policy, slo), pool), policy
    note = f"qsim autoscale {scenario.name}: {what}, for {slo}"
    text, rule = emit(kind, scenario, pool, table, slo=f"{slo.metric}{slo.op}{slo.value:g}", note=note,
                      deployment=read.deployment if read is not None else None,
                      pre_stop=float(read.pool.get("pre_stop", 0.0)) if read is not None else 0.0,
                      target=args.target, prefix=args.prefix, connection=read.connection if read is not None else None)
    Path(path).write_text(text, encoding="utf-8")
    doc["emitted"] = {"kind": kind, "file": str(path)}
    if rule is not None:
        adapter_rule_path(path).write_text(rule, encoding="utf-8")
        doc["emitted"]["adapter_rule"] = str(adapter_rule_path(path))
    monitors = service_monitors(text)
    if monitors is not None:
        monitor_path(path).write_text(monitors, encoding="utf-8")
        doc["emitted"]["service_monitor"] = str(monitor_path(path))


def _print_text(args: argparse.Namespace, doc: Any, scenario: Any, *, wrote: bool) -> None:
    """The document as text, the ignored k8s lines and the files written (``wrote``)."""
    print(f"scenario {scenario.name}")
    print(format_autoscale(doc))
    for line in (doc.get("k8s") or {}).get("ignored", []):
        print(f"ignored: {line}")
    if wrote:
        print(f"wrote {args.emit[1]} ({args.emit[0]})")
        if "adapter_rule" in doc["emitted"]:
            print(f"wrote {doc['emitted']['adapter_rule']} (prometheus-adapter's rule: add it to your adapter's)")
        if "service_monitor" in doc["emitted"]:
            print(f"wrote {doc['emitted']['service_monitor']} (the advisor's ServiceMonitor, for the Prometheus "
                  "Operator)")


def _emitted_policy(args: argparse.Namespace, scenario: Any, pool: str) -> str:
    """The policy ``--emit`` writes: the tuned one, else the first ``--policy``, else the pool's, else hpa."""
    own = scenario.autoscaler(pool)
    return str(args.tune or (args.policy[0] if args.policy else own.policy if own is not None else "hpa"))


def _whole_list_length(args: argparse.Namespace, scenario: Any, slo: Any, vary: Any) -> tuple[Any, Any]:
    """``--emit keda --target bullmq`` onto KEDA's redis trigger, which reads ``listLength`` as a whole number: a
    target qsim derives from the SLO is rounded down to one (at least 1: a worker per that many waiting jobs
    scales no later than the derived target), and so are the targets of the grid ``--tune`` makes, so that
    what runs is what is emitted. A target the scenario (or ``--k8s``, or ``--vary``) sets is left as given."""
    from qsim.analysis.autoscaling.contest import default_grid, policy_table
    from qsim.analysis.autoscaling.runs import autoscaled_pool, with_policy
    from qsim.autoscale.manifest import view_metric
    from qsim.autoscale.metric_source import redis_list_trigger

    pool = autoscaled_pool(scenario, args.pool)
    policy = _emitted_policy(args, scenario, pool)
    if policy not in ("hpa", "schedule", "predictive"):
        return scenario, vary
    run = with_policy(scenario, pool, policy, slo)
    spec, table = run.autoscaler(pool), policy_table(run, pool)
    metric = view_metric(run, pool, table)
    if spec is None or spec.target is None or metric is None or \
            not redis_list_trigger(args.emit[0], run, pool, table, metric, args.target):
        return scenario, vary
    own = scenario.autoscaler(pool)
    if own is None or own.policy != policy or own.target is None:  # derived, not set
        scenario = with_policy(scenario, pool, policy, slo, target=float(max(1, math.floor(spec.target))))
    if args.tune and not vary:
        vary = default_grid(policy, scenario, pool, slo)
        path = f"autoscalers.{pool}.target"
        if path in vary:
            vary[path] = sorted({float(max(1, math.floor(v))) for v in vary[path]})
    return scenario, vary


def _check_emit(args: argparse.Namespace, scenario: Any, slo: Any, vary: Any) -> None:
    """``--emit``: every table it may write (the policy, or each point of --tune's grid) fits the API's ranges."""
    from qsim.analysis.autoscaling.contest import default_grid, policy_table
    from qsim.analysis.autoscaling.runs import autoscaled_pool, with_policy
    from qsim.analysis.autoscaling.search import apply_point
    from qsim.analysis.plan.sweep import grid
    from qsim.autoscale.k8s_ranges import check_api_ranges
    from qsim.autoscale.manifest import check_floors, view_metric
    from qsim.autoscale.metric_source import metric_source

    pool = autoscaled_pool(scenario, args.pool)
    policy = _emitted_policy(args, scenario, pool)
    if policy == "step":
        return  # manifest() refuses it with its own reason
    base = with_policy(scenario, pool, policy, slo)
    points = grid(vary or default_grid(policy, scenario, pool, slo)) if args.tune else [{}]
    for params in points:
        point = apply_point(base, params)
        table = policy_table(point, pool)
        check_api_ranges(args.emit[0], table)
        check_floors(args.emit[0], point, pool, table)  # cron triggers: keda only, times of day
        metric = view_metric(point, pool, table)
        if metric is not None:  # None: floors only
            metric_source(args.emit[0], point, pool, table, metric, args.target)


def _read_k8s(args: argparse.Namespace, scenario: Any, slo: Any) -> tuple[Any, Any]:
    """``--k8s``: the scenario with the pool's autoscaler and settings read from the objects."""
    from qsim.analysis.autoscaling.runs import autoscaled_pool
    from qsim.autoscale.k8s_read import apply_k8s, read_objects

    if args.policy:
        raise ScenarioError("--k8s runs the autoscaler read (as policy k8s): give --policy or --k8s, not both")
    pool = autoscaled_pool(scenario, args.pool)
    read = read_objects(args.k8s, scenario.pool(pool).queues, slo=f"{slo.metric}{slo.op}{slo.value:g}",
                        ignore_unknown=args.ignore_unknown)
    args.pool = pool
    return apply_k8s(scenario, pool, read), read


def _as_k8s(doc: dict[str, Any], read: Any, scenario: Any) -> None:
    """The policy read runs under the name ``k8s``; the document says what was read."""
    policy = read.autoscaler["policy"]
    doc["policies"] = {"k8s" if p == policy else p: f for p, f in doc["policies"].items()}
    named = {policy: "k8s", f"{policy}-tuned": "k8s-tuned"}
    doc["best"] = named.get(doc["best"], doc["best"]) if doc.get("best") else doc.get("best")
    doc["tied"] = [named.get(p, p) for p in doc.get("tied") or []]
    own = scenario.pool(doc["pool"])
    pool = {"workers": own.workers, "concurrency": own.concurrency,
            "grace": doc["policies"]["k8s"]["params"].get("grace"), **read.pool}
    doc["k8s"] = {"autoscaler": doc["policies"]["k8s"]["params"], "pool": pool, "ignored": list(read.ignored),
                  "objects": list(read.objects)}


def register(sub: Any) -> None:
    """Add ``autoscale`` to the qsim command."""
    from qsim.spec.autoscaler import AUTOSCALE_POLICIES

    p = sub.add_parser(
        "autoscale", help="try autoscaling policies on a scenario against an SLO; tune one; emit KEDA/HPA YAML",
        description="Run SCENARIO with each autoscaling policy (the pool's [[autoscalers]] policy, or those given "
                    "with --policy, else all four) --replications times, beside the least static worker count "
                    "meeting the SLO at the peak; --tune POLICY (or all) searches that policy's parameters for the "
                    "least worker-hours meeting it and judges the result on held-out seeds; --emit writes the result as a "
                    "KEDA ScaledObject or an HPA; --k8s runs "
                    "the autoscaler you deploy today (its ScaledObject or HPA and worker Deployment) instead.")
    p.add_argument("scenario", help="scenario TOML file or built-in name")
    p.add_argument("--slo", required=True, metavar="EXPR",
                   help='e.g. "p95_wait<=2 in 95%% of windows" (per window of the Summary), or p95_wait<=2')
    p.add_argument("--policy", action="append", choices=AUTOSCALE_POLICIES, metavar="NAME",
                   help=f"a policy to run ({', '.join(AUTOSCALE_POLICIES)}; repeatable); parameters the "
                        "scenario does not give are derived from the SLO")
    p.add_argument("--tune", choices=(*AUTOSCALE_POLICIES, "all"), metavar="NAME",
                   help="search this policy's parameters (all: every policy's) for the least worker-hours meeting "
                        "the SLO on the training seeds (the replications), by successive halving over its search "
                        "space; the tuned point and the policy as configured are then judged on held-out seeds")
    p.add_argument("--held-out", type=pos_int, metavar="N",
                   help="with --tune: held-out runs (seeds SEED + 1000000 + r; default: --replications)")
    p.add_argument("--budget", type=pos_int, default=24, metavar="N",
                   help="with --tune: points of the search space tried on the first seed (default 24)")
    p.add_argument("--cost-per-worker-hour", type=float, metavar="MONEY",
                   help="price of a worker-hour: every policy's figures gain cost (worker-hours x MONEY)")
    p.add_argument("--tie", type=float, default=0.01, metavar="SHARE",
                   help="policies whose worker-hours are within SHARE of the least tie for best (default 0.01)")
    p.add_argument("--flap-size", type=pos_int, default=1, metavar="N",
                   help="a reversal counts as a flap only when it changes the count by at least N workers (default 1)")
    p.add_argument("--flap-window", type=float, metavar="S",
                   help="a reversal counts as a flap only within S s of the previous scale event (default: the "
                        "autoscaler's flap_window, 600)")
    p.add_argument("--vary", action="append", metavar="PATH=VALUES",
                   help="with --tune: the grid, e.g. autoscalers.POOL.target=2:16:2 (repeatable; default: "
                        "around the SLO-derived values)")
    p.add_argument("--replications", type=pos_int, default=3, metavar="R", help="runs per policy (default 3)")
    p.add_argument("--emit", nargs=2, metavar=("keda|hpa", "FILE"),
                   help="write the tuned policy (or the first one run) as a KEDA ScaledObject or an HPA, then the "
                        "worker Deployment (the one read with --k8s, else a plain qsim worker) carrying the simulated "
                        "concurrency, grace and, for the qsim policy, the advice's SLO and window")
    p.add_argument("--target", choices=("qsim", "bullmq"), default="qsim",
                   help="with --emit: whose queue the trigger reads: qsim's (its workers' metrics; default) or a "
                        "BullMQ queue's (KEDA's redis trigger on its wait list where that holds every waiting job, "
                        "else a qsim advise --from bullmq Deployment's gauges, emitted beside it)")
    p.add_argument("--prefix", default=None, metavar="PREFIX",
                   help="with --target bullmq: the queue's BullMQ key prefix (default bull)")
    p.add_argument("--k8s", nargs="+", metavar="FILE",
                   help="run the autoscaler of these YAML files instead (a KEDA ScaledObject or an autoscaling/v2 "
                        "HPA, and the worker Deployment it targets), as policy k8s; a field qsim cannot honour "
                        "is an error")
    p.add_argument("--ignore-unknown", action="store_true",
                   help="with --k8s: read the rest of the objects and list what qsim cannot honour as ignored")
    p.add_argument("--pool", metavar="NAME", help="the autoscaled pool (default: the first [[autoscalers]] pool)")
    p.add_argument("--no-static", action="store_true", help="skip the static peak sizing")
    p.add_argument("--dask", metavar="tcp://HOST:PORT", help="run on this Dask scheduler's cluster")
    add_redis_flags(p)
    p.add_argument("--seed", type=seed_int, help="replication r uses SEED + r (default: the scenario's seed)")
    p.add_argument("--processes", type=pos_int, metavar="N", help="parallel runs (default: every core)")
    p.add_argument("--json", action="store_true",
                   help='print {"policies": {NAME: {...}}, "static_peak": {...}, "slo": ..., "redis": {...}, ...} '
                        'as JSON')
    p.set_defaults(func=cmd_autoscale)
