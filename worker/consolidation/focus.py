"""The entries a batch can touch: what the consolidation prompt shows of a large memory.

Showing every active entry makes each call's prompt grow with the user's memory (500 entries
are ~10k tokens per batch, paid again for every batch). So up to :data:`SHOW_ALL` active
entries the model sees them all, and past that only the entries the batch can touch:

- every active entry holding the ``key`` of a candidate (a keyed candidate supersedes its
  slot, so the slot's holder must be shown);
- with a meaning model (:class:`~worker.consolidation.meaning.Meaning`, the default), every
  entry giving the same single-valued attribute as a candidate ("I'm based in Glasgow" for
  "nos hemos mudado a Bilbao"): the entries a correct plan must supersede are never unshown;
- each candidate's nearest entries, by vector and by words in turns (the BM25 ranker the rules
  consolidator uses, :class:`~worker.consolidation.semantic.LexicalIndex`, over content terms;
  ties and entries sharing no term in entry order), taken in turns, one per candidate per
  round, until
  :data:`NEAREST_CAP` entries are chosen, or :data:`NEAREST_PER_CANDIDATE` per candidate for a
  batch larger than five (so a large batch's candidates are not left without neighbours).

The chosen entries keep the prompt's usual order (by path, then age). An entry not shown has
no short id, so a plan cannot confirm, supersede or invalidate it:
:func:`~worker.consolidation.llm.translate` rejects an unknown ``E`` id as a problem.

>>> from datetime import UTC, datetime
>>> from worker.models import make_candidate
>>> from worker.values import Entry, NamespaceState
>>> t = datetime(2025, 1, 1, tzinfo=UTC)
>>> entries = tuple(Entry(id=f"e{i}", path="/memories/facts.md", text=f"I collect {i} stamps",
...     valid_from=t, created_at=t, last_confirmed_at=t) for i in range(100))
>>> dog = Entry(id="dog", path="/memories/facts.md", text="I have a dog named Rex",
...     valid_from=t, created_at=t, last_confirmed_at=t)
>>> state = NamespaceState("user:u1", 1, None, entries=(*entries, dog))
>>> shown = touched_entries(state, [make_candidate(user_id="u1", trace_id="t",
...     text="My dog Rex is ten")])
>>> len(shown), "dog" in {e.id for e in shown}
(20, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import zip_longest
from typing import Final

from worker.consolidation.meaning import Meaning
from worker.consolidation.render import entry_order
from worker.consolidation.semantic import LexicalIndex, build_index
from worker.models import Candidate
from worker.values import Entry, NamespaceState

#: Up to this many active entries the prompt shows them all (~600 tokens): small memories keep
#: the whole picture, and the prompt stays within 1.5x of its size at 10 entries.
SHOW_ALL: Final = 40

#: Past :data:`SHOW_ALL`, how many lexically nearest entries a batch is shown at least (keyed
#: entries come on top): a single candidate sees a broad neighbourhood.
NEAREST_CAP: Final = 20
#: ...and per candidate: each of a batch of five sees its four closest (the cap), a larger batch
#: as many per candidate, so the prompt per candidate stays flat in the batch's size too.
NEAREST_PER_CANDIDATE: Final = 4


def _order(entry: Entry) -> tuple[str, tuple[object, ...]]:
    return (entry.path, entry_order(entry))


def touched_entries(
    state: NamespaceState, candidates: Sequence[Candidate], *, meaning: Meaning | None = None
) -> list[Entry]:
    """The active entries of ``state`` the prompt for ``candidates`` shows (module docs)."""
    active = sorted((e for e in state.entries if e.active), key=_order)
    if len(active) <= SHOW_ALL:
        return active
    keys = {c.key for c in candidates if c.key}
    chosen = {e.id for e in active if e.key is not None and e.key in keys}
    if meaning is not None:
        meaning.prepare([*(e.text for e in active), *(c.text for c in candidates)])
        chosen |= {
            e.id for c in candidates for e in active if meaning.same_attribute(e.text, c.text)
        }
    cap = max(NEAREST_CAP, NEAREST_PER_CANDIDATE * len(candidates))
    index = build_index((e.id, e.text) for e in active)
    limit = cap + len(chosen)
    ranked = [_nearest(index, active, c.text, limit, meaning) for c in candidates]
    nearest: set[str] = set()
    for rank in range(cap + len(chosen)):
        for ids in ranked:
            if len(nearest) >= cap:
                break
            if rank < len(ids) and ids[rank] not in chosen:
                nearest.add(ids[rank])
    chosen |= nearest
    return [e for e in active if e.id in chosen]


def _nearest(
    index: LexicalIndex, active: Sequence[Entry], text: str, limit: int, meaning: Meaning | None
) -> list[str]:
    """Ids of the entries nearest ``text``: by words alone, or by vector and by words in
    turns (each once)."""
    worded = [i for i, _score in index.nearest(text, limit, pad=True)]
    if meaning is None:
        return worded
    by_vector = [active[i].id for i in meaning.nearest(text, [e.text for e in active], limit)]
    merged: dict[str, None] = {}
    for pair in zip_longest(by_vector, worded):
        merged.update((i, None) for i in pair if i is not None)
    return list(merged)[:limit]
