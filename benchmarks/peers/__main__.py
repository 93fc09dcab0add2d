"""``python -m benchmarks.peers MODULE URL N CONCURRENCY``: run one peer's worker until SIGTERM."""

import importlib
import sys

mod = importlib.import_module(f"benchmarks.peers.{sys.argv[1]}")
sys.exit(mod.work(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])) or 0)
