"""The candidate streams of the quality harness, built deterministically, with the truth.

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

- ``paraphrase`` (three scripts: English, French, Chinese; one language per user): four facts,
  then each restated in other words (word order, a synonym verb, a particle, "moved to" for
  "live in"). One entry per fact.
- ``conflict`` (three scripts, one language per user): residence, employer and a favourite,
  then near statements that do **not** conflict (the same attribute of a sibling, a past
  employer with a year), then the unkeyed contradictions. The near statements are controls:
  retiring one is a wrong invalidation.

What counts as a conflict (the rule these streams hold a consolidator to): the same
single-valued attribute (where I live, where I work, my favourite X) of the same person, set to
another value, in the present. Not a conflict: another person's attribute ("my sister lives
in …"), a past or dated fact ("I worked at … in 2010"), an addition ("I also work at …").

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


#: The languages of the three-script streams, one per user in turn (Latin, Latin, Han).
_LANGS: Final = ("en", "fr", "zh")
_FILMS: Final = _words("Alien Vertigo Amelie Psycho Heat Brazil Fargo Jaws Tampopo Ran Up Big")
_FR_CITIES: Final = _words("Lille Rennes Dijon Nancy Brest Metz Reims Tours Caen Pau Nice Sète")
_FR_COMPANIES: Final = _words("Renault Danone Michelin Airbus Alstom Decathlon Thales Safran")
_FR_COLOURS: Final = _words("vert bleu rouge jaune violet orange rose gris marron turquoise")
_FR_FOODS: Final = _words("fromage chocolat couscous croissant ratatouille cassoulet")
_ZH_CITIES: Final = ("北京", "上海", "深圳", "成都", "杭州", "西安", "重庆", "武汉", "厦门", "昆明")
_ZH_COMPANIES: Final = ("华为", "腾讯", "百度", "小米", "京东", "美团", "网易", "联想")
_ZH_COLOURS: Final = ("红色", "蓝色", "绿色", "黄色", "紫色", "橙色", "白色", "黑色")
_ZH_FILMS: Final = ("霸王别姬", "活着", "英雄", "卧虎藏龙", "让子弹飞", "无间道")
_ZH_FOODS: Final = ("饺子", "火锅", "包子", "面条", "烤鸭", "豆腐")
_FOODS: Final = _words("sushi ramen paella tacos falafel pierogi dumplings curry")


def _paraphrases(lang: str, u: int) -> tuple[list[Item], list[Item], list[str]]:
    """Four facts, their restatements, and each fact's marker."""
    if lang == "en":
        film, food = _pick(_FILMS, u), _pick(_FOODS, u)
        city, city2 = _pick(_CITIES, u + 3), _pick(_CITIES, u + 13)
        first = [
            f"My favourite film is {film}",
            f"I live in {city}",
            f"My daughter's home is in {city2}",
            f"I really love {food}",
        ]
        again = [
            f"{film} is my favourite film",
            f"I moved to {city} recently",
            f"My daughter lives in {city2}",
            f"I love {food} too",
        ]
        return [Item(t) for t in first], [Item(t) for t in again], [film, city, city2, food]
    if lang == "fr":
        film, food = _pick(_FILMS, u + 5), _pick(_FR_FOODS, u)
        city, city2 = _pick(_FR_CITIES, u), _pick(_FR_CITIES, u + 6)
        first = [
            f"Mon film préféré est {film}",
            f"J'habite à {city}",
            f"Ma fille habite à {city2}",
            f"J'adore le {food}",
        ]
        again = [
            f"{film} est mon film préféré",
            f"Je vis à {city}",
            f"Ma fille vit à {city2}",
            f"J'adore vraiment le {food}",
        ]
        return [Item(t) for t in first], [Item(t) for t in again], [film, city, city2, food]
    film, food = _pick(_ZH_FILMS, u), _pick(_ZH_FOODS, u)
    city, city2 = _pick(_ZH_CITIES, u), _pick(_ZH_CITIES, u + 5)
    first = [f"我最喜欢的电影是{film}", f"我住在{city}", f"我女儿住在{city2}", f"我很喜欢吃{food}"]
    again = [
        f"{film}是我最喜欢的电影", f"我现在住在{city}", f"我的女儿住在{city2}", f"我喜欢吃{food}"
    ]  # fmt: skip
    return [Item(t) for t in first], [Item(t) for t in again], [film, city, city2, food]


def paraphrase_stream(users: int = DEFAULT_USERS) -> list[UserStream]:
    """Four facts, then each said again in other words, in English, French or Chinese."""
    out = []
    for u in range(users):
        lang = _LANGS[u % len(_LANGS)]
        s = UserStream(user=f"paraphrase-{lang}-{u}")
        first, again, markers = _paraphrases(lang, u)
        s.batches = [first, again]
        s.facts = markers
        s.controls = list(markers)
        out.append(s)
    return out


def _conflicts(lang: str, u: int) -> tuple[list[str], list[str], list[str], list[list[str]]]:
    """Statements (first, near-but-compatible, contradicting) and markers (old, near, new)."""
    if lang == "en":
        c = [_pick(_CITIES, u * 3 + i + 1) for i in range(3)]
        co = [_pick(_COMPANIES, u * 3 + i) for i in range(3)]
        f = [_pick(_FILMS, u * 3 + i + 2) for i in range(3)]
        first = [f"I live in {c[0]}", f"I work at {co[0]}", f"My favourite film is {f[0]}"]
        near = [
            f"My sister lives in {c[1]}",
            f"I worked at {co[1]} in 2010",
            f"My sister's favourite film is {f[1]}",
        ]
        new = [
            f"I moved to {c[2]} last month",
            f"I changed jobs and now work at {co[2]}",
            f"{f[2]} is my favourite film now",
        ]
    elif lang == "fr":
        c = [_pick(_FR_CITIES, u * 3 + i + 1) for i in range(3)]
        co = [_pick(_FR_COMPANIES, u * 3 + i) for i in range(3)]
        f = [_pick(_FR_COLOURS, u * 3 + i) for i in range(3)]
        first = [
            f"J'habite à {c[0]}",
            f"Je travaille chez {co[0]}",
            f"Ma couleur préférée est le {f[0]}",
        ]
        near = [
            f"Mon frère habite à {c[1]}",
            f"J'ai travaillé chez {co[1]} en 2012",
            f"La couleur préférée de ma sœur est le {f[1]}",
        ]
        new = [
            f"Je me suis installé à {c[2]}",
            f"Je travaille maintenant chez {co[2]}",
            f"Ma couleur préférée est le {f[2]} maintenant",
        ]
    else:
        c = [_pick(_ZH_CITIES, u * 3 + i) for i in range(3)]
        co = [_pick(_ZH_COMPANIES, u * 3 + i) for i in range(3)]
        f = [_pick(_ZH_COLOURS, u * 3 + i) for i in range(3)]
        first = [f"我住在{c[0]}", f"我在{co[0]}公司工作", f"我最喜欢的颜色是{f[0]}"]
        near = [f"我妹妹住在{c[1]}", f"我以前在{co[1]}公司工作", f"我妹妹最喜欢的颜色是{f[1]}"]
        new = [f"我搬到了{c[2]}", f"我现在在{co[2]}公司工作", f"我最喜欢的颜色现在是{f[2]}"]
    markers = [[c[i], co[i], f[i]] for i in range(3)]
    return first, near, new, markers


def conflict_stream(users: int = DEFAULT_USERS) -> list[UserStream]:
    """Unkeyed contradictions beside compatible near statements, in three scripts."""
    out = []
    for u in range(users):
        lang = _LANGS[u % len(_LANGS)]
        s = UserStream(user=f"conflict-{lang}-{u}")
        first, near, new, (old, close, latest) = _conflicts(lang, u)
        s.batches = [[Item(t) for t in first], [Item(t) for t in near], [Item(t) for t in new]]
        s.latest, s.stale, s.controls = latest, old, close
        out.append(s)
    return out


#: The streams in report order.
STREAMS: Final = {
    "update": update_stream,
    "duplicate": duplicate_stream,
    "forget": forget_stream,
    "contradiction": contradiction_stream,
    "paraphrase": paraphrase_stream,
    "conflict": conflict_stream,
}
