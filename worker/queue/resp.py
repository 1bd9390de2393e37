"""The Redis protocol (RESP2) without redis-py: commands packed as bytes, replies read back.

The hot path sends its few commands over sockets of its own (:mod:`worker.hotpath.wire`):
importing redis-py takes ~0.2 s, which a chat service would otherwise pay for the one script
its client runs, and redis-py's reply machinery costs more CPU per round trip than the
enqueue script itself. The workers and the CLI keep redis-py. Error replies come back as
:class:`ReplyError` *values*, in order among the other replies, so one refused call of a
pipeline does not hide the others' results.

>>> pack_command(b"PING")
b'*1\\r\\n$4\\r\\nPING\\r\\n'
>>> replies = ReplyBuffer()
>>> replies.feed(b"+OK\\r\\n:42\\r\\n$3\\r\\nabc\\r\\n*2\\r\\n$-1\\r\\n-NOSCRIPT No matching")
>>> replies.take(4) is None  # the last reply is still incomplete: nothing is consumed
True
>>> replies.feed(b" script\\r\\n")
>>> replies.take(4)
[b'OK', 42, b'abc', [None, ReplyError('NOSCRIPT No matching script')]]
>>> replies.take(1) is None, replies.pending
(True, 0)
"""

from __future__ import annotations

from typing import Any, Final

#: A reply as read: bytes (simple and bulk strings), an int, None (a null), a list of
#: replies, or a :class:`ReplyError`.
Reply = Any

_CRLF: Final = b"\r\n"


class ReplyError(Exception):
    """An error reply (``-CODE message``), as a value; its text is Redis's, code first.

    >>> ReplyError("WRONGPASS invalid username-password pair").code
    'WRONGPASS'
    """

    @property
    def code(self) -> str:
        """The error's code: its first word (``ERR``, ``NOSCRIPT``, ``OOM``, ``MOVED`` …)."""
        return str(self).partition(" ")[0]


class ProtocolError(ConnectionError):
    """Bytes that are not a RESP2 reply: the connection cannot be trusted any further."""


class _Short(Exception):
    """The buffer ends inside a reply: more bytes are needed."""


def pack_bulk(*parts: bytes) -> bytes:
    """``parts`` as Redis protocol (RESP) bulk strings, without the array header."""
    return b"".join(b"$%d\r\n%b\r\n" % (len(part), part) for part in parts)


def pack_command(*parts: bytes) -> bytes:
    """One command in the Redis protocol, ready to send.

    >>> pack_command(b"GET", b"k").split()
    [b'*2', b'$3', b'GET', b'$1', b'k']
    """
    return b"*%d\r\n" % len(parts) + pack_bulk(*parts)


def _parse(buf: bytearray, at: int) -> tuple[Reply, int]:
    """The reply starting at ``at`` and where the next one starts; :class:`_Short` when the
    buffer ends inside it."""
    end = buf.find(_CRLF, at)
    if end < 0:
        raise _Short
    kind, line, at = buf[at], bytes(buf[at + 1 : end]), end + 2
    if kind == 0x24:  # $ bulk string
        size = int(line)
        if size < 0:
            return None, at
        if len(buf) < at + size + 2:
            raise _Short
        return bytes(buf[at : at + size]), at + size + 2
    if kind == 0x3A:  # : integer
        return int(line), at
    if kind == 0x2B:  # + simple string
        return line, at
    if kind == 0x2D:  # - error
        return ReplyError(line.decode("utf-8", "replace")), at
    if kind == 0x2A:  # * array
        count = int(line)
        if count < 0:
            return None, at
        items = []
        for _ in range(count):
            item, at = _parse(buf, at)
            items.append(item)
        return items, at
    raise ProtocolError(f"Redis sent {bytes(buf[at - len(line) - 3 : end])!r}, not a RESP2 reply")


class ReplyBuffer:
    """Bytes received and not yet read as replies (sans I/O: the connection feeds it)."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    @property
    def pending(self) -> int:
        """Bytes held that are not part of a reply taken yet."""
        return len(self._buf)

    def feed(self, data: bytes) -> None:
        """Add bytes read from the socket; none at all (a read at end of stream) means Redis
        closed the connection: ``ConnectionResetError``."""
        if not data:
            raise ConnectionResetError("Redis closed the connection")
        self._buf += data

    def take(self, count: int) -> list[Reply] | None:
        """The next ``count`` replies, consumed; ``None`` (nothing consumed) until all of
        them have arrived in full."""
        buf, at, out = self._buf, 0, []
        try:
            for _ in range(count):
                reply, at = _parse(buf, at)
                out.append(reply)
        except _Short:
            return None
        except ValueError as exc:  # a length or integer that is not a number
            raise ProtocolError(f"Redis sent a malformed reply ({exc})") from None
        del buf[:at]
        return out

    def clear(self) -> None:
        self._buf.clear()
