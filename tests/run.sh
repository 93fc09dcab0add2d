#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs qsim with its test extras,
# makes sure redis-server is on PATH (the tests start their own throwaway server
# on a free port; they never touch a Redis you run), then runs pytest.
# Extra arguments go to pytest, e.g.  bash tests/run.sh -m "not slow"
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "redis-server not found: installing it with apt-get" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  else
    echo "redis-server (Redis >= 6.2) is needed on PATH: install it, e.g. 'sudo apt-get install redis-server' or 'brew install redis', then run this again." >&2
    exit 1
  fi
fi

PYTHON="${PYTHON:-python3}"
"$PYTHON" -m pip install --quiet --disable-pip-version-check -e ".[dev]"

# A real BullMQ (Node.js) for the BullMQ tests and benchmarks: Node.js and npm come from apt-get when they
# are missing (as redis-server does), then the pinned bullmq versions go into
# ${XDG_CACHE_HOME:-~/.cache}/qsim/node with npm, once. Without them the BullMQ tests skip, saying so
# (under CI=true a missing Node.js fails the run instead: tests/conftest.py).
if ! { command -v node && command -v npm; } >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "node/npm not found: installing Node.js and npm with apt-get" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null ||
      echo "apt-get could not install nodejs and npm" >&2
  fi
fi
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  "$PYTHON" tests/bullmq_node.py install
else
  echo "node/npm not on PATH: the BullMQ tests will be skipped (install Node.js >= 18 and npm to run them)" >&2
fi

# pyproject's pytest configuration collects tests/ and notebooks/ (the notebooks, marked long, run with nbmake
# under --long). The tests run on pytest-xdist workers, one test file per worker at a time (module fixtures
# are set up once): QSIM_TEST_WORKERS sets how many (default: one per core and one more, since many tests
# wait on real processes and clocks; 0 runs them in this process).
workers="${QSIM_TEST_WORKERS:-$(( $(nproc 2>/dev/null || echo 1) + 1 ))}"
exec "$PYTHON" -m pytest -n "$workers" --dist loadfile "$@"
