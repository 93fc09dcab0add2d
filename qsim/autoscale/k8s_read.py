"""Reading a cluster's autoscaler: a KEDA ScaledObject or an HPA and its worker Deployment, as a Scenario's.

:func:`read_objects` (``qsim.load_k8s`` in the flat API) reads YAML files (several documents each is fine) holding one
autoscaler object, a ``keda.sh/v1alpha1`` ScaledObject or an
``autoscaling/v2`` HorizontalPodAutoscaler, and the ``apps/v1`` Deployment it
targets, and gives the pool's ``[[autoscalers]]`` table (TOML keys) and pool
settings. It is the inverse of :func:`qsim.autoscale.manifest.manifest`:

=================================================== ==========================================
object field                                        scenario key
=================================================== ==========================================
minReplicaCount / maxReplicaCount (KEDA: 0, 100)     min / max (``idleReplicaCount: 0`` with
minReplicas / maxReplicas (HPA: 1, required)         ``minReplicaCount: 1`` is ``min = 0``; an HPA's
                                                     ``minReplicas: 0`` is ``min = 0``, ``keda = false``)
pollingInterval (KEDA: 30)                           poll (KEDA's 0 <-> 1 check)
cooldownPeriod (300), initialCooldownPeriod (0)      cooldown, initial_cooldown
(the HPA's sync period is a controller flag)         sync: 15 (kube-controller-manager's default)
a ``redis`` trigger: listName, listLength (5),       metric list_length, target, activation
activationListLength (0)
a ``prometheus`` trigger on a metric qsim exports    metric list_length | in_flight | oldest_age |
(query, threshold, activationThreshold, metricType)  p95_wait (window from the query's range) |
an HPA ``External`` metric of the same name          recommended_workers, target, metric_type
``cron`` triggers: start and end (daily             policy schedule: floors (one per trigger:
``M H * * *``), desiredReplicas, timezone (one)      start, end, replicas), timezone
no ``behavior`` (an HPA's, or a ScaledObject's       ``behavior = false`` (Kubernetes' fixed rules
``advanced.horizontalPodAutoscalerConfig``)          for an HPA without behavior)
behavior.scaleUp / scaleDown: stabilizationWindow-   scale_{up,down}_stabilization,
Seconds, policies (Pods | Percent, periodSeconds),   scale_{up,down} (Kubernetes' defaults
selectPolicy, tolerance                              where a part is absent), scale_{up,down}_select,
                                                     scale_{up,down}_tolerance
the Deployment's replicas                            the pool's workers
terminationGracePeriodSeconds (30) minus a preStop   grace (also at most the worker's
``sleep``                                            --shutdown-grace)
``qsim worker`` args: --concurrency (10), --prefetch  the pool's concurrency, [engine] prefetch
--advise-slo, --advise-window                        the advisor's slo and window
=================================================== ==========================================

The advice (``qsim_recommended_workers``) as an ``AverageValue`` target of 1
is the ``qsim`` policy; any other metric or target the ``hpa`` policy; ``cron``
triggers make it the ``schedule`` policy, whose reactive trigger is the other
one (if any). A cron expression other than a daily ``M H * * *`` (plain minute
and hour), or cron triggers in different time zones (the scenario has one clock),
are errors naming the field and the value.
A series qsim's workers export (``qsim_queue_*``, the wait histogram,
``qsim_recommended_workers`` with no ``qsim advise`` Deployment among the
objects) is there only while a worker is ready: such a trigger is read with
``metric_from = "workers"``, and a prometheus trigger's ``ignoreNullValues``
(``"true"`` by default) is ``ignore_null`` (an HPA's External metric has none:
``ignore_null = false``, a missing series is an error). A ScaledObject's
``fallback`` (``failureThreshold``, ``replicas``, behaviour ``static``) is
``fallback_failures``, ``fallback_replicas`` (:mod:`qsim.autoscale.nulls`).
A ``redis`` trigger and the advisor's series are always there
(``metric_from = "queue"``). Names, addresses and authentication do not
change what is scaled. Anything else qsim cannot honour (a ``cpu``
trigger, a ``Resource`` metric, a second reactive trigger: qsim's autoscaler holds one
metric (beside cron floors) where KEDA and the HPA take the max of several, ``scalingModifiers``) is a
:class:`~qsim.errors.ScenarioError` naming
the file, the object and the field path, or with ``ignore_unknown`` one
line of :attr:`K8sRead.ignored`. Values outside the Kubernetes/KEDA API
ranges (stabilisation 0..3600 s, a policy's period 1..1800 s, min <= max,
...) are errors either way.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from qsim.autoscale.k8s_cron import cron_floors
from qsim.autoscale.k8s_deployment import qsim_args, worker_queues
from qsim.autoscale.k8s_ranges import PERIOD, STABILIZATION
from qsim.autoscale.metric_source import REDIS_TRIGGERS, every_job_in_the_list
from qsim.errors import ScenarioError
from qsim.spec.scenario import Scenario
from qsim.spec.autoscaler import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP, DEFAULT_SYNC, FALLBACK_BEHAVIORS, SLO_SHAPE, \
    ScalePolicySpec

__all__ = ["K8sRead", "read_objects", "apply_k8s", "duration", "EXPORTED", "HPA_SYNC_PERIOD", "in_object_terms"]

#: ``qsim worker``'s defaults for the flags read (qsim.engine.settings; tests/unit/test_k8s_read.py holds them equal).
WORKER_CONCURRENCY, WORKER_SHUTDOWN_GRACE = 10, 30.0
#: The Prometheus series qsim exports, by the metric an autoscaler reads (an HPA's External metric name).
EXPORTED = {"list_length": "qsim_queue_jobs", "oldest_age": "qsim_queue_oldest_waiting_age_seconds",
            "p95_wait": "qsim_job_wait_seconds_p95", "recommended_workers": "qsim_recommended_workers",
            "in_flight": "qsim_queue_in_flight"}  # in_flight: prometheus-adapter's name for waiting + active
#: The same, for a BullMQ queue: the gauges ``qsim advise --from bullmq`` serves (qsim.bullmq.gauges).
BULLMQ_EXPORTED = {"list_length": "qsim_bullmq_jobs", "oldest_age": "qsim_bullmq_oldest_waiting_age_seconds",
                   "in_flight": "qsim_bullmq_in_flight"}  # in_flight: the adapter's name for waiting + active
#: Seconds between the HPA controller's decisions (kube-controller-manager's default sync period).
HPA_SYNC_PERIOD = DEFAULT_SYNC
_KEDA = "keda.sh/v1alpha1"
_HPA = "autoscaling/v2"
#: HPA API versions with v2's schema (v2beta2 is v2 before it was GA; behavior came with it).
_HPA_VERSIONS = (_HPA, "autoscaling/v2beta2")
_RANGES = {"stabilizationWindowSeconds": STABILIZATION, "periodSeconds": PERIOD}
_SELECT = {"Max": "max", "Min": "min", "Disabled": "disabled"}
_SUFFIX = {"": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Ki": 2.0 ** 10, "Mi": 2.0 ** 20, "Gi": 2.0 ** 30, "Ti": 2.0 ** 40, "Pi": 2.0 ** 50, "Ei": 2.0 ** 60}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_INERT_SPEC = {"scaleTargetRef"}
#: Series the workers export (gone when none is ready); qsim_recommended_workers also, unless an advisor runs.
_WORKER_SERIES = ("qsim_queue_jobs", "qsim_queue_oldest_waiting_age_seconds", "qsim_job_wait_seconds",
                  "qsim_queue_in_flight", "qsim_recommended_workers")
#: strconv.ParseBool's spellings, as KEDA reads a boolean trigger field.
_BOOL = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
         "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}


@dataclass(frozen=True)
class K8sRead:
    """What the objects say: the ``[[autoscalers]]`` table, the pool's settings, the fields left out.

    ``pool`` holds ``workers``, ``concurrency``, ``grace`` and, when the
    Deployment says, ``prefetch``, ``termination_grace_period`` and ``pre_stop``;
    ``ignored`` one sentence per field not honoured (with ``ignore_unknown``); ``objects`` names
    what was read; ``deployment`` is the Deployment as read (None: none given); ``source`` is
    ``redis`` when KEDA reads a wait list itself (a ``redis`` trigger), else ``metrics``.
    """

    autoscaler: dict[str, Any]
    pool: dict[str, Any]
    ignored: tuple[str, ...] = ()
    objects: tuple[str, ...] = ()
    deployment: Mapping[str, Any] | None = None
    source: str = "metrics"
    #: How the ScaledObject's trigger reaches its server, which qsim does not simulate but a bundle emitted
    #: from this read must keep: ``type``, the trigger's other ``metadata`` (serverAddress, address, ...) and
    #: its ``authenticationRef`` (empty: an HPA, or a ScaledObject of cron triggers only).
    connection: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class _Where:
    """The object being read, for messages; collects what is not honoured."""

    file: str
    kind: str
    name: str
    ignore_unknown: bool
    ignored: list[str] = field(default_factory=list)

    def prefix(self, path: str) -> str:
        return f"{self.file}: {self.kind} {self.name}: {path}"

    def error(self, path: str, problem: str) -> ScenarioError:
        return ScenarioError(f"{self.prefix(path)} {problem}")

    def unhonoured(self, path: str, why: str) -> None:
        """A field qsim cannot honour: an error, or with ignore_unknown a line of ``ignored``."""
        if not self.ignore_unknown:
            raise self.error(path, f"{why}; qsim cannot honour it (--ignore-unknown reads the rest without it)")
        self.ignored.append(f"{self.prefix(path)} {why}")


# ------------------------------------------------------------------ values


def quantity(where: _Where, path: str, value: Any) -> float:
    """A Kubernetes quantity (``"1"``, ``"500m"``, ``8``, ``"2k"``) as a number."""
    if isinstance(value, bool) or value is None:
        raise where.error(path, f"must be a number, got {value!r}")
    m = _QUANTITY.match(str(value).strip())
    if not m:
        raise where.error(path, f"must be a number (a Kubernetes quantity like 8 or \"500m\"), got {value!r}")
    return float(m.group(1)) * _SUFFIX[m.group(2) or ""]


def _positive(where: _Where, path: str, value: Any) -> float:
    x = quantity(where, path, value)
    if not (math.isfinite(x) and x > 0):
        raise where.error(path, f"must be > 0, got {value!r}")
    return x


#: The largest value of the API's int32 fields (replica counts, seconds).
INT32_MAX = 2**31 - 1


def _whole(where: _Where, path: str, value: Any, low: int, high: int | None = INT32_MAX) -> int:
    """A whole number within the API's range ``[low, high]`` (an int32 unless ``high`` says otherwise)."""
    text = str(value).strip() if isinstance(value, str) else value
    if isinstance(text, str) and re.fullmatch(r"[+-]?\d+", text):
        text = int(text)
    if isinstance(text, bool) or not isinstance(text, int):
        raise where.error(path, f"must be a whole number, got {value!r}")
    if text < low or (high is not None and text > high):
        allowed = f"{low}..{high}" if high is not None and (high != INT32_MAX or text > high) else f">= {low}"
        raise where.error(path, f"must be in {allowed} (the Kubernetes/KEDA API's range), got {text}")
    return text


def _mapping(where: _Where, path: str, value: Any) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise where.error(path, f"must be a mapping, got {type(value).__name__}")
    return value


def _listing(where: _Where, path: str, value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise where.error(path, f"must be a list, got {type(value).__name__}")
    return value


def _unknown_keys(where: _Where, path: str, given: Mapping[str, Any], known: Iterable[str]) -> None:
    for key in given:
        if key not in set(known):
            where.unhonoured(f"{path}.{key}", "is not a field qsim reads")


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNIT = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def duration(where: _Where, path: str, text: str) -> float:
    """A duration as Prometheus and ``qsim worker --advise-window`` write it (``90s``, ``15m``, ``1h30m``, or
    seconds) in seconds, > 0."""
    text = str(text).strip()
    try:
        seconds = float(text)
    except ValueError:
        parts = _DURATION.findall(text)
        seconds = (sum(float(n) * _UNIT[u] for n, u in parts)
                   if parts and "".join(n + u for n, u in parts) == text else math.nan)
    if not (math.isfinite(seconds) and seconds > 0):
        raise where.error(path, f"must be a duration like 90s, 15m or 1h30m, got {text!r}")
    return seconds


# ------------------------------------------------------------------ behaviour


def behavior(where: _Where, path: str, value: Any) -> dict[str, Any]:
    """``behavior`` (HPA) as scale_up/scale_down keys; Kubernetes' defaults where a part is absent; none at all
    is ``behavior = false`` (an HPA without behavior follows Kubernetes' fixed rules, not those defaults)."""
    if value is None:
        return {"behavior": False}
    b = _mapping(where, path, value)
    _unknown_keys(where, path, b, ("scaleUp", "scaleDown"))
    out: dict[str, Any] = {}
    for way, key, stabilization, rules in (("up", "scaleUp", 0, DEFAULT_SCALE_UP),
                                           ("down", "scaleDown", 300, DEFAULT_SCALE_DOWN)):
        at = f"{path}.{key}"
        r = _mapping(where, at, b.get(key))
        _unknown_keys(where, at, r, ("stabilizationWindowSeconds", "selectPolicy", "policies", "tolerance"))
        low, high = _RANGES["stabilizationWindowSeconds"]
        window = r.get("stabilizationWindowSeconds")
        out[f"scale_{way}_stabilization"] = float(stabilization if window is None else _whole(
            where, f"{at}.stabilizationWindowSeconds", window, low, high))
        select = r.get("selectPolicy", "Max")
        if not isinstance(select, str) or select not in _SELECT:
            raise where.error(f"{at}.selectPolicy", f"must be Max, Min or Disabled, got {select!r}")
        out[f"scale_{way}_select"] = _SELECT[select]
        if "policies" in r:
            out[f"scale_{way}"] = [scale_policy(where, f"{at}.policies[{i}]", p)
                                   for i, p in enumerate(_listing(where, f"{at}.policies", r["policies"]))]
            if not out[f"scale_{way}"] and select != "Disabled":
                raise where.error(f"{at}.policies", "must list at least one policy unless selectPolicy is Disabled "
                                                    "(the API server refuses it)")
        else:  # the API server fills the defaults in; none are written for a disabled direction
            out[f"scale_{way}"] = [] if select == "Disabled" else [_rule_table(p) for p in rules]
        if "tolerance" in r:
            tol = quantity(where, f"{at}.tolerance", r["tolerance"])
            if not (math.isfinite(tol) and tol >= 0):
                raise where.error(f"{at}.tolerance", f"must be >= 0, got {r['tolerance']!r}")
            out[f"scale_{way}_tolerance"] = tol
    return out


def _rule_table(p: ScalePolicySpec) -> dict[str, Any]:
    return {"type": p.type, "value": p.value, "period": p.period}


def scale_policy(where: _Where, path: str, value: Any) -> dict[str, Any]:
    """One HPA scaling policy (``{type: Pods|Percent, value, periodSeconds}``) as ``{type, value, period}``."""
    p = _mapping(where, path, value)
    _unknown_keys(where, path, p, ("type", "value", "periodSeconds"))
    if p.get("type") not in ("Pods", "Percent"):
        raise where.error(f"{path}.type", f"must be Pods or Percent, got {p.get('type')!r}")
    low, high = _RANGES["periodSeconds"]
    return {"type": str(p["type"]).lower(), "value": _whole(where, f"{path}.value", p.get("value"), 1),
            "period": float(_whole(where, f"{path}.periodSeconds", p.get("periodSeconds"), low, high))}


# ------------------------------------------------------------------ metrics


def _queue_named(where: _Where, path: str, name: str, queues: Sequence[str]) -> None:
    if name not in queues and name != ",".join(queues):
        raise where.error(path, f"names queue {name!r}, which the pool does not serve (its queues: "
                                f"{', '.join(queues)})")


def _queue_expressions(where: _Where, path: str, value: Any, queues: Sequence[str]) -> bool:
    """A selector's ``matchExpressions`` on the ``queue`` label: ``In`` queues the pool serves (as ``matchLabels``
    would name one); any other operator on it selects series qsim cannot tell apart, and is not honoured.
    Whether one names the queue."""
    named = False
    for i, e in enumerate(_listing(where, path, value)):
        e = _mapping(where, f"{path}[{i}]", e)
        if e.get("key") != "queue":
            continue
        if e.get("operator") != "In":
            where.unhonoured(f"{path}[{i}].operator", f"is {e.get('operator')!r} on the queue label (qsim reads "
                                                      "the queues a selector names: matchLabels, or operator In)")
            continue
        for j, name in enumerate(_listing(where, f"{path}[{i}].values", e.get("values"))):
            _queue_named(where, f"{path}[{i}].values[{j}]", str(name), queues)
            named = True
    return named


#: PromQL's aggregations other than max.
_NOT_MAX = "sum|avg|count|min|quantile|stddev|stdvar|topk|bottomk"


def _opening(names: str) -> str:
    """The pattern of one of the aggregations ``names`` opening its parenthesis (``sum by (queue) (``,
    ``topk(3, ``)."""
    return rf"\b({names})\s*(?:(?:by|without)\s*\([^)]*\)\s*)?\(\s*(?:[0-9.]+\s*,\s*)?"


#: Aggregations that, applied straight to a gauge every worker exports, do not read the queue's value once.
_SPREADING = re.compile(_opening(_NOT_MAX) + r"(qsim_queue_jobs|qsim_queue_oldest_waiting_age_seconds)\b")


def _bare(query: str) -> str:
    """A PromQL query without its strings, label matchers and ranges (what is left: functions and operators)."""
    return re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", re.sub(r'"(?:[^"\\]|\\.)*"', '""', query))


def _query_shape(where: _Where, path: str, query: str) -> None:
    """Refuse what the metric name alone would misread: arithmetic, an ``*_over_time`` or ``offset``, and an
    aggregation other than ``max`` straight over a gauge every worker exports (``sum`` reads N times the backlog)."""
    bare = _bare(query)
    if re.search(r"[*/+%^-]", bare) or re.search(r"\b\w+_over_time\s*\(|\boffset\b", bare):
        where.unhonoured(path, f"is {query!r}: arithmetic, an *_over_time or an offset on the series, which qsim "
                               "does not model (it reads the series as the queries --emit writes do)")
    m = _SPREADING.search(bare)
    if m:
        where.unhonoured(path, f"is {query!r}: {m.group(1)} over {m.group(2)}, a gauge every worker exports with the "
                               "queue's one value, reads it once per worker (qsim reads max(...), as --emit writes)")


def _one_value(where: _Where, path: str, query: str, queues: Sequence[str]) -> None:
    """Refuse a query of a metric qsim reads that does not give the one value of the pool's queue: a comparison
    (a filter), a grouping by another label than queue and state, a gauge not aggregated (a series per worker),
    a histogram_quantile without ``sum by (le)``, or no queue label (every queue's series)."""
    bare = _bare(query)
    if re.search(r"[<>]|==|!=|\bbool\b", bare):
        where.unhonoured(path, f"is {query!r}: a comparison filters the series (it reads as nothing on the other side "
                               "of it), which qsim does not model")
    for grouping, labels in re.findall(r"\b(by|without)\s*\(([^)]*)\)", bare):
        other = {x.strip() for x in labels.split(",") if x.strip()} - {"queue", "state", "le"}
        if grouping == "without" or other:
            per = "label left" if grouping == "without" else ", ".join(sorted(other))
            where.unhonoured(path, f"is {query!r}: {grouping} ({labels.strip()}) keeps a series per {per}, where "
                                   "KEDA needs one value (qsim groups by queue and state at most)")
    for gauge in re.finditer(r"\b(?:qsim_queue_jobs|qsim_queue_oldest_waiting_age_seconds|qsim_bullmq_jobs|"
                             r"qsim_bullmq_oldest_waiting_age_seconds|qsim_recommended_workers|"
                             r"qsim_advice_observed_workers)\b", bare):
        if not re.search(_opening("max|" + _NOT_MAX) + "$", bare[:gauge.start()]):
            where.unhonoured(path, f"is {query!r}: {gauge.group(0)} is not aggregated, so it reads a series per "
                                   "worker where KEDA needs one value (qsim reads max(...), as --emit writes)")
            break
    if "qsim_job_wait_seconds_bucket" in bare and not re.search(r"\bsum\s*by\s*\(\s*(?:queue\s*,\s*)?le\b", bare):
        where.unhonoured(path, f"is {query!r}: histogram_quantile over the buckets without sum by (le) reads a "
                               "quantile per worker, not the queue's (qsim reads sum by (le) (rate(...)), as --emit "
                               "writes)")
    if not re.search(r'queue\s*(=~|=)\s*"', query):
        where.unhonoured(path, f"is {query!r}: it names no queue, so it reads every queue's series (qsim reads the "
                               f"pool's: queue=\"{','.join(queues)}\")")


def query_metric(where: _Where, path: str, query: str, queues: Sequence[str]) -> tuple[str, float | None]:
    """The metric a PromQL query on qsim's series reads, and its window (s) for ``p95_wait``."""
    _query_shape(where, path, query)
    metric, window = _metric_of(where, path, query, queues)
    _one_value(where, path, query, queues)
    return metric, window


def _metric_of(where: _Where, path: str, query: str, queues: Sequence[str]) -> tuple[str, float | None]:
    """The metric a query reads (by the series it names), its window (s) for ``p95_wait``."""
    for op, literal in re.findall(r'queue\s*(=~|=)\s*"((?:[^"\\]|\\.)*)"', query):
        try:
            label = json.loads(f'"{literal}"')  # PromQL's string escapes (Go's): \" and \\ as in JSON
        except ValueError:
            raise where.error(path, f"has a queue label qsim cannot read: {literal!r}") from None
        names = [re.sub(r"\\(.)", r"\1", n) for n in re.split(r"(?<!\\)\|", label)] if op == "=~" else [label]
        for name in names:
            _queue_named(where, path, name, queues)
    if "qsim_recommended_workers" in query:
        return "recommended_workers", None
    if "qsim_queue_oldest_waiting_age_seconds" in query or "qsim_bullmq_oldest_waiting_age_seconds" in query:
        return "oldest_age", None
    for series in ("qsim_queue_jobs", "qsim_bullmq_jobs"):  # a qsim queue's, a BullMQ queue's (the advisor's)
        if series in query:
            if re.search(r'state\s*=~\s*"(waiting\|active|active\|waiting)"', query):
                return "in_flight", None
            if not re.search(r'state\s*=\s*"waiting"', query):
                raise where.error(path, f"reads {series} without state=\"waiting\": qsim scales on the waiting "
                                        "jobs (or waiting|active: in_flight)")
            return "list_length", None
    if "qsim_job_wait_seconds_bucket" in query:
        m = re.search(r"histogram_quantile\(\s*0\.95\s*,.*\[([0-9a-z]+)\]", query, re.S)
        if not m:
            raise where.error(path, "reads the wait histogram but not as histogram_quantile(0.95, ... [RANGE]): "
                                    "qsim's p95_wait is the 95th percentile over a range")
        return "p95_wait", duration(where, f"{path} range", m.group(1))
    raise where.error(path, f"reads none of the metrics qsim exports ({', '.join(sorted(EXPORTED.values()))}"
                            f", qsim_job_wait_seconds_bucket): {query!r}")


def _list_queue(where: _Where, path: str, name: str, queues: Sequence[str]) -> None:
    """A redis trigger's listName: the queue, or a waiting list of it (``bull:orders:wait``); never qsim's own
    ``qsim:{orders}:wait``, a sorted set."""
    parts = name.split(":")
    if len(parts) >= 3 and parts[-1] == "wait" and parts[-2].startswith("{"):
        raise where.error(path, f"is {name!r}, qsim's waiting set: a sorted set, which KEDA's redis list trigger "
                                "cannot read (LLEN); scale on qsim_queue_jobs{state=\"waiting\"} with a prometheus "
                                "trigger")
    stem = parts[-2] if len(parts) >= 3 and parts[-1] == "wait" else name
    _queue_named(where, path, stem, queues)


def trigger(where: _Where, path: str, value: Any, queues: Sequence[str]) -> dict[str, Any] | None:
    """One KEDA trigger as metric keys (``metric``, ``target``, ``metric_type``, ``activation``, ``window``)."""
    t = _mapping(where, path, value)
    kind = t.get("type")
    meta = _mapping(where, f"{path}.metadata", t.get("metadata"))
    mtype = t.get("metricType", "AverageValue")
    if mtype not in ("AverageValue", "Value"):
        where.unhonoured(f"{path}.metricType", f"is {mtype!r} (qsim reads AverageValue or Value)")
        return None
    if kind in REDIS_TRIGGERS:  # one list's length (LLEN), whichever way KEDA reaches the Redis
        if "listName" not in meta:
            raise where.error(f"{path}.metadata.listName", "is required for a redis trigger")
        _list_queue(where, f"{path}.metadata.listName", str(meta["listName"]), queues)
        # KEDA parses both as whole numbers (int64)
        return {"metric": "list_length", "metric_type": mtype, "source": "redis",
                "target": float(_whole(where, f"{path}.metadata.listLength", meta.get("listLength", "5"), 1)),
                "activation": float(_whole(where, f"{path}.metadata.activationListLength",
                                           meta.get("activationListLength", "0"), 0))}
    if kind == "prometheus":
        if "query" not in meta or "threshold" not in meta:
            raise where.error(f"{path}.metadata", "needs query and threshold (a prometheus trigger)")
        metric, window = query_metric(where, f"{path}.metadata.query", str(meta["query"]), queues)
        out: dict[str, Any] = {"metric": metric, "metric_type": mtype,
                               "target": _positive(where, f"{path}.metadata.threshold", meta["threshold"]),
                               "activation": quantity(where, f"{path}.metadata.activationThreshold",
                                                      meta.get("activationThreshold", "0"))}
        if any(series in str(meta["query"]) for series in _WORKER_SERIES):
            out["metric_from"] = "workers"
        if "ignoreNullValues" in meta:
            flag = str(meta["ignoreNullValues"]).strip()
            if flag not in _BOOL:
                raise where.error(f"{path}.metadata.ignoreNullValues", f"must be true or false, got "
                                                                        f"{meta['ignoreNullValues']!r}")
            if not _BOOL[flag]:
                out["ignore_null"] = False
        if window is not None:
            out["window"] = window
        return out
    where.unhonoured(f"{path}.type", f"is {kind!r} (qsim reads redis list triggers and prometheus triggers on "
                                     "its own metrics)")
    return None


def external_metric(where: _Where, path: str, value: Any, queues: Sequence[str]) -> dict[str, Any] | None:
    """One HPA ``metrics`` entry: an External metric qsim exports, as metric keys."""
    m = _mapping(where, path, value)
    if m.get("type") != "External":
        where.unhonoured(f"{path}.type", f"is {m.get('type')!r} (qsim scales on External metrics it exports, "
                                         "not on CPU or other pod metrics)")
        return None
    ext = _mapping(where, f"{path}.external", m.get("external"))
    metric = _mapping(where, f"{path}.external.metric", ext.get("metric"))
    names = {v: k for exported in (EXPORTED, BULLMQ_EXPORTED) for k, v in exported.items()}
    if not isinstance(metric.get("name"), str) or metric.get("name") not in names:
        where.unhonoured(f"{path}.external.metric.name", f"is {metric.get('name')!r}, not a metric qsim exports "
                                                         f"({', '.join(sorted(names))})")
        return None
    selector = _mapping(where, f"{path}.external.metric.selector", metric.get("selector"))
    labels = _mapping(where, f"{path}.external.metric.selector.matchLabels", selector.get("matchLabels"))
    if "queue" in labels:
        _queue_named(where, f"{path}.external.metric.selector.matchLabels.queue", str(labels["queue"]), queues)
    expressions = _queue_expressions(where, f"{path}.external.metric.selector.matchExpressions",
                                     selector.get("matchExpressions"), queues)
    if "queue" not in labels and not expressions:
        where.unhonoured(f"{path}.external.metric.selector", "names no queue: the metric has a series per queue, and "
                                                             "the HPA would add up every queue's (qsim reads the "
                                                             f"pool's: matchLabels queue: {','.join(queues)})")
    if names[metric["name"]] == "list_length" and labels.get("state") != "waiting":
        where.unhonoured(f"{path}.external.metric.selector.matchLabels.state",
                         f"is {labels.get('state')!r}: {metric['name']} has a series per state, and list_length is "
                         "the waiting jobs' (state: waiting)")
    target = _mapping(where, f"{path}.external.target", ext.get("target"))
    kind = target.get("type")
    if kind not in ("AverageValue", "Value"):
        raise where.error(f"{path}.external.target.type", f"must be AverageValue or Value, got {kind!r}")
    key = "averageValue" if kind == "AverageValue" else "value"
    out = {"metric": names[metric["name"]], "metric_type": kind,
           "target": _positive(where, f"{path}.external.target.{key}", target.get(key)), "activation": 0.0}
    if metric["name"] in EXPORTED.values():  # the workers' (the adapter's names); no ignoreNullValues: a series that is not there is an error
        out.update(metric_from="workers", ignore_null=False)
    return out


# ------------------------------------------------------------------ the objects


def scaled_object(where: _Where, doc: Mapping[str, Any], queues: Sequence[str]) -> dict[str, Any]:
    """A KEDA ScaledObject's autoscaler keys (common keys, metric, behaviour)."""
    spec = _mapping(where, "spec", doc.get("spec"))
    known = _INERT_SPEC | {"minReplicaCount", "maxReplicaCount", "pollingInterval", "cooldownPeriod", "advanced",
                           "triggers", "idleReplicaCount", "initialCooldownPeriod", "fallback"}
    _unknown_keys(where, "spec", spec, known)
    low = _whole(where, "spec.minReplicaCount", spec.get("minReplicaCount", 0), 0)
    high = _whole(where, "spec.maxReplicaCount", spec.get("maxReplicaCount", 100), 1)
    if low > high:
        raise where.error("spec.minReplicaCount", f"must be <= maxReplicaCount ({high}), got {low}")
    if "idleReplicaCount" in spec:
        idle = _whole(where, "spec.idleReplicaCount", spec["idleReplicaCount"], 0)
        if idle == 0 and low == 1:
            low = 0  # scale to zero when inactive, at least one when active: qsim's min = 0
        else:
            where.unhonoured("spec.idleReplicaCount", f"is {idle} with minReplicaCount {low} (qsim honours "
                                                      "idleReplicaCount 0 with minReplicaCount 1, as min = 0)")
    table: dict[str, Any] = {
        "min": low, "max": high,
        "poll": float(_whole(where, "spec.pollingInterval", spec.get("pollingInterval", 30), 1)),
        "cooldown": float(_whole(where, "spec.cooldownPeriod", spec.get("cooldownPeriod", 300), 0))}
    if "initialCooldownPeriod" in spec:
        table["initial_cooldown"] = float(_whole(where, "spec.initialCooldownPeriod", spec["initialCooldownPeriod"], 0))
    if spec.get("fallback") is not None:
        table.update(fallback(where, "spec.fallback", spec["fallback"]))
    advanced = _mapping(where, "spec.advanced", spec.get("advanced"))
    _unknown_keys(where, "spec.advanced", advanced, ("horizontalPodAutoscalerConfig", "restoreToOriginalReplicaCount"))
    hpa = _mapping(where, "spec.advanced.horizontalPodAutoscalerConfig", advanced.get("horizontalPodAutoscalerConfig"))
    _unknown_keys(where, "spec.advanced.horizontalPodAutoscalerConfig", hpa, ("behavior", "name"))
    table.update(behavior(where, "spec.advanced.horizontalPodAutoscalerConfig.behavior", hpa.get("behavior")))
    triggers = _listing(where, "spec.triggers", spec.get("triggers"))
    cron = [i for i, t in enumerate(triggers) if isinstance(t, Mapping) and t.get("type") == "cron"]
    metrics = [None if i in cron else trigger(where, f"spec.triggers[{i}]", t, queues)
               for i, t in enumerate(triggers)]
    if cron:
        table.update(cron_floors(where, "spec.triggers", {i: triggers[i] for i in cron}))
        if not any(m is not None for m in metrics):
            return table
    table.update(_one_metric(where, "spec.triggers", metrics))
    return table


def fallback(where: _Where, path: str, value: Any) -> dict[str, Any]:
    """A ScaledObject's ``fallback`` (``failureThreshold``, ``replicas``: both required, >= 0; ``behavior``)
    as ``fallback_failures``, ``fallback_replicas`` and, when not ``static``, ``fallback_behavior``."""
    f = _mapping(where, path, value)
    _unknown_keys(where, path, f, ("failureThreshold", "replicas", "behavior"))
    for key in ("failureThreshold", "replicas"):
        if key not in f:
            raise where.error(f"{path}.{key}", "is required (KEDA's fallback)")
    behavior = f.get("behavior", "static")
    if behavior not in FALLBACK_BEHAVIORS:
        raise where.error(f"{path}.behavior", f"must be one of {', '.join(FALLBACK_BEHAVIORS)}, got {behavior!r}")
    return {"fallback_failures": _whole(where, f"{path}.failureThreshold", f["failureThreshold"], 0),
            "fallback_replicas": _whole(where, f"{path}.replicas", f["replicas"], 0),
            **({"fallback_behavior": behavior} if behavior != "static" else {})}


def hpa_object(where: _Where, doc: Mapping[str, Any], queues: Sequence[str]) -> dict[str, Any]:
    """An autoscaling/v2 HorizontalPodAutoscaler's autoscaler keys."""
    spec = _mapping(where, "spec", doc.get("spec"))
    _unknown_keys(where, "spec", spec, ("scaleTargetRef", "minReplicas", "maxReplicas", "metrics", "behavior"))
    low = _whole(where, "spec.minReplicas", spec.get("minReplicas", 1), 0)
    if "maxReplicas" not in spec:
        raise where.error("spec.maxReplicas", "is required")
    high = _whole(where, "spec.maxReplicas", spec["maxReplicas"], 1)
    if low > high:
        raise where.error("spec.minReplicas", f"must be <= maxReplicas ({high}), got {low}")
    table: dict[str, Any] = {"min": low, "max": high}
    if low == 0:  # the HPAScaleToZero feature gate: the HPA itself goes to and from zero
        table["keda"] = False
    table.update(behavior(where, "spec.behavior", spec.get("behavior")))
    metrics = [external_metric(where, f"spec.metrics[{i}]", m, queues)
               for i, m in enumerate(_listing(where, "spec.metrics", spec.get("metrics")))]
    table.update(_one_metric(where, "spec.metrics", metrics))
    return table


def _one_metric(where: _Where, path: str, metrics: list[dict[str, Any] | None]) -> dict[str, Any]:
    """The one metric qsim's autoscaler holds: the first honoured; the others are named."""
    read = [(i, m) for i, m in enumerate(metrics) if m is not None]
    if not read:
        raise where.error(path, "has no metric qsim can scale on (a redis list trigger, or a metric qsim exports)")
    for i, _ in read[1:]:
        where.unhonoured(f"{path}[{i}]", f"is a second metric (KEDA and the HPA scale on the max of them; qsim's "
                                         f"autoscaler holds one: it reads {path}[{read[0][0]}])")
    return read[0][1]


_ENV_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _expanded(where: _Where, path: str, argv: Sequence[str], container: Mapping[str, Any]) -> list[str]:
    """``argv`` with ``$(VAR)`` replaced as Kubernetes replaces it, from the container's ``env`` values; a flag
    whose value comes from elsewhere (``valueFrom``: a ConfigMap, a Secret) is not honoured and left out."""
    env = {str(e["name"]): str(e["value"]) for e in _listing(where, path.rsplit(".", 1)[0] + ".env",
                                                                  container.get("env"))
           if isinstance(e, Mapping) and "name" in e and "value" in e}
    out: list[str] = []
    for arg in argv:
        missing = [v for v in _ENV_REF.findall(arg) if v not in env]
        if missing:
            where.unhonoured(path, f"has {arg!r}, whose $({missing[0]}) is not a value in the container's env (qsim "
                                   "cannot read a ConfigMap or Secret): the flag is read as not given")
            if not arg.startswith("-") and out and out[-1].startswith("--") and "=" not in out[-1]:
                out.pop()  # the flag whose value it was
            continue
        out.append(_ENV_REF.sub(lambda m: env[m.group(1)], arg))
    return out


def _worker_container(where: _Where, containers: Sequence[Mapping[str, Any]],
                      queues: Sequence[str]) -> tuple[int, list[str]] | None:
    """The index and ``qsim worker`` arguments of the container serving the pool's ``queues`` (None: no container
    runs ``qsim worker``). A pod whose worker containers serve other queues, or two that serve these, is an
    error naming them: which one the pool is cannot be told."""
    found = []  # (index, arguments, queues) of each container running qsim worker
    for i, c in enumerate(containers):
        at = f"spec.template.spec.containers[{i}]"
        argv = qsim_args(_listing(where, f"{at}.command", c.get("command")),
                         _listing(where, f"{at}.args", c.get("args")), "worker")
        if argv is not None:
            found.append((i, argv, worker_queues(argv)))
    if not found:
        return None
    serving = [f for f in found if sorted(f[2]) == sorted(queues)]
    unnamed = [f for f in found if not f[2]]  # queues from the environment
    if len(serving) == 1 or (not serving and len(unnamed) == 1):
        i, argv, _ = (serving or unnamed)[0]
        return i, argv
    paths = ", ".join(f"spec.template.spec.containers[{f[0]}]" for f in (serving or unnamed or found))
    if serving or unnamed:
        raise where.error(paths, f"run qsim worker on the pool's queues ({', '.join(queues)}) in several "
                                 "containers of one pod: qsim reads one worker per pod")
    served = "; ".join(", ".join(f[2]) for f in found)
    raise where.error(paths, f"run qsim worker on other queues ({served}) than the pool serves "
                             f"({', '.join(queues)}): give the pool's Deployment, or --pool the pool it is")


def deployment(where: _Where, doc: Mapping[str, Any], queues: Sequence[str]) -> dict[str, Any]:
    """The worker Deployment's pool settings: replicas, grace, and the flags of the ``qsim worker`` container
    serving ``queues``."""
    spec = _mapping(where, "spec", doc.get("spec"))
    pod = _mapping(where, "spec.template.spec",
                   _mapping(where, "spec.template", spec.get("template")).get("spec"))
    out: dict[str, Any] = {"workers": _whole(where, "spec.replicas", spec.get("replicas", 1), 0)}
    period = _whole(where, "spec.template.spec.terminationGracePeriodSeconds",
                    pod.get("terminationGracePeriodSeconds", 30), 0)
    containers = [_mapping(where, f"spec.template.spec.containers[{i}]", c)
                  for i, c in enumerate(_listing(where, "spec.template.spec.containers", pod.get("containers")))]
    worker = _worker_container(where, containers, queues)
    pre_stop = 0.0
    flags: dict[str, Any] = {}
    if worker is not None:
        i, argv = worker
        at = f"spec.template.spec.containers[{i}]"
        pre_stop = _pre_stop(where, f"{at}.lifecycle.preStop", containers[i])
        flags = worker_flags(where, f"{at}.args", _expanded(where, f"{at}.args", argv, containers[i]))
    elif len(containers) == 1:  # another runtime's worker (BullMQ's): its preStop is taken from the grace too
        pre_stop = _pre_stop(where, "spec.template.spec.containers[0].lifecycle.preStop", containers[0])
    out.update(termination_grace_period=float(period), pre_stop=pre_stop)
    grace = max(0.0, period - pre_stop)
    if worker is not None:  # the worker drains for at most its --shutdown-grace (30 s when not given)
        grace = min(grace, flags.pop("shutdown_grace", WORKER_SHUTDOWN_GRACE))
    out["grace"] = grace
    out.update(flags)
    return out


def _pre_stop(where: _Where, path: str, container: Mapping[str, Any]) -> float:
    """The seconds a preStop hook sleeps (``sleep N`` as exec, or the ``sleep`` action); 0 without one."""
    lifecycle = _mapping(where, path.rsplit(".", 1)[0], container.get("lifecycle"))
    hook = _mapping(where, path, lifecycle.get("preStop"))
    if not hook:
        return 0.0
    if "sleep" in hook:
        return float(_whole(where, f"{path}.sleep.seconds", _mapping(where, path, hook["sleep"]).get("seconds"), 0))
    command = [str(x) for x in _listing(where, f"{path}.exec.command",
                                         _mapping(where, f"{path}.exec", hook.get("exec")).get("command"))]
    words = " ".join(command).replace(";", " ").split()
    if "sleep" in words and words.index("sleep") + 1 < len(words):
        m = re.fullmatch(r"(\d+(?:\.\d*)?)([smh]?)", words[words.index("sleep") + 1])  # coreutils' sleep 10, 10s, 1m
        if m:
            return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]
    where.unhonoured(path, "is a hook qsim cannot time (it reads a preStop sleep); its time is not taken "
                           "from the grace")
    return 0.0


def worker_flags(where: _Where, path: str, argv: Sequence[str]) -> dict[str, Any]:
    """The flags of ``qsim worker ARGS`` that the simulation has: concurrency, prefetch, shutdown grace, advice."""
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for flag in ("--concurrency", "--prefetch", "--shutdown-grace", "--advise-window"):
        p.add_argument(flag)
    p.add_argument("--advise-slo", action="append")
    known, _ = p.parse_known_args(list(argv))
    concurrency = known.concurrency or WORKER_CONCURRENCY
    out: dict[str, Any] = {"concurrency": _whole(where, f"{path} --concurrency", concurrency, 1)}
    if known.prefetch is not None:
        out["prefetch"] = (known.prefetch if known.prefetch == "auto"
                           else _whole(where, f"{path} --prefetch", known.prefetch, 0))
    if known.shutdown_grace is not None:
        x = quantity(where, f"{path} --shutdown-grace", known.shutdown_grace)
        if not x >= 0:
            raise where.error(f"{path} --shutdown-grace", f"must be >= 0, got {known.shutdown_grace!r}")
        out["shutdown_grace"] = x
    slos = known.advise_slo or []
    if len(slos) > 1:
        where.unhonoured(f"{path} --advise-slo", f"is given {len(slos)} times (qsim's advisor policy holds one "
                                                 f"SLO: it reads the first, {slos[0]!r})")
    if slos:
        if not SLO_SHAPE.match(slos[0]):
            raise where.error(f"{path} --advise-slo", f"must be an SLO like p95_wait<=2, got {slos[0]!r}")
        out["advise_slo"] = slos[0].strip()
        out["advise_window"] = duration(where, f"{path} --advise-window", known.advise_window or "15m")
    return out


def advisor_flags(docs: Sequence[tuple[str, Mapping[str, Any]]], queues: Sequence[str]) -> dict[str, Any]:
    """The SLO and window of a ``qsim advise`` Deployment for ``queues`` among ``docs`` (the advisor a trigger
    reads; ``{}``: none), with its ``name``."""
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    p.add_argument("--queue", action="append")
    p.add_argument("--slo", action="append")
    p.add_argument("--window", default="15m")
    for file, doc in docs:
        if doc.get("kind") != "Deployment":
            continue
        for c in _containers(doc):
            argv = qsim_args(c.get("command") or [], c.get("args") or [], "advise")
            if argv is None:
                continue
            known, _ = p.parse_known_args(argv)
            if sorted(known.queue or []) != sorted(queues) or not known.slo:
                continue
            where = _Where(file, "Deployment", _name(doc), False)
            return {"name": _name(doc), "advise_slo": known.slo[0].strip(),
                    "advise_window": duration(where, "qsim advise --window", known.window)}
    return {}


# ------------------------------------------------------------------ files -> tables


def _documents(files: Sequence[str | os.PathLike[str]]) -> list[tuple[str, Mapping[str, Any]]]:
    docs: list[tuple[str, Mapping[str, Any]]] = []
    for f in files:
        try:
            text = Path(f).read_text(encoding="utf-8")
            loaded = list(yaml.safe_load_all(text))
        except OSError as e:
            raise ScenarioError(f"{f}: cannot read: {e.strerror or e}") from e
        except UnicodeDecodeError as e:
            raise ScenarioError(f"{f}: not UTF-8 text (Kubernetes YAML is UTF-8): byte {e.object[e.start]:#04x} at "
                                f"offset {e.start}") from None
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where_ = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
            what = getattr(e, "problem", None) or str(e).splitlines()[0]
            raise ScenarioError(f"{f}: not valid YAML: {what}{where_}") from None
        for i, d in enumerate(loaded):
            if d is None:
                continue
            if not isinstance(d, Mapping):
                raise ScenarioError(f"{f}: document {i + 1} is not a Kubernetes object (a mapping)")
            if d.get("kind") == "List" and isinstance(d.get("items"), list):  # as kubectl get -o yaml prints
                for k, item in enumerate(d["items"]):
                    if not isinstance(item, Mapping):
                        raise ScenarioError(f"{f}: document {i + 1}: items[{k}] is not a Kubernetes object")
                    docs.append((str(f), item))
                continue
            docs.append((str(f), d))
    return docs


def _external_name(hpa: Mapping[str, Any]) -> str:
    metrics = (hpa.get("spec") or {}).get("metrics") or [{}]
    return str(((metrics[0].get("external") or {}).get("metric") or {}).get("name", ""))


def _adapter_window(docs: Sequence[tuple[str, Mapping[str, Any]]], name: str) -> float | None:
    """The range (s) of the prometheus-adapter external rule that serves ``name``, from a ConfigMap among
    ``docs`` (the rule ``--emit hpa`` writes beside the bundle); None: no such rule given."""
    for file, d in docs:  # the rule file itself, or the adapter's ConfigMap holding it
        configs: dict[str, Any] = {"externalRules": d} if "externalRules" in d else {}
        if d.get("kind") == "ConfigMap" and isinstance(d.get("data"), Mapping):
            for key, text in d["data"].items():
                try:
                    configs[f"data[{key}].externalRules"] = yaml.safe_load(str(text))
                except yaml.YAMLError:
                    continue
        for key, config in configs.items():
            rules = config.get("externalRules") if isinstance(config, Mapping) else None
            for i, rule in enumerate(rules if isinstance(rules, list) else []):
                named = rule.get("name") if isinstance(rule, Mapping) else None
                if isinstance(named, Mapping) and named.get("as") == name:
                    m = re.search(r"\[([0-9a-z]+)\]", str(rule.get("metricsQuery", "")))
                    if m:
                        where = _Where(file, str(d.get("kind", "prometheus-adapter")), _name(d), False)
                        return duration(where, f"{key}[{i}].metricsQuery range", m.group(1))
    return None


def _containers(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A Deployment's containers that are mappings (a Deployment the autoscaler does not target may be written
    any way: only the one it targets is read field by field, with errors naming the field)."""
    node: Any = doc
    for key in ("spec", "template", "spec", "containers"):
        node = node.get(key) if isinstance(node, Mapping) else None
    return [c for c in node if isinstance(c, Mapping)] if isinstance(node, list) else []


def _is_advisor(doc: Mapping[str, Any]) -> bool:
    """Whether a Deployment runs ``qsim advise`` (a bundle's advisor: not a worker Deployment)."""
    return any(qsim_args(c.get("command") or [], c.get("args") or [], "advise") is not None for c in _containers(doc))


def _namespace(doc: Mapping[str, Any]) -> str | None:
    meta = doc.get("metadata")
    return str(meta["namespace"]) if isinstance(meta, Mapping) and meta.get("namespace") else None


def _name(doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata")
    return str(meta.get("name", "?")) if isinstance(meta, Mapping) else "?"


def read_objects(files: Sequence[str | os.PathLike[str]], queues: Sequence[str], *, slo: str | None = None,
                 ignore_unknown: bool = False) -> K8sRead:
    """Read the autoscaler object and its Deployment from ``files`` for a pool serving ``queues``.

    ``slo``: the advisor's SLO when the Deployment carries no ``--advise-slo``
    (the ``qsim`` policy and the ``recommended_workers`` metric need one).

    Raises:
        ScenarioError: no autoscaler object or several, a field not honoured
            (unless ``ignore_unknown``), a value outside the API's range.
    """
    docs = _documents(files)
    try:
        return _read(docs, files, queues, slo, ignore_unknown)
    except ScenarioError:
        raise
    except (AttributeError, TypeError, KeyError, IndexError, ValueError) as e:
        # a field of a shape the reader does not check (each it checks is named with its path)
        raise ScenarioError(f"--k8s: {', '.join(map(str, files))}: an object has a field of the wrong shape, so it "
                            f"is not one Kubernetes would accept ({type(e).__name__}: {e})") from None


def _read(docs: list[tuple[str, Mapping[str, Any]]], files: Sequence[str | os.PathLike[str]], queues: Sequence[str],
          slo: str | None, ignore_unknown: bool) -> K8sRead:
    """:func:`read_objects` of the documents read from ``files``."""
    scalers = [(f, d) for f, d in docs if (d.get("apiVersion"), d.get("kind")) in
               ((_KEDA, "ScaledObject"), *(((v, "HorizontalPodAutoscaler")) for v in _HPA_VERSIONS))]
    if len(scalers) != 1:
        found = ", ".join(f"{d.get('kind')} {_name(d)}" for _, d in scalers) or "none"
        other = [f"{d.get('kind')} {_name(d)} ({d.get('apiVersion')})" for _, d in docs
                 if d.get("kind") in ("ScaledObject", "HorizontalPodAutoscaler") and (_, d) not in scalers]
        if not scalers and other:
            found += f" of those API versions ({', '.join(other)}; an autoscaling/v1 HPA has no external metrics)"
        raise ScenarioError(f"--k8s: give one KEDA ScaledObject ({_KEDA}) or HorizontalPodAutoscaler ({_HPA}) "
                            f"in {', '.join(map(str, files))}; found {found}")
    file, obj = scalers[0]
    where = _Where(file, str(obj["kind"]), _name(obj), ignore_unknown)
    annotations = _mapping(where, "metadata.annotations", _mapping(where, "metadata", obj.get("metadata"))
                           .get("annotations"))
    for key in ("autoscaling.keda.sh/paused-replicas", "autoscaling.keda.sh/paused"):
        if obj["kind"] == "ScaledObject" and key in annotations and str(annotations[key]).lower() != "false":
            where.unhonoured(f"metadata.annotations[{key}]", f"is {annotations[key]!r}: KEDA does not autoscale a "
                                                             "paused ScaledObject (remove it to replay the autoscaler)")
    table = (scaled_object if obj["kind"] == "ScaledObject" else hpa_object)(where, obj, queues)
    ref = _mapping(where, "spec.scaleTargetRef", _mapping(where, "spec", obj.get("spec")).get("scaleTargetRef"))
    target = ref.get("name")
    if not target:
        raise where.error("spec.scaleTargetRef.name", "is required")
    if ref.get("kind", "Deployment") != "Deployment":
        where.unhonoured("spec.scaleTargetRef.kind", f"is {ref.get('kind')!r} (qsim reads a Deployment's workers)")
    deployments = [(f, d) for f, d in docs if d.get("kind") == "Deployment" and _name(d) == target]
    namespace = _namespace(obj)
    if len({_namespace(d) for _, d in deployments}) > 1:  # the target is in the autoscaler's namespace
        deployments = [(f, d) for f, d in deployments if _namespace(d) == namespace]
        if len(deployments) != 1:
            raise where.error("metadata.namespace", f"is {namespace or 'not given'}, and the Deployments named "
                                                    f"{target!r} are in several namespaces: give the autoscaler's "
                                                    "namespace, or only its Deployment")
    pool: dict[str, Any] = {}
    objects = [f"{obj['kind']} {where.name} ({file})"]
    if deployments:
        dfile, dep = deployments[0]
        if dep.get("apiVersion") != "apps/v1":
            raise ScenarioError(f"{dfile}: Deployment {target}: apiVersion must be apps/v1, got "
                                f"{dep.get('apiVersion')!r}")
        dwhere = _Where(dfile, "Deployment", str(target), ignore_unknown, where.ignored)
        pool = deployment(dwhere, dep, queues)
        objects.append(f"Deployment {target} ({dfile})")
        if obj["kind"] == "ScaledObject" and pool["workers"] == 0 and table["min"] >= 1:
            pool["workers"] = table["min"]  # KEDA lifts a target at 0 replicas at its first loop (an HPA would not;
            # above 0 the HPA itself raises the Deployment to minReplicas at its first sync, as simulated)
    elif any(d.get("kind") == "Deployment" and not _is_advisor(d) for _, d in docs):
        raise where.error("spec.scaleTargetRef.name", f"is {target!r}, and no Deployment given is named so")
    advisor = advisor_flags(docs, queues)
    advise_slo = pool.pop("advise_slo", None) or advisor.get("advise_slo") or slo
    advise_window = pool.pop("advise_window", None) or advisor.get("advise_window")
    if advisor:
        objects.append(f"Deployment {advisor['name']} (qsim advise)")
    if "grace" in pool:
        table["grace"] = pool["grace"]
    if obj["kind"] == "HorizontalPodAutoscaler" and table.get("metric") == "p95_wait":
        window = _adapter_window(docs, _external_name(obj))  # the range lives in prometheus-adapter's rule
        if window is not None:
            table["window"] = window
    metric = table.pop("metric", None)
    source = table.pop("source", "metrics")
    if metric == "recommended_workers" and advisor:  # the advisor Deployment exports it with no worker
        table.pop("metric_from", None)
        if obj["kind"] != "ScaledObject":
            table.pop("ignore_null", None)  # an HPA's: implied by a series that may vanish
    if "floors" in table:
        table = {"policy": "schedule", **({"metric": metric} if metric is not None else {}), **table}
        if metric == "recommended_workers" and advise_window is not None:
            table["window"] = advise_window
    elif metric == "recommended_workers" and table["metric_type"] == "AverageValue" and table["target"] == 1:
        table = {"policy": "qsim", **{k: v for k, v in table.items() if k not in ("metric_type", "target")}}
        table["window"] = advise_window if advise_window is not None else 900.0
    else:
        table = {"policy": "hpa", "metric": metric, **table}
        if metric == "recommended_workers" and advise_window is not None:
            table["window"] = advise_window
    if table["policy"] == "qsim" or metric == "recommended_workers":
        if advise_slo is None:
            raise where.error("spec", "scales on qsim_recommended_workers, and the Deployment carries no "
                                      "--advise-slo: give the advisor's SLO (qsim autoscale passes --slo)")
        table["slo"] = advise_slo
    return K8sRead(autoscaler=table, pool=pool, ignored=tuple(where.ignored), objects=tuple(objects),
                   deployment=deployments[0][1] if deployments else None, source=source,
                   connection=_connection(obj) if obj["kind"] == "ScaledObject" else {})


#: Trigger metadata keys that say what is read (qsim's), not where from.
_READ_KEYS = {"prometheus": ("query", "threshold", "activationThreshold", "ignoreNullValues"),
              **{kind: ("listName", "listLength", "activationListLength") for kind in REDIS_TRIGGERS}}


def _connection(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The reactive trigger's connection (:attr:`K8sRead.connection`)."""
    for t in (obj.get("spec") or {}).get("triggers") or []:
        if isinstance(t, Mapping) and t.get("type") in _READ_KEYS:
            meta: Mapping[str, Any] = t["metadata"] if isinstance(t.get("metadata"), Mapping) else {}
            out: dict[str, Any] = {"type": t["type"], "metadata": {k: v for k, v in meta.items()
                                                                   if k not in _READ_KEYS[t["type"]]}}
            if t.get("authenticationRef"):
                out["authenticationRef"] = t["authenticationRef"]
            return out
    return {}


def apply_k8s(scenario: Scenario, pool: str, read: K8sRead) -> Scenario:
    """``scenario`` with the pool's ``[[autoscalers]]`` replaced by the one read and its settings applied.

    The cold start (``start_delay``), ``flap_window`` and ``metric_lag``
    (Prometheus' scrape and rule delay) are not in the objects: the scenario's
    own autoscaler's are kept. A p95 wait is read from the wait histogram's
    buckets (``p95_buckets = true``), as the query or the adapter computes it.
    """
    if read.source == "redis" and not every_job_in_the_list(scenario, pool):
        raise ScenarioError(f"--k8s: {read.objects[0]}: its redis trigger reads one BullMQ wait list, and pool "
                            f"{pool}'s waiting jobs are not all there (jobs with a BullMQ priority wait in the "
                            "prioritized sorted set, and a pool of several queues in several lists): it would "
                            "scale on fewer jobs than wait. Scale on qsim advise --from bullmq's qsim_bullmq_jobs "
                            "(qsim autoscale --emit keda FILE --target bullmq writes it)")
    raw = scenario.to_dict()
    mine: list[dict[str, Any]] = [a for a in raw.get("autoscalers", []) if a["pool"] == pool]
    old: dict[str, Any] = mine[0] if mine else {}
    kept: dict[str, Any] = {k: old[k] for k in ("start_delay", "flap_window", "metric_lag") if k in old}
    table: dict[str, Any] = {"pool": pool, **kept, **read.autoscaler}
    if table.get("metric") == "p95_wait":
        table["p95_buckets"] = True
    raw["autoscalers"] = [a for a in raw.get("autoscalers", []) if a["pool"] != pool] + [table]
    for p in raw["pools"]:
        if p["name"] == pool:
            p.update({k: read.pool[k] for k in ("workers", "concurrency") if k in read.pool})
    if "prefetch" in read.pool:
        raw.setdefault("engine", {})["prefetch"] = read.pool["prefetch"]
    return Scenario.from_dict(raw, source=scenario.source)


#: The object fields behind the scenario keys a message may name (the table of the module docstring, reversed).
_OBJECT_FIELDS = {
    "min": "minReplicaCount (ScaledObject) or minReplicas (HPA)",
    "max": "maxReplicaCount (ScaledObject) or maxReplicas (HPA)",
    "keda": "a ScaledObject (true) or a plain HPA (false)",
    "poll": "pollingInterval", "cooldown": "cooldownPeriod", "initial_cooldown": "initialCooldownPeriod",
    "activation": "the trigger's activationThreshold (activationListLength)",
    "target": "the trigger's threshold (listLength) or the HPA metric's target",
    "metric_from": "the trigger's series: \"workers\" is one only ready workers export (qsim_queue_*), "
                   "\"queue\" a Redis list or the qsim advise Deployment's series",
    "ignore_null": "the prometheus trigger's ignoreNullValues",
    "fallback_replicas": "the ScaledObject's fallback.replicas",
    "grace": "the Deployment's terminationGracePeriodSeconds (minus a preStop sleep)",
    "behavior": "the behavior of the HPA (or of the ScaledObject's advanced.horizontalPodAutoscalerConfig)",
}


def in_object_terms(message: str, read: K8sRead) -> str:
    """``message`` (naming scenario keys) followed by the object fields those keys were read from, for an
    autoscaler the user gave as Kubernetes objects (``read``) rather than as a scenario table."""
    named = [k for k in _OBJECT_FIELDS if re.search(rf"(?<![\w.]){k}\s*(=|must|needs|is\b)", message)]
    if not named:
        return message
    fields = "; ".join(f"{k} is {_OBJECT_FIELDS[k]}" for k in named)
    return f"{message} (the autoscaler was read from {', '.join(read.objects)}: {fields})"
