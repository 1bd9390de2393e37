"""Text without a model: normal forms, similarity, lexicons, meaning-level terms and attribute
frames.

**Normal form.** :func:`canonical` is one spelling of a text, case and punctuation kept: NFKC,
invisible characters removed, every decimal digit made ASCII, and look-alike letters
(:func:`confusable_table`) folded to Latin inside words that mix Latin with other letters. The
guards (:mod:`~worker.consolidation.guards`) read it as the *shape* of a text, and its
:func:`skeleton` (every look-alike folded) as a second look.

>>> canonical("４２ и раѕѕword"), skeleton("раѕѕword")
('42 и password', 'password')

:func:`normalise`, the one form everything that compares text uses (dedupe, confirm, forget
matching, the guards), case-folds the canonical form and cuts it into tokens with the ``regex``
module's Unicode properties: a word is letters *with their combining marks* (``\\p{L}\\p{M}``, so
Devanagari vowel signs and Hebrew points are kept), a number is a run of digits, an emoji is a
token of its own, and each character of a word-free script (Han, Hiragana, Katakana, Thai, Lao,
Khmer, Myanmar) is one token, so those scripts are compared as character sequences and n-grams.

**Duplicates.** Two statements are *the same memory* when their normal forms are equal and not
empty, or when they are nearly equal *and* agree on every number, on negation and on their named
entities. "Nearly equal" is, for spaced scripts, at most ``(len(a) + len(b)) // 10`` and at most
:data:`MAX_EDITS` character insertions/deletions (rapidfuzz's bounded ``Indel`` distance, so a
long text costs a banded comparison, never a quadratic one), and outside ASCII every changed
word must be a one-edit typo of a word of :data:`MIN_TYPO_WORD`+ letters; for word-free scripts,
a character-bigram overlap of at least 0.9 with every character of one text found in the other.

>>> normalise("  I prefer   Dark-mode!! ")
'i prefer dark mode'
>>> normalise("ig\u200bnore"), normalise("ｐａｓｓｗｏｒｄ"), normalise("pаssword")  # Cyrillic а
('ignore', 'password', 'password')
>>> normalise("我喜欢喝茶")
'我 喜 欢 喝 茶'
>>> is_near_duplicate("I prefer dark mode.", "i prefer DARK mode")
True
>>> is_near_duplicate("My sister is 30", "My sister is 31")
False
>>> is_near_duplicate("🍕🍕", "🎉🎉"), is_near_duplicate("!!!", "???")
(False, False)

**Word lists** have one row per language, written as people type them (folded to normal form
here), so a language is added by adding a row. A word in :data:`STOPWORDS` carries no content,
so two statements differing only in these say the same thing. On purpose *not* stopwords:
negations (they flip a statement), past forms (``was``, ``lived``: a past fact is another fact),
``from`` (``moved from`` is the opposite of ``moved to``), quantities, and ``will`` (a plan is
not a fact).

**Terms.** A text's :func:`terms` are its tokens with apostrophes read as word breaks (French
elision: ``j'habite`` is ``j habite``), function words dropped, synonyms folded
(``lives``/``reside``/``home`` → ``live``) and a light plural stem (``sisters`` → ``sister``);
characters of word-free scripts are terms one by one, particles dropped.

- :class:`LexicalIndex`: an in-memory BM25 index (:mod:`worker.bm25`) over the terms of a
  namespace's active entries (and bigrams of word-free characters), updated as a merge adds and
  retires entries; ties and zero scores rank in insertion order.
- :func:`is_paraphrase`: the same terms as a set, the same numbers, the same negation, and no
  two names swapped. Word order and function words do not count.

>>> terms("My sister's home is in Riga") == terms("My sister lives in Riga")
True
>>> is_paraphrase("Dune is my favourite book", "My favourite book is Dune")
True
>>> is_paraphrase("I live in Paris", "I lived in Paris"), is_paraphrase("Anna pays Ben",
...     "Ben pays Anna")
(False, False)

**Attribute frames**: which single-valued attribute of whom an unkeyed statement sets. "I live
in Paris" and a newer "I moved to Berlin last month" both set *where I live*, so the second
replaces the first. :func:`frame_of` reads a statement as ``(subject, attribute, value)`` when it
matches one of the patterns below, anchored at its start, and ``None`` otherwise: the
consolidator only retires an entry when both statements have a frame, the same subject and
attribute, and values that differ (neither value's terms contained in the other's).

========================  ==========================================================  =========
attribute                 examples (English, French, German, Spanish, Russian, Chinese)  value
========================  ==========================================================  =========
``residence``             I live in / moved to …, j'habite à …, ich wohne in …,          a name
                          vivo en …, я живу в …, 我住在…
``employer``              I work at/for …, je travaille chez …, ich arbeite bei …,       a name
                          trabajo para …, я работаю в компании …, 我在…公司工作
``occupation``            I work as a …, my job is …, je travaille comme …               any
``name``                  my name is …, je m'appelle …, ich heiße …, me llamo …,         any
                          меня зовут …, 我叫…
``preferred name``        call me …                                                       any
``age`` (self only)       I am 30, j'ai 30 ans, ich bin 30 Jahre alt, tengo 30 años …    any
``favourite <thing>``     my favourite colour is …, … is my favourite book,             any
                          ma couleur préférée est …, meine Lieblingsfarbe ist …,
                          mi color favorito es …, мой любимый цвет …, 我最喜欢的颜色是…
``spouse``                I am married to …, je suis marié à …                           any
========================  ==========================================================  =========

The subject is "self" for first-person statements, or the relation after a possessive when it
names one person (:data:`UNIQUE_RELATIONS`: "my wife lives in …" is about her, not me). A
relation that may be several people ("my sister", "my friend") sets no frame, so two of its
statements never conflict.

On purpose *not* a frame (such a statement is added and retires nothing): negated statements;
past or dated facts ("used to", a year other than after "since"); additions ("I also work at
…", "another", 也/还); residence and employer values without a capitalised name in cased
scripts ("I live in a flat"); counts ("I have two kids" / "three kids" may both be true);
third parties named by name; temporary or part-time states ("this summer", "volunteer"); values
of more than :data:`MAX_VALUE_TERMS` terms; where one works rather than for whom ("trabajo en
Madrid"); texts longer than :data:`~.text.MAX_SEMANTIC_CHARS`; anything else unmatched.

>>> frame_of("I moved to Berlin last month")
Frame(subject='self', attribute='residence', value=('berlin',))
>>> frame_of("My wife lives in Berlin").subject, frame_of("My sister lives in Berlin")
('wife', None)
>>> frame_of("I worked at Globex in 2010") is None
True
>>> frame_of("我最喜欢的颜色是蓝色")
Frame(subject='self', attribute='favourite 颜色', value=('蓝', '色'))
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from itertools import pairwise
from typing import Final, NamedTuple

import regex
from rapidfuzz.distance import Indel, Levenshtein

from worker.bm25 import scores

#: Words that flip a statement's meaning; two texts differing in these are never duplicates.
#: One row per language, in normal form (apostrophes dropped, case-folded).
NEGATIONS: Final = frozenset(
    {
        # English
        *("not", "no", "never", "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "cant"),
        *("wont", "nobody", "nothing", "neither", "nor", "without", "hate", "dislike"),
        # French, Spanish, Portuguese, Italian, German. Not Italian "mai" (its "non … mai" has
        # "non"): it is "May" in German ("seit Mai") and "I" in Hinglish ("Mai pehle …").
        *("ne", "pas", "jamais", "nunca", "nao", "não", "non", "nicht", "kein", "keine"),
        # Russian, Ukrainian (Cyrillic)
        *("не", "нет", "ни", "никогда", "ніколи", "ні", "без"),
        # Greek
        *("δεν", "δε", "μην", "όχι", "ποτέ", "χωρίς"),
        # Arabic, Hebrew
        *("لا", "لم", "لن", "ليس", "ليست", "ما", "غير", "לא", "אין", "אינו", "אינה", "מעולם"),
        # Hindi (Devanagari)
        *("नहीं", "नही", "न", "मत", "बिना"),
        # Korean (whole words; suffix forms are in NEGATION_PREFIXES)
        *("안", "못", "아니", "아니요", "아뇨"),
    }
)

#: Word beginnings that negate in Korean, where negation is an auxiliary word ("먹지 않아요").
NEGATION_PREFIXES: Final = ("않", "없", "못하")

#: Negation markers of word-free scripts, searched in the text with spaces removed.
NEGATION_MARKERS: Final = (
    "不",
    "没",
    "沒",
    "别",
    "別",
    "无",
    "無",
    "非",
    "未",
    "ない",
    "ません",
    "ไม่",
)

#: CJK numerals: two texts differing in one are about different quantities, like digits.
CJK_NUMERALS: Final = frozenset("〇零一二三四五六七八九十百千万萬億亿两兩")

#: Number words of spaced scripts, in normal form: they count as numbers, like digits, so
#: "two cats" and "three cats" stay apart. One row per language.
NUMBER_WORDS: Final = frozenset(
    {
        # English
        *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"),
        *("ten", "eleven", "twelve", "twenty", "thirty", "hundred", "thousand", "million"),
        # French, Spanish, German
        *("un", "deux", "trois", "quatre", "cinq", "dos", "tres", "cuatro", "cinco"),
        *("eins", "zwei", "drei", "vier", "fünf"),
        # Russian
        *("один", "одна", "два", "две", "три", "четыре", "пять", "шесть", "десять"),
        # Greek
        *("ένα", "ένας", "μία", "μια", "δύο", "τρία", "τρεις", "τέσσερα", "τέσσερις", "πέντε"),
        # Arabic
        *("واحد", "واحدة", "اثنان", "اثنين", "ثلاث", "ثلاثة", "أربع", "أربعة", "خمس"),
        # Hebrew
        *("אחד", "אחת", "שניים", "שתיים", "שני", "שתי", "שלוש", "שלושה", "ארבע", "חמש"),
        # Hindi
        *("एक", "दो", "तीन", "चार", "पांच", "पाँच", "छह", "दस"),
        # Korean: native and Sino-Korean counting words
        *("하나", "한", "둘", "두", "셋", "세", "넷", "네", "다섯", "여섯", "일곱", "여덟"),
        *("아홉", "열", "일", "이", "삼", "사", "오", "육", "칠", "팔", "구", "십", "백", "천"),
    }
)


_IGNORABLE: Final = regex.compile(r"[\p{Default_Ignorable_Code_Point}\p{Cf}\u0640]+")
_OTHER_DIGIT: Final = regex.compile(r"(?![0-9])\p{Nd}")
_MIXED_WORD: Final = regex.compile(r"\S*[A-Za-z]\S*")

#: Texts whose normal forms are kept: the guards and dedupe look at the same candidate.
KEPT_TEXTS: Final = 1024


@cache
def confusable_table() -> dict[int, str]:
    """Non-ASCII characters that look like one ASCII letter or digit → that character.

    From the Unicode confusables data shipped with ``confusable-homoglyphs`` (e.g. Cyrillic
    ``а`` → ``a``, Greek ``ο`` → ``o``); used to fold look-alikes before text is compared.
    """
    from confusable_homoglyphs.utils import load

    table: dict[int, str] = {}
    for char, homoglyphs in load("confusables.json").items():
        if len(char) != 1 or char.isascii():
            continue
        for glyph in homoglyphs:
            target = glyph["c"]
            if len(target) == 1 and target.isascii() and target.isalnum():
                table[ord(char)] = target
                break
    return table


def skeleton(text: str) -> str:
    """``text`` with every look-alike character folded to ASCII (the guards' second look)."""
    if text.isascii():  # the table maps non-ASCII characters only
        return text
    return text.translate(confusable_table())


@lru_cache(maxsize=KEPT_TEXTS)
def canonical(text: str) -> str:
    """The case-preserving first stage of :func:`normalise` (punctuation kept).

    NFKC, default-ignorable/zero-width characters and tatweel removed, decimal digits made
    ASCII, look-alikes folded inside mixed-script words (see the module notes).

    >>> canonical("４２ и раѕѕword")
    '42 и password'
    """
    if text.isascii():  # NFKC and the rest change nothing in ASCII
        return text
    folded = _IGNORABLE.sub("", unicodedata.normalize("NFKC", text))
    if not folded.isascii():
        folded = _OTHER_DIGIT.sub(lambda m: str(unicodedata.digit(m.group())), folded)
        folded = _MIXED_WORD.sub(lambda m: skeleton(m.group()), folded)
    return folded


#: Character similarity at or above which two statements count as the same memory: 0.9
#: tolerates a changed article or a typo in a sentence ("in my editor" / "in the editor") but
#: not a changed object ("tea" / "coffee").
DUPLICATE_RATIO: Final = 0.9

#: Most character insertions/deletions two near-duplicates may differ by, whatever their
#: length: past this a long text was rewritten, not retyped. It also bounds the comparison, so
#: a pair of long texts costs O(length × MAX_EDITS) instead of O(length²).
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
#: Unicode patterns do, and cost much less.
_ASCII_TOKEN: Final = re.compile(r"[a-z0-9]+")
#: The ASCII normal form by one byte translation, equal to :data:`_ASCII_TOKEN` on the
#: lower-cased text: letters lower-cased, digits kept, every other byte a space (apostrophes
#: deleted first). Cheaper than a regex, and a cold merge normalises every entry.
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


#: Texts whose :class:`Normalised` forms are kept: enough for a few namespaces' entries, so
#: consecutive batches of the same namespaces find them derived.
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
    """:meth:`Normalised.of`, cached: a namespace's entries are re-read with every batch.
    Callers never mutate the result (``grams`` is only read)."""
    # ASCII directly, so entries do not fill the cache of :func:`normalise` (the guards' own).
    norm = _ascii_normal(raw) if raw.isascii() else normalise(raw)
    words = norm.split()
    if norm.isascii():  # no word-free script, no negation marker outside the word list
        # :func:`_numbers` and the tuple's constructor inlined (a cold merge runs this per
        # entry). Tokens holding a digit are the digit runs when each is all digits.
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
        # The cheap bounded distance before the named entities; all checks are pure and must
        # pass, so the order changes only the cost.
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


STOPWORDS: Final = frozenset(
    {
        # English
        *("i", "me", "my", "mine", "myself", "a", "an", "the", "is", "am", "are", "be", "been"),
        *("to", "in", "at", "of", "on", "for", "and", "or", "with", "by", "it", "its", "this"),
        *("that", "s", "m", "re", "ve", "ll", "d", "very", "really", "just", "now", "currently"),
        *("actually", "also", "too", "still", "so", "quite", "here", "there", "do", "as"),
        # French
        *("je", "j", "moi", "mon", "ma", "mes", "le", "la", "les", "l", "un", "une", "des", "de"),
        *("du", "est", "suis", "es", "à", "au", "aux", "en", "et", "ou", "que", "qu", "qui", "c"),
        *("ce", "ça", "maintenant", "aussi", "très", "y", "vraiment"),
        # German
        *("ich", "mich", "mir", "mein", "meine", "meinen", "meinem", "meiner", "meines", "der"),
        *("die", "das", "den", "dem", "des", "ein", "eine", "einen", "einem", "einer", "ist"),
        *("bin", "bist", "sind", "im", "am", "an", "bei", "und", "oder", "zu", "zum", "zur"),
        *("jetzt", "auch", "sehr", "gerade", "nun", "es", "wirklich"),
        # Spanish
        *("yo", "mi", "mis", "el", "los", "las", "lo", "unos", "unas", "soy", "eres", "estoy"),
        *("está", "al", "del", "y", "o", "ahora", "también", "muy", "ya", "realmente"),
        # Russian
        *("я", "меня", "мне", "мой", "моя", "моё", "мое", "мои", "в", "во", "на", "и", "а"),
        *("это", "сейчас", "теперь", "тоже", "также", "очень", "у", "уже", "же"),
    }
)

#: Characters of word-free scripts that are particles or pronouns, not content: Chinese 我
#: (I), 的, 了, 是, 在, 很, 也, 都, sentence particles; Japanese 私 (I) and case particles.
WORD_FREE_STOP: Final = frozenset("我的了是在很也都吗呢啊吧私はがをにでのもね")

#: Words of one meaning folded to one term (the key is in normal form, the value any label).
SYNONYMS: Final = {
    # residence: present forms only ("lived" is a past fact, "moved" a change, see frames)
    **dict.fromkeys(("live", "lives", "living", "reside", "resides", "residing", "home"), "live"),
    **dict.fromkeys(("habite", "habites", "habitent", "vis", "vit", "réside"), "live"),
    **dict.fromkeys(("wohne", "wohnt", "lebe", "lebt", "vivo", "vive", "vives"), "live"),
    **dict.fromkeys(("живу", "живёт", "живет", "живёшь"), "live"),
    # spelling and register variants
    **dict.fromkeys(("color", "colour", "colours", "colors", "couleur"), "colour"),
    **dict.fromkeys(("favorite", "favourite", "fave", "préféré", "préférée", "favori"), "fav"),
    **dict.fromkeys(("favorito", "favorita", "любимый", "любимая", "любимое"), "fav"),
    **dict.fromkeys(("kid", "kids", "child", "children", "enfants", "kinder", "hijos"), "child"),
    **dict.fromkeys(("mom", "mum", "mother", "mama", "mommy", "mummy"), "mother"),
    **dict.fromkeys(("dad", "father", "papa", "daddy"), "father"),
}


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

    Cached like :func:`terms`: a merge keys every live entry by it.
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


_WF: Final = r"\p{Han}\p{Hiragana}\p{Katakana}\u30fc"
_JOIN: Final = regex.compile(rf"(?<=[{_WF}]) (?=[{_WF}])")
_CAPITALISED_WORD: Final = regex.compile(r"(?<![\p{L}\p{M}\p{N}])\p{Lu}[\p{L}\p{M}\p{N}]*")
_UNCASED: Final = regex.compile(rf"[{_WF}\p{{Hangul}}\p{{Arabic}}\p{{Hebrew}}\p{{Devanagari}}]")

#: Subjects: first person, or a possessive and the relation it names (the group ``rel``).
_SELF: Final = r"(?:i|je|j|ich|yo|я)"
_POSS: Final = r"(?:my|mon|ma|mes|mein|meine|meiner|mi|mis|мой|моя|мои)"
_SUBJ: Final = rf"(?:{_SELF}|{_POSS} (?P<rel>\p{{L}}+)(?: s)?)"
_OWNER: Final = rf"{_POSS}(?: (?P<rel>\p{{L}}+) s)?"  # "my" / "my sister s" (possessive)
_VAL: Final = r"(?P<val>.+)"

#: (attribute, pattern) in order; a pattern names ``val`` and may name ``rel`` and ``attr``.
_PATTERNS: Final[tuple[tuple[str, str], ...]] = (
    # residence
    ("residence", rf"{_SUBJ} (?:live|lives|reside|resides|am living|is living|am based|is based|"
     r"moved|have moved|has moved|relocated|have relocated|ve moved) (?:in|to) " + _VAL),
    ("residence", rf"{_OWNER} home is in {_VAL}"),
    ("residence", rf"{_SUBJ} (?:habite|habites|habitent|vis|vit|réside|suis installée?|"
     r"me suis installée?|ai déménagé|a déménagé|s est installée?) (?:à|a|en|au|aux|dans) "
     + _VAL),
    ("residence", rf"{_SUBJ} (?:wohne|wohnt|lebe|lebt) (?:in|im) {_VAL}"),
    ("residence", rf"{_SUBJ} (?:bin|ist) nach (?P<val>.+?) (?:gezogen|umgezogen)"),
    ("residence", rf"(?:yo )?(?:vivo|resido|me mudé|me he mudado) (?:en|a) {_VAL}"),
    ("residence", rf"{_POSS} (?P<rel>\p{{L}}+) (?:vive|reside|se mudó) (?:en|a) {_VAL}"),
    ("residence", rf"(?:я )?(?:живу|переехал|переехала) (?:в|во|на) {_VAL}"),
    ("residence", rf"{_POSS} (?P<rel>\p{{L}}+) (?:живёт|живет|переехал|переехала) (?:в|во|на) "
     + _VAL),
    ("residence", r"我(?:的)?(?P<rel>[^\s]{0,3}?)(?:现在|目前)?(?:住在|生活在|搬到了|搬到|搬去了|"
     r"搬去)(?P<val>.+)"),
    ("residence", r"私は(?P<val>.+?)に(?:住んでいます|住んでいる|住んでる|引っ越しました)"),
    # employer
    ("employer", rf"{_SUBJ}(?: (?:changed|switched) (?:jobs?|employers?|companies)(?: and)?|"
     r" got a new job(?: and)?| started a new job(?: and)?)? (?:work|works|am working|"
     r"is working) (?:at|for) " + _VAL),
    ("employer", rf"{_SUBJ} (?:am|is|m|s) employed (?:at|by) {_VAL}"),
    ("employer", rf"{_OWNER} employer is {_VAL}"),
    ("employer", rf"{_SUBJ} (?:travaille|travailles) (?:chez|pour) {_VAL}"),
    ("employer", rf"{_SUBJ} (?:arbeite|arbeitet) (?:bei|für) {_VAL}"),
    # Spanish "en", Russian "в" and Chinese "在" also say *where* one works ("trabajo en
    # Madrid", "работаю в Москве", "我在北京工作"): only the forms that name an employer.
    ("employer", rf"(?:yo )?trabajo (?:para|en la empresa) {_VAL}"),
    ("employer", rf"(?:я )?работаю (?:в компании|на компанию) {_VAL}"),
    ("employer", r"我(?:的)?(?P<rel>[^\s]{0,3}?)(?:在(?P<val>.+?(?:公司|集团|银行))(?:工作|上班)|"
     r"(?:就职于|任职于)(?P<val>.+))"),
    # occupation
    ("occupation", rf"{_SUBJ} (?:work|works) as (?:a |an )?{_VAL}"),
    ("occupation", rf"{_OWNER} (?:job|occupation|profession) is (?:a |an )?{_VAL}"),
    ("occupation", rf"{_SUBJ} (?:travaille|travailles) comme {_VAL}"),
    ("occupation", rf"{_SUBJ} (?:arbeite|arbeitet) als {_VAL}"),
    ("occupation", rf"(?:yo )?trabajo (?:como|de) {_VAL}"),
    # name
    ("name", rf"{_OWNER} name is {_VAL}"),
    ("preferred name", rf"(?:you can |please )?call me {_VAL}"),
    ("name", rf"{_SUBJ} (?:am|m|is|s) called {_VAL}"),
    ("name", rf"(?:je m appelle|mon nom est|ich heisse|mein name ist|me llamo|mi nombre es|"
     rf"меня зовут) {_VAL}"),
    ("name", r"我叫(?P<val>.+)|我的名字是(?P<val>.+)|私の名前は(?P<val>.+?)(?:です)?"),
    # age (self only: "my sister is 30" is left alone)
    ("age", r"(?:i (?:am|m)|ich bin) (?P<val>\d+)(?: (?:years?|jahre) old| jahre alt)?"),
    ("age", r"(?:my age is|j ai|tengo|мне) (?P<val>\d+)(?: ans| años| год| года| лет)?"),
    ("age", r"我(?:今年)? ?(?P<val>\d+) ?岁"),
    # favourite things
    ("favourite", rf"{_OWNER} (?:favourite|favorite|fave) (?P<attr>\p{{L}}+(?: \p{{L}}+)?) is "
     + _VAL),
    ("favourite", rf"{_VAL} is {_OWNER} (?:favourite|favorite|fave) (?P<attr>\p{{L}}+)"),
    ("favourite", rf"{_OWNER} (?P<attr>\p{{L}}+) (?:préférée?|favori|favorite) est {_VAL}"),
    ("favourite", rf"{_OWNER} lieblings(?P<attr>\p{{L}}+) ist {_VAL}"),
    ("favourite", rf"{_OWNER} (?P<attr>\p{{L}}+) (?:favorit[oa]|preferid[oa]) es {_VAL}"),
    ("favourite", rf"{_OWNER} (?:любимый|любимая|любимое) (?P<attr>\p{{L}}+)(?: это)? {_VAL}"),
    ("favourite", r"我(?:的)?(?P<rel>[^\s]{0,3}?)最喜欢的(?P<attr>[^\s]+?)是(?P<val>.+)"),
    ("favourite", r"私の好きな(?P<attr>[^\s]+?)は(?P<val>.+?)(?:です)?"),
    # spouse
    ("spouse", rf"{_SUBJ} (?:am|m|is|s) married to {_VAL}"),
    ("spouse", rf"{_SUBJ} (?:suis|est) mariée? (?:à|a|avec) {_VAL}"),
)  # fmt: skip
_COMPILED: Final = tuple((name, regex.compile(p)) for name, p in _PATTERNS)

#: Words every pattern above holds one of, as substrings (a cheap first look: most statements
#: set no frame). Keep in step with the patterns: the tests run every pattern's examples.
_TRIGGERS: Final = (
    *("live", "reside", "moved", "relocated", "based", "home", "habite", "vis ", "vit "),
    *("installé", "déménagé", "wohn", "lebe", "gezogen", "vivo", "resido", "mud", "vive"),
    *("жив", "переех", "住", "搬", "生活", "work", "employ", "travaill", "arbeite", "trabaj"),
    *(
        "работа",
        "工作",
        "上班",
        "就职",
        "任职",
        "job",
        "occupation",
        "profession",
        "name",
        "call",
        "appel",
    ),
    *("nom ", "heisse", "llamo", "nombre", "зовут", "叫", "名字", "名前", "岁", "fav"),
    *("préféré", "lieblings", "preferid", "любим", "喜欢", "好き", "married", "marié"),
)
#: How the age patterns start (their other trigger is a number).
_AGE_STARTS: Final = ("i am ", "i m ", "ich bin ", "my age is ", "j ai ", "tengo ", "мне ")


#: The triggers an ASCII text can hold (the others hold a letter outside ASCII).
_ASCII_TRIGGERS: Final = tuple(word for word in _TRIGGERS if word.isascii())


def _may_frame(flat: str) -> bool:
    triggers = _ASCII_TRIGGERS if flat.isascii() else _TRIGGERS
    return any(word in flat for word in triggers) or flat.startswith(_AGE_STARTS)


#: Most value terms a frame takes: a longer value carries qualifiers ("a volunteer at the
#: shelter on …") the rules cannot weigh, so the statement is added instead.
MAX_VALUE_TERMS: Final = 4

#: Attributes whose value must hold a capitalised name in cased scripts ("a flat" is no city).
_NAMED_VALUES: Final = frozenset({"residence", "employer"})

#: Words that make a statement an addition rather than a replacement, or a past fact.
_NOT_A_CHANGE: Final = regex.compile(
    r"(?:^| )(?:also|too|as well|another|second|side|part time|used to|when i was|weekends?|"
    r"sometimes|occasionally|spare time|free time|volunteer|temporarily|for now|this summer|"
    r"this winter|for a while|for a few|visiting|on holiday|on vacation|aussi|également|"
    r"autre|auch|noch|zusätzlich|früher|también|otro|otra|antes|тоже|также|ещё|еще|"
    r"раньше)(?: |$)|[也还又曾]|以前|暂时"
)
_YEAR: Final = regex.compile(r"(?<!(?:since|depuis|seit|desde|с) )(?:19|20)\d\d")
_TRAILING: Final = regex.compile(
    r"(?: (?:now|recently|these days|nowadays|again|last (?:week|month|year)|this (?:week|month|"
    r"year)|a (?:few )?(?:days?|weeks?|months?|years?) ago|maintenant|désormais|depuis peu|"
    r"le mois dernier|l an dernier|jetzt|seit kurzem|letzten monat|ahora|el mes pasado|"
    r"recientemente|сейчас|теперь|недавно|в прошлом месяце))+$|[了啦呢吧]+$"
)
_LEADING: Final = regex.compile(r"^(?:the|a|an|le|la|les|l|el|los|las|der|die|das|den) ")
#: Adverbs that change nothing about which value is current; dropped before matching.
_FILLER: Final = regex.compile(
    r"(?:^| )(?:now|currently|still|really|actually|just|recently|finally|maintenant|"
    r"actuellement|jetzt|gerade|ahora|actualmente|сейчас|теперь)(?= |$)|现在|目前"
)
_SELF_FORMS: Final = frozenset({"", "i", "je", "j", "ich", "yo", "я", "我"})

#: Relations that name one person, so "my wife lives in …" twice is one attribute set twice.
#: Others ("my sister", friends, children) may be several people and set no frame.
UNIQUE_RELATIONS: Final = frozenset(
    {
        *("mother", "father", "wife", "husband", "partner", "spouse", "boyfriend", "girlfriend"),
        *("fiancé", "fiancée", "mère", "père", "femme", "mari", "mutter", "vater", "frau"),
        *("mann", "madre", "padre", "esposa", "esposo", "marido", "мама", "папа", "мать"),
        *("отец", "жена", "муж", "妈妈", "爸爸", "母亲", "父亲", "妻子", "老婆", "丈夫", "老公"),
    }
)


@dataclass(frozen=True)
class Frame:
    """Who, which single-valued attribute, and the value's content terms."""

    subject: str
    attribute: str
    value: tuple[str, ...]

    def slot(self) -> tuple[str, str]:
        """The (subject, attribute) pair two statements must share to conflict."""
        return (self.subject, self.attribute)

    def conflicts(self, other: Frame) -> bool:
        """Same slot and values that differ (neither contained in the other)."""
        if self.slot() != other.slot() or not self.value or not other.value:
            return False
        mine, theirs = set(self.value), set(other.value)
        return not (mine <= theirs or theirs <= mine)

    def same_value(self, other: Frame) -> bool:
        """Same slot and the same value terms: a restatement."""
        return self.slot() == other.slot() and set(self.value) == set(other.value) != set()


def _too_long(value: tuple[str, ...]) -> bool:
    """More than :data:`MAX_VALUE_TERMS` distinct terms (twice as many characters of a
    word-free script, where a character is a term)."""
    word_free = all(WORD_FREE_CHAR.match(v) for v in value)
    return len(set(value)) > MAX_VALUE_TERMS * (2 if word_free else 1)


def conflict(a: Frame | None, b: Frame | None) -> bool:
    """Whether two statements' frames conflict (False when either sets none)."""
    return a is not None and b is not None and a.conflicts(b)


def _value_terms(value: str) -> tuple[str, ...]:
    """The value's words, stemmed, function words dropped; every character of a word-free
    script kept (in a name, 都 of 成都 is no particle)."""
    value = _LEADING.sub("", _TRAILING.sub("", value.strip()))
    found = tuple(
        word if WORD_FREE_CHAR.match(word) else stem(word)
        for word in spaced(value).split()
        if WORD_FREE_CHAR.match(word) or word not in STOPWORDS
    )
    return found or tuple(value.split())


@lru_cache(maxsize=4096)
def frame_of(raw: str) -> Frame | None:
    """The frame ``raw`` sets, or None when it sets none (see the module notes)."""
    if len(raw) > MAX_SEMANTIC_CHARS:
        return None
    flat = spaced(raw)
    if not flat.isascii():  # only characters of word-free scripts have spaces to join
        flat = _JOIN.sub("", flat)
    if not _may_frame(flat) or _NOT_A_CHANGE.search(flat) or _YEAR.search(flat):
        return None
    if Normalised.of(raw).negated:
        return None
    flat = _FILLER.sub("", flat).strip()
    for attribute, pattern in _COMPILED:
        match = pattern.fullmatch(flat)
        if match is None:
            continue
        groups = match.groupdict()
        value = _value_terms(groups.get("val") or "")
        if not value or _too_long(value):
            return None
        if attribute in _NAMED_VALUES and not _named(raw, value):
            return None
        rel = (groups.get("rel") or "").removesuffix("的")
        subject = "self" if rel in _SELF_FORMS else stem(rel)
        if subject != "self" and (attribute == "age" or subject not in UNIQUE_RELATIONS):
            return None
        thing = " ".join(stem(w) for w in (groups.get("attr") or "").split())
        return Frame(subject, f"favourite {thing}" if thing else attribute, value)
    return None


def _named(raw: str, value: tuple[str, ...]) -> bool:
    """Whether ``value`` holds a name: a word capitalised in ``raw``, or an uncased script."""
    if any(_UNCASED.search(v) for v in value):
        return True
    names = {stem(w.casefold()) for w in _CAPITALISED_WORD.findall(raw)} | {
        w.casefold() for w in _CAPITALISED_WORD.findall(raw)
    }
    return any(v in names for v in value)


#: Frequent words long enough to count as content but carrying none (English; the other
#: languages' function words are mostly shorter than four letters).
_STEM_FILLER: Final = frozenset(
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
def content_stems(text: str) -> frozenset[str]:
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
        if len(token) >= minimum and token not in _STEM_FILLER and not token.isdigit():
            found.add(token[:_STEM])
    return frozenset(found - _FILLER_PAIRS)


def _syllabic(token: str) -> bool:
    """True for a token of Han, kana, Thai or Hangul, compared by character pairs."""
    return any(
        "\u3040" <= ch <= "\u9fff" or "\u0e00" <= ch <= "\u0e7f" or "\uac00" <= ch <= "\ud7af"
        for ch in token
    )
