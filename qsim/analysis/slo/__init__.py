"""The SLO language: ``p95_wait<=2`` parsed once (:mod:`~qsim.analysis.slo.language`), judged over a run's
windows (:mod:`~qsim.analysis.slo.windowed`), per-run metrics by name (:mod:`~qsim.analysis.slo.metrics`) and
thresholds that gate a deploy (:mod:`~qsim.analysis.slo.thresholds`)."""

__all__: list[str] = []  # a room of modules: import them by name
