"""``qsim autoscale``: autoscaling policies tried on a scenario before the deploy, tuned, and emitted."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from qsim.cli.common import EXIT_BAD_INPUT, EXIT_OK, Progress, err, fmt, load_scenario, nonneg_int, pos_int, \
    print_json
from qsim.errors import ScenarioError

__all__ = ["register", "cmd_autoscale", "format_autoscale"]

logger = logging.getLogger(__name__)

_COLUMNS = (("worker-hours", "worker_hours"), ("attainment", "attainment"), ("flaps", "flaps"),
            ("scale events", "scale_events"), ("cut jobs", "cut_jobs"), ("recover s", "recover_seconds"),
            ("p95 wait", "p95_wait"), ("workers", "mean_workers"))


def format_autoscale(doc: dict[str, Any]) -> str:
    """The policies side by side (means over the replications), the static peak, the tuned point."""
    lines = [f"SLO {doc['slo']}   pool {doc['pool']}   {doc['replications']} replication(s), seeds from {doc['seed']}",
             f"{'policy':<22}" + "".join(f"{label:>13}" for label, _ in _COLUMNS) + "  meets"]
    rows: list[tuple[str, dict[str, Any]]] = list(doc["policies"].items())
    peak = doc.get("static_peak")
    if peak and peak.get("workers") is not None:
        rows.append((f"static peak ({peak['workers']})", peak))
    tuned = doc.get("tuned")
    if tuned and tuned.get("figures") is not None:
        rows.append((f"{tuned['policy']} tuned", tuned["figures"]))
    for name, f in rows:
        cells = []
        for _, key in _COLUMNS:
            v = f.get(key)
            cells.append(f"{v:.1%}" if key == "attainment" and v is not None else fmt(v))
        lines.append(f"{name:<22}" + "".join(f"{c:>13}" for c in cells) + f"  {'yes' if f['meets_slo'] else 'no'}")
    if peak and peak.get("workers") is None:
        lines.append(f"static peak: {peak.get('reason')}")
    if tuned:
        if tuned.get("figures") is None:
            lines.append(f"\ntuned {tuned['policy']}: no point of the grid meets the SLO")
        else:
            point = ", ".join(f"{k.rsplit('.', 1)[-1]} = {v:g}" for k, v in tuned["point"].items())
            lines.append(f"\ntuned {tuned['policy']}: {point}  ({len(tuned['points'])} points searched)")
    lines.append(f"\nbest: {doc['best']}" if doc.get("best") else "\nno policy meets the SLO")
    return "\n".join(lines)


def cmd_autoscale(args: argparse.Namespace) -> int:
    """Run the autoscaling policies of SCENARIO against the SLO, the static peak beside them."""
    from qsim.analysis.autoscale import with_policy
    from qsim.analysis.plan import parse_slo
    from qsim.analysis.manifest import manifest
    from qsim.analysis.policies import autoscale, policy_table
    from qsim.analysis.runner import connect_dask

    scenario = load_scenario(args.scenario)
    slo = parse_slo(args.slo)
    if args.emit:
        kind, path = args.emit
        if kind not in ("keda", "hpa"):
            raise ScenarioError(f"--emit must be keda or hpa (then FILE), got {kind!r}")
        if not Path(path).resolve().parent.is_dir():
            raise ScenarioError(f"--emit {path}: no directory {str(Path(path).resolve().parent)!r}")
    vary = None
    if args.vary:
        if not args.tune:
            raise ScenarioError("--vary needs --tune POLICY")
        from qsim.cli.plan import _vary

        vary = _vary(args.vary)
    client = None
    if args.dask:
        try:
            client = connect_dask(args.dask)
        except (ImportError, OSError, ValueError) as e:
            err("autoscale", f"--dask: {e}")
            return EXIT_BAD_INPUT
    progress = Progress(f"autoscale {scenario.name}")
    try:
        doc = autoscale(scenario, slo, policies=args.policy, tune_policy=args.tune, vary=vary,
                        replications=args.replications, seed=args.seed, pool=args.pool, static=not args.no_static,
                        processes=args.processes, client=client, progress=progress)
    finally:
        progress.close()
        if client is not None:
            client.close()
    if args.emit:
        kind, path = args.emit
        pool = doc["pool"]
        tuned = doc.get("tuned")
        if tuned and tuned.get("params"):
            table, what = tuned["params"], f"{tuned['policy']} tuned by qsim autoscale"
        else:
            policy = args.tune or (args.policy[0] if args.policy else next(iter(doc["policies"])))
            if args.tune:
                raise ScenarioError(f"--emit: no point of --tune {args.tune}'s grid meets {slo}: nothing to emit")
            table, what = policy_table(with_policy(scenario, pool, policy, slo), pool), policy
        note = f"qsim autoscale {scenario.name}: {what}, for {slo}"
        Path(path).write_text(manifest(kind, scenario, pool, table, note=note), encoding="utf-8")
        doc["emitted"] = {"kind": kind, "file": str(path)}
    if args.json:
        print_json(doc)
    else:
        print(f"scenario {scenario.name}")
        print(format_autoscale(doc))
        if args.emit:
            print(f"wrote {args.emit[1]} ({args.emit[0]})")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``autoscale`` to the qsim command."""
    from qsim.scenario_autoscale import AUTOSCALE_POLICIES

    p = sub.add_parser(
        "autoscale", help="try autoscaling policies on a scenario against an SLO; tune one; emit KEDA/HPA YAML",
        description="Run SCENARIO with each autoscaling policy (the pool's [[autoscalers]] policy, or those given "
                    "with --policy, else all four) --replications times, beside the least static worker count "
                    "meeting the SLO at the peak; --tune POLICY searches that policy's parameters for the least "
                    "worker-hours meeting it; --emit writes the result as a KEDA ScaledObject or an HPA.")
    p.add_argument("scenario", help="scenario TOML file or built-in name")
    p.add_argument("--slo", required=True, metavar="EXPR",
                   help='e.g. "p95_wait<=2 in 95%% of windows" (per window of the Summary), or p95_wait<=2')
    p.add_argument("--policy", action="append", choices=AUTOSCALE_POLICIES, metavar="NAME",
                   help=f"a policy to run ({', '.join(AUTOSCALE_POLICIES)}; repeatable); parameters the "
                        "scenario does not give are derived from the SLO")
    p.add_argument("--tune", choices=AUTOSCALE_POLICIES, metavar="NAME",
                   help="search this policy's parameters for the least worker-hours meeting the SLO")
    p.add_argument("--vary", action="append", metavar="PATH=VALUES",
                   help="with --tune: the grid, e.g. autoscalers.POOL.target=2:16:2 (repeatable; default: "
                        "around the SLO-derived values)")
    p.add_argument("--replications", type=pos_int, default=3, metavar="R", help="runs per policy (default 3)")
    p.add_argument("--emit", nargs=2, metavar=("keda|hpa", "FILE"),
                   help="write the tuned policy (or the first one run) as a KEDA ScaledObject or an HPA manifest")
    p.add_argument("--pool", metavar="NAME", help="the autoscaled pool (default: the first [[autoscalers]] pool)")
    p.add_argument("--no-static", action="store_true", help="skip the static peak sizing")
    p.add_argument("--dask", metavar="tcp://HOST:PORT", help="run on this Dask scheduler's cluster")
    p.add_argument("--seed", type=nonneg_int, help="replication r uses SEED + r (default: the scenario's seed)")
    p.add_argument("--processes", type=pos_int, metavar="N", help="parallel runs (default: every core)")
    p.add_argument("--json", action="store_true",
                   help='print {"policies": {NAME: {...}}, "static_peak": {...}, "slo": ..., ...} as JSON')
    p.set_defaults(func=cmd_autoscale)
