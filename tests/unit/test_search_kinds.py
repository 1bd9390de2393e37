"""The hybrid ranking's first hits re-ordered by what they are about: after the first hit,
each of the next gets ``KIND_WEIGHT`` times how alike its attribute profile and the query's
are, with the default meaning model; never a wait for a model that has not embedded the
kinds' examples."""

from __future__ import annotations

from functools import cache

import numpy as np

from tests.support.hashing_embeddings import HashingEmbeddings
from worker.consolidation.meaning import Meaning
from worker.runtime.embeddings import build_embeddings
from worker.service.search import KIND_DEPTH, by_kinds
from worker.types import DEFAULT_EMBEDDINGS

QUERY = "What pet do I have?"
TEXTS = {
    "home": "I live in Leeds.",
    "job": "I teach maths at a secondary school.",
    "pet": "I've got a tabby called Miso.",
}


@cache
def default_meaning() -> Meaning:
    built = build_embeddings(DEFAULT_EMBEDDINGS)
    assert built is not None
    return Meaning(built)


def ranked(hits: list[tuple[float, str]], meaning: Meaning | None = None) -> list[str]:
    """``hits`` through :func:`by_kinds`, over the default model's vectors of :data:`TEXTS`."""
    meaning = meaning or default_meaning()
    ids = list(TEXTS)
    vectors = np.asarray(meaning.embeddings.embed_documents([TEXTS[i] for i in ids]))
    query = np.asarray(meaning.embeddings.embed_query(QUERY))
    rows = {item: n for n, item in enumerate(ids)}
    return [item for _, item in by_kinds(hits, rows, vectors, query, meaning)]


def test_a_hit_about_what_the_question_asks_overtakes_one_about_something_else() -> None:
    assert ranked([(0.90, "home"), (0.855, "job"), (0.85, "pet")]) == ["home", "pet", "job"]


def test_the_first_hit_stays_first_whatever_it_is_about() -> None:
    assert ranked([(0.90, "job"), (0.85, "pet"), (0.84, "home")])[0] == "job"


def test_a_clear_lead_in_the_fused_score_is_kept() -> None:
    assert ranked([(0.90, "home"), (0.80, "job"), (0.60, "pet")]) == ["home", "job", "pet"]


def test_a_hit_without_a_vector_keeps_its_place_by_its_score() -> None:
    hits = [(0.90, "home"), (0.86, "fresh"), (0.85, "job"), (0.70, "pet")]
    assert ranked(hits) == ["home", "fresh", "job", "pet"]


def test_hits_past_the_depth_keep_their_order() -> None:
    tail = [(0.5 - n / 100, f"t{n}") for n in range(KIND_DEPTH)]
    hits = [(0.90, "home"), (0.855, "job"), (0.85, "pet"), *tail]
    assert ranked(hits)[KIND_DEPTH:] == [item for _, item in hits[KIND_DEPTH:]]


def test_a_model_whose_kinds_are_not_embedded_yet_is_never_asked_and_the_order_stays() -> None:
    model = HashingEmbeddings()
    meaning = Meaning(model)
    hits = [(0.90, "home"), (0.855, "job"), (0.85, "pet")]
    ids = list(TEXTS)
    vectors = np.asarray(model.embed_documents([TEXTS[i] for i in ids]))
    query = np.asarray(model.embed_query(QUERY))
    calls = model.calls

    found = by_kinds(hits, {item: n for n, item in enumerate(ids)}, vectors, query, meaning)

    assert found == hits
    assert model.calls == calls
