"""The old import path of :mod:`qsim.spec.dists` (distributions), kept for code that imports it from here."""

from qsim.spec.dists import *  # noqa: F403
from qsim.spec.dists import __all__ as __all__
