"""The worker Deployment that goes with an emitted autoscaler: carrying what was simulated.

:func:`worker_deployment` takes the Deployment read with ``--k8s`` (or, without
one, a plain ``qsim worker`` Deployment shaped as ``deploy/kubernetes/worker.yaml``)
and sets what the simulation used: ``replicas`` (the workers it started
with, where the autoscaler starts from), the ``qsim worker`` container's
``--concurrency`` and ``--shutdown-grace`` (the autoscaler's ``grace``),
``terminationGracePeriodSeconds`` = preStop sleep + grace + 5 s (the margin for
handing jobs back and exiting, as ``deploy/kubernetes/worker.yaml`` explains),
and for the ``qsim`` policy the advice's ``--advise-slo`` and ``--advise-window``.
:mod:`qsim.autoscale.k8s_read` reads each of these back as it was set.
"""

from __future__ import annotations

import argparse
import copy
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

__all__ = ["worker_deployment", "bullmq_worker_deployment", "advisor_deployment", "advisor_service", "bundle",
           "adapter_rule", "adapter_rule_path", "service_monitors", "monitor_path", "EXIT_MARGIN",
           "qsim_args", "worker_queues", "exact"]

#: Seconds of terminationGracePeriodSeconds beyond preStop + --shutdown-grace.
EXIT_MARGIN = 5.0


def _plain(name: str, queues: Sequence[str], replicas: int = 1) -> dict[str, Any]:
    """A ``qsim worker`` Deployment named ``name`` for ``queues`` (deploy/kubernetes/worker.yaml's shape)."""
    args = ["worker", "app.jobs:handle"] + [x for q in queues for x in ("--queue", q)] + ["--metrics-port", "9100"]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "worker",
                                                           "image": "registry.example.com/worker:1.0",
                                                           "command": ["qsim"], "args": args,
                                                           "ports": [{"name": "metrics", "containerPort": 9100}]}]}}}}


def _set_flag(args: list[str], flag: str, value: str | None) -> list[str]:
    """``args`` without ``flag`` (``--flag V`` or ``--flag=V``, every time given), then ``flag value`` if any."""
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a == flag:
            skip = True
            continue
        if a.startswith(flag + "="):
            continue
        out.append(a)
    return out + ([flag, value] if value is not None else [])


_SHELLS = ("sh", "bash", "ash", "dash")


def exact(x: float) -> str:
    """``x`` as text that reads back as the same float: ``30`` for a whole number, else Python's shortest repr
    (``f"{x:g}"``'s 6 significant digits read back as another value than the one simulated)."""
    x = float(x)
    return str(int(x)) if x.is_integer() else repr(x)


def worker_queues(argv: Sequence[str]) -> list[str]:
    """The ``--queue`` values of ``qsim worker`` arguments (:func:`qsim_args`)."""
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    p.add_argument("--queue", action="append", default=[])
    return list(p.parse_known_args(list(argv))[0].queue)


#: The options of ``qsim`` itself, before its verb (``qsim -v worker ...``).
_GLOBAL_OPTION = re.compile(r"-v+|--verbose")


def qsim_args(command: Sequence[Any], args: Sequence[Any], verb: str) -> list[str] | None:
    """The arguments after ``qsim VERB`` in a container's command and args (None: it does not run it).

    Three shapes: ``command: [qsim]`` (or ``python -m qsim``) with the rest in ``args``; no ``command``
    and ``args`` starting with VERB (the image's ENTRYPOINT is ``qsim``); a shell's ``-c`` string that
    runs it (``exec qsim worker ...``).
    """
    argv = [str(a) for a in (*command, *args)]
    if len(argv) >= 3 and Path(argv[0]).name in _SHELLS and argv[1] == "-c":
        try:
            argv = shlex.split(argv[2])
        except ValueError:
            return None
    starts = [k + 1 for k in range(len(argv) - 1) if Path(argv[k]).name == "qsim"]
    if not command:  # the image's ENTRYPOINT is qsim: args start with its options or the verb
        starts.append(0)
    for k in starts:
        rest = _after_options(argv[k:])
        if rest[:1] == [verb]:
            return rest[1:]
    return None


def _after_options(argv: list[str]) -> list[str]:
    """``argv`` from its first word that is not one of qsim's own options (they come before the verb)."""
    k = 0
    while k < len(argv) and _GLOBAL_OPTION.fullmatch(argv[k]):
        k += 1
    return argv[k:]


def worker_deployment(base: Mapping[str, Any] | None, *, name: str, queues: Sequence[str], concurrency: int,
                      grace: float, pre_stop: float = 0.0, advise: tuple[str, float] | None = None,
                      replicas: int = 1) -> dict[str, Any]:
    """``base`` (None: a plain qsim worker Deployment) with the simulated settings (see the module docstring).

    ``advise``: the ``qsim`` policy's SLO and window (s); None leaves the worker's advice flags as they are.
    ``replicas``: the workers the simulation started with (the Deployment's ``replicas``, where the
    autoscaler starts from).
    """
    doc = copy.deepcopy(dict(base)) if base is not None else _plain(name, queues)
    doc["spec"]["replicas"] = int(replicas)
    pod = doc["spec"]["template"]["spec"]
    argvs = [(c, qsim_args(c.get("command") or [], c.get("args") or [], "worker"))
             for c in pod.get("containers", []) if isinstance(c, dict)]
    workers = [c for c, argv in argvs if argv is not None]
    serving = [c for c, argv in argvs if argv is not None and sorted(worker_queues(argv)) == sorted(queues)]
    if not workers:  # the read Deployment runs no qsim worker: the settings go to a plain one
        return worker_deployment(None, name=name, queues=queues, concurrency=concurrency, grace=grace,
                                 pre_stop=pre_stop, advise=advise, replicas=replicas)
    worker = (serving or workers)[0]

    def simulated(args: list[str]) -> list[str]:
        args = _set_flag(args, "--concurrency", str(concurrency))
        args = _set_flag(args, "--shutdown-grace", exact(grace))
        if advise is not None:
            args = _set_flag(_set_flag(args, "--advise-slo", advise[0]), "--advise-window", f"{exact(advise[1])}s")
        return args

    command, args = [str(a) for a in worker.get("command") or []], [str(a) for a in worker.get("args") or []]
    if len(command + args) >= 3 and Path((command + args)[0]).name in _SHELLS and (command + args)[1] == "-c":
        where, at = ("command", 2) if len(command) >= 3 else ("args", 2 - len(command))  # the -c script
        words = [command, args][where == "args"]
        words[at] = shlex.join(simulated(shlex.split(words[at])))
        worker[where] = words
    else:
        key = "args" if worker.get("args") else "command"
        worker[key] = simulated([str(a) for a in worker[key]])
    pod["terminationGracePeriodSeconds"] = int(math.ceil(pre_stop + grace + EXIT_MARGIN))
    return doc


def bullmq_worker_deployment(base: Mapping[str, Any], *, grace: float, pre_stop: float = 0.0,
                             replicas: int | None = None) -> dict[str, Any]:
    """A BullMQ worker Deployment (read with ``--k8s``) whose ``terminationGracePeriodSeconds`` is its preStop
    sleep plus the simulated ``grace``, rounded up to a whole second: a BullMQ worker's ``close()`` waits for
    its jobs with no limit of its own, so Kubernetes' kill ends the grace; ``replicas`` the workers the
    simulation started with (None: as read). The rest (its concurrency lives in the worker's code) is left
    as it is."""
    doc = copy.deepcopy(dict(base))
    if replicas is not None:
        doc["spec"]["replicas"] = int(replicas)
    doc["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = int(math.ceil(pre_stop + grace))
    return doc


#: The port the advisor Deployment serves its gauges on (deploy/kubernetes/advisor.yaml's).
ADVISOR_PORT = 9200


def advisor_deployment(name: str, *, queues: Sequence[str], slo: str, window: float, concurrency: int,
                       source: str = "qsim", prefix: str | None = None) -> dict[str, Any]:
    """A ``qsim advise --watch`` Deployment named ``name`` exporting the advice for ``queues`` (and, for a
    BullMQ ``source``, the queue's gauges) on :data:`ADVISOR_PORT`; shaped as deploy/kubernetes/advisor.yaml,
    its Redis URL from the Secret ``<name>-redis``."""
    args = ["advise"] + [x for q in queues for x in ("--queue", q)] + [
        "--slo", slo, "--window", f"{exact(window)}s", "--concurrency", str(concurrency), "--from", source]
    if prefix is not None:
        args += ["--prefix", prefix]
    args += ["--watch", "60", "--metrics-port", str(ADVISOR_PORT)]
    annotations = {"prometheus.io/scrape": "true", "prometheus.io/port": str(ADVISOR_PORT),
                   "prometheus.io/path": "/metrics"}
    container = {"name": "advisor", "image": "registry.example.com/qsim:1.0", "command": ["qsim"], "args": args,
                 "env": [{"name": "REDIS_URL", "valueFrom": {"secretKeyRef": {"name": f"{name}-redis", "key": "url"}}}],
                 "ports": [{"name": "metrics", "containerPort": ADVISOR_PORT}],
                 "resources": {"requests": {"cpu": "250m", "memory": "384Mi"}, "limits": {"memory": "768Mi"}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}, "annotations": annotations},
                                  "spec": {"containers": [container]}}}}


def advisor_service(name: str) -> dict[str, Any]:
    """The Service in front of the advisor Deployment ``name``: its metrics port, for a ServiceMonitor."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"selector": {"app": name},
                     "ports": [{"name": "metrics", "port": ADVISOR_PORT, "targetPort": "metrics"}]}}


def monitor_path(path: str | Path) -> Path:
    """Where ``--emit`` writes the advisor's ServiceMonitor: FILE's stem + ``.servicemonitor.yaml``."""
    p = Path(path)
    return p.with_name(p.stem + ".servicemonitor.yaml")


def service_monitors(text: str) -> str | None:
    """A Prometheus Operator ServiceMonitor for each Service of the bundle ``text`` (None: it has none).

    Apart from the bundle: applying a ServiceMonitor needs the operator's CRD, which a cluster scraping by
    the pods' ``prometheus.io`` annotations does not have.
    """
    services = [d for d in yaml.safe_load_all(text) if d and d.get("kind") == "Service"]
    if not services:
        return None
    monitors = [{"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
                 "metadata": {"name": s["metadata"]["name"], "labels": {"app": s["metadata"]["name"]}},
                 "spec": {"selector": {"matchLabels": {"app": s["metadata"]["name"]}},
                          "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s"}]}}
                for s in services]
    head = ("# For the Prometheus Operator: a ServiceMonitor scraping the advisor's Service (without the operator,\n"
            "# Prometheus finds the advisor by its pods' prometheus.io annotations, and this file is not needed).\n")
    return head + yaml.safe_dump_all(monitors, sort_keys=False)


def bundle(manifest: str, deployment: Mapping[str, Any] | None, *extra: Mapping[str, Any]) -> str:
    """One multi-document YAML text: the manifest's autoscaler object (aimed at the Deployment), the
    Deployment (None: none), the ``extra`` objects, then the rest of the manifest."""
    first, sep, rest = manifest.partition("\n---\n")
    obj = yaml.safe_load(first)
    if deployment is not None and obj["spec"]["scaleTargetRef"]["name"] != deployment["metadata"]["name"]:
        name = deployment["metadata"]["name"]  # the Deployment read with --k8s has a name of its own
        obj["metadata"]["name"] = obj["spec"]["scaleTargetRef"]["name"] = name
        comments = [line for line in first.splitlines() if line.startswith("#")]
        first = "\n".join(comments + [yaml.safe_dump(obj, sort_keys=False).rstrip("\n")])
    text = first.rstrip("\n") + "\n"
    for doc in ([deployment] if deployment is not None else []) + list(extra):
        text += "---\n" + yaml.safe_dump(dict(doc), sort_keys=False)
    return text + ("---\n" + rest if sep else "")


def adapter_rule_path(path: str | Path) -> Path:
    """Where ``--emit hpa FILE`` writes prometheus-adapter's rule: FILE's stem + ``.prometheus-adapter-rule.yaml``."""
    p = Path(path)
    return p.with_name(p.stem + ".prometheus-adapter-rule.yaml")


def adapter_rule(manifest: str) -> tuple[str, str | None]:
    """The manifest without a prometheus-adapter ConfigMap (applied, it would replace a cluster's rules),
    and that ConfigMap's rules as a snippet to add to the adapter's own (None: there is none)."""
    first, sep, rest = manifest.partition("\n---\n")
    docs = [d for d in yaml.safe_load_all(rest) if d] if sep else []
    maps = [d for d in docs if d.get("kind") == "ConfigMap" and "config.yaml" in d.get("data", {})]
    if not maps:
        return manifest, None
    head = ("# prometheus-adapter's rule for the HPA's external metric: add it to the rules the adapter already has\n"
            "# (rules.external in the prometheus-adapter chart's values, or externalRules in its config file).\n")
    return first.rstrip("\n") + "\n", head + str(maps[0]["data"]["config.yaml"])
