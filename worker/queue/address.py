"""Where the queue's Redis is: the configured URL, or the embedded server's Unix socket.

The hot-path clients, the workers and the CLI all resolve the address here, so a client that
only knows the data directory finds the server ``memworker run`` started.

>>> from worker.settings import Settings
>>> resolve_redis_url(Settings(redis_url="redis://cache:6379/0"))
'redis://cache:6379/0'
"""

from __future__ import annotations

from pathlib import Path

import redis

from worker.errors import QueueUnavailable
from worker.settings import Settings

#: How long a probe of the embedded socket may take; a local server answers in microseconds.
PROBE_TIMEOUT_SECONDS = 0.2


def socket_url(socket_path: Path) -> str:
    return f"unix://{socket_path}"


def socket_answers(sock: Path) -> bool:
    """True when a Redis server answers PING on the Unix socket ``sock``."""
    if not sock.exists():
        return False
    try:
        client = redis.Redis(unix_socket_path=str(sock), socket_timeout=PROBE_TIMEOUT_SECONDS)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False


def resolve_redis_url(settings: Settings) -> str:
    """The configured URL, or the embedded server's socket when one is running.

    Raises :class:`QueueUnavailable` with what to do when neither is there.
    """
    if settings.redis_url:
        return settings.redis_url
    sock = settings.embedded_redis_socket
    if socket_answers(sock):
        return socket_url(sock)
    raise QueueUnavailable(
        f"no Redis configured and no embedded server running in {settings.data_dir}: start "
        "`memworker run` in another terminal, or set MEMWORKER_REDIS_URL"
    )
