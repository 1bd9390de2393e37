"""BM25: the one lexical scoring of memworker, for both of its rankers.

The full-text search ranks a namespace's entries from postings read out of SQL
(:mod:`worker.store.search`); the consolidation ranks a namespace's active entries from
an in-memory index of their content terms (:class:`worker.consolidation.text.LexicalIndex`).
Each keeps its own index, terms and length normalisation; both score with :func:`scores`, the
sum over the query terms a document holds of

    idf(t) · tf · (k1 + 1) / (tf + k1 · (1 − b + b · len / avglen))
    idf(t) = ln(1 + (N − df + ½) / (df + ½))

``N`` and ``avglen`` those of the indexed set (a namespace: another user's words never weigh
on this user's ranking), ``tf`` the times the document holds the term.

>>> lengths = {1: 3, 2: 3}
>>> found = scores([("tea", 2, [1, 2]), ("oslo", 1, [2])], docs=10, avg_len=3.0,
...                lengths=lengths, tf=lambda doc, term: 1, b=0.3)
>>> {doc: round(score, 2) for doc, score in found.items()}
{1: 1.48, 2: 3.47}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Final, TypeVar

#: Term-frequency saturation (the usual default, used by both rankers).
K1: Final = 1.2

Doc = TypeVar("Doc", bound=Hashable)


def idf(df: int, docs: int) -> float:
    """Inverse document frequency (never negative: a term in every document weighs ~0)."""
    return math.log(1.0 + max(docs - df + 0.5, 0.5) / (df + 0.5))


def scores(
    postings: Iterable[tuple[str, int, Iterable[Doc]]],
    *,
    docs: int,
    avg_len: float,
    lengths: Mapping[Doc, int],
    tf: Callable[[Doc, str], int],
    b: float,
    k1: float = K1,
) -> dict[Doc, float]:
    """The BM25 score of each document of ``lengths`` that holds a query term.

    ``postings`` gives, per query term, the term, its document frequency and the documents
    holding it (one not in ``lengths`` is skipped); ``tf(doc, term)`` is the times ``doc``
    holds ``term``; ``docs`` and ``avg_len`` are the indexed set's size and mean length (a
    mean under one counts as one)."""
    avg = max(avg_len, 1.0)
    out: dict[Doc, float] = {}
    for term, df, holders in postings:
        weight = idf(df, docs)
        for doc in holders:
            length = lengths.get(doc)
            if length is None:
                continue
            f = tf(doc, term)
            norm = k1 * (1 - b + b * length / avg)
            out[doc] = out.get(doc, 0.0) + weight * f * (k1 + 1) / (f + norm)
    return out
