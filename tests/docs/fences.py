"""Fenced code blocks of the docs, with the test marker each may carry.

A block is a fence of three backticks with a language (``python``, ``sh``, ``toml``, ``yaml``,
``json``, ``text``) and optional attributes (``title="shop.toml"``). The line above it may be an HTML
comment that tells the example runner (``tests/docs/test_examples.py``) what to do with it; the
comment does not show on the site::

    <!-- test: skip needs a staging Redis -->     parsed and checked, not run (say why)
    <!-- test: long -->                           run only with --long (the page's run is marked long)
    <!-- test: exit=2 -->                         a command block expected to exit with this code
    <!-- test: output -->                         a text block: what the block before it prints (checked
                                                  whenever that block runs; see ``output_mismatch``)
    <!-- test: output any-numbers -->             the same, numbers free (an engine run's figures vary)

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

__all__ = ["Block", "blocks", "LANGUAGES", "commands", "output_mismatch"]

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
    def any_numbers(self) -> bool:
        """An output block whose numbers may differ from run to run (only its words and shape are checked)."""
        return self.output and "any-numbers" in self.marker.split()[1:]

    @property
    def runnable(self) -> bool:
        """A block the runner executes (unless it is marked skip, or long in a short run)."""
        return self.lang in ("python", "sh", "bash") and not self.title

    @property
    def exit_code(self) -> int:
        m = re.search(r"exit=(\d+)", self.marker)
        return int(m.group(1)) if m else 0


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


def commands(block: Block) -> list[list[str]]:
    """The command lines of a shell block (continuations joined, comments dropped), or the ``$ ...`` lines of
    an output block, each split like a shell would."""
    text = block.code
    if block.lang == "text":
        text = "\n".join(line[2:] for line in text.splitlines() if line.startswith("$ "))
    text = re.sub(r"\\\n\s*", " ", text)
    out = []
    for line in text.splitlines():
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


def _normal(line: str, any_numbers: bool) -> str:
    line = " ".join(line.split())  # tables re-align when a figure's width changes
    return _NUMBER.sub("#", line) if any_numbers else line


def _pattern(line: str, any_numbers: bool) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in _normal(line, any_numbers).split("...")))


def output_mismatch(expected: str, actual: str, *, any_numbers: bool = False) -> str | None:
    """Why ``actual`` (what a block printed) does not show ``expected`` (an output block); None when it does.

    The page may abridge: its lines must appear in the output in the same order, not necessarily one after
    the other, and ``...`` stands for any text (a line of its own: for lines left out). Runs of spaces count
    as one, so a table whose columns re-align still matches; ``any_numbers`` lets every number differ.
    """
    lines = [line for line in actual.splitlines() if line.strip()]
    seen = 0
    for want in expected.splitlines():
        if not want.strip() or want.strip() == "...":
            continue
        pattern = _pattern(want, any_numbers)
        while seen < len(lines) and not pattern.fullmatch(_normal(lines[seen], any_numbers)):
            seen += 1
        if seen == len(lines):
            return f"the line\n    {want.strip()}\nis not in the output (after the lines matched before it)"
        seen += 1
    return None
