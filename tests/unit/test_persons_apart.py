"""What :meth:`Meaning.persons_apart` and :meth:`Meaning.settings_apart` embed: the short
stretches two texts differ in, and nothing when a client's texts differ in many places (the
cost of a merge stays bounded)."""

from __future__ import annotations

import pytest

from tests.support.hashing_embeddings import HashingEmbeddings
from worker.consolidation.meaning import MAX_SETTING_SWAPS, MAX_SWAPS, Meaning, _swapped


@pytest.fixture
def counted() -> tuple[Meaning, HashingEmbeddings]:
    embeddings = HashingEmbeddings()
    meaning = Meaning(embeddings)
    meaning.prepare(["warm-up"])
    meaning.names_person("warm-up")  # embeds the bank's person and other words, before counting
    return meaning, embeddings


def test_two_texts_differing_in_many_places_embed_no_stretch(
    counted: tuple[Meaning, HashingEmbeddings],
) -> None:
    meaning, embeddings = counted
    words = [f"w{i}" for i in range(4 * (MAX_SWAPS + 1))]
    held = " ".join(words)
    said = " ".join(f"x{i}" if i % 4 == 0 else w for i, w in enumerate(words))
    before = embeddings.calls
    assert not meaning.persons_apart(held, said)
    assert embeddings.calls == before


def test_two_texts_differing_in_one_stretch_embed_it(
    counted: tuple[Meaning, HashingEmbeddings],
) -> None:
    meaning, embeddings = counted
    before = embeddings.calls
    meaning.persons_apart("My brother lives in Leeds.", "My sister lives in Leeds.")
    assert embeddings.calls == before + 1
    assert meaning.vector("sister") is not None


def test_two_texts_differing_in_three_places_are_never_two_settings(
    counted: tuple[Meaning, HashingEmbeddings],
) -> None:
    """A setting and its value differ in two places; a third is a statement said anew, and
    nothing is embedded to ask."""
    meaning, embeddings = counted
    held = "In the morning my favourite drink is coffee."
    said = "In the evening my usual drink is tea."
    assert len(_swapped(held, said)) == MAX_SETTING_SWAPS + 1
    before = embeddings.calls
    assert not meaning.settings_apart(held, said)
    assert embeddings.calls == before
