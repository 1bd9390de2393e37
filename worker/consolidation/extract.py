"""Explicit statements from conversation turns, by anchored patterns (no model).

A ``turn`` candidate's text holds the user's input and the assistant's reply, one role per
line prefix (``user:`` / ``human:``, ``assistant:`` / ``ai:``, ``system:``, ``tool:``); lines
without a prefix continue the previous role. Only user lines are read: the assistant's reply
is not the user's word, and a text without any user line yields nothing.

Each user sentence is matched, after dropping leading fillers ("oh,", "also", "btw"),
against these patterns, anchored at the sentence start:

=========================================  =====================================================
pattern                                    result
=========================================  =====================================================
``remember (that) X`` / ``note that X``    X, itself matched by the patterns below, else a fact
``forget (that) X``                        forget X
``I no longer X`` / ``I don't X anymore``  forget X
``I prefer X`` / ``I'd rather X``          a preference
``(you can) call me X``                    key ``preference.name``
``my X is Y``                              key ``profile.x`` (X of at most 4 words)
``I live in X``                            key ``profile.location``
``I work at/for X``                        key ``profile.employer``
``I work as X``                            key ``profile.occupation``
=========================================  =====================================================

Limits, on purpose: questions are skipped; "remember to …" (a to-do, not a memory) is skipped;
statements not at a sentence start ("my friend said I prefer …") are not matched; sentences are
split at ``.!?;`` and newlines, so "Dr. Who" splits; there is no coreference ("it", "there").
The statement is stored in the user's words (first letter capitalised, end punctuation dropped).

>>> [s.text for s in extract_statements("user: Hi! I prefer tea. What's up?\\nassistant: Noted.")]
['I prefer tea']
>>> extract_statements("user: My favourite colour is blue")[0].key
'profile.favourite_colour'
>>> extract_statements("assistant: I prefer coffee")
[]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from worker.consolidation.canonical import canonical

#: Role prefixes of a turn's lines; only the first two are the user's words.
_ROLE_LINE: Final = re.compile(r"^\s*(user|human|assistant|ai|system|tool)\s*:\s?(.*)$", re.I)
_USER_ROLES: Final = frozenset({"user", "human"})

_SENTENCE_SPLIT: Final = re.compile(r"(?<=[.!?;])\s+|\n+")
_FILLERS: Final = re.compile(
    r"^(?:(?:oh|ok|okay|so|also|and|but|actually|btw|by the way|well|hey|hi|hello|fyi|"
    r"just so you know|for the record|please)\b[,!:]?\s*)+",
    re.I,
)
_END_PUNCT: Final = re.compile(r"[\s.!;,]+$")

_REMEMBER: Final = re.compile(
    r"^(?:remember|note|keep in mind|don'?t forget)\b[,:]?\s+(?:that\s+)?(?P<body>.+)$", re.I
)
_REMEMBER_TODO: Final = re.compile(r"^(?:remember|don'?t forget)\s+to\s", re.I)
_FORGET: Final = re.compile(r"^forget\s+(?:that\s+|about\s+)?(?P<body>.+)$", re.I)
_NO_LONGER: Final = re.compile(r"^I\s+no\s+longer\s+(?P<body>.+)$", re.I)
_NOT_ANYMORE: Final = re.compile(r"^I\s+(?:don'?t|do\s+not)\s+(?P<body>.+?)\s+any\s?more$", re.I)
_PREFER: Final = re.compile(
    r"^I(?:\s+(?:really\s+|strongly\s+|generally\s+|usually\s+)?prefer|(?:'d|\s+would)\s+"
    r"(?:really\s+)?(?:prefer|rather))\s+(?P<body>.+)$",
    re.I,
)
_CALL_ME: Final = re.compile(
    r"^(?:you\s+(?:can|may|should)\s+)?call\s+me\s+(?P<name>[\w'\- ]{1,40})$", re.I
)
_MY_X_IS: Final = re.compile(
    r"^my\s+(?P<attr>[a-z][a-z'\-]*(?:\s+[a-z][a-z'\-]*){0,3}?)\s+(?:is|are)\s+(?P<value>.+)$",
    re.I,
)
_LIVE_IN: Final = re.compile(r"^I\s+(?:now\s+|currently\s+)?live\s+in\s+(?P<body>.+)$", re.I)
_WORK_AT: Final = re.compile(r"^I\s+(?:now\s+|currently\s+)?work\s+(?:at|for)\s+\S", re.I)
_WORK_AS: Final = re.compile(r"^I\s+(?:now\s+|currently\s+)?work\s+as\s+\S", re.I)

#: Words that make "my X is Y" about the conversation rather than the user ("my question is").
_CONVERSATIONAL_ATTRS: Final = frozenset(
    {"question", "point", "guess", "bad", "pleasure", "answer", "problem", "issue", "request"}
)

#: Statements that read as a preference, for routing a plain fact to the preferences file.
_PREFERENCE_LIKE: Final = re.compile(
    r"^(?:I(?:'d|\s+would)\s+(?:prefer|rather)\b|I\s+(?:really\s+|strongly\s+)?(?:prefer|"
    r"like|love|enjoy|dislike|hate|can'?t\s+stand)\b|(?:please\s+)?call\s+me\b|"
    r"my\s+(?:favou?rite|preferred)\b|(?:always|never|please)\s+(?:use|answer|reply|write|"
    r"respond|show|include|avoid)\b)",
    re.I,
)


@dataclass(frozen=True)
class Statement:
    """One thing the user said explicitly."""

    kind: Literal["fact", "forget"]
    text: str  #: the fact in the user's words, or the forget target
    key: str | None = None
    preference: bool = False
    rule: str = "fact"  #: which pattern matched, for ledger reasons and tests


def user_text(turn: str) -> str:
    """Only the user's lines of a turn.

    >>> user_text("user: hi\\nthere\\nassistant: hello\\nuser: bye")
    'hi\\nthere\\nbye'
    """
    role: str | None = None
    kept: list[str] = []
    for raw in turn.splitlines():
        line = raw
        match = _ROLE_LINE.match(raw)
        if match:
            role, line = match.group(1).lower(), match.group(2)
        if role in _USER_ROLES:
            kept.append(line)
    return "\n".join(kept).strip()


def sentences(text: str) -> list[str]:
    """Sentences of ``text`` with fillers and trailing punctuation dropped, questions skipped."""
    out = []
    for raw in _SENTENCE_SPLIT.split(text):
        sentence = _FILLERS.sub("", raw.strip())
        if not sentence or sentence.endswith("?"):
            continue
        sentence = _END_PUNCT.sub("", sentence)
        if sentence:
            out.append(sentence)
    return out


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def key_slug(words: str) -> str:
    """``profile`` key suffix from an attribute phrase.

    >>> key_slug("Favourite  colour")
    'favourite_colour'
    """
    return re.sub(r"[^a-z0-9]+", "_", words.lower()).strip("_")[:60] or "unnamed"


def is_preference_like(text: str) -> bool:
    """True when ``text`` reads as a preference (routing hint for plain facts).

    >>> is_preference_like("I'd rather get short answers"), is_preference_like("I have a dog")
    (True, False)
    """
    return bool(_PREFERENCE_LIKE.match(_FILLERS.sub("", text.strip())))


def forget_target(text: str) -> str:
    """What a forget request points at, with the request words removed.

    >>> forget_target("Please forget that I live in Paris.")
    'I live in Paris'
    >>> forget_target("I no longer live in Paris")
    'live in Paris'
    """
    sentence = _END_PUNCT.sub("", _FILLERS.sub("", canonical(text).strip()))
    for pattern in (_FORGET, _NO_LONGER, _NOT_ANYMORE):
        match = pattern.match(sentence)
        if match:
            return _END_PUNCT.sub("", match.group("body")).strip()
    return sentence


def classify(sentence: str) -> Statement | None:
    """The statement one sentence makes, or None when no pattern matches."""
    if _REMEMBER_TODO.match(sentence):
        return None
    match = _REMEMBER.match(sentence)
    if match:
        body = _END_PUNCT.sub("", match.group("body"))
        inner = classify(body)
        if inner is not None:
            return inner
        return Statement("fact", _cap(body), preference=is_preference_like(body), rule="remember")
    for pattern, rule in (
        (_FORGET, "forget"),
        (_NO_LONGER, "no_longer"),
        (_NOT_ANYMORE, "no_longer"),
    ):
        match = pattern.match(sentence)
        if match:
            return Statement("forget", match.group("body").strip(), rule=rule)
    if _PREFER.match(sentence):
        return Statement("fact", _cap(sentence), preference=True, rule="prefer")
    match = _CALL_ME.match(sentence)
    if match:
        name = match.group("name").strip()
        return Statement(
            "fact", f"Call me {name}", key="preference.name", preference=True, rule="call_me"
        )
    match = _MY_X_IS.match(sentence)
    if match and match.group("attr").split()[-1].lower() not in _CONVERSATIONAL_ATTRS:
        key = "profile." + key_slug(match.group("attr"))
        return Statement("fact", _cap(sentence), key=key, rule="my_x_is")
    if _LIVE_IN.match(sentence):
        return Statement("fact", _cap(sentence), key="profile.location", rule="live_in")
    if _WORK_AT.match(sentence):
        return Statement("fact", _cap(sentence), key="profile.employer", rule="work_at")
    if _WORK_AS.match(sentence):
        return Statement("fact", _cap(sentence), key="profile.occupation", rule="work_as")
    return None


def extract_statements(turn: str) -> list[Statement]:
    """Every explicit statement in the user lines of ``turn``, in order."""
    found = []
    # The canonical form (NFKC, zero-width characters dropped, look-alikes folded in Latin
    # words), so a fullwidth "ｍｙ ｃｉｔｙ ｉｓ …" routes to the same key as the plain one.
    for sentence in sentences(canonical(user_text(turn))):
        statement = classify(sentence)
        if statement is not None:
            found.append(statement)
    return found
