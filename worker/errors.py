"""The one error tree of memworker.

Every error raised on purpose by memworker derives from :class:`MemworkerError`, so a caller
can catch the whole family with one ``except``. Each message says what was wrong and what to do.

>>> from worker.errors import MemworkerError, InvalidCandidate
>>> issubclass(InvalidCandidate, MemworkerError)
True
"""

from __future__ import annotations


class MemworkerError(Exception):
    """Root of every error memworker raises on purpose."""


class ConfigurationError(MemworkerError):
    """A setting, plugin path or schedule file is wrong; fix the configuration and restart."""


class InvalidCandidate(MemworkerError, ValueError):
    """A candidate memory (or one of its ids) failed validation; nothing was enqueued."""


class QueueUnavailable(MemworkerError):
    """Redis could not be reached (or answered too slowly) on the hot path; nothing was enqueued."""


class BacklogFull(MemworkerError):
    """A namespace has more pending candidates than the configured limit; try again later."""


class LeaseLost(MemworkerError):
    """This worker's lease on a namespace was taken over or expired; its batch must not be acked."""


class StaleVersion(MemworkerError):
    """The database fence rejected a commit: another batch changed the namespace first."""


class InvalidPlan(MemworkerError):
    """A consolidation plan failed validation; the batch stays pending."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("consolidation plan rejected: " + "; ".join(self.problems))


class ConsolidatorError(MemworkerError):
    """The consolidator (rules or LLM) failed on a batch; the batch stays pending and is retried."""


class ScheduleError(ConfigurationError):
    """A schedule file or entry is invalid; the message names the file and the entry."""


class StoreError(MemworkerError):
    """The SQL store could not be reached or is not migrated; run ``memworker db upgrade``."""


class NotFound(MemworkerError):
    """The thing asked for (user, file, version, dead letter) does not exist."""


class SinkError(MemworkerError):
    """A sink could not deliver a committed version; the outbox retries it."""
