"""Redis's instructions per job, qsim's engine beside BullMQ on Node: redis_cost.py's comparison, counted exactly.

benchmarks/redis_cost.py measures Redis's CPU time per job, which on a shared
machine moves by a third from run to run. The instructions redis-server
executes for the same work do not (to a percent or two), so here the
two systems' Redis work is compared exactly: the same phases as
redis_cost.py (``--jobs`` no-op jobs added in batches of 1,000, then drained
by one worker process of each concurrency, completed jobs kept), on one
redis-server run under ``valgrind --tool=callgrind``, whose counters are
dumped at the start and the end of each phase (``callgrind_control
--dump``): a dump's total is the phase's instructions. A first small run of
each system, not counted, loads its scripts (Redis compiles a script once).

These are user-space instructions: the kernel's work on Redis's sockets is
not counted, and BullMQ's per-job round trips make more of it (redis_cost.py's
CPU time includes it, which is why its ratios are lower at concurrency 1). Under
valgrind Redis runs about 50 times slower, so the workers' batches are larger
than at full speed; the count per job of each system is what its scripts and
commands cost Redis at that batching.

Usage: ``python benchmarks/redis_instructions.py [--jobs 2000] [--concurrency 1,10,100] [--skip-bullmq]
[--snippet]``; needs valgrind (``apt-get install valgrind``). With ``--snippet`` the table goes to
docs/snippets/benchmarks/redis-instructions.md, which docs/explanation/performance.md includes. About three
minutes.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from benchmarks.redis_cost import BULK, bullmq_run, qsim_run  # noqa: E402
from qsim.harness.server import RedisServer  # noqa: E402


class Counter:
    """The instructions a callgrind-run redis-server executed since the last :meth:`mark`."""

    def __init__(self, server: RedisServer, out: Path) -> None:
        assert server.proc is not None
        self.pid, self.out = server.proc.pid, out
        self.marks: list[int] = []

    def mark(self) -> None:
        before = set(self.out.parent.glob(self.out.name + ".*"))
        subprocess.run(["callgrind_control", "--dump", str(self.pid)], capture_output=True, check=True, timeout=60)
        deadline = time.monotonic() + 30
        while not (new := set(self.out.parent.glob(self.out.name + ".*")) - before):
            if time.monotonic() > deadline:
                raise RuntimeError("callgrind wrote no dump within 30 s")
            time.sleep(0.05)
        dump = new.pop()
        for _ in range(600):  # the dump is written in one go; its totals line comes last
            m = re.search(r"^totals: (\d+)", dump.read_text(), re.M)
            if m:
                self.marks.append(int(m.group(1)))
                dump.unlink()
                return
            time.sleep(0.05)
        raise RuntimeError(f"no totals in {dump}")

    def phases(self, n: int) -> tuple[float, float]:
        """Instructions per job of the last run's add and drain (its marks: start, add done, drain done)."""
        return self.marks[-2] / n, self.marks[-1] / n


def table(rows: dict[int, dict[str, tuple[float, float]]], n: int, bull_version: str | None) -> str:
    head = ["concurrency", "qsim instructions/job (add + drain)"]
    if bull_version:
        head += ["BullMQ instructions/job (add + drain)", "qsim / BullMQ", "drain alone"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c, sides in rows.items():
        qa, qd = sides["qsim"]
        cells = [str(c), f"{(qa + qd) / 1000:,.0f}k ({qa / 1000:,.0f}k + {qd / 1000:,.0f}k)"]
        if bull_version:
            ba, bd = sides["bullmq"]
            cells += [f"{(ba + bd) / 1000:,.0f}k ({ba / 1000:,.0f}k + {bd / 1000:,.0f}k)",
                      f"{(qa + qd) / (ba + bd):.2f}", f"{qd / bd:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    vs = f" and BullMQ {bull_version} (Node.js)" if bull_version else ""
    return ("\n".join(lines) + "\n\n"
            f"The instructions redis-server executed (valgrind callgrind, user space) for qsim's engine{vs}, one "
            f"worker process each, the systems taking turns on one redis-server: {n:,} no-op jobs added in batches "
            f"of {BULK:,}, then drained, after a first small run of each that loads its scripts; one run each (the "
            f"counts repeat to a percent or two: Redis's timers and the batches vary a little). The kernel's socket "
            f"work is not counted: benchmarks/redis_cost.py's CPU time includes it.\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2000, help="jobs per add and drain (default 2000)")
    ap.add_argument("--concurrency", default="1,10,100", help="slots of the one worker process (default 1,10,100)")
    ap.add_argument("--skip-bullmq", action="store_true", help="qsim alone")
    ap.add_argument("--snippet", action="store_true",
                    help="write the table to docs/snippets/benchmarks/redis-instructions.md")
    a = ap.parse_args()
    if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        print("valgrind (callgrind) is not installed: apt-get install valgrind", file=sys.stderr)
        return 2
    started = time.time()
    from benchmarks.peers.bullmq_node import bullmq_unless

    bq = bullmq_unless(a.skip_bullmq)
    rows: dict[int, dict[str, tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        server = RedisServer(Path(tmp), run_under=["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"])
        server.start(timeout=60)
        try:
            counter = Counter(server, out)
            # a first small run of each system loads its scripts (compiled once per server): not counted
            qsim_run(server.url, 100, 1, bulk=True)
            if bq:
                bullmq_run(bq, server.url, 100, 1, bulk=True)
            print(f"redis-server under callgrind on port {server.port}; {a.jobs} jobs per run"
                  + (f"; BullMQ {bq.version}" if bq else ""), flush=True)
            for c in (int(x) for x in a.concurrency.split(",")):
                rows[c] = {}
                for system in ("qsim", "bullmq") if bq else ("qsim",):
                    if system == "qsim":
                        qsim_run(server.url, a.jobs, c, bulk=True, mark=counter.mark)
                    else:
                        bullmq_run(bq, server.url, a.jobs, c, bulk=True, mark=counter.mark)
                    rows[c][system] = counter.phases(a.jobs)
                    add, drain = rows[c][system]
                    print(f"concurrency {c:>3} {system:<6}: add {add:,.0f}, drain {drain:,.0f} instructions/job",
                          flush=True)
        finally:
            server.stop()
    text = table(rows, a.jobs, bq.version if bq else None)
    print("\n" + text)
    if a.snippet:
        from benchmarks.snippet import write_snippet

        print(f"wrote {write_snippet('redis-instructions', text, started=started)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
