"""A client-side deadline for every SQL transaction on a server database.

PostgreSQL's ``statement_timeout`` is enforced by the server, so it cannot help when the
server, or the network in between, stops answering: a stopped backend, a proxy that accepts
and never forwards, a half-dead NAT. The driver then waits on its socket forever, and a
worker's heartbeat would keep the namespace's lease alive for as long. The :class:`Watchdog`
bounds that wait: when a transaction runs past its deadline it shuts the connection's socket
down, the blocked call fails at once, the pool discards the connection, and the caller sees
:class:`~worker.errors.StoreUnavailable` (nothing was committed: the transaction never ended).

>>> dog = Watchdog()
>>> with dog.guard(lambda: None, seconds=5.0):
...     pass
>>> dog.expired
0
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)


class Watchdog:
    """One daemon thread that calls ``on_expiry`` of each guard whose deadline passes."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []
        self._live: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        #: How many guards expired (their transaction was cut off).
        self.expired = 0

    @contextmanager
    def guard(self, on_expiry: Callable[[], None], *, seconds: float) -> Iterator[None]:
        """Run the block; if it is still running after ``seconds``, call ``on_expiry`` (from
        the watchdog's thread) to make it fail."""
        token = next(self._ids)
        with self._wake:
            self._live[token] = on_expiry
            heapq.heappush(self._heap, (time.monotonic() + seconds, token))
            self._start()
            # The thread sleeps until the earliest deadline; only a new earliest one (every
            # transaction's deadline is usually the same length, so rarely) needs it awake.
            if self._heap[0][1] == token:
                self._wake.notify()
        try:
            yield
        finally:
            with self._wake:
                self._live.pop(token, None)

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="sql-deadline", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._heap and self._heap[0][1] not in self._live:
                    heapq.heappop(self._heap)  # finished in time
                if not self._heap:
                    self._wake.wait()
                    continue
                due, token = self._heap[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                heapq.heappop(self._heap)
                on_expiry = self._live.pop(token)
                self.expired += 1
            try:
                on_expiry()
            except Exception:  # the connection may already be gone; nothing else to do
                log.debug("cutting off an expired SQL transaction failed", exc_info=True)
