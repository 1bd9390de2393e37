"""One batch through the consolidator (merge → validate → apply) and the plans it passes.

**Plans.** A consolidator reads one namespace's state and a batch of its candidates and answers
a :class:`Plan` of operations over entry and candidate ids; it writes nothing. Every candidate
is accounted for by at least one operation (one may back several: a turn yields several
memories, a forget removes several entries), a rejected candidate backs nothing else, and each
gets exactly one ledger row. A consolidator that decides by meaning holds its
:class:`~worker.consolidation.meaning.Meaning` as ``meaning``, and the trust check on its plan
asks the same questions with it; without one, by words alone. Capabilities are class
attributes so :func:`~worker.consolidation.loading.load_consolidator` can check them at
start-up, before any batch is claimed.

>>> from worker.consolidation.plan import Add, Plan
>>> Plan(ops=[Add(candidate_ids=["c1"], path="/memories/facts.md", text="Likes tea")]).ops[0].op
'add'
>>> from worker.consolidation.rules import RulesConsolidator
>>> isinstance(RulesConsolidator(), Consolidator)
True
>>> (RulesConsolidator.needs_model, RulesConsolidator.handles_turns)
(False, True)

**Entry ids.** An entry created by an ``Add`` or ``Supersede`` gets ``uuid5(namespace, first
candidate id, n)``, where ``n`` counts earlier entry-creating ops of the same plan with the
same first candidate. Ids depend only on the plan, never on a clock or a random source:
replaying a batch makes the same ids, and a plan can refer to an entry it creates earlier
(duplicates within one batch, or a split LLM batch).

>>> ids = EntryIds("user:u1")
>>> first = ids.next("c1")
>>> first == EntryIds("user:u1").next("c1")
True
>>> first != ids.next("c1")
True

**Removals.** A plan is untrusted (a model's above all): it could invalidate every entry, or
"update" an unrelated entry into something else, while each operation still names some
candidate. :func:`removal_problem` refuses an ``invalidate`` or ``supersede`` of an *existing*
entry unless one of the candidates it names is:

- a ``forget`` candidate (one with a ``key`` forgets only entries of that key);
- a candidate with the entry's ``key`` (a newer value for the slot);
- a candidate with a replacement :func:`related` to the entry (the supersede's own text, or an
  ``add``/``supersede`` it backs in this plan): the same attribute of the same person in a
  wording the rules know ("I moved to Berlin" retires "I live in Paris"), the same thing by
  meaning in any language (:meth:`~worker.consolidation.meaning.Meaning.may_replace`), or a
  correction ("sorry, I meant 43") of an entry holding a number or word it names. Without a
  meaning model a shared content word stands in for meaning; with one it does not, since a
  shared word says nothing of what two statements are about.

A candidate that by meaning adds one more value beside the entry's (:func:`adds_beside`)
justifies no removal: only a replacement that still says what the entry holds (:func:`keeps`)
may take its place. "Related" cannot prove a contradiction; it makes an unrelated rewrite
impossible, and the removal cap bounds the rest.

>>> related("I live in Paris", "I live in Rome"), related("I have a dog", "I prefer tea")
(True, False)
>>> related("저는 커피를 좋아해요", "저는 커피가 싫어요"), related("我住在巴黎", "我住在罗马")
(True, True)
>>> related("I live in Paris", "I moved to Berlin")
True

**Validation.** :func:`validate_plan` walks the operations in order over the active entries (so
an operation may refer to an entry an earlier one creates) and lists every problem in plain
words; an empty list means the plan may be applied. The problems are fed back to an LLM for its
one repair attempt, so each names the operation and what to change. Text a consolidator writes
passes the same guards as candidate text (:func:`~worker.consolidation.guard_meaning.refusal`),
and no path may be reserved (:func:`~worker.types.reserved_prefix`: the inbox route).

>>> from worker.consolidation.plan import Plan
>>> from worker.models import NamespaceState
>>> validate_plan(NamespaceState("user:u1", 0, None), [], Plan(), max_removals=5,
...               max_text_bytes=100)
[]

**Applying.** :func:`apply_plan` is pure and deterministic: the same state, batch, plan and
``now`` give an equal :class:`~worker.consolidation.plan.AppliedPlan`. Nothing is deleted:
superseded and forgotten entries get ``invalid_at`` and a reason and stay in history.

- Operations touching a read-only (``state.read_only_paths``) or sensitive path become
  :class:`~worker.consolidation.plan.PendingApproval` instead, and so do later operations that
  depend on an entry such an operation would have created. A confirmation changes no file
  content and is applied anywhere.
- Only the files the plan touched are rendered
  (:func:`~worker.consolidation.render.render_counted`), and returned only when the content
  differs from ``current_files``. Over ``file_budget_bytes`` a file keeps the entries most
  worth loading (:func:`~worker.consolidation.render.select`) and ends with a line saying how
  many more ``search_memory`` reaches; those left out stay **active**: nothing is invalidated
  to fit a budget.
- The ledger has one row per candidate, ordered by (``created_at``, id) so the batch order does
  not matter; a candidate backing several operations reports the strongest outcome (merged >
  forgotten > duplicate > pending_approval > rejected).
- ``counts``: ``added``, ``superseded``, ``forgotten`` count entries, ``evicted`` the active
  entries the changed files leave out; ``duplicates`` and ``rejected`` count candidates;
  ``pending_approval`` counts queued operations.

>>> from datetime import UTC, datetime
>>> from worker.consolidation.rules import RulesConsolidator
>>> from worker.models import NamespaceState
>>> from worker.models import make_candidate
>>> from worker.settings import Settings
>>> t = datetime(2025, 1, 1, tzinfo=UTC)
>>> c = make_candidate(user_id="u1", trace_id="t1", text="I prefer tea", now=t)
>>> plan, applied = consolidate_batch(RulesConsolidator(), NamespaceState("user:u1", 0, None),
...     [c], now=t, settings=Settings().for_consolidation, current_files={})
>>> print(applied.files[0].content, end="")
# Preferences
<BLANKLINE>
- I prefer tea
"""

from __future__ import annotations

import difflib
import hashlib
import uuid
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import datetime
from typing import (
    Annotated,
    ClassVar,
    Final,
    Literal,
    Protocol,
    runtime_checkable,
)

from pydantic import BaseModel, ConfigDict, Field

from worker.consolidation.guard_meaning import refusal
from worker.consolidation.meaning import Meaning, numbers_of
from worker.consolidation.render import render_counted
from worker.consolidation.text import Normalised, content_stems, form_of, frame_of
from worker.errors import (
    ConsolidatorError,
    InvalidCandidate,
    InvalidPlan,
    MemworkerError,
)
from worker.models import (
    AppliedPlan,
    Candidate,
    Entry,
    FileChange,
    LedgerOutcome,
    LedgerRow,
    NamespaceState,
    PendingApproval,
    normalise_path,
)
from worker.types import KEY_PATTERN, Kind, reserved_prefix


class _Op(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Candidates this operation accounts for (evidence); at least one for candidate-driven ops.
    candidate_ids: list[str] = Field(default_factory=list)


class Add(_Op):
    """A new entry in ``path``."""

    op: Literal["add"] = "add"
    path: str
    text: str
    key: str | None = None


class Confirm(_Op):
    """The candidates restate ``entry_id``: count a confirmation, add nothing (a duplicate)."""

    op: Literal["confirm"] = "confirm"
    entry_id: str


class Supersede(_Op):
    """``entry_id`` is replaced by a new entry with ``text`` (kept in history, invalidated)."""

    op: Literal["supersede"] = "supersede"
    entry_id: str
    text: str
    key: str | None = None
    path: str | None = None  #: defaults to the replaced entry's path
    reason: str = "superseded"


class Invalidate(_Op):
    """``entry_id`` stops being valid (forget, contradiction, eviction); kept in history."""

    op: Literal["invalidate"] = "invalidate"
    entry_id: str
    reason: str


class Reject(_Op):
    """The candidates are not stored (secret, empty extraction, guard rail) and why."""

    op: Literal["reject"] = "reject"
    reason: str


Operation = Annotated[Add | Confirm | Supersede | Invalidate | Reject, Field(discriminator="op")]


class Plan(BaseModel):
    """The consolidator's answer for one batch."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ops: list[Operation] = Field(default_factory=list)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


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


#: uuid5 namespace for entry ids; fixed forever, since changing it would re-key every replay.
ENTRY_ID_NAMESPACE: Final = uuid.UUID("0b6f3c59-2f1e-4d3a-9a57-41d1c0e7a2b4")


class EntryIds:
    """Hands out the ids of new entries in plan order."""

    def __init__(self, namespace: str) -> None:
        self._namespace = namespace
        self._seen: Counter[str] = Counter()

    def next(self, first_candidate_id: str) -> str:
        n = self._seen[first_candidate_id]
        self._seen[first_candidate_id] += 1
        return uuid5_hex(f"{self._namespace}\x00{first_candidate_id}\x00{n}")


_NAMESPACE_BYTES: Final = ENTRY_ID_NAMESPACE.bytes


def uuid5_hex(name: str) -> str:
    """``uuid.uuid5(ENTRY_ID_NAMESPACE, name).hex``, from the digest's bytes (no UUID object).

    >>> name = "user:u1/c1/0"
    >>> uuid5_hex(name) == uuid.uuid5(ENTRY_ID_NAMESPACE, name).hex
    True
    """
    digest = bytearray(hashlib.sha1(_NAMESPACE_BYTES + name.encode("utf-8")).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    return digest.hex()


def created_ids(namespace: str, ops: Sequence[Operation]) -> list[str | None]:
    """For each op, the id of the entry it creates (None for ops that create none).

    An entry-creating op without candidates creates no id here; validation rejects it.
    """
    ids = EntryIds(namespace)
    out: list[str | None] = []
    for op in ops:
        if isinstance(op, Add | Supersede) and op.candidate_ids:
            out.append(ids.next(op.candidate_ids[0]))
        else:
            out.append(None)
    return out


def related(a: str, b: str, meaning: Meaning | None = None) -> bool:
    """True when ``a`` and ``b`` are about the same thing (see the module notes): the same
    attribute of the same person in a wording the rules know; else by ``meaning`` (texts
    prepared) when given, else a shared content stem. With a model, a shared word or number
    counts only in a correction of ``a`` ("I said Hackney but I meant Haringey")."""
    first, second = frame_of(a), frame_of(b)
    if first is not None and second is not None and first.slot() == second.slot():
        return True
    shares_a_word = not content_stems(a).isdisjoint(content_stems(b))
    if meaning is None:
        return shares_a_word
    if meaning.may_replace(a, b):
        return True
    if not meaning.corrects(b):
        return False
    return shares_a_word or bool(set(numbers_of(b)) & set(numbers_of(a)))


def replacements(plan_ops: Sequence[Operation]) -> dict[str, list[str]]:
    """Per candidate id, the texts the plan's ``add``/``supersede`` operations it backs write."""
    texts: dict[str, list[str]] = {}
    for op in plan_ops:
        if isinstance(op, Add | Supersede):
            for cid in op.candidate_ids:
                texts.setdefault(cid, []).append(op.text)
    return texts


def reaffirms(held: Normalised, said: Normalised) -> bool:
    """``said`` names at least one name or number, and each is found in ``held``: it restates,
    it adds no value. False when either is in a script without capitals (no names to tell).

    >>> reaffirms(form_of("I work for ITV as a camera operator"), form_of("Yep, still with ITV"))
    True
    >>> reaffirms(form_of("I work at Acme"), form_of("I also work at Globex"))
    False
    """
    names, known = said.entities, held.entities
    if names is None or known is None:
        return False
    named = names | set(said.numbers)
    return bool(named) and named <= known | set(held.numbers)


def adds_beside(old: str, said: str, meaning: Meaning | None, *, later: bool = True) -> bool:
    """By meaning, ``said`` gives a value beside what ``old`` holds, so it retires nothing.

    It must lean clearly towards adding one more (:meth:`Meaning.adds_one`, texts prepared),
    or give one only wished or planned where ``old`` gives one that holds
    (:meth:`Meaning.wished`), or, when ``later`` (said no earlier than ``old``), find ``old``
    telling a past beside it (:meth:`Meaning.former`: "My first car was a Fiat" stays beside
    "I drive a Skoda now"; a late-arriving older statement is no past of it). And it must
    name something ``old`` does not (:func:`reaffirms`). False without meaning."""
    if meaning is None:
        return False
    wish = meaning.wished(said) and not meaning.wished(old)
    past = later and meaning.former(old, said)
    if not (meaning.adds_one(said) or wish or past):
        return False
    return not reaffirms(form_of(old), form_of(said))


def keeps(old: str, written: str) -> bool:
    """``written`` still says what ``old`` holds: each of its names and numbers where names
    can be told (cased scripts), else each of its content stems and numbers.

    >>> keeps("I work at Acme", "Works at Acme and does shifts at Globex")
    True
    >>> keeps("I work at Acme", "I work at Globex")
    False
    """
    held, new = form_of(old), form_of(written)
    if not set(held.numbers) <= set(new.numbers):
        return False
    names, kept = held.entities, new.entities
    if names and kept is not None:
        return names <= kept
    return content_stems(old) <= content_stems(written)


def vouched(old: str, said: str, meaning: Meaning | None) -> bool:
    """By meaning, the user's own words ``said`` justify retiring ``old``: about the same
    thing, or what the merge models say they may replace (:meth:`Meaning.vouches`, a little
    below the bar at which the rules merge; asked of a candidate's text only, never of a
    text a plan writes, which a model chooses)."""
    if meaning is None:
        return False  # by words alone, only the texts the plan writes are judged
    return related(old, said, meaning) or meaning.vouches(old, said)


def removal_problem(
    label: str,
    op: Invalidate | Supersede,
    old: Entry,
    candidates: Mapping[str, Candidate],
    written: Mapping[str, list[str]],
    *,
    meaning: Meaning | None = None,
) -> str | None:
    """Why ``op`` may not retire the existing entry ``old``; ``None`` when a candidate it names
    justifies it (see the module notes)."""
    for cid in op.candidate_ids:
        cand = candidates.get(cid)
        if cand is None:
            continue  # an unknown id is its own problem
        if cand.kind is Kind.FORGET:
            if cand.key is None or cand.key == old.key:
                return None
            continue
        if old.key is not None and cand.key == old.key:
            return None
        texts = [op.text] if isinstance(op, Supersede) else written.get(cid, [])
        later = cand.said_at >= old.valid_from
        if cand.kind is Kind.FACT and adds_beside(old.text, cand.text, meaning, later=later):
            if any(keeps(old.text, t) for t in texts):
                return None
            continue  # one more value: the entry stays unless its replacement keeps it
        if cand.kind is Kind.FACT and vouched(old.text, cand.text, meaning):
            return None
        if any(related(old.text, t, meaning) for t in texts):
            return None
    return (
        f"{label}: retires entry {op.entry_id}, but no candidate it names justifies that; an "
        "entry is invalidated only for a forget candidate (of its key, when the forget has "
        "one), and superseded only by a candidate with the same key or by a replacement about "
        "the same thing; otherwise confirm the entry or leave it alone"
    )


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


class Limits(Protocol):
    """The settings a batch is held to; the consolidation slice
    (:class:`~worker.types.ConsolidationSettings`) satisfies it."""

    @property
    def max_removals_per_run(self) -> int: ...
    @property
    def max_text_bytes(self) -> int: ...
    @property
    def file_budget_bytes(self) -> int: ...
    @property
    def sensitive_paths(self) -> Collection[str]: ...
    @property
    def inbox_route(self) -> str: ...


@dataclass(frozen=True)
class Merge:
    """One batch merged: the ``batch`` the ledger did not hold yet (each id once), how many of
    the given candidates were ``skipped``, the plan and what applying it writes (both None when
    nothing was new)."""

    batch: Sequence[Candidate]
    skipped: int
    plan: Plan | None = None
    applied: AppliedPlan | None = None


def merge_new(
    consolidator: Consolidator,
    state: NamespaceState,
    candidates: Sequence[Candidate],
    *,
    recorded: Set[str],
    current_files: Mapping[str, str],
    now: datetime,
    settings: Limits,
) -> Merge:
    """Merge the ``candidates`` that the ledger (``recorded``) does not hold into ``state``.

    **The ledger is the proof.** A candidate is skipped only because the unique ledger holds
    it, so a batch committed whose ack was lost merges nothing twice; a retried capture
    enqueued twice merges once.
    """
    batch = _unique([c for c in candidates if c.id not in recorded])
    skipped = len(candidates) - len(batch)
    if not batch:
        return Merge(batch, skipped)
    plan, applied = consolidate_batch(
        consolidator, state, batch, now=now, settings=settings, current_files=current_files
    )
    return Merge(batch, skipped, plan, applied)


def consolidate_batch(
    consolidator: Consolidator,
    state: NamespaceState,
    batch: Sequence[Candidate],
    *,
    now: datetime,
    settings: Limits,
    current_files: Mapping[str, str],
) -> tuple[Plan, AppliedPlan]:
    """Merge ``batch`` into ``state``; raise InvalidPlan (batch stays pending) on any problem.

    A consolidator's unexpected exception becomes :class:`ConsolidatorError`, so the pipeline
    handles one family of errors. A candidate whose path is reserved (under the deployment's
    inbox route, which a hot-path client cannot know) is rejected here, named, so it neither
    reaches the consolidator nor fails the rest of its batch.
    """
    refused = _reserved_rejects(batch, (settings.inbox_route,))
    held = {cid for op in refused for cid in op.candidate_ids}
    rest = [c for c in batch if c.id not in held]
    try:
        plan = consolidator.merge(state, rest, now=now) if rest else Plan()
    except MemworkerError:
        raise
    except Exception as exc:
        raise ConsolidatorError(
            f"consolidator {consolidator.name!r} failed on {state.namespace}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if refused:
        plan = plan.model_copy(update={"ops": [*plan.ops, *refused]})
    problems = validate_plan(
        state, batch, plan,
        max_removals=settings.max_removals_per_run, max_text_bytes=settings.max_text_bytes,
        reserved=(settings.inbox_route,), meaning=getattr(consolidator, "meaning", None),
    )  # fmt: skip
    if problems:
        raise InvalidPlan(problems)
    applied = apply_plan(
        state, batch, plan, now=now, current_files=current_files,
        file_budget_bytes=settings.file_budget_bytes, sensitive_paths=settings.sensitive_paths,
    )  # fmt: skip
    return plan, applied


def _reserved_rejects(batch: Sequence[Candidate], reserved: Collection[str]) -> list[Operation]:
    """A reject for each candidate of ``batch`` whose path falls under a reserved prefix."""
    return [
        Reject(
            candidate_ids=[c.id],
            reason=f"path {c.path} is under the reserved prefix {prefix} (the inbox route); "
            "send it with another topic",
        )
        for c in batch
        if c.path is not None and (prefix := reserved_prefix(c.path, reserved)) is not None
    ]


def _unique(batch: Sequence[Candidate]) -> list[Candidate]:
    """First occurrence of each candidate id."""
    seen: set[str] = set()
    out = []
    for candidate in batch:
        if candidate.id not in seen:
            seen.add(candidate.id)
            out.append(candidate)
    return out
