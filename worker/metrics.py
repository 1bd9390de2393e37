"""Prometheus metrics of memworker, declared once on a registry of their own.

A dedicated :data:`REGISTRY` (not prometheus-client's global one) means importing memworker
next to another instrumented library, or twice in one test session, never collides on names.
Every metric is prefixed ``memworker_``; counters gain prometheus' ``_total`` suffix.

>>> from prometheus_client import generate_latest
>>> CONSOLIDATIONS.labels(outcome="ok").inc()
>>> b"memworker_consolidations_total{outcome=\\"ok\\"}" in generate_latest(REGISTRY)
True

``memworker worker`` runs each lane in a process of its own and serves all of them from the
supervisor with prometheus-client's multiprocess mode (the children write to a private folder,
``PROMETHEUS_MULTIPROC_DIR``); a single lane (``--lanes consolidate``) serves its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from threading import Thread
from typing import TYPE_CHECKING, Final, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

if TYPE_CHECKING:  # the server module (http.server) is the exporter's, not the hot path's
    from wsgiref.simple_server import WSGIServer

from worker.types import Scope

#: The registry every memworker metric lives on; serve it, or pass it to ``generate_latest``.
REGISTRY: Final = CollectorRegistry(auto_describe=True)

#: How the queue gauges of several lane processes combine in multiprocess mode: the sweep lane
#: alone sets them, so the largest value among live processes is the current one.
QUEUE_GAUGE_MODE: Final = "livemax"

#: Prefix of every metric name.
NAMESPACE: Final = "memworker"

#: Seconds between a namespace's due time and its claim: sub-second when healthy, minutes
#: when workers fall behind; the top buckets catch outages.
DUE_LAG_BUCKETS: Final = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)

#: Seconds one consolidation takes: milliseconds for the rules consolidator, tens of seconds
#: for an LLM call on a large batch.
CONSOLIDATION_BUCKETS: Final = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 180.0)

ENQUEUED: Final = Counter(
    "enqueued",
    "Candidates accepted into the queue, by scope: by the hot-path clients (chat services, "
    "`memworker enqueue`) and by worker-side enqueues (source scans); counted in the process "
    "that enqueued them. Refused candidates (invalid, BacklogFull) are not counted.",
    ["scope"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
#: ENQUEUED's child per scope, bound once and keyed by the scope's first letter, which is the
#: first character of every namespace key (``user:…``, ``agent:…``, ``org:…``): counting an
#: enqueue is then a dict lookup and an ``inc``, with no ``labels()`` call or string slicing.
_ENQUEUED_BY_INITIAL: Final = {
    scope.value[0]: ENQUEUED.labels(scope=scope.value) for scope in Scope
}
if len(_ENQUEUED_BY_INITIAL) != len(Scope):  # pragma: no cover - guards a future scope's name
    raise RuntimeError("scope names must start with distinct letters for count_enqueued")
PENDING_CANDIDATES: Final = Gauge(
    "pending_candidates",
    "Candidates waiting in Redis, by scope.",
    ["scope"],
    namespace=NAMESPACE,
    registry=REGISTRY,
    multiprocess_mode=QUEUE_GAUGE_MODE,
)
DUE_NAMESPACES: Final = Gauge(
    "due_namespaces",
    "Namespaces whose batch is due and not yet claimed.",
    ["scope"],
    namespace=NAMESPACE,
    registry=REGISTRY,
    multiprocess_mode=QUEUE_GAUGE_MODE,
)
LEASED_NAMESPACES: Final = Gauge(
    "leased_namespaces",
    "Namespaces with a batch claimed by a worker.",
    ["scope"],
    namespace=NAMESPACE,
    registry=REGISTRY,
    multiprocess_mode=QUEUE_GAUGE_MODE,
)
DEAD_LETTERS: Final = Gauge(
    "dead_letters",
    "Namespaces whose batch is dead-lettered (see `memworker status`).",
    ["scope"],
    namespace=NAMESPACE,
    registry=REGISTRY,
    multiprocess_mode=QUEUE_GAUGE_MODE,
)
DUE_LAG: Final = Histogram(
    "due_lag_seconds",
    "Delay from a namespace's due time to its claim.",
    namespace=NAMESPACE,
    registry=REGISTRY,
    buckets=DUE_LAG_BUCKETS,
)
CLAIMS: Final = Counter(
    "claims",
    "Batches claimed by sweeps.",
    namespace=NAMESPACE,
    registry=REGISTRY,
)
CONSOLIDATIONS: Final = Counter(
    "consolidations",
    "Consolidation attempts by outcome (ok, stale, failed, dead_lettered).",
    ["outcome"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
CONSOLIDATION_SECONDS: Final = Histogram(
    "consolidation_seconds",
    "Wall time of one namespace consolidation.",
    namespace=NAMESPACE,
    registry=REGISTRY,
    buckets=CONSOLIDATION_BUCKETS,
)
FAILURES: Final = Counter(
    "failures",
    "Failures by stage (enqueue, sweep, load, consolidate, commit, ack, publish).",
    ["stage"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
LLM_CALLS: Final = Counter(
    "llm_calls",
    "Chat-model calls made by the consolidation agent.",
    namespace=NAMESPACE,
    registry=REGISTRY,
)
LLM_TOKENS: Final = Counter(
    "llm_tokens",
    "Tokens of those calls, by kind (input, output).",
    ["kind"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)
QUEUE_EPOCH_CHANGES: Final = Counter(
    "queue_epoch_changes",
    "Batches whose namespace was last committed in another queue epoch: Redis lost its data "
    "(restart without AOF, flush, eviction, stale failover) since. Anything above 0 needs a look.",
    namespace=NAMESPACE,
    registry=REGISTRY,
)
QUEUE_ROLLBACKS: Final = Counter(
    "queue_rollbacks",
    "Batches whose new candidates got stream ids at or below SQL's applied position in the same "
    "epoch: Redis was restored from an older snapshot. Also counted in queue_epoch_changes.",
    namespace=NAMESPACE,
    registry=REGISTRY,
)
SINK_DELIVERIES: Final = Counter(
    "sink_deliveries",
    "Outbox deliveries by sink and outcome (ok, failed).",
    ["sink", "outcome"],
    namespace=NAMESPACE,
    registry=REGISTRY,
)


def count_enqueued(namespace: str) -> None:
    """Count one candidate that Redis accepted into ``namespace`` (a namespace key).

    >>> before = REGISTRY.get_sample_value("memworker_enqueued_total", {"scope": "agent"}) or 0
    >>> count_enqueued("agent:support-bot")
    >>> REGISTRY.get_sample_value("memworker_enqueued_total", {"scope": "agent"}) - before
    1.0
    """
    _ENQUEUED_BY_INITIAL[namespace[0]].inc()


class DueClaim(Protocol):
    """A claim that knows when its namespace became claimable (a queue ``Claim``)."""

    @property
    def due_at_ms(self) -> int | None: ...


def observe_due_lag(claims: Iterable[DueClaim], now_ms: int) -> None:
    """Observe ``memworker_due_lag_seconds`` for each claim made at ``now_ms`` (epoch ms).

    The lag is ``now_ms - claim.due_at_ms`` in seconds, never negative; a claim without a due
    time (serialised by an older release) is skipped. Call it once per sweep with its claims.

    >>> from types import SimpleNamespace
    >>> observe_due_lag([SimpleNamespace(due_at_ms=1_000), SimpleNamespace(due_at_ms=None)], 3_500)
    """
    for claim in claims:
        due = claim.due_at_ms
        if due is not None:
            DUE_LAG.observe(max(0, now_ms - due) / 1000)


class ScopeCounts(Protocol):
    """Queue depth of one scope, as reported by the queue's stats."""

    @property
    def pending(self) -> int: ...
    @property
    def due(self) -> int: ...
    @property
    def leased(self) -> int: ...
    @property
    def dead(self) -> int: ...


def refresh_queue_gauges(stats: Mapping[str, ScopeCounts]) -> None:
    """Set the queue gauges from per-scope counts (keys: scope names).

    A scope missing from ``stats`` is set to zero, so a drained scope never shows a stale
    depth.

    >>> from types import SimpleNamespace
    >>> refresh_queue_gauges({"user": SimpleNamespace(pending=7, due=2, leased=1, dead=0)})
    >>> REGISTRY.get_sample_value("memworker_pending_candidates", {"scope": "user"})
    7.0
    """
    for scope in Scope:
        counts = stats.get(scope.value)
        PENDING_CANDIDATES.labels(scope=scope.value).set(counts.pending if counts else 0)
        DUE_NAMESPACES.labels(scope=scope.value).set(counts.due if counts else 0)
        LEASED_NAMESPACES.labels(scope=scope.value).set(counts.leased if counts else 0)
        DEAD_LETTERS.labels(scope=scope.value).set(counts.dead if counts else 0)


def start_metrics_server(
    port: int, registry: CollectorRegistry = REGISTRY, *, addr: str = "0.0.0.0"
) -> tuple[WSGIServer, Thread]:
    """Serve ``registry`` on ``http://addr:port/metrics`` from a daemon thread.

    Port 0 picks a free port (read it from ``server.server_port``). Stop it with
    ``server.shutdown(); server.server_close()``.
    """
    return start_http_server(port, addr=addr, registry=registry)
