"""The one vocabulary of what happened to a namespace's batch, and what each outcome means.

Every use case that consolidates, previews or reconciles a namespace reports one
:class:`Outcome`. The table :data:`MEANINGS` is the single place that says, per outcome, what
the ``runs`` table records and whether work was left undone — which the metrics (a failure
counted), the CLI (exit code 1) and the Celery result all read from here.

>>> Outcome.COMMITTED.run_outcome, Outcome.COMMITTED.undone
('ok', False)
>>> Outcome.DEAD.run_outcome, Outcome.DEAD.undone
('failed', True)
>>> Outcome.PREVIEWED.run_outcome is None  # a preview writes no run row
True
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal, get_args

#: What a row of the ``runs`` table records as a run's outcome.
RunOutcome = Literal["ok", "failed", "stale"]

#: The valid ``runs.outcome`` values; the store checks every row it writes against them.
RUN_OUTCOMES: Final = frozenset(get_args(RunOutcome))


class Outcome(StrEnum):
    """What one attempt on one namespace did (values are stable: logs, JSON, metric labels)."""

    COMMITTED = "committed"  #: a new version was committed
    NOTHING_NEW = "nothing_new"  #: every candidate was already applied; acknowledged only
    PREVIEWED = "dry_run"  #: a preview found changes; nothing was written
    STALE = "stale"  #: another batch committed first; given back untouched, retried
    FAILED = "failed"  #: the batch failed; it stays pending and is retried
    DEAD = "dead"  #: the batch failed once too often and was dead-lettered now
    NOTHING_PENDING = "nothing_pending"  #: nothing was queued for the namespace
    LEASED = "leased"  #: a worker holds the namespace; it was left to that worker
    DEAD_LETTERED = "dead_lettered"  #: already dead-lettered; waits for `memworker dlq retry`

    @property
    def run_outcome(self) -> RunOutcome | None:
        """What the ``runs`` table records for this outcome (None: no run row)."""
        return MEANINGS[self].run_outcome

    @property
    def undone(self) -> bool:
        """True when work is left undone: a failure for metrics, exit code 1 for the CLI."""
        return MEANINGS[self].undone


@dataclass(frozen=True)
class Meaning:
    """What an outcome stands for outside the use case that reported it."""

    run_outcome: RunOutcome | None
    undone: bool


MEANINGS: Final[dict[Outcome, Meaning]] = {
    Outcome.COMMITTED: Meaning("ok", undone=False),
    Outcome.NOTHING_NEW: Meaning(None, undone=False),
    Outcome.PREVIEWED: Meaning(None, undone=False),
    Outcome.STALE: Meaning("stale", undone=True),
    Outcome.FAILED: Meaning("failed", undone=True),
    Outcome.DEAD: Meaning("failed", undone=True),
    Outcome.NOTHING_PENDING: Meaning(None, undone=False),
    Outcome.LEASED: Meaning(None, undone=False),
    Outcome.DEAD_LETTERED: Meaning(None, undone=True),
}
