"""Hybrid fusion as specified: cosine over every vector plus ``weight / rank`` for full-text
hits, an unembedded word match at the namespace's median cosine."""

from __future__ import annotations

import numpy as np

from worker.service.memory_search import LEXICAL_WEIGHT, fuse_scores

IDS = ["a", "b", "c", "d", "e"]
COSINES = np.array([0.80, 0.78, 0.60, 0.50, 0.40])


def test_without_word_matches_the_order_is_the_cosine_order() -> None:
    assert fuse_scores(COSINES, IDS, [], 5) == IDS


def test_the_first_word_match_overtakes_a_slightly_closer_vector() -> None:
    assert fuse_scores(COSINES, IDS, ["b"], 2) == ["b", "a"]


def test_a_word_match_cannot_overtake_a_vector_closer_by_more_than_the_weight() -> None:
    assert fuse_scores(COSINES, IDS, ["e"], 5) == IDS  # 0.40 + 0.10 only ties d


def test_a_word_match_without_a_vector_scores_the_median_cosine_plus_its_bonus() -> None:
    median = float(np.median(COSINES))  # 0.60, c's cosine
    assert COSINES[2] < median + LEXICAL_WEIGHT < COSINES[1]
    assert fuse_scores(COSINES, IDS, ["new"], 4) == ["a", "b", "new", "c"]
    assert fuse_scores(COSINES, IDS, ["new"], 6, weight=0.0).index("new") == 3  # after c


def test_the_limit_counts_unembedded_and_embedded_hits_together() -> None:
    assert len(fuse_scores(COSINES, IDS, ["new", "d"], 3)) == 3
    assert fuse_scores(COSINES, IDS, ["b"], 0) == []
