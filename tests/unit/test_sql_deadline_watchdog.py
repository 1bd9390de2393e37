"""The SQL deadline watchdog (:mod:`worker.store.engine`): every guard fires at its own
deadline, whatever the guards registered before it."""

from __future__ import annotations

import threading

from worker.store.engine import Watchdog

#: How long a test waits for a guard that should fire at once: generous for a busy machine,
#: and far below the long deadlines beside it, so a guard that waits for those fails.
FIRES_WITHIN_SECONDS = 10.0
LONG = 3600.0
SHORT = 0.01


def test_a_short_deadline_after_a_long_one_fires_at_its_own_time() -> None:
    dog = Watchdog()
    first, second = threading.Event(), threading.Event()
    with dog.guard(lambda: None, seconds=LONG):
        with dog.guard(first.set, seconds=SHORT):
            # Once this one has fired, the watchdog sleeps until the long deadline.
            assert first.wait(FIRES_WITHIN_SECONDS)
        with dog.guard(second.set, seconds=SHORT):
            assert second.wait(FIRES_WITHIN_SECONDS)
    assert dog.expired == 2


def test_a_deadline_set_while_nothing_else_is_guarded_fires() -> None:
    dog = Watchdog()
    first, second = threading.Event(), threading.Event()
    with dog.guard(first.set, seconds=SHORT):
        assert first.wait(FIRES_WITHIN_SECONDS)
    with dog.guard(second.set, seconds=SHORT):
        assert second.wait(FIRES_WITHIN_SECONDS)


def test_guards_that_end_in_time_never_fire() -> None:
    dog = Watchdog()
    fired = threading.Event()
    for _ in range(100):
        with dog.guard(fired.set, seconds=LONG):
            pass
    assert not fired.is_set()
    assert dog.expired == 0
