"""Check a plan before anything is written: the guard rails every consolidator passes through.

:func:`validate_plan` walks the operations in order over the namespace's active entries (so an
operation may refer to an entry an earlier operation of the same plan creates, see
:mod:`~worker.consolidation.ids`) and lists every problem in plain words; an empty list means
the plan may be applied. The problems are fed back to an LLM for its one repair attempt, so each
names the operation and what to change.

Removals: an operation that retires an existing entry must be justified by a candidate it
names (:mod:`~worker.consolidation.justify`): a plan removes only what its batch asks for.
Text a consolidator writes passes the same guards as candidate text, by pattern and by meaning
(:func:`~worker.consolidation.guard_meaning.refusal`), and no path may be reserved
(:func:`~worker.namespaces.reserved_prefix`: the inbox route).

Accounting: every candidate of the batch is named by at least one operation; one candidate may
back several (a turn yields several memories, a forget removes several entries) but a rejected
candidate backs nothing else, and each gets exactly one ledger row.

>>> from worker.consolidation.types import Plan
>>> from worker.values import NamespaceState
>>> validate_plan(NamespaceState("user:u1", 0, None), [], Plan(), max_removals=5,
...               max_text_bytes=100)
[]
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence

from worker.consolidation.guard_meaning import refusal
from worker.consolidation.ids import created_ids
from worker.consolidation.justify import removal_problem, replacements
from worker.consolidation.meaning import Meaning
from worker.consolidation.types import Add, Confirm, Invalidate, Operation, Plan, Reject, Supersede
from worker.constants import KEY_PATTERN
from worker.errors import InvalidCandidate
from worker.models import Candidate, normalise_path
from worker.namespaces import reserved_prefix
from worker.values import NamespaceState


def validate_plan(
    state: NamespaceState,
    batch: Sequence[Candidate],
    plan: Plan,
    *,
    max_removals: int,
    max_text_bytes: int,
    reserved: Collection[str] = (),
    justify: bool = True,
    meaning: Meaning | None = None,
) -> list[str]:
    """Every problem of ``plan`` for ``batch`` against ``state``; empty when it is valid.

    ``reserved``: path prefixes refused beside the built-in ones (the deployment's inbox route).
    ``justify=False`` skips the removal check, for an operation an operator approved: it was
    justified by its real candidates when proposed, and they have left the queue since.
    """
    problems: list[str] = []
    batch_ids = {c.id for c in batch}
    by_id = {c.id: c for c in batch}
    written = replacements(plan.ops)
    if justify and meaning is not None:
        meaning.prepare(_compared_texts(state, batch, plan))
    entries = {e.id: e for e in state.entries}
    for cand in batch:
        if cand.namespace != state.namespace:
            problems.append(
                f"candidate {cand.id} belongs to namespace {cand.namespace}, not "
                f"{state.namespace}; batches never mix namespaces"
            )
    live = {e.id for e in state.entries if e.active}
    existing = {e.id for e in state.entries}
    gone: set[str] = set()  # entries invalidated earlier in this plan
    uses: dict[str, list[str]] = defaultdict(list)
    removals = 0
    for index, (op, new_id) in enumerate(
        zip(plan.ops, created_ids(state.namespace, plan.ops), strict=True), 1
    ):
        label = f"operation {index} ({op.op})"
        problems += _candidates(label, op, batch_ids, uses)
        if isinstance(op, Confirm | Supersede | Invalidate):
            if op.entry_id in live:
                if not isinstance(op, Confirm):
                    live.discard(op.entry_id)
                    gone.add(op.entry_id)
                    removals += op.entry_id in existing
                    if justify and op.entry_id in existing:
                        old = entries[op.entry_id]
                        problem = removal_problem(label, op, old, by_id, written, meaning=meaning)
                        problems += [problem] if problem else []
            elif op.entry_id in gone or op.entry_id in existing:
                problems.append(f"{label}: entry {op.entry_id} is no longer active")
            else:
                problems.append(
                    f"{label}: unknown entry id {op.entry_id}; refer only to entries of this "
                    "namespace shown to you"
                )
        if isinstance(op, Add | Supersede):
            problems += _content(label, op, max_text_bytes, reserved, meaning)
        if isinstance(op, Invalidate | Reject | Supersede) and not op.reason.strip():
            problems.append(f"{label}: give a reason")
        if new_id is not None:
            live.add(new_id)
    for cid in sorted(batch_ids - uses.keys()):
        problems.append(f"candidate {cid} is not accounted for; add, confirm or reject it")
    for cid, kinds in sorted(uses.items()):
        if "reject" in kinds and len(kinds) > 1:
            problems.append(f"candidate {cid} is rejected and also used by another operation")
    if removals > max_removals:
        problems.append(
            f"the plan removes {removals} existing entries; at most {max_removals} may be "
            "invalidated or superseded per batch"
        )
    return problems


def _candidates(
    label: str, op: Operation, batch_ids: set[str], uses: dict[str, list[str]]
) -> list[str]:
    problems = []
    if not op.candidate_ids and not isinstance(op, Invalidate):
        problems.append(f"{label}: name the candidate ids it accounts for")
    if len(set(op.candidate_ids)) != len(op.candidate_ids):
        problems.append(f"{label}: a candidate id is listed twice")
    for cid in dict.fromkeys(op.candidate_ids):
        if cid in batch_ids:
            uses[cid].append(op.op)
        else:
            problems.append(f"{label}: unknown candidate id {cid}; use only ids of this batch")
    return problems


def _content(
    label: str,
    op: Add | Supersede,
    max_text_bytes: int,
    reserved: Collection[str],
    meaning: Meaning | None,
) -> list[str]:
    problems = []
    body = op.text.strip()
    size = len(body.encode("utf-8", errors="surrogatepass"))
    if not body:
        problems.append(f"{label}: text is empty")
    elif size > max_text_bytes:
        problems.append(f"{label}: text is {size} bytes; the limit is {max_text_bytes}")
    reason = refusal(op.text, meaning)
    if reason is not None:
        problems.append(f"{label}: text is not storable ({reason}); reject that candidate")
    if op.path is not None:
        try:
            normal = normalise_path(op.path)
        except InvalidCandidate as exc:
            problems.append(f"{label}: bad path: {exc}")
        else:
            if normal != op.path:
                problems.append(f"{label}: path {op.path!r} is not normalised; use {normal!r}")
            prefix = reserved_prefix(normal, reserved)
            if prefix is not None:
                problems.append(
                    f"{label}: path {op.path!r} is under the reserved prefix {prefix} (the "
                    "inbox route); write the entry to another file"
                )
    if op.key is not None and not KEY_PATTERN.fullmatch(op.key):
        problems.append(f"{label}: key {op.key!r} must match [a-z0-9][a-z0-9_.-]*")
    return problems


def _compared_texts(state: NamespaceState, batch: Sequence[Candidate], plan: Plan) -> list[str]:
    """The texts the trust check compares by meaning: each retired entry's, the candidates'
    and the texts the plan writes (embedded in one call before the check)."""
    retired = {op.entry_id for op in plan.ops if isinstance(op, Invalidate | Supersede)}
    texts = [e.text for e in state.entries if e.id in retired]
    texts += [c.text for c in batch]
    texts += [op.text for op in plan.ops if isinstance(op, Add | Supersede)]
    return texts
