"""The throwaway redis-server the tests use (it lives in qsim.harness.server)."""

from qsim.harness.server import RedisServer, free_port

__all__ = ["RedisServer", "free_port"]
