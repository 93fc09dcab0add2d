"""Start a user's worker command after its cold start: ``python command_start.py --ready-key K --id W --at T -- CMD...``.

Run by path (not ``-m``: importing the qsim package would slow every start) by
:class:`qsim.harness.commands.CommandProcesses`. It waits until the Unix time
``--at`` (the process's cold start; a SIGTERM meanwhile ends it, as a pod
stopped before it runs), pushes ``--id`` to the Redis list ``--ready-key`` on
``--redis`` (the autoscaler counts the process as taking work from then) and
replaces itself with the command (``exec``: the same process id, so the
harness's signals reach the command itself). Exit code 127 when the command
cannot be executed. Only the standard library and ``redis`` are imported.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Wait, report, exec (see the module docstring); returns only when the exec failed."""
    p = argparse.ArgumentParser(prog="command_start.py")
    p.add_argument("--ready-key", required=True)
    p.add_argument("--id", required=True)
    p.add_argument("--at", type=float, default=0.0)
    p.add_argument("--redis", required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command given after --")
    import redis

    wait = args.at - time.time()
    if wait > 0:
        time.sleep(wait)
    client = redis.Redis.from_url(args.redis, socket_connect_timeout=5.0)
    try:
        client.rpush(args.ready_key, args.id)
    finally:
        client.close()
    sys.stdout.flush()
    try:
        os.execvp(command[0], command)
    except OSError as e:
        print(f"cannot run the worker command {command[0]!r}: {e}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main())
