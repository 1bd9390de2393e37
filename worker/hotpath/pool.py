"""A lean connection pool for the hot path: packed commands over its own sockets.

The pool hands out :mod:`worker.hotpath.wire` connections (no redis-py: neither its import
nor its per-command machinery, a stale-socket probe on every checkout, metrics hooks and
event dispatch, which cost more than the enqueue script itself):

- A connection is only put back after its replies were read in full; any error closes it. So
  an idle connection never holds unread data, and checkout needs no probe.
- A pooled socket the server closed meanwhile (restart, ``timeout`` config) fails on first
  use with a connection error; the command is then sent once more on a fresh connection.
  If the first attempt did reach Redis, the candidate is queued twice with the same id,
  which consolidation deduplicates.
- At most ``max_connections`` are in use; a caller waits at most ``timeout`` for one.
- After ``fork()`` the child starts with no connections (never the parent's sockets).
- A new connection is first asked for the server's ``maxmemory-policy``; an evicting one is
  refused (:mod:`worker.hotpath.eviction`). Steady-state enqueues reuse checked sockets.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Protocol

from worker.errors import ConfigurationError, QueueMisconfigured
from worker.hotpath.eviction import PROBE, PROBE_REPLIES, EvictionGuard
from worker.hotpath.wire import Connection, NodeAddress
from worker.queue.address import redacted
from worker.queue.resp import ReplyError, pack_command
from worker.queue.scripts import LuaScript


class Closable(Protocol):
    """A connection of either pool, as :meth:`NodePool._admit` closes it."""

    def close(self) -> None: ...


class NodePool:
    """What both single-node pools share: the server's address and TLS context, the bound
    on connections and the eviction guard."""

    def __init__(
        self, url: str, timeout: float, max_connections: int, allow_evicting: bool
    ) -> None:
        self._address = NodeAddress.parse(url)
        try:
            self._tls = self._address.tls_context()
        except (OSError, ValueError) as exc:  # a CA or certificate file that cannot be read
            raise ConfigurationError(
                f"Redis URL {redacted(url)!r}: its TLS files cannot be used ({exc}); fix "
                "ssl_ca_certs, ssl_certfile or ssl_keyfile"
            ) from None
        self._timeout = timeout
        self._max = max_connections
        self._guard = EvictionGuard(redacted(url), allow_evicting=allow_evicting)

    def _admit(self, conn: Closable, probed: list[Any]) -> None:
        """Keep a new connection only if the :data:`PROBE` replies say its server does not
        evict; else close it and raise :class:`QueueMisconfigured`."""
        try:
            self._guard.check(probed)
        except QueueMisconfigured:
            conn.close()
            raise

    def _busy(self) -> ConnectionError:
        return ConnectionError(
            f"all {self._max} hot-path connections stayed busy for {self._timeout:g} s"
        )


class HotPool(NodePool):
    """Thread-safe pool for :meth:`execute`; one per :class:`~worker.MemoryClient`.

    Every connection it opens is probed once for an evicting ``maxmemory-policy`` before it
    carries anything (:mod:`worker.hotpath.eviction`); a reused one costs nothing extra.
    """

    def __init__(
        self, url: str, timeout: float, max_connections: int, *, allow_evicting: bool = False
    ) -> None:
        super().__init__(url, timeout, max_connections, allow_evicting)
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._idle: list[Connection] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self._max)

    def execute(self, packed: bytes, replies: int = 1) -> list[Any]:
        """Send ``packed`` (``replies`` commands) and read their replies in order.

        An error reply is its :class:`~worker.queue.resp.ReplyError` in the list; a problem
        on the wire raises ``OSError`` (``TimeoutError`` for a timeout).
        """
        if os.getpid() != self._pid:
            self._reset()
        if not self._slots.acquire(timeout=self._timeout):
            raise self._busy()
        try:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is not None:
                try:
                    result = _round_trip(conn, packed, replies)
                except ConnectionError:
                    conn = None  # stale socket: retry below on a fresh connection
                else:
                    self._checkin(conn)
                    return result
            conn = self._open()
            result = _round_trip(conn, packed, replies)
            self._checkin(conn)
            return result
        finally:
            self._slots.release()

    def _open(self) -> Connection:
        """A new connection whose server was checked not to evict (else QueueMisconfigured)."""
        conn = Connection(self._address, self._timeout, self._tls)
        self._admit(conn, _round_trip(conn, PROBE, PROBE_REPLIES))
        return conn

    def run_script(self, script: LuaScript, calls: list[bytes]) -> list[Any]:
        """Run packed EVALSHA ``calls`` of ``script`` in one round trip (plus one, once, to
        load the script if Redis answers NOSCRIPT); results in order, errors as values."""
        results = self.execute(b"".join(calls), len(calls))
        missing = noscript(results)
        if missing:
            reloaded(results, missing, self.execute(load(script, calls, missing), 1 + len(missing)))
        return results

    def run_one(self, script: LuaScript, call: bytes) -> Any:
        """:meth:`run_script` for one packed call: its result, an error reply as its value."""
        result = self.execute(call)[0]
        if is_noscript(result):
            return reloaded([result], [0], self.execute(load(script, [call], [0]), 2))[0]
        return result

    def _checkin(self, conn: Connection) -> None:
        with self._lock:
            self._idle.append(conn)

    def close(self) -> None:
        """Close the idle connections (in-flight ones close when their call ends)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _round_trip(conn: Connection, packed: bytes, replies: int) -> list[Any]:
    try:
        return conn.round_trip(packed, replies)
    except BaseException:
        conn.close()  # whatever happened, its socket may hold half a reply
        raise


def is_noscript(result: Any) -> bool:
    return isinstance(result, ReplyError) and result.code == "NOSCRIPT"


def noscript(results: list[Any]) -> list[int]:
    return [i for i, result in enumerate(results) if is_noscript(result)]


def load(script: LuaScript, calls: list[bytes], missing: list[int]) -> bytes:
    """SCRIPT LOAD, then the refused calls again (NOSCRIPT means they did not run)."""
    load = pack_command(b"SCRIPT", b"LOAD", script.source.encode())
    return load + b"".join(calls[i] for i in missing)


def reloaded(results: list[Any], missing: list[int], replies: list[Any]) -> list[Any]:
    """``results`` with the ``missing`` ones replaced by ``replies`` to :func:`load`'s
    command (a failed SCRIPT LOAD, its first reply, is raised)."""
    load, *again = replies
    if isinstance(load, Exception):
        raise load
    for i, result in zip(missing, again, strict=True):
        results[i] = result
    return results
