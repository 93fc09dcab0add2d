"""The old import path of :mod:`qsim.results.records` (per-job records), kept for code that imports it from here."""

from qsim.results.records import *  # noqa: F403
from qsim.results.records import __all__ as __all__
