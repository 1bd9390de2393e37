"""The one error tree of memworker, in three tiers that say what to do.

Every error raised on purpose derives from :class:`MemworkerError`, so a caller can catch the
whole family with one ``except``; each message says what was wrong and what to do. The tier
says who acts:

* :class:`UsageError` (also a ``ValueError``) — the input or configuration is wrong: fix the
  call, the command line or the settings. Retrying the same thing fails the same way.
* :class:`Unavailable` — a dependency (queue, store, sink, model) could not be reached or
  refused for now: nothing was lost, try again later.
* :class:`BatchFailed` — one namespace's batch could not be merged this time; its candidates
  stay pending and the worker retries (or dead-letters) it.

:class:`NotFound` stands beside them: the thing asked for does not exist.

>>> issubclass(InvalidCandidate, UsageError) and issubclass(InvalidCandidate, ValueError)
True
>>> issubclass(QueueUnavailable, Unavailable), issubclass(StaleVersion, BatchFailed)
(True, True)
"""

from __future__ import annotations

from typing import Final

#: Longest error text kept with a failure (a run, an outbox row, a sink's health, the queue's
#: failure record, a tick): enough for a chained message; sink and provider exceptions can
#: embed whole responses, which would bloat every row and log line they are copied to.
MAX_ERROR_CHARS: Final = 2000


class MemworkerError(Exception):
    """Root of every error memworker raises on purpose."""


# --- usage: fix the input ------------------------------------------------------------------
class UsageError(MemworkerError, ValueError):
    """The input (an argument, an option, a setting) is wrong; fix it and call again."""


class InvalidCandidate(UsageError):
    """A candidate memory (or one of its ids) failed validation; nothing was enqueued."""


class InvalidOption(UsageError):
    """A command-line option or argument is wrong (e.g. ``--since 6x``); nothing was done."""


class ConfigurationError(UsageError):
    """A setting, plugin path or schedule file is wrong; fix the configuration and restart."""


class ScheduleError(ConfigurationError):
    """A schedule file or entry is invalid; the message names the file and the entry."""


class IdentityMismatch(UsageError):
    """A run on an authenticating server names another user or organisation than the one the
    server authenticated (or a scanned thread's metadata names another than its owner);
    nothing was read or written for it."""


class UnknownOwner(UsageError):
    """A scanned thread's owner (the user its server's auth handler records) cannot be
    established; the thread was set aside and nothing was filed for it."""


class QueueMisconfigured(ConfigurationError):
    """Redis refused the queue for a reason only configuration fixes: a wrong password or ACL,
    a Cluster node (``MOVED``, ``CLUSTERDOWN``) where one endpoint is expected, or an evicting
    ``maxmemory-policy`` that would silently drop candidates."""


# --- unavailable: try again later ------------------------------------------------------------
class Unavailable(MemworkerError):
    """A dependency could not be reached or refused for now; nothing was lost, retry later."""


class QueueUnavailable(Unavailable):
    """Redis could not be reached (or answered too slowly) on the hot path; nothing was enqueued."""


class QueueReadOnly(QueueUnavailable):
    """The Redis reached is a read-only replica (``READONLY``); nothing was written."""


class BusyNamespace(Unavailable):
    """A worker holds the namespace right now, so the operation (an erase) was not started;
    nothing changed. Run it again once the batch is done (at most the lease length)."""


class BacklogFull(Unavailable):
    """A namespace has more pending candidates than the configured limit; try again later."""


class QueueOutOfMemory(BacklogFull):
    """Redis is at its ``maxmemory`` limit (``OOM`` under ``noeviction``); nothing was written."""


class StoreError(MemworkerError):
    """The SQL store could not do what was asked; see the two kinds below."""


class StoreUnavailable(StoreError, Unavailable):
    """The SQL store could not be reached, answered too slowly, or failed mid-transaction
    (rolled back: nothing was written)."""


class SchemaOutOfDate(StoreError, ConfigurationError):
    """The database's schema is not the one this release needs (never migrated, behind, or
    from a newer release); nothing was read or written. Run ``memworker db upgrade`` (or
    upgrade memworker). A worker refuses to start rather than fail every batch."""


class StoreRefused(StoreError, UsageError):
    """The SQL store refused a request as invalid (a naive datetime, an unknown outcome, an
    invalid import document, a database URL it cannot use); nothing was written."""


class ErasedNamespace(StoreRefused):
    """An import would bring back a namespace that was erased (``memworker forget``); nothing
    was written. Erase is final: restoring it takes the operator's explicit word
    (``--restore-erased``)."""


class SinkError(Unavailable):
    """A sink could not deliver a committed version; the outbox retries it."""


# --- batch failed: the batch stays pending and is retried --------------------------------------
class BatchFailed(MemworkerError):
    """One namespace's batch could not be merged this time; its candidates stay pending."""


class LeaseLost(BatchFailed):
    """This worker's lease on a namespace was taken over or expired; its batch must not be acked."""


class StaleVersion(BatchFailed):
    """The database fence rejected a commit: another batch changed the namespace first."""


class InvalidPlan(BatchFailed):
    """A consolidation plan failed validation; the batch stays pending."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("consolidation plan rejected: " + "; ".join(self.problems))


class ConsolidatorError(BatchFailed):
    """The consolidator (rules or LLM) failed on a batch; the batch stays pending and is retried."""


class ModelUnavailable(ConsolidatorError, Unavailable):
    """The chat model's provider failed the call (down, timed out, refused); the batch waits.

    In both tiers: the batch failed (:class:`BatchFailed`) because a dependency is
    :class:`Unavailable`, so a caller can treat it as either.
    """


# --- not found ---------------------------------------------------------------------------------
class NotFound(MemworkerError, LookupError):
    """The thing asked for (user, file, version, dead letter) does not exist."""


class ExternalEdit(SinkError):
    """The store holds content memworker did not publish (an agent edited the file), so the
    sink did not overwrite it; the edit is absorbed as candidates (``worker.service.edits``)
    before the file is published again.

    Carries what the reaction needs: the memory ``namespace`` and ``path``, the ``content`` the
    store holds now, and the version memworker last published there (``None`` when the item
    carries no marker of memworker's, e.g. the agent rewrote it).
    """

    def __init__(
        self, namespace: str, path: str, content: str, published_version: int | None
    ) -> None:
        self.namespace = namespace
        self.path = path
        self.content = content
        self.published_version = published_version
        super().__init__(
            f"{namespace}{path} was changed in the store since memworker published "
            f"{'version ' + str(published_version) if published_version else 'it'}; the edit is "
            "absorbed as candidates before the file is published again"
        )


# --- appended: a model's rejected plan, with what it cost ---------------------------------------
class InvalidModelPlan(InvalidPlan):
    """A chat model's plan and its one repair both failed validation; the batch stays pending.

    Carries the calls and tokens the attempts cost, so they are still accounted for (the
    quality harness charges them; a failed batch spends tokens too).
    """

    def __init__(
        self, problems: list[str], *, llm_calls: int, prompt_tokens: int, completion_tokens: int
    ) -> None:
        super().__init__(problems)
        self.llm_calls = llm_calls
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens


def describe_error(exc: BaseException, *, limit: int = MAX_ERROR_CHARS) -> str:
    """An exception as text, at most ``limit`` characters: our errors by their message (written
    for the reader), any other with its type first.

    >>> describe_error(KeyError("k")), describe_error(SinkError("files sink: disk full"))
    ("KeyError: 'k'", 'files sink: disk full')
    """
    kind = "" if isinstance(exc, MemworkerError) else f"{type(exc).__name__}: "
    return f"{kind}{exc}"[:limit]


def first_line(exc: BaseException) -> str:
    """A library's error message cut to its first non-blank line, for a one-line error of
    ours that quotes it (LangChain's provider errors append a page of supported providers).

    >>> first_line(ValueError("Unable to infer the provider.\\n\\nSupported providers: a, b"))
    'Unable to infer the provider.'
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
