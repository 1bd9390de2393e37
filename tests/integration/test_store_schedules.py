"""Schedule ticks are claimed once; a failed tick can be retried; watermarks only go forward."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.store_support import at
from worker.errors import NotFound
from worker.store import MemoryStore


@pytest.fixture
def store(database_url: str) -> Iterator[MemoryStore]:
    s = MemoryStore.from_url(database_url, create=True)
    yield s
    s.dispose()


@pytest.fixture
def schedule() -> str:
    return "sched-" + uuid.uuid4().hex[:10]


def test_a_tick_starts_only_once(store: MemoryStore, schedule: str) -> None:
    assert store.try_start_tick(schedule, at(60), now=at(60)) is True
    assert store.try_start_tick(schedule, at(60), now=at(61)) is False


def test_a_finished_tick_is_not_started_again(store: MemoryStore, schedule: str) -> None:
    store.try_start_tick(schedule, at(60), now=at(60))
    store.finish_tick(schedule, at(60), ok=True, window=(at(0), at(60)), error=None, now=at(61))

    assert store.try_start_tick(schedule, at(60), now=at(62)) is False


def test_a_failed_tick_can_be_started_again(store: MemoryStore, schedule: str) -> None:
    store.try_start_tick(schedule, at(60), now=at(60))
    store.finish_tick(schedule, at(60), ok=False, window=None, error="boom", now=at(61))

    assert store.try_start_tick(schedule, at(60), now=at(62)) is True
    [tick] = store.last_ticks(schedule)
    assert (tick.status, tick.attempts, tick.error) == ("running", 2, None)


def test_a_tick_running_past_stale_after_can_be_taken_over(
    store: MemoryStore, schedule: str
) -> None:
    store.try_start_tick(schedule, at(60), now=at(60))

    assert (
        store.try_start_tick(schedule, at(60), now=at(65), stale_after=timedelta(minutes=10))
        is False
    )
    assert (
        store.try_start_tick(schedule, at(60), now=at(71), stale_after=timedelta(minutes=10))
        is True
    )


def test_watermark_is_the_end_of_the_last_successful_window(
    store: MemoryStore, schedule: str
) -> None:
    assert store.watermark(schedule) is None
    store.try_start_tick(schedule, at(60), now=at(60))

    store.finish_tick(schedule, at(60), ok=True, window=(at(0), at(60)), error=None, now=at(61))

    assert store.watermark(schedule) == at(60)


def test_watermark_never_moves_backwards(store: MemoryStore, schedule: str) -> None:
    for tick in (at(60), at(120)):
        store.try_start_tick(schedule, tick, now=tick)
    store.finish_tick(schedule, at(120), ok=True, window=(at(60), at(120)), error=None, now=at(121))

    store.finish_tick(schedule, at(60), ok=True, window=(at(0), at(60)), error=None, now=at(122))

    assert store.watermark(schedule) == at(120)


def test_failed_tick_leaves_the_watermark(store: MemoryStore, schedule: str) -> None:
    store.try_start_tick(schedule, at(60), now=at(60))

    store.finish_tick(schedule, at(60), ok=False, window=(at(0), at(60)), error="x", now=at(61))

    assert store.watermark(schedule) is None


def test_finishing_a_tick_never_started_is_not_found(store: MemoryStore, schedule: str) -> None:
    with pytest.raises(NotFound, match="try_start_tick"):
        store.finish_tick(schedule, at(60), ok=True, window=None, error=None, now=at(61))


def test_last_ticks_are_newest_first(store: MemoryStore, schedule: str) -> None:
    for minutes in (60, 120, 180):
        store.try_start_tick(schedule, at(minutes), now=at(minutes))

    assert [t.tick for t in store.last_ticks(schedule, limit=2)] == [at(180), at(120)]
