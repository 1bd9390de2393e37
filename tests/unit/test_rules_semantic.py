"""Semantic merging in the rules consolidator: paraphrases confirm, contradictions supersede,
and a statement that does not conflict never retires anything."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.support.consolidation_factories import at, cand, entry, state
from worker.consolidation.meaning import Meaning
from worker.consolidation.plan import (
    Add,
    Confirm,
    Invalidate,
    Plan,
    Reject,
    Supersede,
    consolidate_batch,
    validate_plan,
)
from worker.consolidation.rules import RulesConsolidator
from worker.models import Candidate, Entry
from worker.runtime.embeddings import build_embeddings
from worker.settings import Settings
from worker.types import DEFAULT_EMBEDDINGS, FACTS_PATH

RULES = RulesConsolidator()
FACTS = FACTS_PATH

PARAPHRASES = {
    "en-order": ("My favourite book is Dune", "Dune is my favourite book"),
    "en-synonym": ("My sister lives in Riga", "My sister's home is in Riga"),
    "en-moved": ("I live in Lisbon", "I moved to Lisbon recently"),
    "fr-order": ("Mon film préféré est Vertigo", "Vertigo est mon film préféré"),
    "fr-synonym": ("J'habite à Rennes", "Je vis à Rennes"),
    "zh-order": ("我最喜欢的电影是霸王别姬", "霸王别姬是我最喜欢的电影"),
    "zh-particle": ("我女儿住在杭州", "我的女儿住在杭州"),
}

CONTRADICTIONS = {
    "en-residence": ("I live in Paris", "I moved to Berlin last month"),
    "en-employer": ("I work at Acme", "I changed jobs and now work at Globex"),
    "en-favourite": ("My favourite colour is green", "My favourite colour is teal now"),
    "en-wife": ("My wife works at Acme", "My wife works at Initech"),
    "fr-residence": ("J'habite à Lille", "Je me suis installé à Nantes"),
    "fr-employer": ("Je travaille chez Renault", "Je travaille maintenant chez Airbus"),
    "de-residence": ("Ich wohne in Bonn", "Ich bin nach Hamburg gezogen"),
    "es-favourite": ("Mi color favorito es el azul", "Mi color favorito es el rojo"),
    "ru-residence": ("Я живу в Москве", "Я переехал в Казань"),
    "zh-residence": ("我住在北京", "我搬到了上海"),
    "zh-favourite": ("我最喜欢的颜色是蓝色", "我最喜欢的颜色现在是红色"),
}

#: Near statements that conflict with nothing: other people, the past, additions, non-names.
COMPATIBLE = {
    "another subject": ("I live in Paris", "My sister lives in Berlin"),
    "maybe another sister": ("My sister lives in Paris", "My sister lives in Berlin"),
    "maybe another friend": ("My friend works at Acme", "My friend works at Globex"),
    "a dated past job": ("I work at Acme", "I worked at Globex in 2010"),
    "an addition": ("I work at Acme", "I also work at Globex"),
    "another favourite": ("My favourite colour is green", "My favourite film is Heat"),
    "not a place name": ("I live in Paris", "I live in a small flat"),
    "a negation": ("I live in Paris", "I don't live in Berlin"),
    "a refinement": ("I live in Paris", "I live in Paris, France"),
    "a sibling's favourite": ("My favourite film is Alien", "My sister's favourite film is Jaws"),
    "fr: another subject": ("J'habite à Lyon", "Mon frère habite à Metz"),
    "fr: a dated past job": ("Je travaille chez Danone", "J'ai travaillé chez Thales en 2012"),
    "zh: another subject": ("我住在北京", "我妹妹住在深圳"),
    "zh: a former employer": ("我在华为工作", "我以前在腾讯工作"),
    "counts": ("I have two kids", "I have three kids"),
    "another pet": ("I have a dog named Rex", "I have a cat named Miso"),
}


def merge(entries: list[Entry], batch: list[Candidate]) -> Plan:
    return RULES.merge(state(entries), batch, now=at(10))


def retired(plan: Plan) -> set[str]:
    return {op.entry_id for op in plan.ops if isinstance(op, Supersede | Invalidate)}


@pytest.mark.parametrize(("first", "again"), PARAPHRASES.values(), ids=PARAPHRASES)
def test_a_paraphrase_confirms_the_entry_it_restates(first: str, again: str) -> None:
    plan = merge([entry("e1", first)], [cand(again)])
    assert plan.ops == [Confirm(candidate_ids=[plan.ops[0].candidate_ids[0]], entry_id="e1")]


@pytest.mark.parametrize(("old", "new"), CONTRADICTIONS.values(), ids=CONTRADICTIONS)
def test_a_new_value_of_the_same_attribute_supersedes_the_old(old: str, new: str) -> None:
    plan = merge([entry("e1", old)], [cand(new)])
    (op,) = plan.ops
    assert isinstance(op, Supersede)
    assert (op.entry_id, op.text) == ("e1", new)
    assert op.reason.startswith("superseded: newer value for ")


@pytest.mark.parametrize(("old", "near"), COMPATIBLE.values(), ids=COMPATIBLE)
def test_a_statement_that_does_not_conflict_is_added_and_retires_nothing(
    old: str, near: str
) -> None:
    plan = merge([entry("e1", old)], [cand(near)])
    assert [op.op for op in plan.ops] == ["add"]


def test_a_superseded_statement_stays_in_history() -> None:
    _, applied = consolidate_batch(
        RULES, state([entry("e1", "I live in Paris")]), [cand("I moved to Berlin")],
        now=at(10), settings=Settings(), current_files={},
    )  # fmt: skip
    (old,) = applied.changed_entries
    (new,) = applied.new_entries
    assert (old.id, old.invalid_at, old.superseded_by) == ("e1", at(10), new.id)
    assert new.text == "I moved to Berlin"


def test_the_latest_value_wins_over_a_chain_of_moves() -> None:
    batch = [cand("I live in Paris", minute=1), cand("I moved to Berlin", minute=2),
             cand("I moved to Rome", minute=3)]  # fmt: skip
    _, applied = consolidate_batch(
        RULES, state(), batch, now=at(10), settings=Settings(), current_files={}
    )
    active = [e.text for e in applied.new_entries if e.active]
    assert active == ["I moved to Rome"]


def test_an_older_statement_arriving_late_does_not_replace_a_newer_one() -> None:
    newer = entry("e1", "I live in Berlin", minute=5)
    plan = merge([newer], [cand("I live in Paris", minute=1)])
    (op,) = plan.ops
    assert isinstance(op, Reject)
    assert op.reason.startswith("stale:")


def test_restating_the_same_value_in_other_words_confirms() -> None:
    plan = merge([entry("e1", "I live in Lisbon")], [cand("I moved to Lisbon")])
    assert [op.op for op in plan.ops] == ["confirm"]


def test_an_unkeyed_contradiction_keeps_the_key_of_the_entry_it_supersedes() -> None:
    keyed = entry("e1", "I live in Paris", key="profile.location")
    _, applied = consolidate_batch(
        RULES, state([keyed]), [cand("I moved to Berlin")], now=at(10), settings=Settings(),
        current_files={},
    )  # fmt: skip
    assert [(e.text, e.key) for e in applied.new_entries] == [
        ("I moved to Berlin", "profile.location")
    ]


def test_names_in_another_order_are_not_a_paraphrase() -> None:
    plan = merge([entry("e1", "Anna owes Ben money")], [cand("Ben owes Anna money")])
    assert [op.op for op in plan.ops] == ["add"]


def test_a_given_similarity_confirms_what_the_rules_cannot_see() -> None:
    rules = RulesConsolidator(similarity=lambda _a, _b: 0.99)
    existing = [entry("e1", "I adore hiking in the Alps")]
    plan = rules.merge(state(existing), [cand("Walking in the Alps is what I love")], now=at(10))
    assert [op.op for op in plan.ops] == ["confirm"]


def test_a_given_similarity_never_merges_other_numbers_or_polarity() -> None:
    rules = RulesConsolidator(similarity=lambda _a, _b: 1.0)
    existing = [entry("e1", "I run 5 km every morning"), entry("e2", "I eat meat on Sundays")]
    batch = [cand("I run 10 km every morning"), cand("I never eat meat on Sundays")]
    plan = rules.merge(state(existing), batch, now=at(10))
    assert [op.op for op in plan.ops] == ["add", "add"]


def test_a_similarity_threshold_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match=r"similarity_threshold is 1\.5"):
        RulesConsolidator(similarity_threshold=1.5)


# --- property: different subjects or attributes never retire each other ----------------------

#: subject → (the subject with a verb, its possessive)
SUBJECTS = {
    "self": ("I {v}", "My"),
    "wife": ("My wife {v}s", "My wife's"),
    "father": ("My father {v}s", "My father's"),
    "sister": ("My sister {v}s", "My sister's"),
    "friend": ("My friend {v}s", "My friend's"),
}
#: Relations that may be several people: even the same attribute never conflicts.
SEVERAL = {"sister", "friend"}
#: attribute → (the sentence from a subject's forms and a value, the values)
ATTRIBUTES = {
    "residence": (lambda s, v: s[0].format(v="live") + f" in {v}",
                  ("Paris", "Berlin", "Oslo", "Lima", "Kyoto")),
    "employer": (lambda s, v: s[0].format(v="work") + f" at {v}",
                 ("Acme", "Globex", "Initech", "Hooli", "Wonka")),
    "favourite colour": (lambda s, v: f"{s[1]} favourite colour is {v}",
                         ("green", "blue", "teal", "amber", "violet")),
    "favourite film": (lambda s, v: f"{s[1]} favourite film is {v}",
                       ("Heat", "Alien", "Jaws", "Fargo", "Psycho")),
}  # fmt: skip


def sentence(subject: str, attribute: str, value: int) -> str:
    pattern, values = ATTRIBUTES[attribute]
    return pattern(SUBJECTS[subject], values[value])


slots = st.tuples(st.sampled_from(sorted(SUBJECTS)), st.sampled_from(sorted(ATTRIBUTES)))


@settings(max_examples=150, deadline=None)
@given(first=slots, second=slots, values=st.tuples(st.integers(0, 4), st.integers(0, 4)))
def test_statements_about_another_subject_or_attribute_never_retire_each_other(
    first: tuple[str, str], second: tuple[str, str], values: tuple[int, int]
) -> None:
    old, new = sentence(*first, values[0]), sentence(*second, values[1])
    plan = merge([entry("e1", old)], [cand(new)])
    if values[0] == values[1] and first == second:
        assert [op.op for op in plan.ops] == ["confirm"], (old, new)
    elif first == second and first[0] not in SEVERAL:
        assert retired(plan) == {"e1"}, (old, new)
    else:
        assert retired(plan) == set(), (old, new)


def test_the_property_sentences_read_as_intended() -> None:
    assert sentence("sister", "residence", 0) == "My sister lives in Paris"
    assert sentence("self", "employer", 1) == "I work at Globex"
    assert sentence("wife", "favourite film", 2) == "My wife's favourite film is Jaws"
    assert isinstance(merge([], [cand(sentence("self", "residence", 0))]).ops[0], Add)


#: language → subject → attribute → template; values per attribute below.
TEMPLATES = {
    "fr": {
        "self": {"residence": "J'habite à {}", "employer": "Je travaille chez {}",
                 "colour": "Ma couleur préférée est le {}"},
        "mère": {"residence": "Ma mère habite à {}", "employer": "Ma mère travaille chez {}"},
        "sœur": {"residence": "Ma sœur habite à {}", "employer": "Ma sœur travaille chez {}"},
    },
    "zh": {
        "self": {"residence": "我住在{}", "employer": "我在{}公司工作",
                 "colour": "我最喜欢的颜色是{}"},
        "妈妈": {"residence": "我妈妈住在{}", "employer": "我妈妈在{}公司工作",
                 "colour": "我妈妈最喜欢的颜色是{}"},
        "妹妹": {"residence": "我妹妹住在{}", "employer": "我妹妹在{}公司工作"},
    },
}  # fmt: skip
VALUES = {
    "fr": {"residence": ("Lille", "Rennes", "Dijon", "Brest"),
           "employer": ("Renault", "Danone", "Airbus", "Thales"),
           "colour": ("vert", "bleu", "rouge", "jaune")},
    "zh": {"residence": ("北京", "上海", "深圳", "杭州"),
           "employer": ("华为", "腾讯", "百度", "小米"),
           "colour": ("红色", "蓝色", "绿色", "紫色")},
}  # fmt: skip
SEVERAL_BY_LANG = {"fr": {"sœur"}, "zh": {"妹妹"}}


@st.composite
def same_language_pairs(draw: st.DrawFn) -> tuple[str, tuple[str, str, int], tuple[str, str, int]]:
    lang = draw(st.sampled_from(sorted(TEMPLATES)))

    def one() -> tuple[str, str, int]:
        subject = draw(st.sampled_from(sorted(TEMPLATES[lang])))
        attribute = draw(st.sampled_from(sorted(TEMPLATES[lang][subject])))
        return subject, attribute, draw(st.integers(0, 3))

    return lang, one(), one()


@settings(max_examples=150, deadline=None)
@given(pair=same_language_pairs())
def test_in_french_and_chinese_only_the_same_attribute_of_the_same_person_is_retired(
    pair: tuple[str, tuple[str, str, int], tuple[str, str, int]],
) -> None:
    lang, (s1, a1, v1), (s2, a2, v2) = pair
    old = TEMPLATES[lang][s1][a1].format(VALUES[lang][a1][v1])
    new = TEMPLATES[lang][s2][a2].format(VALUES[lang][a2][v2])
    plan = merge([entry("e1", old)], [cand(new)])
    if (s1, a1, v1) == (s2, a2, v2):
        assert [op.op for op in plan.ops] == ["confirm"], (old, new)
    elif (s1, a1) == (s2, a2) and s1 not in SEVERAL_BY_LANG[lang]:
        assert retired(plan) == {"e1"}, (old, new)
    else:
        assert retired(plan) == set(), (old, new)


def test_a_keyed_new_value_also_retires_unkeyed_statements_of_the_same_attribute() -> None:
    keyed = entry("k1", "I live in Rome", key="profile.location", minute=-30)
    unkeyed = entry("u1", "I live in Paris", minute=-60)
    plan = merge([keyed, unkeyed], [cand("I live in Oslo", key="profile.location")])
    assert retired(plan) == {"k1", "u1"}


# --- the same guarantees with the default meaning model ---------------------------------------


@cache
def by_meaning() -> RulesConsolidator:
    """The rules as the worker runs them by default: with the local multilingual model."""
    built = build_embeddings(DEFAULT_EMBEDDINGS)
    assert built is not None
    return RulesConsolidator(meaning=Meaning(built))


def merge_by_meaning(entries: list[Entry], batch: list[Candidate]) -> Plan:
    return by_meaning().merge(state(entries), batch, now=at(10))


def ops_after(held: str, said: str) -> list[str]:
    """What the rules do, by meaning, with ``said`` while ``held`` is the one entry."""
    return [op.op for op in merge_by_meaning([entry("e1", held)], [cand(said)]).ops]


others = st.tuples(
    st.sampled_from(sorted(set(SUBJECTS) - {"self"})), st.sampled_from(sorted(ATTRIBUTES))
)


@settings(max_examples=150, deadline=None)
@given(first=others, second=others, values=st.tuples(st.integers(0, 4), st.integers(0, 4)))
def test_by_meaning_statements_about_other_people_never_retire_each_other(
    first: tuple[str, str], second: tuple[str, str], values: tuple[int, int]
) -> None:
    """Two statements that both lie towards someone else ("My sister's favourite colour is
    green" / "My friend's favourite film is Heat") may be about two people: both stay, even
    when each is clearly and firmly of one single-valued kind."""
    assume(first != second)
    old, new = sentence(*first, values[0]), sentence(*second, values[1])
    assert retired(merge_by_meaning([entry("e1", old)], [cand(new)])) == set(), (old, new)


#: A statement that adds a value of a single-valued attribute beside the held one, in wordings
#: no pattern lists ("also", "auch", "aussi", "también", "anche", "também", "भी").
ADDITIONS = {
    "en-employer": ("I work at Acme", "I'm also doing shifts at Globex"),
    "en-job": ("I'm a nurse", "I'm also a part-time yoga teacher"),
    "en-home": ("I live in Leeds", "I also have a place in Whitby"),
    "de-home": ("Ich wohne in Köln", "Ich habe auch eine Wohnung in Bonn"),
    "fr-employer": ("Je travaille chez Renault", "Je bosse aussi chez Airbus le samedi"),
    "fr-job": ("Je suis prof de maths", "Je suis aussi pompier volontaire"),
    "es-employer": ("Trabajo en Telefónica", "También trabajo en un bar"),
    "it-job": ("Sono medico", "Sono anche un musicista"),
    "pt-home": ("Moro em Lisboa", "Também tenho casa no Porto"),
    "hi-job": ("मैं डॉक्टर हूँ", "मैं लेखक भी हूँ"),
}


@pytest.mark.parametrize(("held", "more"), ADDITIONS.values(), ids=ADDITIONS)
def test_by_meaning_a_statement_that_adds_a_value_retires_nothing(held: str, more: str) -> None:
    plan = merge_by_meaning([entry("e1", held)], [cand(more)])
    assert retired(plan) == set()
    assert [op.op for op in plan.ops] == ["add"]


def test_by_meaning_a_reaffirmation_naming_the_held_value_still_replaces_it() -> None:
    """ "Still" leans the way "also" does; naming the held value and nothing else, it is the
    same value said again, not one more."""
    plan = merge_by_meaning(
        [entry("e1", "I work at Acme as a welder")], [cand("Yep, still at Acme!")]
    )
    assert retired(plan) == {"e1"}


def problems(held: str, c: Candidate, *ops: Add | Supersede | Invalidate) -> list[str]:
    """The trust check's problems with a model's plan of ``ops`` for the candidate ``c``, over
    the one entry ``e1`` holding ``held``, judged with the default meaning model."""
    return validate_plan(state([entry("e1", held)]), [c], Plan(ops=list(ops)), max_removals=5,
                         max_text_bytes=500, meaning=by_meaning().meaning)  # fmt: skip


def judged(held: str, said: str, written: str) -> list[str]:
    """:func:`problems` of a plan that supersedes ``held`` with ``written`` for ``said``."""
    c = cand(said)
    return problems(held, c, Supersede(candidate_ids=[c.id], entry_id="e1", text=written))


@pytest.mark.parametrize(("held", "more"), ADDITIONS.values(), ids=ADDITIONS)
def test_by_meaning_a_plan_that_retires_a_value_for_an_addition_is_refused(
    held: str, more: str
) -> None:
    assert any("retires entry e1" in p for p in judged(held, more, more))


def test_by_meaning_a_plan_that_invalidates_a_value_beside_an_addition_is_refused() -> None:
    c = cand("I'm also doing shifts at Globex")
    add = Add(candidate_ids=[c.id], path=FACTS, text=c.text)
    drop = Invalidate(candidate_ids=[c.id], entry_id="e1", reason="new job")
    assert any("retires entry e1" in p for p in problems("I work at Acme", c, add, drop))


#: The same said of two people, in otherwise the same words: one person's fact never ends
#: the other's, whoever's plan says so.
TWO_PEOPLE = {
    "en": ("My friend works at Hooli.", "My sister works at Hooli."),
    "fr": ("Mon frère habite à Lyon.", "Ma sœur habite à Lyon."),
    "zh": ("我儿子今年六岁。", "我侄子今年六岁。"),
    "pt-agrees": ("Meu irmão é casado.", "Minha irmã é casada."),
}


@pytest.mark.parametrize(("held", "said"), TWO_PEOPLE.values(), ids=TWO_PEOPLE)
def test_by_meaning_a_plan_that_retires_one_persons_fact_for_anothers_is_refused(
    held: str, said: str
) -> None:
    assert any("retires entry e1" in p for p in judged(held, said, said))


def test_by_meaning_a_plan_that_replaces_the_partners_name_is_accepted() -> None:
    assert (
        judged("My girlfriend is Anna.", "My girlfriend is Maya.", "My girlfriend is Maya.") == []
    )


def test_by_meaning_a_plan_that_folds_an_addition_into_the_held_value_is_accepted() -> None:
    said = "I'm also doing shifts at Globex"
    assert judged("I work at Acme", said, "I work at Acme and do shifts at Globex") == []


def test_by_meaning_a_plan_that_replaces_a_value_for_a_reaffirmation_is_accepted() -> None:
    assert judged("I work at Acme as a welder", "Yep, still at Acme!", "I work at Acme") == []


#: One fact of the user's said twice in their own words, the second naming the relation the
#: first only implies: who the others are is no question, so the second says the first again.
SAID_AGAIN = {
    "en-sons": ("I have two sons.", "I'm the father of two boys."),
    "en-twins": ("I have twin boys.", "I'm the dad of twins, both boys."),
    "fr-sons": ("J'ai deux fils.", "Je suis le père de deux garçons."),
    "hi-sons": ("मेरे दो बेटे हैं।", "मैं दो लड़कों का पिता हूँ।"),
}

#: Pairs written about someone by name, as an extractor writes its observations of a
#: conversation: whether both are about one person cannot be told, so both stay.
OBSERVED_TWICE = {
    "friends": (
        "Marco feels lucky to have friends who support his career change.",
        "Marco values having people around him who believe in him.",
    ),
    "colleagues": (
        "Ravi feels blessed to have colleagues who back his ideas.",
        "Ravi appreciates having people at work who support him.",
    ),
    "bees": ("Kofi and his brother keep bees.", "Kofi has beehives with his brother."),
}


def observed(text: str) -> bool:
    """Whether the default model takes ``text`` for an observation of someone named."""
    meaning = by_meaning().meaning
    assert meaning is not None
    meaning.prepare([text])
    return meaning.observation(text)


@pytest.mark.parametrize(("held", "again"), SAID_AGAIN.values(), ids=SAID_AGAIN)
def test_by_meaning_a_fact_said_again_in_the_users_own_words_is_kept_once(
    held: str, again: str
) -> None:
    plan = merge_by_meaning([entry("e1", held)], [cand(again)])
    assert [op.op for op in plan.ops] == ["supersede"]
    assert retired(plan) == {"e1"}


#: How far the bundled engine's vectors move from one CPU to another along the someone-else
#: direction: up to 0.004 in a vector's values, the shipped examples' vectors against this
#: machine's.
CPU_SPREAD = 0.004


#: Near the someone-else threshold: within the CPU spread of each of the ten subject pairs that
#: draw a text's direction (:data:`~worker.consolidation.meaning.NEAREST_PAIRS`) and of the text.
ON_THE_LINE = 2 * CPU_SPREAD


def test_a_we_restatement_of_ones_children_lies_on_the_someone_else_threshold() -> None:
    """Why "We have two sons." / "We're parents of two boys." is not among :data:`SAID_AGAIN`:
    the first lies within the engine's CPU spread of the someone-else threshold (0.0646 on one
    CPU; along the direction of all the pairs, 0.0603 there and at or below 0.06 on another),
    so whether both read as someone else's, and are both kept, depends on the CPU. Should it
    move off the line, it belongs there again."""
    meaning = by_meaning().meaning
    assert meaning is not None
    meaning.prepare(["We have two sons."])
    side = meaning._local_side("We have two sons.")
    assert side is not None
    assert abs(side - meaning.thresholds.someone_else) < ON_THE_LINE


#: Statements about the user's spouse or sibling in languages whose few subject pairs the
#: direction averaged over all pairs barely reaches (0.03-0.06 along it, at or below the
#: threshold): the pairs nearest each, in its own language, place it past the threshold.
RELATIVES = {
    "zh-husband": "我丈夫是医生。",
    "zh-sister": "我妹妹今年25岁。",
    "ja-wife": "妻は看護師です。",
    "de-husband": "Mein Mann ist Arzt.",
}


@pytest.mark.parametrize("text", RELATIVES.values(), ids=RELATIVES)
def test_a_relatives_statement_is_someone_elses_in_any_language(text: str) -> None:
    meaning = by_meaning().meaning
    assert meaning is not None
    meaning.prepare([text])
    assert meaning.someone_else(text)


#: A relative's value, then the user's own of the same attribute: two people's, both kept.
RELATIVE_THEN_OWN = {
    "zh-job": ("我丈夫是医生。", "我是老师。"),
    "zh-age": ("我妹妹今年25岁。", "我今年29岁。"),
    "de-job": ("Mein Mann ist Arzt.", "Ich bin Lehrerin."),
    # Hinglish: 0.07 apart on the whole direction, 0.26 on the nearest pairs'.
    "hinglish-city": ("Meri didi Jaipur mein rehti hai.", "Main Lucknow mein rehta hoon."),
}


@pytest.mark.parametrize(("held", "own"), RELATIVE_THEN_OWN.values(), ids=RELATIVE_THEN_OWN)
def test_by_meaning_the_users_own_value_keeps_a_relatives(held: str, own: str) -> None:
    assert ops_after(held, own) == ["add"]


#: The user's fact, then a relative's in the same words: nearly the same vector (cosine 0.96
#: to 0.97), the same numbers, two people's facts. Each was taken for the first said again, and
#: the relative's was lost.
OWN_THEN_RELATIVE_ALIKE = {
    "en-sons": ("I have two sons.", "My brother has two sons."),
    "en-employer": ("I work at Siemens.", "My husband works at Siemens."),
    "en-cat": ("I have a cat called Miso.", "My mum has a cat called Miso."),
    "fr-children": ("J'ai deux enfants.", "Ma sœur a deux enfants."),
    "zh-city": ("我住在成都。", "我哥哥住在成都。"),
    "hinglish-city": ("Main Pune mein rehta hoon.", "Mera bhai Pune mein rehta hai."),
}


@pytest.mark.parametrize(
    ("held", "relatives"), OWN_THEN_RELATIVE_ALIKE.values(), ids=OWN_THEN_RELATIVE_ALIKE
)
def test_by_meaning_a_relatives_fact_in_the_users_words_is_kept_beside_theirs(
    held: str, relatives: str
) -> None:
    assert ops_after(held, relatives) == ["add"]


#: The user's fact, and a plan that retires it for a relative's of the same attribute.
OWN_RETIRED_FOR_A_RELATIVES = {
    "en-diet": ("I'm vegetarian.", "My daughter is vegetarian."),
    "en-allergy": ("I'm allergic to peanuts.", "My son is allergic to peanuts."),
    "de-city": ("Ich wohne in Hamburg.", "Mein Bruder wohnt in Hamburg."),
    "es-city": ("Vivo en Sevilla.", "Mi hermana vive en Sevilla."),
    "zh-city": ("我住在成都。", "我哥哥住在成都。"),
    "en-car": ("I drive a Tesla.", "My father drives a Tesla."),
    "hinglish-city": ("Main Pune mein rehta hoon.", "Mera bhai Pune mein rehta hai."),
    "hinglish-employer": ("Main TCS mein kaam karta hoon.", "Meri behen TCS mein kaam karti hai."),
}


@pytest.mark.parametrize(
    ("held", "relatives"), OWN_RETIRED_FOR_A_RELATIVES.values(), ids=OWN_RETIRED_FOR_A_RELATIVES
)
def test_by_meaning_a_plan_that_retires_the_users_fact_for_a_relatives_is_refused(
    held: str, relatives: str
) -> None:
    assert any("retires entry e1" in p for p in judged(held, relatives, relatives))


#: A value that holds, then one the user only wishes, plans or imagines: not (yet) a value,
#: so the one that holds stays. Each was retired by the rules before wishes had a direction.
WISHED_BESIDE_HELD = {
    "de-employer": ("Ich arbeite bei BMW.", "Ich würde gern irgendwann bei Porsche arbeiten."),
    "fr-city": ("J'habite à Lyon.", "Je rêve d'habiter à Marseille."),
    "zh-city": ("我住在北京。", "我打算明年搬到上海。"),
    "es-employer": ("Trabajo en Zara.", "Ojalá pudiera trabajar en Inditex algún día."),
    "ja-city": ("大阪に住んでいます。", "将来は京都に住みたいと思っています。"),
    "hi-job": ("मैं बैंक में काम करता हूँ।", "मैं एक दिन अपना बिज़नेस शुरू करना चाहता हूँ।"),
    "en-diet": ("I'm vegetarian.", "If I ever ate meat again it would be chicken."),
    "en-city": ("I live in Manchester.", "We've been talking about maybe moving to Bristol."),
}


@pytest.mark.parametrize(("held", "wish"), WISHED_BESIDE_HELD.values(), ids=WISHED_BESIDE_HELD)
def test_by_meaning_a_wish_or_a_plan_keeps_the_value_that_holds(held: str, wish: str) -> None:
    assert ops_after(held, wish) == ["add"]


@pytest.mark.parametrize(("held", "wish"), WISHED_BESIDE_HELD.values(), ids=WISHED_BESIDE_HELD)
def test_by_meaning_a_plan_that_retires_a_value_that_holds_for_a_wish_is_refused(
    held: str, wish: str
) -> None:
    assert any("retires entry e1" in p for p in judged(held, wish, wish))


#: Something the user owns or keeps, counted, then a value of a single-valued attribute with
#: a number of its own: numbers draw short texts together (the count lay nearer the age
#: than a collection before the kinds had one for belongings), so each was retired.
BELONGINGS_THEN_A_VALUE = {
    "en-age": ("I collect records, about 150 of them.", "I'm 51."),
    "en-car": ("I own 12 old cameras.", "I drive a 2012 Honda Jazz."),
    "es-age": ("Tengo 30 cactus en la terraza.", "Tengo 31 años."),
    "fr-age": ("J'ai 70 BD dans ma bibliothèque.", "J'ai 69 ans."),
    "zh-age": ("我有三十本漫画书。", "我今年三十二岁。"),
}


@pytest.mark.parametrize(
    ("held", "value"), BELONGINGS_THEN_A_VALUE.values(), ids=BELONGINGS_THEN_A_VALUE
)
def test_by_meaning_a_counted_belonging_stays_beside_a_value_with_a_number(
    held: str, value: str
) -> None:
    assert ops_after(held, value) == ["add"]


#: A value that is asked for ("please call me …", "keep your answers short") lies towards
#: wishes, yet it is the value that holds: it replaces the one before.
ASKED_FOR = {
    "en-name": ("Call me Jo.", "Please call me Joanna from now on."),
    "es-name": ("Llámame Pepe.", "Prefiero que me llames José a partir de ahora."),
    "zh-name": ("叫我小李就行。", "以后请叫我李老师吧。"),
    "en-answers": (
        "I prefer long, detailed answers.",
        "Please keep your answers short from now on.",
    ),
}


@pytest.mark.parametrize(("held", "asked"), ASKED_FOR.values(), ids=ASKED_FOR)
def test_by_meaning_a_value_asked_for_replaces_the_one_before(held: str, asked: str) -> None:
    assert ops_after(held, asked) == ["supersede"]


#: A change said in the past or the perfect, beside the value it ends: an update, not a wish.
CHANGES_DONE = {
    "de-employer": ("Ich arbeite bei BMW.", "Seit März arbeite ich bei Porsche."),
    "en-city": ("I live in Manchester.", "We moved to Bristol in the spring."),
    "ja-city": ("大阪に住んでいます。", "先月京都に引っ越しました。"),
    "fr-employer": ("Je travaille chez Renault.", "J'ai été embauché chez Airbus."),
}


@pytest.mark.parametrize(("held", "done"), CHANGES_DONE.values(), ids=CHANGES_DONE)
def test_by_meaning_a_change_made_replaces_the_value_before(held: str, done: str) -> None:
    assert ops_after(held, done) == ["supersede"]


#: A past the user tells ("as a teenager I worked at …", "früher habe ich in … gewohnt"),
#: then the value of now: the past stays true beside it. Written for this check, not in the
#: bank; each was retired before the bank had pairs of values now and once.
PAST_BESIDE_NOW = {
    "en-employer": ("As a teenager I worked at McDonald's.", "I work at Accenture."),
    "en-favourite": (
        "Back in college my favourite band was Oasis.",
        "My favourite band is Arctic Monkeys.",
    ),
    "de-city": ("Früher habe ich in Hamburg gewohnt.", "Ich wohne in München."),
    "es-sport": (
        "De pequeño mi deporte favorito era el fútbol.",
        "Mi deporte favorito es el pádel.",
    ),
    "zh-employer": ("我以前在北京工作。", "我在上海工作。"),
    "ja-city": ("昔は京都に住んでいました。", "横浜に住んでいます。"),
    "hi-employer": ("मैं पहले जयपुर में काम करता था।", "मैं बेंगलुरु में काम करता हूँ।"),
}


@pytest.mark.parametrize(("past", "now"), PAST_BESIDE_NOW.values(), ids=PAST_BESIDE_NOW)
def test_by_meaning_a_past_the_user_tells_stays_beside_the_value_of_now(
    past: str, now: str
) -> None:
    assert ops_after(past, now) == ["add"]


@pytest.mark.parametrize(("past", "now"), PAST_BESIDE_NOW.values(), ids=PAST_BESIDE_NOW)
def test_by_meaning_a_plan_that_retires_a_past_for_the_value_of_now_is_refused(
    past: str, now: str
) -> None:
    assert any("retires entry e1" in p for p in judged(past, now, now))


def test_by_meaning_a_value_said_before_a_lasting_one_arrives_stale_though_that_leans_past() -> (
    None
):
    """ "I've lived in Leeds for three years now" lies towards the past as a past told for
    itself does; a statement said before it that arrives late is older, not its present: it
    is stale on arrival, not kept beside."""
    held = entry("e1", "I've lived in Leeds for three years now.", minute=-60)
    plan = merge_by_meaning([held], [cand("I'm living in York.", minute=-120)])
    assert [op.op for op in plan.ops] == ["reject"]


#: The user's partner, then something they have together said with "we": the partner stays
#: (each of these lost the partner before the family kind had examples of children; the
#: Chinese one, nearer the partner than the family even so, keeps it by
#: :meth:`Meaning.partner_stays`).
PARTNER_THEN_WE = {
    "es-children": ("Estoy casada con Pablo.", "Tenemos dos hijos."),
    "de-children": ("Ich bin mit Jonas verheiratet.", "Wir haben zwei Töchter."),
    "pt-children": ("Sou casado com a Marta.", "Nós temos uma filha."),
    "hi-children": ("मेरी शादी हो गई है।", "हमारी एक बेटी है।"),
    "fr-children": ("Je suis mariée avec Paul.", "On a une petite fille de deux ans."),
    "hinglish-children": ("Meri shaadi ho gayi hai.", "Hamare do bachche hain."),
    "zh-children": ("我和李雷结婚了。", "我们有两个女儿。"),
}


@pytest.mark.parametrize(("held", "ours"), PARTNER_THEN_WE.values(), ids=PARTNER_THEN_WE)
def test_by_meaning_what_we_have_together_keeps_the_partner(held: str, ours: str) -> None:
    assert ops_after(held, ours) == ["add"]


def test_by_meaning_two_trips_in_hindi_are_both_kept() -> None:
    """Two statements in one language lie near each other whatever they say; seen from the
    kinds' examples' mean, two trips are told from one trip said again (1.06 times the
    several-values threshold before the merge models read that cosine, 0.59 since)."""
    assert ops_after("मैं पिछले साल गोवा गया था।", "इस साल मैं केरल गया।") == ["add"]


#: A change of partner or status, clearly of the relationship kind, still retires the old.
PARTNER_CHANGES = {
    "es-divorce": ("Estoy casado.", "Me he divorciado."),
    "de-engagement": ("Ich bin verlobt.", "Wir haben die Verlobung gelöst."),
    "ja-break-up": ("彼氏がいます。", "彼氏と別れました。"),
    "fr-separation": ("Je suis en couple.", "Nous nous sommes séparés."),
}


@pytest.mark.parametrize(("held", "change"), PARTNER_CHANGES.values(), ids=PARTNER_CHANGES)
def test_by_meaning_a_change_of_partner_retires_the_old(held: str, change: str) -> None:
    assert ops_after(held, change) == ["supersede"]


@pytest.mark.parametrize(("held", "again"), OBSERVED_TWICE.values(), ids=OBSERVED_TWICE)
def test_by_meaning_observations_of_someone_named_are_both_kept(held: str, again: str) -> None:
    assert ops_after(held, again) == ["add"]


@pytest.mark.parametrize("text", [
    "Kenji is learning to bake sourdough.", "Fatima volunteers at the animal shelter on Sundays.",
    "Lukas fährt jeden Tag mit dem Rad zur Arbeit.", "Sofía está aprendiendo a tocar el piano.",
    "Chloé adore les films d'horreur.", "小王每天早上跑步。",
])  # fmt: skip
def test_a_statement_written_about_someone_by_name_is_an_observation(text: str) -> None:
    assert observed(text)


@pytest.mark.parametrize("text", [
    "My husband and I go hiking every weekend.", "Mi hermana y yo tenemos un gato.",
    "我和我妈妈住在一起。", "I'm a mum of twins.",
])  # fmt: skip
def test_the_users_own_words_are_no_observation_even_when_they_mention_others(
    text: str,
) -> None:
    assert not observed(text)


#: Two observations of one person, the newer a story that only leans towards an attribute (a
#: favourite), as an extractor writes them: not a new value, so both stay.
STORIES_OF_SOMEONE = {
    "films": (
        "Sam enjoys action movies for their stunts.",
        "Sam thinks Mad Max is probably the best film ever made.",
    ),
    "books": (
        "Ines loves fantasy series with dragons.",
        "Ines believes The Hobbit is the greatest book ever written.",
    ),
    "novels": (
        "Theo is writing a detective novel that makes him happy.",
        "Theo enjoys crime books like Sherlock Holmes.",
    ),
}


def test_by_meaning_an_observation_of_a_new_value_still_replaces_the_old() -> None:
    plan = merge_by_meaning(
        [entry("e1", "Tom is a vegetarian.")], [cand("Tom has gone fully vegan.")]
    )
    assert retired(plan) == {"e1"}


#: Two observations of one person an extractor wrote, the newer a story that leans towards
#: another kind (a correction, a restatement) without giving one attribute firmly: the merge
#: models learned from the user's own words do not answer for them, so both stay.
STORIES_OF_ONE_LIFE = {
    "won-then-hurt": (
        "Lena's team won a close match against the league leaders.",
        "Lena hurt her ankle and had to miss two matches.",
    ),
    "offer-then-busy": (
        "Yuki offered to help Ken move house.",
        "Yuki already had plans on Saturday and couldn't help Ken then.",
    ),
    "won-then-out": (
        "Ravi won a local chess tournament and met new players.",
        "Ravi did not make it past the first round of the city chess open.",
    ),
    "es-offer-then-busy": (
        "Lucía se ofreció a ayudar a Pablo con la mudanza.",
        "Lucía ya tenía planes el sábado y no pudo ayudar a Pablo.",
    ),
}


#: Every pair above: an observation that only leans towards an attribute, or towards a
#: correction or a restatement, retires nothing.
OBSERVATIONS_KEPT = {**STORIES_OF_SOMEONE, **STORIES_OF_ONE_LIFE}


@pytest.mark.parametrize(("held", "story"), OBSERVATIONS_KEPT.values(), ids=OBSERVATIONS_KEPT)
def test_by_meaning_two_observations_not_firmly_of_one_attribute_are_both_kept(
    held: str, story: str
) -> None:
    assert ops_after(held, story) == ["add"]


def test_by_meaning_a_correction_without_a_subject_still_corrects_an_observation_like_entry() -> (
    None
):
    held, fix = (
        "Our flat is in Brighton, moved in last spring.",
        "Small correction: it's Hove, not Brighton.",
    )
    assert observed(held)  # subjectless: the direction reads both as observations
    assert observed(fix)
    plan = merge_by_meaning([entry("e1", held)], [cand(fix)])
    assert retired(plan) == {"e1"}


#: Favourites of two different things, each of them one value at a time: neither retires the
#: other. Written for this check in other wordings than the kinds' examples; before each
#: favourite thing had a kind of its own, 10 of 17 such pairs lost the first.
TWO_FAVOURITES = {
    "en": (
        "If I had to pick one colour it'd be orange.",
        "Sushi is the one food I could eat every day.",
    ),
    "en-band-sport": (
        "The Beatles are my all-time favourite band.",
        "I'd say my top sport to watch is snooker.",
    ),
    "es": ("Lo que más me gusta comer es el cocido.", "Mi grupo preferido es Vetusta Morla."),
    "fr": ("Le vert, c'est ma couleur fétiche.", "Mon chanteur préféré est Stromae."),
    "pt": ("Minha banda preferida é Legião Urbana.", "Minha bebida preferida é caipirinha."),
    "ja": ("好きな歌手は宇多田ヒカルです。", "好きなチームは阪神タイガースです。"),
    "hi": ("मुझे सबसे ज़्यादा पीला रंग पसंद है।", "मेरी पसंदीदा टीम मुंबई इंडियंस है।"),
}


@pytest.mark.parametrize(("held", "other"), TWO_FAVOURITES.values(), ids=TWO_FAVOURITES)
def test_by_meaning_a_favourite_of_another_thing_keeps_the_first(held: str, other: str) -> None:
    assert ops_after(held, other) == ["add"]


#: A new favourite of the same thing still retires the old.
FAVOURITE_CHANGES = {
    "de": ("Mein Lieblingsautor ist Fontane.", "Inzwischen ist Thomas Mann mein Lieblingsautor."),
    "es": ("El azul es mi color preferido.", "Ahora mi color preferido es el verde."),
    "ja": ("好きな歌手は宇多田ヒカルです。", "最近一番好きな歌手はあいみょんになりました。"),
    "hi": ("मेरी पसंदीदा टीम मुंबई इंडियंस है।", "अब मेरी पसंदीदा टीम चेन्नई सुपर किंग्स है।"),
}


@pytest.mark.parametrize(("held", "change"), FAVOURITE_CHANGES.values(), ids=FAVOURITE_CHANGES)
def test_by_meaning_a_new_favourite_of_the_same_thing_retires_the_old(
    held: str, change: str
) -> None:
    assert ops_after(held, change) == ["supersede"]


#: Two trips, or a second pet said with "还" (also), in Chinese: both stay. Written for this
#: check, not in the update stories; before the travel and pets kinds had examples beyond one
#: Chinese sentence each, the rules read each of these trips as a new home and this pet as the
#: first said again (6 of 7 Chinese trip pairs and 1 of 6 pet pairs of a wider check lost).
CHINESE_TRIPS_AND_PETS = {
    "trips-new-year": ("前年春节我们去了海南旅游。", "上个月我去西安玩了三天。"),
    "trips-been": ("我前年去过日本。", "今年五一我们去了成都。"),
    "trips-childhood": ("小时候我去过北京。", "去年冬天我去哈尔滨看了冰雕。"),
    "trips-holidays": ("我们春节去了三亚。", "十一假期我去了张家界。"),
    "trips-business": ("上次出差我去了广州。", "今年我还去了趟新加坡。"),
    "pets-also": ("我有一只兔子。", "另外我还养了一只乌龟。"),
}


@pytest.mark.parametrize(
    ("held", "other"), CHINESE_TRIPS_AND_PETS.values(), ids=CHINESE_TRIPS_AND_PETS
)
def test_by_meaning_a_chinese_trip_or_pet_beside_another_keeps_the_first(
    held: str, other: str
) -> None:
    assert ops_after(held, other) == ["add"]


#: A move said in Chinese or Japanese still retires the home held before.
EAST_ASIAN_MOVES = {
    "zh": ("我住在南京。", "我上个月搬到了厦门。"),
    "ja": ("横浜に住んでいます。", "神戸に引っ越しました。"),
}


@pytest.mark.parametrize(("held", "move"), EAST_ASIAN_MOVES.values(), ids=EAST_ASIAN_MOVES)
def test_by_meaning_a_move_said_in_chinese_or_japanese_retires_the_old_home(
    held: str, move: str
) -> None:
    assert ops_after(held, move) == ["supersede"]


#: A fact of the user's past, or of a relative's, said beside a current value of the user's
#: own: written for this check, in none of the kinds' examples nor the update stories.
PAST_AND_RELATIVES = {
    "first-car": ("My first car was a Ford Fiesta.", "I drive a Mazda 3 now."),
    "first-job-de": (
        "Mein erster Job war bei einer Zeitung.",
        "Ich arbeite jetzt bei einer Versicherung.",
    ),
    "childhood-favourite-es": (
        "De niño mi deporte favorito era el baloncesto.",
        "Ahora mi deporte favorito es el pádel.",
    ),
    "grew-up-de": ("Ich bin in Rostock aufgewachsen.", "Jetzt wohne ich in Leipzig."),
    "father-job-zh": ("我爸爸是医生。", "我是律师。"),
}


@pytest.mark.parametrize(("held", "now"), PAST_AND_RELATIVES.values(), ids=PAST_AND_RELATIVES)
def test_by_meaning_a_past_or_a_relatives_fact_stays_beside_the_users_current_value(
    held: str, now: str
) -> None:
    assert ops_after(held, now) == ["add"]


def supersede_problems(held: str, said: str, meaning: Meaning | None) -> list[str]:
    """What the trust check finds wrong with a model's plan that retires the one entry
    ``held`` for the fact ``said``, in ``said``'s words."""
    c = cand(said)
    plan = Plan(ops=[Supersede(candidate_ids=[c.id], entry_id="e1", text=said)])
    return validate_plan(state([entry("e1", held)]), [c], plan, max_removals=5,
                         max_text_bytes=500, meaning=meaning)  # fmt: skip


#: Said while "I'm unemployed right now." is held: the merge models rate it below the rules'
#: bar (about 0.86 of their threshold), so the rules keep both.
NEW_JOB = "Good news: I got the job as a logistics coordinator at DHL."


def test_by_meaning_the_rules_keep_what_the_merge_models_rate_below_their_bar() -> None:
    assert ops_after("I'm unemployed right now.", NEW_JOB) == ["add"]


@pytest.mark.parametrize(("vouch", "accepted"), [(1.0, False), (0.5, True)])
def test_a_models_removal_is_vouched_for_down_to_the_trust_checks_own_bar(
    vouch: float, accepted: bool
) -> None:
    meaning = by_meaning().meaning
    assert meaning is not None
    judge = Meaning(meaning.embeddings, thresholds=replace(meaning.thresholds, vouch=vouch))
    found = supersede_problems("I'm unemployed right now.", NEW_JOB, judge)
    assert (found == []) is accepted, found


#: Studies, then a job: the job may end the studies or be done beside them.
STUDIES_AND_WORK = {
    "en": ("I'm doing a PhD in chemistry.", "Finished my PhD and started as a researcher at GSK."),
    "fr": (
        "Je suis en licence de maths.",
        "J'ai eu mon diplôme, je travaille maintenant comme prof de maths.",
    ),
    "es": (
        "Soy estudiante de medicina.",
        "Ya terminé la carrera y trabajo como médico residente.",
    ),
}


@pytest.mark.parametrize(("studies", "job"), STUDIES_AND_WORK.values(), ids=STUDIES_AND_WORK)
def test_by_meaning_a_models_plan_may_retire_the_studies_for_the_job_that_ended_them(
    studies: str, job: str
) -> None:
    assert supersede_problems(studies, job, by_meaning().meaning) == []


@pytest.mark.parametrize(
    ("studies", "job"),
    [
        ("I'm studying nursing at Cardiff.", "I work weekends at a pub."),
        ("Ich studiere Informatik.", "Nebenbei jobbe ich in einem Café."),
        ("大学で法律を勉強しています。", "週末はコンビニでアルバイトしています。"),
    ],
    ids=["en", "de", "ja"],
)
def test_by_meaning_the_rules_keep_the_studies_beside_a_job(studies: str, job: str) -> None:
    assert ops_after(studies, job) == ["add"]


#: A fact of daily life that holds a number, then the user's age: two facts, and the age
#: retires none of them. Written for this check, not in the bank; each was retired by the age
#: before the kinds had one for routines (of 128 such pairs, 22 were retired then, 7 now).
NUMBER_BESIDE_AGE = {
    "en-marathon": ("I ran the marathon in 3 hours 40.", "I'm 40 now."),
    "en-commute": ("I cycle 25 km to work.", "I'm 40 now."),
    "en-shoes": ("I wear size 42 shoes.", "Ich bin 42 Jahre alt."),
    "es-running": ("Corro 10 km cada domingo.", "Tengo 38 años."),
    "hinglish-walk": ("Main roz 5 km chalta hoon.", "Main 36 saal ka hoon."),
}


@pytest.mark.parametrize(("held", "age"), NUMBER_BESIDE_AGE.values(), ids=NUMBER_BESIDE_AGE)
def test_by_meaning_the_users_age_retires_no_fact_that_only_holds_a_number(
    held: str, age: str
) -> None:
    assert ops_after(held, age) == ["add"]


#: The same pairs for the trust check on a model's plan, but the Hinglish one: its two texts
#: lie near a kind in common and nearer each other than the check's bar
#: (``Thresholds.replaceable``), so a plan retiring the walk for the age still passes.
REFUSED_FOR_AGE = {k: v for k, v in NUMBER_BESIDE_AGE.items() if k != "hinglish-walk"}


@pytest.mark.parametrize(("held", "age"), REFUSED_FOR_AGE.values(), ids=REFUSED_FOR_AGE)
def test_by_meaning_a_plan_that_retires_a_fact_holding_a_number_for_the_age_is_refused(
    held: str, age: str
) -> None:
    assert any("retires entry e1" in p for p in judged(held, age, age))


#: The user's car, phone and computer, each said next to another: three things, none the new
#: value of another. Written for this check, not in the bank; the kinds had one "device" for
#: the three then, and 9 of 12 such pairs in eight languages and Hinglish lost a fact (2 now).
DEVICES_APART = {
    "en-car-phone": ("I drive a VW Golf.", "My phone is a Pixel 8."),
    "en-phone-car": ("My phone is an iPhone 13.", "I drive a Kia Sportage."),
    "en-car-laptop": ("My car is a Volvo XC40.", "My laptop is a Lenovo Yoga."),
    "de-car-phone": ("Ich fahre einen Audi A4.", "Mein Handy ist ein Google Pixel."),
    "es-car-laptop": ("Mi coche es un Seat Arona.", "Mi portátil es un HP Pavilion."),
    "hinglish-bike-phone": ("Meri bike Royal Enfield hai.", "Mera phone iPhone 14 hai."),
}


@pytest.mark.parametrize(("held", "other"), DEVICES_APART.values(), ids=DEVICES_APART)
def test_by_meaning_a_car_a_phone_and_a_computer_never_retire_each_other(
    held: str, other: str
) -> None:
    assert ops_after(held, other) == ["add"]


#: Each of them changed: the new one replaces the old.
DEVICE_CHANGES = {
    "en-car": ("I drive a VW Golf.", "I sold the Golf and bought a Skoda Fabia."),
    "en-phone": ("My phone is an iPhone 13.", "Switched to a Pixel 7 last month."),
    "en-laptop": ("My laptop is a Dell XPS.", "New laptop: a MacBook Air M2."),
    "zh-phone": ("我用的是华为手机。", "我换了一部苹果手机。"),
}


@pytest.mark.parametrize(("old", "new"), DEVICE_CHANGES.values(), ids=DEVICE_CHANGES)
def test_by_meaning_a_new_car_phone_or_computer_replaces_the_old_one(old: str, new: str) -> None:
    assert ops_after(old, new) == ["supersede"]
