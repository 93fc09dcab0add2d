"""The Scenario: what is simulated and run, written once for the model, the engine harness and the load test.

- :mod:`~qsim.spec.scenario`: the frozen dataclass tree and its TOML/dict parser with every check;
- :mod:`~qsim.spec.autoscaler`: ``[[autoscalers]]``, a policy and its parameters (one typed spec per policy);
- :mod:`~qsim.spec.toml_writer`: a Scenario written back as TOML;
- :mod:`~qsim.spec.dists`: service-time and arrival distributions; :mod:`~qsim.spec.backoff`: the retry rule;
- :mod:`~qsim.spec.workload`: every job of a run drawn once; :mod:`~qsim.spec.templates`: payload templates;
- :mod:`~qsim.spec.settings`: the worker settings a deployment shares (the ``[engine]`` table);
- :mod:`~qsim.spec.offered_load`: a scenario's offered load and the engine overhead at that load.
"""

__all__: list[str] = []  # a room of modules: import them by name
