"""Text normalisation and fuzzy similarity, for de-duplicating memories without a model.

One normal form (:func:`normalise`) is used by everything that compares text: dedupe, confirm,
forget matching and the guards (:mod:`~worker.consolidation.guards`). It is built from
:func:`~.canonical.canonical` (NFKC, default-ignorable and zero-width characters removed,
look-alike letters inside mixed-script words folded to Latin, every decimal digit made ASCII),
then case-folded and cut into tokens with the ``regex`` module's Unicode properties: a word is
letters *with their combining marks* (``\\p{L}\\p{M}``, so Devanagari vowel signs and Hebrew
points are kept), a number is a run of digits, an emoji is a token of its own, and the
characters of word-free scripts (Han, Hiragana, Katakana, Thai, Lao, Khmer, Myanmar) are one
token each, so those scripts are compared as character sequences and n-grams rather than as
words.

Two statements are *the same memory* when their normal forms are equal and not empty, or when
they are nearly equal *and* agree on every number, on negation and on their named entities.
"Nearly equal" is, for spaced scripts, at most ``(len(a) + len(b)) // 10`` (the old 0.9 ratio)
and at most :data:`MAX_EDITS` character insertions/deletions (rapidfuzz's bounded ``Indel``
distance, so a long text costs a banded comparison, never a full quadratic one), and outside
ASCII every changed word must be a one-edit typo of a word of :data:`MIN_TYPO_WORD`+ letters;
for word-free scripts, a character-bigram overlap of at least 0.9 with every character of one
text found in the other (a changed character is a different word).

>>> normalise("  I prefer   Dark-mode!! ")
'i prefer dark mode'
>>> normalise("ig\\u200bnore"), normalise("ｐａｓｓｗｏｒｄ"), normalise("pаssword")  # Cyrillic а
('ignore', 'password', 'password')
>>> normalise("我喜欢喝茶")
'我 喜 欢 喝 茶'
>>> is_near_duplicate("I prefer dark mode.", "i prefer DARK mode")
True
>>> is_near_duplicate("My sister is 30", "My sister is 31")
False
>>> is_near_duplicate("🍕🍕", "🎉🎉"), is_near_duplicate("!!!", "???")
(False, False)
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from functools import lru_cache
from itertools import pairwise
from typing import Final, NamedTuple

import regex
from rapidfuzz.distance import Indel, Levenshtein

from worker.consolidation.canonical import KEPT_TEXTS, canonical
from worker.consolidation.lexicon import (
    CJK_NUMERALS,
    NEGATION_MARKERS,
    NEGATION_PREFIXES,
    NEGATIONS,
    NUMBER_WORDS,
)

#: Character similarity at or above which two statements count as the same memory, as a share
#: of their total length: at most ``(len(a) + len(b)) // 10`` insertions/deletions. 0.9
#: tolerates a changed article or a typo in a sentence of ~20+ characters ("in my editor" /
#: "in the editor") but not a changed object ("tea" / "coffee").
DUPLICATE_RATIO: Final = 0.9

#: Most character insertions/deletions two near-duplicates may differ by, whatever their
#: length: past this a long text was rewritten, not retyped. It also bounds the comparison
#: (rapidfuzz stops once the distance is exceeded), so an adversarial batch of long texts
#: costs O(length × MAX_EDITS) per pair instead of O(length²).
MAX_EDITS: Final = 64

#: Shortest normalised text a fuzzy comparison is attempted on; below it only exact matches
#: count, since one changed letter in a 5-letter text is a different word, not a typo.
MIN_FUZZY_CHARS: Final = 12

#: Shortest word (outside ASCII) in which one edit counts as a typo rather than a new word.
MIN_TYPO_WORD: Final = 5

#: Scripts written without spaces between words: each character is one token.
_WORD_FREE: Final = r"\p{Han}\p{Hiragana}\p{Katakana}\u30fc\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"

_APOSTROPHES: Final = regex.compile(r"['’`ʼ]")
_TOKEN: Final = regex.compile(
    rf"[{_WORD_FREE}]\p{{M}}*"  # one character of a word-free script, with its marks
    r"|\p{Regional_Indicator}{2}"  # a flag
    r"|\p{Extended_Pictographic}\p{M}*"  # an emoji
    rf"|(?:(?![{_WORD_FREE}])[\p{{L}}\p{{N}}])[\p{{M}}]*"  # a word: letters/digits + marks…
    rf"(?:(?![{_WORD_FREE}])[\p{{L}}\p{{N}}\p{{M}}])*"  # …without word-free characters
)
#: ASCII texts take plain ``re`` patterns and string methods: on ASCII they read exactly as the
#: Unicode patterns do (a letter or digit is ``[A-Za-z0-9]``, lower case is ``[a-z]``), at a
#: fraction of the cost per call.
_ASCII_TOKEN: Final = re.compile(r"[a-z0-9]+")
#: The ASCII normal form by one byte translation, which reads as :data:`_ASCII_TOKEN` does on
#: the lower-cased text: a letter becomes its lower case, a digit stays, every other byte is a
#: space (so splitting on spaces leaves exactly the ``[a-z0-9]+`` runs); the apostrophes are
#: deleted first. Several times cheaper per text than a regex search and a join of its
#: matches, and a cold merge derives the form of every entry of its namespace.
_ASCII_FOLD: Final = bytes(
    ord(c.lower()) if c.isascii() and c.isalnum() else 0x20 for c in map(chr, range(256))
)
_ASCII_APOSTROPHES: Final = b"'`"
_ASCII_SENTENCE_END: Final = re.compile(r"[.!?:;\n]")
_ASCII_WORD: Final = re.compile(r"[A-Za-z0-9]+")
_HAS_WORD_FREE: Final = regex.compile(rf"[{_WORD_FREE}]")
_DENSE: Final = regex.compile(rf"[{_WORD_FREE}\p{{Hangul}}]")
_DIGITS: Final = re.compile(r"[0-9]+")
#: For named entities (cased scripts): capitalised words not at a sentence start.
_LOWER: Final = regex.compile(r"\p{Ll}")
_UPPER: Final = regex.compile(r"\p{Lu}|\p{Lt}")
_SENTENCE_END: Final = regex.compile(r"[.!?:;\n]")
_WORD: Final = regex.compile(r"[\p{L}\p{M}\p{N}]+")


#: Texts whose :class:`Normalised` forms are kept: a few namespaces' entries (a chat namespace
#: holds hundreds), so consecutive batches of the same namespaces find them derived.
_KEPT_FORMS: Final = 8192


@lru_cache(maxsize=KEPT_TEXTS)
def normalise(text: str) -> str:
    """Canonical form, case-folded, cut into tokens (see the module notes), space-joined.

    >>> normalise("Don’t  call me   Bob.")
    'dont call me bob'
    >>> normalise("मेरी बेटी डॉक्टर है") != normalise("मेरा बेटा डॉक्टर है")
    True
    """
    if text.isascii():  # canonical is the text; casefold is lower; ' and ` the apostrophes
        return _ascii_normal(text)
    folded = _APOSTROPHES.sub("", canonical(text).casefold())
    if folded.isascii():  # the same tokens, found by a simpler pattern
        return _ascii_normal(folded)
    return " ".join(_TOKEN.findall(folded))


def _ascii_normal(text: str) -> str:
    """:func:`normalise` of an ASCII ``text``: its ``[a-z0-9]+`` runs once lower-cased and
    stripped of ``'`` and `````, space-joined (:data:`_ASCII_FOLD`)."""
    return b" ".join(text.encode().translate(_ASCII_FOLD, _ASCII_APOSTROPHES).split()).decode()


def tokens(text: str) -> list[str]:
    """The tokens of the normalised text.

    >>> tokens("I live in São Paulo!")
    ['i', 'live', 'in', 'são', 'paulo']
    """
    return normalise(text).split()


def similarity(a: str, b: str) -> float:
    """Indel (LCS-based) similarity of the normalised texts, 0.0 … 1.0.

    >>> similarity("I like tea", "i like tea!")
    1.0
    """
    return float(Indel.normalized_similarity(normalise(a), normalise(b)))


def _nf(words: frozenset[str]) -> frozenset[str]:
    """Word lists as written → as they appear in normal form (NFKC, case-folded)."""
    return frozenset(unicodedata.normalize("NFKC", w).casefold() for w in words)


_NEGATIONS_NF: Final = _nf(NEGATIONS)
_NUMBER_WORDS_NF: Final = _nf(NUMBER_WORDS)
_MARKERS_NF: Final = tuple(_nf(frozenset(NEGATION_MARKERS)))


def _polarity(words: list[str]) -> bool:
    if not _NEGATIONS_NF.isdisjoint(words):
        return True
    compact = "".join(words)
    if compact.isascii():
        return False
    if any(w.startswith(NEGATION_PREFIXES) for w in words):
        return True
    return any(marker in compact for marker in _MARKERS_NF)


def _numbers(norm: str, words: list[str]) -> tuple[str, ...]:
    """Digit runs, number words, CJK numerals (none in ASCII) of ``norm`` (split: ``words``)."""
    found = _DIGITS.findall(norm)
    named = (
        [] if _NUMBER_WORDS_NF.isdisjoint(words) else [w for w in words if w in _NUMBER_WORDS_NF]
    )
    if norm.isascii():
        return (*found, *named)
    return (*found, *named, *(c for c in norm if c in CJK_NUMERALS))


def weight(norm: str) -> int:
    """Length of a normal form for "long enough to match safely" checks.

    Its length, with each character of a word-free script and each Hangul syllable counted
    twice (two Han characters or Hangul syllables are a word; two Latin letters are not).

    >>> weight("it"), weight("女 儿"), weight("녹차를")
    (2, 5, 6)
    """
    return len(norm) + len(_DENSE.findall(norm))


def _entities(raw: str) -> frozenset[str] | None:
    """Capitalised words not at a sentence start (None when the text has no lower case)."""
    if raw.isascii():
        return _ascii_entities(raw)
    text = canonical(raw)
    if not _LOWER.search(text):
        return None
    if not _UPPER.search(text, 1):  # the usual case: nothing capitalised after the start
        return frozenset()
    found = set()
    for sentence in _SENTENCE_END.split(text):
        for word in _WORD.findall(sentence)[1:]:
            if word[0].isupper() and word != "I":
                found.add(word.casefold())
    return frozenset(found)


def _ascii_entities(text: str) -> frozenset[str] | None:
    """:func:`_entities` of an ASCII text (it is its own canonical form)."""
    if text.upper() == text:  # no lower-case letter
        return None
    rest = text[1:]
    if rest.lower() == rest:  # nothing capitalised after the start
        return frozenset()
    return frozenset(
        word.lower()
        for sentence in _ASCII_SENTENCE_END.split(text)
        for word in _ASCII_WORD.findall(sentence)[1:]
        if word[0].isupper() and word != "I"
    )


class Normalised(NamedTuple):
    """A text's normal form and the features the duplicate rule compares, computed once.

    A named tuple: immutable like a frozen dataclass, and built at a fraction of the cost (a
    namespace's entries are all derived on a cold merge).
    """

    text: str
    numbers: tuple[str, ...]
    negated: bool
    #: The text as given (its named entities are read from it when a comparison needs them).
    raw: str
    #: Token bigrams, for texts holding word-free scripts (None otherwise).
    grams: Counter[tuple[str, str]] | None

    @property
    def entities(self) -> frozenset[str] | None:
        """Named entities (cased scripts); None when the text is all capitals, so not
        comparable. Derived on use: only a pair that passes every cheaper check needs them."""
        return _entities(self.raw)

    @classmethod
    def of(cls, raw: str) -> Normalised:
        """The normal form and features of ``raw``, derived once per text and kept."""
        return _normalised(raw)


#: A named tuple's fields as one tuple, without its generated ``__new__`` (a Python call).
_NEW_TUPLE: Final = tuple.__new__


@lru_cache(maxsize=_KEPT_FORMS)
def _normalised(raw: str) -> Normalised:
    """:meth:`Normalised.of`, cached: a namespace's entries are re-read with every batch, so
    their forms are derived on the first batch only. Callers never mutate the result (frozen;
    ``grams`` is only read)."""
    # An ASCII text's form directly: an entry's text is normalised here only, so the cache of
    # :func:`normalise` (shared by the guards and dedupe of one candidate) is not filled with it.
    norm = _ascii_normal(raw) if raw.isascii() else normalise(raw)
    words = norm.split()
    if norm.isascii():  # no word-free script, no negation marker outside the word list
        # :func:`_numbers` and the tuple's own constructor, inlined: a cold merge derives the
        # form of every entry of its namespace, so the calls saved are per entry.
        # The tokens holding a digit; when each is all digits they are the digit runs (a
        # token is ``[a-z0-9]+``), else the runs are searched for.
        numbers = [w for w in words if not w.isalpha()]
        if not all(map(str.isdigit, numbers)):
            numbers = _DIGITS.findall(norm)
        if not _NUMBER_WORDS_NF.isdisjoint(words):
            numbers += [w for w in words if w in _NUMBER_WORDS_NF]
        negated = not _NEGATIONS_NF.isdisjoint(words)
        return _NEW_TUPLE(Normalised, (norm, tuple(numbers), negated, raw, None))
    grams = Counter(pairwise(words)) if _HAS_WORD_FREE.search(norm) else None
    return Normalised(norm, _numbers(norm, words), _polarity(words), raw, grams)


#: :meth:`Normalised.of` as a plain function (a cold merge derives one form per entry).
form_of: Final = _normalised


def _same_entities(a: Normalised, b: Normalised) -> bool:
    return a.entities is None or b.entities is None or a.entities == b.entities


def _grams_match(a: Normalised, b: Normalised) -> bool:
    """Word-free scripts: bigram overlap ≥ 0.9, and one side's tokens all in the other."""
    ga, gb = a.grams or Counter(), b.grams or Counter()
    total = ga.total() + gb.total()
    if not total or 2 * (ga & gb).total() < DUPLICATE_RATIO * total:
        return False
    ta, tb = set(a.text.split()), set(b.text.split())
    return ta <= tb or tb <= ta


def _words_are_typos(a: str, b: str) -> bool:
    """Outside ASCII, every word one text has and the other lacks is a typo of one it has.

    A typo is one edit in a word of at least :data:`MIN_TYPO_WORD` characters. The rules know
    no function words of other languages, and there a short changed word is a different word:
    Hindi मेरी/मेरा (my, feminine/masculine), Arabic ابني/ابنتي (my son/my daughter).
    """
    only_a, only_b = Counter(a.split()), Counter(b.split())
    only_a, only_b = only_a - only_b, only_b - only_a
    if any(w.isascii() for w in (*only_a, *only_b)) and not all(
        w.isascii() for w in (*only_a, *only_b)
    ):
        return False
    rest = list(only_b.elements())
    for word in only_a.elements():
        if word.isascii():
            continue
        match = next(
            (
                other
                for other in rest
                if min(len(word), len(other)) >= MIN_TYPO_WORD
                and Levenshtein.distance(word, other, score_cutoff=1) <= 1
            ),
            None,
        )
        if match is None:
            return False
        rest.remove(match)
    return all(w.isascii() for w in rest)


class NearDuplicateOf:
    """:func:`is_near_duplicate` of one text ``b`` against many texts ``a``, same answers.

    >>> same = NearDuplicateOf(Normalised.of("I prefer dark mode in the editor"))
    >>> same(Normalised.of("I prefer dark mode in my editor")), same(Normalised.of("I eat meat"))
    (True, False)
    """

    __slots__ = ("b",)

    def __init__(self, b: Normalised) -> None:
        self.b = b

    def __call__(self, a: Normalised) -> bool:
        b = self.b
        at, bt = a.text, b.text
        la, lb = len(at), len(bt)
        if la < MIN_FUZZY_CHARS or lb < MIN_FUZZY_CHARS:  # only exact; empty never matches
            return la > 0 and at == bt
        if at == bt:
            return True
        limit = min((la + lb) // 10, MAX_EDITS)
        if abs(la - lb) > limit or a.numbers != b.numbers or a.negated != b.negated:
            return False
        if a.grams is not None or b.grams is not None:
            return _same_entities(a, b) and _grams_match(a, b)
        # The bounded distance (one C call) before the named entities (read from both raw
        # texts on each call): every check is pure and all must pass, so the order only
        # decides which failing one is seen first.
        if int(Indel.distance(at, bt, score_cutoff=limit)) > limit:
            return False
        return _same_entities(a, b) and (
            (at.isascii() and bt.isascii()) or _words_are_typos(at, bt)
        )


def is_near_duplicate(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` state the same memory (see the module notes for the rule).

    >>> is_near_duplicate("I prefer dark mode in my editor", "I prefer dark mode in the editor")
    True
    >>> is_near_duplicate("I eat meat", "I do not eat meat")
    False
    """
    return NearDuplicateOf(Normalised.of(b))(Normalised.of(a))


def contains_phrase(haystack: str, phrase: str) -> bool:
    """True when the normalised ``phrase`` occurs in ``haystack`` on token boundaries.

    >>> contains_phrase("I live in Paris", "live in paris")
    True
    >>> contains_phrase("I live in Parisville", "live in paris")
    False
    """
    return contains_normalised_phrase(normalise(haystack), normalise(phrase))


def contains_normalised_phrase(haystack: str, phrase: str) -> bool:
    """:func:`contains_phrase` for texts already normalised (e.g. cached per entry)."""
    return bool(phrase) and f" {phrase} " in f" {haystack} "
