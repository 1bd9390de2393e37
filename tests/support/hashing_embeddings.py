"""Deterministic LangChain ``Embeddings`` stand-ins for unit tests (never for recall figures).

:class:`HashingEmbeddings` hashes the character trigrams of each word into a fixed number of
dimensions, so texts sharing word fragments ("colour" / "color") are close while texts sharing
nothing are orthogonal. :class:`FailingEmbeddings` raises; :class:`HangingEmbeddings` blocks
until released, like a provider that never answers.
"""

from __future__ import annotations

import hashlib
import threading

import numpy as np
from langchain_core.embeddings import Embeddings


class HashingEmbeddings(Embeddings):
    """Bag of hashed character trigrams, L2-normalised; counts its calls."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.calls = 0

    def _vector(self, text: str) -> list[float]:
        vector = np.zeros(self.dim, dtype=np.float32)
        for word in text.casefold().split():
            padded = f"#{word.strip('.,!?')}#"
            for i in range(len(padded) - 2):
                digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=4).digest()
                vector[int.from_bytes(digest, "big") % self.dim] += 1.0
        norm = float(np.linalg.norm(vector))
        return [float(x) for x in (vector / norm if norm else vector)]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        return self._vector(text)


class FailingEmbeddings(Embeddings):
    """A provider that is down: every call raises."""

    def __init__(self) -> None:
        self.calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        raise ConnectionError("embedding provider unreachable")

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        raise ConnectionError("embedding provider unreachable")


class HangingEmbeddings(Embeddings):
    """A provider that never answers until :meth:`release` (call it when the test ends)."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def release(self) -> None:
        self.released.set()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.released.wait()
        raise ConnectionError("released")

    def embed_query(self, text: str) -> list[float]:
        self.released.wait()
        raise ConnectionError("released")
