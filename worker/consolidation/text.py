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


def is_near_duplicate(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` state the same memory (see the module notes for the rule).

    >>> is_near_duplicate("I prefer dark mode in my editor", "I prefer dark mode in the editor")
    True
    >>> is_near_duplicate("I eat meat", "I do not eat meat")
    False
    """
    na, nb = normalise(a), normalise(b)
    if na == nb:
        return True
    if min(len(na), len(nb)) < MIN_FUZZY_CHARS:
        return False
    if _DIGITS.findall(na) != _DIGITS.findall(nb):
        return False
    if _polarity(na.split()) != _polarity(nb.split()):
        return False
    matcher = SequenceMatcher(None, na, nb, autojunk=False)
    # The quick ratios are cheap upper bounds; most unrelated pairs stop here.
    if matcher.real_quick_ratio() < DUPLICATE_RATIO or matcher.quick_ratio() < DUPLICATE_RATIO:
        return False
    return matcher.ratio() >= DUPLICATE_RATIO


def contains_phrase(haystack: str, phrase: str) -> bool:
    """True when the normalised ``phrase`` occurs in ``haystack`` on word boundaries.

    >>> contains_phrase("I live in Paris", "live in paris")
    True
    >>> contains_phrase("I live in Parisville", "live in paris")
    False
    """
    nh, np_ = f" {normalise(haystack)} ", f" {normalise(phrase)} "
    return bool(np_.strip()) and np_ in nh
