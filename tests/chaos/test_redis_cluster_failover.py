"""A cluster primary dies: its replica takes over and the queue carries on, errors named.

A real three-master cluster with one replica each. Candidates are enqueued (and replicated:
Redis replication is asynchronous, so ``WAIT`` makes sure the replica has them, as a
deployment that cannot lose an acknowledged enqueue across a failover needs ``min-replicas``
or AOF on the replica's side too), then the primary of one user's shard is SIGKILLed. Until
the replica is promoted the hot path raises only :class:`QueueUnavailable`; afterwards the
same client (its slot map refreshed) enqueues again, and one sweep claims every user's batch
with every candidate in it (the sweeps repeat, as the beat's do, while the other nodes still
answer CLUSTERDOWN for a moment after the promotion).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.cluster import RedisCluster

from tests.support.redis_cluster import redis_cluster
from worker.errors import QueueUnavailable
from worker.queue.client import MemoryClient
from worker.queue.redis import open_redis
from worker.queue.redis_queue import Claim, RedisQueue
from worker.queue.scripts import QueueLayout
from worker.settings import Settings

pytestmark = [pytest.mark.slow, pytest.mark.chaos]

USERS = 20
#: A replica is promoted after the node timeout (2 s here) plus an election; this only turns
#: a failover that never happens into a failure.
FAILOVER_BOUND_SECONDS = 60.0


@pytest.fixture(scope="module")
def replicated_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_cluster(Path(tmp_path_factory.mktemp("failover")), replicas=1) as url:
        yield url


def _primary_pid(client: RedisCluster, key: str) -> int:
    node = client.get_node_from_key(key)  # type: ignore[no-untyped-call]
    return int(node.redis_connection.info("server")["process_id"])


def test_a_killed_primary_fails_over_and_no_acknowledged_candidate_is_lost(
    replicated_cluster: str, settings: Settings
) -> None:
    import os
    import signal

    cluster_settings = settings.model_copy(
        update={"redis_url": replicated_cluster, "queue_shards": 256}
    )
    layout = QueueLayout(cluster_settings.key_prefix, cluster_settings.queue_shards)
    admin = open_redis(replicated_cluster, timeout=5.0, retries=True)
    assert isinstance(admin, RedisCluster)
    with MemoryClient(cluster_settings) as client:
        for i in range(USERS):
            client.enqueue(user_id=f"u{i}", trace_id="t", text=f"before {i}")
        for node in admin.get_primaries():  # type: ignore[no-untyped-call]
            assert node.redis_connection.execute_command("WAIT", 1, 5000) >= 1

        os.kill(_primary_pid(admin, layout.log("user:u0")), signal.SIGKILL)
        errors: list[str] = []
        deadline = time.monotonic() + FAILOVER_BOUND_SECONDS
        while True:
            try:
                client.enqueue(user_id="u0", trace_id="t", text="after the failover")
                break
            except QueueUnavailable as exc:  # anything else fails the test
                errors.append(str(exc))
            assert time.monotonic() < deadline, f"no failover in time; last: {errors[-1:]}"
            time.sleep(0.2)

    queue = RedisQueue(admin, cluster_settings.for_queue)
    later = time.time() + cluster_settings.max_wait_seconds + 1
    # Sweeps as the beat sends them: the other nodes may answer CLUSTERDOWN for a moment after
    # the promotion, until they agree the cluster is whole again; a shard refused so is logged,
    # nothing of it is claimed, and the next sweep takes it.
    claims: dict[str, Claim] = {}
    while len(claims) < USERS:
        claims |= {c.namespace: c for c in queue.claim_due(now=later)}
        assert time.monotonic() < deadline, f"claimed only {sorted(claims)} in time"
        time.sleep(0.2)
    assert sorted(claims) == sorted(f"user:u{i}" for i in range(USERS))
    texts = [c.text for _, c in queue.read_batch(claims["user:u0"])]
    assert texts == ["before 0", "after the failover"]
    assert errors, "the kill should have been noticed by at least one enqueue"
    admin.close()
