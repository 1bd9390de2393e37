"""Vector cells: every row in exactly one cell, a refresh that keeps the cells of the rows it
already placed, a scan that reads whole cells nearest first."""

from __future__ import annotations

import numpy as np

from worker.service import vector_cells


def _unit(n: int, seed: int, dim: int = 16) -> np.ndarray:
    m = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    unit: np.ndarray = m / np.linalg.norm(m, axis=1, keepdims=True)
    return unit


def _ids(n: int, prefix: str = "e") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def _placed(unit: np.ndarray, ids: list[str]) -> tuple[vector_cells.Cells, dict[str, int]]:
    order, cells = vector_cells.place(unit, ids)
    return cells, {ids[int(o)]: n for n, o in enumerate(order)}


def test_every_row_is_in_exactly_one_cell_and_the_cells_cover_the_matrix() -> None:
    order, cells = vector_cells.place(_unit(400, 1), _ids(400))

    assert sorted(order.tolist()) == list(range(400))
    assert (cells.offsets[0], cells.offsets[-1], cells.centroids.shape[0]) == (0, 400, 20)
    assert bool(np.all(np.diff(cells.offsets) >= 0))


def test_building_the_same_vectors_twice_gives_the_same_cells() -> None:
    unit = _unit(300, 2)

    first, second = vector_cells.place(unit, _ids(300)), vector_cells.place(unit, _ids(300))

    assert np.array_equal(first[0], second[0])
    assert np.array_equal(first[1].centroids, second[1].centroids)


def test_a_refresh_keeps_the_centroids_and_each_placed_row_in_its_cell() -> None:
    unit, ids = _unit(400, 3), _ids(400)
    cells, rows = _placed(unit, ids)
    old_cell = cells.cell_of_rows()
    grown = np.concatenate([unit[50:], _unit(30, 4)])  # 50 rows gone, 30 new
    grown_ids = ids[50:] + _ids(30, "n")

    order, again = vector_cells.place(grown, grown_ids, (cells, rows))

    new_cell = again.cell_of_rows()
    where = {grown_ids[int(o)]: n for n, o in enumerate(order)}
    assert np.array_equal(again.centroids, cells.centroids)
    assert all(new_cell[where[i]] == old_cell[rows[i]] for i in ids[50:])
    nearest = np.argmax(grown[350:] @ cells.centroids.T, axis=1)
    assert [new_cell[where[f"n{k}"]] for k in range(30)] == nearest.tolist()


def test_cells_are_trained_again_once_the_namespace_has_doubled() -> None:
    unit = _unit(200, 5)
    cells, rows = _placed(unit, _ids(200))
    doubled = np.concatenate([unit, _unit(201, 6)])

    _, again = vector_cells.place(doubled, _ids(200) + _ids(201, "n"), (cells, rows))

    assert (again.trained_rows, again.centroids.shape[0]) == (401, 20)


def test_a_scan_reads_whole_cells_nearest_first_until_it_has_the_rows_asked_for() -> None:
    unit = _unit(400, 7)
    order, cells = vector_cells.place(unit, _ids(400))
    grouped = unit[order]
    query = grouped[0]

    found, dots = cells.scan(grouped, query, 50)

    sizes = np.diff(cells.offsets)
    near = np.argsort(-(cells.centroids @ query), kind="stable")
    cells_read = sorted(set(cells.cell_of_rows()[found].tolist()))
    take = int(np.searchsorted(np.cumsum(sizes[near]), 50)) + 1
    assert cells_read == sorted(near[:take].tolist())
    assert len(found) == int(sizes[near[:take]].sum()) >= 50
    assert np.allclose(dots, grouped[found] @ query, atol=1e-6)
