"""``reconcile --all`` with Redis gone: the outage ends the run (exit code 4, as the exit-code
table says), instead of every namespace being reported as one that "failed"."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest
import redis

from tests.integration.test_cli_support import Ops, ops
from tests.support.tcp_proxy import TcpProxy
from worker.errors import QueueUnavailable
from worker.runtime.container import Runtime, build_runtime
from worker.service.consolidate import reconcile_each

__all__ = ["ops"]


@pytest.fixture
def proxy(redis_url: str) -> Iterator[TcpProxy]:
    url = urlsplit(redis_url)
    with TcpProxy(url.hostname or "127.0.0.1", url.port or 6379) as p:
        yield p


@pytest.fixture
def proxied_runtime(ops: Ops, proxy: TcpProxy) -> Iterator[Runtime]:
    """A runtime whose Redis is reached through ``proxy``, so the test can take it away."""
    settings = ops.settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{proxy.port}/0"})
    runtime = build_runtime(settings)
    yield runtime
    runtime.close()


def test_reconcile_each_raises_the_outage_instead_of_setting_every_namespace_aside(
    ops: Ops, proxy: TcpProxy, proxied_runtime: Runtime
) -> None:
    ops.enqueue("I prefer green tea")
    ops.enqueue("I prefer black coffee", user=ops.user + "b")
    pipeline = proxied_runtime.pipeline
    proxy.stop()

    with pytest.raises((QueueUnavailable, redis.ConnectionError)):
        reconcile_each(pipeline, [f"user:{ops.user}", f"user:{ops.user}b"], now=datetime.now(UTC))


def test_reconcile_all_exits_4_when_redis_is_unreachable(ops: Ops, proxy: TcpProxy) -> None:
    ops.enqueue("I prefer green tea")
    proxy.stop()

    ran = ops("reconcile", "--all", MEMWORKER_REDIS_URL=f"redis://127.0.0.1:{proxy.port}/0")

    assert ran.code == 4
    assert "unreachable" in ran.err
