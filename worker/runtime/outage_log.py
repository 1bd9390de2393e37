"""A Redis outage is logged once per change of state, never once per retry.

Celery's consumer logs every reconnect attempt (three lines each, a traceback when the
connection drops): a 30-second outage printed about a dozen tracebacks per lane.
:class:`BrokerOutageFilter` lets the first such record of an outage through as one line and
drops the rest until the lane is ready again. Under a supervisor (``memworker run`` and
``memworker worker``), the children say nothing about Redis at all and :class:`RedisWatch`
in the supervisor says it once for all of them: one line when Redis stops answering, one when
it answers again.

>>> import logging
>>> def retry():
...     return logging.LogRecord("celery", logging.ERROR, "", 0,
...         "consumer: Cannot connect to %s: %s.", ("redis://r", "refused"), None)
>>> outage, first = BrokerOutageFilter(report=True), retry()
>>> outage.filter(first), outage.filter(retry()), outage.filter(retry())
(True, False, False)
>>> first.getMessage()[:60]
'the broker is unreachable (consumer: Cannot connect to redis'
>>> def connected():
...     return logging.LogRecord("celery", logging.INFO, "", 0, "Connected to %s", ("r",), None)
>>> back = connected()
>>> outage.filter(back), back.getMessage(), outage.filter(connected())
(True, 'the broker answers again; consuming', False)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

from worker.errors import MemworkerError
from worker.queue.address import redacted
from worker.queue.connect import REDIS_FAILURES, open_redis

#: The logger of Celery's consumer, which reports lost and failed broker connections.
CONSUMER_LOGGER: Final = "celery.worker.consumer.consumer"
#: The logger that says "Connected to …" at every (re)connection.
CONNECTION_LOGGER: Final = "celery.worker.consumer.connection"

#: How the consumer's outage messages begin.
OUTAGE_MESSAGES: Final = ("consumer: Cannot connect to", "consumer: Connection to broker lost")

#: How the connection step says it is connected (at start and after each outage).
CONNECTED: Final = "Connected to "

#: What the consumer says on each reconnect that tells an operator nothing (always dropped).
RECONNECT_NOISE: Final = ("Skipping prefetch count reduction after connection restart",)

#: How often a supervisor asks Redis whether it answers: often enough that the line comes
#: within seconds of the change, rarely enough to cost nothing.
WATCH_EVERY_SECONDS: Final = 2.0

#: A ping's deadline: a Redis that does not answer within it counts as down.
PING_TIMEOUT_SECONDS: Final = 1.0


class BrokerOutageFilter(logging.Filter):
    """Passes the first outage record of an outage as one line (``report``) or none, and
    drops the consumer's retries; :meth:`recovered` ends the outage."""

    def __init__(self, *, report: bool) -> None:
        super().__init__()
        self.report = report
        self.down = False

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith(RECONNECT_NOISE):
            return False
        if message.startswith(CONNECTED):
            # Every start and reconnect says it; only the end of an outage is news.
            if not (self.recovered() and self.report):
                return False
            record.msg, record.args = "the broker answers again; consuming", ()
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            return True
        if not message.startswith(OUTAGE_MESSAGES):
            return True
        first = not self.down
        self.down = True
        if not (first and self.report):
            return False
        reason = " ".join(message.splitlines()[0].split())
        record.msg = f"the broker is unreachable ({reason}); retrying until it answers"
        record.args = ()
        record.exc_info = record.exc_text = None
        return True

    def recovered(self) -> bool:
        """True once after an outage (the lane is connected again)."""
        was, self.down = self.down, False
        return was


def install_outage_filter(*, report: bool) -> BrokerOutageFilter:
    """Attach one :class:`BrokerOutageFilter` to Celery's consumer and connection loggers in
    this process; the connection logger speaks at INFO so the end of an outage is seen (the
    filter lets nothing else of it through)."""
    outage = BrokerOutageFilter(report=report)
    logging.getLogger(CONSUMER_LOGGER).addFilter(outage)
    connection = logging.getLogger(CONNECTION_LOGGER)
    connection.addFilter(outage)
    connection.setLevel(logging.INFO)
    return outage


class RedisWatch:
    """Called from a supervisor's loop: pings ``url`` every :data:`WATCH_EVERY_SECONDS` and
    calls ``say`` when Redis stops answering and when it answers again (never in between)."""

    def __init__(
        self,
        url: str,
        say: Callable[[str], None],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.say = say
        self.clock = clock
        self.up = True
        self.next_at = clock() + WATCH_EVERY_SECONDS

    def __call__(self) -> None:
        now = self.clock()
        if now < self.next_at:
            return
        self.next_at = now + WATCH_EVERY_SECONDS
        reason = self._ping()
        if reason is not None and self.up:
            self.say(
                f"Redis at {redacted(self.url)} is unreachable ({reason}); the lanes and beat "
                "wait for it, nothing queued is lost"
            )
        elif reason is None and not self.up:
            self.say(f"Redis at {redacted(self.url)} answers again; the lanes resume")
        self.up = reason is None

    def _ping(self) -> str | None:
        """None when Redis answers, else why not (one line)."""
        try:
            client = open_redis(self.url, timeout=PING_TIMEOUT_SECONDS)
        except MemworkerError as exc:
            return str(exc).splitlines()[0]
        try:
            client.ping()
        except REDIS_FAILURES as exc:
            return " ".join(str(exc).split()) or type(exc).__name__
        finally:
            client.close()
        return None
