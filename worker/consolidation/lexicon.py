"""Word lists of the languages the tests cover, for :mod:`~worker.consolidation.text`.

Written as people type them (lower case); the text module folds them into normal form. Each
list has one row per language, so a language is added by adding a row.
"""

from __future__ import annotations

from typing import Final

#: Words that flip a statement's meaning; two texts differing in these are never duplicates.
#: One row per language, in normal form (apostrophes dropped, case-folded).
NEGATIONS: Final = frozenset(
    {
        # English
        *("not", "no", "never", "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "cant"),
        *("wont", "nobody", "nothing", "neither", "nor", "without", "hate", "dislike"),
        # French, Spanish, Portuguese, Italian, German
        *("ne", "pas", "jamais", "nunca", "nao", "não", "non", "mai", "nicht", "kein", "keine"),
        # Russian, Ukrainian (Cyrillic)
        *("не", "нет", "ни", "никогда", "ніколи", "ні", "без"),
        # Greek
        *("δεν", "δε", "μην", "όχι", "ποτέ", "χωρίς"),
        # Arabic, Hebrew
        *("لا", "لم", "لن", "ليس", "ليست", "ما", "غير", "לא", "אין", "אינו", "אינה", "מעולם"),
        # Hindi (Devanagari)
        *("नहीं", "नही", "न", "मत", "बिना"),
        # Korean (whole words; suffix forms are in NEGATION_PREFIXES)
        *("안", "못", "아니", "아니요", "아뇨"),
    }
)

#: Word beginnings that negate in Korean, where negation is an auxiliary word ("먹지 않아요").
NEGATION_PREFIXES: Final = ("않", "없", "못하")

#: Negation markers of word-free scripts, searched in the text with spaces removed.
NEGATION_MARKERS: Final = (
    "不",
    "没",
    "沒",
    "别",
    "別",
    "无",
    "無",
    "非",
    "未",
    "ない",
    "ません",
    "ไม่",
)

#: CJK numerals: two texts differing in one are about different quantities, like digits.
CJK_NUMERALS: Final = frozenset("〇零一二三四五六七八九十百千万萬億亿两兩")

#: Number words of spaced scripts, in normal form: they count as numbers, like digits, so
#: "two cats" and "three cats" stay apart. One row per language.
NUMBER_WORDS: Final = frozenset(
    {
        # English
        *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"),
        *("ten", "eleven", "twelve", "twenty", "thirty", "hundred", "thousand", "million"),
        # French, Spanish, German
        *("un", "deux", "trois", "quatre", "cinq", "dos", "tres", "cuatro", "cinco"),
        *("eins", "zwei", "drei", "vier", "fünf"),
        # Russian
        *("один", "одна", "два", "две", "три", "четыре", "пять", "шесть", "десять"),
        # Greek
        *("ένα", "ένας", "μία", "μια", "δύο", "τρία", "τρεις", "τέσσερα", "τέσσερις", "πέντε"),
        # Arabic
        *("واحد", "واحدة", "اثنان", "اثنين", "ثلاث", "ثلاثة", "أربع", "أربعة", "خمس"),
        # Hebrew
        *("אחד", "אחת", "שניים", "שתיים", "שני", "שתי", "שלוש", "שלושה", "ארבע", "חמש"),
        # Hindi
        *("एक", "दो", "तीन", "चार", "पांच", "पाँच", "छह", "दस"),
        # Korean: native and Sino-Korean counting words
        *("하나", "한", "둘", "두", "셋", "세", "넷", "네", "다섯", "여섯", "일곱", "여덟"),
        *("아홉", "열", "일", "이", "삼", "사", "오", "육", "칠", "팔", "구", "십", "백", "천"),
    }
)
