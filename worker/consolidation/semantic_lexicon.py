"""Word lists for :mod:`~worker.consolidation.semantic`, one row per language, in normal form.

Normal form: NFKC, case-folded, apostrophes read as word breaks (``j'habite`` → ``j habite``).
A word in :data:`STOPWORDS` carries no content of its own, so two statements differing only in
these say the same thing. On purpose *not* here: negations (they flip a statement), past forms
(``was``, ``had``, ``lived``, ``worked``: a past fact is another fact), ``from`` (``moved from``
is the opposite of ``moved to``), quantities, and ``will`` (a plan is not a fact).
"""

from __future__ import annotations

from typing import Final

STOPWORDS: Final = frozenset(
    {
        # English
        *("i", "me", "my", "mine", "myself", "a", "an", "the", "is", "am", "are", "be", "been"),
        *("to", "in", "at", "of", "on", "for", "and", "or", "with", "by", "it", "its", "this"),
        *("that", "s", "m", "re", "ve", "ll", "d", "very", "really", "just", "now", "currently"),
        *("actually", "also", "too", "still", "so", "quite", "here", "there", "do", "as"),
        # French
        *("je", "j", "moi", "mon", "ma", "mes", "le", "la", "les", "l", "un", "une", "des", "de"),
        *("du", "est", "suis", "es", "à", "au", "aux", "en", "et", "ou", "que", "qu", "qui", "c"),
        *("ce", "ça", "maintenant", "aussi", "très", "y", "vraiment"),
        # German
        *("ich", "mich", "mir", "mein", "meine", "meinen", "meinem", "meiner", "meines", "der"),
        *("die", "das", "den", "dem", "des", "ein", "eine", "einen", "einem", "einer", "ist"),
        *("bin", "bist", "sind", "im", "am", "an", "bei", "und", "oder", "zu", "zum", "zur"),
        *("jetzt", "auch", "sehr", "gerade", "nun", "es", "wirklich"),
        # Spanish
        *("yo", "mi", "mis", "el", "los", "las", "lo", "unos", "unas", "soy", "eres", "estoy"),
        *("está", "al", "del", "y", "o", "ahora", "también", "muy", "ya", "realmente"),
        # Russian
        *("я", "меня", "мне", "мой", "моя", "моё", "мое", "мои", "в", "во", "на", "и", "а"),
        *("это", "сейчас", "теперь", "тоже", "также", "очень", "у", "уже", "же"),
    }
)

#: Characters of word-free scripts that are particles or pronouns, not content: Chinese 我
#: (I), 的, 了, 是, 在, 很, 也, 都, sentence particles; Japanese 私 (I) and case particles.
WORD_FREE_STOP: Final = frozenset("我的了是在很也都吗呢啊吧私はがをにでのもね")

#: Words of one meaning folded to one term (the key is in normal form, the value any label).
SYNONYMS: Final = {
    # residence: present forms only ("lived" is a past fact, "moved" a change, see frames)
    **dict.fromkeys(("live", "lives", "living", "reside", "resides", "residing", "home"), "live"),
    **dict.fromkeys(("habite", "habites", "habitent", "vis", "vit", "réside"), "live"),
    **dict.fromkeys(("wohne", "wohnt", "lebe", "lebt", "vivo", "vive", "vives"), "live"),
    **dict.fromkeys(("живу", "живёт", "живет", "живёшь"), "live"),
    # spelling and register variants
    **dict.fromkeys(("color", "colour", "colours", "colors", "couleur"), "colour"),
    **dict.fromkeys(("favorite", "favourite", "fave", "préféré", "préférée", "favori"), "fav"),
    **dict.fromkeys(("favorito", "favorita", "любимый", "любимая", "любимое"), "fav"),
    **dict.fromkeys(("kid", "kids", "child", "children", "enfants", "kinder", "hijos"), "child"),
    **dict.fromkeys(("mom", "mum", "mother", "mama", "mommy", "mummy"), "mother"),
    **dict.fromkeys(("dad", "father", "papa", "daddy"), "father"),
}
