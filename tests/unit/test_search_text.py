"""The search index's text (:mod:`worker.store.search`): its shortcuts change nothing."""

from __future__ import annotations

import string
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from worker.store import search_text
from worker.store.search_text import index_text, term_key

#: Printable ASCII with every kind of separator, and words around the plural endings that
#: :func:`term_key` folds, so repeats and near-repeats are frequent.
_ASCII_TEXT = st.lists(
    st.one_of(
        st.text(alphabet=string.printable, max_size=12),
        st.sampled_from(["berries", "berry", "cats", "cat", "Horses", "bus", "glass", "es"]),
    ),
    max_size=12,
).map(" ".join)


@given(_ASCII_TEXT)
def test_ascii_text_is_split_as_the_unicode_path_splits_it(text: str) -> None:
    assert search_text._split(text) == search_text._split_unicode(text)


def test_an_ascii_word_over_the_length_limit_is_not_indexed() -> None:
    long_word = "x" * (search_text.MAX_WORD_CHARS + 1)
    assert index_text(f"keep {long_word} this").words == "keep this"


@given(_ASCII_TEXT)
def test_repeats_count_every_term_key_held_more_than_once(text: str) -> None:
    words, _ = search_text._split(text)
    counts = Counter(term_key(w) for w in words)
    expected = {key: n for key, n in counts.items() if n > 1}
    assert search_text.repeats_of(index_text(text).repeats) == expected


@given(st.text(max_size=12))
def test_a_word_not_ending_in_s_is_its_own_key(word: str) -> None:
    if not word.endswith("s"):
        assert term_key(word) == word
