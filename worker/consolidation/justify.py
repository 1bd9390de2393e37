"""What may remove a memory: a plan retires an entry only where its batch's candidates say so.

A consolidator's plan is untrusted (a model's above all): a misbehaving model could invalidate
every entry, or "update" an unrelated entry into something else, while each operation still
names some candidate of the batch. :func:`removal_problem` says when an operation that retires
an *existing* entry (an ``invalidate`` or a ``supersede``) is not justified by the candidates it
names. One of them must be:

- a ``forget`` candidate (one with a ``key`` forgets only entries of that key);
- a candidate with the entry's ``key`` (a newer value for the slot);
- a candidate that carries a replacement about the same thing as the entry: the supersede's
  own text, or an ``add``/``supersede`` the same candidate backs in this plan, shares a content
  word with the entry (a contradiction in the same words: "I live in Rome" retires "I live in
  Paris"), sets the same attribute of the same person in a wording the rules know
  (:mod:`worker.consolidation.frames`: "I moved to Berlin" retires "I live in Paris"), or, by
  meaning in any language (:meth:`~worker.consolidation.meaning.Meaning.may_replace`),
  restates it or lies near it with a kind of statement in common ("nos hemos mudado a Bilbao"
  retires "vivo en Valencia"); or a correction ("sorry, I meant 43") of an entry holding a
  number it names.

"Related" cannot prove a contradiction; it makes an unrelated rewrite impossible (a replacement
about something else is refused), and the removal cap bounds the rest.

>>> related("I live in Paris", "I live in Rome"), related("I have a dog", "I prefer tea")
(True, False)
>>> related("저는 커피를 좋아해요", "저는 커피가 싫어요"), related("我住在巴黎", "我住在罗马")
(True, True)
>>> related("I live in Paris", "I moved to Berlin")
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Final

from worker.consolidation.frames import frame_of
from worker.consolidation.meaning import CORRECTION, Meaning, numbers_of
from worker.consolidation.text import normalise
from worker.consolidation.types import Add, Invalidate, Operation, Supersede
from worker.fields import Kind
from worker.models import Candidate
from worker.values import Entry

#: Frequent words long enough to count as content but carrying none (English; the other
#: languages' function words are mostly shorter than four letters).
_FILLER: Final = frozenset(
    {
        *("that", "this", "with", "have", "from", "they", "them", "what", "your", "been", "were"),
        *("will", "would", "about", "there", "their", "which", "when", "where", "also", "just"),
        *("very", "much", "some", "like", "into", "than", "then", "only", "more", "most", "over"),
        *("such", "dont", "does", "doesnt", "cant", "im", "ive"),
    }
)
#: Character pairs that only say "I" or "my" (Chinese, Korean).
_FILLER_PAIRS: Final = frozenset({"我是", "我的", "我在", "我有", "저는", "나는", "제가", "내가"})
#: Letters of a word compared (a crude stem: "lives"/"living" meet "live").
_STEM: Final = 5
#: Shortest word that counts as content (one less outside ASCII, where the English filler
#: words are not).
_MIN_WORD: Final = 4


@lru_cache(maxsize=4096)
def _content_words(text: str) -> frozenset[str]:
    """Content stems of ``text``: long words cut to a stem, and character pairs of each run of
    the scripts written without spaces (and of Hangul, whose words are short syllable runs)."""
    found: set[str] = set()
    run = ""
    for token in [*normalise(text).split(), " "]:
        if _syllabic(token):
            run += token
            continue
        found.update(run[i : i + 2] for i in range(len(run) - 1))
        run = ""
        minimum = _MIN_WORD if token.isascii() else _MIN_WORD - 1
        if len(token) >= minimum and token not in _FILLER and not token.isdigit():
            found.add(token[:_STEM])
    return frozenset(found - _FILLER_PAIRS)


def _syllabic(token: str) -> bool:
    """True for a token of Han, kana, Thai or Hangul, compared by character pairs."""
    return any(
        "\u3040" <= ch <= "\u9fff" or "\u0e00" <= ch <= "\u0e7f" or "\uac00" <= ch <= "\ud7af"
        for ch in token
    )


def related(a: str, b: str, meaning: Meaning | None = None) -> bool:
    """True when ``a`` and ``b`` share a content stem, or (by ``meaning``, texts prepared) are
    about the same thing (see the module notes)."""
    if not _content_words(a).isdisjoint(_content_words(b)):
        return True
    first, second = frame_of(a), frame_of(b)
    if first is not None and second is not None and first.slot() == second.slot():
        return True
    if meaning is None:
        return False
    if meaning.may_replace(a, b):
        return True
    kind = meaning.kind(b)
    named = set(numbers_of(b))
    return kind is not None and kind.name == CORRECTION and bool(named & set(numbers_of(a)))


def replacements(plan_ops: Sequence[Operation]) -> dict[str, list[str]]:
    """Per candidate id, the texts the plan's ``add``/``supersede`` operations it backs write."""
    texts: dict[str, list[str]] = {}
    for op in plan_ops:
        if isinstance(op, Add | Supersede):
            for cid in op.candidate_ids:
                texts.setdefault(cid, []).append(op.text)
    return texts


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
        if meaning is not None and cand.kind is Kind.FACT and related(old.text, cand.text, meaning):
            return None
        if any(related(old.text, t, meaning) for t in texts):
            return None
    return (
        f"{label}: retires entry {op.entry_id}, but no candidate it names justifies that; an "
        "entry is invalidated only for a forget candidate (of its key, when the forget has "
        "one), and superseded only by a candidate with the same key or by a replacement about "
        "the same thing; otherwise confirm the entry or leave it alone"
    )
