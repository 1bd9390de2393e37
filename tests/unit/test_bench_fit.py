"""``python -m bench updates --fit``: the logistic fit that writes the shipped merge models."""

from __future__ import annotations

import math

from bench.bench_updates import logistic
from worker.consolidation.meaning import MergeModel


def _rows() -> tuple[list[dict[str, float]], list[bool]]:
    """Pairs told apart by their cosine; the correction reading is 0 for every one of them (as
    it is for a model fitted on pairs none of which corrects)."""
    merged = [{"cosine": 0.90 + i / 100, "correction": 0.0} for i in range(5)]
    apart = [{"cosine": 0.70 + i / 100, "correction": 0.0} for i in range(5)]
    return merged + apart, [True] * 5 + [False] * 5


def test_a_reading_that_never_varies_keeps_a_scale_of_one_and_the_model_answers() -> None:
    rows, answers = _rows()
    model = MergeModel.of(vars(logistic(rows, answers)))  # as written to and read from JSON

    assert model.scale[model.features.index("correction")] == 1.0
    assert all(math.isfinite(model.probability(row)) for row in rows)


def test_the_fitted_model_separates_the_pairs_it_was_fitted_on() -> None:
    rows, answers = _rows()
    model = logistic(rows, answers)

    assert [model.probability(row) >= model.threshold for row in rows] == answers
