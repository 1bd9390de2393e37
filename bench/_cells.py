"""The vector cells' recall on real embeddings: LoCoMo's vectors pooled into one matrix."""

from __future__ import annotations

import numpy as np

from worker.service import vector_cells


def cell_recall_lines(matrices: dict[str, np.ndarray], queries: dict[str, np.ndarray]) -> list[str]:
    """How many of the exact top 10 the vector cells find, over every LoCoMo vector pooled
    into one matrix and every question as the query, scanning the share of rows a query scans
    at 100k and at 20k entries (the cells' real sizes are too large for LoCoMo's namespaces)."""
    pool = np.vstack(list(matrices.values())).astype(np.float32)
    pool /= np.maximum(np.linalg.norm(pool, axis=1, keepdims=True), 1e-12)
    vectors = np.vstack(list(queries.values())).astype(np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    n = pool.shape[0]
    if n < 100:
        return []
    order, cells = vector_cells.place(pool, [str(i) for i in range(n)])
    grouped = pool[order]
    exact = np.argsort(-(vectors @ grouped.T), axis=1)[:, :10]
    lines = []
    for size in (100_000, 20_000):
        scan = max(1, round(vector_cells.SCAN_ROWS * n / size))
        found = 0
        scanned = 0
        for q, truth in zip(vectors, exact, strict=True):
            rows, dots = cells.scan(grouped, q, scan)
            scanned += len(rows)
            top = rows[np.argsort(-dots, kind="stable")[:10]]
            found += len(set(top.tolist()) & set(truth.tolist()))
        lines.append(
            f"vector cells at the scan share of {size:,} entries ({scan / n:.1%} of rows; "
            f"{scanned / len(vectors):,.0f} of {n:,} pooled LoCoMo vectors scanned per query, "
            f"{cells.centroids.shape[0]} cells): recall@10 against brute force "
            f"{100 * found / (10 * len(vectors)):.1f}%"
        )
    return lines
