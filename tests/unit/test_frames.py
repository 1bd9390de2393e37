"""Attribute frames: each pattern reads its statements, and what is no frame stays none."""

from __future__ import annotations

import pytest

from worker.consolidation.text import frame_of

#: One statement per pattern: (text, subject, attribute, value terms).
FRAMES = [
    ("I live in Paris", "self", "residence", ("pari",)),
    ("I moved to Berlin last month", "self", "residence", ("berlin",)),
    ("My wife's home is in Riga", "wife", "residence", ("riga",)),
    ("J'habite à Lille", "self", "residence", ("lille",)),
    ("Je me suis installé à Lyon", "self", "residence", ("lyon",)),
    ("Ich wohne in Bonn", "self", "residence", ("bonn",)),
    ("Ich bin nach Hamburg gezogen", "self", "residence", ("hamburg",)),
    ("Vivo en Madrid", "self", "residence", ("madrid",)),
    ("Mi madre vive en Sevilla", "madre", "residence", ("sevilla",)),
    ("Я живу в Москве", "self", "residence", ("москв",)),
    ("Моя жена живёт в Казани", "жена", "residence", ("казан",)),
    ("我住在成都", "self", "residence", ("成", "都")),
    ("私は東京に住んでいます", "self", "residence", ("東", "京")),
    ("I changed jobs and now work at Globex", "self", "employer", ("globex",)),
    ("I am employed by Initech", "self", "employer", ("initech",)),
    ("My employer is Hooli", "self", "employer", ("hooli",)),
    ("Je travaille chez Renault", "self", "employer", ("renault",)),
    ("Ich arbeite bei Siemens", "self", "employer", ("siemen",)),
    ("Trabajo para Telefónica", "self", "employer", ("telefónica",)),
    ("Я работаю в компании Яндекс", "self", "employer", ("яндекс",)),
    ("我在阿里巴巴集团工作", "self", "employer", ("阿", "里", "巴", "巴", "集", "团")),
    ("我就职于华为", "self", "employer", ("华", "为")),
    ("I work as a nurse", "self", "occupation", ("nurse",)),
    ("My job is teacher", "self", "occupation", ("teacher",)),
    ("Je travaille comme boulanger", "self", "occupation", ("boulanger",)),
    ("Ich arbeite als Pilot", "self", "occupation", ("pilot",)),
    ("Trabajo como enfermera", "self", "occupation", ("enfermera",)),
    ("My name is Bob", "self", "name", ("bob",)),
    ("Call me Rob", "self", "preferred name", ("rob",)),
    ("Je m'appelle Luc", "self", "name", ("luc",)),
    ("Ich heiße Jörg", "self", "name", ("jörg",)),
    ("Меня зовут Иван", "self", "name", ("иван",)),
    ("我叫小明", "self", "name", ("小", "明")),
    ("I am 30 years old", "self", "age", ("30",)),
    ("J'ai 41 ans", "self", "age", ("41",)),
    ("我今年25岁", "self", "age", ("25",)),
    ("My favourite colour is green", "self", "favourite colour", ("green",)),
    ("Dune is my favorite book", "self", "favourite book", ("dune",)),
    ("Ma couleur préférée est le bleu", "self", "favourite colour", ("bleu",)),
    ("Meine Lieblingsfarbe ist Blau", "self", "favourite farbe", ("blau",)),
    ("Mi color favorito es el azul", "self", "favourite colour", ("azul",)),
    ("Мой любимый цвет синий", "self", "favourite цвет", ("син",)),
    ("我最喜欢的颜色是蓝色", "self", "favourite 颜色", ("蓝", "色")),
    ("I am married to Sam", "self", "spouse", ("sam",)),
]

NO_FRAME = [
    "I have a dog named Rex",
    "I worked at Globex in 2010",
    "I used to live in Rome",
    "I also work at Globex",
    "I don't live in Paris",
    "I live in a flat",
    "My sister lives in Berlin",
    "My friend works at Acme",
    "My sister is 30 years old",
    "我以前在腾讯工作",
    "我也住在北京",
    "I live in " + "Paris " * 60,
    "Trabajo en Madrid",
    "Я работаю в Москве",
    "我在北京工作",
    "I work as a volunteer on weekends",
    "I'm living in Rome this summer",
    "I work as a nurse and a part-time lifeguard at the lake in summer",
]


@pytest.mark.parametrize(
    ("text", "subject", "attribute", "value"), FRAMES, ids=[f[0] for f in FRAMES]
)
def test_each_pattern_reads_its_statement(
    text: str, subject: str, attribute: str, value: tuple[str, ...]
) -> None:
    frame = frame_of(text)
    assert frame is not None
    assert (frame.subject, frame.attribute, frame.value) == (subject, attribute, value)


@pytest.mark.parametrize("text", NO_FRAME)
def test_statements_that_set_no_single_value_have_no_frame(text: str) -> None:
    assert frame_of(text) is None
