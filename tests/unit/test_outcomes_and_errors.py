"""One vocabulary of outcomes and one tiered error tree, as callers rely on them."""

from __future__ import annotations

import inspect

import pytest

from worker import errors
from worker.cli.common import (
    EXIT_FAILURE,
    EXIT_NOT_FOUND,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    exit_code_for,
    parse_duration,
)
from worker.types import MEANINGS, RUN_OUTCOMES, Outcome

TIERS = (errors.UsageError, errors.Unavailable, errors.BatchFailed, errors.NotFound)


def test_every_outcome_has_one_meaning() -> None:
    assert set(MEANINGS) == set(Outcome)


def test_every_run_row_an_outcome_writes_is_one_the_store_accepts() -> None:
    written = {o.run_outcome for o in Outcome if o.run_outcome is not None}
    assert written == RUN_OUTCOMES


def test_only_attempts_that_committed_or_failed_write_a_run_row() -> None:
    assert {o for o in Outcome if o.run_outcome is not None} == {
        Outcome.COMMITTED,
        Outcome.STALE,
        Outcome.FAILED,
        Outcome.DEAD,
    }


def test_outcomes_that_leave_work_undone_are_the_failures() -> None:
    undone = {o for o in Outcome if o.undone}
    assert undone == {Outcome.STALE, Outcome.FAILED, Outcome.DEAD, Outcome.DEAD_LETTERED}


def _concrete_errors() -> list[type[errors.MemworkerError]]:
    bases = {errors.MemworkerError, errors.StoreError, *TIERS}
    return [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.MemworkerError) and cls not in bases
    ]


@pytest.mark.parametrize("error", _concrete_errors(), ids=lambda cls: cls.__name__)
def test_every_error_belongs_to_a_tier(error: type[errors.MemworkerError]) -> None:
    assert any(issubclass(error, tier) for tier in TIERS)


def test_usage_errors_are_value_errors_so_plain_python_callers_catch_them() -> None:
    assert issubclass(errors.InvalidCandidate, ValueError)
    assert issubclass(errors.InvalidOption, ValueError)
    assert issubclass(errors.ConfigurationError, ValueError)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (errors.InvalidOption, EXIT_USAGE),
        (errors.InvalidCandidate, EXIT_USAGE),
        (errors.ScheduleError, EXIT_USAGE),
        (errors.StoreRefused, EXIT_USAGE),
        (errors.NotFound, EXIT_NOT_FOUND),
        (errors.QueueUnavailable, EXIT_UNAVAILABLE),
        (errors.StoreUnavailable, EXIT_UNAVAILABLE),
        (errors.SinkError, EXIT_UNAVAILABLE),
        (errors.StaleVersion, EXIT_FAILURE),
        (errors.LeaseLost, EXIT_FAILURE),
        (errors.ConsolidatorError, EXIT_FAILURE),
    ],
)
def test_the_cli_exit_code_follows_the_error_tier(
    error: type[errors.MemworkerError], code: int
) -> None:
    assert exit_code_for(error("x")) == code


def test_a_malformed_duration_is_a_bad_option_not_a_bad_candidate() -> None:
    with pytest.raises(errors.InvalidOption, match="--since '6x' is not a duration") as caught:
        parse_duration("6x")
    assert not isinstance(caught.value, errors.InvalidCandidate)


def test_a_model_outage_is_both_a_failed_batch_and_an_unavailable_dependency() -> None:
    assert issubclass(errors.ModelUnavailable, errors.ConsolidatorError)
    assert issubclass(errors.ModelUnavailable, errors.Unavailable)
