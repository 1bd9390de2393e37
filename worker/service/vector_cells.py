"""Cells over a namespace's unit vectors: an inverted-file index that finds a query's nearest
vectors by scanning a few cells instead of every row.

A brute-force cosine reads every vector of the namespace per query (about 150 MB at 100k
entries of 384 floats): its cost grows with the namespace. Above :data:`CELL_MIN_ROWS` rows
the vectors are grouped into about ``sqrt(n)`` cells by spherical k-means (a fixed seed, so a
build is reproducible), stored cell after cell, and a query scans only the cells whose
centroids are closest to it, about :data:`SCAN_ROWS` rows whatever the size. That is an
approximation (a near vector in a cell not scanned is missed; ``python -m bench search``
prints the loss), and it is only a candidate generator: the caller scores the candidates
exactly, and the entries it returns are read back from SQL, active ones of the namespace only.

Refreshing after a commit keeps the centroids and the cell of every vector already placed,
and places only new vectors (:func:`place`); the cells are trained again when the namespace
has doubled or halved since they were trained.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

#: Rows from which a namespace's vectors are searched through cells; brute force below, where
#: it costs under a millisecond and is exact.
CELL_MIN_ROWS: Final = 20_000
#: Rows a query scans (whole cells, nearest centroids first); the rest of the cost is fixed.
SCAN_ROWS: Final = 8_192
#: Rows sampled to train the centroids, and the k-means rounds over them.
TRAIN_SAMPLE: Final = 16_384
TRAIN_ROUNDS: Final = 8
#: Rows placed per matrix product while training or placing (bounds the scores' memory).
_CHUNK: Final = 8_192


@dataclass(frozen=True)
class Cells:
    """Cell ``c`` holds rows ``offsets[c]:offsets[c + 1]`` of the matrix it was built for
    (whose rows are grouped cell after cell); ``trained_rows`` is the size it was trained at."""

    centroids: np.ndarray
    offsets: np.ndarray
    trained_rows: int

    def cell_of_rows(self) -> np.ndarray:
        """Each row's cell."""
        sizes = np.diff(self.offsets)
        labels: np.ndarray = np.repeat(np.arange(len(sizes)), sizes)
        return labels

    def scan(
        self, unit_rows: np.ndarray, query: np.ndarray, rows: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The rows of the cells nearest to ``query``, about ``rows`` of them (at least one
        cell), and their dot products with it. Each cell is a contiguous slice: no copy."""
        # einsum, not ``@``: see :mod:`worker.service.memory_search` (one thread, no BLAS wait).
        near = np.argsort(-np.einsum("ij,j->i", self.centroids, query), kind="stable")
        sizes = np.diff(self.offsets)[near]
        take = int(np.searchsorted(np.cumsum(sizes), rows)) + 1
        spans = [(int(self.offsets[c]), int(self.offsets[c + 1])) for c in near[:take]]
        spans = [(lo, hi) for lo, hi in spans if hi > lo]
        if not spans:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        found = np.concatenate([np.arange(lo, hi) for lo, hi in spans])
        dots = np.concatenate([np.einsum("ij,j->i", unit_rows[lo:hi], query) for lo, hi in spans])
        return found, dots


def _nearest(unit_rows: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Each row's nearest centroid (largest dot product)."""
    out = np.empty(unit_rows.shape[0], dtype=np.int64)
    for lo in range(0, unit_rows.shape[0], _CHUNK):
        out[lo : lo + _CHUNK] = np.argmax(unit_rows[lo : lo + _CHUNK] @ centroids.T, axis=1)
    return out


def _normalised(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: np.ndarray = (matrix / np.maximum(norms, 1e-12)).astype(np.float32)
    return unit


def train(unit_rows: np.ndarray, *, seed: int = 0) -> np.ndarray:
    """About ``sqrt(n)`` unit centroids for ``unit_rows`` (spherical k-means over a sample)."""
    rng = np.random.default_rng(seed)
    n = unit_rows.shape[0]
    count = max(1, round(n**0.5))
    sample = unit_rows[np.sort(rng.choice(n, size=min(n, TRAIN_SAMPLE), replace=False))]
    centroids: np.ndarray = sample[rng.choice(sample.shape[0], size=count, replace=False)].copy()
    for _ in range(TRAIN_ROUNDS):
        labels = _nearest(sample, centroids)
        order = np.argsort(labels, kind="stable")
        counts = np.bincount(labels, minlength=count)
        sums = np.zeros_like(centroids)
        full = np.flatnonzero(counts)
        starts = np.concatenate([[0], np.cumsum(counts)])[full]
        sums[full] = np.add.reduceat(sample[order], starts, axis=0)
        empty = counts == 0
        # A cell that lost every row restarts on a random sample row, not on zero.
        sums[empty] = sample[rng.choice(sample.shape[0], size=int(empty.sum()))]
        centroids = _normalised(sums)
    return centroids


def place(
    unit_rows: np.ndarray,
    entry_ids: Sequence[str],
    previous: tuple[Cells, Mapping[str, int]] | None = None,
) -> tuple[np.ndarray, Cells]:
    """The order that groups ``unit_rows`` cell after cell, and the cells in that order.

    ``previous`` (the cells of an earlier matrix of the namespace and each of its ids' row
    there) is reused when the size is within a factor two of the one it was trained at: a row
    whose id it placed keeps its cell, others go to their nearest centroid."""
    n = unit_rows.shape[0]
    labels: np.ndarray
    if previous is not None and previous[0].trained_rows / 2 <= n <= 2 * previous[0].trained_rows:
        cells, rows = previous
        old = cells.cell_of_rows()
        labels = np.array([old[rows[i]] if i in rows else -1 for i in entry_ids], dtype=np.int64)
        new = np.flatnonzero(labels < 0)
        if new.size:
            labels[new] = _nearest(unit_rows[new], cells.centroids)
        centroids, trained = cells.centroids, cells.trained_rows
    else:
        centroids, trained = train(unit_rows), n
        labels = _nearest(unit_rows, centroids)
    order: np.ndarray = np.argsort(labels, kind="stable")
    counts = np.bincount(labels, minlength=centroids.shape[0])
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return order, Cells(centroids, offsets, trained)
