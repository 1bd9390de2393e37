"""A lean connection pool for the hot path: packed commands straight over redis-py sockets.

redis-py's pool does real work on every checkout — a non-blocking read to detect stale
sockets, metrics hooks, event dispatch — which costs more than the enqueue script itself
(~7 µs of a ~40 µs loopback round trip). This pool keeps redis-py's connections (sockets,
TLS, AUTH/SELECT handshake, reply parser) and drops the rest:

- A connection is only put back after its replies were read in full; any error drops it. So
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

import asyncio
import os
import threading
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError
from redis.retry import Retry

from worker.errors import ConfigurationError, QueueMisconfigured
from worker.hotpath.eviction import PROBE, PROBE_REPLIES, EvictionGuard
from worker.queue.address import redacted
from worker.queue.scripts import LuaScript, pack_command


class _NodePool:
    """What both single-node pools share: how a connection is made (redis-py's recipe for
    the URL, no retries), the bound on connections and the eviction guard."""

    def __init__(
        self, url: str, timeout: float, max_connections: int, allow_evicting: bool, is_async: bool
    ) -> None:
        options = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
        try:
            if is_async:
                retry = redis.asyncio.retry.Retry(NoBackoff(), 0)
                template: Any = redis.asyncio.ConnectionPool.from_url(url, retry=retry, **options)
            else:
                template = redis.ConnectionPool.from_url(
                    url, retry=Retry(NoBackoff(), 0), **options
                )
        except ValueError as exc:  # e.g. a bad option in the URL's query string
            raise ConfigurationError(f"Redis URL {redacted(url)!r} cannot be used: {exc}") from None
        self._connection_class = template.connection_class
        self._connection_kwargs = template.connection_kwargs
        self._timeout = timeout
        self._max = max_connections
        self._guard = EvictionGuard(redacted(url), allow_evicting=allow_evicting)

    def _busy(self) -> redis.ConnectionError:
        return redis.ConnectionError(
            f"all {self._max} hot-path connections stayed busy for {self._timeout:g} s"
        )


class HotPool(_NodePool):
    """Thread-safe pool for :meth:`execute`; one per :class:`~worker.MemoryClient`.

    Every connection it opens is probed once for an evicting ``maxmemory-policy`` before it
    carries anything (:mod:`worker.hotpath.eviction`); a reused one costs nothing extra.
    """

    def __init__(
        self, url: str, timeout: float, max_connections: int, *, allow_evicting: bool = False
    ) -> None:
        super().__init__(url, timeout, max_connections, allow_evicting, is_async=False)
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self._max)

    def execute(self, packed: bytes, replies: int = 1) -> list[Any]:
        """Send ``packed`` (``replies`` commands) and read their replies in order.

        An error reply becomes its ``ResponseError`` in the list; connection problems raise
        ``redis.ConnectionError`` / ``redis.TimeoutError``.
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
                except redis.ConnectionError:
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

    def _open(self) -> Any:
        """A new connection whose server was checked not to evict (else QueueMisconfigured)."""
        conn = self._connection_class(**self._connection_kwargs)
        probed = _round_trip(conn, PROBE, PROBE_REPLIES)
        try:
            self._guard.check(probed)
        except QueueMisconfigured:
            conn.disconnect()
            raise
        return conn

    def run_script(self, script: LuaScript, calls: list[bytes]) -> list[Any]:
        """Run packed EVALSHA ``calls`` of ``script`` in one round trip (plus one, once, to
        load the script if Redis answers NOSCRIPT); results in order, errors as exceptions."""
        results = self.execute(b"".join(calls), len(calls))
        missing = _noscript(results)
        if missing:
            _reloaded(
                results, missing, self.execute(_load(script, calls, missing), 1 + len(missing))
            )
        return results

    def run_one(self, script: LuaScript, call: bytes) -> Any:
        """:meth:`run_script` for one packed call: its result, an error reply as its
        exception."""
        result = self.execute(call)[0]
        if isinstance(result, NoScriptError):
            return _reloaded([result], [0], self.execute(_load(script, [call], [0]), 2))[0]
        return result

    def _checkin(self, conn: Any) -> None:
        with self._lock:
            self._idle.append(conn)

    def close(self) -> None:
        """Close the idle connections (in-flight ones close when their call ends)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.disconnect()


def _round_trip(conn: Any, packed: bytes, replies: int) -> list[Any]:
    try:
        conn.send_packed_command([packed], check_health=False)
        out: list[Any] = []
        for _ in range(replies):
            try:
                out.append(conn.read_response())
            except redis.ResponseError as exc:
                out.append(exc)
    except BaseException:
        conn.disconnect()  # whatever happened, its socket may hold half a reply
        raise
    return out


class AsyncHotPool(_NodePool):
    """Async twin of :class:`HotPool`, for one event loop (new connections probed alike)."""

    def __init__(
        self, url: str, timeout: float, max_connections: int, *, allow_evicting: bool = False
    ) -> None:
        super().__init__(url, timeout, max_connections, allow_evicting, is_async=True)
        self._idle: list[Any] = []
        self._slots = asyncio.Semaphore(max_connections)

    async def execute(self, packed: bytes, replies: int = 1) -> list[Any]:
        """See :meth:`HotPool.execute`."""
        if self._slots.locked():
            try:
                await asyncio.wait_for(self._slots.acquire(), self._timeout)
            except TimeoutError:
                raise self._busy() from None
        else:
            await self._slots.acquire()
        try:
            conn = self._idle.pop() if self._idle else None
            if conn is not None:
                try:
                    result = await _around_trip(conn, packed, replies)
                except redis.ConnectionError:
                    conn = None
                else:
                    self._idle.append(conn)
                    return result
            conn = await self._open()
            result = await _around_trip(conn, packed, replies)
            self._idle.append(conn)
            return result
        finally:
            self._slots.release()

    async def _open(self) -> Any:
        """See :meth:`HotPool._open`."""
        conn = self._connection_class(**self._connection_kwargs)
        probed = await _around_trip(conn, PROBE, PROBE_REPLIES)
        try:
            self._guard.check(probed)
        except QueueMisconfigured:
            await conn.disconnect()
            raise
        return conn

    async def run_script(self, script: LuaScript, calls: list[bytes]) -> list[Any]:
        """See :meth:`HotPool.run_script`."""
        results = await self.execute(b"".join(calls), len(calls))
        missing = _noscript(results)
        if missing:
            again = await self.execute(_load(script, calls, missing), 1 + len(missing))
            _reloaded(results, missing, again)
        return results

    async def run_one(self, script: LuaScript, call: bytes) -> Any:
        """See :meth:`HotPool.run_one`."""
        result = (await self.execute(call))[0]
        if isinstance(result, NoScriptError):
            return _reloaded([result], [0], await self.execute(_load(script, [call], [0]), 2))[0]
        return result

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.disconnect()


async def _around_trip(conn: Any, packed: bytes, replies: int) -> list[Any]:
    try:
        await conn.send_packed_command([packed], check_health=False)
        out: list[Any] = []
        for _ in range(replies):
            try:
                out.append(await conn.read_response())
            except redis.ResponseError as exc:
                out.append(exc)
    except BaseException:
        await conn.disconnect()  # includes cancellation: never reuse a half-read socket
        raise
    return out


def _noscript(results: list[Any]) -> list[int]:
    return [i for i, result in enumerate(results) if isinstance(result, NoScriptError)]


def _load(script: LuaScript, calls: list[bytes], missing: list[int]) -> bytes:
    """SCRIPT LOAD, then the refused calls again (NOSCRIPT means they did not run)."""
    load = pack_command(b"SCRIPT", b"LOAD", script.source.encode())
    return load + b"".join(calls[i] for i in missing)


def _reloaded(results: list[Any], missing: list[int], replies: list[Any]) -> list[Any]:
    """``results`` with the ``missing`` ones replaced by ``replies`` to :func:`_load`'s
    command (a failed SCRIPT LOAD, its first reply, is raised)."""
    load, *again = replies
    if isinstance(load, Exception):
        raise load
    for i, result in zip(missing, again, strict=True):
        results[i] = result
    return results
