"""``qsim stats`` / ``qsim dlq`` with queue groups (keys ``<prefix>:{<group>}:<queue>:...``)."""

from __future__ import annotations

import pytest

from qsim.engine import Queue

pytestmark = pytest.mark.redis


def test_stats_finds_grouped_and_plain_queues_and_dlq_takes_a_group(redis_url: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import argparse
    import json

    from qsim.cli import worker as worker_cli

    Queue("orders", redis=redis_url, group="shop").add_bulk([("t", {}), ("t", {})])
    plain = Queue("plain", redis=redis_url)
    plain.add("t", {})
    plain.client.zadd(plain.keys.ratelimit + ":tenant", {"x": 1})  # not a queue

    def cli(*argv: str) -> tuple[int, str]:
        p = argparse.ArgumentParser(prog="qsim")
        worker_cli.register(p.add_subparsers(required=True))
        args = p.parse_args(list(argv))
        code = args.func(args)
        return code, capsys.readouterr().out

    code, out = cli("stats", "--redis", redis_url, "--json")
    queues = json.loads(out)["queues"]
    assert code == 0 and sorted(queues) == ["plain", "shop/orders"]
    assert queues["shop/orders"]["waiting"] == 2 and queues["shop/orders"]["group"] == "shop"
    assert queues["plain"]["waiting"] == 1 and "group" not in queues["plain"]
    code, out = cli("stats", "--redis", redis_url, "--queue", "orders", "--group", "shop", "--json")
    assert json.loads(out)["queues"]["shop/orders"]["waiting"] == 2
    code, out = cli("dlq", "list", "--queue", "orders", "--group", "shop", "--redis", redis_url, "--json")
    assert code == 0 and json.loads(out) == []
    plain.close()
