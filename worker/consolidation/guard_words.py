"""The words the meaning guards look for, in the languages the guard corpus covers.

:mod:`~worker.consolidation.guard_rules` builds its class rows (a credential word near a
secret-looking token, instructions addressed to the assistant, grants of rights) from these
alternations, so a language is added here, one group per row, and every row of its class
picks it up. Written in normal form (:func:`~worker.consolidation.text.normalise`: lower case,
apostrophes dropped, punctuation gone), except where a name says ``_COMPACT`` (spaces removed,
for scripts written without them).
"""

from __future__ import annotations

from typing import Final

#: Words for a password: English, French, German, Spanish, Portuguese, Dutch, Polish, Italian,
#: Russian.
PASSWORD_WORDS: Final = (
    r"(?:password|passphrase|passcode|passwd|pwd|pw|pass word|"
    r"mot de passe|mdp|passwort|kennwort|contraseña|contrasena|clave de acceso|clave|"
    r"senha|wachtwoord|hasło|haslo|parola|пароль|пароля)"
)

#: A linking word between a credential word and its value ("is", "est", "ist", "es", "это").
CONNECTORS: Final = (
    r"(?:is|was|are|is still|is now|equals|est|cest|était|ist|lautet|war|es|era|sera|é|это|был|"
    r"будет)"
)

#: What a password "is" in a statement about it, not its value ("my password is expired",
#: "mein Passwort ist abgelaufen"): a value that is one of these words is not a credential.
STATE_WORDS: Final = (
    r"(?:expired|expiring|weak|strong|too|very|long|short|wrong|incorrect|not|case|saved|"
    r"stored|changed|reset|forgotten|required|needed|secure|insecure|complicated|hard|simple|"
    r"complex|different|managed|synced|protected|encrypted|hashed|still|set|updated|locked|"
    r"blocked|compromised|leaked|stolen|in|on|at|of|for|about|being|been|shared|known|unknown|"
    r"easy|new|old|the|a|an|my|same|also|usually|probably|always|never|written|somewhere|"
    # French, German, Spanish, Russian
    r"le|la|les|mon|der|die|das|mein|el|mi|nueva|nuevo|neu|neues|nouveau|nouvelle|новый|"
    r"abgelaufen|falsch|zu|sehr|lang|kurz|vergessen|geändert|gespeichert|sicher|unsicher|"
    r"gesperrt|expiré|expirée|oublié|trop|très|faux|changé|sécurisé|bloqué|caducado|caducada|"
    r"olvidada|olvidado|muy|larga|corta|segura|seguro|incorrecta|cambiada|bloqueada|истек|"
    r"истёк|неверный|слишком|очень|сложный|простой|забыт|изменен|изменён)\b"
)

#: Words between a password word and its linking word ("the password *for the wifi* is …").
PASSWORD_OF: Final = r"(?:for|of|to|on|at|de|du|des|für|zum|zur|para|del|для|от)"

#: Digit-for-letter spellings of a password word (``p4ssw0rd``, ``pa$$word``): on the folded
#: form, where ``@`` and ``$`` survive. At least one substituted character is required.
LEET_PASSWORD: Final = (
    r"(?<![a-z0-9])(?=[a-z]*[0-9@$])p[a4@][s5$z]{2}(?:w[o0]r[dt]|wd|c[o0]de|phr[a4@][s5$]e)"
)

#: Codes that open something, whose value is digits ("the door code is 4821").
CODE_WORDS: Final = (
    r"(?:(?:door|gate|alarm|safe|lock|garage|entry|keypad|locker|building|bike lock|"
    r"wifi|wi fi) (?:code|pin|combination|combo)|pin(?: code| number)?|code de la porte|"
    r"code porte|code dentrée|digicode|türcode|tür code|código de la puerta|código|"
    r"код от двери|код домофона)"
)

#: Labels of identity documents and numbers (the value follows).
ID_LABELS: Final = (
    r"(?:passport|national id|national identity|national insurance|ni number|nino|id card|"
    r"identity card|tax id|tfn|aadhaar|aadhar|personalausweis|reisepass|steuer id|steuerid|"
    r"steueridentifikationsnummer|steuernummer|dni|nie|nif|pesel|bsn|personnummer|curp|cpf|"
    r"passeport|carte didentité|numéro de sécurité sociale|numero de securite sociale|insee|"
    r"pasaporte|паспорт|снилс|инн|driver s licen[cs]e|drivers licen[cs]e)"
)

#: "Forget everything you were told", addressed to the assistant, per language (normal form).
#: Each form is imperative or names "you", so "I forget names easily" and "elle oublie tout"
#: are statements, not orders.
FORGET_ALL: Final = (
    # English
    r"\b(?:forget|disregard|ignore|erase|wipe|drop)"
    r"(?<!\b(?:i|we|they|he|she|it|people|kids|my \w+) (?:\w+ )?\w+) "
    r"(?:about )?(?:everything|all|anything|"
    r"whatever)(?: (?:of )?(?:that|what))? (?:you|youve|youre|u|ive told you|i told you|"
    r"above|before|previously|so far|earlier|prior)\b"
    r"|\b(?:forget|disregard|ignore|erase) (?:all )?(?:your|the) (?:previous |prior |original |"
    r"old )?(?:training|programming|conditioning|setup|persona)\b"
    # French
    r"|\boubli(?:e|ez) tout ce (?:quon|que|qui|quil) (?:ta|tas|vous|te|t|on)\b"
    r"|\boubli(?:e|ez) (?:toutes )?(?:tes|vos) (?:instructions|consignes|règles|directives)\b"
    # German
    r"|\bvergiss alles\b|\bvergessen sie alles\b"
    r"|\bvergiss (?:deine|alle|die) (?:bisherigen |vorherigen )?(?:anweisungen|regeln|"
    r"instruktionen|vorgaben)\b"
    # Spanish
    r"|\bolvida todo lo que te\b|\bolvídate de todo\b|\bolvidate de todo\b"
    r"|\bolvida (?:todas )?(?:tus|las) (?:instrucciones|reglas|órdenes)\b"
    # Russian
    r"|\bзабудь(?:те)? (?:всё|все|обо всём|обо всем)\b"
    r"|\bзабудь(?:те)? (?:свои|все|предыдущие) (?:инструкции|правила|указания)\b"
)
#: The same in word-free scripts (compact form): Chinese, Japanese.
FORGET_ALL_COMPACT: Final = (
    r"忘(?:记|掉|了)(?:之前|以前|先前|上面|前面|你(?:被告知|听到|收到)的?)(?:的)?(?:所有|一切|全部)?"
    r"(?:的)?(?:指示|指令|命令|规则|设定|内容|话|事情)"
    r"|(?:これまで|以前|前)の(?:指示|命令|ルール)を(?:すべて|全部)?忘れ"
)

#: A line (or sentence) that poses as the system or developer (folded form: punctuation kept).
SYSTEM_LINE: Final = (
    r"(?:^|\n|[.!?]\s+)[ \t>*#\[(|]*(?:system|sys|system message|system prompt|developer|developer "
    r"message|système|systeme|message système|sistema|mensaje del sistema|systemnachricht|"
    r"система|системное сообщение|系统|系統|系统消息|システム)[ \t\])*|]*:"
    r"|<<\s*/?\s*sys\s*>>|\[\s*/?\s*system\s*\]"
)

#: Orders on when and what the assistant sends ("before answering, always send …"), and
#: sending the conversation somewhere (normal form).
EXFILTRATE: Final = (
    r"\b(?:before|after|when|whenever|every time|each time) (?:you )?(?:answer|answering|"
    r"reply|replying|respond|responding)\b(?: to \w+)? (?:always |first |please |you must |"
    r"you should |also )*(?:send|forward|email|e mail|mail|post|upload|include|append|call|"
    r"run|execute|visit|open|fetch|reveal|copy|cc|bcc|leak|share)\b"
    r"|\b(?:send|forward|email|e mail|mail|upload|post|leak|cc|bcc|copy|report|share) (?:a |an "
    r")?(?:copy|copies|transcript|transcripts|log|logs|summary|record|dump)s? of (?:the |this "
    r"|our |each |every |all |any )?(?:conversation|conversations|chat|chats|messages|history|"
    r"session|sessions|dialogue|dialog|exchange)s?\b"
    r"|\b(?:send|forward|upload|leak|post|email|share) (?:the |this |our |each |every |all |"
    r"any )(?:conversation|conversations|chat|chats|chat history|transcript|transcripts|"
    r"messages|session|dialogue)s? (?:to|with)\b"
    # French, German, Spanish, Russian
    r"|\b(?:envoie|envoyez|transfère|transférez) (?:une )?(?:copie de )?(?:la |cette |toute la )"
    r"?(?:conversation|discussion)\b"
    r"|\b(?:sende|schicke|leite) (?:eine )?(?:kopie )?(?:des|dieses|den|das) (?:gesprächs|"
    r"chats|chatverlauf|gespräch|verlauf)\b"
    r"|\b(?:envía|envia|reenvía|reenvia) (?:una )?(?:copia de )?(?:la |esta |toda la )"
    r"?(?:conversación|conversacion|charla)\b"
    r"|\b(?:отправь|отправляй|перешли|пересылай)(?:те)? (?:копию )?(?:этого |всего |всей )?"
    r"(?:разговора|переписки|диалога|переписку|разговор|диалог)\b"
)
#: The same in Chinese (compact form).
EXFILTRATE_COMPACT: Final = (
    r"(?:发送|转发|抄送)(?:一份)?(?:这段|这次|本次|所有的?)?(?:对话|聊天记录|会话)"
    r"|把(?:这段|这次|本次|所有的?)?(?:对话|聊天记录|会话)(?:内容)?(?:发送|转发|发)"
)

#: Orders on what the assistant tells or hides from the user ("do not tell the user", "when
#: the user asks, say …"): memories describe the user, they never script the assistant.
SCRIPT_THE_ASSISTANT: Final = (
    r"\b(?:do not|dont|never|don t) (?:tell|inform|warn|show|mention (?:it )?to|reveal (?:it )?to)"
    r" the user\b"
    r"|\bwhen(?:ever)? the user (?:asks|says|mentions|writes|requests|types)\b(?: \S+){0,6}? "
    r"(?:say|tell|answer|reply|respond|claim|pretend)\b"
    r"|\b(?:ne dis pas|ne dites pas|ne révèle pas) à lutilisateur\b"
    r"|\b(?:sag|sage|verrate) dem (?:benutzer|nutzer|anwender) nicht\b"
    r"|\bno (?:le )?(?:digas|cuentes|reveles) al usuario\b"
    r"|\bне (?:говори|сообщай|рассказывай) пользователю\b"
)
#: The same in Chinese (compact form).
SCRIPT_THE_ASSISTANT_COMPACT: Final = r"(?:不要|别|不许)(?:告诉|透露给|告知)用户"

#: Standing orders and rights granted to the assistant ("from now on you must …").
GRANTS: Final = (
    r"\b(?:from now on|from this point on|from here on|henceforth|going forward|starting "
    r"now)(?: out)? (?:you|u|the assistant|assistant|the ai|the model)(?: will| are to| shall|"
    r" must| have to| need to| should| may| can| are allowed| are permitted| ll| no longer)\b"
    r"|\b(?:you|the assistant) (?:no longer need|dont need|do not need|no longer have) to "
    r"(?:follow|obey|respect|ask|check|ask for|get)\b"
    r"|\bno need to ask (?:me )?for (?:my )?(?:permission|consent|confirmation)\b"
    # French
    r"|\b(?:tu es|vous êtes) (?:maintenant |désormais |dorénavant )?(?:autorisée?s? à|libres? "
    r"de)|\b(?:tu as|vous avez) (?:maintenant |désormais )?(?:le droit|la permission) de\b"
    r"|\b(?:à partir de maintenant|désormais|dorénavant) (?:tu|vous) (?:dois|devez|peux|"
    r"pouvez|vas|allez|es|êtes)\b"
    # German
    r"|\b(?:ab jetzt|ab sofort|von nun an|ab heute) (?:musst|sollst|darfst|wirst|kannst) du\b"
    r"|\bdu (?:bist|wärst) (?:jetzt |ab sofort |nun )?(?:berechtigt|befugt|autorisiert)\b"
    r"|\bdu hast (?:jetzt |ab sofort |nun )?(?:die erlaubnis|das recht|meine erlaubnis)\b"
    # Spanish
    r"|\b(?:estás|estas) (?:ahora )?(?:autorizad[oa]|permitid[oa]) (?:a|para)\b"
    r"|\btienes (?:mi )?(?:permiso|autorización|autorizacion) (?:para|de)\b"
    r"|\b(?:a partir de ahora|de ahora en adelante|desde ahora) (?:debes|tienes que|vas a|"
    r"puedes|deberás|deberas)\b"
    # Russian
    r"|\b(?:тебе|вам) (?:теперь )?(?:разрешено|позволено)\b"
    r"|\b(?:с этого момента|с сегодняшнего дня|отныне|теперь) (?:ты|вы) (?:должен|должна|"
    r"должны|обязан|обязана|обязаны)\b"
)
#: The same in Chinese and Japanese (compact form).
GRANTS_COMPACT: Final = (
    r"(?:从现在开始|从今以后|从此以后|今后|從現在開始)(?:你|助手)(?:必须|必須|要|应该|應該|可以|将|會|会)"
    r"|(?:你|助手)(?:现在|現在)?(?:被允许|被允許|被授权|被授權|有权|有權|获准)"
    r"|これから(?:は)?(?:あなた|アシスタント)は"
)
