"""``embed_within``: every embedding call of the worker, within one total deadline, returning
only vectors fit to store or rank with (``None`` for the others)."""

from __future__ import annotations

import threading
import time

from langchain_core.embeddings import Embeddings

from tests.support.hashing_embeddings import HashingEmbeddings
from worker.consolidation.meaning import EMBED_BATCH, embed_within, usable_vector


class _AnswersThenHangs(Embeddings):
    """Answers its first ``answers`` calls, then never answers until released."""

    def __init__(self, answers: int) -> None:
        self.inner = HashingEmbeddings(dim=8)
        self.answers = answers
        self.calls = 0
        self.released = threading.Event()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls > self.answers:
            self.released.wait()
            raise ConnectionError("released")
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class _Flaky(HashingEmbeddings):
    """Fails its first ``failures`` calls, like a provider's blip."""

    def __init__(self, failures: int) -> None:
        super().__init__(dim=8)
        self.failures = failures

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.calls < self.failures:
            self.calls += 1
            raise ConnectionError("blip")
        return super().embed_documents(texts)


def test_the_deadline_is_one_for_the_whole_call_not_one_per_chunk() -> None:
    provider = _AnswersThenHangs(answers=1)
    texts = [f"fact {i}" for i in range(3 * EMBED_BATCH)]
    try:
        began = time.monotonic()
        found = embed_within(provider, texts, began + 0.5, retry_wait_seconds=0)
        took = time.monotonic() - began
    finally:
        provider.released.set()

    assert [v is not None for v in found] == [True] * EMBED_BATCH + [False] * (2 * EMBED_BATCH)
    assert took < 1.0
    assert provider.calls == 2  # the chunks after the deadline are not sent


def test_a_provider_blip_is_retried_within_the_deadline() -> None:
    found = embed_within(_Flaky(failures=2), ["tea"], time.monotonic() + 5, retry_wait_seconds=0)

    assert found[0] is not None


def test_a_deadline_already_past_sends_nothing() -> None:
    provider = HashingEmbeddings()

    found = embed_within(provider, ["tea", "cake"], time.monotonic() - 1)

    assert (found, provider.calls) == ([None, None], 0)


def test_a_vector_of_another_length_than_most_is_refused_and_the_others_kept() -> None:
    class _OneShort(HashingEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [
                v[:-1] if t == "short" else v
                for t, v in zip(texts, super().embed_documents(texts), strict=True)
            ]

    found = embed_within(_OneShort(dim=8), ["tea", "short", "cake"], time.monotonic() + 5)

    assert [v is not None for v in found] == [True, False, True]


def test_an_answer_with_the_wrong_number_of_vectors_gives_none_for_every_text() -> None:
    class _Drops(HashingEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return super().embed_documents(texts)[:-1]

    found = embed_within(_Drops(), ["tea", "cake"], time.monotonic() + 5, retry_wait_seconds=0)

    assert found == [None, None]


def test_usable_vector_refuses_what_cannot_rank() -> None:
    refused = [
        [float("nan"), 1.0],
        [float("inf"), 1.0],
        [0.0, 0.0],
        [1e39, 1.0],  # infinite in float32
        [],
        [[1.0, 2.0]],
        ["a", "b"],
        None,
    ]

    assert [usable_vector(v) for v in refused] == [None] * len(refused)
    assert usable_vector([1.0, 2.0], dim=3) is None
    kept = usable_vector([1.0, 2.0], dim=2)
    assert kept is not None
    assert kept.tolist() == [1.0, 2.0]
