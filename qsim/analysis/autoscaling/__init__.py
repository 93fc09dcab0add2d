"""The policy contest (``qsim autoscale``): each policy's runs and figures (:mod:`~qsim.analysis.autoscaling.runs`),
the elasticity figures (:mod:`~qsim.analysis.autoscaling.elasticity`), the contest and tuning
(:mod:`~qsim.analysis.autoscaling.contest`), each policy's search space and the search
(:mod:`~qsim.analysis.autoscaling.search`), the static baseline (:mod:`~qsim.analysis.autoscaling.baseline`)
and their plots (:mod:`~qsim.analysis.autoscaling.plots`)."""

__all__: list[str] = []  # a room of modules: import them by name
