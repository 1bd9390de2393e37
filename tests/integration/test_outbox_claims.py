"""Claimed deliveries: each outbox row is attempted by one deliverer at a time, a failing sink
is probed rather than hammered, and an operator command publishes only what it touched."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import timedelta

import pytest

from tests.store_support import at, commit, entry, plan, unique_ns
from worker.connectors.base import PublishedFile
from worker.errors import SinkError
from worker.service.publish import CLAIM_LEASE, deliver_due, publish_now
from worker.store import MemoryStore
from worker.store.outbox import BREAKER_THRESHOLD

LEASE = timedelta(seconds=60)


class CountingSink:
    """Records every delivery; optionally fails, or waits on a barrier to widen races."""

    timeout_seconds = 1.0

    def __init__(self, name: str, *, fail: bool = False) -> None:
        self.name = name
        self.fail = fail
        self.delivered: Counter[tuple[str, str, int]] = Counter()
        self.calls = 0
        self._lock = threading.Lock()

    def deliver(self, item: PublishedFile) -> None:
        with self._lock:
            self.calls += 1
        if self.fail:
            raise SinkError(f"{self.name} is down")
        with self._lock:
            self.delivered[(item.namespace, item.path, item.version)] += 1

    def erase(self, namespace: str, paths: Sequence[str]) -> None:
        if self.fail:
            raise SinkError(f"{self.name} is down")


@pytest.fixture
def store(database_url: str) -> Iterator[MemoryStore]:
    s = MemoryStore.from_url(database_url, create=True)
    yield s
    s.dispose()


@pytest.fixture
def sink_name() -> str:
    return "sink-" + unique_ns().split(":")[1]


def committed(store: MemoryStore, sink: str, count: int) -> list[str]:
    namespaces = [unique_ns() for _ in range(count)]
    for ns in namespaces:
        commit(store, ns, plan((entry("e1", "Likes tea"),)), expected=0, sinks=(sink,))
    return namespaces


def test_a_claimed_row_is_not_claimed_again_while_the_claim_holds(
    store: MemoryStore, sink_name: str
) -> None:
    committed(store, sink_name, 1)

    first = store.claim_outbox(sink=sink_name, claimant="a", now=at(0), lease=LEASE, limit=10)
    second = store.claim_outbox(sink=sink_name, claimant="b", now=at(0.5), lease=LEASE, limit=10)

    assert (len(first), second) == (1, [])


def test_a_claim_that_expired_is_taken_by_the_next_deliverer(
    store: MemoryStore, sink_name: str
) -> None:
    committed(store, sink_name, 1)
    [item] = store.claim_outbox(sink=sink_name, claimant="a", now=at(0), lease=LEASE, limit=10)

    [again] = store.claim_outbox(sink=sink_name, claimant="b", now=at(2), lease=LEASE, limit=10)

    assert again.id == item.id


def test_a_newer_version_waits_while_an_older_one_of_the_same_file_is_claimed(
    store: MemoryStore, sink_name: str
) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", "v1"),)), expected=0, sinks=(sink_name,))
    [old] = store.claim_outbox(sink=sink_name, claimant="a", now=at(0), lease=LEASE, limit=10)
    commit(store, ns, plan((entry("e2", "v2"),)), expected=1, sinks=(sink_name,))

    while_claimed = store.claim_outbox(
        sink=sink_name, claimant="b", now=at(0.1), lease=LEASE, limit=10
    )
    store.release_outbox([old.id])
    [newest] = store.claim_outbox(sink=sink_name, claimant="b", now=at(0.2), lease=LEASE, limit=10)

    assert (while_claimed, newest.version) == ([], 2)


def test_concurrent_deliverers_deliver_each_row_exactly_once(
    store: MemoryStore, sink_name: str
) -> None:
    namespaces = committed(store, sink_name, 60)
    sink = CountingSink(sink_name)
    start = threading.Barrier(4)

    def deliverer(n: int) -> None:
        start.wait()
        while deliver_due(store, {sink_name: sink}, now=at(0), claimant=f"d{n}").delivered:
            pass

    threads = [threading.Thread(target=deliverer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert (len(sink.delivered), set(sink.delivered.values())) == (60, {1})
    assert store.outbox_pending(namespaces=namespaces) == 0


def test_a_failing_sink_opens_its_breaker_and_is_skipped_by_later_passes(
    store: MemoryStore, sink_name: str
) -> None:
    committed(store, sink_name, 10)
    sink = CountingSink(sink_name, fail=True)

    first = deliver_due(store, {sink_name: sink}, now=at(0), claimant="a")
    calls_after_first = sink.calls
    second = deliver_due(store, {sink_name: sink}, now=at(0.1), claimant="b")

    assert (first.failed, first.skipped_sinks) == (BREAKER_THRESHOLD, (sink_name,))
    assert (second.failed, second.skipped_sinks, sink.calls) == (0, (sink_name,), calls_after_first)
    [health] = store.sink_health(sink_name)
    assert health.state(at(0.1)) == "open"
    assert "is down" in (health.last_error or "")


def test_an_open_breaker_lets_one_probe_through_and_closes_when_it_succeeds(
    store: MemoryStore, sink_name: str
) -> None:
    committed(store, sink_name, 10)
    sink = CountingSink(sink_name, fail=True)
    deliver_due(store, {sink_name: sink}, now=at(0), claimant="a")
    sink.fail = False

    # The failed rows back off on their own (5 s first), the breaker for 15 s: both have passed.
    probe = deliver_due(store, {sink_name: sink}, now=at(1), claimant="a")
    after = deliver_due(store, {sink_name: sink}, now=at(1.1), claimant="a")

    assert (probe.delivered, probe.failed) == (1, 0)
    assert after.delivered == 9
    assert store.sink_health(sink_name)[0].state(at(1.1)) == "closed"


def test_rows_left_when_the_breaker_opens_are_given_back_for_later(
    store: MemoryStore, sink_name: str
) -> None:
    committed(store, sink_name, 10)
    deliver_due(store, {sink_name: CountingSink(sink_name, fail=True)}, now=at(0), claimant="a")

    # Past the breaker and every row backoff, but within the claim lease of that pass: the
    # rows it did not attempt must be claimable again, not held until the lease ends.
    later = at(0) + CLAIM_LEASE / 2
    claimable = store.claim_outbox(sink=sink_name, claimant="b", now=later, lease=LEASE, limit=100)

    assert len(claimable) == 10


def test_publish_now_delivers_only_the_namespaces_it_is_given(
    store: MemoryStore, sink_name: str
) -> None:
    mine, *others = committed(store, sink_name, 5)
    sink = CountingSink(sink_name)

    report = publish_now(store, {sink_name: sink}, now=at(0), namespaces=[mine])

    assert (report.delivered, report.remaining) == (1, 0)
    assert {ns for ns, _, _ in sink.delivered} == {mine}
    assert store.outbox_pending(namespaces=others) == 4


def test_publish_now_is_bounded_and_reports_what_is_left(
    store: MemoryStore, sink_name: str
) -> None:
    namespaces = committed(store, sink_name, 8)

    report = publish_now(
        store, {sink_name: CountingSink(sink_name)}, now=at(0), namespaces=namespaces, limit=3
    )

    assert (report.delivered, report.remaining) == (3, 5)
