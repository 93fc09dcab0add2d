"""Model versus engine: side by side (:mod:`~qsim.analysis.fidelity.compare`), held to a tolerance
(:mod:`~qsim.analysis.fidelity.check`), window by window (:mod:`~qsim.analysis.fidelity.window_check`) and
for autoscaled runs (:mod:`~qsim.analysis.fidelity.autoscaling`)."""

__all__: list[str] = []  # a room of modules: import them by name
