"""A loopback TCP proxy that a test can freeze (a dependency that accepts and never answers)
or stop (a dependency that is down), then bring back.

* ``freeze()``: connections stay open and new ones are accepted, but no byte is relayed in
  either direction, as with a stopped server process or a black-holing network. The kernel
  still acknowledges what is sent, so TCP itself never reports a problem: only a client-side
  deadline gets the caller out.
* ``stop()``: the listening socket is closed and live connections are reset (connection
  refused from then on), as with a crashed server.
* ``trickle(seconds)``: what the server sends reaches the client one byte at a time,
  ``seconds`` apart (``trickle(None)``: at once again): a dependency that answers, each byte
  in time, the whole too late.
* ``thaw()`` / ``start()`` undo them; buffered bytes flow again after a thaw.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
from collections.abc import Iterator
from types import TracebackType

#: Bytes relayed per read.
CHUNK = 65536
#: How often relay threads look at the freeze flag and at the stop request.
TICK_SECONDS = 0.05


class TcpProxy:
    """``127.0.0.1:<port>`` → ``target``; use as a context manager."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._frozen = threading.Event()
        self._closing = threading.Event()
        self._trickle: float | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self.port = 0
        self.start()

    # --- control ---------------------------------------------------------------------------
    def freeze(self) -> None:
        self._frozen.set()

    def thaw(self) -> None:
        self._frozen.clear()

    def trickle(self, seconds_per_byte: float | None) -> None:
        self._trickle = seconds_per_byte

    def stop(self) -> None:
        """Refuse new connections and reset the live ones."""
        listener, self._listener = self._listener, None
        if listener is not None:
            # shutdown first: on Linux, close alone leaves an accept() blocked in another
            # thread holding the socket open, still listening.
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            with contextlib.suppress(OSError):
                # Linger 0: close sends a reset, as a crashed server's kernel would.
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()

    def start(self) -> None:
        """Listen again (on the same port after a stop)."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def close(self) -> None:
        self._closing.set()
        self.stop()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()

    # --- relaying --------------------------------------------------------------------------
    def _accept(self, listener: socket.socket) -> None:
        while not self._closing.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return  # stopped
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            threading.Thread(target=self._relay, args=(client, upstream), daemon=True).start()

    def _relay(self, a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        with contextlib.suppress(OSError, ValueError):
            while not self._closing.is_set():
                if self._frozen.is_set():
                    self._closing.wait(TICK_SECONDS)
                    continue
                ready, _, _ = select.select([a, b], [], [], TICK_SECONDS)
                for source in ready:
                    data = source.recv(CHUNK)
                    if not data:
                        raise OSError("closed")
                    self._send(peers[source], data, slowly=source is b)
        for sock in (a, b):
            with contextlib.suppress(OSError):
                sock.close()

    def _send(self, to: socket.socket, data: bytes, *, slowly: bool) -> None:
        """Relay ``data``; from the server (``slowly``) byte by byte while trickling."""
        delay = self._trickle if slowly else None
        if delay is None:
            to.sendall(data)
            return
        for i in range(len(data)):
            to.sendall(data[i : i + 1])
            self._closing.wait(delay)


@contextlib.contextmanager
def proxied(host: str, port: int) -> Iterator[TcpProxy]:
    with TcpProxy(host, port) as proxy:
        yield proxy
