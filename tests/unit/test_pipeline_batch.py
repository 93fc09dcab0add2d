"""The worker's pipeline batches: each part reads its own replies, whatever the parts are."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from qsim.engine.job import Job
from qsim.engine.keys import QueueKeys
from qsim.engine.pipeline import Batch, by_queue
from qsim.engine.scripts import command


def test_each_part_gets_its_own_replies_in_order() -> None:
    # Given a batch of parts with 1, 3 and 2 calls
    got: dict[str, list[Any]] = {}
    b = Batch([], [], [], [])
    b.add([command("GET", "a")], lambda r: got.setdefault("one", r))
    b.add([command("GET", "b"), command("GET", "c"), command("GET", "d")], lambda r: got.setdefault("three", r))
    b.add([command("GET", "e"), command("GET", "f")], lambda r: got.setdefault("two", r))
    # When the replies of its six calls come back
    assert [c.args[1] for c in b.calls()] == ["a", "b", "c", "d", "e", "f"]
    b.dispatch([1, 2, 3, 4, 5, 6])
    # Then each part read exactly its own
    assert got == {"one": [1], "three": [2, 3, 4], "two": [5, 6]}


def test_a_failing_reader_does_not_keep_the_others_from_their_replies(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[Any] = []

    def broken(replies: list[Any]) -> None:
        raise KeyError("bug")

    b = Batch([], [], [], [])
    b.add([command("PING")], broken)
    b.add([command("PING")], seen.extend)
    with caplog.at_level(logging.ERROR, logger="qsim.engine.pipeline"):
        b.dispatch(["x", "y"])
    assert seen == ["y"]
    assert "unexpected error reading the replies" in caplog.text


def test_a_refused_part_gives_its_results_back_and_the_others_read_their_replies(
    caplog: pytest.LogCaptureFixture
) -> None:
    import redis

    seen: list[Any] = []
    back: list[str] = []
    b = Batch([], [], [])
    b.add([command("PING")], seen.extend, lambda: back.append("oom"))
    b.add([command("PING")], seen.extend, lambda: back.append("other"))
    b.add([command("PING")], seen.extend)
    oom = redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'")
    with caplog.at_level(logging.ERROR, logger="qsim.engine.pipeline"):
        passing = b.dispatch([oom, redis.exceptions.ResponseError("ERR bug"), "z"])
    # A passing refusal (OOM) gives its part's results back and is returned; another is logged; the rest read
    assert passing is oom and back == ["oom"] and seen == ["z"]
    assert "Redis refused ['']" in caplog.text


def test_results_are_grouped_by_queue_in_the_workers_order() -> None:
    keys = [QueueKeys("a"), QueueKeys("b")]
    jobs = [Job(str(i), "t", None, 1, q, 1, 0.0, None, "tok") for i, q in enumerate("babb")]
    groups = by_queue(keys, [(j, "null") for j in jobs], lambda item: item[0])
    assert [(k.queue, [j.id for j, _ in items]) for k, items in groups] == [("a", ["1"]), ("b", ["0", "2", "3"])]
    assert by_queue(keys[:1], jobs, lambda j: j) == [(keys[0], jobs)]
    assert by_queue(keys, [], lambda j: j) == []
