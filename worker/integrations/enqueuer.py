"""What the integrations need from the hot-path client, and how they call it without ever failing.

:class:`Enqueuer` / :class:`AsyncEnqueuer` are the ``enqueue`` signature of
``MemoryClient`` / ``AsyncMemoryClient``: keyword arguments
:class:`~worker.models.EnqueueFields`, declared once. Anything with that method works (a test
double, a client wrapper that adds tenancy checks, …).

:func:`submit` and :func:`asubmit` are the one place an integration hands a candidate over. A
capture is a side effect of a chat reply, so they never raise: queue trouble is logged (the
error class and the user id, never the text) and counted in :data:`CAPTURE_ERRORS`, and the
reply goes on.

>>> class Printer:
...     def enqueue(self, *, user_id, trace_id, text, **kw):
...         print(user_id, trace_id, text)
...         return "c1"
>>> submit(Printer(), "capture", user_id="u1", trace_id="t1", text="hi")
u1 t1 hi
'c1'
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, Protocol, runtime_checkable

from prometheus_client import Counter
from typing_extensions import Unpack

from worker.models import EnqueueFields

logger = logging.getLogger(__name__)

#: Failed hand-overs from the chat service's integrations to the queue, by integration and
#: error class. A rising count means memories are being lost on the hot path (Redis down,
#: backlog full, invalid ids); the chat replies themselves were not affected.
CAPTURE_ERRORS = Counter(
    "memworker_capture_errors_total",
    "Candidates an integration (capture middleware, summary flush, memory tools) could not "
    "enqueue; the chat reply went on without them.",
    ["integration", "error"],
)


@runtime_checkable
class Enqueuer(Protocol):
    """The hot-path client's synchronous ``enqueue``; returns the candidate id."""

    def enqueue(self, **fields: Unpack[EnqueueFields]) -> str: ...


@runtime_checkable
class AsyncEnqueuer(Protocol):
    """The hot-path client's asynchronous ``enqueue``; returns the candidate id."""

    async def enqueue(self, **fields: Unpack[EnqueueFields]) -> str: ...


def is_async(enqueuer: Enqueuer | AsyncEnqueuer) -> bool:
    """True when ``enqueuer.enqueue`` is a coroutine function."""
    return inspect.iscoroutinefunction(enqueuer.enqueue)


def submit(
    enqueuer: Enqueuer | AsyncEnqueuer, integration: str, **args: Unpack[EnqueueFields]
) -> str | None:
    """Enqueue from synchronous code; the candidate id, or ``None`` after logging and counting.

    An async-only enqueuer cannot be awaited from a synchronous run; that is reported the same
    way (give the integration a synchronous client too, or run the agent asynchronously).
    """
    if is_async(enqueuer):
        _report(integration, "AsyncEnqueuerInSyncRun", args)
        return None
    try:
        return str(enqueuer.enqueue(**args))
    except Exception as exc:  # never into the agent: a lost capture must not lose the reply
        _report(integration, type(exc).__name__, args)
        return None


async def asubmit(
    enqueuer: Enqueuer | AsyncEnqueuer, integration: str, **args: Unpack[EnqueueFields]
) -> str | None:
    """Enqueue from async code; a synchronous enqueuer runs in a worker thread so the event
    loop is never blocked on a Redis round trip."""
    try:
        if isinstance(enqueuer, AsyncEnqueuer) and is_async(enqueuer):
            result: Any = await enqueuer.enqueue(**args)
        else:
            result = await asyncio.to_thread(lambda: enqueuer.enqueue(**args))
        return str(result)
    except Exception as exc:  # never into the agent: a lost capture must not lose the reply
        _report(integration, type(exc).__name__, args)
        return None


def report_refused(integration: str, exc: Exception) -> None:
    """Count and log a capture refused before anything was enqueued (e.g. a run naming another
    user than the authenticated one): the same counter, so one alert covers both."""
    CAPTURE_ERRORS.labels(integration=integration, error=type(exc).__name__).inc()
    logger.warning(
        "memory capture refused: integration=%s error=%s: %s",
        integration,
        type(exc).__name__,
        exc,
    )


def _report(integration: str, error: str, args: EnqueueFields) -> None:
    CAPTURE_ERRORS.labels(integration=integration, error=error).inc()
    # Ids only: candidate text is user content and may hold anything.
    logger.warning(
        "memory capture dropped: integration=%s error=%s user_id=%s thread_id=%s kind=%s",
        integration,
        error,
        args.get("user_id"),
        args.get("thread_id"),
        args.get("kind", "fact"),
    )
