"""Load-test a Redis job queue with a qsim Scenario: ``locust -f loadtests``.

The scenario's job types are added at the scenario's rates (request type
``enqueue``, name = job type: the add round trip), and every job of the run
that ends is reported with its latency, enqueue -> completion, from Redis
timestamps (request type ``job``; ``wait`` is enqueue -> start). The test runs
for the scenario's duration (or ``-t``), drains up to ``--drain`` s, then stops.

Examples::

    # self-contained, on this machine: a local Redis, the scenario's pools as processes
    locust -f loadtests --headless --scenario workshop --start-workers \\
        --redis-url redis://127.0.0.1:6379/0

    # 10 producer users, a 30 s arrival window, CSV statistics
    locust -f loadtests --headless -u 10 -r 10 -t 30s --scenario workshop \\
        --redis-url redis://127.0.0.1:PORT/0 --start-workers --csv out/workshop

    # staging: its workers are deployed; the Redis is not local, so confirm it
    locust -f loadtests --headless --scenario path/to/checkout.toml --rate-scale 2 \\
        --redis-url redis://staging-redis:6379/0 --i-know-this-is-not-local

    # a 24 h rate profile compressed into 14.4 minutes, its rates kept (the peak at the peak's rate)
    locust -f loadtests --headless --scenario path/to/day.toml --time-scale 0.01 \\
        --redis-url redis://staging-redis:6379/0 --i-know-this-is-not-local

    # the web UI (http://localhost:8089): the same options, shown in the form
    locust -f loadtests --scenario workshop --start-workers

``-u`` is the number of producer users (concurrent adds), not the rate: the
rate is the scenario's times ``--rate-scale``. ``burst``, ``trace`` and
``profile`` types arrive at their drawn times (a rate profile at its own rate
moment by moment: the peak, not the mean), flows come with their children, and with
``--start-workers`` the scenario's ``[[events]]`` (sigterm, sigkill, start)
happen to the local pools. Without ``-u`` each producer
adds at most 20 jobs/s. The qsim options (``--redis-url``, ``--scenario``,
``--i-know-this-is-not-local``, ``--qsim-prefix``, ``--rate-scale``, ``--time-scale``, ``--pacing``, ``--drain``,
``--start-workers``, ``--run-id``, ...) and their environment variables are listed in
``qsim/loadtest/config.py`` and by ``locust -f loadtests --qsim-help`` (Locust prints its ``--help``
before it imports a locustfile, so that cannot show them).
"""

from locust import events

from qsim.loadtest import ProducerUser, QueueObserverUser, ScenarioShape, register

__all__ = ["ProducerUser", "QueueObserverUser", "ScenarioShape"]

register(events)
