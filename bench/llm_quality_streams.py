"""The four candidate streams of the quality harness, built deterministically, with the truth.

Each user of a stream gets batches of candidates (merged in order, an hour apart) and the
truth about the memory they should leave behind, as *markers*: words that occur in exactly
one statement of that user, so an active entry "holds" a fact when its text contains the
marker (case-insensitively, on word boundaries).

- ``update`` (keyed knowledge updates): three slots (``profile.city``, ``profile.job``,
  ``preference.drink``) each set three times, one value per batch, plus two unrelated facts.
  Only the last value of a slot should be visible.
- ``duplicate`` (restatements and paraphrases): four facts, then each restated once, as an
  exact repeat, a case-and-punctuation variant or a paraphrase. One entry per fact.
- ``forget``: five facts, then two ``forget`` requests naming two of them.
- ``contradiction`` (unkeyed): a place of residence, an employer and a favourite colour, then a
  statement contradicting each without a key ("I moved to …"), plus two unrelated facts.

The markers of unrelated facts ("controls") measure wrongly invalidated entries: a control
that was stored and is gone at the end was retired by mistake.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

#: Users per stream by default; the harness can be run on fewer (a slow local model) or more.
DEFAULT_USERS: Final = 6


@dataclass(frozen=True)
class Item:
    """One candidate: its text, kind and optional key."""

    text: str
    kind: str = "fact"
    key: str | None = None


@dataclass
class UserStream:
    """One user's batches and the truth about the memory they should leave."""

    user: str
    batches: list[list[Item]] = field(default_factory=list)
    latest: list[str] = field(default_factory=list)  #: markers that must be visible
    stale: list[str] = field(default_factory=list)  #: markers that must not be visible
    controls: list[str] = field(default_factory=list)  #: markers that must stay visible
    facts: list[str] = field(default_factory=list)  #: markers of facts stored once each


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_CITIES: Final = _words(
    "Lisbon Oslo Osaka Lima Tunis Quito Hanoi Perth Dakar Bergen Riga Cusco Leeds Graz Turku "
    "Kobe Nantes Porto Minsk Bonn Tartu Split Ghent Cork Malmo Aarhus Basel Lyon Gdansk Brno"
)
_JOBS: Final = _words(
    "nurse welder teacher plumber baker pilot chemist florist jeweller surveyor tailor "
    "geologist carpenter librarian optician paramedic architect locksmith"
)
_DRINKS: Final = _words(
    "espresso rooibos kombucha matcha chicory horchata lassi kefir mate cocoa sencha "
    "chai oolong kvass ayran sikhye genmaicha cortado"
)
_PETS: Final = ("dog", "cat", "parrot", "tortoise", "ferret", "rabbit")
_PET_NAMES: Final = _words("Rex Miso Kiwi Pip Nala Bruno Olive Taco Juno Pixel Mango Biscuit")
_INSTRUMENTS: Final = _words("cello oboe banjo harp tuba ukulele sitar viola")
_HOBBIES: Final = _words("bouldering origami beekeeping fencing kayaking pottery juggling rowing")
_COMPANIES: Final = _words("Acme Globex Initech Umbrella Hooli Vandelay Soylent Wonka Stark Tyrell")
_COLOURS: Final = _words("green blue orange purple yellow crimson teal amber violet indigo")
_BOOKS: Final = _words("Dune Emma Ulysses Beloved Rebecca Persuasion Middlemarch Kindred")


def _pick(values: tuple[str, ...], n: int) -> str:
    return values[n % len(values)]


def update_stream(users: int = DEFAULT_USERS) -> list[UserStream]:
    """Keyed knowledge updates: three slots set three times each (see the module docs)."""
    out = []
    for u in range(users):
        s = UserStream(user=f"update-{u}")
        slots = [
            ("profile.city", "I live in {}", [_pick(_CITIES, u * 3 + i) for i in range(3)]),
            ("profile.job", "I work as a {}", [_pick(_JOBS, u * 3 + i) for i in range(3)]),
            ("preference.drink", "I prefer {} in the morning",
             [_pick(_DRINKS, u * 3 + i) for i in range(3)]),
        ]  # fmt: skip
        pet, name = _pick(_PETS, u), _pick(_PET_NAMES, u)
        hobby = _pick(_HOBBIES, u)
        for step in range(3):
            batch = [Item(text.format(values[step]), key=key) for key, text, values in slots]
            if step == 0:
                batch += [Item(f"I have a {pet} named {name}"), Item(f"My hobby is {hobby}")]
            s.batches.append(batch)
        s.latest = [values[-1] for _, _, values in slots]
        s.stale = [v for _, _, values in slots for v in values[:-1]]
        s.controls = [name, hobby]
        out.append(s)
    return out


def duplicate_stream(users: int = DEFAULT_USERS) -> list[UserStream]:
    """Four facts, then each restated once: exact, case/punctuation, or a paraphrase."""
    out = []
    for u in range(users):
        s = UserStream(user=f"duplicate-{u}")
        pet, name = _pick(_PETS, u + 1), _pick(_PET_NAMES, u + 6)
        instrument, book = _pick(_INSTRUMENTS, u), _pick(_BOOKS, u)
        city = _pick(_CITIES, u + 18)
        first = [
            Item(f"I have a {pet} named {name}"),
            Item(f"I play the {instrument}"),
            Item(f"My favourite book is {book}"),
            Item(f"My sister lives in {city}"),
        ]
        again = [
            Item(f"I have a {pet} named {name}"),  # exact repeat
            Item(f"i play the {instrument.upper()}!"),  # case and punctuation
            Item(f"{book} is my favourite book"),  # paraphrase
            Item(f"My sister's home is in {city}"),  # paraphrase
        ]
        s.batches = [first, again]
        s.facts = [name, instrument, book, city]
        s.controls = list(s.facts)
        out.append(s)
    return out


def forget_stream(users: int = DEFAULT_USERS) -> list[UserStream]:
    """Five facts, then forget requests naming two of them."""
    out = []
    for u in range(users):
        s = UserStream(user=f"forget-{u}")
        instrument, hobby = _pick(_INSTRUMENTS, u + 3), _pick(_HOBBIES, u + 3)
        company, book = _pick(_COMPANIES, u), _pick(_BOOKS, u + 4)
        colour = _pick(_COLOURS, u)
        facts = [
            Item(f"I play the {instrument}"),
            Item(f"My hobby is {hobby}"),
            Item(f"I work at {company}"),
            Item(f"My favourite book is {book}"),
            Item(f"My bike is {colour}"),
        ]
        forget = [
            Item(f"Please forget that I play the {instrument}", kind="forget"),
            Item(f"Forget that my favourite book is {book}", kind="forget"),
        ]
        s.batches = [facts, forget]
        s.stale = [instrument, book]
        s.controls = [hobby, company, colour]
        out.append(s)
    return out


def contradiction_stream(users: int = DEFAULT_USERS) -> list[UserStream]:
    """Unkeyed contradictions: the later statement replaces the earlier one."""
    out = []
    for u in range(users):
        s = UserStream(user=f"contradiction-{u}")
        old_city, new_city = _pick(_CITIES, u * 2 + 7), _pick(_CITIES, u * 2 + 8)
        old_co, new_co = _pick(_COMPANIES, u + 2), _pick(_COMPANIES, u + 6)
        old_colour, new_colour = _pick(_COLOURS, u + 2), _pick(_COLOURS, u + 6)
        pet, name = _pick(_PETS, u + 2), _pick(_PET_NAMES, u + 3)
        instrument = _pick(_INSTRUMENTS, u + 5)
        s.batches = [
            [
                Item(f"I live in {old_city}"),
                Item(f"I work at {old_co}"),
                Item(f"My favourite colour is {old_colour}"),
                Item(f"I have a {pet} named {name}"),
                Item(f"I play the {instrument}"),
            ],
            [
                Item(f"I moved to {new_city} last month"),
                Item(f"I changed jobs and now work at {new_co}"),
                Item(f"My favourite colour is {new_colour} now"),
            ],
        ]
        s.latest = [new_city, new_co, new_colour]
        s.stale = [old_city, old_co, old_colour]
        s.controls = [name, instrument]
        out.append(s)
    return out


#: The streams in report order.
STREAMS: Final = {
    "update": update_stream,
    "duplicate": duplicate_stream,
    "forget": forget_stream,
    "contradiction": contradiction_stream,
}
