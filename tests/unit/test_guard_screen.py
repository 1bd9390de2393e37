"""The guard rows' pre-screen never hides a row that matches: verdicts are those of a full scan.

:func:`~worker.consolidation.guards.violation` searches only the rows whose literals and digits
a text holds (:mod:`~worker.consolidation.guards`). These tests hold, on every hostile,
near-miss and legitimate text of the corpora in every spelling (and spelled with the letters
``regex`` folds to ASCII case-insensitively), that each row matching a form of the text is one
the screen leaves, and that the first reason is the one a scan of every row in table order gives.
"""

from __future__ import annotations

import pytest
import regex

from tests.support.guard_corpus import NEGATIVES, POSITIVES, variants, wrapped
from tests.support.guard_meaning_corpus import HOSTILE, LEGITIMATE
from worker.consolidation import guards
from worker.consolidation import guards as guard_screen
from worker.consolidation.guards import (
    ALL_RULES,
    count_digits,
    min_digits,
    needed_literals,
)

#: Characters ``regex`` matches to an ASCII letter case-insensitively (İ~i, ſ~s, Kelvin~k).
_TWIN_SPELLING = str.maketrans({"i": "\u0130", "s": "\u017f", "k": "\u212a"})

_TEXTS = [
    *POSITIVES,
    *NEGATIVES,
    *(text for texts in HOSTILE.values() for text in variants(texts)),
    *(text for texts in LEGITIMATE.values() for text in variants(texts)),
    *(wrapped(text) for text in POSITIVES),
    *(text.translate(_TWIN_SPELLING) for text in POSITIVES),
]


def _full_scan(forms: dict[guards.Form, tuple[str, ...]]) -> str | None:
    for rule in ALL_RULES:
        if any(rule.pattern.search(text) for text in forms[rule.form]):
            return rule.reason
    return None


def _screened(forms: dict[guards.Form, tuple[str, ...]]) -> set[int]:
    digits = max(count_digits(text) for texts in forms.values() for text in texts)
    return set(guards._screen().rows(forms, digits))


def test_every_matching_row_lies_behind_the_screen() -> None:
    missed = []
    for text in _TEXTS:
        forms = guards._forms(text)
        left = _screened(forms)
        missed += [
            (index, text)
            for index, rule in enumerate(ALL_RULES)
            if index not in left and any(rule.pattern.search(t) for t in forms[rule.form])
        ]
    assert missed == []


def test_the_screened_reason_is_the_full_scans_on_every_corpus_text() -> None:
    differ = [
        text
        for text in _TEXTS
        if guards._rule_reason(guards._forms(text)) != _full_scan(guards._forms(text))
    ]
    assert differ == []


def test_the_ascii_pass_leaves_the_rows_the_screen_leaves() -> None:
    differ = []
    for text in _TEXTS:
        forms = guards._forms(text)
        if not all(shape.isascii() for shape in forms["shape"]):
            continue
        digits = max(count_digits(shape) for shape in forms["shape"])
        if guards._rows(forms, digits, True) != guards._screen().rows(forms, digits):
            differ.append(text)
    assert differ == []


def test_a_case_twin_spelling_of_a_key_prefix_is_still_searched() -> None:
    text = "my key is \u017fk-abcdefghijklmnop1234"  # long s: regex reads it as s
    assert ALL_RULES[1].pattern.search(text)
    assert 1 in _screened(guards._forms(text))


def test_literals_follow_an_unreadable_start_inside_the_match() -> None:
    assert needed_literals(r"[\s_\-]?token") == frozenset({"token"})
    assert needed_literals(r"(?:\d{3})+\.x") == frozenset({".x"})


def test_a_pattern_without_a_literal_has_no_screen() -> None:
    assert needed_literals(r"\w+\s\w+") is None
    assert needed_literals(r"(?:a|\w)+") is None


def test_case_insensitive_literals_are_lower_case_ascii_or_as_written() -> None:
    assert needed_literals(r"AKIA[0-9A-Z]{16}", fold=True) == frozenset({"akia"})
    assert needed_literals(r"Пароль", fold=True) == frozenset({"Пароль"})


def test_an_inner_case_change_is_not_read() -> None:
    assert needed_literals(r"(?i:ab)cd") == frozenset({"cd"})


def test_min_digits_counts_what_every_match_holds() -> None:
    assert min_digits(r"(?:\d[ \-]?){12,18}\d") == 13
    assert min_digits(r"pin (?:is )?\d{4}|code \d") == 1
    assert min_digits(r"[0-9a]{3}") == 0


def test_digits_are_counted_as_the_rows_read_them() -> None:
    arabic_indic = "\u0661\u0662\u0663"
    assert count_digits(arabic_indic + "12") == len(regex.findall(r"\d", arabic_indic + "12"))
    assert count_digits("a1b22") == 3


def test_syntax_the_standard_parser_reads_otherwise_has_no_screen() -> None:
    assert needed_literals(r"[[:alpha:]]+ab") is None  # a POSIX class to regex
    assert needed_literals(r"\p{Lu}ab") is None


def test_the_case_twins_are_every_non_ascii_character_regex_folds_to_ascii() -> None:
    letter = regex.compile(r"[a-z0-9]", regex.IGNORECASE | regex.V0)
    found = {
        chr(code): chr(code).translate(guard_screen._CASE_TWINS)
        for code in range(0x80, 0x110000)
        if not 0xD800 <= code < 0xE000 and letter.fullmatch(chr(code))
    }
    assert set(found) == guard_screen._TWINS
    assert all(regex.fullmatch(ascii_, twin, regex.IGNORECASE) for twin, ascii_ in found.items())


def test_without_the_standard_parser_every_row_is_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [("text", regex.compile(r"\bpassword is \S+")), ("text", regex.compile(r"\d{9}"))]
    monkeypatch.setattr(guard_screen, "sre_parse", None)
    guard_screen._parsed.cache_clear()
    try:
        screen = guard_screen.build_screen(rows)
    finally:
        guard_screen._parsed.cache_clear()
    assert screen.unscreened == frozenset({0, 1})
