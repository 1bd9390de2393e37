"""Apply a validated plan to a namespace state: new entries, ledger, files and diffs.

Pure and deterministic: the same state, batch, plan and ``now`` give an equal
:class:`~worker.consolidation.types.AppliedPlan` (entry ids come from
:mod:`~worker.consolidation.ids`). Nothing is deleted: superseded and forgotten entries get
``invalid_at`` and a reason and stay in history.

- Operations touching a read-only (``state.read_only_paths``) or sensitive path become
  :class:`~worker.consolidation.types.PendingApproval` instead, and so do later operations that
  depend on an entry such an operation would have created. A confirmation changes no file
  content and is applied anywhere.
- Each changed file is rendered within ``file_budget_bytes``
  (:func:`~worker.consolidation.render.select`): over it, the file keeps the entries most worth
  loading (keyed, confirmed, recent) and ends with one line saying how many more
  ``search_memory`` reaches. The entries left out stay **active** (searchable, mergeable,
  shown again when room frees up); nothing is invalidated to fit a budget.
- Files are rendered (:func:`~worker.consolidation.render.render_counted`) only for paths the plan
  touched, and returned only when the content differs from ``current_files``.

The ledger has one row per candidate, ordered by (``created_at``, id) so the batch order does
not matter; a candidate backing several operations reports the strongest outcome (merged >
forgotten > duplicate > pending_approval > rejected).

``counts``: ``added``, ``superseded``, ``forgotten`` count entries, ``evicted`` the active
entries the changed files leave out; ``duplicates`` and ``rejected`` count candidates;
``pending_approval`` counts queued operations.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Final

from worker.consolidation.ids import created_ids
from worker.consolidation.render import render_counted
from worker.consolidation.types import Add, Confirm, Invalidate, Operation, Plan, Reject, Supersede
from worker.errors import InvalidPlan
from worker.models import Candidate
from worker.values import (
    AppliedPlan,
    Entry,
    FileChange,
    LedgerOutcome,
    LedgerRow,
    NamespaceState,
    PendingApproval,
)

#: Provenance kept per entry: the latest candidate and trace ids. A fact confirmed in every
#: conversation would otherwise grow its row without bound.
MAX_PROVENANCE: Final = 50

#: When one candidate backs several operations, its ledger row reports the strongest outcome.
_OUTCOME_RANK: Final[dict[LedgerOutcome, int]] = {
    "merged": 0,
    "forgotten": 1,
    "duplicate": 2,
    "pending_approval": 3,
    "rejected": 4,
}

COUNT_NAMES: Final = (
    "added",
    "superseded",
    "duplicates",
    "forgotten",
    "rejected",
    "evicted",
    "pending_approval",
)


class _Applier:
    def __init__(
        self,
        state: NamespaceState,
        batch: Sequence[Candidate],
        now: datetime,
        protected: frozenset[str],
    ) -> None:
        self.state = state
        self.now = now
        self.protected = protected
        self.cands = {c.id: c for c in batch}
        self.work: dict[str, Entry] = {e.id: e for e in state.entries}
        self.existing = frozenset(self.work)
        self.new_ids: list[str] = []
        self.changed: set[str] = set()
        self.touched: set[str] = set()
        self.waiting: dict[str, str] = {}  # id a waiting operation would create -> its path
        self.approvals: list[PendingApproval] = []
        #: candidate id -> (outcome, reason, entry id, the operation that decided it)
        self.outcomes: dict[str, tuple[LedgerOutcome, str | None, str | None, str]] = {}
        self.counts = dict.fromkeys(COUNT_NAMES, 0)

    # --- bookkeeping ---------------------------------------------------------------------
    def _outcome(
        self, op: Operation, outcome: LedgerOutcome, reason: str | None, entry_id: str | None
    ) -> None:
        for cid in op.candidate_ids:
            old = self.outcomes.get(cid)
            if old is None or _OUTCOME_RANK[outcome] < _OUTCOME_RANK[old[0]]:
                self.outcomes[cid] = (outcome, reason, entry_id, op.op)

    def _put(self, entry: Entry) -> None:
        self.work[entry.id] = entry
        if entry.id in self.existing:
            self.changed.add(entry.id)

    def _provenance(
        self, cids: Sequence[str], before: tuple[str, ...] = (), traces: tuple[str, ...] = ()
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        ids = tuple(dict.fromkeys((*before, *cids)))[-MAX_PROVENANCE:]
        new_traces = (self.cands[c].trace_id for c in cids if c in self.cands)
        return ids, tuple(dict.fromkeys((*traces, *new_traces)))[-MAX_PROVENANCE:]

    def _valid_from(self, cids: Sequence[str]) -> datetime:
        """When the entry became true: its earliest candidate's event time (``said_at``: when
        it was said, not when it arrived); the entry's ``created_at`` is the commit time."""
        times = [self.cands[c].said_at for c in cids if c in self.cands]
        return min(times) if times else self.now

    # --- operations ----------------------------------------------------------------------
    def op(self, op: Operation, new_id: str | None) -> None:
        if isinstance(op, Reject):
            self._outcome(op, "rejected", op.reason, None)
            return
        if isinstance(op, Confirm):
            self._confirm(op)
            return
        paths = {op.path} if isinstance(op, Add) else set()
        if isinstance(op, Supersede | Invalidate):
            old = self.work.get(op.entry_id)
            if old is not None:
                paths.add(old.path)
                if isinstance(op, Supersede):
                    paths.add(op.path or old.path)
        blocked = sorted(paths & self.protected)
        depends = isinstance(op, Supersede | Invalidate) and op.entry_id in self.waiting
        if blocked or depends:
            self._wait(op, new_id, blocked[0] if blocked else None)
            return
        self.touched |= paths
        if isinstance(op, Add):
            assert new_id is not None  # validated: an add names its candidates
            self._create(new_id, op.path, op.text, op.key, op.candidate_ids)
            self.counts["added"] += 1
            self._outcome(op, "merged", None, new_id)
        elif isinstance(op, Supersede):
            assert new_id is not None
            old = self.work[op.entry_id]
            self._put(
                old.model_copy(
                    update={
                        "invalid_at": self.now,
                        "invalid_reason": op.reason,
                        "superseded_by": new_id,
                    }
                )
            )
            key = op.key if op.key is not None else old.key
            self._create(new_id, op.path or old.path, op.text, key, op.candidate_ids)
            self.counts["superseded"] += 1
            self._outcome(op, "merged", op.reason, new_id)
        else:
            old = self.work[op.entry_id]
            self._put(old.model_copy(update={"invalid_at": self.now, "invalid_reason": op.reason}))
            self.counts["forgotten"] += 1
            self._outcome(op, "forgotten", op.reason, op.entry_id)

    def _confirm(self, op: Confirm) -> None:
        if op.entry_id in self.waiting:
            self._wait(op, None, None)
            return
        old = self.work[op.entry_id]
        ids, traces = self._provenance(op.candidate_ids, old.candidate_ids, old.trace_ids)
        self._put(
            old.model_copy(
                update={
                    "confirmations": old.confirmations + len(op.candidate_ids),
                    "last_confirmed_at": max(old.last_confirmed_at, self.now),
                    "candidate_ids": ids,
                    "trace_ids": traces,
                }
            )
        )
        self.counts["duplicates"] += len(op.candidate_ids)
        self._outcome(op, "duplicate", None, op.entry_id)

    def _create(
        self, new_id: str, path: str, body: str, key: str | None, cids: Sequence[str]
    ) -> None:
        ids, traces = self._provenance(cids)
        self.work[new_id] = Entry(
            id=new_id,
            path=path,
            text=body.strip(),
            key=key,
            valid_from=self._valid_from(cids),
            candidate_ids=ids,
            trace_ids=traces,
            created_at=self.now,
            last_confirmed_at=self.now,
        )
        self.new_ids.append(new_id)

    def _wait(self, op: Operation, new_id: str | None, path: str | None) -> None:
        if path is None:  # it depends on an entry a waiting operation would create
            assert isinstance(op, Confirm | Supersede | Invalidate)
            path = self.waiting[op.entry_id]
            reason = f"depends on a change to {path} that waits for approval"
        else:
            reason = f"{path} is read-only or sensitive: waiting for approval"
        if new_id is not None:
            self.waiting[new_id] = path
        self.approvals.append(
            PendingApproval(
                path=path,
                operation=op.model_dump(mode="json"),
                candidate_ids=tuple(op.candidate_ids),
            )
        )
        self.counts["pending_approval"] += 1
        self._outcome(op, "pending_approval", reason, None)


def apply_plan(
    state: NamespaceState,
    batch: Sequence[Candidate],
    plan: Plan,
    *,
    now: datetime,
    current_files: Mapping[str, str],
    file_budget_bytes: int,
    sensitive_paths: Collection[str],
) -> AppliedPlan:
    """Everything the commit writes for ``plan`` (which :func:`validate_plan` accepted)."""
    applier = _Applier(
        state, batch, now, frozenset(state.read_only_paths) | frozenset(sensitive_paths)
    )
    for op, new_id in zip(plan.ops, created_ids(state.namespace, plan.ops), strict=True):
        applier.op(op, new_id)
    return _finish(applier, batch, current_files, file_budget_bytes)


def compact(
    state: NamespaceState,
    *,
    now: datetime,
    current_files: Mapping[str, str],
    file_budget_bytes: int,
    sensitive_paths: Collection[str],
) -> AppliedPlan:
    """Re-render *every* writable file within the budget (a batch only renders the files it
    touched), e.g. after the budget was lowered. Protected paths are left alone; no entry
    changes."""
    protected = frozenset(state.read_only_paths) | frozenset(sensitive_paths)
    applier = _Applier(state, (), now, protected)
    applier.touched = {e.path for e in state.entries if e.active} - protected
    return _finish(applier, (), current_files, file_budget_bytes)


def _finish(
    applier: _Applier,
    batch: Sequence[Candidate],
    current_files: Mapping[str, str],
    file_budget_bytes: int,
) -> AppliedPlan:
    files = []
    entries = list(applier.work.values())
    for path in sorted(applier.touched):
        content, hidden = render_counted(path, entries, file_budget_bytes)
        previous = current_files.get(path)
        has_entries = any(e.active and e.path == path for e in entries)
        if content == previous or (previous is None and not has_entries):
            continue
        applier.counts["evicted"] += hidden
        files.append(
            FileChange(
                path=path,
                content=content,
                previous_content=previous,
                diff=unified_diff(path, previous, content),
            )
        )
    ledger = []
    missing = []
    unique = {c.id: c for c in batch}
    for cid, cand in sorted(unique.items(), key=lambda kv: (kv[1].created_at, kv[0])):
        if cid not in applier.outcomes:
            missing.append(f"candidate {cid} is not accounted for")
            continue
        outcome, reason, entry_id, operation = applier.outcomes[cid]
        applier.counts["rejected"] += outcome == "rejected"
        ledger.append(
            LedgerRow(
                cid, cand.trace_id, outcome, reason, entry_id,
                source=cand.source, thread_id=cand.thread_id, said_at=cand.created_at,
                operation=operation,
            )
        )  # fmt: skip
    if missing:
        raise InvalidPlan(missing)
    return AppliedPlan(
        new_entries=tuple(applier.work[i] for i in applier.new_ids),
        changed_entries=tuple(applier.work[i] for i in sorted(applier.changed)),
        files=tuple(files),
        ledger=tuple(ledger),
        approvals=tuple(applier.approvals),
        counts=applier.counts,
    )


def unified_diff(path: str, previous: str | None, content: str) -> str:
    """The unified diff of one file version, ``a/…`` → ``b/…`` (from nothing when new).

    >>> print(unified_diff("/memories/x.md", "# X\\n", "# X\\n- tea\\n"), end="")
    --- a/memories/x.md
    +++ b/memories/x.md
    @@ -1 +1,2 @@
     # X
    +- tea
    """
    old = (previous or "").splitlines(keepends=True)
    fromfile = f"a{path}" if previous is not None else "/dev/null"
    lines = difflib.unified_diff(
        old, content.splitlines(keepends=True), fromfile=fromfile, tofile=f"b{path}"
    )
    return "".join(lines)


def advance(state: NamespaceState, applied: AppliedPlan) -> NamespaceState:
    """The state after ``applied``: for merging a split batch's next chunk against it."""
    entries = {e.id: e for e in state.entries}
    entries.update((e.id, e) for e in applied.changed_entries)
    entries.update((e.id, e) for e in applied.new_entries)
    return NamespaceState(
        namespace=state.namespace,
        version=state.version,
        applied_position=state.applied_position,
        entries=tuple(e for e in entries.values() if e.active),
        read_only_paths=state.read_only_paths,
    )
