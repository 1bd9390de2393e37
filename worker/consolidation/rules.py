"""The rules consolidator, the default: statements extracted, matched and merged without a chat
model.

For each candidate, oldest first by when it was said (``occurred_at``, else arrival), then id:

- ``fact``: rejected if a guard trips (:func:`~.guard_meaning.refusal`: patterns, then meaning)
  or it is too long; a normalised or fuzzy duplicate of an active entry
  (:func:`~.text.is_near_duplicate`) *confirms* that entry; a ``key`` already held by an active
  entry *supersedes* it (newer wins, the old entry stays in history). Otherwise the wordings
  the rules know decide first (:func:`~.text.frame_of`: "I moved to Berlin" supersedes "I live
  in Paris"; "my sister lives in Berlin" retires nothing), then meaning
  (:mod:`~worker.consolidation.meaning`, when a model is at hand, as by default) for any other
  wording in any language: a *restatement* of one of its nearest entries confirms it; a
  *correction* ("sorry, I meant 43") supersedes the statement it corrects; a statement of a
  *single-valued* attribute of the user (where one lives, works, age, partner, name …)
  supersedes the active entries giving that attribute. Anything else is added: a multi-valued
  fact (likes, pets, relatives) never retires another, and an uncertain case adds. A candidate
  said before the value it would replace is rejected as stale: event time decides, not arrival.
- ``forget``: invalidates the active entries holding its ``key``, or else those whose text
  contains the forget target on word boundaries (:func:`forget_target`) or nearly equals it;
  nothing matching is a reject ("nothing to forget").
- ``turn``: the explicit statements of its user lines (see below) go through the two rules
  above; a turn with none is rejected ("no explicit statement").

Without a meaning model (``MEMWORKER_EMBEDDINGS=none``) only duplicates, keys, forgets and the
known wordings merge: restatements and new values in other words are added beside the old ones.

Routing: the candidate's ``path`` if given; else ``/memories/preferences.md`` for keys starting
``preference.`` and preference-like statements ("I prefer …", "call me …"); else
``/memories/facts.md``. Candidates of one batch see each other: the second of two duplicates
confirms the entry the first one adds. Removals are capped at ``max_removals`` per batch (the
guard rail :func:`~.plan.validate_plan` enforces); a candidate that would pass the cap is
rejected with that reason rather than failing the whole batch.

>>> from datetime import UTC, datetime
>>> from worker.models import NamespaceState
>>> from worker.models import make_candidate
>>> t = datetime(2025, 1, 1, tzinfo=UTC)
>>> batch = [make_candidate(user_id="u1", trace_id="t1", text=s, now=t, idempotency_key=s)
...          for s in ("I prefer tea", "i prefer TEA!")]
>>> plan = RulesConsolidator().merge(NamespaceState("user:u1", 0, None), batch, now=t)
>>> [op.op for op in plan.ops]
['add', 'confirm']

**Live entries.** An entry is live from the moment the plan holds it (an existing entry, or one
the plan added) until the plan retires it; live entries are indexed by the features a fuzzy
match keys on, so a candidate is compared with a few, not all.

>>> fuzzy_key(Normalised.of("I have 2 cats"))
(('2',), False)

**Turns.** A ``turn`` candidate's text holds the user's input and the assistant's reply, one
role per line prefix (``user:`` / ``human:``, ``assistant:`` / ``ai:``, ``system:``,
``tool:``); lines without a prefix continue the previous role. Only user lines are read: the
assistant's reply is not the user's word. Each user sentence, leading fillers ("oh,", "also",
"btw") dropped, is matched against these patterns, anchored at the sentence start:

=========================================  =====================================================
pattern                                    result
=========================================  =====================================================
``remember (that) X`` / ``note that X``    X, itself matched by the patterns below, else a fact
``forget (that) X``                        forget X
``I no longer X`` / ``I don't X anymore``  forget X
``I prefer X`` / ``I'd rather X``          a preference
``(you can) call me X``                    key ``preference.name``
``my X is Y``                              key ``profile.x`` (X of at most 4 words)
``I live in X``                            key ``profile.location``
``I work at/for X``                        key ``profile.employer``
``I work as X``                            key ``profile.occupation``
=========================================  =====================================================

Limits, on purpose: questions are skipped; "remember to …" (a to-do, not a memory) is skipped;
statements not at a sentence start ("my friend said I prefer …") are not matched; sentences are
split at ``.!?;`` and newlines, so "Dr. Who" splits; there is no coreference ("it", "there").
The statement is stored in the user's words (first letter capitalised, end punctuation dropped).

>>> [s.text for s in extract_statements("user: Hi! I prefer tea. What's up?\\nassistant: Noted.")]
['I prefer tea']
>>> extract_statements("user: My favourite colour is blue")[0].key
'profile.favourite_colour'
>>> extract_statements("assistant: I prefer coffee")
[]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter
from typing import ClassVar, Final, Literal

from worker.consolidation import text
from worker.consolidation.guard_meaning import refusal
from worker.consolidation.meaning import Kind as StatementKind
from worker.consolidation.meaning import Meaning, numbers_of
from worker.consolidation.plan import (
    Add,
    Confirm,
    EntryIds,
    Invalidate,
    Operation,
    Plan,
    Reject,
    Supersede,
    adds_beside,
    related,
    vouched,
)
from worker.consolidation.text import (
    Frame,
    LexicalIndex,
    Normalised,
    Similarity,
    build_index,
    canonical,
    conflict,
    frame_of,
    is_paraphrase,
    paraphrase_key,
)
from worker.models import Candidate, Kind, NamespaceState
from worker.types import FACTS_PATH, MAX_TEXT_BYTES, PREFERENCES_PATH, ConsolidationSettings


@dataclass(eq=False, slots=True)  # identity: ``by_text`` lists remove the very entry dropped
class LiveEntry:
    """An entry active at this point of the plan (existing or created earlier in it)."""

    id: str
    path: str
    text: str
    key: str | None
    valid_from: datetime
    existing: bool
    #: The normalised text and its comparison features, derived once per entry and merge.
    norm: Normalised = field(repr=False)
    #: Position in ``live`` order (set when added), to pick the first of several matches.
    seq: int = field(default=0, repr=False)
    #: The content-term set paraphrases share (:func:`~.text.paraphrase_key`).
    terms: frozenset[str] | None = field(default=None, repr=False)

    @property
    def frame(self) -> Frame | None:
        """The attribute frame the text sets, if any (:func:`~.text.frame_of`, cached per
        text); read only when needed, so a batch that sets no frame derives none."""
        return frame_of(self.text)

    def conflicts_with(self, frame: Frame | None) -> bool:
        """:func:`~.text.conflict` of this entry's frame with ``frame`` (False when ``frame``
        is None, without reading the entry's)."""
        return frame is not None and conflict(self.frame, frame)


#: Index of live entries by the features a fuzzy match needs equal (numbers, negation), then by
#: the length of their normal form.
FuzzyKey = tuple[tuple[str, ...], bool]


def fuzzy_key(norm: Normalised) -> FuzzyKey:
    return (norm.numbers, norm.negated)


def fuzzy_lengths(norm: Normalised) -> range:
    """Every length a near-duplicate of ``norm`` can have (a superset of the rule's window)."""
    size = len(norm.text)
    if size < text.MIN_FUZZY_CHARS:
        return range(0)
    spread = min(text.MAX_EDITS, size // 4 + 1)
    return range(max(text.MIN_FUZZY_CHARS, size - spread), size + spread + 1)


#: The live entries by the (subject, attribute) slot their frame sets, each list in live order.
Slots = dict[tuple[str, str], list[LiveEntry]]


def slot_index(entries: Iterable[LiveEntry]) -> Slots:
    """``entries`` by the slot their frame sets, in the order given (one setting none is left
    out)."""
    slots: Slots = {}
    for entry in entries:
        if (frame := entry.frame) is not None:
            slots.setdefault(frame.slot(), []).append(entry)
    return slots


#: Role prefixes of a turn's lines; only the first two are the user's words.
_ROLE_LINE: Final = re.compile(r"^\s*(user|human|assistant|ai|system|tool)\s*:\s?(.*)$", re.I)
_USER_ROLES: Final = frozenset({"user", "human"})

_SENTENCE_SPLIT: Final = re.compile(r"(?<=[.!?;])\s+|\n+")
_FILLERS: Final = re.compile(
    r"^(?:(?:oh|ok|okay|so|also|and|but|actually|btw|by the way|well|hey|hi|hello|fyi|"
    r"just so you know|for the record|please)\b[,!:]?\s*)+",
    re.I,
)
_END_PUNCT: Final = re.compile(r"[\s.!;,]+$")

_REMEMBER: Final = re.compile(
    r"^(?:remember|note|keep in mind|don'?t forget)\b[,:]?\s+(?:that\s+)?(?P<body>.+)$", re.I
)
_REMEMBER_TODO: Final = re.compile(r"^(?:remember|don'?t forget)\s+to\s", re.I)
_FORGET: Final = re.compile(r"^forget\s+(?:that\s+|about\s+)?(?P<body>.+)$", re.I)
_NO_LONGER: Final = re.compile(r"^I\s+no\s+longer\s+(?P<body>.+)$", re.I)
_NOT_ANYMORE: Final = re.compile(r"^I\s+(?:don'?t|do\s+not)\s+(?P<body>.+?)\s+any\s?more$", re.I)
_PREFER: Final = re.compile(
    r"^I(?:\s+(?:really\s+|strongly\s+|generally\s+|usually\s+)?prefer|(?:'d|\s+would)\s+"
    r"(?:really\s+)?(?:prefer|rather))\s+(?P<body>.+)$",
    re.I,
)
_CALL_ME: Final = re.compile(
    r"^(?:you\s+(?:can|may|should)\s+)?call\s+me\s+(?P<name>[\w'\- ]{1,40})$", re.I
)
_MY_X_IS: Final = re.compile(
    r"^my\s+(?P<attr>[a-z][a-z'\-]*(?:\s+[a-z][a-z'\-]*){0,3}?)\s+(?:is|are)\s+(?P<value>.+)$",
    re.I,
)
_LIVE_IN: Final = re.compile(r"^I\s+(?:now\s+|currently\s+)?live\s+in\s+(?P<body>.+)$", re.I)
_WORK_AT: Final = re.compile(r"^I\s+(?:now\s+|currently\s+)?work\s+(?:at|for)\s+\S", re.I)
_WORK_AS: Final = re.compile(r"^I\s+(?:now\s+|currently\s+)?work\s+as\s+\S", re.I)

#: Words that make "my X is Y" about the conversation rather than the user ("my question is").
_CONVERSATIONAL_ATTRS: Final = frozenset(
    {"question", "point", "guess", "bad", "pleasure", "answer", "problem", "issue", "request"}
)

#: Statements that read as a preference, for routing a plain fact to the preferences file.
_PREFERENCE_LIKE: Final = re.compile(
    r"^(?:I(?:'d|\s+would)\s+(?:prefer|rather)\b|I\s+(?:really\s+|strongly\s+)?(?:prefer|"
    r"like|love|enjoy|dislike|hate|can'?t\s+stand)\b|(?:please\s+)?call\s+me\b|"
    r"my\s+(?:favou?rite|preferred)\b|(?:always|never|please)\s+(?:use|answer|reply|write|"
    r"respond|show|include|avoid)\b)",
    re.I,
)


@dataclass(frozen=True)
class Statement:
    """One thing the user said explicitly."""

    kind: Literal["fact", "forget"]
    text: str  #: the fact in the user's words, or the forget target
    key: str | None = None
    preference: bool = False
    rule: str = "fact"  #: which pattern matched, for ledger reasons and tests


def user_text(turn: str) -> str:
    """Only the user's lines of a turn.

    >>> user_text("user: hi\\nthere\\nassistant: hello\\nuser: bye")
    'hi\\nthere\\nbye'
    """
    role: str | None = None
    kept: list[str] = []
    for raw in turn.splitlines():
        line = raw
        match = _ROLE_LINE.match(raw)
        if match:
            role, line = match.group(1).lower(), match.group(2)
        if role in _USER_ROLES:
            kept.append(line)
    return "\n".join(kept).strip()


def sentences(text: str) -> list[str]:
    """Sentences of ``text`` with fillers and trailing punctuation dropped, questions skipped."""
    out = []
    for raw in _SENTENCE_SPLIT.split(text):
        sentence = _FILLERS.sub("", raw.strip())
        if not sentence or sentence.endswith("?"):
            continue
        sentence = _END_PUNCT.sub("", sentence)
        if sentence:
            out.append(sentence)
    return out


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def key_slug(words: str) -> str:
    """``profile`` key suffix from an attribute phrase.

    >>> key_slug("Favourite  colour")
    'favourite_colour'
    """
    return re.sub(r"[^a-z0-9]+", "_", words.lower()).strip("_")[:60] or "unnamed"


def is_preference_like(text: str) -> bool:
    """True when ``text`` reads as a preference (routing hint for plain facts).

    >>> is_preference_like("I'd rather get short answers"), is_preference_like("I have a dog")
    (True, False)
    """
    return bool(_PREFERENCE_LIKE.match(_FILLERS.sub("", text.strip())))


def forget_target(text: str) -> str:
    """What a forget request points at, with the request words removed.

    >>> forget_target("Please forget that I live in Paris.")
    'I live in Paris'
    >>> forget_target("I no longer live in Paris")
    'live in Paris'
    """
    sentence = _END_PUNCT.sub("", _FILLERS.sub("", canonical(text).strip()))
    for pattern in (_FORGET, _NO_LONGER, _NOT_ANYMORE):
        match = pattern.match(sentence)
        if match:
            return _END_PUNCT.sub("", match.group("body")).strip()
    return sentence


def classify(sentence: str) -> Statement | None:
    """The statement one sentence makes, or None when no pattern matches."""
    if _REMEMBER_TODO.match(sentence):
        return None
    match = _REMEMBER.match(sentence)
    if match:
        body = _END_PUNCT.sub("", match.group("body"))
        inner = classify(body)
        if inner is not None:
            return inner
        return Statement("fact", _cap(body), preference=is_preference_like(body), rule="remember")
    for pattern, rule in (
        (_FORGET, "forget"),
        (_NO_LONGER, "no_longer"),
        (_NOT_ANYMORE, "no_longer"),
    ):
        match = pattern.match(sentence)
        if match:
            return Statement("forget", match.group("body").strip(), rule=rule)
    if _PREFER.match(sentence):
        return Statement("fact", _cap(sentence), preference=True, rule="prefer")
    match = _CALL_ME.match(sentence)
    if match:
        name = match.group("name").strip()
        return Statement(
            "fact", f"Call me {name}", key="preference.name", preference=True, rule="call_me"
        )
    match = _MY_X_IS.match(sentence)
    if match and match.group("attr").split()[-1].lower() not in _CONVERSATIONAL_ATTRS:
        key = "profile." + key_slug(match.group("attr"))
        return Statement("fact", _cap(sentence), key=key, rule="my_x_is")
    if _LIVE_IN.match(sentence):
        return Statement("fact", _cap(sentence), key="profile.location", rule="live_in")
    if _WORK_AT.match(sentence):
        return Statement("fact", _cap(sentence), key="profile.employer", rule="work_at")
    if _WORK_AS.match(sentence):
        return Statement("fact", _cap(sentence), key="profile.occupation", rule="work_as")
    return None


def extract_statements(turn: str) -> list[Statement]:
    """Every explicit statement in the user lines of ``turn``, in order."""
    found = []
    # The canonical form, so a fullwidth "ｍｙ ｃｉｔｙ ｉｓ …" routes to the same key.
    for sentence in sentences(canonical(user_text(turn))):
        statement = classify(sentence)
        if statement is not None:
            found.append(statement)
    return found


#: Shortest normalised forget target matched by text (:func:`~.text.weight`: a character of a
#: word-free script counts twice); a shorter one ("it", "me") would match entries by accident,
#: so it only works through a ``key``.
MIN_FORGET_CHARS: Final = 4

#: Oldest first, then by id: the order existing entries go live in.
_BY_AGE: Final = attrgetter("created_at", "id")

#: Nearest entries a candidate is compared with by meaning, by vector and again by words
#: (BM25): a restatement is among the nearest by either; a few more cover ties.
MEANING_NEIGHBOURS: Final = 8


def said_order(item: Candidate) -> tuple[datetime, datetime, str]:
    """Candidates in the order they were said (event time, then arrival, then id)."""
    return (item.said_at, item.created_at, item.id)


#: Defaults when built without settings; the same values as the Settings defaults.
DEFAULT_MAX_REMOVALS: Final = 20

#: Lexically nearest entries a candidate is compared with for a paraphrase: a restatement
#: shares its content terms, so it ranks at the top; a few more cover ties.
PARAPHRASE_NEIGHBOURS: Final = 8
#: Default share of similarity at which a caller's ``similarity`` counts as a paraphrase.
DEFAULT_SIMILARITY_THRESHOLD: Final = 0.92


class RulesConsolidator:
    """Deterministic de-duplication, supersession, forgetting and routing (see module docs)."""

    name: ClassVar[str] = "rules"
    needs_model: ClassVar[bool] = False
    handles_turns: ClassVar[bool] = True

    def __init__(
        self,
        *,
        max_removals: int = DEFAULT_MAX_REMOVALS,
        max_text_bytes: int = MAX_TEXT_BYTES,
        similarity: Similarity | None = None,
        similarity_threshold: float = DEFAULT_SIMILARITY_THRESHOLD,
        meaning: Meaning | None = None,
    ) -> None:
        """``similarity``: an optional extra paraphrase test, pure and deterministic like the
        rest of a merge. ``meaning``: vectors to decide restatements, corrections and
        single-valued attributes by (see the module notes)."""
        if not 0.0 < similarity_threshold <= 1.0:
            raise ValueError(
                f"similarity_threshold is {similarity_threshold}; give a share in (0, 1]"
            )
        self.max_removals = max_removals
        self.max_text_bytes = max_text_bytes
        self.similarity = similarity
        self.similarity_threshold = similarity_threshold
        self.meaning = meaning

    @classmethod
    def from_settings(
        cls,
        settings: ConsolidationSettings,
        *,
        model: object | None = None,
        meaning: Meaning | None = None,
    ) -> RulesConsolidator:
        """Build from settings (``model`` is refused by the loader before this is called)."""
        return cls(
            max_removals=settings.max_removals_per_run,
            max_text_bytes=settings.max_text_bytes,
            meaning=meaning,
        )

    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        return _Merge(self, state).run(batch)


class _Merge:
    """The working state of one ``merge`` call."""

    def __init__(self, owner: RulesConsolidator, state: NamespaceState) -> None:
        self.owner = owner
        self.ids = EntryIds(state.namespace)
        self.ops: list[Operation] = []
        self.removals = 0
        ordered = sorted((e for e in state.entries if e.active), key=_BY_AGE)
        self.live: dict[str, LiveEntry] = {}
        #: Normalised text → the live entries with it, in ``live`` order: exact duplicates are
        #: found by one lookup instead of a scan.
        self.by_text: dict[str, list[LiveEntry]] = {}
        #: Entries that could be fuzzy duplicates of a text with the same key's features.
        self.by_features: dict[FuzzyKey, dict[int, list[LiveEntry]]] = {}
        #: Content-term set → the live entries with it: where a paraphrase is found exactly.
        self.by_terms: dict[frozenset[str], list[LiveEntry]] = {}
        #: BM25 over the live entries, built on first use (only a ``similarity`` needs it).
        self._index: LexicalIndex | None = None
        #: (subject, attribute) → the live entries setting it, in ``live`` order; built on first
        #: use (only a candidate setting a frame needs it), then kept in step.
        self._by_slot: dict[tuple[str, str], list[LiveEntry]] | None = None
        self.added = 0
        self.meaning = owner.meaning
        #: The statements of each ``turn`` candidate, extracted once.
        self.statements: dict[str, list[Statement]] = {}
        of = text.form_of
        self._add_live(
            LiveEntry(e.id, e.path, e.text, e.key, e.valid_from, True, of(e.text)) for e in ordered
        )

    def _add_live(self, entries: Iterable[LiveEntry]) -> None:
        """Make ``entries`` live, in order, after those already live.

        New entries go last in every map, so each list stays in ``live`` order. The maps are
        looked up once per call, not per entry: one call takes all of a namespace's entries.
        """
        live, by_text, by_features = self.live, self.by_text, self.by_features
        by_terms, by_slot, index = self.by_terms, self._by_slot, self._index
        seq = self.added
        for entry in entries:
            seq += 1
            entry.seq = seq
            norm, raw = entry.norm, entry.text
            normal = norm.text
            live[entry.id] = entry
            by_text.setdefault(normal, []).append(entry)
            alike = by_features.setdefault((norm.numbers, norm.negated), {})  # fuzzy_key
            alike.setdefault(len(normal), []).append(entry)
            terms = entry.terms = paraphrase_key(raw)
            if terms is not None:
                by_terms.setdefault(terms, []).append(entry)
            if index is not None:
                index.add(entry.id, raw)
            if by_slot is not None and (frame := entry.frame) is not None:
                by_slot.setdefault(frame.slot(), []).append(entry)
        self.added = seq

    def by_slot(self) -> dict[tuple[str, str], list[LiveEntry]]:
        """The live entries by the slot their frame sets (built on first use, then kept in
        step): in ``live`` order, as if kept from the start."""
        if self._by_slot is None:
            self._by_slot = slot_index(self.live.values())
        return self._by_slot

    def _drop_live(self, entry: LiveEntry) -> None:
        del self.live[entry.id]
        if entry.terms is not None:
            same = self.by_terms[entry.terms]
            same.remove(entry)
            if not same:
                del self.by_terms[entry.terms]
        if self._index is not None:
            self._index.remove(entry.id)
        if self._by_slot is not None and (frame := entry.frame) is not None:
            slot = self._by_slot[frame.slot()]
            slot.remove(entry)
            if not slot:
                del self._by_slot[frame.slot()]
        same = self.by_text[entry.norm.text]
        same.remove(entry)
        if not same:
            del self.by_text[entry.norm.text]
        features, length = fuzzy_key(entry.norm), len(entry.norm.text)
        alike = self.by_features[features]
        alike[length].remove(entry)
        if not alike[length]:
            del alike[length]
            if not alike:
                del self.by_features[features]

    def run(self, batch: Sequence[Candidate]) -> Plan:
        # A redelivered copy of the same candidate: one account (the first copy's).
        unique = list({c.id: c for c in reversed(batch)}.values())
        ordered = sorted(unique, key=said_order)
        if self.meaning is not None:
            self._prepare(ordered)
        for cand in ordered:
            self._candidate(cand)
        return Plan(ops=self.ops)

    def _prepare(self, batch: Sequence[Candidate]) -> None:
        """Every text this merge compares by meaning, embedded in one call before it starts
        (raises :class:`~worker.errors.ModelUnavailable` when the model cannot: the batch
        waits, like for any unavailable dependency)."""
        assert self.meaning is not None
        texts = [e.text for e in self.live.values()]
        for cand in batch:
            if cand.kind is Kind.TURN:
                found = self.statements[cand.id] = extract_statements(cand.text)
                texts += [st.text for st in found if st.kind != "forget"]
            elif cand.kind is Kind.FACT:
                texts.append(cand.text.strip())
        self.meaning.prepare(texts)

    # --- per candidate -------------------------------------------------------------------
    def _candidate(self, cand: Candidate) -> None:
        if cand.kind is Kind.FORGET:
            reason = self._forget(cand, key=cand.key, target=forget_target(cand.text))
            if reason:
                self._reject(cand, reason)
        elif cand.kind is Kind.TURN:
            self._turn(cand)
        else:
            reason = refusal(cand.text, self.meaning)
            if reason is None:
                preference = is_preference_like(cand.text)
                reason = self._store(cand, cand.text.strip(), cand.key, preference)
            if reason:
                self._reject(cand, reason)

    def _turn(self, cand: Candidate) -> None:
        statements = self.statements.get(cand.id)
        if statements is None:
            statements = extract_statements(cand.text)
        if not statements:
            self._reject(cand, "no explicit statement in the user's lines")
            return
        stored, reasons = 0, []
        for st in statements:
            if st.kind == "forget":
                reason = self._forget(cand, key=None, target=st.text)
            else:
                reason = refusal(st.text, self.meaning) or self._store(
                    cand, st.text, st.key, st.preference
                )
            if reason:
                reasons.append(reason)
            else:
                stored += 1
        if not stored:
            self._reject(cand, "; ".join(dict.fromkeys(reasons)))

    def _reject(self, cand: Candidate, reason: str) -> None:
        self.ops.append(Reject(candidate_ids=[cand.id], reason=reason))

    # --- the two rules -------------------------------------------------------------------
    def _store(self, cand: Candidate, body: str, key: str | None, preference: bool) -> str | None:
        """Add, confirm or supersede; the reason when the statement is rejected instead."""
        size = len(body.encode("utf-8"))
        if size > self.owner.max_text_bytes:
            return f"text is {size} bytes; the limit is {self.owner.max_text_bytes}"
        wanted = Normalised.of(body)
        duplicate = self._duplicate_of(body, key, wanted=wanted)
        frame = frame_of(body)
        # A fuzzy duplicate may be another value of one attribute ("my wife's favourite colour
        # is green" / "… is blue" are a few letters apart), or the same of another person ("my
        # mother is a teacher" / "my father …"): then it is not the same memory.
        if (
            duplicate is not None
            and not duplicate.conflicts_with(frame)
            and not (self.meaning is not None and self.meaning.words_apart(duplicate.text, body))
        ):
            self.ops.append(Confirm(candidate_ids=[cand.id], entry_id=duplicate.id))
            return None
        path = cand.path or (
            PREFERENCES_PATH if preference or (key or "").startswith("preference.") else FACTS_PATH
        )
        held = [e for e in self.live.values() if e.key == key] if key is not None else []
        slot = [] if frame is None else self.by_slot().get(frame.slot(), [])
        if held:
            # Unkeyed entries giving the same attribute another value go with the key's.
            held += [e for e in slot if e.key is None and e.conflicts_with(frame)]
            what = f"newer value for key {key}"
            return self._supersede(cand, body, key=key, path=path, held=held, what=what)
        same = self._paraphrase_of(body, key, wanted, frame)
        if same is not None:
            self.ops.append(Confirm(candidate_ids=[cand.id], entry_id=same.id))
            return None
        if frame is not None:
            slot = [e for e in slot if key is None or e.key in (None, key)]
            restated = next((e for e in slot if e.frame and e.frame.same_value(frame)), None)
            if restated is not None:
                self.ops.append(Confirm(candidate_ids=[cand.id], entry_id=restated.id))
                return None
            conflicting = [e for e in slot if e.frame and e.frame.conflicts(frame)]
            if conflicting:
                what = f"newer value for {frame.attribute} of {frame.subject}"
                return self._supersede(cand, body, key=key, path=path, held=conflicting, what=what)
        if self.meaning is not None:
            decided = self._by_meaning(cand, body, key=key, path=path, wanted=wanted, frame=frame)
            if not isinstance(decided, _Undecided):
                return decided
        self.ops.append(Add(candidate_ids=[cand.id], path=path, text=body, key=key))
        self._created(cand, path, body, key, wanted)
        return None

    def _created(
        self, cand: Candidate, path: str, body: str, key: str | None, wanted: Normalised
    ) -> None:
        new_id = self.ids.next(cand.id)
        self._add_live((LiveEntry(new_id, path, body, key, cand.said_at, False, wanted),))

    def _supersede(
        self,
        cand: Candidate,
        body: str,
        *,
        key: str | None,
        path: str,
        held: list[LiveEntry],
        what: str,
    ) -> str | None:
        """Retire ``held`` for ``body``: the newest is superseded, the rest invalidated."""
        newest = max(held, key=lambda e: (e.valid_from, e.seq))
        if cand.said_at < newest.valid_from:
            subject = f"key {key}" if key is not None else "that attribute"
            return (
                f"stale: the entry for {subject} is newer than this candidate (said "
                f"{newest.valid_from.isoformat()}; this one {cand.said_at.isoformat()})"
            )
        existing = sum(e.existing for e in held)
        if self.removals + existing > self.owner.max_removals:
            return _over_cap(self.owner.max_removals)
        self.removals += existing
        reason = f"superseded: {what}"
        for old in sorted(held, key=lambda e: (e.valid_from, e.seq)):
            if old is not newest:
                self.ops.append(Invalidate(candidate_ids=[cand.id], entry_id=old.id, reason=reason))
            self._drop_live(old)
        self.ops.append(Supersede(
            candidate_ids=[cand.id], entry_id=newest.id, text=body, key=key, path=path,
            reason=reason,
        ))  # fmt: skip
        # A supersede without a key keeps the replaced entry's (apply does the same).
        self._created(cand, path, body, key if key is not None else newest.key, Normalised.of(body))
        return None

    # --- by meaning ------------------------------------------------------------------------
    def _by_meaning(
        self,
        cand: Candidate,
        body: str,
        *,
        key: str | None,
        path: str,
        wanted: Normalised,
        frame: Frame | None,
    ) -> str | _Undecided | None:
        """Confirm a restatement, apply a correction or supersede the same single-valued
        attribute, by meaning; :data:`_UNDECIDED` when none applies (the statement is added).

        A correction that corrects nothing held is then treated like any other statement; its
        new wording is kept, since confirming the old entry would lose a misread new value.

        Only an entry held before this batch is replaced: statements that arrive together are
        merged as restatements or kept side by side, never one taken for the other's old value
        (a correction among them still corrects, :meth:`_correct`). The model mistakes two
        facts said together for one attribute more often than a user gives two values at once.

        What the known wordings tell apart is never merged by meaning: another person or
        attribute (two frames of different slots), another polarity ("I don't …")."""
        assert self.meaning is not None
        restated = self._restatement_of(body, key, wanted, frame)
        if restated is not None:
            self.ops.append(Confirm(candidate_ids=[cand.id], entry_id=restated.id))
            return None
        kind = self.meaning.kind(body)
        if self.meaning.corrects(body):
            outcome = self._correct(cand, body, key=key)
            if outcome is not _UNDECIDED:
                return outcome
        scored = [
            (score, e)
            for e in self._neighbours(body, key)
            if e.existing  # never a statement of this batch (see above)
            and (score := self._replaces(e, body, kind, wanted, cand.said_at)) is not None
            and not _framed_apart(e, frame)
            and self._accepted(cand, e.text, body)
        ]
        if not scored:
            return _UNDECIDED
        score, held = max(scored, key=lambda pair: (pair[0], pair[1].seq))
        about = kind.about if kind is not None else "the same thing"
        what = f"newer value of {about} ({_decided_by(score)})"
        return self._supersede(cand, body, key=key, path=path, held=[held], what=what)

    def _accepted(self, cand: Candidate, old: str, body: str) -> bool:
        """The trust check accepts retiring ``old`` for ``body``: by the user's own words for a
        fact (:func:`~.plan.vouched`), by the statement's relation to it for a turn's."""
        if cand.kind is Kind.FACT:
            return vouched(old, cand.text, self.meaning)
        return related(old, body, self.meaning)

    def _replaces(
        self,
        entry: LiveEntry,
        body: str,
        kind: StatementKind | None,
        wanted: Normalised,
        said_at: datetime,
    ) -> float | None:
        """How surely ``body`` gives a new value of what ``entry`` gives, or None: by the
        learned merge models (:meth:`Meaning.merge_score` of 1 or more), or by the kinds (both
        of one single-valued kind, near each other, of one polarity:
        :meth:`Meaning.same_attribute`); each catches updates the other misses. ``said_at`` is
        when ``body`` was said: a held past stays beside a later value only
        (:func:`~.plan.adds_beside`). Two values of two settings in the same words both stay
        (:meth:`Meaning.settings_apart`), and so does what no plan may retire either (the same
        said of two people, or the same value of two attributes: :meth:`Meaning.never_retires`)
        and a job title beside an employer with no change told
        (:meth:`Meaning.told_alone`), asked only of a pair that would merge."""
        assert self.meaning is not None
        if self.meaning.both_others(entry.text, body):
            return None  # whether both are about one person cannot be told: both stay
        if self.meaning.stories_apart(entry.text, body):
            return None  # two observations the kinds do not firmly tie: both stay
        if self.meaning.partner_stays(entry.text, body):
            return None  # "we have two sons" leans towards the partner: the partner stays
        later = said_at >= entry.valid_from
        if adds_beside(entry.text, body, self.meaning, later=later):
            return None  # "I also work at Globex": one more value, the held one stays
        score = self.meaning.merge_score(entry.text, body)
        if score is None:
            return None
        merges = score >= 1.0 or (
            kind is not None
            and kind.single
            and entry.norm.negated == wanted.negated
            and self.meaning.same_attribute(entry.text, body)
        )
        if not merges or self.meaning.settings_apart(entry.text, body):
            return None  # "… to watch is tennis" / "… to play is squash": one for each setting
        if self.meaning.never_retires(entry.text, body):
            return None  # "My friend works at Hooli" / "My sister …", "I live in London" / "I
            # study in London": two people, or two attributes of one value, both stay
        if self.meaning.told_alone(entry.text, body):
            return None  # "I'm a paramedic" / "I work for the ambulance service": both hold
        return score

    def _comparable(self, key: str | None) -> list[LiveEntry]:
        """The live entries a candidate of ``key`` may confirm or retire by meaning."""
        return [e for e in self.live.values() if key is None or e.key is None]

    def _restatement_of(
        self, body: str, key: str | None, wanted: Normalised, frame: Frame | None
    ) -> LiveEntry | None:
        """The nearest live entry ``body`` restates in other words, if any: among the
        :data:`MEANING_NEIGHBOURS` nearest by vector and as many nearest by words."""
        assert self.meaning is not None
        for entry in self._neighbours(body, key):
            if (
                self.meaning.restates(entry.text, body)
                and entry.norm.negated == wanted.negated
                and not entry.conflicts_with(frame)
            ):
                return entry
        return None

    def _neighbours(self, body: str, key: str | None) -> list[LiveEntry]:
        """The comparable live entries nearest ``body``: the :data:`MEANING_NEIGHBOURS`
        nearest by vector, then as many nearest by words, each once."""
        assert self.meaning is not None
        comparable = self._comparable(key)
        if not comparable:
            return []
        near = self.meaning.nearest(body, [e.text for e in comparable], MEANING_NEIGHBOURS)
        ids = {e.id for e in comparable}
        worded = [i for i, _ in self.index().nearest(body, MEANING_NEIGHBOURS) if i in ids]
        found = {e.id: e for e in [*(comparable[i] for i in near), *(self.live[i] for i in worded)]}
        return list(found.values())

    def _correct(self, cand: Candidate, body: str, *, key: str | None) -> str | _Undecided | None:
        """A correction ("sorry, I meant 43") supersedes a statement said before it that it
        can correct (one the trust check relates to it, holding a number when it names one):
        the one nearest it by words, else the latest. Where it swaps one number for another,
        the entry keeps its words with the number fixed (:func:`corrected`)."""
        assert self.meaning is not None
        said = [
            e
            for e in self._comparable(key)
            if e.valid_from <= cand.said_at
            and (
                related(e.text, body, self.meaning)
                or related(e.text, corrected(e.text, body), self.meaning)
            )
        ]
        if numbers_of(body):
            said = [e for e in said if numbers_of(e.text)]
        if not said:
            return _UNDECIDED
        # Nearest by words ("it's a Model Y, not a Model 3" corrects the car), else the latest.
        ids = {e.id for e in said}
        ranked = self.index().nearest(body, len(self.live))
        best = next((i for i, score in ranked if score > 0 and i in ids), None)
        said = [e for e in said if e.id == best] or said
        target = max(said, key=lambda e: (e.valid_from, e.seq))
        fixed = corrected(target.text, body)
        what = "corrected by the user"
        return self._supersede(cand, fixed, key=key, path=target.path, held=[target], what=what)

    def index(self) -> LexicalIndex:
        """The BM25 index of the live entries (built on first use, then kept in step)."""
        if self._index is None:
            self._index = build_index((e.id, e.text) for e in self.live.values())
        return self._index

    def _paraphrase_of(
        self, body: str, key: str | None, wanted: Normalised, frame: Frame | None
    ) -> LiveEntry | None:
        """The first live entry ``body`` restates in other words, if any.

        A rules paraphrase shares the exact content-term set (one lookup); a ``similarity`` is
        asked about the :data:`PARAPHRASE_NEIGHBOURS` entries the BM25 index ranks nearest.
        Only entries without a key, or a candidate without one, are compared.
        """
        wanted_terms = paraphrase_key(body)
        for entry in self.by_terms.get(wanted_terms, ()) if wanted_terms is not None else ():
            comparable = key is None or entry.key is None
            if comparable and is_paraphrase(entry.text, body) and not entry.conflicts_with(frame):
                return entry
        similarity = self.owner.similarity
        if similarity is None:
            return None
        for entry_id, _score in self.index().nearest(body, PARAPHRASE_NEIGHBOURS):
            entry = self.live[entry_id]
            if key is not None and entry.key is not None:
                continue
            if (
                entry.norm.numbers == wanted.numbers
                and entry.norm.negated == wanted.negated
                and not entry.conflicts_with(frame)
                and similarity(entry.text, body) >= self.owner.similarity_threshold
            ):
                return entry
        return None

    def _duplicate_of(
        self, body: str, key: str | None, *, wanted: Normalised | None = None
    ) -> LiveEntry | None:
        """The first comparable live entry (in ``live`` order) that ``body`` duplicates.

        An exact (normalised) match wins over a fuzzy one. With a ``key``, entries with no key
        or the same key match exactly, and only entries with no key match fuzzily.
        ``wanted``: ``body`` normalised, if at hand.
        """
        if wanted is None:
            wanted = Normalised.of(body)
        if not wanted.text:  # an empty normal form (punctuation only) matches nothing
            return None
        for entry in self.by_text.get(wanted.text, ()):
            if key is None or entry.key in (None, key):
                return entry
        same = text.NearDuplicateOf(wanted)
        first: LiveEntry | None = None
        lengths = fuzzy_lengths(wanted)
        alike = self.by_features.get(fuzzy_key(wanted), {}) if lengths else {}
        # Walk the shorter of the lengths held and the lengths allowed; their order does not
        # matter, the first in ``live`` order is kept.
        if len(alike) <= len(lengths):
            groups = [entries for length, entries in alike.items() if length in lengths]
        else:
            groups = [alike[length] for length in lengths if length in alike]
        for entries in groups:
            for entry in entries:
                if first is not None and entry.seq > first.seq:
                    break  # each list is in ``live`` order: the rest come later still
                # Under one key, only an exact match confirms: a near-duplicate that differs
                # ("chai" for "sencha") is the key's new value and supersedes it.
                if (key is None or entry.key is None) and same(entry.norm):
                    first = entry
                    break
        return first

    def _forget(self, cand: Candidate, *, key: str | None, target: str) -> str | None:
        """Invalidate what ``key`` or ``target`` names; the reason when nothing is removed."""
        if key is not None:
            matches = [e for e in self.live.values() if e.key == key]
        elif text.weight(text.normalise(target)) < MIN_FORGET_CHARS:
            return "forget target too short to match safely; forget by key instead"
        else:
            wanted = Normalised.of(target)
            same = text.NearDuplicateOf(wanted)
            matches = [
                e
                for e in self.live.values()
                if text.contains_normalised_phrase(e.norm.text, wanted.text) or same(e.norm)
            ]
        if not matches:
            return "nothing to forget: no active entry matches"
        existing = sum(e.existing for e in matches)
        if self.removals + existing > self.owner.max_removals:
            return _over_cap(self.owner.max_removals)
        self.removals += existing
        for entry in matches:
            self.ops.append(
                Invalidate(
                    candidate_ids=[cand.id], entry_id=entry.id, reason="forgotten on request"
                )
            )
            self._drop_live(entry)
        return None


class _Undecided:
    """What :meth:`_Merge._by_meaning` answers when meaning decides nothing."""


_UNDECIDED: Final = _Undecided()


def _decided_by(score: float) -> str:
    """What decided a supersede by meaning, for its reason (an operator reads it in the
    history): the merge models' answer over its threshold, or the kinds (:meth:`_replaces`).

    >>> _decided_by(1.6437), _decided_by(0.5)
    ('merge model: 1.64x its threshold', 'both of one single-valued kind, near each other')
    """
    if score >= 1.0:
        return f"merge model: {score:.2f}x its threshold"
    return "both of one single-valued kind, near each other"


def _framed_apart(entry: LiveEntry, frame: Frame | None) -> bool:
    """The known wordings set different slots (another person, another attribute, the past)."""
    return frame is not None and (other := entry.frame) is not None and other.slot() != frame.slot()


def corrected(old: str, correction: str) -> str:
    """``old`` with the number the ``correction`` replaces swapped for the new one, when the
    correction names exactly one new number and ``old`` holds one to replace; else the
    correction's own words.

    >>> corrected("I'm 34.", "sorry, typo, I meant 43")
    "I'm 43."
    >>> corrected("I'm 34.", "Sorry, 43 not 34")
    "I'm 43."
    >>> corrected("I live in Valencia.", "actually it's Bilbao")
    "actually it's Bilbao"
    """
    held, given = numbers_of(old), numbers_of(correction)
    new = [n for n in given if n not in held]
    replaced = [n for n in held if n in given] or list(held)
    if len(new) == 1 and len(set(replaced)) == 1:
        return old.replace(replaced[0], new[0])
    return correction.strip()


def _over_cap(limit: int) -> str:
    return (
        f"would remove more than {limit} entries in one batch (max_removals_per_run); "
        "send it again in a later batch or raise the limit"
    )
