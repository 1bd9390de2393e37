"""Source cursors: how far a source (e.g. the thread scan) got, per key (e.g. per thread)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.store.engine import dialect_insert
from worker.store.schema import source_cursors
from worker.store.sqltypes import require_utc


def get_cursor(conn: Connection, source: str, key: str) -> str | None:
    """The stored value, or None when the source never recorded this key."""
    value: str | None = conn.execute(
        sa.select(source_cursors.c.value).where(
            source_cursors.c.source == source, source_cursors.c.key == key
        )
    ).scalar_one_or_none()
    return value


def set_cursor(
    conn: Connection, source: str, key: str, value: str, *, namespace: str | None, now: datetime
) -> None:
    """Insert or overwrite a cursor; ``namespace`` ties it to a user so an erase finds it."""
    now = require_utc(now, "now")
    insert = dialect_insert(conn, source_cursors).values(
        source=source, key=key, value=value, namespace=namespace, updated_at=now
    )
    set_: dict[str, object] = {"value": value, "updated_at": now}
    if namespace is not None:
        set_["namespace"] = namespace
    conn.execute(insert.on_conflict_do_update(index_elements=["source", "key"], set_=set_))


def list_cursors(
    conn: Connection, source: str, *, limit: int, after: str = ""
) -> list[tuple[str, str]]:
    """Up to ``limit`` (key, value) pairs of ``source`` with keys after ``after``, key order
    (a page; pass the last key back as ``after`` for the next)."""
    rows = conn.execute(
        sa.select(source_cursors.c.key, source_cursors.c.value)
        .where(source_cursors.c.source == source, source_cursors.c.key > after)
        .order_by(source_cursors.c.key)
        .limit(limit)
    ).all()
    return [(str(k), str(v)) for k, v in rows]
