"""Runs a Scenario against the real engine: planned jobs, worker processes, signals, records."""

from qsim.harness.plan import PlannedJob, plan_jobs
from qsim.harness.processes import PoolProcessSpec, WorkerProcesses
from qsim.harness.run import EngineResult, check_supported, run_scenario, run_scenario_async
from qsim.harness.server import RedisServer, free_port

__all__ = ["run_scenario", "run_scenario_async", "EngineResult", "check_supported", "plan_jobs", "PlannedJob",
           "RedisServer", "free_port", "WorkerProcesses", "PoolProcessSpec"]
