"""The one normal form every text comparison uses (:mod:`worker.consolidation.text`)."""

from __future__ import annotations

import random
import re

from worker.consolidation import text
from worker.consolidation.rules import extract_statements


def test_zero_width_and_other_invisible_characters_are_dropped() -> None:
    assert text.normalise("ig\u200bno\u200dre\u2060 it\u00ad") == "ignore it"


def test_fullwidth_letters_are_plain_letters() -> None:
    assert text.normalise("ｐａｓｓｗｏｒｄ") == "password"


def test_look_alikes_inside_a_latin_word_are_folded() -> None:
    assert text.normalise("pаsswоrd") == "password"  # Cyrillic а and о


def test_a_word_wholly_in_another_script_keeps_its_letters() -> None:
    assert text.normalise("Мама") == "мама"


def test_combining_marks_are_kept() -> None:
    assert text.normalise("मेरी बेटी") != text.normalise("मेरा बेटा")
    assert text.normalise("São") == "são"


def test_digits_of_every_script_are_ascii() -> None:
    assert text.normalise("٣ and ३ and ๓") == "3 and 3 and 3"


def test_word_free_scripts_are_one_token_per_character() -> None:
    assert text.tokens("我喜欢茶") == ["我", "喜", "欢", "茶"]
    assert text.tokens("แมวสามตัว") == ["แ", "ม", "ว", "ส", "า", "ม", "ตั", "ว"]


def test_emoji_are_tokens_not_spaces() -> None:
    assert text.tokens("I ❤️ 🐶!") == ["i", "❤", "🐶"]


def test_an_empty_normal_form_matches_nothing_not_even_itself() -> None:
    assert not text.is_near_duplicate("!!!", "!!!")
    assert not text.is_near_duplicate("\u200b", "...")


def test_number_words_keep_statements_apart() -> None:
    assert not text.is_near_duplicate(
        "My sister has two children at home", "My sister has three children at home"
    )


def test_a_word_that_negates_in_one_language_only_is_no_negation_in_others() -> None:
    """Italian "mai" (never) is "May" in German and "I" in Hinglish; "non … mai" still
    negates by its "non"."""
    assert not text.Normalised.of("Ich wohne seit Mai in Würzburg.").negated
    assert not text.Normalised.of("Mai pehle Kolkata mein thi.").negated
    assert text.Normalised.of("Non ho mai fumato.").negated


def test_a_different_named_entity_keeps_statements_apart() -> None:
    assert not text.is_near_duplicate(
        "My friend Anna lives in Berlin", "My friend Anne lives in Berlin"
    )


def test_a_typo_in_a_long_word_of_another_script_still_confirms() -> None:
    assert text.is_near_duplicate("Мой друг Иван живёт в Москве", "Мой друг Иван живет в Москве")


def test_a_changed_short_word_of_another_script_is_a_different_statement() -> None:
    assert not text.is_near_duplicate("ابنتي طبيبة في المستشفى", "ابني طبيب في المستشفى")


def test_a_changed_character_in_a_word_free_script_is_a_different_statement() -> None:
    assert not text.is_near_duplicate("我每天早上都喝绿茶", "我每天早上都喝红茶")


def test_a_long_rewrite_is_not_a_typo_however_similar_the_share() -> None:
    base = "word " * 400
    rewritten = base[:1000] + "x" * 70 + base[1070:]
    assert text.similarity(base, rewritten) > 0.9
    assert not text.is_near_duplicate(base, rewritten)


def test_key_routing_sees_the_normal_form_too() -> None:
    (statement,) = extract_statements("user: ｍｙ ｃｉｔｙ ｉｓ Lisbon")
    assert statement.key == "profile.city"


def test_an_ascii_normal_form_is_its_lower_cased_letter_and_digit_runs() -> None:
    # The ASCII path translates bytes instead of searching; it must read every ASCII
    # character as the token pattern does (apostrophes dropped, the rest separate tokens).
    def expected(raw: str) -> str:
        return " ".join(re.findall(r"[a-z0-9]+", raw.lower().replace("'", "").replace("`", "")))

    rng = random.Random(5)
    every = "".join(map(chr, range(128)))
    texts = [f"Ab{c}Cd 9{c}0 {c}" for c in every]
    texts += ["".join(rng.choice(every) for _ in range(rng.randint(0, 40))) for _ in range(2000)]
    assert [text.normalise(t) for t in texts] == [expected(t) for t in texts]


def test_digit_runs_inside_words_count_as_numbers_in_order() -> None:
    assert text.Normalised.of("My 2nd car cost 3k, not 40").numbers == ("2", "3", "40")
    assert text.Normalised.of("I have two cats and 3 dogs").numbers == ("3", "two")
