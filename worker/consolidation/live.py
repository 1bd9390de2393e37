"""The entries active at one point of a rules merge, and the features a fuzzy match keys on.

An entry is live from the moment the plan holds it (an existing entry, or one the plan added)
until the plan retires it; the rules consolidator (:mod:`~worker.consolidation.rules`) keeps
them indexed by these features so a candidate is compared with a few, not all.

>>> fuzzy_key(Normalised.of("I have 2 cats"))
(('2',), False)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from worker.consolidation import text
from worker.consolidation.frames import Frame, conflict, frame_of
from worker.consolidation.text import Normalised


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
    #: The content-term set paraphrases share (:func:`~.semantic.paraphrase_key`).
    terms: frozenset[str] | None = field(default=None, repr=False)

    @property
    def frame(self) -> Frame | None:
        """The attribute frame the text sets, if any (:func:`~.frames.frame_of`, kept per
        text): read only where a candidate's own frame or a match needs it, so a batch that
        sets no frame reads none of its namespace's entries for one."""
        return frame_of(self.text)

    def conflicts_with(self, frame: Frame | None) -> bool:
        """:func:`~.frames.conflict` of this entry's frame with ``frame``, the entry's read
        only when ``frame`` is set (without it nothing conflicts)."""
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
