"""Embed committed entries: dense vectors, computed after the commit, never inside it.

The consolidation task calls :meth:`EntryEmbedder.embed_namespace` after its batch is
committed and acknowledged; nothing waits on it but that task, and it never raises: a provider
that fails, hangs or is misconfigured leaves the entries without a vector (search still finds
them by their words) and the next commit of the namespace tries again. Each call to the model
has a deadline (a hung provider is abandoned, not waited for) and is retried with backoff a few
times (tenacity). Entries whose vector came from another model count as unembedded, so changing
``MEMWORKER_EMBEDDINGS`` re-embeds every namespace as it is next consolidated, or all at once
with :meth:`EntryEmbedder.embed_all`.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, TypeVar

import numpy as np
from langchain_core.embeddings import Embeddings
from tenacity import Retrying, stop_after_attempt, wait_exponential

from worker.errors import MemworkerError, ModelUnavailable
from worker.store.memory import MemoryStore
from worker.store.vectors import Embedded

log = logging.getLogger(__name__)

#: Entries sent to the model per call: providers take batches of this size comfortably.
EMBED_BATCH: Final = 64
#: Most batches one call of :meth:`EntryEmbedder.embed_namespace` embeds, so a namespace of
#: 100k unembedded entries (a model change) holds its task for a bounded time; the rest follow
#: at its next commit or through :meth:`EntryEmbedder.embed_all`.
MAX_BATCHES_PER_CALL: Final = 16
#: Attempts per model call before the batch is left for later.
ATTEMPTS: Final = 3

T = TypeVar("T")


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
    timeout_seconds: float = 30.0
    #: A test's injected time; without it the database's (one authority for SQL-side times).
    clock: Callable[[], datetime] | None = None
    #: Seconds between attempts grow from this (tests pass 0).
    retry_wait_seconds: float = 0.5

    def call(self, fn: Callable[[], T], *, attempts: int = ATTEMPTS) -> T:
        """``fn()`` (a model call) under the deadline, tried ``attempts`` times;
        :class:`ModelUnavailable` when every attempt failed or ran past the deadline."""
        retrying = Retrying(
            stop=stop_after_attempt(attempts),
            wait=wait_exponential(multiplier=self.retry_wait_seconds, max=10),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return self._within_deadline(fn)
        except ModelUnavailable:
            raise
        except Exception as exc:
            raise ModelUnavailable(
                f"embedding model {self.model} failed: {type(exc).__name__}: {exc}"
            ) from exc
        raise AssertionError("unreachable: tenacity either returns or raises")

    def _within_deadline(self, fn: Callable[[], T]) -> T:
        # A daemon thread per call: a provider that never answers is abandoned at the deadline
        # and cannot keep the process from exiting (a pool's threads are joined at exit).
        result: list[T] = []
        failure: list[BaseException] = []
        done = threading.Event()

        def call() -> None:
            try:
                result.append(fn())
            except BaseException as exc:
                failure.append(exc)
            finally:
                done.set()

        threading.Thread(target=call, name="embed-call", daemon=True).start()
        if not done.wait(self.timeout_seconds):
            raise ModelUnavailable(
                f"embedding model {self.model} did not answer within {self.timeout_seconds:g} s"
            )
        if failure:
            raise failure[0]
        return result[0]

    def embed_query(self, text: str) -> np.ndarray:
        """The query's vector: one attempt under the deadline (an agent is waiting; search
        falls back to full text), else :class:`ModelUnavailable`."""
        vector = self.call(lambda: self.embeddings.embed_query(text), attempts=1)
        return np.asarray(vector, dtype=np.float32)

    def embed_namespace(self, namespace: str) -> int:
        """Embed up to ``EMBED_BATCH * MAX_BATCHES_PER_CALL`` unembedded entries of
        ``namespace``; returns how many vectors were stored. Never raises (see the module)."""
        stored = 0
        try:
            for _ in range(MAX_BATCHES_PER_CALL):
                pending = self.store.pending_embeddings(namespace, self.model, limit=EMBED_BATCH)
                if not pending:
                    break
                texts = [p.text for p in pending]
                vectors = self.call(functools.partial(self.embeddings.embed_documents, texts))
                items = [
                    Embedded(p.entry_id, p.text, to_bytes(v), len(v))
                    for p, v in zip(pending, vectors, strict=True)
                ]
                wrote = self.store.store_embeddings(
                    namespace,
                    self.model,
                    items,
                    now=self.clock() if self.clock is not None else self.store.db_now(),
                )
                stored += wrote
                if wrote < len(items):
                    break  # entries changed meanwhile: the next commit embeds their new text
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
