"""The reference pages against the code: every Scenario key, Summary field and Prometheus metric that
exists in the code is in its page, and the other way round; documented defaults and bounds are the
parser's. A failure says exactly what is missing where.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import tomllib
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from qsim.errors import ScenarioError
from qsim.results import summary as summary_mod
from qsim.spec import dists
from qsim.spec import scenario as scenario_mod
from qsim.spec.scenario import Scenario

DOCS = Path(__file__).resolve().parents[2] / "docs"
SCENARIO_PAGE = DOCS / "reference" / "scenario.md"
SUMMARY_PAGE = DOCS / "reference" / "summary.md"
METRICS_PAGE = DOCS / "reference" / "metrics.md"

#: Dataclass fields that are not TOML keys (as Scenario.to_dict leaves them out).
NOT_KEYS = {"source", "values", "at"}
_ROW = re.compile(r"^\| `([^`]+)` \|(.*)$", re.MULTILINE)


# --------------------------------------------------------------------------- the code's keys


def _family(t: Any) -> type | None:
    """The base class when ``t`` is a kind-tagged family (service distributions, arrivals)."""
    for base in (dists.Distribution, dists.Arrival):
        if isinstance(t, type) and issubclass(t, base):
            return base
    return None


def _kinds(base: type) -> dict[str, type]:
    out: dict[str, type] = {}
    todo = list(base.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        kind = getattr(cls, "kind", "")
        if kind and dataclasses.is_dataclass(cls):
            out[kind] = cls
    return out


#: The parser's table of each family's keys per kind (the TOML keys: a kind's dataclass may nest some, as a
#: rate profile's points, shape, period and scale).
_FAMILY_TABLES = {dists.Arrival: "_ARRIVAL_KEYS", dists.Distribution: "_SERVICE_KEYS"}


def _family_params(base: type) -> set[str]:
    """The keys the kinds of a family take: the parser's table, else the kinds' dataclass fields."""
    table = getattr(scenario_mod, _FAMILY_TABLES.get(base, ""), None)
    if table:
        return {p for params in table.values() for p in params}
    return {f.name for cls in _kinds(base).values() for f in dataclasses.fields(cls) if f.name not in NOT_KEYS}


def _strip(t: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); tuple[X, ...] -> (X, False) marked by the caller; else (t, False)."""
    if isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union:
        args = [a for a in typing.get_args(t) if a is not type(None)]
        return (args[0] if len(args) == 1 else t), True
    return t, False


def code_keys() -> dict[str, dataclasses.Field[Any] | None]:
    """Every TOML key path the Scenario dataclasses define (``queues[].rate_limit.max``), with its field.

    A kind-tagged family (service distributions, arrivals) gets ``P.kind`` and its kinds' keys under
    the first path where it appears (``jobs[].service``); later fields of the same family (a start-up
    delay drawn from a distribution) need only their own row.
    """
    out: dict[str, dataclasses.Field[Any] | None] = {}
    seen_families: set[type] = set()

    def walk(cls: type, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name in NOT_KEYS or not f.init:
                continue
            path = f"{prefix}{f.name}"
            out[path] = f
            t, _ = _strip(hints[f.name])
            array = typing.get_origin(t) is tuple and dataclasses.is_dataclass(typing.get_args(t)[0])
            inner = typing.get_args(t)[0] if array else t
            fam = _family(inner)
            if fam is not None:
                if fam not in seen_families:
                    seen_families.add(fam)
                    out[f"{path}.kind"] = None
                    for param in _family_params(fam):
                        out.setdefault(f"{path}.{param}", None)
            elif isinstance(inner, type) and dataclasses.is_dataclass(inner):
                walk(inner, f"{path}[]." if array else f"{path}.")

    walk(Scenario, "")
    return out


def parser_keys() -> set[str]:
    """The keys the TOML parser's own tables accept (a second view, in case a field and a key differ)."""
    levels = {"_TOP_KEYS": "", "_QUEUE_KEYS": "queues[].", "_JOB_KEYS": "jobs[].", "_POOL_KEYS": "pools[].",
              "_EVENT_KEYS": "events[].", "_ENGINE_KEYS": "engine."}
    out = set()
    for name, prefix in levels.items():
        out |= {prefix + k for k in getattr(scenario_mod, name, ())}
    for name, prefix in (("_ARRIVAL_KEYS", "jobs[].arrival."), ("_SERVICE_KEYS", "jobs[].service.")):
        for params in getattr(scenario_mod, name, {}).values():
            out |= {prefix + p for p in params}
    return out


# --------------------------------------------------------------------------- the page's keys


def page_rows(path: Path) -> dict[str, list[str]]:
    """First-column key -> the other cells, for every table row of ``path`` whose first cell is code."""
    rows = {}
    for m in _ROW.finditer(path.read_text(encoding="utf-8")):
        cells = [c.strip() for c in m.group(2).rstrip("|").split(" | ")]
        rows[m.group(1)] = cells
    return rows


def page_kinds(section: str) -> set[str]:
    """The ``kind = "..."`` rows under the heading ``### {section}``."""
    text = SCENARIO_PAGE.read_text(encoding="utf-8")
    body = text.split(f"### {section}\n", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r'^\| `kind = "([^"]+)"`', body, re.MULTILINE))


def doc_scenario_keys() -> dict[str, list[str]]:
    return {k: v for k, v in page_rows(SCENARIO_PAGE).items() if not k.startswith("kind = ")}


def _diff_message(what: str, page: Path, missing: set[str], extra: set[str], source: str) -> str:
    lines = []
    if missing:
        lines.append(f"{page.relative_to(DOCS.parent)} lacks {what} that {source} has: "
                     f"{', '.join(sorted(missing))} (add a table row for each)")
    if extra:
        lines.append(f"{page.relative_to(DOCS.parent)} documents {what} that {source} does not have: "
                     f"{', '.join(sorted(extra))} (remove or rename the rows)")
    return "\n".join(lines)


def test_every_scenario_key_is_in_the_reference_and_back() -> None:
    # Given the keys the Scenario dataclasses and the TOML parser define, and the rows of the page
    in_code = set(code_keys()) | parser_keys()
    in_page = set(doc_scenario_keys())
    # Then they are the same keys
    assert in_code == in_page, _diff_message("Scenario keys", SCENARIO_PAGE, in_code - in_page, in_page - in_code,
                                             "qsim/spec/scenario.py (its dataclasses and parser)")


@pytest.mark.parametrize(("section", "base"), [("Arrival kinds", dists.Arrival), ("Service kinds", dists.Distribution)])
def test_every_kind_is_in_the_reference(section: str, base: type) -> None:
    in_code = set(_kinds(base))
    in_page = page_kinds(section)
    assert in_code == in_page, _diff_message(f"{section.lower()} (section '{section}')", SCENARIO_PAGE,
                                             in_code - in_page, in_page - in_code, "qsim/spec/dists.py")
    # the `kind` row's "valid" cell lists the same kinds
    key = "jobs[].arrival.kind" if base is dists.Arrival else "jobs[].service.kind"
    listed = set(re.findall(r"`([a-z-]+)`", doc_scenario_keys()[key][2]))
    assert listed == in_code, f"{SCENARIO_PAGE.name}: the row {key} lists {sorted(listed)}, the code has {sorted(in_code)}"


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def test_documented_defaults_are_the_code_defaults() -> None:
    fields = code_keys()
    wrong = []
    for key, cells in doc_scenario_keys().items():
        f = fields.get(key)
        if f is None:
            continue
        default_cell = cells[1]
        actual = _default(f)
        if default_cell == "required":
            if actual is not dataclasses.MISSING:
                wrong.append(f"{key}: the page says required, the code defaults to {actual!r}")
        elif m := re.fullmatch(r"`(.+)`", default_cell):
            documented = tomllib.loads(f"v = {m.group(1)}")["v"]
            if actual is dataclasses.MISSING or actual != documented:
                wrong.append(f"{key}: the page says {documented!r}, the code {actual!r}")
        elif default_cell == "none" and actual not in (None, (), dataclasses.MISSING):
            wrong.append(f"{key}: the page says none, the code defaults to {actual!r}")
    assert not wrong, f"{SCENARIO_PAGE.name}: defaults that disagree with qsim/spec/scenario.py:\n" + "\n".join(wrong)


# --------------------------------------------------------------------------- documented bounds, tried


def _everything() -> dict[str, Any]:
    """The page's 'A whole file' example (valid: tests/docs/test_examples.py runs it)."""
    text = SCENARIO_PAGE.read_text(encoding="utf-8")
    block = text.split('```toml title="everything.toml"\n', 1)[1].split("```", 1)[0]
    return tomllib.loads(block)


def _kind_for(family: str, param: str) -> tuple[str, dict[str, Any]]:
    """A kind of the family that takes ``param`` (the last listed), with valid values for its other keys."""
    table = getattr(scenario_mod, "_ARRIVAL_KEYS" if family == "arrival" else "_SERVICE_KEYS")
    kind = [k for k, params in table.items() if param in params][-1]
    valid = {"rate": 1.0, "size": 2, "mean": 1.0, "cv": 1.0, "low": 0.0, "high": 1.0,
             "points": [[0, 1.0], [60, 2.0]], "shape": "linear", "period": 3600.0, "scale": 1.0}
    params = [p for p in table[kind] if p in valid]
    if kind == "burst":  # a plain burst; a profiled one (points instead of rate) is tried under kind = "profile"
        params = ["rate", "size"]
    return kind, {"kind": kind, **{p: valid[p] for p in params}}


def _set(doc: dict[str, Any], path: str, value: Any) -> str:
    """Set ``path`` in ``doc`` (in an array, the first element that has the next key); return the path with
    the indexes used, as messages spell it."""
    parts = path.split(".")
    node: Any = doc
    shown = []
    for i, part in enumerate(parts[:-1]):
        array = part.endswith("[]")
        name = part.removesuffix("[]")
        if i == len(parts) - 2 and name in ("arrival", "service") and parts[-1] != "kind":
            kind, table = _kind_for(name, parts[-1])
            node[name] = table
        node = node.setdefault(name, {})
        if array:
            index = next((k for k, item in enumerate(node) if parts[i + 1] in item), 0)
            node = node[index]
            name = f"{name}[{index}]"
        shown.append(name)
    node[parts[-1]] = value
    return ".".join([*shown, parts[-1]])


def bound_cases() -> Iterator[tuple[str, Any, str]]:
    """(key, bad value, the message the page's 'valid' cell promises) for every row with a checkable bound;
    ``{key}`` in the message stands for the key as the message spells it (with indexes)."""
    for key, cells in doc_scenario_keys().items():
        valid = cells[2]
        shown = "{key}"
        if m := re.match(r"integer >= (-?\d+)", valid):
            low = int(m.group(1))
            yield key, low - 1, f"{shown} must be >= {low}, got {low - 1}"
        elif m := re.match(r"number > (-?\d+)", valid):
            low = int(m.group(1))
            yield key, low, f"{shown} must be > {low}, got {low}"
        elif m := re.match(r"number >= (-?\d+)", valid):
            low = int(m.group(1))
            yield key, low - 1, f"{shown} must be >= {low}, got {low - 1}"
        elif valid.startswith("number from 0 to 1"):
            yield key, 1.5, f"{shown} must be <= 1, got 1.5"
            yield key, -0.5, f"{shown} must be >= 0, got -0.5"
        elif valid.startswith("one of "):
            choices = ", ".join(re.findall(r"`([^`]+)`", valid))
            yield key, "zzz", f"{shown} must be one of {choices}, got 'zzz'"
        elif valid.startswith("not empty"):
            yield key, "  ", f"{shown} must not be empty"


def test_every_documented_bound_is_the_parsers() -> None:
    # Given the page's whole-file example, valid as it is
    Scenario.from_dict(_everything())
    cases = list(bound_cases())
    assert len(cases) > 30, "the 'valid' column lost its bounds"
    wrong = []
    for key, bad, message in cases:
        # When one key gets a value outside its documented bound
        doc = copy.deepcopy(_everything())
        message = message.replace("{key}", _set(doc, key, bad))
        try:
            Scenario.from_dict(doc)
        except ScenarioError as e:
            if message not in str(e):
                wrong.append(f"{key} = {bad!r}: the page promises '{message}', the parser says '{e}'")
        else:
            wrong.append(f"{key} = {bad!r}: the page promises '{message}', the parser accepted it")
    # Then the parser refuses it with the message the page promises
    assert not wrong, f"{SCENARIO_PAGE.name}: bounds in the 'valid' column that the parser does not enforce:\n" + \
        "\n".join(wrong)


# --------------------------------------------------------------------------- Summary


def typed_dicts(root: type = summary_mod.Summary) -> dict[str, dict[str, Any]]:
    """Every TypedDict reachable from the Summary: name -> {key: type}."""
    out: dict[str, dict[str, Any]] = {}

    def visit(t: Any) -> None:
        t, _ = _strip(t)
        origin = typing.get_origin(t)
        if origin in (typing.Required, typing.NotRequired):
            visit(typing.get_args(t)[0])
        elif origin in (dict, Mapping, list, tuple) or origin is not None and issubclass(origin, Mapping):
            for a in typing.get_args(t):
                visit(a)
        elif isinstance(t, type) and typing.is_typeddict(t) and t.__name__ not in out:
            hints = typing.get_type_hints(t)
            out[t.__name__] = hints
            for h in hints.values():
                visit(h)

    visit(root)
    return out


def page_sections(path: Path) -> dict[str, set[str]]:
    """Heading ``... (`Name`)`` -> the first-column keys of the table rows under it."""
    out: dict[str, set[str]] = {}
    current = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            m = re.search(r"\(`(\w+)`\)\s*$", line)
            current = m.group(1) if m else None
            if current:
                out[current] = set()
        elif current and (m := re.match(r"^\| `([^`]+)` \|", line)):
            out[current].add(m.group(1))
    return out


def test_every_summary_field_is_in_the_reference_and_back() -> None:
    in_code = typed_dicts()
    in_page = page_sections(SUMMARY_PAGE)
    problems = []
    for name in sorted(set(in_code) - set(in_page)):
        problems.append(f"{SUMMARY_PAGE.relative_to(DOCS.parent)} has no section for qsim/results/summary.py's {name} "
                        f"(a heading ending in (`{name}`) with a row per key: {', '.join(in_code[name])})")
    for name in sorted(set(in_page) - set(in_code)):
        problems.append(f"{SUMMARY_PAGE.relative_to(DOCS.parent)} has a section (`{name}`) that qsim/results/summary.py "
                        f"does not define (reachable from Summary)")
    for name in sorted(set(in_code) & set(in_page)):
        msg = _diff_message(f"keys of {name}", SUMMARY_PAGE, set(in_code[name]) - in_page[name],
                            in_page[name] - set(in_code[name]), f"qsim/results/summary.py's {name}")
        if msg:
            problems.append(msg)
    assert not problems, "\n".join(problems)


def test_a_real_summary_has_only_documented_fields() -> None:
    # Given a Summary the model produced (every job type and queue of the workshop)
    from qsim.model import simulate
    from qsim.scenarios import builtin

    summary = simulate(builtin("workshop"), max_jobs=200).summary
    documented = page_sections(SUMMARY_PAGE)
    hints = typed_dicts()

    # Then every key at every level is a documented key of the TypedDict that level has
    def check(node: Mapping[str, Any], name: str, where: str) -> Iterator[str]:
        for key, value in node.items():
            if key not in documented.get(name, set()):
                yield f"{where}{key} (in {name})"
                continue
            t, _ = _strip(hints[name][key])
            if typing.is_typeddict(t) and isinstance(value, Mapping):
                yield from check(value, t.__name__, f"{where}{key}.")
            elif typing.get_origin(t) is dict and isinstance(value, Mapping):
                inner, _ = _strip(typing.get_args(t)[1])
                if typing.is_typeddict(inner):
                    for k, v in value.items():
                        yield from check(v, inner.__name__, f"{where}{key}.{k}.")

    undocumented = list(check(summary, "Summary", ""))
    assert not undocumented, (f"the model's Summary has fields {SUMMARY_PAGE.relative_to(DOCS.parent)} does not "
                              f"document: {', '.join(undocumented)}")


# --------------------------------------------------------------------------- Prometheus metrics


def code_metrics(url: str) -> set[str]:
    """The metric names a worker with metrics and live advice exports (counters with their _total)."""
    from qsim.advise.live import ADVICE_METRICS
    from qsim.engine import Worker
    from qsim.engine.metrics import WorkerMetrics

    async def handle(job: Any) -> None:
        return None

    metrics = WorkerMetrics(Worker("orders", handle, redis=url))
    try:
        names = {f.name + ("_total" if f.type == "counter" else "") for f in metrics.registry.collect()}
    finally:
        metrics.close()
    return names | set(ADVICE_METRICS)


@pytest.mark.redis
def test_every_metric_is_in_the_reference_and_back(redis_url: str) -> None:
    in_code = code_metrics(redis_url)
    in_page = {k for k in page_rows(METRICS_PAGE) if k.startswith("qsim_")}
    assert in_code == in_page, _diff_message("metrics", METRICS_PAGE, in_code - in_page, in_page - in_code,
                                             "qsim/engine/metrics.py and qsim/advise/live.py")
