"""Text normalisation and fuzzy similarity, for de-duplicating memories without a model.

Two statements are *the same memory* when their normalised forms are equal, or when they are
nearly equal character-wise *and* agree on every number and on negation. The extra checks exist
because a character ratio alone calls "my sister is 30" and "my sister is 31" duplicates, and
"I eat meat" / "I don't eat meat" close ones.

>>> normalise("  I prefer   Dark-mode!! ")
'i prefer dark mode'
>>> is_near_duplicate("I prefer dark mode.", "i prefer DARK mode")
True
>>> is_near_duplicate("My sister is 30", "My sister is 31")
False
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Final

#: Character similarity (difflib ratio of the normalised texts) at or above which two statements
#: count as the same memory. 0.9 tolerates a changed article or a typo in a sentence of ~20+
#: characters ("in my editor" / "in the editor") but not a changed object ("tea" / "coffee"
#: scores ~0.7), so near-misses stay separate entries rather than silently merging.
DUPLICATE_RATIO: Final = 0.9

#: Shortest normalised text a fuzzy comparison is attempted on; below it only exact matches
#: count, since one changed letter in a 5-letter text is a different word, not a typo.
MIN_FUZZY_CHARS: Final = 12

#: Words that flip a statement's meaning; two texts differing in these are never duplicates.
NEGATIONS: Final = frozenset(
    {
        "not",
        "no",
        "never",
        "dont",
        "doesnt",
        "didnt",
        "isnt",
        "arent",
        "wasnt",
        "cant",
        "wont",
        "nobody",
        "nothing",
        "neither",
        "nor",
        "without",
        "hate",
        "dislike",
    }
)

#: Bits for the occurrence number in a :class:`Normalised` bag member (``ord(char) << bits |
#: k``): far more occurrences of one character than any text the store accepts can hold.
_OCCURRENCE_BITS: Final = 32

_APOSTROPHES: Final = re.compile(r"['’`]")
_NON_WORD: Final = re.compile(r"[^\w]+")
_DIGITS: Final = re.compile(r"\d+")


def normalise(text: str) -> str:
    """Case-fold, unify Unicode forms, drop apostrophes and punctuation, collapse whitespace.

    >>> normalise("Don’t  call me   Bob.")
    'dont call me bob'
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = _APOSTROPHES.sub("", folded)
    return " ".join(_NON_WORD.sub(" ", folded).replace("_", " ").split())


def tokens(text: str) -> list[str]:
    """The words of the normalised text.

    >>> tokens("I live in São Paulo!")
    ['i', 'live', 'in', 'são', 'paulo']
    """
    return normalise(text).split()


def similarity(a: str, b: str) -> float:
    """difflib ratio of the normalised texts, 0.0 … 1.0.

    >>> similarity("I like tea", "i like tea!")
    1.0
    """
    na, nb = normalise(a), normalise(b)
    if na == nb:
        return 1.0
    return SequenceMatcher(None, na, nb, autojunk=False).ratio()


def _polarity(words: list[str]) -> bool:
    return any(w in NEGATIONS for w in words)


@dataclass(frozen=True, slots=True)
class Normalised:
    """A text's normalised form and the features the duplicate rule compares, computed once.

    Comparing one candidate with every live entry re-derived all of this per pair; holding it
    per entry makes a comparison a few integer checks for almost every unrelated pair.
    """

    text: str
    numbers: tuple[str, ...]
    negated: bool
    #: The characters of ``text`` as a multiset, the one behind difflib's ``quick_ratio``:
    #: the k-th occurrence of a character is one set member, so the size of the intersection
    #: of two bags is the number of characters the texts have in common, computed in C.
    bag: frozenset[int]

    @classmethod
    def of(cls, raw: str) -> Normalised:
        norm = normalise(raw)
        return cls(
            text=norm,
            numbers=tuple(_DIGITS.findall(norm)),
            negated=_polarity(norm.split()),
            bag=frozenset(
                ord(char) << _OCCURRENCE_BITS | k
                for char, count in Counter(norm).items()
                for k in range(count)
            ),
        )


class NearDuplicateOf:
    """:func:`is_near_duplicate` of one text ``b`` against many texts ``a``, same answers.

    ``SequenceMatcher`` indexes its second sequence (``set_seq2``), the costly part, so one
    matcher per ``b`` is reused with ``set_seq1`` per ``a``: the argument order of
    :func:`is_near_duplicate` is kept, since difflib's ratio is not symmetric. The two
    quick-ratio bounds are computed from the cached lengths and character counts, exactly as
    difflib computes them, before the full ratio is paid for.

    >>> same = NearDuplicateOf(Normalised.of("I prefer dark mode in the editor"))
    >>> same(Normalised.of("I prefer dark mode in my editor")), same(Normalised.of("I eat meat"))
    (True, False)
    """

    __slots__ = ("_matcher", "b")

    def __init__(self, b: Normalised) -> None:
        self.b = b
        self._matcher: SequenceMatcher[str] | None = None

    def __call__(self, a: Normalised) -> bool:
        b = self.b
        if a.text == b.text:
            return True
        la, lb = len(a.text), len(b.text)
        if min(la, lb) < MIN_FUZZY_CHARS or a.numbers != b.numbers or a.negated != b.negated:
            return False
        # difflib's real_quick_ratio and quick_ratio, the same float expressions: upper bounds
        # of ratio(), so a pair under either can never reach the threshold.
        total = la + lb
        if 2.0 * min(la, lb) / total < DUPLICATE_RATIO:
            return False
        if 2.0 * len(a.bag & b.bag) / total < DUPLICATE_RATIO:
            return False
        matcher = self._matcher
        if matcher is None:
            matcher = self._matcher = SequenceMatcher(None, b.text, b.text, autojunk=False)
        matcher.set_seq1(a.text)
        return matcher.ratio() >= DUPLICATE_RATIO


def is_near_duplicate(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` state the same memory (see the module notes for the rule).

    >>> is_near_duplicate("I prefer dark mode in my editor", "I prefer dark mode in the editor")
    True
    >>> is_near_duplicate("I eat meat", "I do not eat meat")
    False
    """
    return NearDuplicateOf(Normalised.of(b))(Normalised.of(a))


def contains_phrase(haystack: str, phrase: str) -> bool:
    """True when the normalised ``phrase`` occurs in ``haystack`` on word boundaries.

    >>> contains_phrase("I live in Paris", "live in paris")
    True
    >>> contains_phrase("I live in Parisville", "live in paris")
    False
    """
    return contains_normalised_phrase(normalise(haystack), normalise(phrase))


def contains_normalised_phrase(haystack: str, phrase: str) -> bool:
    """:func:`contains_phrase` for texts already normalised (e.g. cached per entry)."""
    return bool(phrase) and f" {phrase} " in f" {haystack} "
