"""Keeping the queue moving: the sweep, the queue's health, dead letters, and what a worker checks
at start-up.

:func:`queue_health` (``memworker status``) reports Redis's AOF and eviction settings, and
whether Redis lost its data since recent commits (another epoch) or was rolled back (SQL holds
positions of the same epoch Redis never issued). Either way nothing new is skipped, but
candidates queued and not yet committed then are gone.

Before Celery starts, ``memworker worker`` and ``memworker run`` call :func:`prepare_queue`, so
a worker never runs on a Redis that evicts candidates (unless the operator said so) and the
enqueue script finds this deployment's debounce, max wait and backlog limit in Redis. Every
caller that builds the consolidator goes through :func:`build_consolidator`, which refuses a
bad base URL, a missing provider package or missing credentials in one line naming the
setting (:class:`~worker.errors.ConfigurationError`, exit code 2); :func:`probe_model_server`
then asks the configured server for an answer within :data:`MODEL_PROBE_SECONDS`
(:class:`~worker.errors.ModelUnavailable`, exit code 4).

>>> from worker.settings import Settings
>>> build_consolidator(Settings().for_consolidation).name
'rules'
>>> build_consolidator(
...     Settings(model="openai:m", model_base_url="localhost:8080").for_consolidation)
Traceback (most recent call last):
...
worker.errors.ConfigurationError: MEMWORKER_MODEL_BASE_URL='localhost:8080' is not an ...

:func:`sweep` claims every due namespace through the queue's own
:func:`worker.queue.redis_queue.sweep_due` and adds what a sweep reports; :func:`drain` makes
every pending namespace due now. Dead letters are brought back one namespace at a time, or all
whose last error matches (after an outage that dead-lettered batches, once its cause is
fixed), or dropped for good.
"""

from __future__ import annotations

import http.client
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import urlsplit

from worker import metrics
from worker.errors import ConfigurationError, MemworkerError, ModelUnavailable, NotFound
from worker.queue.admin import QueueAdmin
from worker.queue.deployment import beat_holder
from worker.queue.redis_queue import (
    Claim,
    RedisQueue,
    applied_stream_position,
    epoch_of,
    sweep_due,
)
from worker.queue.scripts import rebuild_stats, scope_of, to_ms
from worker.service.bulkhead import Bulkhead, Progress, no_progress

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from worker.consolidation.meaning import Meaning
    from worker.consolidation.plan import Consolidator
    from worker.queue.admin import QueueAdmin
    from worker.queue.deployment import Durability
    from worker.types import ConsolidationSettings


#: Recently committed namespaces compared; enough to notice a lost Redis, cheap to read.
EPOCH_SAMPLE: Final = 500


class CommittedPositions(Protocol):
    """What the epoch check reads from SQL: the memory store, or its health figures alone."""

    def recent_positions(self, limit: int = ...) -> list[tuple[str, str]]: ...


def queue_health(queue: QueueAdmin, store: CommittedPositions) -> dict[str, Any]:
    """Durability settings plus ``epoch``: namespaces whose last commit was in another epoch."""
    epochs = queue.epochs()
    stale, same = [], {}
    for namespace, position in store.recent_positions(EPOCH_SAMPLE):
        recorded = epoch_of(position)
        if recorded is not None and recorded != epochs[queue.layout.shard(namespace)]:
            stale.append(namespace)
        elif recorded is not None:
            same[namespace] = applied_stream_position(position)
    issued = queue.last_issued(list(same))
    rolled_back = [ns for ns, applied in same.items() if applied > issued[ns]]
    epoch: dict[str, Any] = {
        "changed": bool(stale),
        "namespaces_from_an_earlier_epoch": len(stale),
    }
    rollback: dict[str, Any] = {"detected": bool(rolled_back), "namespaces": len(rolled_back)}
    if rolled_back:
        rollback["meaning"] = (
            "SQL committed queue positions this Redis never issued: it was restored from an "
            "older snapshot (or a stale replica took over). Candidates queued after that "
            "snapshot and not yet committed are gone; nothing enqueued since is skipped"
        )
    if stale:
        epoch["meaning"] = (
            "Redis lost its data since these namespaces were last committed (restart without "
            "AOF, flush, eviction or a stale failover): candidates queued then and not yet "
            "committed are gone; nothing enqueued since is skipped"
        )
    return {
        "durability": queue.durability().as_dict(),
        "epoch": epoch,
        "rollback": rollback,
        "beat": beat_holder(queue.redis, queue.settings.key_prefix),
        "cluster_primaries": queue.cluster_primaries(),
    }


#: How long the start-up probe waits for the model server's first answer (any HTTP status).
#: A server that is up answers a request for its model list in milliseconds; one that accepted
#: the connection and never answers must not hold a worker's start or an operator's command
#: for the whole model deadline. Never longer than ``model_timeout_seconds``.
MODEL_PROBE_SECONDS: Final = 3.0

#: Longest error text quoted from a provider: enough for its reason, never a page.
MAX_QUOTED: Final = 300


def prepare_queue(queue: QueueAdmin, *, sinks: Sequence[str] | None = None) -> Durability:
    """Refuse an evicting Redis (:class:`~worker.errors.QueueMisconfigured`, unless
    ``allow_evicting_redis``), log the other durability risks, then write the policy (and the
    ``sinks`` the workers publish to, when given) and recount the statistics of shards an
    earlier release wrote (once: a no-op afterwards)."""
    durability = queue.check_durability()
    queue.publish_policy()
    if sinks is not None:
        queue.record_sinks(sinks)
    rebuild_stats(queue.redis, queue.layout)
    return durability


def prepare_merges() -> None:
    """What a consolidating process builds before it takes work: the guards' compiled parts
    (:func:`worker.consolidation.guards.prepare`), so a worker's first batch costs what the
    others cost. The guards are imported here: the commands that only check the consolidator
    never load them."""
    from worker.consolidation import guards

    guards.prepare()


def build_consolidator(
    settings: ConsolidationSettings, *, meaning: Meaning | None = None
) -> Consolidator:
    """The configured consolidator, its chat model built and checked (no network call).

    Every failure is a one-line :class:`ConfigurationError` naming the setting to fix: the
    base URL, the provider package, the credentials, or what the loader itself refuses.
    """
    # Imported here: the start-up checks load the consolidator, what a sweep or `status` never
    # needs (LangChain, the meaning model).
    from worker.consolidation.loading import load_consolidator

    model = None
    if settings.model:
        if settings.model_base_url:
            base_url_parts(settings)
        model = _build_model(settings)
        _require_credentials(settings, model)
    try:
        return load_consolidator(settings, model=model, meaning=meaning)
    except MemworkerError as exc:
        raise type(exc)(one_line(str(exc))) from None


def probe_model_server(settings: ConsolidationSettings) -> None:
    """When a model server is configured (``MEMWORKER_MODEL_BASE_URL``), check that it answers
    an HTTP request within :data:`MODEL_PROBE_SECONDS`; :class:`ModelUnavailable` if not.

    Any HTTP answer counts (401, 404 …): the probe asks whether the server is up, not whether
    it likes the request. Without a base URL (a provider's public API) nothing is probed.
    """
    if not settings.model or not settings.model_base_url:
        return
    scheme, host, port, path = base_url_parts(settings)
    deadline = min(MODEL_PROBE_SECONDS, settings.model_timeout_seconds)
    connection: http.client.HTTPConnection
    if scheme == "https":
        context = ssl.create_default_context()
        connection = http.client.HTTPSConnection(host, port, timeout=deadline, context=context)
    else:
        connection = http.client.HTTPConnection(host, port, timeout=deadline)
    try:
        connection.request("GET", f"{path.rstrip('/')}/models")
        connection.getresponse().close()
    except TimeoutError:
        raise ModelUnavailable(
            f"the model server at {settings.model_base_url} did not answer within {deadline:g} s; "
            "start it or fix MEMWORKER_MODEL_BASE_URL"
        ) from None
    except (OSError, http.client.HTTPException) as exc:
        reason = one_line(str(exc)) or type(exc).__name__
        raise ModelUnavailable(
            f"the model server at {settings.model_base_url} is unreachable ({reason}); start it "
            "or fix MEMWORKER_MODEL_BASE_URL"
        ) from None
    finally:
        connection.close()


def base_url_parts(settings: ConsolidationSettings) -> tuple[str, str, int, str]:
    """``(scheme, host, port, path)`` of ``MEMWORKER_MODEL_BASE_URL``; ConfigurationError
    unless it is an http(s) URL with a host (and a numeric port, when one is given)."""
    url = settings.model_base_url or ""
    refused = ConfigurationError(
        f"MEMWORKER_MODEL_BASE_URL={url!r} is not an http(s) URL; give one such as "
        "http://127.0.0.1:8080/v1"
    )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise refused
    try:
        port = parts.port
    except ValueError:
        raise refused from None
    default = 443 if parts.scheme == "https" else 80
    return parts.scheme, parts.hostname, port or default, parts.path


def one_line(text: str) -> str:
    """A provider's message as one line: its first line, at most :data:`MAX_QUOTED` long."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    first = lines[0] if lines else ""
    return first if len(first) <= MAX_QUOTED else first[: MAX_QUOTED - 1] + "…"


def _build_model(settings: ConsolidationSettings) -> BaseChatModel:
    """The chat model; the provider's own refusal (missing credentials, a bad argument) is a
    one-line ConfigurationError, as a missing package already is."""
    from worker.consolidation.loading import chat_model

    try:
        return chat_model(settings)
    except ConfigurationError as exc:
        raise ConfigurationError(_first_clause(str(exc))) from None
    except Exception as exc:  # the provider SDK's own error type: any is a configuration one
        text = str(exc)
        if "api_key" in text.lower() or "credential" in text.lower():
            provider = (settings.model or "").partition(":")[0]
            raise _no_credentials(settings, f"{provider.upper()}_API_KEY") from None
        raise ConfigurationError(
            f"MEMWORKER_MODEL={settings.model!r} could not be built: "
            f"{one_line(text) or type(exc).__name__}"
        ) from None


def _require_credentials(settings: ConsolidationSettings, model: Any) -> None:
    """Refuse a model whose API key fields are all empty (the provider would refuse every
    call): ``anthropic_api_key`` is read from ``ANTHROPIC_API_KEY``, and so on."""
    fields = [name for name in getattr(type(model), "model_fields", {}) if name.endswith("api_key")]
    if not fields or any(_secret(getattr(model, name, None)) for name in fields):
        return
    raise _no_credentials(settings, fields[0].upper())


def _no_credentials(settings: ConsolidationSettings, variable: str) -> ConfigurationError:
    return ConfigurationError(
        f"MEMWORKER_MODEL={settings.model!r} has no credentials: set {variable}, or give the "
        'key as MEMWORKER_MODEL_KWARGS=\'{"api_key": "..."}\' ("none" for a local server '
        "that needs none)"
    )


def _secret(value: Any) -> str:
    """The text of a key field (a pydantic ``SecretStr`` or a plain string); '' when unset."""
    if value is None:
        return ""
    getter = getattr(value, "get_secret_value", None)
    return str(getter() if callable(getter) else value)


def _first_clause(message: str) -> str:
    """The loader's message with the provider's quoted text cut to one line."""
    head, sep, rest = message.partition(" (")
    if not sep:
        return one_line(message)
    quoted, close, tail = rest.rpartition("); ")
    if not close:
        return one_line(message)
    return f"{head} ({one_line(quoted)}); {one_line(tail)}"


#: How often a worker process refreshes the queue-depth gauges: reading them costs one script
#: per shard, a round trip every sweep would add for graphs scraped far less often. The gauges
#: lag by at most this much.
QUEUE_GAUGES_EVERY_SECONDS: Final = 15.0


class GaugeSchedule:
    """When a process's sweeps next refresh the queue gauges (one per worker process)."""

    def __init__(self, every_seconds: float = QUEUE_GAUGES_EVERY_SECONDS) -> None:
        self.every_seconds = every_seconds
        self._next = 0.0
        self._lock = threading.Lock()

    def due(self) -> bool:
        """True at most once per period (the first call included)."""
        with self._lock:
            now = time.monotonic()
            if now < self._next:
                return False
            self._next = now + self.every_seconds
            return True


def sweep(
    queue: RedisQueue,
    dispatch: Callable[[Claim], None],
    *,
    now: float | None = None,
    gauges: GaugeSchedule | None = None,
) -> list[Claim]:
    """Claim and dispatch due namespaces (``now``: epoch seconds, for tests and catch-up tools);
    counts the claims, observes how long each namespace waited past its due time, and
    refreshes the queue-depth gauges (every sweep, or when ``gauges`` says so)."""
    claims = sweep_due(queue, dispatch, now=now)
    metrics.CLAIMS.inc(len(claims))
    # Lag against the clock that set the due times: the Redis server's (``now`` is a test hook).
    metrics.observe_due_lag(claims, to_ms(now) if now is not None else queue.server_ms())
    if gauges is None or gauges.due():
        metrics.refresh_queue_gauges(queue.admin.stats(now=now).scopes)
    return claims


def drain(queue: RedisQueue, *, scope: str | None = None) -> int:
    """Make every namespace (of ``scope``) with pending candidates due now, whatever its
    debounce, so the next sweep claims it; returns how many were marked. Each namespace is its
    own bulkhead: one whose key Redis refuses is set aside (logged with the reason)."""
    bulkhead = Bulkhead("drain")
    marked = [
        bulkhead.run(ns, lambda n=ns: queue.mark_due(n))  # type: ignore[misc]
        for ns in queue.admin.namespaces()
        if scope is None or scope_of(ns) == scope  # a user of an org is of the user scope
    ]
    return sum(1 for m in marked if m)


@dataclass(frozen=True)
class Retried:
    """Namespaces brought back (due now), and dead letters left alone by the filter."""

    namespaces: list[str]
    left: int


def retry_dead_letters(
    queue: QueueAdmin, *, error_contains: str | None = None, progress: Progress = no_progress
) -> Retried:
    """Retry every dead letter, or only those whose last error contains ``error_contains``
    (case-insensitive); each comes back with a fresh attempt count, due now. ``progress`` is
    told each namespace retried."""
    wanted = (error_contains or "").casefold()
    letters = queue.dead_letters()
    chosen = [
        letter.namespace
        for letter in letters
        if not wanted or wanted in (letter.last_error or "").casefold()
    ]
    retried: list[str] = []
    with progress(len(chosen)) as advance:
        for namespace in chosen:
            if queue.retry_dead(namespace):
                retried.append(namespace)
            advance(namespace)
    return Retried(retried, len(letters) - len(chosen))


def retry_dead_letter(queue: QueueAdmin, namespace: str) -> int:
    """Bring ``namespace`` back with a fresh attempt count, due now; returns its pending
    candidates. :class:`NotFound` when it is not dead-lettered."""
    if not queue.retry_dead(namespace):
        raise NotFound(
            f"{namespace} is not dead-lettered, so there is nothing to retry; "
            "`memworker dlq list` shows the dead letters"
        )
    return queue.namespace_state(namespace).pending


def drop_dead_letter(queue: QueueAdmin, namespace: str, *, confirm: Callable[[int], None]) -> int:
    """Delete the pending candidates of dead-lettered ``namespace`` for good, once ``confirm``
    (handed their count) returns; returns how many were dropped. :class:`NotFound` when it is
    not dead-lettered (nothing is dropped)."""
    state = queue.namespace_state(namespace)
    if not state.dead:
        raise NotFound(
            f"{namespace} is not dead-lettered, so nothing was dropped; only dead letters can be "
            "dropped (`memworker dlq list` shows them)"
        )
    confirm(state.pending)
    return queue.drop_dead(namespace)
