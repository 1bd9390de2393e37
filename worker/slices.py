"""The settings' slices: what each layer is handed (see :mod:`worker.settings`).

A slice is a frozen view of the fields one layer reads. Its fields have the names of the
:class:`~worker.settings.Settings` attributes they copy (a field or a derived property), so one
function builds every slice and a test holds each name to ``Settings``; defaults and bounds
live on ``Settings`` alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from worker.queue_policy import QueuePolicy

__all__ = [
    "ConsolidationSettings",
    "LaneSettings",
    "QueueSettings",
    "SinkSettings",
    "SourceSettings",
    "StoreSettings",
    "StructuredMethod",
]

# Secrets (an API key, a provider's keyword arguments) are kept out of a slice's repr, so a
# logged slice never carries one.

#: How the LLM agent asks for its structured plan (see ``Settings.model_structured_method``).
StructuredMethod = Literal["auto", "function_calling", "json_schema", "json_mode"]


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """The queue's slice: its keys, the debounce policy, leases, retries and batch sizes.

    >>> from worker.settings import Settings
    >>> Settings(debounce_seconds=5).for_queue.queue_policy.quiet
    5000
    """

    key_prefix: str
    queue_shards: int
    #: The debounce and backlog policy (``debounce_seconds``, ``max_wait_seconds``,
    #: ``max_pending_per_namespace`` and ``queue_shards``), as the scripts read it.
    queue_policy: QueuePolicy
    lease_seconds: float
    max_attempts: int
    retry_backoff_seconds: float
    outage_retry_max_seconds: float
    max_batch: int
    claim_limit: int
    allow_evicting_redis: bool


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """The memory store's slice: where it is, its deadlines, its search index.

    >>> from worker.settings import Settings
    >>> Settings(data_dir="/srv/mw").for_store.effective_database_url
    'sqlite:////srv/mw/memworker.sqlite3'
    """

    effective_database_url: str
    database_connect_timeout_seconds: float
    database_timeout_seconds: float
    text_search_config: str
    embeddings: str | None
    embeddings_timeout_seconds: float


@dataclass(frozen=True, slots=True)
class ConsolidationSettings:
    """The consolidator's slice: which one, its model, and the limits every plan is held to.

    >>> from worker.settings import Settings
    >>> Settings().for_consolidation.consolidator
    'worker.consolidation.rules:RulesConsolidator'
    """

    consolidator: str
    model: str | None
    model_token_budget: int
    model_structured_method: StructuredMethod
    model_base_url: str | None
    model_kwargs: Mapping[str, Any] = field(repr=False)
    model_timeout_seconds: float
    max_merge_seconds: float
    max_removals_per_run: int
    max_text_bytes: int
    file_budget_bytes: int
    sensitive_paths: Sequence[str]
    inbox_route: str


@dataclass(frozen=True, slots=True)
class SinkSettings:
    """The sinks' slice: which sinks, where they write, and the store layout they publish in.

    >>> from worker.settings import Settings
    >>> Settings().for_sinks.sinks
    ['files']
    """

    sinks: Sequence[str]
    effective_files_dir: Path
    langgraph_url: str | None
    langgraph_api_key: str | None = field(repr=False)
    sink_timeout_seconds: float
    store_namespace: tuple[str, ...]
    store_namespace_agent: tuple[str, ...]
    store_namespace_org: tuple[str, ...]
    store_routes: Mapping[str, str]
    inbox_route: str
    direct_edits: bool


@dataclass(frozen=True, slots=True)
class SourceSettings:
    """The sources' slice: the LangGraph server whose threads are scanned, and how.

    >>> from worker.settings import Settings
    >>> Settings(thread_assistant_key="graph_id").for_sources.thread_assistant_key
    'graph_id'
    """

    langgraph_url: str | None
    langgraph_api_key: str | None = field(repr=False)
    thread_assistant_key: str | None
    max_text_bytes: int
    thread_owner_key: str = "owner"
    thread_org_key: str | None = None


@dataclass(frozen=True, slots=True)
class LaneSettings:
    """The task lanes' slice (Celery and beat): the broker, queue names, beat's timing.

    >>> from worker.settings import Settings
    >>> Settings(key_prefix="chat").for_lanes.key_prefix
    'chat'
    """

    key_prefix: str
    broker_url: str | None
    sweep_interval_seconds: float
    beat_lock_seconds: float
    schedules_dir: Path | None
