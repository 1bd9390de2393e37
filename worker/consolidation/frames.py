"""Attribute frames: which single-valued attribute of whom an unkeyed statement sets.

"I live in Paris" and "I moved to Berlin last month" both set *where I live*; the second, newer
one replaces the first. :func:`frame_of` reads a statement as ``(subject, attribute, value)``
when it matches one of the patterns below, anchored at its start, and ``None`` otherwise: the
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

The subject is "self" for first-person statements, or the relation after a possessive when
it names one person (:data:`UNIQUE_RELATIONS`: "my wife lives in …" is about her, not me).
A relation that may be several people ("my sister", "my friend", "my colleague") sets no
frame: two of its statements are never taken to conflict.
What is *not* a frame, on purpose (such a statement is added and never retires anything):
negated statements; past or dated facts ("I worked at Globex in 2010", "used to", a year other
than after "since"); additions ("I also work at …", "another", "as well", 也/还); residence and
employer values without a capitalised name ("I live in a flat", "I work for a startup") in
cased scripts; counts ("I have two kids" / "I have three kids" may be two true facts);
statements about third parties named by name; temporary or part-time states ("this summer",
"on weekends", "volunteer"); values of more than :data:`MAX_VALUE_TERMS` terms; where one
works rather than for whom ("trabajo en Madrid", "работаю в Москве", "我在北京工作"); anything
else unmatched. Texts longer than :data:`~.semantic.MAX_SEMANTIC_CHARS` set no frame.

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

from dataclasses import dataclass
from functools import lru_cache
from typing import Final

import regex

from worker.consolidation.semantic import MAX_SEMANTIC_CHARS, WORD_FREE_CHAR, spaced, stem
from worker.consolidation.semantic_lexicon import STOPWORDS
from worker.consolidation.text import Normalised

_WF: Final = r"\p{Han}\p{Hiragana}\p{Katakana}\u30fc"
_JOIN: Final = regex.compile(rf"(?<=[{_WF}]) (?=[{_WF}])")
_CAPITALISED: Final = regex.compile(r"(?<![\p{L}\p{M}\p{N}])\p{Lu}[\p{L}\p{M}\p{N}]*")
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

#: Words every pattern above holds one of (a cheap first look, as substrings: most statements
#: set no frame). Keep in step with the patterns; the tests run every pattern's examples.
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
#: Others may be several people ("my sister lives in Berlin", "my sister lives in Paris" can
#: be two sisters; friends, colleagues, children): their statements set no frame.
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
    names = {stem(w.casefold()) for w in _CAPITALISED.findall(raw)} | {
        w.casefold() for w in _CAPITALISED.findall(raw)
    }
    return any(v in names for v in value)
