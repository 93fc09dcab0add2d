"""A package that is also a verb: ``qsim.calibrate(...)`` and ``qsim.calibrate.from_redis(...)`` alike.

``qsim.calibrate`` and ``qsim.advise`` are the flat API's verbs (:mod:`qsim.api`)
and subpackages of the same names. Python binds a subpackage to its parent's
attribute when it is first imported, so a plain function ``qsim.calibrate``
would be replaced by the module as soon as anything imported
``qsim.calibrate.*``. Instead the package itself is callable:
:func:`make_callable` gives its module object a ``__call__`` (and a
``__signature__`` for ``help()`` and editors), so the name works either way.
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable
from typing import Any

__all__ = ["make_callable"]


def make_callable(module_name: str, verb: Callable[..., Any]) -> None:
    """Make the module ``module_name`` callable as ``verb`` (call it at the end of the package's ``__init__``)."""
    module = sys.modules[module_name]

    class VerbModule(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return verb(*args, **kwargs)

    VerbModule.__name__ = VerbModule.__qualname__ = f"{module_name.rsplit('.', 1)[-1]}_module"
    module.__class__ = VerbModule
    setattr(module, "__signature__", inspect.signature(verb))  # what inspect.signature reads
