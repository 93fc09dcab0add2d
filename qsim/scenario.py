"""The old import path of :mod:`qsim.spec.scenario` (the Scenario and its parts), kept for code that imports it from here."""

from qsim.spec.scenario import *  # noqa: F403
from qsim.spec.scenario import __all__ as __all__
