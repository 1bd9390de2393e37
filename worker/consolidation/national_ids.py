"""Bare national identity numbers, recognised by their check rules rather than by a label.

A number written without "my tax id is" in front of it is still an identity number, and one
stored as a memory reaches every later prompt. Digit runs are too common to refuse on shape
alone, so each kind here is refused only when its own check passes:

- **French NIR** (INSEE, sécurité sociale): sex, year, month, département (``2A``/``2B`` for
  Corsica), commune, order, and a key ``97 - (number mod 97)``;
- **German Steuer-ID** (tax id): 11 digits, the first not 0, one digit of the first ten
  repeated (twice or thrice) and the others not, check digit ISO 7064 MOD 11,10;
- **Chinese resident identity number**: 18 characters, an area code, a real birth date, and a
  weighted check character (ISO 7064 MOD 11-2, ``X`` for 10);
- **Spanish DNI / NIE**: 8 digits (NIE: ``X``/``Y``/``Z`` and 7) and the letter of the number
  mod 23.

One pass over the text finds every run that could be one of them (a single alternation with a
group per kind); only those runs are checked. US social security numbers and UK National
Insurance numbers have no check digit: their rows (with the SSN's validity rules) are in
:mod:`~worker.consolidation.guard_rules`.

>>> national_id("numéro de sécu 1 84 12 75 108 123 47"), national_id("call 1 84 12 75 108 123 45")
('credential: a national id number', None)
>>> national_id("11010519491231002X"), national_id("order 110105194912310021")
('credential: a national id number', None)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Final

import regex

from worker.consolidation.guard_screen import count_digits, min_digits

#: The reason every kind gives (the kind itself is not named: it would hint at the digits).
REASON: Final = "credential: a national id number"

_SEP: Final = r"[ .\-]?"
_CANDIDATES: Final = regex.compile(
    r"(?<![\w.\-])(?:"
    rf"(?P<nir>[1-478]{_SEP}\d{{2}}{_SEP}\d{{2}}{_SEP}(?:\d{{2}}|2[abAB]){_SEP}\d{{3}}{_SEP}"
    rf"\d{{3}}{_SEP}\d{{2}})"
    r"|(?P<cn>[1-8]\d{16}[\dXx])"
    rf"|(?P<steuer>[1-9]\d{_SEP}\d{{3}}{_SEP}\d{{3}}{_SEP}\d{{3}}|[1-9]\d{{10}})"
    r"|(?P<dni>[XYZxyz]?\d{7,8}[ \-]?[A-Za-z])"
    r")(?![\w\-]|\.\d)"
)

#: The fewest digits any candidate run holds (read off the pattern): a text with fewer has no
#: run to check, so it is passed over without a search.
MIN_DIGITS: Final = min_digits(_CANDIDATES.pattern)

_DNI_LETTERS: Final = "TRWAGMYFPDXBNJZSQVHLCKE"
_CN_WEIGHTS: Final = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_CN_CHECK: Final = "10X98765432"


def _digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isalnum()).upper()


def nir_valid(text: str) -> bool:
    """A French NIR whose key matches (``2A``/``2B`` counted as 19/18, as INSEE does).

    >>> nir_valid("184127510812347"), nir_valid("184127510812345")
    (True, False)
    """
    raw = _digits(text)
    if len(raw) != 15:
        return False
    body, key = raw[:13], raw[13:]
    corsica = {"2A": "19", "2B": "18"}.get(body[5:7])
    if corsica is not None:
        body = body[:5] + corsica + body[7:]
    if not body.isdigit():
        return False
    number = int(body)
    month = int(body[3:5])
    if not (1 <= month <= 12 or 20 <= month <= 42 or 50 <= month <= 99) or not key.isdigit():
        return False
    return 97 - number % 97 == int(key)


def steuer_id_valid(text: str) -> bool:
    """A German tax id: digit pattern and ISO 7064 MOD 11,10 check digit.

    >>> steuer_id_valid("65929970489"), steuer_id_valid("65929970488")
    (True, False)
    """
    raw = _digits(text)
    if len(raw) != 11 or not raw.isdigit() or raw[0] == "0":
        return False
    counts = sorted((raw[:10].count(d) for d in set(raw[:10])), reverse=True)
    if counts[0] not in (2, 3) or (len(counts) > 1 and counts[1] > 1):
        return False
    product = 10
    for ch in raw[:10]:
        total = (int(ch) + product) % 10 or 10
        product = total * 2 % 11
    return (11 - product) % 10 == int(raw[10])


def cn_id_valid(text: str) -> bool:
    """A Chinese resident identity number: a real birth date and the MOD 11-2 check character.

    >>> cn_id_valid("11010519491231002X"), cn_id_valid("110105194912310021")
    (True, False)
    """
    raw = _digits(text)
    if len(raw) != 18 or not raw[:17].isdigit():
        return False
    try:
        born = date(int(raw[6:10]), int(raw[10:12]), int(raw[12:14]))
    except ValueError:
        return False
    if not 1900 <= born.year <= 2100:
        return False
    total = sum(int(d) * w for d, w in zip(raw[:17], _CN_WEIGHTS, strict=True))
    return _CN_CHECK[total % 11] == raw[17]


def dni_valid(text: str) -> bool:
    """A Spanish DNI or NIE whose letter is the number's mod 23.

    >>> dni_valid("12345678Z"), dni_valid("X1234567L"), dni_valid("12345678A")
    (True, True, False)
    """
    raw = _digits(text)
    if raw[0] in "XYZ":
        raw = str("XYZ".index(raw[0])) + raw[1:]
    if len(raw) != 9 or not raw[:8].isdigit():
        return False
    return _DNI_LETTERS[int(raw[:8]) % 23] == raw[8]


_CHECKS: Final[dict[str, Callable[[str], bool]]] = {
    "nir": nir_valid,
    "cn": cn_id_valid,
    "steuer": steuer_id_valid,
    "dni": dni_valid,
}


def national_id(shape: str) -> str | None:
    """:data:`REASON` when ``shape`` (canonical text) holds a national id whose check passes."""
    if count_digits(shape) < MIN_DIGITS:
        return None
    for match in _CANDIDATES.finditer(shape, overlapped=True):
        kind = match.lastgroup
        if kind is not None and _CHECKS[kind](match.group(kind)):
            return REASON
    return None
