"""Configuration, read once at the edge (CLI, Celery app) and passed into the core.

The core never reads ``os.environ``: the edge builds one :class:`Settings` (every
``MEMWORKER_*`` variable, each default and bound declared once, on its field) and hands each
layer only its slice, a frozen view of the fields that layer reads: :class:`QueueSettings`
(``settings.for_queue``), :class:`StoreSettings`, :class:`ConsolidationSettings`,
:class:`SinkSettings`, :class:`SourceSettings` and :class:`LaneSettings`. A slice declares
names and types only: its values are always the validated ones of a :class:`Settings`.

>>> from worker.settings import Settings
>>> s = Settings(redis_url="redis://127.0.0.1:6379/0", debounce_seconds=5)
>>> s.debounce_seconds
5.0
>>> s.for_queue.queue_policy.quiet
5000

Every memworker process reads its settings in one order: the environment first, then the
``.env`` file of its working directory, then the defaults. That holds for ``memworker run``,
the workers, beat, every CLI command, the chat side's ``MemoryClient()`` and the examples, so
one file next to a deployment configures all of them alike.

Only ``MEMWORKER_*`` lines are taken from the file, and only as settings: the file is not
exported into the environment, so another program's variable in it (a provider's
``OPENAI_API_KEY``) is neither read nor refused. Such a key belongs in the environment (or in
``MEMWORKER_MODEL_KWARGS``). A ``MEMWORKER_*`` name that is no setting is ignored, as it is
in the environment.

>>> import pathlib, tempfile
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / ".env").write_text("MEMWORKER_KEY_PREFIX=chat\\nOPENAI_API_KEY=sk-x\\n")
>>> env_file_values(folder / ".env")
{'MEMWORKER_KEY_PREFIX': 'chat'}

Settings from given values alone, the environment unread: what a library constructor
builds (``MemoryClient.from_url``), so a chat service's own ``MEMWORKER_*`` variables never
leak into a client it configured in code.

>>> explicit_settings(redis_url="redis://cache:6379/0").key_prefix
'mw'
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, TypeVar

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from worker.errors import ConfigurationError
from worker.types import (
    DEFAULT_DATA_DIR,
    DEFAULT_EMBEDDINGS,
    DEFAULT_KEY_PREFIX,
    DEFAULT_MAX_PENDING,
    DEFAULT_MAX_WAIT_MS,
    DEFAULT_QUEUE_SHARDS,
    DEFAULT_QUIET_MS,
    DEFAULT_SOCKET_TIMEOUT_SECONDS,
    EMBEDDED_REDIS_SOCKET_NAME,
    ENV_PREFIX,
    KEY_PREFIX_PATTERN,
    MAX_QUEUE_SHARDS,
    MAX_SOCKET_TIMEOUT_SECONDS,
    MAX_TEXT_BYTES,
    MAX_TEXT_BYTES_LIMIT,
    MIN_TEXT_BYTES_LIMIT,
    ConsolidationSettings,
    LaneSettings,
    QueuePolicy,
    QueueSettings,
    SinkSettings,
    SourceSettings,
    StoreSettings,
    StructuredMethod,
)

#: The file's name, looked up in the working directory of the process (as docker compose and
#: most process managers look up theirs), never in a parent folder.
ENV_FILE: Final = ".env"


def env_file_values(path: Path | None = None) -> dict[str, str]:
    """The ``MEMWORKER_*`` variables the file at ``path`` (``./.env`` by default) sets, by
    name as written; empty when there is no such file. A line without a value is skipped."""
    path = Path(ENV_FILE) if path is None else path
    if not path.is_file():
        return {}
    from dotenv import dotenv_values

    prefix = ENV_PREFIX.lower()
    return {
        name: value
        for name, value in dotenv_values(path, encoding="utf-8").items()
        if value is not None and name.lower().startswith(prefix)
    }


_Slice = TypeVar("_Slice")

#: Each field of the queue policy (:class:`~worker.types.QueuePolicy`), from the setting
#: that sets it and the factor to the policy's unit (seconds to ms; counts as they are).
QUEUE_POLICY_SETTINGS: Final = {
    "quiet": ("debounce_seconds", 1000),
    "max_wait": ("max_wait_seconds", 1000),
    "max_pending": ("max_pending_per_namespace", 1),
    "shards": ("queue_shards", 1),
}


def _slice(kind: type[_Slice], settings: Settings) -> _Slice:
    """``kind`` filled from ``settings``, one attribute per field of the same name."""
    return kind(**{f.name: getattr(settings, f.name) for f in fields(kind)})  # type: ignore[arg-type]


class _EnvFileSource(EnvSettingsSource):
    """The ``MEMWORKER_*`` lines of ``./.env`` (:mod:`worker.settings`), read exactly as the
    same variables in the environment are: pydantic-settings' own dotenv source would refuse
    every other line of the file (a provider's API key) under ``extra="forbid"``."""

    def _load_env_vars(self) -> dict[str, str | None]:
        return {name.lower(): value for name, value in env_file_values().items()}


class ClientSettings(BaseSettings):
    """The settings the chat service's client reads: where the queue's Redis is and how to
    talk to it. :class:`Settings` extends it with every field of the worker, so each field is
    declared once; a client reads only these variables, so it never fails on a setting that
    only workers use.

    Environment variables use the ``MEMWORKER_`` prefix, e.g. ``MEMWORKER_REDIS_URL``; a
    variable not in the environment is looked up in ``./.env`` (:mod:`worker.settings`).
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    #: False for settings from constructor arguments only (:func:`explicit_settings`).
    _reads_environment: ClassVar[bool] = True

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then the environment, then ``./.env``, then the defaults; arguments alone
        where the class reads no environment (a library constructor's settings)."""
        if not cls._reads_environment:
            return (init_settings,)
        return (init_settings, env_settings, _EnvFileSource(settings_cls), file_secret_settings)

    redis_url: str | None = Field(
        default=None,
        description="Redis for the queue (and the Celery broker unless MEMWORKER_BROKER_URL is "
        "set): redis://, rediss://, unix://, or redis+cluster://host1:6379,host2:6379 for a "
        "Redis Cluster. Unset: the embedded server that `memworker run` starts in the data "
        "directory. The chat-side client applies only these URL options: db and, for "
        "rediss://, ssl_cert_reqs, ssl_ca_certs, ssl_certfile, ssl_keyfile, "
        "ssl_check_hostname; it refuses any other.",
    )
    data_dir: Path = Field(
        default=DEFAULT_DATA_DIR,
        description="Embedded mode's home: redis socket, SQLite file, files sink, beat heartbeat.",
    )
    key_prefix: str = Field(
        default=DEFAULT_KEY_PREFIX,
        pattern=KEY_PREFIX_PATTERN,
        description="Prefix of every Redis key, so several deployments can share one Redis.",
    )
    queue_shards: Annotated[int, Field(ge=1, le=MAX_QUEUE_SHARDS)] = Field(
        default=DEFAULT_QUEUE_SHARDS,
        description="The queue is split into this many hash-tagged shards, each one Redis "
        "Cluster slot, so it spreads over up to this many cluster primaries and no sorted set "
        "gets hot. Each sweep runs one claim script per shard (pipelined, one round trip per "
        "node), so fewer shards make idle sweeps cheaper. Workers and chat hosts must agree; "
        "workers refuse to start with a new count while the queue holds anything.",
    )
    max_text_bytes: Annotated[int, Field(ge=MIN_TEXT_BYTES_LIMIT, le=MAX_TEXT_BYTES_LIMIT)] = Field(
        default=MAX_TEXT_BYTES,
        description="Largest candidate text in UTF-8 bytes.",
    )
    socket_timeout_seconds: Annotated[float, Field(gt=0, le=MAX_SOCKET_TIMEOUT_SECONDS)] = Field(
        default=DEFAULT_SOCKET_TIMEOUT_SECONDS,
        description="Hot-path Redis socket/connect timeout: Redis trouble becomes a fast "
        "QueueUnavailable instead of a hung chat reply.",
    )
    allow_evicting_redis: bool = Field(
        default=False,
        description="Start workers even though Redis runs an allkeys-* maxmemory-policy. "
        "Eviction silently drops queued candidates (the queue epoch detects it afterwards), so "
        "this is an explicit, informed override; the default refuses to start.",
    )

    @property
    def embedded_redis_socket(self) -> Path:
        return self.data_dir / EMBEDDED_REDIS_SOCKET_NAME

    @classmethod
    def of(cls, settings: ClientSettings) -> ClientSettings:
        """The client's fields of ``settings`` (the worker's :class:`Settings`, or a client's)."""
        if type(settings) is ClientSettings:
            return settings
        return ClientSettings.model_construct(**{f: getattr(settings, f) for f in CLIENT_FIELDS})


#: The client's fields, in declaration order.
CLIENT_FIELDS: Final = tuple(ClientSettings.model_fields)


class Settings(ClientSettings):
    """Every knob of memworker, with its default and the reason for it: the client's fields
    (:class:`ClientSettings`) and the worker's, read the same way (``MEMWORKER_*`` variables,
    then ``./.env``).
    """

    # --- where things live -------------------------------------------------------------------
    broker_url: str | None = Field(
        default=None,
        description="Celery broker (e.g. amqp://user:pass@rabbitmq:5672/memworker). Unset: the "
        "queue's Redis; required when that is a cluster. Task queues are named "
        "`<key_prefix>.<lane>`, so deployments sharing a broker never consume each other's "
        "tasks.",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the memory store. Unset: SQLite in the data directory. "
        "Production: postgresql+psycopg://…",
    )

    # --- the debounced queue -----------------------------------------------------------------
    debounce_seconds: Annotated[float, Field(gt=0)] = Field(
        default=DEFAULT_QUIET_MS / 1000,
        description="Quiet period: a namespace is due this long after its last candidate, so a "
        "burst of turns in one conversation becomes one batch. The workers' value rules: they "
        "write it into Redis at start.",
    )
    max_wait_seconds: Annotated[float, Field(gt=0)] = Field(
        default=DEFAULT_MAX_WAIT_MS / 1000,
        description="Cap on debouncing: a namespace is due at most this long after its first "
        "pending candidate, so a chatty user still gets consolidated. The workers' value rules "
        "(written into Redis at start).",
    )
    lease_seconds: Annotated[float, Field(gt=0)] = Field(
        default=120.0,
        description="How long a claimed batch is reserved for one worker; heartbeats extend it. "
        "A crashed worker's batch is re-claimable after this long.",
    )
    max_attempts: Annotated[int, Field(ge=1)] = Field(
        default=5,
        description="Failed (or abandoned) attempts before a namespace's batch is dead-lettered.",
    )
    retry_backoff_seconds: Annotated[float, Field(ge=0)] = Field(
        default=10.0,
        description="First retry delay after a failed batch; doubles per attempt.",
    )
    max_batch: Annotated[int, Field(ge=1, le=10_000)] = Field(
        default=200,
        description="Most candidates one claim covers; bounds a merge's memory and prompt size.",
    )
    claim_limit: Annotated[int, Field(ge=1, le=10_000)] = Field(
        default=100,
        description="Most namespaces one sweep claims per shard.",
    )
    max_pending_per_namespace: Annotated[int, Field(ge=1)] = Field(
        default=DEFAULT_MAX_PENDING,
        description="Backpressure: enqueue refuses (BacklogFull) past this many pending "
        "candidates in one namespace, so one runaway client cannot fill Redis. The workers' value "
        "rules (written into Redis at start).",
    )
    sweep_interval_seconds: Annotated[float, Field(gt=0)] = Field(
        default=2.0,
        description="How often beat sweeps for due namespaces; bounds the extra debounce lag.",
    )
    beat_lock_seconds: Annotated[float, Field(gt=1, le=3600)] = Field(
        default=45.0,
        description="Lifetime of the single-beat lock in Redis. Only the beat holding it "
        "schedules; a standby takes over within this (plus one loop) after the holder dies.",
    )

    # --- deadlines and outages ----------------------------------------------------------------
    database_connect_timeout_seconds: Annotated[float, Field(gt=0, le=300)] = Field(
        default=5.0,
        description="PostgreSQL connect timeout (and the wait for a pooled connection): a "
        "reachable server answers in milliseconds, so this only trips when it is down.",
    )
    database_timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=30.0,
        description="Longest PostgreSQL transaction: the server's statement_timeout, and (5 s "
        "later) a client-side deadline that cuts off a server or network that stopped "
        "answering. A batch commits in milliseconds; raise it only for huge imports.",
    )
    sink_timeout_seconds: Annotated[float, Field(gt=0, le=600)] = Field(
        default=10.0,
        description="Longest call to a sink (LangGraph store): a hung sink holds one deliverer "
        "this long, then the row is retried and the sink's breaker counts a failure.",
    )
    max_merge_seconds: Annotated[float, Field(gt=0)] = Field(
        default=900.0,
        description="Hard cap on one merge. Past it the heartbeat stops extending the lease, "
        "so another worker takes the namespace over once the lease ends, and the stuck "
        "worker's late commit is refused. Keep it above the slowest model call you accept.",
    )
    outage_retry_max_seconds: Annotated[float, Field(gt=0)] = Field(
        default=120.0,
        description="Longest wait between retries of a batch that failed because a dependency "
        "(database, Redis, sink, model provider) was unreachable. Such failures never count "
        "toward max_attempts, so an outage heals by itself once the dependency is back.",
    )

    # --- consolidation -------------------------------------------------------------------------
    consolidator: str = Field(
        default="worker.consolidation.rules:RulesConsolidator",
        description="Dotted path `package.module:Class` of the consolidator. When `model` is "
        "set and this is left at its default, the LLM agent is used.",
    )
    model: str | None = Field(
        default=None,
        description="LangChain chat model as `provider:model` (init_chat_model); enables the "
        "LLM consolidation agent.",
    )
    model_token_budget: Annotated[int, Field(ge=512)] = Field(
        default=12_000,
        description="Prompt tokens per LLM call; bigger batches are split and merged serially.",
    )
    model_structured_method: StructuredMethod = Field(
        default="auto",
        description="How the LLM agent asks for its structured plan: `function_calling` "
        "(a forced tool call), `json_schema` (constrained JSON), `json_mode` (JSON object, "
        "schema in the prompt), or `auto`: json_schema for OpenAI's own API and Ollama, "
        "function_calling for everything else (OpenAI-compatible servers behind "
        "`model_base_url` differ: llama.cpp answers json_schema with HTTP 500), falling back "
        "once, logged, to the other when the server rejects the first.",
    )
    model_base_url: str | None = Field(
        default=None,
        description="Base URL of the model server, passed to the provider as `base_url`: with "
        "provider `openai`, any OpenAI-compatible server (the tested ones are listed in the "
        "README's model section).",
    )
    model_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra keyword arguments for the provider's chat model class, as a JSON "
        'object, e.g. `{"api_key": "none", "temperature": 0}`; they override the ones above.',
    )
    model_timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=120.0,
        description="Deadline on every model call. A batch holds its namespace's lease (kept "
        "alive by heartbeats) while it waits, so a provider that never answers would stall that "
        "user's memory and a worker slot; past the deadline the call fails as ModelUnavailable "
        "and the batch is retried with backoff.",
    )
    file_budget_bytes: Annotated[int, Field(ge=256)] = Field(
        default=8192,
        description="Largest rendered memory file; past it the file keeps the keyed, most "
        "confirmed, most recent entries and ends with one line counting the rest, which stay "
        "active and reachable with search_memory.",
    )
    max_removals_per_run: Annotated[int, Field(ge=0)] = Field(
        default=20,
        description="Guard rail: a plan that invalidates more entries than this is rejected.",
    )
    sensitive_paths: list[str] = Field(
        default_factory=list,
        description="Memory paths whose changes wait for operator approval.",
    )

    # --- search ------------------------------------------------------------------------------
    embeddings: str | None = Field(
        default=DEFAULT_EMBEDDINGS,
        description="Embedding model as `provider:model` (default `local:multilingual-e5-small`, "
        "shipped with the worker; or `openai:text-embedding-3-small`, `ollama:nomic-embed-text`, "
        "…): merging decides restatements and new values by meaning, and search fuses dense "
        "vectors with full text. `none`: merging by words and keys only, full-text search only.",
    )
    embeddings_timeout_seconds: Annotated[float, Field(gt=0, le=600)] = Field(
        default=30.0,
        description="Deadline on all the embedding work after one commit (every request, retry "
        "and wait between retries), and on one query. Past it the entries wait for the next "
        "commit and a query falls back to full-text search; commits never wait on embeddings.",
    )
    text_search_config: str = Field(
        default="english",
        pattern=r"^[A-Za-z_][A-Za-z0-9_.]{0,62}$",
        description="PostgreSQL text-search configuration of the search index (stemming and "
        "stopwords of one language; `simple` for none). Every entry is also indexed "
        "language-neutrally, and Chinese, Japanese, Korean and Thai as character n-grams. "
        "Changing it rebuilds the index when a worker next opens the store. SQLite ignores it.",
    )
    # --- scheduling, sinks, sources, metrics -------------------------------------------------
    schedules_dir: Path | None = Field(
        default=None,
        description="Folder of schedule TOML files. Unset: the package's bundled defaults.",
    )
    sinks: list[str] = Field(
        default_factory=lambda: ["files"],
        description="Sinks to publish committed versions to (a JSON list): `files`, "
        "`langgraph`, or a dotted path `package.module:Class`.",
    )
    files_dir: Path | None = Field(
        default=None,
        description="Root of the files sink. Unset: `<data_dir>/files`.",
    )
    langgraph_url: str | None = Field(
        default=None,
        description="LangGraph API server for the store sink and the thread-scan source.",
    )
    langgraph_api_key: str | None = Field(default=None, description="API key for that server.")
    store_namespace: tuple[str, ...] = Field(
        default=("{assistant_id}", "{user_id}", "memories"),
        description="LangGraph store namespace template of user memory (fields `{user_id}`, "
        "`{assistant_id}`, `{org_id}`, `{scope}`, one per part). The three templates are checked "
        "at start: two namespaces that could share a tuple (or prefix) refuse to start.",
    )
    store_namespace_agent: tuple[str, ...] = Field(
        default=("{assistant_id}", "_shared", "memories"),
        description="LangGraph store namespace template of agent (assistant-shared) memory.",
    )
    store_namespace_org: tuple[str, ...] = Field(
        default=("{org_id}", "_org", "memories"),
        description="LangGraph store namespace template of org memory: one tuple per org.",
    )
    store_routes: dict[str, str] = Field(
        default_factory=dict,
        description="Per scope (`user`, `agent`, `org`), the memory folder stripped from paths to "
        'make store keys (default `/memories/`): `{"org": "/memories/policies/"}` keys '
        "`/memories/policies/compliance.md` as `/compliance.md`.",
    )
    direct_edits: bool = Field(
        default=False,
        description="Agents edit the memory files memworker publishes to the LangGraph store "
        "(the deepagents helper's `direct_edits=True`): each consolidation of a namespace first "
        "reads its published files back (one read each, 2 s in all) and merges what agents "
        "changed. Off: an edit is absorbed when the next delivery or source scan meets it.",
    )
    thread_assistant_key: str | None = Field(
        default=None,
        description="Thread-metadata key naming the assistant of a scanned thread (e.g. "
        "`graph_id`, which the LangGraph server sets): its exchanges go to the per-assistant "
        "namespace, as the capture middleware's `assistant_id` does. Unset: per user only.",
    )
    thread_owner_key: str = Field(
        default="owner",
        pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$",
        description="Thread-metadata key naming a scanned thread's owner, the user its "
        "exchanges are filed under. It must be a field no client can set: the one the LangGraph "
        "server's auth handler records on every thread it creates or updates (LangGraph's "
        "owner-only handler writes `owner`), or one the chat service alone writes. A thread "
        "without it is set aside and counted; its `user_id` metadata (client-written) may only "
        "repeat it.",
    )
    thread_org_key: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$",
        description="Thread-metadata key naming the owner's organisation, written the same way "
        "as the owner (e.g. `owner_org` from the identity's org claim): its exchanges go to "
        "`org:<org>:user:<owner>`. Unset: no orgs, and user ids must be unique across the "
        "deployment.",
    )
    inbox_route: str = Field(
        default="/memories/inbox/",
        description="Folder of user memory that agents may write freely; the inbox source merges "
        "what they write there and removes it.",
    )
    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Port the worker serves Prometheus metrics on; unset disables it.",
    )
    # --- the operator console (`memworker console`) ------------------------------------------
    console_user: str = Field(
        default="admin",
        min_length=1,
        max_length=200,
        pattern=r"^[^:\s]+$",
        description="User name of the read-only operator console's HTTP basic auth.",
    )
    console_password: SecretStr | None = Field(
        default=None,
        description="Password of the operator console (`memworker console`); unset, the console "
        "refuses to start.",
    )

    @field_validator("sensitive_paths")
    @classmethod
    def _paths_under_route(cls, value: list[str]) -> list[str]:
        from worker.types import normalise_path

        return [normalise_path(p) for p in value]

    @model_validator(mode="after")
    def _wait_covers_debounce(self) -> Settings:
        if self.max_wait_seconds < self.debounce_seconds:
            raise ValueError(
                f"max_wait_seconds ({self.max_wait_seconds}) must be >= debounce_seconds "
                f"({self.debounce_seconds})"
            )
        return self

    # --- derived ---------------------------------------------------------------------------
    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "memworker.sqlite3"

    @property
    def effective_database_url(self) -> str:
        """The configured database, or SQLite in the data directory."""
        return self.database_url or f"sqlite:///{self.sqlite_path}"

    @property
    def effective_files_dir(self) -> Path:
        return self.files_dir or (self.data_dir / "files")

    @property
    def queue_policy(self) -> QueuePolicy:
        """The debounce and backlog policy these settings give the queue (the workers write
        it into Redis; see :mod:`worker.types`)."""
        return QueuePolicy(
            **{
                field: round(getattr(self, setting) * factor)
                for field, (setting, factor) in QUEUE_POLICY_SETTINGS.items()
            }
        )

    # --- slices: what the edge hands each layer ----------------------------------------------
    @property
    def for_queue(self) -> QueueSettings:
        return _slice(QueueSettings, self)

    @property
    def for_store(self) -> StoreSettings:
        return _slice(StoreSettings, self)

    @property
    def for_consolidation(self) -> ConsolidationSettings:
        return _slice(ConsolidationSettings, self)

    @property
    def for_sinks(self) -> SinkSettings:
        return _slice(SinkSettings, self)

    @property
    def for_sources(self) -> SourceSettings:
        return _slice(SourceSettings, self)

    @property
    def for_lanes(self) -> LaneSettings:
        return _slice(LaneSettings, self)


def load_settings(**overrides: object) -> Settings:
    """Build settings from the environment (the edge), turning validation errors into one line."""
    from pydantic import ValidationError

    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = "; ".join(
            f"MEMWORKER_{'_'.join(str(p) for p in e['loc']).upper()}: {e['msg']}"
            for e in exc.errors()
        )
        raise ConfigurationError(f"invalid configuration: {problems}") from None


class _ExplicitSettings(Settings):
    """Settings from constructor arguments only: a library constructor reads no environment."""

    _reads_environment: ClassVar[bool] = False


class _ExplicitClientSettings(ClientSettings):
    """The client's settings from constructor arguments only."""

    _reads_environment: ClassVar[bool] = False


def explicit_settings(**values: Any) -> Settings:
    """Settings from ``values`` alone (pydantic's ``ValidationError`` for a bad or unknown one)."""
    return _ExplicitSettings(**values)


def client_settings(url: str | None = None, **overrides: Any) -> ClientSettings:
    """The settings a client is built with.

    With a ``url``: that URL and ``overrides``, the environment unread. Without one: the
    client's ``MEMWORKER_*`` variables (the environment, then ``./.env``), ``overrides`` taking
    precedence, so the client finds the same Redis as the worker. ``overrides`` may name any
    field of :class:`Settings` (the worker's fields are checked, then left out); a bad value or
    an unknown name raises :class:`ConfigurationError` naming the field.

    >>> s = client_settings("redis://cache:6379/0", key_prefix="chat")
    >>> (s.redis_url, s.key_prefix, s.queue_shards)
    ('redis://cache:6379/0', 'chat', 256)
    >>> try:
    ...     client_settings("redis://cache:6379/0", debounce_seconds=0)
    ... except ConfigurationError as exc:
    ...     print(exc)
    invalid client settings: debounce_seconds: Input should be greater than 0
    """
    from pydantic import ValidationError

    given = dict(overrides) | ({} if url is None else {"redis_url": url})
    own = {name: value for name, value in given.items() if name in CLIENT_FIELDS}
    try:
        client = (ClientSettings if url is None else _ExplicitClientSettings)(**own)
        if len(own) < len(given):
            _ExplicitSettings(**(dict(client) | given))
    except ValidationError as exc:
        problems = "; ".join(_problem(e, from_env=url is None) for e in exc.errors())
        raise ConfigurationError(f"invalid client settings: {problems}") from None
    return ClientSettings.of(client)


def _problem(error: Any, *, from_env: bool) -> str:
    field = ".".join(str(p) for p in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    if not field:
        return message
    where = f" (argument or MEMWORKER_{field.upper()})" if from_env else ""
    return f"{field}: {message}{where}"
