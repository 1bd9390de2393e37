"""The first stage of the normal form: one canonical spelling of a text, case and punctuation kept.

NFKC, default-ignorable and zero-width characters removed, every decimal digit made ASCII, and
look-alike letters (:func:`confusable_table`) folded to Latin inside words that mix Latin with
other letters. :mod:`~worker.consolidation.text` builds the normal form on it; the guards
(:mod:`~worker.consolidation.guards`) read it as the *shape* of a text, and its
:func:`skeleton` (every look-alike folded) as a second look.

>>> canonical("４２ и раѕѕword"), skeleton("раѕѕword")
('42 и password', 'password')
"""

from __future__ import annotations

import unicodedata
from functools import cache, lru_cache
from typing import Final

import regex

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

    NFKC, default-ignorable/zero-width characters and tatweel removed, decimal digits of every
    script made ASCII, and look-alikes folded inside words that mix Latin letters with others.

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
