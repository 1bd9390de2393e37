"""The hot path's pool and connections for an event loop (:class:`~worker.AsyncMemoryClient`).

The same pool as :mod:`worker.hotpath.pool` (bounded, a stale socket retried once on a fresh
connection, every new connection probed for an evicting policy), over asyncio streams; kept
apart so that a synchronous client never imports asyncio.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any

from worker.hotpath.eviction import PROBE, PROBE_REPLIES
from worker.hotpath.pool import NodePool, is_noscript, load, noscript, reloaded
from worker.hotpath.wire import READ_CHUNK, NodeAddress, refused
from worker.queue.resp import Reply, ReplyBuffer
from worker.queue.scripts import LuaScript


class AsyncConnection:
    """An asyncio connection, for one event loop; see :class:`~worker.hotpath.wire.Connection`."""

    __slots__ = ("_reader", "_replies", "_timeout", "_writer")

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._replies = ReplyBuffer()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    @classmethod
    async def open(
        cls, address: NodeAddress, timeout: float, tls: ssl.SSLContext | None
    ) -> AsyncConnection:
        conn = cls(timeout)
        async with asyncio.timeout(timeout):
            if address.path is not None:
                conn._reader, conn._writer = await asyncio.open_unix_connection(address.path)
            else:
                conn._reader, conn._writer = await asyncio.open_connection(
                    address.host, address.port, ssl=tls
                )
                sock = conn._writer.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        packed, count = address.handshake()
        if count:
            try:
                refused(await conn.round_trip(packed, count))
            except BaseException:
                conn.close()
                raise
        return conn

    async def round_trip(self, packed: bytes, replies: int) -> list[Reply]:
        """See :meth:`~worker.hotpath.wire.Connection.round_trip`; the whole exchange waits at
        most the timeout."""
        reader, writer, buffer = self._reader, self._writer, self._replies
        if reader is None or writer is None:
            raise ConnectionError("the connection was never opened")
        async with asyncio.timeout(self._timeout):
            writer.write(packed)
            await writer.drain()
            while (out := buffer.take(replies)) is None:
                buffer.feed(await reader.read(READ_CHUNK))
        return out

    def close(self) -> None:
        """Close the socket (at once: the transport does not wait for unsent data)."""
        self._replies.clear()
        if self._writer is not None:
            self._writer.transport.abort()


class AsyncHotPool(NodePool):
    """Async twin of :class:`HotPool`, for one event loop (new connections probed alike)."""

    def __init__(
        self, url: str, timeout: float, max_connections: int, *, allow_evicting: bool = False
    ) -> None:
        super().__init__(url, timeout, max_connections, allow_evicting)
        self._idle: list[AsyncConnection] = []
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
                except ConnectionError:
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

    async def _open(self) -> AsyncConnection:
        """See :meth:`HotPool._open`."""
        conn = await AsyncConnection.open(self._address, self._timeout, self._tls)
        self._admit(conn, await _around_trip(conn, PROBE, PROBE_REPLIES))
        return conn

    async def run_script(self, script: LuaScript, calls: list[bytes]) -> list[Any]:
        """See :meth:`HotPool.run_script`."""
        results = await self.execute(b"".join(calls), len(calls))
        missing = noscript(results)
        if missing:
            again = await self.execute(load(script, calls, missing), 1 + len(missing))
            reloaded(results, missing, again)
        return results

    async def run_one(self, script: LuaScript, call: bytes) -> Any:
        """See :meth:`HotPool.run_one`."""
        result = (await self.execute(call))[0]
        if is_noscript(result):
            return reloaded([result], [0], await self.execute(load(script, [call], [0]), 2))[0]
        return result

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


async def _around_trip(conn: AsyncConnection, packed: bytes, replies: int) -> list[Any]:
    try:
        return await conn.round_trip(packed, replies)
    except BaseException:
        conn.close()  # includes cancellation: never reuse a half-read socket
        raise
