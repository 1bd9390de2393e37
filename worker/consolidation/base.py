"""The consolidator protocol: pure code from (state, batch) to a plan.

A consolidator reads one namespace's state and a batch of its candidates and answers a
:class:`~worker.consolidation.types.Plan`; it writes nothing. One that decides by meaning holds
its :class:`~worker.consolidation.meaning.Meaning` as ``meaning`` (the built-in ones do, when
embeddings are configured): the trust check on its plan asks the same questions with it
(:func:`~worker.consolidation.engine.consolidate_batch`); without one, by words alone. The
caller validates the plan (:func:`~worker.consolidation.validate.validate_plan`) and applies it
(:func:`~worker.consolidation.apply.apply_plan`). Capabilities are class attributes so
:func:`~worker.consolidation.loading.load_consolidator` can check them at start-up, before any
batch is claimed.

>>> from worker.consolidation.rules import RulesConsolidator
>>> isinstance(RulesConsolidator(), Consolidator)
True
>>> (RulesConsolidator.needs_model, RulesConsolidator.handles_turns)
(False, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar, Protocol, runtime_checkable

from worker.consolidation.types import Plan
from worker.models import Candidate
from worker.values import NamespaceState


@runtime_checkable
class Consolidator(Protocol):
    """Merges a batch of candidates into a namespace's memories."""

    #: Short name recorded on runs and metrics, e.g. ``"rules"`` or ``"llm"``.
    name: ClassVar[str]
    #: True when the class needs a chat model (``MEMWORKER_MODEL``) to work.
    needs_model: ClassVar[bool]
    #: True when it can extract memories from ``turn`` candidates (thread scans need this).
    handles_turns: ClassVar[bool]

    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        """A plan that accounts for every candidate of ``batch`` against ``state``."""
        ...
