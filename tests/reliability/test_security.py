"""Security: nothing read from Redis is ever unpickled; ACL users, passwords and TLS work for the
producer, the worker and the CLI; configured secrets never reach logs, events or ``qsim dlq``."""

from __future__ import annotations

import ast
import asyncio
import datetime as dt
import ipaddress
import json
import pickle
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from qsim.engine import AsyncQueue, Job, Queue, Worker
from qsim.errors import RedisUnavailable
from qsim.harness.server import RedisServer, free_port
from reliability_helpers import ROOT, spawn, wait_until

pytestmark = pytest.mark.redis


# -- no code path unpickles what it reads from Redis ----------------------------------------------
class Plant:
    """Unpickling this creates the file ``path`` (a stand-in for running any code)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def test_a_planted_pickle_is_treated_as_corrupt_and_never_executed(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    canary = tmp_path / "pwned"
    # (the payload is live: unpickling it does create a file)
    probe = tmp_path / "probe"
    pickle.loads(pickle.dumps(Plant(str(probe)))).close()
    assert probe.exists()
    payloads = {f"p{proto}": pickle.dumps(Plant(str(canary)), protocol=proto) for proto in (0, 2, 5)}
    q = Queue("q", redis=redis_url)
    for jid in payloads:
        q.add("t", {}, job_id=jid)
    q.add("t", {"ok": 1}, job_id="good")
    # Given pickles planted in job hashes (data, and the fields an admin reads back)
    for jid, blob in payloads.items():
        redis_client.hset(q.keys.job(jid), mapping={"data": blob, "returnvalue": blob, "progress": blob,
                                                    "backoff": blob})

    # When a worker runs the queue and every read path looks at the jobs
    async def main() -> None:
        async def handler(job: Job) -> Any:
            return job.data

        w = Worker("q", handler, redis=redis_url, lock_duration=1.0, stalled_interval=0.3, handle_signals=False)
        task = asyncio.ensure_future(w.run())
        aq = AsyncQueue("q", redis=redis_url)
        async with asyncio.timeout(10):
            while (await aq.counts())["dead"] < 3:
                await asyncio.sleep(0.02)
        await w.close()
        await task
        await aq.close()

    asyncio.run(main())
    dead = {j.id: j for j in q.dead()}
    records = q.job_records()
    infos = [q.get_job(jid, redact=True) for jid in payloads]
    shown = [spawn(["-m", "qsim", "dlq", "show", jid, "--queue", "q", "--redis", redis_url]).communicate(timeout=30)
             for jid in payloads]
    listed = spawn(["-m", "qsim", "dlq", "list", "--queue", "q", "--redis", redis_url, "--json"]).communicate(timeout=30)
    # Then each planted job is dead as corrupt, the good one completed, and no pickle ever ran
    assert sorted(dead) == sorted(payloads)
    for j in dead.values():
        assert j.error is not None and j.error.startswith("PayloadError: job ")
        assert "not valid JSON" in j.error or "backoff=" in j.error
        assert j.attempts_made == 1 and j.stalled == 0
    assert q.get_job("good").state == "completed"
    assert len(records) == 4 and all(i.data_error for i in infos)
    assert all('"state": "dead"' in out for out, _ in shown)
    assert len(json.loads(listed[0])) == 3
    assert not canary.exists()
    q.close()


SERIALIZERS = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "jsonpickle", "yaml"}


def test_no_engine_or_cli_module_can_deserialize_anything_but_json() -> None:
    files = sorted((ROOT / "qsim" / "engine").rglob("*.py")) + sorted((ROOT / "qsim" / "cli").rglob("*.py"))
    assert len(files) > 10
    for f in files:
        tree = ast.parse(f.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                mods = {(node.module or "").split(".")[0]}
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in ("eval", "exec"), f"{f}:{node.lineno}"
                continue
            else:
                continue
            assert not mods & SERIALIZERS, f"{f}:{node.lineno} imports {mods & SERIALIZERS}"


# -- ACL users, passwords and TLS: producer, worker and CLI ---------------------------------------
def exercise(url: str, tmp_path: Path, queue: str = "sec") -> dict[str, Any]:
    """Producer adds, a ``qsim worker`` process runs, ``qsim stats`` / ``qsim dlq`` read, over ``url``."""
    q = Queue(queue, redis=url)
    q.add_bulk([("t", {"i": i}) for i in range(20)] + [("fail", {}, {"job_id": "f1"})])
    log = tmp_path / f"worker-{queue}.log"
    with open(log, "w") as err:
        w = spawn(["-m", "qsim", "worker", "security_handlers:echo", "--queue", queue, "--redis", url,
                   "--lock-duration", "2", "--stalled-interval", "1"], stderr=err)
        try:
            wait_until(lambda: q.counts()["completed"] == 20 and q.counts()["dead"] == 1, timeout=30, interval=0.05)
        finally:
            w.send_signal(signal.SIGTERM)
            code = w.wait(15)
            w.stdout.close()  # type: ignore[union-attr]
    out: dict[str, Any] = {"worker_exit": code, "worker_log": log.read_text()}
    stats = spawn(["-m", "qsim", "stats", "--queue", queue, "--redis", url, "--json"])
    out["stats"], err_text = stats.communicate(timeout=30)
    out["stats_exit"] = stats.returncode
    dlq = spawn(["-m", "qsim", "dlq", "list", "--queue", queue, "--redis", url, "--json"])
    out["dlq"], _ = dlq.communicate(timeout=30)
    out["dlq_exit"] = dlq.returncode
    out["counts"] = q.counts()
    q.close()
    return out


def check_exercise(out: dict[str, Any], queue: str = "sec") -> None:
    assert out["worker_exit"] == 0, out["worker_log"]
    assert out["stats_exit"] == 0 and json.loads(out["stats"])["queues"][queue]["completed"] == 20
    assert out["dlq_exit"] == 0 and [j["id"] for j in json.loads(out["dlq"])] == ["f1"]
    assert out["counts"]["completed"] == 20 and out["counts"]["dead"] == 1


@pytest.mark.parametrize(
    "rules",
    [
        ["&*", "+@all", "-@dangerous"],
        # the narrowest set found to work: TIME is called inside the scripts
        ["+@read", "+@write", "+@scripting", "+@connection", "+@blocking", "+time", "-@dangerous"],
    ],
    ids=["all-but-dangerous", "narrow"],
)
def test_acl_user_limited_to_the_queue_keys(own_redis: RedisServer, tmp_path: Path, rules: list[str]) -> None:
    admin = redis.Redis(port=own_redis.port, decode_responses=True)
    admin.execute_command("ACL", "SETUSER", "qsim", "on", ">s3cret-pw", "~qsim:*", *rules)
    admin.set("payroll", "42")
    url = f"redis://qsim:s3cret-pw@127.0.0.1:{own_redis.port}/0"
    user = redis.Redis.from_url(url, decode_responses=True)
    # (the limit is real: this user cannot read other keys nor run dangerous commands)
    with pytest.raises(redis.exceptions.NoPermissionError):
        user.get("payroll")
    with pytest.raises(redis.exceptions.NoPermissionError):
        user.flushall()
    user.close()
    check_exercise(exercise(url, tmp_path))
    # a wrong password is a clear one-line error, without the password (exit 2: a Redis that cannot be used is
    # bad input, docs/reference/exit-codes.md)
    bad = f"redis://qsim:wrong-pw@127.0.0.1:{own_redis.port}/0"
    p = spawn(["-m", "qsim", "stats", "--redis", bad])
    o, e = p.communicate(timeout=30)
    assert p.returncode == 2 and "Traceback" not in e and "wrong-pw" not in e and len(e.strip().splitlines()) == 1
    admin.close()


def test_password_protected_redis(tmp_path: Path) -> None:
    with RedisServer(tmp_path / "pw") as server:
        admin = redis.Redis(port=server.port)
        admin.config_set("requirepass", "hunter2-pw")  # (the server helper pings without a password at start)
        admin.close()
        url = f"redis://:hunter2-pw@127.0.0.1:{server.port}/0"
        check_exercise(exercise(url, tmp_path))
        for bad in (f"redis://127.0.0.1:{server.port}/0", f"redis://:nope-pw@127.0.0.1:{server.port}/0"):
            with pytest.raises(RedisUnavailable):
                Queue("q", redis=bad).counts()
            w = spawn(["-m", "qsim", "worker", "security_handlers:echo", "--queue", "q", "--redis", bad])
            _, err = w.communicate(timeout=30)
            assert w.returncode == 2 and "Traceback" not in err
            assert "nope-pw" not in err and "hunter2-pw" not in err


def make_certs(d: Path) -> tuple[Path, Path, Path, Path, Path]:
    """A self-signed CA; a server certificate for 127.0.0.1/localhost and a client certificate signed by it.

    Returns the CA, server cert, server key, client cert and client key files."""
    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "qsim test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    ckey = ec.generate_private_key(ec.SECP256R1())
    client = (x509.CertificateBuilder()
              .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "qsim worker")]))
              .issuer_name(ca_name).public_key(ckey.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
              .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
              .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
              .sign(ca_key, hashes.SHA256()))
    d.mkdir(parents=True, exist_ok=True)
    paths = (d / "ca.pem", d / "server.pem", d / "server.key", d / "client.pem", d / "client.key")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for (c, k), (cp, kp) in (((cert, key), paths[1:3]), ((client, ckey), paths[3:5])):
        cp.write_bytes(c.public_bytes(serialization.Encoding.PEM))
        kp.write_bytes(k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                       serialization.NoEncryption()))
    return paths


@pytest.fixture(params=["server-cert", "mutual"])
def tls_redis(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A redis-server that only speaks TLS (and, for "mutual", wants a client certificate); yields its
    rediss:// URL (CA and client certificate in the query) and the same URL without the client certificate."""
    ca, cert, key, ccert, ckey = make_certs(tmp_path / "certs")
    mutual = request.param == "mutual"
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1", "--tls-cert-file", str(cert),
         "--tls-key-file", str(key), "--tls-ca-cert-file", str(ca), "--tls-auth-clients", "yes" if mutual else "no",
         "--save", "", "--appendonly", "no", "--dir", str(tmp_path), "--logfile", str(tmp_path / "tls-redis.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    no_client_cert = f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={ca}"
    url = f"{no_client_cert}&ssl_certfile={ccert}&ssl_keyfile={ckey}" if mutual else no_client_cert
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "tls-redis.log").read_text()
                time.sleep(0.05)
        client.close()
        yield url, no_client_cert
    finally:
        proc.terminate()
        proc.wait(10)


def test_tls_rediss_for_producer_worker_and_cli(tls_redis: tuple[str, str], tmp_path: Path) -> None:
    url, no_client_cert = tls_redis
    port = url.split(":")[2].split("/")[0]
    if url != no_client_cert:  # mutual TLS: a client without a certificate is turned away
        with pytest.raises(RedisUnavailable):
            Queue("q", redis=no_client_cert).counts()
    # (only TLS gets in, and the server certificate is verified against our CA)
    with pytest.raises(RedisUnavailable):
        Queue("q", redis=f"redis://127.0.0.1:{port}/0").counts()
    with pytest.raises(RedisUnavailable, match="(?i)certificate"):
        Queue("q", redis=f"rediss://127.0.0.1:{port}/0").counts()  # system CAs do not know ours
    check_exercise(exercise(url, tmp_path))

    async def via_async() -> int:
        async with AsyncQueue("q2", redis=url) as aq:
            await aq.add("t", {})
            return (await aq.counts())["waiting"]

    assert asyncio.run(via_async()) == 1


# -- configured secrets never leak --------------------------------------------------------------------
SECRETS = ("hunter2-pass", "4111-1111-1111-1111", "AKIA-SECRET-XYZ", "tok-SECRET-77")


def test_redacted_fields_never_reach_logs_events_or_dlq(redis_url: str, redis_client: redis.Redis,
                                                        tmp_path: Path) -> None:
    q = Queue("pay", redis=redis_url)
    q.add("charge", {"user": "bob", "password": SECRETS[0], "card": SECRETS[1],
                     "nested": {"api_key": SECRETS[2]}, "token": SECRETS[3]}, job_id="c1", attempts=2)
    log = tmp_path / "worker.log"
    with open(log, "w") as err:
        w = spawn(["-m", "qsim", "-vv", "worker", "security_handlers:leaky", "--queue", "pay", "--redis", redis_url,
                   "--redact", "card"], stderr=err)
        try:
            wait_until(lambda: q.counts()["dead"] == 1, timeout=30, interval=0.05)
        finally:
            w.send_signal(signal.SIGTERM)
            assert w.wait(15) == 0
            w.stdout.close()  # type: ignore[union-attr]
    texts = {"worker log": log.read_text(),
             "events": json.dumps(redis_client.xrange(q.keys.events))}
    for args in (["show", "c1"], ["list", "--json"], ["list"]):
        p = spawn(["-m", "qsim", "dlq", *args, "--queue", "pay", "--redis", redis_url, "--redact", "card"])
        out, e = p.communicate(timeout=30)
        assert p.returncode == 0, e
        texts[f"dlq {' '.join(args)}"] = out + e
    assert "charge failed" in texts["worker log"] and "progress" in texts["events"]
    assert '"card": "***"' in texts["dlq show c1"] and "ValueError: charge failed" in texts["dlq show c1"]
    for where, text in texts.items():
        for s in SECRETS:
            assert s not in text, f"{s} leaked into the {where}"
    # the job itself keeps its data (redaction is for display, not storage)
    assert q.get_job("c1").data["card"] == SECRETS[1]
    q.close()


@pytest.mark.parametrize(
    "url, shown",
    [
        ("redis://:pw-1@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("rediss://qsim:pw-1@cache:6380/2?ssl_ca_certs=/ca.pem", "rediss://qsim:***@cache:6380/2?ssl_ca_certs=/ca.pem"),
        ("redis://pw-1@host:6379", "redis://***@host:6379"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("unix:///run/redis.sock?db=1", "unix:///run/redis.sock?db=1"),
    ],
)
def test_display_url_masks_the_password(url: str, shown: str) -> None:
    from qsim.engine.connection import display_url

    assert display_url(url) == shown and "pw-1" not in display_url(url)


def test_default_redaction_catches_the_usual_spellings_of_secrets(redis_url: str,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    # Given a payload with secrets under names that are not exactly "token", "secret", "password", "api_key"
    leaks = {"access_token": "tok-AAA111", "client_secret": "sec-BBB222", "db_password": "pw-CCC333",
             "X-Api-Key": "key-DDD444", "headers": {"Authorization": "Bearer EEE555"}}

    async def main() -> list[str]:
        q = AsyncQueue("q", redis=redis_url)
        await q.add("call", {"user": "bob", **leaks}, job_id="c")

        async def handler(job: Job) -> None:
            await job.progress({"step": 1, "refreshToken": "tok-FFF666"})
            raise RuntimeError(f"call failed with {job.data}")

        w = Worker("q", handler, redis=redis_url, lock_duration=1.0, stalled_interval=0.3, handle_signals=False)
        task = asyncio.ensure_future(w.run())
        async with asyncio.timeout(10):
            while (await q.counts())["dead"] < 1:
                await asyncio.sleep(0.02)
        await w.close()
        await task
        (dead,) = await q.dead()
        texts = [json.dumps(dead.as_dict()), json.dumps(await q.events()), caplog.text]
        assert dead.data["user"] == "bob" and dead.data["access_token"] == "***"
        assert (await q.get_job("c")).data["access_token"] == "tok-AAA111"  # stored as given
        await q.close()
        return texts

    texts = asyncio.run(main())
    # Then none of the values reaches the DLQ listing, the events or the logs
    for text in texts:
        for secret in ("AAA111", "BBB222", "CCC333", "DDD444", "EEE555", "FFF666"):
            assert secret not in text
