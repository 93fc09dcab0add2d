"""Fenced code blocks of the docs, with the test marker each may carry.

A block is a fence of three backticks with a language (``python``, ``sh``, ``toml``, ``yaml``,
``json``, ``text``) and optional attributes (``title="shop.toml"``). The line above it may be an HTML
comment that tells the example runner (``tests/docs/test_examples.py``) what to do with it; the
comment does not show on the site::

    <!-- test: skip needs a staging Redis -->     parsed and checked, not run (say why)
    <!-- test: long -->                           run only with --long (the page's run is marked long)
    <!-- test: exit=2 -->                         a command block expected to exit with this code
    <!-- test: exit=0|1 -->                       ... with one of these codes (a verdict that depends on the machine
                                                  it runs on, such as an uncalibrated ``compare --check``)
    <!-- test: long again -->                     a timing check (``compare --check``) run again, at most twice,
                                                  while its exit code or its output block is not the page's
    <!-- test: output -->                         a text block: what the block before it prints, stdout and
                                                  stderr (checked whenever that block runs, line for line: see
                                                  ``output_mismatch``)
    <!-- test: output rel=0.25 abs=0.01 -->       the same, each number within 25% or 0.01 of the one shown
                                                  (figures of a run on the real engine, or timed)
    <!-- test: output ... -->                     a line ``...`` in the block stands for printed lines left out
    <!-- test: invalid -->                        a TOML scenario shown for the error it gives (loading it must fail)
    <!-- test: not-output a formula -->           a text block that is not what a command prints (say what it is)
    <!-- test: unchecked-output WHY -->           printed output that no command of the test run produces yet (say
                                                  why): listed as a skip of ``test_every_shown_output_is_checked``

Every block is at least parsed: TOML, YAML and JSON are loaded, a TOML block that looks like a
scenario is validated as one, Python is compiled, the ``qsim`` and ``locust`` command lines are
checked against their argument parsers. ``text`` blocks are output; their ``$ qsim ...`` lines are
checked too. A line ``--8<-- "deploy/kubernetes/worker.yaml"`` in a block is that file (the site shows
it through pymdownx.snippets), so a block can show a repository file exactly.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Block", "blocks", "LANGUAGES", "PROGRESS", "commands", "joined_lines", "output_mismatch"]

#: The languages a block may have; anything else fails the test (so nothing is silently left unchecked).
LANGUAGES = ("python", "sh", "bash", "toml", "yaml", "json", "text")
_FENCE = re.compile(r"^(?P<indent> *)```(?P<info>.*)$")
_MARKER = re.compile(r"^\s*<!-- test: (?P<what>.+?) -->\s*$")
_ATTR = re.compile(r'(\w+)="([^"]*)"')
#: A line ``--8<-- "path"`` (pymdownx.snippets) stands for that repository file, as on the site.
_SNIPPET = re.compile(r'^--8<-- "([^"]+)"\n', re.MULTILINE)
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Block:
    """One fenced block of a page."""

    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    title: str | None = None
    marker: str = ""  # the text of <!-- test: ... -->, if any
    attrs: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """``path:line`` of the opening fence (the path relative to the current folder when it is under it)."""
        try:
            shown = self.path.resolve().relative_to(Path.cwd())
        except ValueError:
            shown = self.path
        return f"{shown}:{self.line}"

    @property
    def skip(self) -> str | None:
        """Why the block is not run (None: it is)."""
        if self.marker.startswith("skip"):
            return self.marker[4:].strip() or "marked skip"
        return None

    @property
    def long(self) -> bool:
        return self.marker.split(" ", 1)[0] == "long"

    @property
    def output(self) -> bool:
        """The block is the printed output of the runnable block before it, to be checked."""
        return self.marker.split(" ", 1)[0] == "output"

    @property
    def tolerance(self) -> tuple[float, float]:
        """``(rel, abs)`` of an output block: how far each printed number may be from the one shown."""
        words = dict(w.split("=", 1) for w in self.marker.split()[1:] if "=" in w)
        return float(words.get("rel", 0)), float(words.get("abs", 0))

    @property
    def not_output(self) -> str | None:
        """What a text block that is not printed output is (``<!-- test: not-output a formula -->``), or None."""
        if self.marker.split(" ", 1)[0] == "not-output":
            return self.marker[len("not-output"):].strip()
        return None

    @property
    def unchecked(self) -> str | None:
        """Why an output a page shows is not checked (``<!-- test: unchecked-output WHY -->``), or None."""
        if self.marker.split(" ", 1)[0] == "unchecked-output":
            return self.marker[len("unchecked-output"):].strip()
        return None

    @property
    def elides(self) -> bool:
        """An output block whose ``...`` lines stand for printed lines left out."""
        return self.output and "..." in self.marker.split()[1:]

    @property
    def runnable(self) -> bool:
        """A block the runner executes (unless it is marked skip, or long in a short run)."""
        return self.lang in ("python", "sh", "bash") and not self.title

    @property
    def again(self) -> bool:
        """A timing check run again, at most twice, when its exit code or output is not the page's (``again``)."""
        return "again" in self.marker.split()

    @property
    def exit_codes(self) -> tuple[int, ...]:
        """The exit codes the block may end with (``exit=2``, ``exit=0|1``; 0 when the marker names none)."""
        m = re.search(r"exit=(\d+(?:\|\d+)*)", self.marker)
        return tuple(int(c) for c in m.group(1).split("|")) if m else (0,)


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, info = m.group("indent"), m.group("info").strip()
        lang = info.split(" ", 1)[0] if info else ""
        attrs = dict(_ATTR.findall(info))
        marker = ""
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        if k >= 0 and (mm := _MARKER.match(lines[k])):
            marker = mm.group("what").strip()
        start = i
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        code = _SNIPPET.sub(lambda m: (ROOT / m.group(1)).read_text(encoding="utf-8"), "\n".join(body) + "\n")
        out.append(Block(path, start + 1, lang, code, attrs.get("title"), marker, attrs))
        i += 1
    return out


def joined_lines(code: str) -> list[str]:
    """The lines of shell ``code`` with backslash continuations joined, as the shell reads them."""
    return re.sub(r"\\\n\s*", " ", code).splitlines()


def commands(block: Block) -> list[list[str]]:
    """The command lines of a shell block (continuations joined, comments dropped), or the ``$ ...`` lines of
    an output block, each split like a shell would."""
    text = block.code
    if block.lang == "text":
        text = "\n".join(line[2:] for line in text.splitlines() if line.startswith("$ "))
    out = []
    for line in joined_lines(text):
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        # `a && b`, `a; b`, `a | b`: each part is a command; redirections are dropped
        part: list[str] = []
        redirect = False
        for w in words:
            if redirect:
                redirect = False
            elif w in ("&&", "||", ";", "|", "&"):
                if part:
                    out.append(part)
                part = []
            elif re.fullmatch(r"\d?>>?|<|2>&1", w):
                redirect = w != "2>&1"
            elif re.match(r"\d?>>?\S", w):
                continue
            else:
                part.append(w)
        if part:
            out.append(part)
    return out


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
#: qsim's progress bar: on a terminal one line redrawn in place, elsewhere a line every 10% of a run that lasts
#: over 2 s (on stderr); not part of what a page shows.
PROGRESS = re.compile(r"^\S.*: \d+% after \d+\.\d+s$")


def _split(line: str) -> tuple[list[str], list[float]]:
    """A line's words (runs of spaces count as one: a table re-aligns when a figure's width changes) and its
    numbers."""
    line = " ".join(line.split())
    numbers = [float(m) for m in _NUMBER.findall(line)]
    return _NUMBER.split(line), numbers


def _line_mismatch(want: str, got: str, rel: float, abs_: float) -> str | None:
    if " ".join(want.split()) == " ".join(got.split()):
        return None
    want_words, want_numbers = _split(want)
    got_words, got_numbers = _split(got)
    if not (rel or abs_) or want_words != got_words:
        return "differs"
    for shown, printed in zip(want_numbers, got_numbers, strict=True):
        if abs(printed - shown) > max(abs_, rel * abs(shown)):
            return f"{printed:g} is not within {_tolerance(rel, abs_)} of {shown:g}"
    return None


def _tolerance(rel: float, abs_: float) -> str:
    return " or ".join(t for t in (f"{rel:.0%}" if rel else "", f"{abs_:g}" if abs_ else "") if t)


def output_mismatch(expected: str, actual: str, *, rel: float = 0.0, abs: float = 0.0,  # noqa: A002
                    elides: bool = False) -> str | None:
    """Why ``actual`` (what a block printed) does not show ``expected`` (an output block); None when it does.

    Line for line: every printed line is on the page, in order, and every line of the page was printed (blank
    lines and qsim's progress bar aside). Runs of spaces count as one, so a table whose columns re-align still
    matches. With ``rel``/``abs`` each number may differ from the one shown by up to ``rel`` of it or ``abs``
    (whichever is more); the words around the numbers may not. With ``elides`` a line ``...`` stands for one
    or more printed lines left out; without it ``...`` is text like any other. A page must show something: a
    block of only ``...`` never matches.
    """
    want = [line for line in expected.splitlines() if line.strip()]
    got = [line for line in actual.splitlines() if line.strip() and not PROGRESS.match(line.strip())]
    if not [line for line in want if line.strip() != "..."]:
        return "the block shows nothing but `...`"

    def match(i: int, j: int) -> str | None:  # want[i:] against got[j:]
        while i < len(want):
            if elides and want[i].strip() == "...":
                for k in range(j + 1, len(got) + 1):  # at least one line left out
                    if match(i + 1, k) is None:
                        return None
                return f"nothing printed after line {j} matches what follows the `...` at shown line {i + 1}"
            if j == len(got):
                return f"the line\n    {want[i].strip()}\nwas not printed (the output ended before it)"
            if (why := _line_mismatch(want[i], got[j], rel, abs)) is not None:
                return f"the line\n    {want[i].strip()}\nis printed as\n    {got[j].strip()}\n({why})"
            i, j = i + 1, j + 1
        if j < len(got):
            return f"the printed line\n    {got[j].strip()}\nand {len(got) - j - 1} after it are not on the page"
        return None

    return match(0, 0)
