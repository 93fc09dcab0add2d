"""What a name may be: the engine's rules for queue names, job names and ids, kept below both the
engine (:mod:`qsim.engine.keys`, :mod:`qsim.engine.queue`) and the Scenario, which checks them when
it is loaded, so ``simulate`` refuses what ``run`` could not run.
"""

from __future__ import annotations

from qsim.errors import UnencodableText

__all__ = ["MAX_NAME", "JOB_ID_ROOM", "MAX_JOB_TYPE", "KEY_CHARS", "FILE_NAME_MAX", "check_unicode", "name_problem",
           "validate_name"]

#: Longest queue name, prefix, group, job name and job_id (each is copied into keys, events and log lines).
MAX_NAME = 256
#: Characters the runners put around a job type's name to make its job ids (``<run id><node>-<type>-<n>.<k>``
#: in a load test): a run id of at most 40, a restart or node tag, the job's number and a child's index.
JOB_ID_ROOM = 64
#: Longest job type name: its job ids must fit in :data:`MAX_NAME`.
MAX_JOB_TYPE = MAX_NAME - JOB_ID_ROOM
#: What a queue name, prefix or group may not hold: braces (the hash tag), colons (the key separator), spaces.
KEY_CHARS = "{}: \t\r\n"
#: Bytes in one file name (NAME_MAX of Linux and macOS file systems): the engine harness names each worker
#: process's log file after its pool.
FILE_NAME_MAX = 255


def check_unicode(what: str, value: str) -> str:
    """Raise :class:`~qsim.errors.UnencodableText` (a ValueError) unless ``value`` can be sent to Redis as UTF-8.

    A lone surrogate (``"\\udcff"``, e.g. from ``os.fsdecode`` of bytes that are
    not UTF-8) cannot be encoded: the client would write ``?`` in its place and
    two different names would meet in one key.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise UnencodableText(f"{what} must be text that UTF-8 can encode; {value!r} holds the lone surrogate "
                              f"{value[e.start]!r} at index {e.start}") from None
    return value


def name_problem(value: object, *, key_chars: bool = True) -> str:
    """Why ``value`` is not a name ('' when it is one): a non-empty str of at most :data:`MAX_NAME`
    characters that UTF-8 can encode and, with ``key_chars``, without :data:`KEY_CHARS`."""
    if not isinstance(value, str) or not value or (key_chars and any(c in value for c in KEY_CHARS)):
        return f"must be a non-empty string{' without braces, colons or spaces' if key_chars else ''}, got {value!r}"
    if len(value) > MAX_NAME:
        return f"must be at most {MAX_NAME} characters, got {len(value)} ({value[:40]!r}...)"
    try:
        check_unicode("", value)
    except ValueError as e:
        return str(e).lstrip()
    return ""


def validate_name(what: str, value: str) -> str:
    """Check a queue name, prefix or group: a non-empty str of at most :data:`MAX_NAME` characters, UTF-8
    encodable, without braces, colons or spaces."""
    problem = name_problem(value)
    if problem:
        raise ValueError(f"{what} {problem}")
    return value
