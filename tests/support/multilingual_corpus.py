"""A knowledge-update corpus in eleven scripts: the same kinds of facts, updates, confirmations
and forgets in each.

Per script: ``facts`` are distinct statements, deliberately near each other (a changed number,
negation, named entity, gendered word or object), so each must be stored as its own entry;
``confirms`` restate one fact (index into ``facts``) with different punctuation, width, case,
spacing, invisible characters or a typo, so each must confirm exactly that fact; ``updates`` is
a key and its values oldest first (the last one must win; ``stale`` arrives late with an older
time and must be rejected); ``forgets`` name one fact (by index) in the user's words, and only
that fact may be removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

ZWSP: Final = "\u200b"


@dataclass(frozen=True)
class Script:
    name: str
    facts: tuple[str, ...]
    confirms: tuple[tuple[str, int], ...]
    key: str
    updates: tuple[str, ...]
    stale: str
    forgets: tuple[tuple[str, int], ...]


CORPUS: Final = (
    Script(
        "Latin",
        facts=(
            "My friend Anna lives in Berlin",
            "My friend Anne lives in Berlin",
            "My sister has two children at home",
            "My sister has three children at home",
            "I like sugar",
            "I like tea",
            "I eat meat on weekends",
            "I don't eat meat on weekends",
            "J'aime le thé vert le matin",
        ),
        confirms=(
            ("my friend anna lives in berlin!", 0),
            ("Ｍｙ ｓｉｓｔｅｒ ｈａｓ ｔｗｏ ｃｈｉｌｄｒｅｎ ａｔ ｈｏｍｅ", 2),
            ("I l" + ZWSP + "ike tea.", 5),
            ("I eat meat on weeknds", 6),
            ("J’aime le thé vert le matin.", 8),
        ),
        key="profile.city_latin",
        updates=("I live in Lisbon", "I live in Porto", "I live in Madrid"),
        stale="I live in Paris",
        forgets=(("friend Anna", 0), ("I like sugar", 4)),
    ),
    Script(
        "Cyrillic",
        facts=(
            "Моя дочь работает врачом",
            "Мой сын работает врачом",
            "У меня две кошки",
            "У меня три кошки",
            "Я люблю зелёный чай по утрам",
            "Я не люблю зелёный чай по утрам",
            "Мой друг Иван живёт в Москве",
            "Мой друг Олег живёт в Москве",
        ),
        confirms=(
            ("моя дочь работает врачом.", 0),
            ("Мой друг Иван живет в Москве", 6),
            ("Я  люблю  зелёный чай по утрам!", 4),
        ),
        key="profile.city_cyrillic",
        updates=("Я живу в Казани", "Я живу в Самаре", "Я живу в Омске"),
        stale="Я живу в Туле",
        forgets=(("Моя дочь", 0), ("друг Олег", 7)),
    ),
    Script(
        "Greek",
        facts=(
            "Η κόρη μου είναι γιατρός",
            "Ο γιος μου είναι γιατρός",
            "Έχω δύο γάτες στο σπίτι",
            "Έχω τρεις γάτες στο σπίτι",
            "Μου αρέσει πολύ ο ελληνικός καφές",
            "Δεν μου αρέσει πολύ ο ελληνικός καφές",
        ),
        confirms=(
            ("η κόρη μου είναι γιατρός.", 0),
            ("ΈΧΩ ΔΎΟ ΓΆΤΕΣ ΣΤΟ ΣΠΊΤΙ", 2),
            ("Μου αρέσει πολύ ο ελληνικος καφές", 4),
        ),
        key="profile.city_greek",
        updates=("Μένω στην Αθήνα", "Μένω στη Θεσσαλονίκη", "Μένω στην Πάτρα"),
        stale="Μένω στο Ηράκλειο",
        forgets=(("κόρη μου", 0), ("τρεις γάτες", 3)),
    ),
    Script(
        "Arabic",
        facts=(
            "ابنتي طبيبة في المستشفى",
            "ابني طبيب في المستشفى",
            "لدي قطتان في البيت",
            "لدي ثلاث قطط في البيت",
            "أحب القهوة العربية كثيرا",
            "لا أحب القهوة العربية كثيرا",
            "أحب الشاي الأخضر كثيرا",
        ),
        confirms=(
            ("ابنتي طبيبة في المستشفى.", 0),
            ("أحب القهـــوة العربية كثيرا", 4),
            ("لدي" + ZWSP + " قطتان في البيت", 2),
        ),
        key="profile.city_arabic",
        updates=("أسكن في القاهرة", "أسكن في عمان", "أسكن في دبي"),
        stale="أسكن في بيروت",
        forgets=(("ابنتي طبيبة", 0), ("الشاي الأخضر", 6)),
    ),
    Script(
        "Hebrew",
        facts=(
            "הבת שלי רופאה בבית חולים",
            "הבן שלי רופא בבית חולים",
            "יש לי שני חתולים בבית",
            "יש לי שלושה חתולים בבית",
            "אני אוהב קפה שחור בבוקר",
            "אני לא אוהב קפה שחור בבוקר",
        ),
        confirms=(
            ("הבת שלי רופאה בבית חולים.", 0),
            ("אני אוהב קפה שחור בבוקר!", 4),
            ("יש לי שני חתולים  בבית", 2),
        ),
        key="profile.city_hebrew",
        updates=("אני גר בחיפה", "אני גר בירושלים", "אני גר באילת"),
        stale="אני גר בצפת",
        forgets=(("הבת שלי", 0), ("שלושה חתולים", 3)),
    ),
    Script(
        "Devanagari",
        facts=(
            "मेरी बेटी डॉक्टर है",
            "मेरा बेटा डॉक्टर है",
            "मेरे पास दो बिल्लियाँ हैं",
            "मेरे पास तीन बिल्लियाँ हैं",
            "मुझे अदरक वाली चाय बहुत पसंद है",
            "मुझे अदरक वाली चाय बहुत पसंद नहीं है",
        ),
        confirms=(
            ("मेरी बेटी डॉक्टर है।", 0),
            ("मेरा" + ZWSP + " बेटा डॉक्टर है", 1),
            ("मुझे अदरक वाली चाय बहुत पसंद है!", 4),
        ),
        key="profile.city_devanagari",
        updates=("मैं दिल्ली में रहता हूँ", "मैं मुंबई में रहता हूँ", "मैं पुणे में रहता हूँ"),
        stale="मैं जयपुर में रहता हूँ",
        forgets=(("मेरी बेटी", 0), ("तीन बिल्लियाँ", 3)),
    ),
    Script(
        "Chinese",
        facts=(
            "我的女儿是医生",
            "我的儿子是医生",
            "我每天早上喝茶",
            "我每天早上喝酒",
            "我每天早上不喝茶",
            "我有两个孩子",
            "我有三个孩子",
        ),
        confirms=(
            ("我的女儿是医生。", 0),
            ("我每天早上喝茶！", 2),
            ("我有两个" + ZWSP + "孩子", 5),
        ),
        key="profile.city_chinese",
        updates=("我住在北京", "我住在上海", "我住在深圳"),
        stale="我住在成都",
        forgets=(("女儿", 0), ("三个孩子", 6)),
    ),
    Script(
        "Japanese",
        facts=(
            "私は毎朝コーヒーを飲みます",
            "私は毎朝コーヒーを飲みません",
            "私は毎朝紅茶を飲みます",
            "娘は医者です",
            "息子は医者です",
            "猫を二匹飼っています",
            "猫を三匹飼っています",
        ),
        confirms=(
            ("私は毎朝コーヒーを飲みます。", 0),
            ("私は毎朝紅茶を飲みます！", 2),
            ("猫を二匹 飼っています", 5),
        ),
        key="profile.city_japanese",
        updates=("東京に住んでいます", "大阪に住んでいます", "京都に住んでいます"),
        stale="札幌に住んでいます",
        forgets=(("娘は医者", 3), ("三匹", 6)),
    ),
    Script(
        "Korean",
        facts=(
            "나는 매일 아침 커피를 마셔요",
            "나는 매일 아침 커피를 마시지 않아요",
            "나는 매일 아침 녹차를 마셔요",
            "우리 딸은 의사예요",
            "우리 아들은 의사예요",
            "고양이 두 마리를 키워요",
            "고양이 세 마리를 키워요",
        ),
        confirms=(
            ("나는 매일 아침 커피를 마셔요.", 0),
            ("우리 딸은  의사예요!", 3),
            ("고양이 두 마리를 키워요" + ZWSP, 5),
        ),
        key="profile.city_korean",
        updates=("저는 서울에 살아요", "저는 부산에 살아요", "저는 대구에 살아요"),
        stale="저는 인천에 살아요",
        forgets=(("우리 딸은", 3), ("녹차를", 2)),
    ),
    Script(
        "Thai",
        facts=(
            "ลูกสาวของฉันเป็นหมอ",
            "ลูกชายของฉันเป็นหมอ",
            "ฉันมีแมวสองตัว",
            "ฉันมีแมวสามตัว",
            "ฉันชอบกาแฟดำตอนเช้า",
            "ฉันไม่ชอบกาแฟดำตอนเช้า",
        ),
        confirms=(
            ("ลูกสาวของฉันเป็นหมอ.", 0),
            ("ฉันชอบกาแฟดำ ตอนเช้า", 4),
            ("ฉันมีแมว" + ZWSP + "สองตัว", 2),
        ),
        key="profile.city_thai",
        updates=("ฉันอาศัยอยู่ที่เชียงใหม่", "ฉันอาศัยอยู่ที่ภูเก็ต", "ฉันอาศัยอยู่ที่ขอนแก่น"),
        stale="ฉันอาศัยอยู่ที่อุดร",
        forgets=(("ลูกสาว", 0), ("แมวสามตัว", 3)),
    ),
    Script(
        "Emoji",
        facts=("🐶❤️", "🐱❤️", "☕👍", "☕👎", "🍕🍕🍕", "I ❤️ 🐶 and 🏖️", "I ❤️ 🐱 and 🏖️"),
        confirms=(("🐶❤", 0), ("☕ 👍!", 2), ("i ❤️ 🐶 and 🏖", 5)),
        key="profile.flag_emoji",
        updates=("🇫🇷", "🇯🇵", "🇧🇷"),
        stale="🇩🇪",
        forgets=(("🍕🍕🍕", 4), ("🐱 and 🏖️", 6)),
    ),
)
