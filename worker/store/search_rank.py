"""BM25 over a namespace's postings: the ranking both databases' indexes share.

Each candidate entry is scored by :func:`worker.bm25.scores`, ``tf`` the times the entry
holds the term (the index keeps the counts above one), ``N`` and ``avglen`` those of the
namespace (per-namespace IDF: another user's words never weigh on this user's ranking).

The term frequency counts even in entries of one sentence: an entry that names the subject of
a query twice ("dairy-free chocolate cake with raspberries ..., chocolate, and raspberries")
is about it, where one that mentions it in passing is not. Ranking every entry as if each term
occurred once found 5 fewer of 1,311 LoCoMo questions at recall@10 (79.9% against 80.3%; 1 of
631 on the first five conversations, 4 of 680 on the held-out five; ``python -m bench
search``).

>>> ranked = rank({"tea": [1, 2], "oslo": [2]}, {"tea": 2, "oslo": 1}, {1: 3, 2: 3},
...               docs=10, avg_len=3.0)
>>> [(doc, round(score, 2)) for doc, score in ranked]
[(2, 3.47), (1, 1.48)]
>>> [doc for doc, _ in rank({"tea": [1, 2]}, {"tea": 2}, {1: 3, 2: 3}, docs=10, avg_len=3.0,
...                         repeats={1: {"tea": 2}})]
[1, 2]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from worker.bm25 import idf, scores

#: Length normalisation, lighter than the usual 0.75: entries are all about one sentence, so a
#: longer one is more specific rather than padded (LoCoMo recall@10 79.6% at 0.75, 79.9% at
#: 0.1-0.3 before term frequencies counted; with them 80.1% at 0.5-0.75, 80.3-80.4% at
#: 0.1-0.3, ``python -m bench search``).
B: Final = 0.3


def unweighted(
    postings: Mapping[str, Sequence[int]], df: Mapping[str, int], docs: int
) -> dict[int, float]:
    """Each candidate's summed IDF, before term frequencies and length normalisation (a cheap
    first cut: it needs no row of the candidates)."""
    scores: dict[int, float] = {}
    for term, ids in postings.items():
        weight = idf(df[term], docs)
        for doc in ids:
            scores[doc] = scores.get(doc, 0.0) + weight
    return scores


def rank(
    postings: Mapping[str, Sequence[int]],
    df: Mapping[str, int],
    lengths: Mapping[int, int],
    *,
    docs: int,
    avg_len: float,
    repeats: Mapping[int, Mapping[str, int]] | None = None,
) -> list[tuple[int, float]]:
    """``(doc, BM25 score)`` of the docs in ``lengths``, best first (ties: newest first).
    ``repeats[doc][term]`` is the term frequency of a term ``doc`` holds more than once (one
    otherwise)."""
    counts = repeats or {}
    found = scores(
        ((term, df[term], ids) for term, ids in postings.items()),
        docs=docs,
        avg_len=avg_len,
        lengths=lengths,
        tf=lambda doc, term: counts.get(doc, {}).get(term, 1),
        b=B,
    )
    return sorted(found.items(), key=lambda pair: (-pair[1], -pair[0]))
