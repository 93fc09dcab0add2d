"""MkDocs hook: the reference parts generated from the code at build time, so they never drift.

A page asks for a part with a line ``<!-- generate: NAME -->``; the hook puts the part there:

=============  ==============================================================
``cli``        every ``qsim`` subcommand, from the argparse parsers (qsim.cli)
``locust``     qsim's options of ``locust -f loadtests``, from qsim.loadtest.config.add_arguments
``lua``        every Lua script's header: KEYS, ARGV, replies (qsim/engine/lua)
``keys``       the Redis key layout (qsim.engine.keys) and the job hash (qsim.engine.jobinfo)
``scenarios``  the built-in scenarios, one line each (qsim.scenarios)
``worker-settings``  every WorkerSettings field: keyword, default, flag, scenario source (qsim.engine.settings)
=============  ==============================================================

The same functions are importable (``render(name)``) for tests. A second hook, ``on_page_content``,
shows the docstrings' Sphinx roles (``:func:`simulate```, ``:class:`~qsim.model.ModelResult```) as
plain code on every page (mkdocstrings renders them verbatim), the ``~`` form as its last name.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from collections.abc import Callable
from importlib import resources
from typing import Any

__all__ = ["render", "GENERATORS", "on_page_markdown", "on_page_content", "strip_roles"]

_MARKER = re.compile(r"^<!-- generate: ([a-z-]+) -->$", re.MULTILINE)


# --------------------------------------------------------------------------- helpers


def rst_to_markdown(doc: str) -> str:
    """A module docstring as Markdown: ``text::`` + an indented block becomes ``text:`` + a fenced block,
    ``:mod:`x``` and friends become ``x`` in code."""
    doc = textwrap.dedent(doc).strip("\n")
    doc = re.sub(r":(?:mod|class|func|meth|attr|data):`~?([^`]+)`", r"`\1`", doc)
    doc = doc.replace("``", "`")
    out: list[str] = []
    lines = doc.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::"):
            out.append(line.rstrip()[:-1])
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            out += ["", "```text", textwrap.dedent("\n".join(block)), "```", ""]
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def _escape_lt(markdown: str) -> str:
    """``<`` outside code spans as ``&lt;`` (``<pool>-<n>`` would be read as an HTML tag and vanish)."""
    parts = markdown.split("`")
    return "`".join(p.replace("<", "&lt;") if i % 2 == 0 else p for i, p in enumerate(parts))


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# --------------------------------------------------------------------------- cli


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # noqa: SLF001 - argparse has no public walk of its subparsers
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return dict(action.choices)
    return {}


def _usage(parser: argparse.ArgumentParser) -> str:
    fmt = argparse.HelpFormatter(parser.prog, width=96)
    fmt.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)  # noqa: SLF001
    return fmt.format_help().strip()


def _option_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for a in parser._actions:  # noqa: SLF001
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):  # noqa: SLF001
            continue
        if a.option_strings:
            names = ", ".join(a.option_strings)
            if a.nargs != 0:
                metavar = a.metavar or (("{" + ",".join(map(str, a.choices)) + "}") if a.choices else a.dest.upper())
                names += f" {metavar}"
        else:
            names = str(a.metavar or a.dest)
            if a.choices:
                names += " {" + ",".join(map(str, a.choices)) + "}"
        help_text = (a.help or "") % {"default": a.default, "prog": parser.prog} if a.help else ""
        extra = []
        if a.required:
            extra.append("required")
        if a.nargs in ("*", "+"):
            extra.append("repeatable" if a.option_strings else "any number")
        elif a.nargs == "?" and not a.option_strings:
            extra.append("optional")
        if isinstance(a, argparse._AppendAction):  # noqa: SLF001
            extra.append("repeatable")
        tail = f" ({', '.join(extra)})" if extra else ""
        rows.append(f"| `{_md_cell(names)}` | {_md_cell(help_text).replace('<', '&lt;')}{tail} |")
    return rows


def render_cli() -> str:
    """Every ``qsim`` subcommand: usage, description, options, epilog (exit codes)."""
    from qsim.cli import build_parser

    root = build_parser()
    parts = [f"```text\n{_usage(root)}\n```", "", root.description or "", "", root.epilog or "", ""]
    for name, p in _subcommands(root).items():
        parts += [f"## qsim {name}", "", f"```text\n{_usage(p)}\n```", ""]
        if p.description:
            parts += [p.description.replace("%%", "%"), ""]
        rows = _option_rows(p)
        if rows:
            parts += ["| argument | meaning |", "|---|---|", *rows, ""]
        if p.epilog:
            parts += [p.epilog.replace("%%", "%"), ""]
    return "\n".join(parts)


class _EnvGroup:
    """An argument group that takes Locust's ``env_var=`` keyword (plain argparse does not) and notes it."""

    def __init__(self, group: Any, env: dict[str, str]) -> None:
        self._group, self._env = group, env

    def add_argument(self, *names: str, env_var: str | None = None, **kwargs: Any) -> argparse.Action:
        action = self._group.add_argument(*names, **kwargs)
        if env_var:
            self._env[action.dest] = env_var
        return action


class _LocustLike:
    """Stands for Locust's parser in ``add_arguments`` (importing Locust patches the process for gevent)."""

    def __init__(self) -> None:
        self.parser = argparse.ArgumentParser(prog="locust -f loadtests", add_help=False)
        self.env: dict[str, str] = {}

    def add_argument_group(self, *args: Any, **kwargs: Any) -> _EnvGroup:
        return _EnvGroup(self.parser.add_argument_group(*args, **kwargs), self.env)


def render_locust() -> str:
    """qsim's options of ``locust -f loadtests`` (``qsim.loadtest.config.add_arguments``), each with its variable."""
    from qsim.loadtest.config import add_arguments

    locust = _LocustLike()
    add_arguments(locust)
    parser = locust.parser
    rows = ["| argument | environment variable | meaning |", "|---|---|---|"]
    for row, action in zip(_option_rows(parser), [a for a in parser._actions if a.option_strings]):  # noqa: SLF001
        name, meaning = row[1:-1].split(" | ", 1)
        env = locust.env.get(action.dest, "")
        shown = f"`{env}`" if env else "`QSIM_SLO` (`;` between)" if action.dest == "slo" else ""
        rows.append(f"|{name} | {shown} | {meaning} |")
    return "\n".join(rows) + "\n"


# --------------------------------------------------------------------------- lua


def lua_header(name: str) -> str:
    """The opening comment of ``lua/<name>.lua`` (a ``--[[ ... ]]`` block, or leading ``--`` lines)."""
    text = resources.files("qsim.engine.lua").joinpath(f"{name}.lua").read_text(encoding="utf-8")
    if text.startswith("--[["):
        return text[4:text.index("]]")].strip("\n")
    lines = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].removeprefix(" "))
    return "\n".join(lines)


def render_lua() -> str:
    """One section per script (and per shared library pasted into them), its header as written."""
    from qsim.engine.scripts import LUA_INCLUDES, SCRIPT_NAMES

    parts = []
    for name in (*SCRIPT_NAMES, *LUA_INCLUDES):
        header = lua_header(name)
        title, _, rest = header.partition("\n")
        parts += [f"## {name}", "", f"`qsim/engine/lua/{name}.lua`: {title.split(':', 1)[-1].strip()}", "",
                  f"```text\n{rest.strip()}\n```" if rest.strip() else "", ""]
    return "\n".join(parts)


# --------------------------------------------------------------------------- keys, scenarios


def render_keys() -> str:
    """The key layout of ``qsim.engine.keys`` and the job hash of ``qsim.engine.jobinfo``, as documented there."""
    from qsim.engine import jobinfo, keys

    return "\n".join(["## Keys of a queue", "", "From `qsim/engine/keys.py` (the only place key names are spelled "
                      "out):", "", rst_to_markdown(keys.__doc__ or "").split("\n", 1)[1].strip(), "",
                      "## The job hash", "", "From `qsim/engine/jobinfo.py`:", "",
                      rst_to_markdown(jobinfo.__doc__ or "").split("\n", 1)[1].strip(), ""])


def render_scenarios() -> str:
    """``qsim scenarios`` as a table, with each scenario's file."""
    from qsim import scenarios

    rows = ["| name | what it shows | file |", "|---|---|---|"]
    for name in scenarios.BUILTIN:
        rows.append(f"| `{name}` | {_md_cell(scenarios.describe(name))} | `qsim/scenarios/{name}.toml` |")
    return "\n".join(rows) + "\n"


def render_worker_settings() -> str:
    """Every field of the engine's WorkerSettings: the one table of ``Worker(...)``'s keywords, ``qsim worker``'s
    flags and where a scenario run takes each value (``qsim.engine.settings.reference_table``)."""
    from qsim.engine.settings import reference_table

    return _escape_lt(reference_table())


GENERATORS: dict[str, Callable[[], str]] = {
    "cli": render_cli, "locust": render_locust, "lua": render_lua, "keys": render_keys, "scenarios": render_scenarios,
    "worker-settings": render_worker_settings,
}


def render(name: str) -> str:
    """The generated part ``name`` (see the module docstring)."""
    return GENERATORS[name]()


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs event: fill in every ``<!-- generate: NAME -->`` line of the page."""

    def fill(m: re.Match[str]) -> str:
        if m.group(1) not in GENERATORS:
            raise ValueError(f"{page.file.src_path}: unknown generated part {m.group(1)!r} "
                             f"(known: {', '.join(GENERATORS)})")
        return render(m.group(1))

    return _MARKER.sub(fill, markdown)


#: A Sphinx role as mkdocstrings leaves it in the HTML: ``:func:<code>~a.b</code>``.
_ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc|obj):<code>(~?)([^<]*)</code>")


def strip_roles(html: str) -> str:
    """``:func:<code>x</code>`` -> ``<code>x</code>``; ``:class:<code>~a.b.C</code>`` -> ``<code>C</code>``."""
    return _ROLE.sub(lambda m: f"<code>{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}</code>", html)


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs event: the docstrings' Sphinx roles as plain code (see the module docstring)."""
    return strip_roles(html)
