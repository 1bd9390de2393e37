"""Search quality and speed: LoCoMo evidence recall, evidence reachable at 2 KB, query latency.

Data and stored entries: the LoCoMo workload of :mod:`bench.bench_locomo` (its loader, its
replay): every observation goes through the production path (queue, rules consolidator,
fenced commit) into its speaker's namespace with no file budget; the searches below all rank
the same active entries. A question is *answerable* when its category is 1–4 (5 is adversarial:
no answer exists) and one of its evidence turns has an observation. Its *owner* is the
speaker whose namespace holds most of its evidence observations; the query is the question's
text, run in the owner's namespace, and it is a hit at k when one of the top k entries carries
an evidence observation in its provenance (an observation merged into an equal entry counts).

Searches, in the same run over the same entries:

* the shipped search, :class:`worker.service.memory_search.SqlMemorySearch`, through its public
  ``search(namespace, query, limit=)`` (lexical; hybrid where the shipped search takes
  embeddings: cosine plus a full-text rank bonus), timed per call;
* baselines computed here: a plain SQLite FTS5 BM25 table (``porter unicode61``, one table per
  namespace, the question's words quoted and OR-joined), a brute-force cosine over the model's
  vectors (numpy), and their reciprocal-rank fusion (k = 60 over each list's top 50).

Each text is embedded once and kept in memory for the run; the dense and fused rows time the
ranking only, and the embedding cost is printed on its own line (per stored candidate and per
query, one engine thread). Recall@10 is also printed for the questions of the first half of
the conversations (where the shipped search's constants were chosen) and of the second half
(held out).

Evidence reachable at a 2 KB budget: the same replay with ``file_budget_bytes=2048``; a
question is reachable when an evidence observation is in its owner's memory files or in the
shipped search's top 10 over that store.

Latency: synthetic entries (distinct fact-like sentences) committed through the store in bulk
into one namespace, grown to each size in turn, on SQLite and PostgreSQL; the median of the
shipped search's calls at each size, beside an in-memory FTS5 table of the same texts and a
brute-force cosine over as many random unit vectors (its cost does not depend on the values).

``python -m bench search`` runs it all; options: ``python -m bench search --help``.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Final

import numpy as np
import redis
import sqlalchemy as sa
from langchain_core.embeddings import Embeddings

from bench import bench_locomo
from bench._cells import cell_recall_lines
from bench._support import (
    postgres_reachable,
    redis_url,
    sentences,
    temp_postgres,
    temp_sqlite,
    verdict,
)
from worker.runtime.embeddings import build_embeddings
from worker.service.embed import EntryEmbedder, to_bytes
from worker.service.memory_search import SqlMemorySearch
from worker.store.memory import MemoryStore, RunRecord
from worker.store.schema import entries, namespaces
from worker.store.vectors import Embedded
from worker.values import AppliedPlan, Entry

DEFAULT_DATASET: Final = bench_locomo.DEFAULT_DATASET
DEFAULT_MODEL: Final = "local:multilingual-e5-small"
CATEGORIES: Final = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS: Final = (5, 10)
#: Length of each list that reciprocal-rank fusion combines, and its constant (Cormack et al.).
DEPTH: Final = 50
RRF_K: Final = 60
SIZES: Final = (1_000, 10_000, 100_000)
#: Entries per commit when growing the latency namespace (one transaction each).
CHUNK: Final = 5_000
#: Timed calls per size and backend, and the most seconds they may take (a linear search at
#: 100k entries takes seconds a call; a median of a few calls still shows it).
LATENCY_QUERIES: Final = 40
LATENCY_SECONDS: Final = 8.0
TARGETS: Final = {"lexical R@10": 0.80, "hybrid R@10": 0.86, "p50 at 10k ms": 10.0}
_WORD: Final = re.compile(r"\w+")


@dataclass(frozen=True)
class Stored:
    """One active entry: its text and the candidates (observations) behind it."""

    text: str
    candidate_ids: frozenset[str]


@dataclass(frozen=True)
class Probe:
    """One answerable question: the owner's namespace, the query, the evidence candidates."""

    namespace: str
    text: str
    category: int
    evidence: frozenset[str]
    conversation: str = ""


Corpus = dict[str, list[Stored]]
#: A ranking: positions in ``corpus[probe.namespace]``, best first.
Ranker = Callable[[Probe], list[int]]


# --- the LoCoMo side -----------------------------------------------------------------------
def active_entries(store: MemoryStore) -> Corpus:
    """Each namespace's active entries, in a stable order."""
    stmt = (
        sa.select(namespaces.c.key, entries.c.text, entries.c.candidate_ids)
        .join(namespaces, namespaces.c.id == entries.c.namespace_id)
        .where(entries.c.invalid_at.is_(None))
        .order_by(namespaces.c.key, entries.c.id)
    )
    corpus: Corpus = {}
    with store.engine.connect() as conn:
        for ns, text, ids in conn.execute(stmt):
            corpus.setdefault(ns, []).append(Stored(text, frozenset(ids)))
    return corpus


def probes(work: bench_locomo.Workload) -> list[Probe]:
    """The answerable questions, each with its owner and evidence candidate ids."""
    by_turn: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for o in work.observations:
        for dia in o.dia_ids:
            by_turn.setdefault((o.conversation, dia), []).append(
                (o.candidate.namespace, o.candidate.id)
            )
    out = []
    for q in work.questions:
        if q.category not in CATEGORIES:
            continue
        found = [hit for d in q.evidence for hit in by_turn.get((q.conversation, d), [])]
        if not found:
            continue
        owner = Counter(ns for ns, _ in found).most_common(1)[0][0]
        evidence = frozenset(c for _, c in found)
        out.append(Probe(owner, q.text, q.category, evidence, q.conversation))
    return out


def _positions(corpus: Corpus) -> dict[tuple[str, str], int]:
    return {(ns, s.text): i for ns, items in corpus.items() for i, s in enumerate(items)}


def shipped_ranker(search: Any, corpus: Corpus, limit: int) -> Ranker:
    """A search with the shipped ``search(namespace, query, limit=)`` API, as a ranker."""
    where = _positions(corpus)

    def rank(p: Probe) -> list[int]:
        hits = search.search(p.namespace, p.text, limit=limit)
        return [where[(p.namespace, h.text)] for h in hits if (p.namespace, h.text) in where]

    return rank


class Fts5:
    """The lexical baseline: one in-memory FTS5 table (``porter unicode61``) per namespace."""

    def __init__(self, corpus: dict[str, list[str]]) -> None:
        self.db = sqlite3.connect(":memory:")
        self.tables: dict[str, str] = {}
        for n, (ns, texts) in enumerate(corpus.items()):
            table = self.tables[ns] = f"t{n}"
            self.db.execute(
                f"CREATE VIRTUAL TABLE {table} USING fts5(text, tokenize='porter unicode61')"
            )
            self.db.executemany(
                f"INSERT INTO {table} (rowid, text) VALUES (?, ?)", enumerate(texts)
            )

    def rank(self, namespace: str, query: str, depth: int = DEPTH) -> list[int]:
        """Positions of the best ``depth`` texts for ``query`` by BM25, best first."""
        words = dict.fromkeys(w.lower() for w in _WORD.findall(query))
        if not words:
            return []
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        table = self.tables[namespace]
        rows = self.db.execute(
            f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY bm25({table}) LIMIT ?",
            (match, depth),
        )
        return [r[0] for r in rows]


class Dense:
    """The dense baseline: brute-force cosine over unit vectors, per namespace."""

    def __init__(self, matrices: dict[str, np.ndarray], queries: dict[str, np.ndarray]) -> None:
        self.matrices, self.queries = matrices, queries

    def rank(self, namespace: str, query: str, depth: int = DEPTH) -> list[int]:
        """Positions of the ``depth`` nearest texts to the query's vector, nearest first."""
        scores = self.matrices[namespace] @ self.queries[query]
        depth = min(depth, len(scores))
        top = np.argpartition(-scores, depth - 1)[:depth]
        return [int(i) for i in top[np.argsort(-scores[top], kind="stable")]]


def fuse(*rankings: Sequence[int], k: int = RRF_K) -> list[int]:
    """Reciprocal-rank fusion: the sum of ``1 / (k + rank)`` over the lists (ranks from 1).

    >>> fuse([1, 2, 3], [3, 4])
    [3, 1, 2, 4]
    """
    score: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            score[item] = score.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(score, key=lambda i: (-score[i], i))


def _hit(corpus: Corpus, p: Probe, ranking: Sequence[int], k: int) -> bool:
    items = corpus.get(p.namespace, [])
    return any(items[i].candidate_ids & p.evidence for i in ranking[:k])


@dataclass
class Recall:
    """Hits at each k and per category of one method, and its median ms per query."""

    name: str
    hits: Counter[tuple[int, int]]  # (category, k) -> hits
    total: Counter[int]
    ms: float
    #: Per probe, in order: whether it was a hit at 10 (for the held-out split).
    hit10: list[bool] = field(default_factory=list)

    def share(self, k: int, category: int | None = None) -> float:
        cats = list(self.total) if category is None else [category]
        whole = sum(self.total[c] for c in cats)
        return sum(self.hits[(c, k)] for c in cats) / whole if whole else 0.0


def recall(name: str, corpus: Corpus, qs: Sequence[Probe], rank: Ranker) -> Recall:
    """Score ``rank`` on every probe, timing each call."""
    hits: Counter[tuple[int, int]] = Counter()
    total: Counter[int] = Counter()
    seconds: list[float] = []
    hit10: list[bool] = []
    for p in qs:
        started = time.perf_counter()
        ranking = rank(p)
        seconds.append(time.perf_counter() - started)
        total[p.category] += 1
        for k in KS:
            hits[(p.category, k)] += _hit(corpus, p, ranking, k)
        hit10.append(_hit(corpus, p, ranking, 10))
    ms = 1000 * statistics.median(seconds) if seconds else 0.0
    return Recall(name, hits, total, ms, hit10)


class CachedEmbeddings(Embeddings):
    """Each text embedded once for the run (every search and store reuses the vector), and
    the model's own seconds per stored text and per query, measured on first use."""

    def __init__(self, model: Embeddings) -> None:
        self.model = model
        self.docs: dict[str, list[float]] = {}
        self.queries: dict[str, list[float]] = {}
        self.doc_seconds = 0.0
        self.query_seconds: list[float] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.docs]
        if missing:
            started = time.perf_counter()
            self.docs.update(zip(missing, self.model.embed_documents(missing), strict=True))
            self.doc_seconds += time.perf_counter() - started
        return [self.docs[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        if text not in self.queries:
            started = time.perf_counter()
            self.queries[text] = self.model.embed_query(text)
            self.query_seconds.append(time.perf_counter() - started)
        return self.queries[text]

    @property
    def ms_per_text(self) -> float:
        return 1000 * self.doc_seconds / max(1, len(self.docs))

    @property
    def ms_per_query(self) -> float:
        return 1000 * statistics.median(self.query_seconds) if self.query_seconds else 0.0


@contextmanager
def embedder(
    store: MemoryStore, model: CachedEmbeddings | None, spec: str | None
) -> Iterator[EntryEmbedder | None]:
    """The shipped embedder over ``store`` (None without a model), closed on exit."""
    if model is None or spec is None:
        yield None
        return
    shipped = EntryEmbedder(store=store, embeddings=model, model=spec, timeout_seconds=600)
    try:
        yield shipped
    finally:
        shipped.close()


def dense_baseline(model: CachedEmbeddings, corpus: Corpus, qs: Sequence[Probe]) -> Dense:
    """Brute-force cosine over the model's vectors of every stored text and query."""
    matrices = {
        ns: np.asarray(model.embed_documents([s.text for s in items]), np.float32)
        for ns, items in corpus.items()
    }
    queries = {p.text: np.asarray(model.embed_query(p.text), np.float32) for p in qs}
    return Dense(matrices, queries)


def locomo_recall(
    work: bench_locomo.Workload,
    qs: list[Probe],
    model: CachedEmbeddings | None,
    spec: str | None,
    client: redis.Redis,
) -> tuple[list[Recall], int, int, list[str]]:
    """Recall of every method over the no-budget replay; (rows, entries, namespaces, the
    vector cells' recall lines)."""
    budget = bench_locomo.REFERENCE_BUDGETS[-1]
    with bench_locomo.replayed(work, budget, client) as (runtime, _, committed):
        if committed["candidates"] != len(work.observations):
            raise RuntimeError(f"replay committed {dict(committed)}")
        corpus = active_entries(runtime.store)
        searches = [("shipped search, lexical", SqlMemorySearch(runtime.store))]
        with embedder(runtime.store, model, spec) as shipped:
            if shipped is not None and model is not None:
                shipped.embed_all(corpus)  # the worker's path: a vector stored per entry
                for p in qs:  # each query embedded (and timed) once, outside the searches
                    model.embed_query(p.text)
                hybrid = SqlMemorySearch(runtime.store, shipped)
                searches.append(("shipped search, hybrid", hybrid))
            rows = [
                recall(name, corpus, qs, shipped_ranker(search, corpus, max(KS)))
                for name, search in searches
            ]
    fts = Fts5({ns: [s.text for s in items] for ns, items in corpus.items()})
    rows.append(recall("FTS5 BM25 porter", corpus, qs, lambda p: fts.rank(p.namespace, p.text)))
    if model is not None:
        dense = dense_baseline(model, corpus, qs)
        rows.append(
            recall("dense brute force", corpus, qs, lambda p: dense.rank(p.namespace, p.text))
        )
        rows.append(recall("RRF(FTS5, dense)", corpus, qs, lambda p: fuse(
            fts.rank(p.namespace, p.text), dense.rank(p.namespace, p.text))))  # fmt: skip
        cells = cell_recall_lines(dense.matrices, dense.queries)
    else:
        cells = []
    return rows, sum(map(len, corpus.values())), len(corpus), cells


def reachable(
    work: bench_locomo.Workload,
    qs: list[Probe],
    model: CachedEmbeddings | None,
    spec: str | None,
    client: redis.Redis,
) -> tuple[int, int, int]:
    """At a 2 KB budget: questions with evidence (in the files, in the shipped search's top 10
    (hybrid when a model is given), in either)."""
    with bench_locomo.replayed(work, bench_locomo.BUDGET, client) as (runtime, _, _):
        kept, _ = bench_locomo._retained(runtime)
        corpus = active_entries(runtime.store)
        with embedder(runtime.store, model, spec) as shipped:
            if shipped is not None:
                shipped.embed_all(corpus)
            rank = shipped_ranker(SqlMemorySearch(runtime.store, shipped), corpus, 10)
            files = found = either = 0
            for p in qs:
                in_files = bool(p.evidence & kept)
                in_top = _hit(corpus, p, rank(p), 10)
                files, found = files + in_files, found + in_top
                either += in_files or in_top
    return files, found, either


# --- latency ---------------------------------------------------------------------------------
LATENCY_NS: Final = "user:bench-search-latency"


def _grow(store: MemoryStore, texts: Sequence[str], start: int, version: int) -> int:
    """Commit ``texts[start:]`` as new entries of :data:`LATENCY_NS`; the new version."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    for lo in range(start, len(texts), CHUNK):
        batch = tuple(
            Entry(id=f"e{i:07d}", path="/memories/facts.md", text=texts[i], valid_from=now,
                  created_at=now, last_confirmed_at=now, candidate_ids=(f"c{i}",))
            for i in range(lo, min(lo + CHUNK, len(texts)))
        )  # fmt: skip
        plan = AppliedPlan(new_entries=batch, changed_entries=(), files=(), ledger=())
        version = store.commit_batch(
            namespace=LATENCY_NS, expected_version=version, applied_position=None,
            applied=plan, sinks=[], now=now,
            run=RunRecord(trigger="queue", namespace=LATENCY_NS, started_at=now, outcome="ok"),
        ).version  # fmt: skip
    return version


def _median_ms(call: Callable[[str], object], queries: Sequence[str]) -> float:
    call(queries[0])  # warm: first-use caches, the connection pool
    seconds: list[float] = []
    deadline = time.perf_counter() + LATENCY_SECONDS
    for q in queries:
        started = time.perf_counter()
        call(q)
        seconds.append(time.perf_counter() - started)
        if started > deadline:
            break
    return 1000 * statistics.median(seconds)


def _latency_queries(n: int) -> list[str]:
    return [f"what about {s.lower()}?" for s in sentences(seed=11, count=n)]


def _random_unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    matrix = rng.standard_normal((n, dim), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix


def _add_vectors(store: MemoryStore, spec: str, texts: Sequence[str], start: int, dim: int) -> None:
    """Random unit vectors for entries ``start..`` (the ranking's cost does not depend on the
    values), stored through the store as the embedder stores them."""
    rng = np.random.default_rng(start)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    for lo in range(start, len(texts), CHUNK):
        hi = min(lo + CHUNK, len(texts))
        matrix = _random_unit(rng, hi - lo, dim)
        items = [Embedded(f"e{i:07d}", texts[i], to_bytes(matrix[i - lo]), dim)
                 for i in range(lo, hi)]  # fmt: skip
        store.store_embeddings(LATENCY_NS, spec, items, now=now)


def store_latency(
    url: str,
    sizes: Sequence[int],
    texts: Sequence[str],
    model: CachedEmbeddings | None,
    spec: str | None,
) -> dict[str, list[float]]:
    """The shipped search's median ms per call at each size (lexical, and hybrid with the
    query's vector already computed), one namespace grown in turn; ``commit`` is the entries
    per second the growth committed (entries and their index, one transaction per chunk);
    ``first`` the ms of the first hybrid call after the growth (the matrix read again)."""
    store = MemoryStore.from_url(url)
    queries = _latency_queries(LATENCY_QUERIES)
    out: dict[str, list[float]] = {"lexical": [], "commit": []}
    version = have = 0
    try:
        with embedder(store, model, spec) as shipped:
            lexical, hybrid = SqlMemorySearch(store), SqlMemorySearch(store, shipped)
            dim = 0
            if shipped is not None and model is not None and spec is not None:
                out["hybrid"], out["first"] = [], []
                dim = min(len(model.embed_query(q)) for q in queries)
            for size in sizes:
                started = time.perf_counter()
                version = _grow(store, texts[:size], have, version)
                out["commit"].append((size - have) / (time.perf_counter() - started))
                if dim and spec is not None:
                    _add_vectors(store, spec, texts[:size], have, dim)
                _analyze(store)
                have = size
                out["lexical"].append(_median_ms(partial(_search, lexical), queries))
                if "hybrid" in out:
                    started = time.perf_counter()
                    _search(hybrid, queries[-1])  # reads every vector again, builds any cells
                    out["first"].append(1000 * (time.perf_counter() - started))
                    out["hybrid"].append(_median_ms(partial(_search, hybrid), queries))
    finally:
        store.dispose()
    return out


def _analyze(store: MemoryStore) -> None:
    """PostgreSQL: refresh the planner's statistics after a bulk growth, as autovacuum does
    soon after such a change (measured here: stale statistics double the 10k figure)."""
    if store.engine.dialect.name == "postgresql":
        with store.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")


def _search(search: SqlMemorySearch, query: str) -> object:
    return search.search(LATENCY_NS, query, limit=10)


def baseline_latency(
    sizes: Sequence[int], texts: Sequence[str], dim: int
) -> dict[str, list[float]]:
    """FTS5 (in memory) and brute-force cosine (random unit vectors) medians at each size."""
    queries = _latency_queries(LATENCY_QUERIES)
    rng = np.random.default_rng(7)
    fts_ms, dense_ms = [], []
    for size in sizes:
        fts = Fts5({LATENCY_NS: list(texts[:size])})
        fts_ms.append(_median_ms(partial(fts.rank, LATENCY_NS, depth=10), queries))
        matrix = _random_unit(rng, size, dim)
        vectors = {q: matrix[i % size] for i, q in enumerate(queries)}
        dense = Dense({LATENCY_NS: matrix}, vectors)
        dense_ms.append(_median_ms(partial(dense.rank, LATENCY_NS, depth=10), queries))
    return {"FTS5 BM25 porter, in memory": fts_ms, f"brute-force cosine, {dim}-d": dense_ms}


@contextmanager
def phase(what: str) -> Iterator[None]:
    """Say on stderr how long ``what`` took (the report itself comes at the end)."""
    started = time.perf_counter()
    yield
    print(f"[search bench] {what}: {time.perf_counter() - started:.1f} s", file=sys.stderr)


@contextmanager
def _database(backend: str) -> Iterator[str]:
    with temp_sqlite() if backend == "sqlite" else temp_postgres() as url:
        yield url


# --- the report ----------------------------------------------------------------------------
def _pct(x: float) -> str:
    return f"{100 * x:5.1f}%"


def _recall_lines(rows: list[Recall]) -> list[str]:
    """One row per method: overall R@5 and R@10, each category's, ms per query, ratio."""
    base = next(r for r in rows if r.name.startswith("FTS5"))
    cats = "".join(f"{name:>14}" for name in CATEGORIES.values())
    lines = [
        f"{'search over the same entries':<26}{'R@5':>7}{'R@10':>7}{cats}{'ms p50':>8}"
        f"{'R@10/FTS5':>11}",
        f"{'':<40}" + f"{'R@5 / R@10':>14}" * len(CATEGORIES),
    ]
    for r in rows:
        per = "".join(
            f"{100 * r.share(5, c):7.1f} /{100 * r.share(10, c):5.1f}" for c in CATEGORIES
        )
        ratio = r.share(10) / base.share(10) if base.share(10) else 0.0
        lines.append(
            f"{r.name:<26} {_pct(r.share(5))} {_pct(r.share(10))}{per}{r.ms:8.2f}{ratio:10.2f}x"
        )
    return lines


def _split_lines(rows: list[Recall], qs: Sequence[Probe]) -> list[str]:
    """R@10 of each row over the questions of the first half of the conversations (where the
    shipped constants were chosen) and of the second half (held out)."""
    convs = sorted({p.conversation for p in qs})
    first = set(convs[: len(convs) // 2])
    if not first or len(convs) < 2:
        return []
    head = f"conversations {len(first)} + {len(convs) - len(first)}"
    lines = [f"R@10 by half ({head}): {'tuned on':>10}{'held out':>10}"]
    for r in rows:
        parts = [
            [h for h, p in zip(r.hit10, qs, strict=True) if (p.conversation in first) == side]
            for side in (True, False)
        ]
        cells = "".join(f"{_pct(sum(h) / len(h)) if h else 'n/a':>10}" for h in parts)
        lines.append(f"  {r.name:<40}{cells}")
    return lines


def _targets(rows: list[Recall]) -> list[str]:
    out = []
    for label in ("lexical", "hybrid"):
        row = next((r for r in rows if r.name == f"shipped search, {label}"), None)
        goal = TARGETS[f"{label} R@10"]
        shown = f"{_pct(row.share(10))} {verdict(row.share(10) >= goal)}" if row else "n/a"
        out.append(f"target {label} R@10 >= {100 * goal:.0f}%: {shown}")
    return out


def measure(
    dataset: Path = DEFAULT_DATASET,
    *,
    conversations: int | None = None,
    sizes: Sequence[int] = SIZES,
    backends: Sequence[str] = ("sqlite", "postgresql"),
    model_spec: str | None = DEFAULT_MODEL,
    latency_only: bool = False,
) -> list[str]:
    """The whole report; ``conversations`` keeps the first N LoCoMo files (smoke runs);
    ``latency_only`` skips the LoCoMo parts."""
    if latency_only:
        built = build_embeddings(model_spec)
        model = CachedEmbeddings(built) if built is not None else None
        spec = model_spec.strip() if model is not None and model_spec else None
        return latency_lines(sizes, backends, model, spec)
    if not dataset.is_dir() or not any(dataset.glob("*.json")):
        return [f"skipped: LoCoMo data not found at {dataset} (python -m bench search "
                "--dataset <folder holding the locomo10 JSON files>)"]  # fmt: skip
    work = bench_locomo.load(dataset)
    if conversations is not None:
        keep = sorted({s.conversation for s in work.sessions})[:conversations]
        work.sessions = [s for s in work.sessions if s.conversation in keep]
        work.questions = [q for q in work.questions if q.conversation in keep]
    qs = probes(work)
    built = build_embeddings(model_spec)
    model = CachedEmbeddings(built) if built is not None else None
    spec = model_spec.strip() if model is not None and model_spec else None
    client = redis.Redis.from_url(redis_url())
    try:
        with phase("LoCoMo recall (replay, embedding, searches)"):
            rows, n_entries, n_spaces, cells = locomo_recall(work, qs, model, spec, client)
        with phase("evidence reachable at 2 KB"):
            files, found, either = reachable(work, qs, model, spec, client)
    finally:
        client.close()
    share = (lambda n: n / len(qs)) if qs else (lambda n: 0.0)
    lines = [
        f"LoCoMo: {len(work.observations):,} observations -> {n_entries:,} active entries in "
        f"{n_spaces} namespaces (rules consolidator, no file budget, SQLite); {len(qs):,} "
        "answerable questions (categories 1-4), the question as the query in its owner's "
        "namespace, a hit when an evidence observation is in the top k; "
        + (f"embeddings {spec}" if spec else "no embeddings"),
        *_recall_lines(rows),
        *_split_lines(rows, qs),
        *_targets(rows),
        *cells,
    ]
    if model is not None:
        lines.append(f"embedding cost ({spec}): {model.ms_per_text:.1f} ms per stored "
                     f"candidate (batches of up to 64), {model.ms_per_query:.1f} ms per query "
                     "(p50); the hybrid and dense rows above exclude it")  # fmt: skip
    kind = "hybrid " if model is not None else ""
    lines.append(
        f"evidence reachable at a 2 KB budget: {_pct(share(either))} (in the owner's files "
        f"{_pct(share(files))}, in the shipped {kind}search's top 10 {_pct(share(found))}); "
        f"target >= 85%: {verdict(share(either) >= 0.85)}"
    )
    return lines + latency_lines(sizes, backends, model, spec)


def latency_lines(
    sizes: Sequence[int],
    backends: Sequence[str],
    model: CachedEmbeddings | None,
    spec: str | None,
) -> list[str]:
    """Median ms per query at each size, shipped search per backend, then the baselines."""
    texts = sentences(seed=5, count=max(sizes))
    table: dict[str, list[float]] = {}
    commits: dict[str, list[float]] = {}
    firsts: dict[str, list[float]] = {}
    for backend in backends:
        label = "SQLite" if backend == "sqlite" else "PostgreSQL"
        if backend == "postgresql" and (why := postgres_reachable()):
            table[f"shipped lexical, {label}"] = []
            print(f"PostgreSQL skipped: {why}")
            continue
        with _database(backend) as url, phase(f"latency on {label}"):
            for kind, ms in store_latency(url, sizes, texts, model, spec).items():
                if kind == "commit":
                    commits[label] = ms
                elif kind == "first":
                    firsts[label] = ms
                else:
                    table[f"shipped {kind}, {label}"] = ms
    dim = len(model.embed_query("dimension")) if model is not None else 384
    baselines = baseline_latency(sizes, texts, dim=dim)
    if model is None:
        baselines = {k: v for k, v in baselines.items() if k.startswith("FTS5")}
    table |= baselines
    head = "".join(f" {n:>9,}" for n in sizes)
    lines = [f"{'query p50 ms, one namespace of':<32}{head}  {sizes[-1]:,}/{sizes[0]:,}"]
    for name, ms in table.items():
        if not ms:
            lines.append(f"{name:<32} (skipped)")
            continue
        cells = "".join(f" {m:9.2f}" for m in ms)
        lines.append(f"{name:<32}{cells}  {ms[-1] / ms[0]:8.2f}x")
    for label, rates in commits.items():
        shown = ", ".join(f"{r:,.0f}" for r in rates)
        lines.append(f"bulk commit through the store, {label}: {shown} entries/s (growing to "
                     "each size, chunks of 5,000 entries)")  # fmt: skip
    for label, ms in firsts.items():
        shown = ", ".join(f"{m:,.0f}" for m in ms)
        lines.append(f"first hybrid query after each growth, {label}: {shown} ms (every vector "
                     "read again; cells built from 20,000)")  # fmt: skip
    at = {n: i for i, n in enumerate(sizes)}
    for name, ms in table.items():
        if name.startswith("shipped") and ms:
            p10 = "n/a"
            if 10_000 in at:
                p10 = (
                    f"{ms[at[10_000]]:.2f} ms {verdict(ms[at[10_000]] <= TARGETS['p50 at 10k ms'])}"
                )
            growth = verdict(ms[-1] <= 2 * ms[0])
            lines.append(f"target {name}: p50 at 10k <= 10 ms: {p10}; "
                         f"{sizes[-1]:,} <= 2x {sizes[0]:,}: {growth}")  # fmt: skip
    return lines


def run() -> list[str]:
    return measure()


def main(argv: list[str]) -> int:
    first_line = (__doc__ or "").split("\n")[0]
    parser = argparse.ArgumentParser(prog="python -m bench search", description=first_line)
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET, help="the locomo10 folder")
    parser.add_argument("--conversations", type=int, default=None, help="first N only")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="latency namespace sizes, comma-separated")  # fmt: skip
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--embeddings", default=DEFAULT_MODEL,
                        help="provider:model, or '' for lexical only")  # fmt: skip
    parser.add_argument("--latency-only", action="store_true",
                        help="only the latency table (no LoCoMo data needed)")  # fmt: skip
    args = parser.parse_args(argv)
    started = time.perf_counter()
    lines = measure(
        args.dataset, conversations=args.conversations,
        sizes=[int(s) for s in args.sizes.split(",")],
        backends=[b for b in args.backends.split(",") if b], model_spec=args.embeddings or None,
        latency_only=args.latency_only,
    )  # fmt: skip
    print(*lines, sep="\n")
    print(f"({time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
