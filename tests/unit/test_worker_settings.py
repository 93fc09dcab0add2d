"""WorkerSettings: keyword-only, each bad value refused with a message quoting it; derived values computed once."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from qsim.engine import DEFAULT_REDIS_URL, Worker, WorkerSettings
from qsim.engine.keys import QueueKeys


async def _noop(job: Any) -> None:
    return None


@pytest.mark.parametrize(("options", "message"), [
    ({"queues": []}, "queues must name at least one queue, got []"),
    ({"queues": ["a", "a"]}, "queues must not repeat a name, got ['a', 'a']"),
    ({"policy": "fair"}, "policy must be one of priority, ordered, wrr, got 'fair'"),
    ({"weights": {"zz": 1}}, "weights name a queue this worker does not serve: 'zz'"),
    ({"weights": {"q": True}}, "weight of queue 'q' must be an int >= 1, got True"),
    ({"redis": 6379}, "redis must be a redis:// URL, got 6379"),
    ({"concurrency": 0}, "concurrency must be an int >= 1, got 0"),
    ({"lock_duration": 0}, "lock_duration must be > 0 seconds, got 0"),
    ({"stalled_interval": float("nan")}, "stalled_interval must be > 0 seconds, got nan"),
    ({"block_timeout": "5"}, "block_timeout must be > 0 seconds, got '5'"),
    ({"shutdown_grace": -1}, "shutdown_grace must be >= 0 seconds, got -1"),
    ({"max_stalled": -1}, "max_stalled must be an int >= 0, got -1"),
    ({"batch_size": 0}, "batch_size must be an int >= 1, got 0"),
    ({"max_inflight": 1.5}, "max_inflight must be an int >= 1, got 1.5"),
    ({"prefetch": -2}, "prefetch must be 'auto' or an int >= 0, got -2"),
    ({"prefetch": "some"}, "prefetch must be 'auto' or an int >= 0, got 'some'"),
    ({"prefetch": True}, "prefetch must be 'auto' or an int >= 0, got True"),
    ({"keep_completed": -1}, "keep_completed must be an int >= 0 or None, got -1"),
    ({"keep_completed_for": -0.5}, "keep_completed_for must be >= 0 seconds or None, got -0.5"),
    ({"prefix": "a b"}, "prefix must be a non-empty string without braces, colons or spaces, got 'a b'"),
    ({"queues": ["a", "b"], "redis": "redis+cluster://127.0.0.1:7000"}, "needs a shared group="),
])
def test_a_bad_setting_is_refused_quoting_it(options: dict[str, Any], message: str) -> None:
    # Given one bad value, When the settings (or a Worker) are made, Then ValueError quotes it
    options = {"queues": "q", **options}
    with pytest.raises(ValueError) as settings_error:
        WorkerSettings(**options)
    assert message in str(settings_error.value)
    queues = options.pop("queues")
    with pytest.raises(ValueError) as worker_error:
        Worker(queues, _noop, **options)
    assert str(worker_error.value) == str(settings_error.value)


def test_settings_are_keyword_only_and_frozen() -> None:
    with pytest.raises(TypeError):
        WorkerSettings("q")  # type: ignore[call-arg]
    s = WorkerSettings(queues="q")
    with pytest.raises(AttributeError):
        s.concurrency = 3  # type: ignore[misc]


def test_derived_values_are_computed_once() -> None:
    s = WorkerSettings(queues=["a", "b"], policy="wrr", weights={"b": 3}, group="g", prefix="p", lock_duration=2,
                       keep_completed=None, keep_completed_for=1.5, worker_id="pod,1;x", redact=("Password",),
                       max_payload=1000, events_maxlen=50)
    assert s.names == ("a", "b")
    assert s.keys == (QueueKeys("a", "p", "g"), QueueKeys("b", "p", "g"))
    assert s.weight_list == (1, 3)
    assert s.id == "pod_1_x"
    assert s.lock_ms == 2000 and isinstance(s.lock_duration, float)
    assert (s.keep_count, s.keep_age_ms) == (-1, 1500)
    assert s.limits.max_payload == 1000 and s.limits.events_maxlen == 50
    assert s.redact_fields == s.limits.redact and "password" in s.redact_fields
    assert s.redis == DEFAULT_REDIS_URL


def test_the_worker_keeps_its_settings_and_the_familiar_attributes() -> None:
    w = Worker(["a", "b"], _noop, concurrency=4, worker_id="w1", redis="redis://h:1/2")
    assert w.settings.concurrency == 4 and w.concurrency == 4
    assert (w.id, w.queue, w.queues, w.url) == ("w1", "a", ["a", "b"], "redis://h:1/2")
    assert w.keys == QueueKeys("a") and w.all_keys == [QueueKeys("a"), QueueKeys("b")]
    assert (w.active, w.processed) == (0, 0)
    assert w.handler is _noop


def test_a_worker_needs_a_callable_handler_and_hooks_with_both_methods() -> None:
    with pytest.raises(ValueError, match=r"handler must be an async function \(async def handler\(job\): .*\), got 3$"):
        Worker("q", 3)  # type: ignore[arg-type]
    # an async function, a partial of one, an object with an async __call__ and a function returning a
    # coroutine are taken
    class Handler:
        async def __call__(self, job: Any) -> None:
            return None

    for ok in (_noop, functools.partial(_noop), Handler(), lambda job: _noop(job)):
        assert Worker("q", ok).handler is ok
    w = Worker("q", _noop)
    with pytest.raises(ValueError, match="a hook needs before_attempt"):
        w.add_hook(object())  # type: ignore[arg-type]


def test_settings_are_stored_normalized_and_compare_by_what_was_given() -> None:
    # Given the same settings spelled two ways (and no worker_id: each gets its own random id)
    a = WorkerSettings(queues="q", weights={}, lock_duration=2)
    b = WorkerSettings(queues=["q"], weights=None, lock_duration=2.0)
    # Then they are stored the same way and are equal
    assert a.queues == ("q",) and a.weights is None and a.lock_duration == 2.0
    assert a == b and a.id != b.id


def test_a_worker_takes_whole_settings_and_keywords_replace_fields() -> None:
    s = WorkerSettings(queues=["a", "b"], concurrency=4, worker_id="w1")
    assert Worker(s, _noop).settings is s
    w = Worker(s, _noop, concurrency=2)
    assert w.settings.concurrency == 2 and w.settings.names == ("a", "b") and s.concurrency == 4
    with pytest.raises(TypeError):
        Worker("q", _noop, concurency=3)


def test_worker_options_are_the_settings_fields_but_queues() -> None:
    # the typed keywords of Worker(queues, handler, **options) name every field of WorkerSettings, no more
    import dataclasses
    import typing

    from qsim.engine.settings import WorkerOptions, WorkerSettings

    fields = {f.name: f for f in dataclasses.fields(WorkerSettings) if f.init and f.name != "queues"}
    assert set(WorkerOptions.__annotations__) == set(fields)
    hints, options = typing.get_type_hints(WorkerSettings), typing.get_type_hints(WorkerOptions)
    assert {name: hints[name] for name in fields} == options
