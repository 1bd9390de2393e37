"""Embed committed entries: dense vectors, computed after the commit, never inside it.

The consolidation task calls :meth:`EntryEmbedder.embed_namespace` after its batch is
committed and acknowledged; nothing waits on it but that task, and it never raises: a provider
that fails, hangs or is misconfigured leaves the entries without a vector (search still finds
them by their words) and the next commit of the namespace tries again. The whole call has one
deadline, ``timeout_seconds`` in all (every chunk, retry and wait between retries inside it;
:func:`~worker.consolidation.embed_within.embed_within`), so a hung provider holds the task that
long and no longer; and every vector is checked (finite, the namespace's dimension, non-zero
length) before it is stored: one that fails is not stored, its entry stays found by its words.
Entries whose vector came from another model count as unembedded, so changing
``MEMWORKER_EMBEDDINGS`` re-embeds every namespace as it is next consolidated, or all at once
with :meth:`EntryEmbedder.embed_all`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

import numpy as np
from langchain_core.embeddings import Embeddings

from worker.consolidation.embed_within import (
    EMBED_BATCH,
    DeadlinePassed,
    Vector,
    embed_within,
    usable_vector,
    within,
)
from worker.errors import MemworkerError, ModelUnavailable
from worker.store.memory import MemoryStore
from worker.store.vectors import Embedded

log = logging.getLogger(__name__)

#: Most batches one call of :meth:`EntryEmbedder.embed_namespace` embeds, so a namespace of
#: 100k unembedded entries (a model change) holds its task for a bounded time; the rest follow
#: at its next commit or through :meth:`EntryEmbedder.embed_all`.
MAX_BATCHES_PER_CALL: Final = 16


def to_bytes(vector: Sequence[float]) -> bytes:
    """A vector as the float32 bytes the store keeps."""
    return np.asarray(vector, dtype=np.float32).tobytes()


def from_bytes(blobs: Sequence[bytes], dim: int) -> np.ndarray:
    """Stored vectors as one ``(len(blobs), dim)`` float32 matrix."""
    if not blobs:
        return np.zeros((0, dim), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)


@dataclass
class EntryEmbedder:
    """Embeds a namespace's unembedded active entries with ``embeddings`` (named ``model``)."""

    store: MemoryStore
    embeddings: Embeddings
    model: str
    #: The deadline of one whole :meth:`embed_namespace` (or :meth:`embed_texts` call without
    #: its own deadline), and of one query's embedding: a total, not a deadline per request.
    timeout_seconds: float = 30.0
    #: A test's injected time; without it the database's (one authority for SQL-side times).
    clock: Callable[[], datetime] | None = None
    #: Seconds between attempts grow from this (tests pass 0).
    retry_wait_seconds: float = 0.5
    #: The model's dimension, learned from its first usable vectors: a vector of another
    #: length is refused (it could be neither stored beside the others nor compared to them).
    dim: int | None = field(default=None, init=False)

    def deadline(self) -> float:
        """A deadline (:func:`time.monotonic` value) ``timeout_seconds`` from now."""
        return time.monotonic() + self.timeout_seconds

    def embed_texts(
        self, texts: Sequence[str], deadline: float | None = None
    ) -> list[Vector | None]:
        """One checked vector or ``None`` per text (:func:`embed_within`), all before
        ``deadline`` (default: ``timeout_seconds`` from now); never raises for the model."""
        found = embed_within(
            self.embeddings,
            texts,
            self.deadline() if deadline is None else deadline,
            dim=self.dim,
            retry_wait_seconds=self.retry_wait_seconds,
            label=f"embedding model {self.model}",
        )
        if self.dim is None:
            self.dim = next((int(v.shape[0]) for v in found if v is not None), None)
        return found

    def embed_query(self, text: str) -> np.ndarray:
        """The query's checked vector: one attempt within ``timeout_seconds`` (an agent is
        waiting; search falls back to full text), else :class:`ModelUnavailable` — also for a
        vector that is not finite, of length zero or of another dimension than the model's."""
        try:
            raw = within(lambda: self.embeddings.embed_query(text), self.deadline())
        except DeadlinePassed:
            raise ModelUnavailable(
                f"embedding model {self.model} did not answer within {self.timeout_seconds:g} s"
            ) from None
        except Exception as exc:
            raise ModelUnavailable(
                f"embedding model {self.model} failed: {type(exc).__name__}: {exc}"
            ) from exc
        vector = usable_vector(raw, dim=self.dim)
        if vector is None:
            raise ModelUnavailable(
                f"embedding model {self.model} returned an unusable query vector (not finite, "
                f"of length zero, or not {self.dim or 'the stored'} values)"
            )
        return vector

    def embed_namespace(self, namespace: str) -> int:
        """Embed up to ``EMBED_BATCH * MAX_BATCHES_PER_CALL`` unembedded entries of
        ``namespace`` within ``timeout_seconds`` in all; returns how many vectors were stored.
        Never raises (see the module)."""
        stored = 0
        deadline = self.deadline()
        try:
            for _ in range(MAX_BATCHES_PER_CALL):
                pending = self.store.pending_embeddings(namespace, self.model, limit=EMBED_BATCH)
                if not pending:
                    break
                vectors = self.embed_texts([p.text for p in pending], deadline)
                items = [
                    Embedded(p.entry_id, p.text, v.tobytes(), int(v.shape[0]))
                    for p, v in zip(pending, vectors, strict=True)
                    if v is not None
                ]
                wrote = (
                    self.store.store_embeddings(
                        namespace,
                        self.model,
                        items,
                        now=self.clock() if self.clock is not None else self.store.db_now(),
                    )
                    if items
                    else 0
                )
                stored += wrote
                if wrote < len(pending):
                    # A vector refused or missing (they wait for the next commit), or entries
                    # changed meanwhile (the next commit embeds their new text).
                    break
        except MemworkerError as exc:
            log.warning("embedding entries of %s stopped, they wait: %s", namespace, exc)
        except Exception:
            log.exception("embedding entries of %s failed, they wait", namespace)
        return stored

    def embed_all(self, namespaces: Iterable[str]) -> int:
        """:meth:`embed_namespace` for each of ``namespaces`` until each has no unembedded
        entry left (a model change's backfill); vectors stored."""
        total = 0
        for namespace in namespaces:
            while (wrote := self.embed_namespace(namespace)) > 0:
                total += wrote
        return total

    def close(self) -> None:
        """Nothing to release (calls run on daemon threads); kept for the runtime's close."""
