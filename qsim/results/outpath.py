"""Where qsim writes files: checked before anything runs, and never a folder tree made on the way.

Two kinds of output path, one rule each:

- a **file** (``calibrate --out FILE.toml``, ``advise --out FILE.toml``,
  ``plan --plot FILE.png``): its folder must exist and be writable; the file
  may exist (it is replaced) but must not be a folder;
- a **folder** (``simulate --out DIR``, ``run --out DIR``, ``calibrate --plots
  DIR``): qsim creates ``DIR`` itself when it is missing, one level only: its
  parent must exist and be writable; an existing ``DIR`` must be a writable folder.

qsim never creates a missing parent (no ``mkdir -p``): a typo in a path is an
error, not a new tree. The checks raise :class:`~qsim.errors.UsageError` with
one sentence naming the option (or the path); the CLI exits 2 on it. Writability
is tried, not guessed from permission bits (root may not write in ``/proc``):
an unnamed temporary file is opened in the folder and closed at once, which
leaves nothing behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from qsim.errors import UsageError

__all__ = ["out_file", "out_dir", "make_out_dir"]


def _label(option: str | None, path: str | Path) -> str:
    return f"{option} {path}" if option else str(path)


def _path(option: str | None, path: str | Path) -> Path:
    text = os.fspath(path)
    if not text.strip():
        raise UsageError(f"{option or 'an output path'} needs a path, got an empty one")
    if "\0" in text:
        raise UsageError(f"{_label(option, repr(text))}: a path cannot hold a NUL character")
    return Path(text)


def _writable(option: str | None, path: str | Path, folder: Path) -> None:
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        reason = e.strerror or str(e)
        raise UsageError(f"{_label(option, path)}: cannot write in the folder {str(folder)!r} ({reason.lower()})") \
            from None


def _parent(option: str | None, path: str | Path, p: Path, what: str) -> Path:
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.exists():
        raise UsageError(f"{_label(option, path)}: the folder {str(folder)!r} does not exist ({what})")
    if not folder.is_dir():
        raise UsageError(f"{_label(option, path)}: {str(folder)!r} is not a folder")
    return folder


def out_file(path: str | Path, option: str | None = None) -> Path:
    """Check that a file can be written at ``path``; returns it as a Path.

    Raises:
        UsageError: the folder is missing, not a folder or not writable, or
            ``path`` is a folder.
    """
    p = _path(option, path)
    try:
        return _out_file(p, option, path)
    except OSError as e:  # e.g. a name too long for the file system
        raise UsageError(f"{_label(option, path)}: {(e.strerror or str(e)).lower()}") from None


def _out_file(p: Path, option: str | None, path: str | Path) -> Path:
    if p.is_dir():
        raise UsageError(f"{_label(option, path)}: is a folder, not a file name")
    folder = _parent(option, path, p, "qsim creates no folders for an output file: make it first")
    if p.exists() and not os.access(p, os.W_OK):
        raise UsageError(f"{_label(option, path)}: the file exists and cannot be written")
    _writable(option, path, folder)
    return p


def out_dir(path: str | Path, option: str | None = None) -> Path:
    """Check that ``path`` is a writable folder, or one that can be made in an existing folder.

    Nothing is created (:func:`make_out_dir` does, once the work is done).

    Raises:
        UsageError: ``path`` is a file, or its parent is missing or not writable.
    """
    p = _path(option, path)
    try:
        return _out_dir(p, option, path)
    except OSError as e:
        raise UsageError(f"{_label(option, path)}: {(e.strerror or str(e)).lower()}") from None


def _out_dir(p: Path, option: str | None, path: str | Path) -> Path:
    if p.exists():
        if not p.is_dir():
            raise UsageError(f"{_label(option, path)}: exists and is not a folder")
        _writable(option, path, p)
        return p
    folder = _parent(option, path, p, "qsim creates only the last folder of the path: make the rest first")
    _writable(option, path, folder)
    return p


def make_out_dir(path: str | Path, option: str | None = None) -> Path:
    """:func:`out_dir`, then create the folder when missing (one level); returns it."""
    p = out_dir(path, option)
    try:
        p.mkdir(exist_ok=True)
    except OSError as e:
        raise UsageError(f"{_label(option, path)}: cannot create the folder ({(e.strerror or str(e)).lower()})") \
            from None
    return p
