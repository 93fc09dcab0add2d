"""Results, the same for every source (model, engine, BullMQ): per-job records, the Summary, its windows,
how they read in Jupyter (:mod:`~qsim.results.display`) and where files are written
(:mod:`~qsim.results.outpath`)."""

__all__: list[str] = []  # a room of modules: import them by name
