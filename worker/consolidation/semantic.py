"""Meaning-level comparison without a model: content terms, a BM25 ranker and paraphrases.

Built on the normal form of :mod:`~worker.consolidation.text`, with apostrophes read as word
breaks (French elision: ``j'habite`` is ``j habite``). A text's *terms* are its tokens with
function words dropped (:data:`~.semantic_lexicon.STOPWORDS`, one row per language),
synonyms folded to one word (``lives``/``reside``/``home`` → ``live``, ``color`` → ``colour``)
and a light plural stem (``sisters`` → ``sister``). Characters of word-free scripts (Han, kana,
Thai, …) are terms one by one, particles dropped, and the ranker indexes their bigrams too.

- :class:`LexicalIndex`: an in-memory BM25 index (:mod:`worker.bm25`) over the terms of a
  namespace's active entries, updated as a merge adds and retires entries;
  :meth:`LexicalIndex.nearest` ranks them for a text (ties and zero scores in insertion order).
- :func:`is_paraphrase`: the same terms as a set, the same numbers, the same negation, and no
  two names swapped ("Anna pays Ben" is not "Ben pays Anna"). Word order and function words do
  not count: "Dune is my favourite book" restates "My favourite book is Dune".

>>> terms("My sister's home is in Riga") == terms("My sister lives in Riga")
True
>>> is_paraphrase("Dune is my favourite book", "My favourite book is Dune")
True
>>> is_paraphrase("I live in Paris", "I lived in Paris"), is_paraphrase("Anna pays Ben",
...     "Ben pays Anna")
(False, False)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from functools import lru_cache
from itertools import pairwise
from typing import Final

import regex

from worker.bm25 import scores
from worker.consolidation.semantic_lexicon import STOPWORDS, SYNONYMS, WORD_FREE_STOP
from worker.consolidation.text import Normalised, normalise

#: A similarity a caller may add (e.g. cosine of embeddings), 0.0 … 1.0 for two texts.
Similarity = Callable[[str, str], float]

#: Longest text (characters) compared by meaning: a memory worth restating in other words is a
#: sentence or two; past this only the exact and fuzzy rules apply (and their cost bounds).
MAX_SEMANTIC_CHARS: Final = 300

#: BM25's length normalisation (the usual default; the saturation is :data:`worker.bm25.K1`).
BM25_B: Final = 0.75

_APOSTROPHE: Final = regex.compile(r"['’`ʼ]")
#: A token that is one character of a word-free script (see :mod:`~.text`).
WORD_FREE_CHAR: Final = regex.compile(
    r"^[\p{Han}\p{Hiragana}\p{Katakana}\u30fc\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}]"
)
_CAPITALISED: Final = regex.compile(r"(?<![\p{L}\p{M}\p{N}])\p{Lu}[\p{L}\p{M}]*")
#: Shortest word a plural ``-s`` is taken from ("bus", "gas" keep theirs).
_MIN_PLURAL: Final = 4
#: Cyrillic case endings dropped from words this long (Москве / Москву / Москва → москв).
_MIN_CYRILLIC_STEM: Final = 5
_CYRILLIC_END: Final = regex.compile(r"[аяоеёиыуюйь]+$")


@lru_cache(maxsize=4096)
def spaced(text: str) -> str:
    """The normal form with apostrophes as word breaks (``J'habite`` → ``j habite``)."""
    if text.isascii() and "'" not in text and "`" not in text:
        return Normalised.of(text).text  # no apostrophe to break on: the (kept) normal form
    return normalise(_APOSTROPHE.sub(" ", text))


def stem(word: str) -> str:
    """A light, conservative stem: synonyms folded, plural ``-s``/``-ies``, Cyrillic endings.

    >>> stem("sisters"), stem("lives"), stem("cities"), stem("bus"), stem("москве")
    ('sister', 'live', 'city', 'bus', 'москв')
    """
    if word in SYNONYMS:
        return SYNONYMS[word]
    if word.isascii():
        if len(word) > _MIN_PLURAL and word.endswith("ies"):
            word = word[:-3] + "y"
        elif len(word) >= _MIN_PLURAL and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        return SYNONYMS.get(word, word)
    if len(word) >= _MIN_CYRILLIC_STEM and "\u0400" <= word[0] <= "\u04ff":
        return _CYRILLIC_END.sub("", word) or word
    return word


#: Tokens whose term is kept: a vocabulary (a namespace's texts repeat their words, so most
#: tokens of a text are found here), bounded so a stream of novel tokens cannot grow it.
_KEPT_TOKENS: Final = 16384


@lru_cache(maxsize=_KEPT_TOKENS)
def token_term(token: str) -> str | None:
    """The content term one token of a spaced normal form gives (None: a function word).

    >>> token_term("sisters"), token_term("the"), token_term("书"), token_term("的")
    ('sister', None, '书', None)
    """
    if WORD_FREE_CHAR.match(token):
        return None if token in WORD_FREE_STOP else token
    if token in STOPWORDS:
        return None
    word = stem(token)
    return None if word in STOPWORDS else word


@lru_cache(maxsize=4096)
def terms(text: str) -> tuple[str, ...]:
    """The content terms of ``text``, in order (see the module notes).

    >>> terms("J'habite à Paris"), terms("我最喜欢的书是三体")
    (('live', 'pari'), ('最', '喜', '欢', '书', '三', '体'))
    """
    # A term is never empty (a stem keeps a letter), so None is the only value dropped.
    return tuple(filter(None, map(token_term, spaced(text).split())))


def index_terms(text: str) -> list[str]:
    """What the ranker indexes: the terms, plus bigrams of adjacent word-free characters."""
    found = list(terms(text))
    found += [
        a + b for a, b in pairwise(found) if WORD_FREE_CHAR.match(a) and WORD_FREE_CHAR.match(b)
    ]
    return found


def _names(raw: str) -> list[str]:
    """Capitalised words in order (not ``I``), case-folded: the names a paraphrase keeps."""
    return [w.casefold() for w in _CAPITALISED.findall(raw) if w != "I"]


@lru_cache(maxsize=4096)
def paraphrase_key(text: str) -> frozenset[str] | None:
    """What two paraphrases share exactly: the set of content terms (None when ``text`` is
    too long to compare by meaning, or has no content term).

    Kept as long as the :func:`terms` it is built from: a merge keys every live entry by it,
    and a set built afresh per entry per merge costs more than the lookup of its terms.
    """
    if len(text) > MAX_SEMANTIC_CHARS:
        return None
    return frozenset(terms(text)) or None


def is_paraphrase(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` say the same thing in other words (module notes)."""
    ka, kb = paraphrase_key(a), paraphrase_key(b)
    if ka is None or ka != kb:
        return False
    ta, tb = set(ka), set(kb)
    na, nb = Normalised.of(a), Normalised.of(b)
    if sorted(na.numbers) != sorted(nb.numbers) or na.negated != nb.negated:
        return False
    # Two or more names in another order are other roles: "Anna pays Ben" / "Ben pays Anna".
    names_a = [n for n in _names(a) if n in ta or stem(n) in ta]
    names_b = [n for n in _names(b) if n in tb or stem(n) in tb]
    return len(set(names_a)) < 2 or names_a == names_b


#: Query terms a ranking looks up at most, the rarest first: a long text's common words add
#: cost, not order (a paraphrase shares all its terms, so any of them finds it).
MAX_QUERY_TERMS: Final = 32


class LexicalIndex:
    """BM25 over the content terms of a set of texts, by id; add and remove as they change.

    >>> index = LexicalIndex()
    >>> for i, t in enumerate(["I have a dog named Rex", "I play the cello", "Rex is ten"]):
    ...     index.add(str(i), t)
    >>> [doc for doc, _ in index.nearest("My dog Rex", 2)]
    ['0', '2']
    """

    def __init__(self) -> None:
        #: id → the terms of its text with their counts, its length in terms, and the order
        #: in which it was (last) added.
        self._terms: dict[str, Counter[str]] = {}
        self._lengths: dict[str, int] = {}
        self._order: dict[str, int] = {}
        #: term → the ids of the texts holding it (its length is the document frequency).
        self._postings: dict[str, set[str]] = {}
        self._total = 0
        self._seq = 0

    def __len__(self) -> int:
        return len(self._terms)

    def add(self, doc_id: str, text: str) -> None:
        """Index ``text`` under ``doc_id`` (replacing what that id held)."""
        self.remove(doc_id)
        found = Counter(index_terms(text))
        self._seq += 1
        self._terms[doc_id] = found
        self._lengths[doc_id] = sum(found.values())
        self._order[doc_id] = self._seq
        for term in found:
            self._postings.setdefault(term, set()).add(doc_id)
        self._total += sum(found.values())

    def remove(self, doc_id: str) -> None:
        """Forget ``doc_id`` (nothing happens when it is not indexed)."""
        held = self._terms.pop(doc_id, None)
        if held is None:
            return
        self._total -= self._lengths.pop(doc_id)
        del self._order[doc_id]
        for term in held:
            holders = self._postings[term]
            holders.discard(doc_id)
            if not holders:
                del self._postings[term]

    def scores(self, text: str) -> dict[str, float]:
        """BM25 score of every indexed text sharing a term with ``text`` (others score 0)."""
        n = len(self._terms)
        held = sorted(
            (len(self._postings[t]), t) for t in set(index_terms(text)) if t in self._postings
        )[:MAX_QUERY_TERMS]
        if not n or not held:
            return {}
        return scores(
            ((term, df, self._postings[term]) for df, term in held),
            docs=n,
            avg_len=self._total / n,
            lengths=self._lengths,
            tf=lambda doc_id, term: self._terms[doc_id][term],
            b=BM25_B,
        )

    def nearest(self, text: str, limit: int, *, pad: bool = False) -> list[tuple[str, float]]:
        """Up to ``limit`` ids, best first (ties in insertion order); ``pad``: fill with the
        zero-score rest, in insertion order, up to ``limit``."""
        found = self.scores(text)
        order = self._order
        ranked = sorted(found.items(), key=lambda kv: (-kv[1], order[kv[0]]))
        if pad and len(ranked) < limit:
            rest = sorted((d for d in order if d not in found), key=order.__getitem__)
            ranked += [(d, 0.0) for d in rest[: limit - len(ranked)]]
        return ranked[:limit]


def build_index(items: Iterable[tuple[str, str]]) -> LexicalIndex:
    """An index of ``(id, text)`` pairs, in that order."""
    index = LexicalIndex()
    for doc_id, body in items:
        index.add(doc_id, body)
    return index
