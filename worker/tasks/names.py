"""Task and queue names, declared once."""

from __future__ import annotations

from typing import Final

#: Sweeps, schedules and outbox delivery share a queue of short tasks, kept apart from merges so a
#: long LLM call never delays claiming due namespaces.
SWEEP_QUEUE: Final = "memworker.sweep"
#: Merges: one task per claimed namespace batch.
CONSOLIDATE_QUEUE: Final = "memworker.consolidate"

SWEEP_TASK: Final = "memworker.sweep"
CONSOLIDATE_TASK: Final = "memworker.consolidate"
DELIVER_TASK: Final = "memworker.deliver_outbox"
SCHEDULED_RUN_TASK: Final = "memworker.scheduled_run"
