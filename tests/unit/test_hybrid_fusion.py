"""Hybrid fusion as specified: cosine over every vector plus one bonus, ``weight`` times the
query's spread (best cosine minus median cosine), for each of the full-text top ``depth``
hits; an unembedded word match at the namespace's median cosine plus ``fresh / rank``."""

from __future__ import annotations

import numpy as np

from worker.service.search import (
    LEXICAL_DEPTH,
    LEXICAL_WEIGHT,
    UNEMBEDDED_BONUS,
    fuse_scores,
)

IDS = ["a", "b", "c", "d", "e"]
COSINES = np.array([0.80, 0.78, 0.60, 0.50, 0.40])
#: The bonus these cosines give: the weight times best (0.80) minus median (0.60).
BONUS = LEXICAL_WEIGHT * (0.80 - 0.60)


def test_without_word_matches_the_order_is_the_cosine_order() -> None:
    assert fuse_scores(COSINES, IDS, [], 5) == IDS


def test_the_first_word_match_overtakes_a_slightly_closer_vector() -> None:
    assert COSINES[0] - COSINES[1] < BONUS
    assert fuse_scores(COSINES, IDS, ["b"], 2) == ["b", "a"]


def test_a_word_match_cannot_overtake_a_vector_closer_by_more_than_the_bonus() -> None:
    assert COSINES[3] - COSINES[4] > BONUS
    assert fuse_scores(COSINES, IDS, ["e"], 5) == IDS


def test_the_bonus_is_a_share_of_the_querys_spread_not_a_fixed_cosine() -> None:
    # The same 0.02 lead of a over b: overtaken when the query's cosines spread widely,
    # kept when they crowd into a narrow band (a word match then says less than the lead).
    wide = np.array([0.80, 0.78, 0.30, 0.20, 0.10])
    narrow = np.array([0.80, 0.78, 0.77, 0.76, 0.75])
    assert fuse_scores(wide, IDS, ["b"], 2) == ["b", "a"]
    assert fuse_scores(narrow, IDS, ["b"], 2) == ["a", "b"]


def test_every_hit_within_the_depth_gets_the_same_bonus_and_the_cosine_orders_them() -> None:
    ids = [f"x{i}" for i in range(LEXICAL_DEPTH + 2)]
    cosines = np.linspace(0.9, 0.5, len(ids))
    lexical = list(reversed(ids[1:]))  # the full text's first hit is the farthest vector
    fused = fuse_scores(cosines, ids, lexical, len(ids))
    lifted = lexical[:LEXICAL_DEPTH]
    assert [i for i in fused if i in lifted] == sorted(lifted, key=ids.index)


def test_a_word_match_past_the_depth_gets_no_bonus() -> None:
    lexical = [f"pad{i}" for i in range(LEXICAL_DEPTH)] + ["b"]
    assert fuse_scores(COSINES, IDS, lexical, 2) == ["a", "b"]
    assert fuse_scores(COSINES, IDS, lexical, 2, depth=LEXICAL_DEPTH + 1) == ["b", "a"]


def test_a_word_match_without_a_vector_scores_the_median_cosine_plus_its_fresh_bonus() -> None:
    median = float(np.median(COSINES))  # 0.60, c's cosine
    assert COSINES[2] < median + UNEMBEDDED_BONUS < COSINES[1]
    assert fuse_scores(COSINES, IDS, ["new"], 4) == ["a", "b", "new", "c"]
    assert fuse_scores(COSINES, IDS, ["new"], 6, fresh=0.0).index("new") == 3  # after c


def test_the_limit_counts_unembedded_and_embedded_hits_together() -> None:
    assert len(fuse_scores(COSINES, IDS, ["new", "d"], 3)) == 3
    assert fuse_scores(COSINES, IDS, ["b"], 0) == []
