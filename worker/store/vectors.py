"""Dense vectors of entries: which still need one, storing them, reading a namespace's.

Vectors are written by the worker *after* the commit that wrote their entries (embedding is
a network call; it never holds a transaction open), so storing one re-checks, in its own
transaction, that the entry is still active with the very text that was embedded: a vector
for an entry superseded, rewritten or erased meanwhile is dropped, never stored. Erasing a
namespace deletes its vectors in the erase transaction; an entry that stops being active
loses its vector in the transaction that retires it (:func:`discard`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.store.engine import dialect_insert
from worker.store.schema import entries, entry_vectors
from worker.store.search_ddl import STATS
from worker.store.sqltypes import require_utc


@dataclass(frozen=True)
class PendingText:
    """An active entry whose text has no vector from the current model yet."""

    entry_id: str
    text: str


@dataclass(frozen=True)
class Embedded:
    """One vector to store: float32 bytes of ``dim`` values for ``text`` of ``entry_id``."""

    entry_id: str
    text: str
    vector: bytes
    dim: int


def text_digest(text: str) -> str:
    """The digest a vector records of the text it was computed from."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pending(conn: Connection, ns_id: int, model: str, limit: int) -> list[PendingText]:
    """Up to ``limit`` active entries of ``ns_id`` with no vector from ``model`` (none yet, or
    one from another model), oldest first."""
    v = entry_vectors
    rows = conn.execute(
        sa.select(entries.c.id, entries.c.text)
        .select_from(
            entries.outerjoin(
                v, sa.and_(v.c.namespace_id == entries.c.namespace_id, v.c.entry_id == entries.c.id)
            )
        )
        .where(
            entries.c.namespace_id == ns_id,
            entries.c.invalid_at.is_(None),
            sa.or_(v.c.entry_id.is_(None), v.c.model != model),
        )
        .order_by(entries.c.created_at, entries.c.id)
        .limit(limit)
    )
    return [PendingText(r.id, r.text) for r in rows]


def store(
    conn: Connection, ns_id: int, model: str, items: Sequence[Embedded], *, now: datetime
) -> int:
    """Store ``items`` whose entry is still active with the same text; returns how many."""
    now = require_utc(now, "now")
    current = dict(
        conn.execute(
            sa.select(entries.c.id, entries.c.text).where(
                entries.c.namespace_id == ns_id,
                entries.c.id.in_([i.entry_id for i in items]),
                entries.c.invalid_at.is_(None),
            )
        ).all()
    )
    rows = [
        {
            "namespace_id": ns_id,
            "entry_id": i.entry_id,
            "model": model,
            "dim": i.dim,
            "text_digest": text_digest(i.text),
            "vector": i.vector,
            "embedded_at": now,
        }
        for i in items
        if current.get(i.entry_id) == i.text
    ]
    if rows:
        stmt = dialect_insert(conn, entry_vectors)
        keep = ("model", "dim", "text_digest", "vector", "embedded_at")
        conn.execute(
            stmt.on_conflict_do_update(
                index_elements=["namespace_id", "entry_id"],
                set_={k: getattr(stmt.excluded, k) for k in keep},
            ),
            rows,
        )
        _moved(conn, ns_id)
    return len(rows)


def discard(conn: Connection, ns_id: int, active: dict[str, str], entry_ids: Sequence[str]) -> None:
    """Delete the vectors of ``entry_ids`` that are no longer active or whose text changed;
    ``active`` maps the active ones among them to their current text."""
    v = entry_vectors
    stored = conn.execute(
        sa.select(v.c.entry_id, v.c.text_digest).where(
            v.c.namespace_id == ns_id, v.c.entry_id.in_(list(entry_ids))
        )
    ).all()
    stale = [
        r.entry_id
        for r in stored
        if r.entry_id not in active or text_digest(active[r.entry_id]) != r.text_digest
    ]
    if stale:
        conn.execute(sa.delete(v).where(v.c.namespace_id == ns_id, v.c.entry_id.in_(stale)))
        _moved(conn, ns_id)


def active_vectors(conn: Connection, ns_id: int, model: str) -> tuple[list[str], list[bytes], int]:
    """Entry ids and vectors from ``model`` of the active entries of ``ns_id``, and the
    dimension (0 when there are none)."""
    v = entry_vectors
    rows = conn.execute(
        sa.select(v.c.entry_id, v.c.vector, v.c.dim)
        .join(
            entries,
            sa.and_(entries.c.namespace_id == v.c.namespace_id, entries.c.id == v.c.entry_id),
        )
        .where(v.c.namespace_id == ns_id, v.c.model == model, entries.c.invalid_at.is_(None))
    ).all()
    dims = {int(r.dim) for r in rows}
    if len(dims) > 1:  # one model, one dimension; anything else is not ours to guess
        return [], [], 0
    return [r.entry_id for r in rows], [bytes(r.vector) for r in rows], dims.pop() if dims else 0


def _moved(conn: Connection, ns_id: int) -> None:
    """Move the namespace's vector counter (read with its version by
    :func:`worker.store.search_index.head`): every transaction that stores or deletes one of
    its vectors calls this, so a search keeping its vectors in memory sees the change."""
    conn.execute(
        sa.text(f"UPDATE {STATS} SET vector_epoch = vector_epoch + 1 WHERE namespace_id = :ns"),
        {"ns": ns_id},
    )


def drop_namespace_vectors(conn: Connection, ns_ids: Sequence[int]) -> int:
    """Delete every vector of ``ns_ids`` (erase); rows deleted."""
    v = entry_vectors
    return int(conn.execute(sa.delete(v).where(v.c.namespace_id.in_(list(ns_ids)))).rowcount)
