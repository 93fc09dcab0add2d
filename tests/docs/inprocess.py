"""Run a docs shell block's ``qsim ...`` lines in this process: ``qsim.cli.main(argv)`` with stdout and stderr
captured together (as ``2>&1`` would), ``SystemExit`` caught, logging set up by ``main`` as in a fresh
interpreter. A fresh interpreter per command costs about a second of imports; a page of ten commands ten.

Only blocks made of plain ``qsim`` command lines run so (``pip install`` parts are dropped: the parse test
checks them); a block with a pipe, a redirection, a variable, a loop or another program runs in bash.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import shlex
import traceback
import warnings
from collections.abc import Iterator

from fences import joined_lines

__all__ = ["fresh_logging", "qsim_commands", "run_qsim"]

#: What makes a line more than a plain command once its quoted words are taken out.
_SHELL = re.compile(r"[|&;<>`$*?~(){}\[\]]|\\.")
_QUOTED = re.compile(r"'[^']*'|\"[^\"$`\\]*\"")


def qsim_commands(code: str) -> list[list[str]] | None:
    """The ``qsim`` command lines of a shell block, split as bash would, or None when the block needs bash."""
    out = []
    for line in joined_lines(code):
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            return None
        if not words:
            continue
        for part in re.split(r"\s&&\s", _QUOTED.sub("''", line.split(" #")[0])):
            if _SHELL.search(part):
                return None
        argv: list[str] = []
        for w in [*words, "&&"]:
            if w != "&&":
                argv.append(w)
                continue
            if argv[:2] == ["pip", "install"]:
                pass
            elif argv[:1] == ["qsim"]:
                out.append(argv)
            else:
                return None
            argv = []
    return out


@contextlib.contextmanager
def fresh_logging() -> Iterator[None]:
    """The root logger as a fresh interpreter has it (no handlers: a library's warnings reach ``sys.stderr``
    through ``logging.lastResort``, and ``logging.basicConfig`` works), pytest's capture handlers put back
    after."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    root.handlers = []
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers, root.level = saved


def run_qsim(commands: list[list[str]]) -> tuple[int, str]:
    """Run the commands in order, stopping at the first that fails (``bash -e``); the exit code of the last
    one run and what they printed, stdout and stderr interleaved."""
    from qsim.cli import main

    printed = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed), warnings.catch_warnings():
        # a fresh interpreter's warning filters (the test run turns warnings into errors)
        warnings.resetwarnings()
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", category)
        for argv in commands:
            with fresh_logging():  # main's logging.basicConfig then writes to the captured stderr
                try:
                    code = main(argv[1:])
                except SystemExit as e:  # argparse: --help, a usage error
                    code = e.code if isinstance(e.code, int) else (e.code is not None)
                except Exception:  # noqa: BLE001 - a fresh interpreter would print it and exit 1
                    traceback.print_exc()
                    code = 1
            if code:
                break
    return int(code), printed.getvalue()
