"""The store's tables, their column types, and the migrations that build them.

Datetimes go in and come out timezone-aware in UTC on both databases. PostgreSQL stores
``timestamptz``; SQLite has no datetime type, so values are stored as naive UTC text in one
fixed format, which also makes lexicographic comparison in SQL (``next_attempt_at <= :now``)
equal to time comparison.

>>> from datetime import UTC, datetime, timedelta, timezone
>>> t = UTCDateTime()
>>> t.process_bind_param(datetime(2025, 1, 1, 12, tzinfo=timezone(timedelta(hours=2))), None)
datetime.datetime(2025, 1, 1, 10, 0, tzinfo=datetime.timezone.utc)

Every namespace-owned table hangs off ``namespaces.id``, so isolation is one indexed column and
erasing a user is a handful of ``DELETE … WHERE namespace_id IN (…)``. The migrations create
exactly these tables (a test compares); the search index's dialect-specific tables are in
:mod:`worker.store.search_text` instead.

>>> sorted(t.name for t in metadata.sorted_tables)[:3]
['approvals', 'candidate_ledger', 'entries']

Migrations run from code, with no ``alembic.ini``: ``script_location`` is a package resource
(``worker.store:migrations``), so upgrades work from an installed wheel as from a checkout.

>>> from worker.store.engine import create_store_engine
>>> engine = create_store_engine("sqlite://")
>>> upgrade(engine); current_revision(engine) == head_revision()
True
>>> engine.dispose()
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime
from importlib import resources
from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.types import TypeEngine

from worker.errors import SchemaOutOfDate, StoreUnavailable
from worker.types import MAX_ID_LENGTH, MAX_PATH_LENGTH, require_utc


class UTCDateTime(sa.TypeDecorator[datetime]):
    """A datetime column that only accepts aware datetimes and always returns UTC-aware ones."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(
        self, value: datetime | None, dialect: Dialect | None
    ) -> datetime | None:
        if value is None:
            return None
        utc = require_utc(value, "a datetime column value")
        if dialect is not None and dialect.name == "sqlite":
            # SQLite's DATETIME storage drops the offset anyway; make that explicit: naive UTC.
            return utc.replace(tzinfo=None)
        return utc

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class JSONDocument(sa.TypeDecorator[Any]):
    """JSON everywhere; JSONB on PostgreSQL so the documents are compact and indexable if
    needed. PostgreSQL's type is looked up when a PostgreSQL connection first uses the column,
    so a store on SQLite never imports that dialect."""

    impl = sa.JSON
    cache_ok = True
    #: As ``sa.JSON``: a Python ``None`` is stored as JSON ``null``, not SQL ``NULL``.
    should_evaluate_none = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(sa.JSON())


JSONType: TypeEngine[Any] = JSONDocument()

#: Surrogate keys: BIGINT on PostgreSQL (the ledger grows without bound); INTEGER on SQLite,
#: where only ``INTEGER PRIMARY KEY`` is the auto-incrementing rowid.
BigId: TypeEngine[int] = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


#: ``org:<org>:user:<id>:<assistant>`` is the longest namespace key: three ids plus the scopes
#: and colons.
NAMESPACE_KEY_LENGTH: Final = 3 * MAX_ID_LENGTH + 16
#: ``operator:<name>`` and the like; generous, since it is display text.
AUTHOR_LENGTH: Final = 200
#: Sink names are short identifiers or dotted ``package.module:Class`` paths.
SINK_LENGTH: Final = 200
#: Schedule names come from TOML files: short identifiers.
SCHEDULE_LENGTH: Final = 200
#: Short enum-like strings (outcomes, statuses, triggers, scopes).
CODE_LENGTH: Final = 32

#: One naming convention so constraint names are stable across dialects and migrations.
metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def _id() -> sa.Column[int]:
    return sa.Column("id", BigId, primary_key=True, autoincrement=True)


def _namespace_fk() -> sa.Column[int]:
    return sa.Column(
        "namespace_id", BigId, sa.ForeignKey("namespaces.id", ondelete="CASCADE"), nullable=False
    )


namespaces = sa.Table(
    "namespaces",
    metadata,
    _id(),
    sa.Column("key", sa.String(NAMESPACE_KEY_LENGTH), nullable=False, unique=True),
    sa.Column("scope", sa.String(CODE_LENGTH), nullable=False),
    sa.Column("user_id", sa.String(MAX_ID_LENGTH), nullable=True, index=True),
    sa.Column("assistant_id", sa.String(MAX_ID_LENGTH), nullable=True),
    sa.Column("org_id", sa.String(MAX_ID_LENGTH), nullable=True),
    # The fence: every commit moves it by one, guarded by ``WHERE version = :expected``.
    sa.Column("version", sa.Integer, nullable=False),
    # ``<queue epoch>/<stream id>`` of the last candidate whose batch is committed (a bare
    # stream id from before epochs: compared with nothing, so the ledger alone decides).
    sa.Column("applied_position", sa.String(64), nullable=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)

#: The fence of erased namespaces (see :mod:`worker.store.commit`): the erased row's version
#: plus one, keyed by a one-way digest of the key (an erased user's id is stored nowhere). The
#: first commit after the erase starts from it and deletes it.
namespace_fences = sa.Table(
    "namespace_fences",
    metadata,
    sa.Column("digest", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("erased_at", UTCDateTime, nullable=False),
)

runs = sa.Table(
    "runs",
    metadata,
    _id(),
    sa.Column("trigger", sa.String(CODE_LENGTH), nullable=False),
    # The key, not a foreign key: failed runs of a namespace with no commit yet are recorded too.
    sa.Column("namespace", sa.String(NAMESPACE_KEY_LENGTH), nullable=True, index=True),
    sa.Column("schedule", sa.String(SCHEDULE_LENGTH), nullable=True),
    sa.Column("tick", UTCDateTime, nullable=True),
    sa.Column("window_start", UTCDateTime, nullable=True),
    sa.Column("window_end", UTCDateTime, nullable=True),
    sa.Column("started_at", UTCDateTime, nullable=False),
    sa.Column("finished_at", UTCDateTime, nullable=True),
    sa.Column("outcome", sa.String(CODE_LENGTH), nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("candidates", sa.Integer, nullable=False, server_default="0"),
    sa.Column("counts", JSONType, nullable=False),
    sa.Column("llm_calls", sa.Integer, nullable=False, server_default="0"),
    sa.Column("prompt_tokens", sa.Integer, nullable=False, server_default="0"),
    sa.Column("completion_tokens", sa.Integer, nullable=False, server_default="0"),
)

memory_files = sa.Table(
    "memory_files",
    metadata,
    _id(),
    _namespace_fk(),
    sa.Column("path", sa.String(MAX_PATH_LENGTH), nullable=False),
    sa.Column("current_version", sa.Integer, nullable=False),
    # Written by an operator (``put_file``): read-only for the consolidator.
    sa.Column("operator_owned", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("modified_at", UTCDateTime, nullable=False),
    sa.UniqueConstraint("namespace_id", "path"),
)

file_versions = sa.Table(
    "file_versions",
    metadata,
    _id(),
    sa.Column(
        "file_id", BigId, sa.ForeignKey("memory_files.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("version", sa.Integer, nullable=False),
    # The namespace version this file version was committed at: rollback restores the entries
    # that were active then.
    sa.Column("namespace_version", sa.Integer, nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("diff", sa.Text, nullable=False),
    sa.Column("run_id", BigId, sa.ForeignKey("runs.id"), nullable=True),
    sa.Column("author", sa.String(AUTHOR_LENGTH), nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.UniqueConstraint("file_id", "version"),
)

entries = sa.Table(
    "entries",
    metadata,
    # Entry ids are made by the consolidation code (deterministic); scoping the key by namespace
    # means two namespaces can never collide on, or see, each other's entries.
    sa.Column(
        "namespace_id",
        BigId,
        sa.ForeignKey("namespaces.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("id", sa.String(MAX_ID_LENGTH), primary_key=True),
    sa.Column("path", sa.String(MAX_PATH_LENGTH), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("key", sa.String(MAX_ID_LENGTH), nullable=True),
    sa.Column("valid_from", UTCDateTime, nullable=False),
    sa.Column("invalid_at", UTCDateTime, nullable=True),
    sa.Column("invalid_reason", sa.Text, nullable=True),
    sa.Column("superseded_by", sa.String(MAX_ID_LENGTH), nullable=True),
    sa.Column("confirmations", sa.Integer, nullable=False),
    sa.Column("candidate_ids", JSONType, nullable=False),
    sa.Column("trace_ids", JSONType, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("last_confirmed_at", UTCDateTime, nullable=False),
    # Namespace versions that added / invalidated the entry (for rollback).
    sa.Column("added_version", sa.Integer, nullable=False),
    sa.Column("invalidated_version", sa.Integer, nullable=True),
    sa.Index(None, "namespace_id", "invalid_at"),
)

#: Name of an embedding model (the ``provider:model`` string it was configured with).
MODEL_LENGTH: Final = 200

#: Dense vectors of entries (optional embeddings): float32 bytes, computed by the worker after
#: the commit that wrote the entry, tagged with the model and dimension that made them. A
#: vector whose model is not the configured one is ignored by search and re-embedded.
entry_vectors = sa.Table(
    "entry_vectors",
    metadata,
    sa.Column("namespace_id", BigId, primary_key=True),
    sa.Column("entry_id", sa.String(MAX_ID_LENGTH), primary_key=True),
    sa.Column("model", sa.String(MODEL_LENGTH), nullable=False),
    sa.Column("dim", sa.Integer, nullable=False),
    # A digest of the text embedded: a vector is only stored for text the entry still has.
    sa.Column("text_digest", sa.String(64), nullable=False),
    sa.Column("vector", sa.LargeBinary, nullable=False),
    sa.Column("embedded_at", UTCDateTime, nullable=False),
    sa.ForeignKeyConstraint(
        ["namespace_id", "entry_id"], ["entries.namespace_id", "entries.id"], ondelete="CASCADE"
    ),
    # A namespace's vectors of one model, counted and dated without reading the vectors.
    sa.Index(None, "namespace_id", "model", "embedded_at"),
)

candidate_ledger = sa.Table(
    "candidate_ledger",
    metadata,
    _id(),
    _namespace_fk(),
    sa.Column("candidate_id", sa.String(MAX_ID_LENGTH), nullable=False),
    sa.Column("trace_id", sa.String(MAX_ID_LENGTH), nullable=False),
    sa.Column("outcome", sa.String(CODE_LENGTH), nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("entry_id", sa.String(MAX_ID_LENGTH), nullable=True),
    sa.Column("run_id", BigId, sa.ForeignKey("runs.id"), nullable=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    # Provenance (migration 0008; None on older rows): where and when the candidate was said,
    # the plan operation that consumed it, the revision its batch committed.
    sa.Column("source", sa.String(CODE_LENGTH), nullable=True),
    sa.Column("thread_id", sa.String(MAX_ID_LENGTH), nullable=True),
    sa.Column("said_at", UTCDateTime, nullable=True),
    sa.Column("operation", sa.String(CODE_LENGTH), nullable=True),
    sa.Column("revision", sa.Integer, nullable=True),
    # The idempotency guarantee: a candidate is consumed at most once per namespace.
    sa.UniqueConstraint("namespace_id", "candidate_id"),
    # `memworker candidate ID` finds a candidate without knowing its namespace.
    sa.Index(None, "candidate_id"),
)

approvals = sa.Table(
    "approvals",
    metadata,
    _id(),
    _namespace_fk(),
    sa.Column("path", sa.String(MAX_PATH_LENGTH), nullable=False),
    sa.Column("operation", JSONType, nullable=False),
    sa.Column("candidate_ids", JSONType, nullable=False),
    sa.Column("status", sa.String(CODE_LENGTH), nullable=False, index=True),
    sa.Column("run_id", BigId, sa.ForeignKey("runs.id"), nullable=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("decided_at", UTCDateTime, nullable=True),
    sa.Column("decided_by", sa.String(AUTHOR_LENGTH), nullable=True),
    # Operators approve by id: an id is never handed out again (SQLite reuses the largest
    # rowid after a delete without AUTOINCREMENT; PostgreSQL's identity never does).
    sqlite_autoincrement=True,
)

#: Each namespace's erase generation, under the fence's digest of its key: bumped by every
#: erase and never deleted, so "erased since this delivery was made" stays true after the user
#: returns (a re-enrolled namespace's row and fence are gone; its generation is not).
erase_generations = sa.Table(
    "erase_generations",
    metadata,
    sa.Column("digest", sa.String(64), primary_key=True),
    sa.Column("generation", sa.Integer, nullable=False),
)

outbox = sa.Table(
    "outbox",
    metadata,
    _id(),
    # NULL for an erase tombstone: the version it would point to is gone.
    sa.Column(
        "file_version_id",
        BigId,
        sa.ForeignKey("file_versions.id", ondelete="CASCADE"),
        nullable=True,
    ),
    sa.Column("sink", sa.String(SINK_LENGTH), nullable=False),
    sa.Column("kind", sa.String(CODE_LENGTH), nullable=False),  # publish | erase
    # Denormalised item identity, so tombstones outlive the rows and the newest row per
    # (sink, namespace, path) wins without joins.
    sa.Column("namespace", sa.String(NAMESPACE_KEY_LENGTH), nullable=False),
    sa.Column("path", sa.String(MAX_PATH_LENGTH), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("next_attempt_at", UTCDateTime, nullable=False),
    sa.Column("delivered_at", UTCDateTime, nullable=True),
    sa.Column("superseded_by", BigId, nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    # The deliverer attempting this row right now, and until when (see outbox.claim).
    sa.Column("claimed_by", sa.String(SINK_LENGTH), nullable=True),
    sa.Column("claim_expires_at", UTCDateTime, nullable=True),
    # A failed or abandoned sink call may still land until then (a timed-out write the server
    # finishes later); an erase tombstone carries the latest such time of its item and is
    # delivered again once it has passed (see outbox.mark_delivered).
    sa.Column("in_doubt_until", UTCDateTime, nullable=True),
    sa.UniqueConstraint("file_version_id", "sink"),
    sa.Index(None, "sink", "namespace", "path", "id"),
    sa.Index(None, "sink", "delivered_at", "next_attempt_at"),
    # Deliverers mark rows by id long after they read them: an id is never handed out again,
    # or a stale deliverer's mark would land on a newer row (SQLite reuses the largest rowid).
    sqlite_autoincrement=True,
)

#: Each sink's circuit breaker: deliveries failed in a row and until when the sink is left
#: alone. Shared by every deliverer, so a sink that is down is probed, not hammered.
sink_health = sa.Table(
    "sink_health",
    metadata,
    sa.Column("sink", sa.String(SINK_LENGTH), primary_key=True),
    sa.Column("consecutive_failures", sa.Integer, nullable=False, server_default="0"),
    sa.Column("open_until", UTCDateTime, nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("last_failure_at", UTCDateTime, nullable=True),
    sa.Column("last_success_at", UTCDateTime, nullable=True),
    # The namespace (fence digest, never the key) whose delivery failed last: failures of one
    # namespace in a row count once, so one poison item cannot open the breaker for everyone.
    sa.Column("failing_digest", sa.String(64), nullable=True),
)

schedule_ticks = sa.Table(
    "schedule_ticks",
    metadata,
    _id(),
    sa.Column("schedule", sa.String(SCHEDULE_LENGTH), nullable=False),
    sa.Column("tick", UTCDateTime, nullable=False),
    sa.Column("status", sa.String(CODE_LENGTH), nullable=False),  # running | ok | failed
    sa.Column("attempts", sa.Integer, nullable=False, server_default="1"),
    sa.Column("started_at", UTCDateTime, nullable=False),
    sa.Column("finished_at", UTCDateTime, nullable=True),
    sa.Column("window_start", UTCDateTime, nullable=True),
    sa.Column("window_end", UTCDateTime, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    # Duplicate beats and restarts are harmless: one row per scheduled tick.
    sa.UniqueConstraint("schedule", "tick"),
)

schedule_watermarks = sa.Table(
    "schedule_watermarks",
    metadata,
    sa.Column("schedule", sa.String(SCHEDULE_LENGTH), primary_key=True),
    sa.Column("watermark", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)

source_cursors = sa.Table(
    "source_cursors",
    metadata,
    _id(),
    sa.Column("source", sa.String(SINK_LENGTH), nullable=False),
    sa.Column("key", sa.String(NAMESPACE_KEY_LENGTH), nullable=False),
    sa.Column("value", sa.Text, nullable=False),
    # The namespace the cursor's data belongs to, when known, so erasing a user finds it.
    sa.Column("namespace", sa.String(NAMESPACE_KEY_LENGTH), nullable=True, index=True),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.UniqueConstraint("source", "key"),
)


#: Our own version table, so memworker can share a database with an application that uses
#: Alembic itself (whose table is ``alembic_version``).
VERSION_TABLE: Final = "memworker_alembic_version"

SCRIPT_LOCATION: Final = "worker.store:migrations"

#: ``revision = "0002"`` and ``down_revision = "0001"`` lines of a migration script.
_REVISION_LINE: Final = re.compile(
    r'^(down_revision|revision)\s*(?::[^=]*)?=\s*"?([^"\s]*)"?', re.MULTILINE
)

if TYPE_CHECKING:
    from alembic.config import Config

# Alembic is imported only where a migration runs or an unknown revision is explained: every
# process opens the store, and importing it (0.1 s) would make each operator command pay.


def alembic_config(engine: Engine | None = None) -> Config:
    """An in-memory Alembic config; ``engine`` is handed to ``env.py`` through attributes."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    config.set_main_option("version_table", VERSION_TABLE)
    if engine is not None:
        config.attributes["engine"] = engine
    return config


@functools.cache
def head_revision() -> str:
    """The newest migration this code ships: the revision no other script names as its
    ``down_revision``, read from the scripts' text (the same answer as Alembic's
    ``get_current_head``, which a test checks, without importing Alembic)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    versions = resources.files("worker.store").joinpath("migrations", "versions")
    for script in versions.iterdir():
        if not script.name.endswith(".py") or script.name.startswith("_"):
            continue
        for name, value in _REVISION_LINE.findall(script.read_text(encoding="utf-8")):
            if value and value != "None":
                (revisions if name == "revision" else parents).add(value)
    heads = revisions - parents
    assert len(heads) == 1, f"the package ships one line of migrations, found heads {heads}"
    return heads.pop()


def current_revision(engine: Engine) -> str | None:
    """The migration the database is at, or None for a database memworker never touched."""
    # Read the version table directly: Alembic's migration context logs two INFO lines each
    # time it is configured, and every worker process opens the store.
    try:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table(VERSION_TABLE):
                return None
            table = sa.table(VERSION_TABLE, sa.column("version_num", sa.String))
            heads = list(conn.execute(sa.select(table.c.version_num)).scalars())
    except sa.exc.OperationalError as exc:
        raise StoreUnavailable(f"could not reach the database: {exc.orig}") from None
    return str(heads[0]) if len(heads) == 1 else None


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database to ``revision`` (default: the newest); safe to repeat."""
    if revision == "head" and current_revision(engine) == head_revision():
        return  # nothing to do: skip Alembic, whose context logs on every configure
    from alembic import command

    try:
        command.upgrade(alembic_config(engine), revision)
    except sa.exc.OperationalError as exc:
        raise StoreUnavailable(f"could not migrate the database: {exc.orig}") from None


def check_migrated(engine: Engine) -> None:
    """Raise :class:`SchemaOutOfDate` unless the database is at this code's newest migration."""
    current = current_revision(engine)
    head = head_revision()
    if current == head:
        return
    where = engine.url.render_as_string(hide_password=True)
    if current is None:
        raise SchemaOutOfDate(
            f"the database {where} has no memworker schema; run `memworker db upgrade` to create it"
        )
    from alembic.script import ScriptDirectory

    known = {s.revision for s in ScriptDirectory.from_config(alembic_config()).walk_revisions()}
    if current not in known:
        raise SchemaOutOfDate(
            f"the database {where} is at migration {current}, newer than this memworker "
            f"(newest known: {head}); upgrade memworker"
        )
    raise SchemaOutOfDate(
        f"the database {where} is at migration {current}, behind {head}; run `memworker db upgrade`"
    )
