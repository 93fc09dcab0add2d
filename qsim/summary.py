"""The old import path of :mod:`qsim.results.summary` (the Summary), kept for code that imports it from here."""

from qsim.results.summary import *  # noqa: F403
from qsim.results.summary import __all__ as __all__
