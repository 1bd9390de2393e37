"""The guards' cheap gates never hide a text a later check would have caught.

:func:`~worker.consolidation.guards.violation` skips the national-id check on a shape with fewer
digits than any candidate run holds, and the high-entropy and base64 checks on a shape without a
12-character run of the token alphabet. Each gate is a necessary condition of what it skips;
these tests hold it on every hostile and near-miss text of the corpora, in every spelling and
form the guards look at.
"""

from __future__ import annotations

from tests.support.guard_corpus import NEGATIVES, POSITIVES, variants, wrapped
from tests.support.guard_meaning_corpus import HOSTILE
from worker.consolidation import guards
from worker.consolidation.guards import _CANDIDATES, MIN_DIGITS, count_digits

_TEXTS = [
    *POSITIVES,
    *NEGATIVES,
    *(text for texts in HOSTILE.values() for text in variants(texts)),
    *(wrapped(text) for text in POSITIVES),
]


def _shapes() -> list[str]:
    return [shape for text in _TEXTS for shape in guards._forms(text)["shape"]]


def test_every_national_id_candidate_lies_behind_the_digit_gate() -> None:
    missed = [
        shape
        for shape in _shapes()
        if _CANDIDATES.search(shape) and count_digits(shape) < MIN_DIGITS
    ]
    assert missed == []


def test_every_token_weighed_for_entropy_lies_behind_the_run_gate() -> None:
    missed = [
        shape
        for shape in _shapes()
        if guards._TOKEN.search(shape) and not guards._RUN_OF_TOKEN.search(shape)
    ]
    assert missed == []


def test_every_base64_run_lies_behind_the_run_gate() -> None:
    missed = [
        shape
        for shape in _shapes()
        if guards._BASE64.search(shape) and not guards._RUN_OF_TOKEN.search(shape)
    ]
    assert missed == []


def test_a_gated_token_shorter_than_the_run_is_never_weighed_or_decoded() -> None:
    short = "dXNlcjpodW50"  # 12 characters: the shortest run the base64 check decodes
    assert guards._BASE64.search(short)
    assert guards._RUN_OF_TOKEN.search(short)
    assert not guards._RUN_OF_TOKEN.search(short[:-1])
    assert not guards._BASE64.search(short[:-1])
