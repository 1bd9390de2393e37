"""The text the search index holds for an entry, and the terms a query looks for.

One normal form on both sides, so index and query always agree: NFKC, case-folded, Latin,
Greek and Cyrillic diacritics removed ("café" finds "cafe"), then cut into

* **words**: runs of letters with their combining marks and digits (``\\p{L}\\p{M}\\p{N}``,
  so Devanagari vowel signs stay inside their word), for scripts that space their words;
* **grams** for scripts that do not (Han, Hiragana, Katakana, Hangul, Thai, Lao, Khmer,
  Myanmar), where a tokenizer would keep a whole clause as one token: an entry indexes each
  run's characters and character bigrams (Thai-like scripts: bigrams only, since a single
  Thai letter says nothing); a query looks for the bigrams of its runs (the character itself
  for a one-character run), so the 2-character query "北京" finds "我住在北京".

An entry also records the terms it holds more than once, with their counts (BM25's term
frequency; see :func:`term_key` for what counts as the same term).

A query's words lose English stopwords ("what did she say about tea" looks for "say" and
"tea"), unless nothing would be left. Terms are plain strings: the backends quote them, so no
query text is ever read as search syntax.

>>> index_text("I moved to Café Zürich!").words
'i moved to cafe zurich'
>>> index_text("我住在北京").grams
'我 住 在 北 京 我住 住在 在北 北京'
>>> index_text("Chocolate cake with raspberries and a raspberry glaze").repeats
'raspberry:2'
>>> query_terms('What did "Ann" say about *tea*?')
QueryTerms(words=('ann', 'say', 'tea'), grams=())
>>> query_terms("北京"), query_terms("the")
(QueryTerms(words=(), grams=('北京',)), QueryTerms(words=('the',), grams=()))
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Final

import regex

#: Scripts written without spaces between words; indexed as character n-grams.
_SPACELESS: Final = (
    r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"
    r"\u30fc\u3005"  # the prolonged-sound and iteration marks (script Common)
)
_RUN: Final = regex.compile(rf"[{_SPACELESS}]+")
#: Among them, the scripts whose single characters are letters, not words: bigrams only.
_BIGRAM_ONLY: Final = regex.compile(r"[\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}]")
_WORD: Final = regex.compile(r"[\p{L}\p{M}\p{N}]+")
_FOLDABLE_MARKS: Final = regex.compile(r"([\p{Latin}\p{Greek}\p{Cyrillic}])\p{Mn}+")
#: :data:`_WORD` on ASCII text already case-folded: ASCII's letters and digits (most memory
#: text is ASCII, and this skips three Unicode normalisations and the spaceless-run scan).
_ASCII_WORD: Final = re.compile(r"[a-z0-9]+")

#: Longest indexed word: longer runs are noise (hashes, base64) and bloat the index.
MAX_WORD_CHARS: Final = 64
#: Most terms one query looks for: each costs one posting list; a pasted page is cut here.
MAX_QUERY_TERMS: Final = 32

#: English function words dropped from queries: "what did Melanie say" should rank by
#: "melanie" and "say", not tie every entry that contains "did". Kept small on purpose: a
#: query made only of these still searches for them.
_STOPWORD_TEXT: Final = """
    a about above after again all am an and any are as at be been before being below
    between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself
    yourselves"""
STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())


@dataclass(frozen=True)
class IndexText:
    """What the index holds for one entry: space-separated words and grams, its length in
    terms (BM25's document length), and ``key:count`` of each term it holds more than once
    (space-separated; see :func:`repeats_of`)."""

    words: str
    grams: str
    length: int
    repeats: str = ""


@dataclass(frozen=True)
class QueryTerms:
    """The distinct terms one query looks for, in query order."""

    words: tuple[str, ...]
    grams: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.words or self.grams)

    @property
    def all(self) -> tuple[str, ...]:
        return (*self.words, *self.grams)


def fold(text: str) -> str:
    """The normal form both index and query are cut from (see the module docstring)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    decomposed = _FOLDABLE_MARKS.sub(r"\1", unicodedata.normalize("NFD", folded))
    return unicodedata.normalize("NFC", decomposed)


def _split(text: str) -> tuple[list[str], list[str]]:
    """(words, spaceless runs) of ``text``, in order."""
    if text.isascii():
        # ASCII is its own NFKC, NFD and NFC form, has no marks to drop and no spaceless
        # script, and case-folds as it lowers: the same words as below, found directly.
        words = _ASCII_WORD.findall(text.lower())
        return [w for w in words if len(w) <= MAX_WORD_CHARS], []
    return _split_unicode(text)


def _split_unicode(text: str) -> tuple[list[str], list[str]]:
    """:func:`_split` of any text, the ASCII shortcut aside."""
    folded = fold(text)
    runs = _RUN.findall(folded)
    spaced = _RUN.sub(" ", folded)
    words = [w for w in _WORD.findall(spaced) if len(w) <= MAX_WORD_CHARS]
    return words, runs


def _bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)]


def term_key(term: str) -> str:
    """The key under which an entry counts its repeats of ``term``: the word with an English
    plural ending folded (Harman's S-stemmer: "-ies" to "-y", "-es" to "-e", "-s" dropped,
    but not "-aies", "-eies", "-aes", "-ees", "-oes", "-us", "-ss"), so "raspberry" and
    "raspberries" are one term; an n-gram is its own key.

    The counts are kept in the index (both databases) and read by the ranking, not by the
    databases' own stemmers (Porter for FTS5, the configured one for PostgreSQL), so both
    rank alike; plurals are the inflection that repeats most within one sentence. A word the
    database's stemmer matches but this key does not ("run" and "running") counts once: the
    term frequency can only be underestimated, never invented.

    >>> [term_key(w) for w in ("berries", "horses", "cats", "bus", "glass", "北京")]
    ['berry', 'horse', 'cat', 'bus', 'glass', '北京']
    """
    if len(term) < 3 or term[-1] != "s":  # every rule below ends in "s"
        return term
    if len(term) > 3 and term.endswith("ies") and not term.endswith(("aies", "eies")):
        return term[:-3] + "y"
    if len(term) > 3 and term.endswith("es") and not term.endswith(("aes", "ees", "oes")):
        return term[:-1]
    if len(term) > 2 and term.endswith("s") and not term.endswith(("us", "ss")):
        return term[:-1]
    return term


def _repeats(words: list[str], grams: list[str]) -> str:
    counts: dict[str, int] = {}
    for term in (*map(term_key, words), *grams):
        counts[term] = counts.get(term, 0) + 1
    return " ".join(f"{key}:{n}" for key, n in counts.items() if n > 1)


def repeats_of(column: str) -> dict[str, int]:
    """The counts :class:`IndexText` ``.repeats`` holds, by :func:`term_key` (keys are words
    or n-grams: they hold neither spaces nor colons).

    >>> repeats_of("raspberry:2 北京:3"), repeats_of("")
    ({'raspberry': 2, '北京': 3}, {})
    """
    found: dict[str, int] = {}
    for item in column.split():
        key, _, count = item.rpartition(":")
        found[key] = int(count)
    return found


def index_text(text: str) -> IndexText:
    """What the index stores for an entry whose text is ``text``."""
    words, runs = _split(text)
    grams: list[str] = []
    for run in runs:
        if not _BIGRAM_ONLY.match(run) or len(run) == 1:
            grams.extend(run)
        grams.extend(_bigrams(run))
    return IndexText(
        " ".join(words), " ".join(grams), len(words) + len(grams), _repeats(words, grams)
    )


def query_terms(query: str) -> QueryTerms:
    """The terms to look for (see the module docstring); empty for a query with no letters."""
    words, runs = _split(query)
    kept = [w for w in words if w not in STOPWORDS] or words
    grams = [g for run in runs for g in (_bigrams(run) or [run])]
    unique_words = tuple(dict.fromkeys(kept))[:MAX_QUERY_TERMS]
    unique_grams = tuple(dict.fromkeys(grams))[: MAX_QUERY_TERMS - len(unique_words)]
    return QueryTerms(unique_words, unique_grams)
