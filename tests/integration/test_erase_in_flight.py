"""Erase reaches deliveries in flight: a copy that lands after ``forget`` is taken back.

A files sink that is slow (its write runs in another thread and lands only after the erase)
is attacked through each outcome the deliverer can see: the write succeeded, failed after
writing, or timed out after writing. Then a write the deliverer gave up on lands later still,
after the tombstone was delivered; then the user comes back between the erase and the late
write; then a stale deliverer marks a row by an id SQLite would have handed out again. On
SQLite and PostgreSQL; the erase is the service's (queue, SQL, sinks), on real Redis.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Final

import pytest

from worker.connectors.base import PublishedFile
from worker.connectors.files import FilesSink
from worker.errors import NotFound, SinkError
from worker.queue.redis_queue import RedisQueue
from worker.service.publish import CLAIM_LEASE, deliver_due
from worker.service.transfer import erase
from worker.store.memory import MemoryStore
from worker.store.outbox import LATE_WRITE

PATH: Final = "/memories/facts.md"
#: How long a test waits for the other thread to reach the sink: far longer than it needs.
THREAD_SECONDS: Final = 30.0
#: A later pass, once every write in doubt (a claim's end plus a late write) has passed.
WELL_AFTER: Final = CLAIM_LEASE + LATE_WRITE + timedelta(minutes=1)


class SlowSink(FilesSink):
    """A files sink whose write waits until the test lets it land, then ends with ``outcome``:
    ``ok``, ``failure`` (wrote, then reported an error) or ``timeout`` (wrote, then the
    deliverer's call gave up)."""

    def __init__(self, root: Path, outcome: str = "ok") -> None:
        super().__init__(root)
        self.outcome = outcome
        self.entered, self.release = threading.Event(), threading.Event()

    def deliver(self, item: PublishedFile) -> None:
        self.entered.set()
        assert self.release.wait(THREAD_SECONDS)
        super().deliver(item)
        if self.outcome == "failure":
            raise SinkError("files sink: the disk reported an error after the write")
        if self.outcome == "timeout":
            raise TimeoutError("the sink call timed out")


class User:
    """One user with one memory file queued for a sink of this test alone."""

    def __init__(self, store: MemoryStore, queue: RedisQueue, root: Path) -> None:
        tag = uuid.uuid4().hex[:10]
        self.store, self.queue, self.root = store, queue, root
        self.sink = f"files{tag}"
        self.namespace = f"user:u{tag}"
        self.secret = f"my cat is called Miso{tag}"
        self.write(f"- {self.secret}\n")

    def write(self, content: str) -> None:
        self.store.put_file(
            namespace=self.namespace,
            path=PATH,
            content=content,
            author="test",
            sinks=[self.sink],
            now=self.store.db_now(),
        )

    def deliver(self, sink: FilesSink, *, later: timedelta | None = None) -> None:
        now = self.store.db_now() + later if later is not None else None
        deliver_due(self.store, {self.sink: sink}, now=now, namespaces=[self.namespace])

    def forget(self) -> None:
        erase(self.queue.admin, self.store, {self.sink: FilesSink(self.root)}, [self.namespace])

    def published(self) -> str | None:
        target = FilesSink(self.root).path_for(self.namespace, PATH)
        return target.read_text() if target.exists() else None

    def in_flight(self, sink: SlowSink) -> threading.Thread:
        """A deliverer in another thread, inside the sink's write when this returns."""
        thread = threading.Thread(target=self.deliver, args=(sink,))
        thread.start()
        assert sink.entered.wait(THREAD_SECONDS)
        return thread

    def land(self, sink: SlowSink, thread: threading.Thread) -> None:
        sink.release.set()
        thread.join(THREAD_SECONDS)
        assert not thread.is_alive()


@pytest.fixture
def user(database_url: str, queue: RedisQueue, tmp_path: Path) -> Iterator[User]:
    store = MemoryStore.from_url(database_url, create=True)
    yield User(store, queue, tmp_path / "files")
    store.dispose()


@pytest.mark.parametrize("outcome", ["ok", "failure", "timeout"])
def test_a_slow_write_that_lands_after_forget_is_taken_back_whatever_its_outcome(
    user: User, outcome: str
) -> None:
    slow = SlowSink(user.root, outcome)
    thread = user.in_flight(slow)
    user.forget()

    user.land(slow, thread)

    assert user.published() is None


def test_a_write_given_up_on_that_lands_after_the_tombstone_is_deleted_again(
    user: User,
) -> None:
    slow = SlowSink(user.root, "timeout")
    slow.release.set()
    user.deliver(slow)  # the call timed out; the deliverer cannot know whether it landed
    user.forget()  # the tombstone is delivered at once ...
    FilesSink(user.root).deliver(  # ... and the abandoned write lands only after that
        PublishedFile(user.namespace, PATH, f"- {user.secret}\n", 1, *[user.store.db_now()] * 2)
    )

    user.deliver(FilesSink(user.root), later=WELL_AFTER)

    assert user.published() is None


@pytest.mark.parametrize("outcome", ["ok", "timeout"])
def test_a_user_who_returns_before_the_erased_write_lands_keeps_only_the_new_memory(
    user: User, outcome: str
) -> None:
    slow = SlowSink(user.root, outcome)
    thread = user.in_flight(slow)
    user.forget()
    user.write("- prefers green tea\n")  # the user comes back: the namespace is not "erased"

    user.land(slow, thread)
    user.deliver(FilesSink(user.root), later=WELL_AFTER)

    assert user.published() == "- prefers green tea\n"


def test_a_stale_deliverers_mark_cannot_retire_the_version_committed_after_an_erase(
    user: User,
) -> None:
    (stale,) = user.store.claim_outbox(
        sink=user.sink, claimant="stale", lease=timedelta(minutes=2), limit=10,
        namespaces=[user.namespace],
    )  # fmt: skip
    user.forget()
    user.deliver(FilesSink(user.root), later=WELL_AFTER)
    user.write("- prefers green tea\n")

    with pytest.raises(NotFound):  # the id is the erased row's, never the new one's
        user.store.mark_delivered(stale.id)

    (due,) = [
        i
        for i in user.store.due_outbox(
            sink=user.sink, now=user.store.db_now() + WELL_AFTER, limit=10_000
        )
        if i.namespace == user.namespace
    ]
    assert due.id != stale.id
    assert due.content == "- prefers green tea\n"
