"""BullMQ (Node.js) as a target: drive a scenario's jobs into BullMQ queues and measure what its workers did.

- :mod:`qsim.bullmq.options`: a scenario's job types as BullMQ job options
  (``jobId``, ``attempts``, ``backoff``, ``priority``, flows), what BullMQ
  cannot mirror;
- :mod:`qsim.bullmq.producer`: adds through the maintained ``bullmq`` Python
  package (BullMQ's own Lua scripts; ``pip install 'qsim[bullmq]'``);
- :mod:`qsim.bullmq.measure`: a Summary from the jobs the calibrate BullMQ reader measured;
- :mod:`qsim.bullmq.compare`: ``qsim compare SCENARIO --target bullmq``;
- :mod:`qsim.bullmq.gauges`: a queue's waiting (``wait`` + ``prioritized``), active and in-flight
  counts, as the autoscaling metrics of those names read them.
- :mod:`qsim.bullmq.autoscaling`: ``--worker-command``: qsim starts your worker command per pool and
  scales the autoscaled pools with the model's controllers on those counts.

The Locust target is :mod:`qsim.loadtest.bullmq`. Reading a BullMQ Redis
(calibrate, advise) is :mod:`qsim.calibrate.bullmq_source`.
"""

from __future__ import annotations

from qsim.bullmq.compare import compare_bullmq, compare_bullmq_async, queue_map
from qsim.bullmq.gauges import bullmq_counts
from qsim.bullmq.measure import summary_from_measured
from qsim.bullmq.options import DEFAULT_PREFIX, check_supported, job_options, notes, priorities

__all__ = ["bullmq_counts", "compare_bullmq", "compare_bullmq_async", "queue_map", "summary_from_measured", "DEFAULT_PREFIX",
           "check_supported", "job_options", "notes", "priorities"]
