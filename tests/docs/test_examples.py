"""Every example a reader may paste is checked: the fenced blocks of docs/, README.md and notebooks/README.md.

Per page, two tests (see tests/docs/fences.py for the markers a block may carry):

- ``test_page_parses``: every block is parsed — TOML/YAML/JSON loaded (a scenario validated), Python
  compiled, each ``qsim`` command line parsed by qsim's own argparse parser and each ``locust`` line by
  Locust's parser with qsim's options, ``pip install`` extras looked up in pyproject.toml, scripts found;
- ``test_page_runs``: the blocks not marked ``skip`` run in order, in a fresh folder, against the test
  session's throwaway redis-server (``redis://localhost:6379/0`` in an example means that server; so
  does ``$REDIS_URL``): Python in one namespace per page (top-level ``await`` allowed), shell blocks with
  bash, each to the exit code its marker says (0 by default); a block with ``title="NAME"`` is a file:
  it is written to the folder as NAME before the first block runs (and not run itself). ``pip install`` lines are checked, not run (the test run has
  its own install). A block of plain ``qsim`` command lines runs in this process (``inprocess.py``: a
  fresh interpreter per command cost a second each); anything else (a pipe, a loop, ``python x.py``,
  ``locust``) runs in bash. Blocks marked ``long`` run only in ``test_page_runs_whole`` (marker ``long``),
  which runs the whole page; a block that needs a long block's output is marked long too. A page whose blocks
  run ``node`` (a BullMQ worker) gets BullMQ 6 on ``NODE_PATH`` (``tests/bullmq_node.py`` installs it), and is
  skipped, as the BullMQ tests are, where Node.js is missing. A ``text`` block
  marked ``output`` is what the block before it prints (stdout and stderr): checked line for line whenever
  that block runs (``fences.output_mismatch``, within the tolerance its marker states), so the outputs a
  page shows cannot drift from what qsim prints. ``QSIM_DOCS_REFRESH=1`` writes what was printed into the
  page instead of failing (not for a block with ``...``): review the diff before committing it. Every other ``text`` block says what it is instead
  (``<!-- test: not-output a formula -->``), so no printed output is shown unchecked.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from fences import LANGUAGES, PROGRESS, Block, blocks, commands, output_mismatch
from inprocess import fresh_logging, qsim_commands, run_qsim
from waiting import ATTEMPTS, measured_until_passed

ROOT = Path(__file__).resolve().parents[2]
#: docs/snippets/ holds what benchmarks write (benchmarks/snippet.py), included by pages, not pages of their own
PAGES = sorted([*(p for p in (ROOT / "docs").rglob("*.md") if "snippets" not in p.relative_to(ROOT / "docs").parts),
                ROOT / "README.md", ROOT / "notebooks" / "README.md"])
LOCAL_URLS = ("redis://localhost:6379/0", "redis://127.0.0.1:6379/0")


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _with_url(code: str, url: str) -> str:
    for local in LOCAL_URLS:
        code = code.replace(local, url)
    return code


# --------------------------------------------------------------------------- parsing and flag checks


def _extras() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])


def check_command(argv: list[str], where: str, folder: Path) -> str | None:
    """What is wrong with one command line of an example (None: nothing we can tell); ``folder`` holds the
    page's own files."""
    from qsim.cli import build_parser

    prog = argv[0]
    if prog == "qsim":
        try:
            import contextlib
            import io

            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                build_parser().parse_args(argv[1:])
        except SystemExit as e:
            if e.code:
                return f"{where}: `{' '.join(argv)}` does not parse: {err.getvalue().strip().splitlines()[-1]}"
        return None
    if prog == "pip" and argv[1:2] == ["install"]:
        for spec in argv[2:]:
            if m := re.search(r"\[([\w,-]+)\]", spec):
                unknown = set(m.group(1).split(",")) - _extras()
                if unknown:
                    return f"{where}: `{' '.join(argv)}` names extras pyproject.toml lacks: {', '.join(sorted(unknown))}"
        return None
    if prog in ("python", "python3", "bash") and len(argv) > 1 and argv[1].endswith((".py", ".sh")):
        if not (ROOT / argv[1]).is_file() and not (folder / argv[1]).is_file():
            return f"{where}: `{' '.join(argv)}`: {argv[1]} is neither in the repository nor a file of the page"
    return None


def check_locust(lines: list[tuple[list[str], str]]) -> list[str]:
    """Parse the locust command lines with Locust's parser and qsim's options, in a subprocess (importing
    Locust monkey-patches the process for gevent)."""
    if not lines:
        return []
    script = (
        "import json, sys\n"
        "import locust.argument_parser as ap\n"
        "from qsim.loadtest.config import add_arguments\n"
        "bad = []\n"
        "for argv, where in json.loads(sys.stdin.read()):\n"
        "    p = ap.get_parser(default_config_files=())\n"
        "    add_arguments(p)\n"
        "    try:\n"
        "        p.parse_args(argv[1:])\n"
        "    except SystemExit as e:\n"
        "        if e.code: bad.append(f'{where}: `{\" \".join(argv)}` does not parse (locust)')\n"
        "print(json.dumps(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], input=json.dumps(lines), capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def _is_scenario(data: dict[str, Any]) -> bool:
    return "jobs" in data and "pools" in data


def parse_block(b: Block, folder: Path) -> list[str]:
    """Problems of one block, found without running it."""
    problems = []
    if b.lang not in LANGUAGES:
        return [f"{b.where}: a block of language {b.lang or '(none)'!r}: use one of {', '.join(LANGUAGES)}"]
    if b.marker and not (b.skip or b.long or re.fullmatch(r"exit=\d+(\|\d+)*", b.marker) or b.not_output or b.unchecked
                         or (b.marker == "invalid" and b.lang == "toml")
                         or re.fullmatch(r"output( (rel|abs)=\d*\.?\d+| \.\.\.)*", b.marker)):
        problems.append(f"{b.where}: unknown marker <!-- test: {b.marker} -->")
    if b.lang == "text" and not (b.output or b.not_output is not None or b.unchecked is not None):
        problems.append(f"{b.where}: a text block is either output (<!-- test: output -->, checked against the "
                        "block before it) or says what else it is (<!-- test: not-output WHAT -->)")
    if (b.not_output is not None and not b.not_output) or (b.unchecked is not None and not b.unchecked):
        problems.append(f"{b.where}: a {b.marker.split()[0]} marker must say what the block is, or why")
    if b.output and b.lang != "text":
        problems.append(f"{b.where}: an output marker belongs on a text block")
    if b.marker.startswith("skip") and not b.skip.strip():
        problems.append(f"{b.where}: a skip marker must say why")
    if b.marker == "invalid":  # a scenario shown for the error it gives
        from qsim import Scenario, ScenarioError

        try:
            Scenario.from_dict(tomllib.loads(b.code), source=folder / (b.title or "example.toml"))
        except ScenarioError:
            return problems
        return [*problems, f"{b.where}: a scenario marked invalid loads without an error"]
    try:
        if b.lang == "toml":
            data = tomllib.loads(b.code)
            if _is_scenario(data):
                from qsim import Scenario

                Scenario.from_dict(data, source=folder / (b.title or "example.toml"))
        elif b.lang == "yaml":
            list(yaml.safe_load_all(b.code))
        elif b.lang == "json":
            json.loads(b.code)
        elif b.lang == "python":
            compile(b.code, b.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except Exception as e:  # noqa: BLE001 - any failure to parse is the finding
        problems.append(f"{b.where}: {b.lang} block does not parse: {type(e).__name__}: {e}")
    if b.lang in ("sh", "bash", "text"):
        for argv in commands(b):
            if (p := check_command(argv, b.where, folder)) is not None:
                problems.append(p)
    return problems


#: What of the repository a run folder links to, so an example written for a clone (`python benchmarks/x.py`,
#: `locust -f loadtests`) runs there while its outputs stay in the folder.
CLONE = ("benchmarks", "deploy", "docs", "loadtests", "notebooks", "qsim", "tests", "pyproject.toml")


def _clone(folder: Path) -> None:
    for name in CLONE:
        if not (folder / name).exists():
            (folder / name).symlink_to(ROOT / name)


def _write_titled(page_blocks: list[Block], folder: Path) -> None:
    for b in page_blocks:
        if b.title:
            target = folder / b.title
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(b.code, encoding="utf-8")


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_page_parses(page: Path, tmp_path: Path) -> None:
    # Given every block of the page (its files written, so scenarios find their CSVs)
    page_blocks = blocks(page)
    _write_titled(page_blocks, tmp_path)
    # When each is parsed and its command lines checked
    problems = [p for b in page_blocks for p in parse_block(b, tmp_path)]
    locust = [(argv, b.where) for b in page_blocks if b.lang in ("sh", "bash", "text")
              for argv in commands(b) if argv[0] == "locust"]
    problems += check_locust(locust)
    problems += [f"{b.where}: an output block after a block that never runs (it would never be checked)"
                 for b, source in _outputs(page_blocks) if source is None or source.skip is not None]
    # Then nothing is wrong
    assert not problems, "\n".join(problems)


#: Pages with shown outputs that no block of the test run prints (each block's marker says why): none now. An
#: engine compare of an autoscaled pool, a Locust run against a BullMQ worker and a drain-timeout log line run in
#: the long step. This list only shrinks: a new unchecked output fails the test below.
KNOWN_UNCHECKED: tuple[str, ...] = ()


def test_no_shown_output_is_unchecked_beyond_the_known_ones() -> None:
    """An output a page shows that no block of the test run prints is named in KNOWN_UNCHECKED, with its reason."""
    unchecked = [b for page in PAGES for b in blocks(page) if b.unchecked is not None]
    pages = [b.path.resolve().relative_to(ROOT).as_posix() for b in unchecked]
    assert all(b.unchecked for b in unchecked), "an unchecked-output marker must say why"
    assert sorted(pages) == sorted(KNOWN_UNCHECKED), \
        "shown outputs no test produces: " + "; ".join(f"{b.where}: {b.unchecked}" for b in unchecked)


# --------------------------------------------------------------------------- running


def _outputs(page_blocks: list[Block]) -> list[tuple[Block, Block | None]]:
    """Each output block with the runnable block before it (None: there is none)."""
    out, source = [], None
    for b in page_blocks:
        if b.runnable:
            source = b
        elif b.output:
            out.append((b, source))
    return out


def _refresh(b: Block, printed: str) -> None:
    """Write what the block before ``b`` printed into the page as ``b`` (``QSIM_DOCS_REFRESH=1``)."""
    lines = b.path.read_text(encoding="utf-8").splitlines(keepends=True)
    end = next(i for i in range(b.line, len(lines)) if lines[i].strip() == "```")
    shown = [line.rstrip() + "\n" for line in printed.strip("\n").splitlines() if not PROGRESS.match(line.strip())]
    b.path.write_text("".join(lines[:b.line] + shown + lines[end:]), encoding="utf-8")


def _check_output(b: Block, printed: str) -> str | None:
    """Why the output block ``b`` is not what was printed (None: it is, or it was refreshed)."""
    rel, abs_ = b.tolerance
    if (why := output_mismatch(b.code, printed, rel=rel, abs=abs_, elides=b.elides)) is None:
        return None
    if os.environ.get("QSIM_DOCS_REFRESH") == "1" and not b.elides:
        _refresh(b, printed)
        return None
    tail = "\n".join(printed.strip().splitlines()[-40:])
    return (f"{b.where}: the output the page shows is not what the block before it printed: {why}\n"
            f"--- printed:\n{tail}")


def _run_shell(b: Block, folder: Path, url: str, shown: Block | None) -> str:
    """What the shell block ``b`` printed; it fails the test unless it ended with an exit code its marker allows.
    A block marked ``again`` (a timing check, such as ``qsim compare --check``, that other work on a shared
    machine can fail) runs again, at most twice, while its exit code or the output the page ``shown`` for it
    is not what the page says (waiting.measured_until_passed)."""
    def as_shown(run: tuple[int, str]) -> bool:
        return run[0] in b.exit_codes and (
            shown is None or output_mismatch(shown.code, run[1], rel=shown.tolerance[0], abs=shown.tolerance[1],
                                             elides=shown.elides) is None)

    runs = measured_until_passed(lambda: _shell_once(b, folder, url), as_shown, ATTEMPTS if b.again else 1,
                                 describe=lambda run: f"{b.where}: exit code {run[0]}, printed:\n{run[1]}")
    returncode, printed = runs[-1]
    if returncode not in b.exit_codes:
        _wrong_exit(b, returncode, printed)
    return printed


def _shell_once(b: Block, folder: Path, url: str) -> tuple[int, str]:
    code = _with_url(b.code, url)
    if (argvs := qsim_commands(code)) is not None:
        return run_qsim(argvs)
    code = re.sub(r"(?m)(^|&&\s*|;\s*)pip install [^&;\n]*", r"\1:", code)  # checked by the parse test
    env = {**os.environ, "REDIS_URL": url, "PYTHONUNBUFFERED": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    out = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=folder, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    return out.returncode, out.stdout


def _wrong_exit(b: Block, returncode: int, printed: str) -> None:
    tail = "\n".join(printed.strip().splitlines()[-25:])
    expected = " or ".join(map(str, b.exit_codes))
    pytest.fail(f"{b.where}: exit code {returncode}, expected {expected}:\n{b.code}\n--- output:\n{tail}",
                pytrace=False)


def _run_python(b: Block, namespace: dict[str, Any], loop: asyncio.AbstractEventLoop, url: str) -> str:
    code = compile(_with_url(b.code, url), b.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed), fresh_logging():
            result = eval(code, namespace)  # noqa: S307 - the docs' own example
            if asyncio.iscoroutine(result):
                loop.run_until_complete(result)
    except Exception as e:
        raise AssertionError(f"{b.where}: the Python example raised {type(e).__name__}: {e}") from e
    return printed.getvalue()


#: A block that runs a Node.js program (a BullMQ worker), for which the page's run installs BullMQ 6.
_NODE = re.compile(r"(^|[\s'\"])node\s")


def _run_page(page: Path, folder: Path, url: str, monkeypatch: pytest.MonkeyPatch, *, long: bool) -> None:
    page_blocks = blocks(page)
    run = [b for b in page_blocks if b.skip is None and b.runnable and (long or not b.long)]
    if not run:
        return  # nothing to run: the parse test covers the page
    if any(_NODE.search(b.code) for b in run):  # a BullMQ (Node.js) worker: `node worker.js`
        from bullmq_node import BullMQ, node_missing

        if (why := node_missing()) is not None:
            pytest.skip(why)
        monkeypatch.setenv("NODE_PATH", str(BullMQ("6").modules))  # where `require('bullmq')` finds it
    # Given a fresh folder with the page's files, and the session's Redis as $REDIS_URL
    _clone(folder)
    _write_titled(page_blocks, folder)
    monkeypatch.chdir(folder)
    monkeypatch.setenv("REDIS_URL", url)
    monkeypatch.syspath_prepend(str(folder))
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    loop = asyncio.new_event_loop()
    try:
        # When each block runs in order
        printed: dict[int, str] = {}  # what each block that ran printed, by its line
        shown = {source.line: out for out, source in _outputs(page_blocks) if source is not None}
        for b in run:
            if b.lang == "python":
                printed[b.line] = _run_python(b, namespace, loop, url)
            else:
                printed[b.line] = _run_shell(b, folder, url, shown.get(b.line))
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    # Then each exited as its marker says (0 unless told), no Python block raised,
    # and each output block shows what the block before it printed
    # (from the end: a refreshed block moves none before it)
    wrong = [why for b, source in reversed(_outputs(page_blocks)) if source is not None and source.line in printed
             and (why := _check_output(b, printed[source.line])) is not None]
    if wrong:
        pytest.fail("\n\n".join(reversed(wrong)), pytrace=False)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_page_runs(page: Path, tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The blocks not marked long (a block that needs a long block's output is marked long too)."""
    _run_page(page, tmp_path, redis_url, monkeypatch, long=False)


@pytest.mark.long
@pytest.mark.timeout(900)
@pytest.mark.parametrize("page", [p for p in PAGES if any(b.long for b in blocks(p))], ids=_id)
def test_page_runs_whole(page: Path, tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every block of a page that has long ones, in order."""
    _run_page(page, tmp_path, redis_url, monkeypatch, long=True)


def test_a_block_marked_again_runs_again_until_it_exits_as_the_page_says(tmp_path: Path, redis_url: str) -> None:
    # Given a command that fails its first run (a timing check a busy machine slowed) and passes the next
    flaky = 'echo run >> runs.txt; test "$(wc -l < runs.txt)" -ge 2; echo "check passed"'
    shown = Block(tmp_path / "a-page", 3, "text", "check passed", marker="output")
    # When it runs marked again, and unmarked
    printed = _run_shell(Block(tmp_path / "a-page", 1, "sh", flaky, marker="long again"), tmp_path, redis_url, shown)
    # Then it ran twice and the second run's output is the block's; without the mark the first failure fails
    assert (tmp_path / "runs.txt").read_text().count("run") == 2 and printed.strip() == "check passed"
    (tmp_path / "runs.txt").unlink()
    with pytest.raises(pytest.fail.Exception, match="exit code 1"):
        _run_shell(Block(tmp_path / "a-page", 1, "sh", flaky, marker="long"), tmp_path, redis_url, shown)
    assert (tmp_path / "runs.txt").read_text().count("run") == 1
