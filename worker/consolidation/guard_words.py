"""The words the guards look for, in the languages the guard corpus covers.

:mod:`~worker.consolidation.guards` builds its class rows (a credential word near a
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

#: A linking word between a credential word and its value ("is", "est", "ist", "es", "это"),
#: and the spoken ones that answer a question ("the password? it's …", "c'est", "het is").
CONNECTORS: Final = (
    r"(?:is|was|are|is still|is now|equals|its|it is|thats|that is|est|cest|était|ist|lautet|"
    r"war|es|era|sera|é|è|это|был|будет|het is|jest)"
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
    # Portuguese
    r"|\b(?:envie|envia|mande|encaminhe|encaminha) (?:uma )?(?:cópia d[ae] )?(?:a |esta |essa |"
    r"toda a )?(?:conversa|conversação|conversacao)\b"
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

#: Nouns that introduce a secret other than a password, in English, French, German, Spanish,
#: Portuguese, Italian, Dutch, Polish and Russian (shape form: accents and case as written):
#: codes, PINs, logins, keys, seeds, tokens, one-time-password secrets.
SECRET_NOUNS: Final = (
    r"(?:code|pin|pin code|passkey|login|log in|sign in|secret|secret key|private key|key|"
    r"seed|token|combination|combo|credentials|otp|totp|2fa|mfa|one[ -]time code|"
    r"verification code|security code|access code|unlock code|backup codes?|"
    r"recovery (?:code|key)s?|code d'accès|code d’accès|code secret|clé|cle|identifiants?|"
    r"zugangscode|geheimzahl|schlüssel|zugangsdaten|código|codigo|clave|llave|chave|codice|"
    r"chiave|toegangscode|sleutel|kod|код|пин-код|пин|ключ|密钥|秘钥|验证码|暗証番号)"
)

#: Words between a secret's noun and its linking word ("the code *to my online banking* is"),
#: in the same languages: a preposition, then up to four words.
SECRET_OF: Final = (
    r"(?:for|of|to|on|at|de|du|des|d'|d’|für|zum|zur|von|para|del|do|da|dos|das|di|della|"
    r"dello|per|van|voor|do|od|для|от|к)"
)

#: A value that looks like a chosen or generated secret, as written (shape form): a letter and
#: a digit, and a symbol between them, or both cases, or letters and digits alternating
#: ("Hx9!kq72", "4kTz-9QpL", "HX9KQ72"); 6 to 64 characters. A promo code ("SAVE20"), a
#: time ("10:30pm") or a date is none of these.
SECRET_VALUE: Final = (
    r"(?=[^\s,;]*\d)(?=[^\s,;]*[^\W\d_])"
    r"(?:(?=[^\s,;]*[!@#$%^&*?~+=][^\s,;]*[^\W_])|(?-i:(?=[^\s,;]*[a-z])(?=[^\s,;]*[A-Z]))"
    r"|(?=[^\s,;]*\d[^\W\d_]+\d))[^\s,;]{6,64}"
)

#: A one-time-password seed: base32 (``A``–``Z``, ``2``–``7``), 16 or more characters, as an
#: authenticator app shows it (groups of four, upper or lower case), with a digit among them.
OTP_SEED: Final = r"(?=[A-Za-z2-7 ]{0,80}?[2-7])(?:[A-Za-z2-7]{4} ?){3,}[A-Za-z2-7]{4,}\b"

#: A wallet's recovery phrase named as such (normal form): its noun in the covered languages,
#: then twelve words or more.
RECOVERY_PHRASE: Final = (
    r"\b(?:seed|recovery|mnemonic|wallet|backup|secret recovery) (?:phrase|words|sentence)s? "
    r"(?:is |are |was |its )?(?:[a-z]{3,8} ){11,}[a-z]{3,8}\b"
    r"|\b(?:phrase de récupération|phrase secrète|frase semilla|frase de recuperación|"
    r"frase de recuperação|wiederherstellungsphrase|seed phrase|сид фраза|фраза восстановления)"
    r" (?:\w+ ){0,2}(?:[a-z]{3,8} ){11,}[a-z]{3,8}\b"
)

#: Text hidden from the reader by markup (folded form): an HTML comment with words in it, an
#: element hidden by an attribute or a style, a Markdown comment. A memory is read as text;
#: nothing in it has a reason to be invisible, and what is hidden there is aimed at a model.
HIDDEN_MARKUP: Final = (
    r"<!--\s*[^\s\->]"
    r"|<[a-z][a-z0-9]*\b[^>]*(?:\bhidden\b|display\s*:\s*none|visibility\s*:\s*hidden|"
    r"font-size\s*:\s*0(?![.\d])|opacity\s*:\s*0(?![.\d])|aria-hidden\s*=\s*.?true)"
    r"|(?:^|\n)\s*\[(?://|comment|_|#)\]:\s*(?:#|<>)\s*[(\"']"
)

#: A link image whose address carries data out (shape form): a Markdown or HTML image with a
#: query string or a template placeholder in its URL. Rendering it fetches the URL — with
#: whatever the model put in it — from the attacker's server.
DATA_IMAGE: Final = (
    r"!\[[^\]\n]{0,200}\]\(\s*<?(?:[a-z][a-z0-9+.\-]*:)?//[^)\s]*(?:\?[^)\s]*=|\{[^)\s}]*\})"
    r"|<img\b[^>]*\bsrc\s*=\s*[\"']?(?:[a-z][a-z0-9+.\-]*:)?//[^\"'\s>]*"
    r"(?:\?[^\"'\s>]*=|\{[^\"'\s>}]*\})"
)

#: "Ignore the previous instructions" in Portuguese, Italian, Dutch and Polish, and the
#: languages above again in their other word orders (normal form): the verb, an optional "all"
#: and article, then the orders and "previous" in either order.
IGNORE_VERBS: Final = (
    r"(?:ignore|ignora|ignorar|ignorem|desconsidere|desconsidera|esqueça|esqueca|esquece|"
    r"ignoriere|ignorieren sie|ignorez|ignorer|negeer|vergeet|zignoruj|ignoruj|pomiń|pomin|"
    r"игнорируй|проигнорируй|игнорируйте)"
)
ORDER_NOUNS: Final = (
    r"(?:instructions|instruções|instrucoes|instrucciones|istruzioni|anweisungen|instructies|"
    r"instrukcje|polecenia|инструкции|указания|regras|reglas|regole|regeln|regels|zasady|"
    r"правила|orientações|orientacoes|comandos|órdenes|ordini|consignes|directives|"
    r"diretrizes|richtlijnen)"
)
PREVIOUS: Final = (
    r"(?:anteriores|anterior|previas|prévias|previas|precedentes|precedenti|vorherigen|"
    r"bisherigen|vorigen|vorige|eerdere|poprzednie|wcześniejsze|предыдущие|прежние|"
    r"précédentes|antérieures|acima|sopra|above|previous|prior|earlier)"
)
ALL_WORDS: Final = (
    r"(?:all|todas|todos|tutte|tutti|alle|wszystkie|все|toutes|tous|cualquier|quaisquer)"
)
ARTICLES: Final = (
    r"(?:the|your|as|os|las|los|le|les|la|die|de|je|tes|vos|tus|suas|seus|tue|deine|ihre|"
    r"twoje|свои|ваши|mes|minhas|le tue)"
)
IGNORE_PREVIOUS: Final = (
    rf"\b{IGNORE_VERBS} (?:{ALL_WORDS} )?(?:{ARTICLES} )?(?:{PREVIOUS} {ORDER_NOUNS}|"
    rf"{ORDER_NOUNS} (?:{PREVIOUS}|que te (?:dei|di))\b)"
)

#: Who a memory is about, named as a third party: the user, the customer, the client … (normal
#: form; the covered languages). A memory describes the user; it never says what they may do.
THE_USER: Final = (
    r"(?:the user|this user|user|the customer|this customer|the client|the account holder|"
    r"the caller|the member|lutilisateur|cet utilisateur|le client|la cliente|der nutzer|"
    r"der benutzer|der kunde|die kundin|dieser nutzer|der anwender|el usuario|la usuaria|"
    r"el cliente|la clienta|este usuario|o usuário|o usuario|o utilizador|a usuária|o cliente|"
    r"a cliente|este usuário|lutente|il cliente|questo utente|de gebruiker|de klant|"
    r"użytkownik|uzytkownik|klient|пользователь|клиент|этот пользователь)"
)
#: Roles that carry authority over other people's data or money.
ROLES: Final = (
    r"(?:admin|administrator|administrateur|administrateurs|administrador|administradora|"
    r"amministratore|администратор|администратором|админ|админом|beheerder|administratorem|"
    r"superuser|super user|super admin|superadmin|superutilisateur|superusuario|root|sysadmin|"
    r"moderator|modérateur|moderador|модератор|модератором)"
)
#: Being a role: "is (a|an|the) …", in the covered languages.
IS_A: Final = (
    r"(?:is|is now|has been|was|est|ist|es|é|è|является|jest|is een|est un|est une|ist ein|"
    r"ist eine|es un|es una|é um|é uma|è un|è una)"
)
#: Verbs of authority: approving, authorising, waiving, overriding.
AUTHORITY_VERBS: Final = (
    r"(?:approve|authori[sz]e|grant|waive|override|bypass|unlock|sign off|exempt|"
    r"approuver|valider|autoriser|accorder|contourner|genehmigen|freigeben|autorisieren|"
    r"umgehen|aprobar|autorizar|conceder|eximir|aprovar|liberar|approvare|autorizzare|"
    r"одобрять|одобрить|утверждать|утвердить|разрешать)"
)
#: "May": what grants a right (no scope needed) …
MAY: Final = (
    r"(?:may|is allowed to|is authori[sz]ed to|is permitted to|is entitled to|is cleared to|"
    r"has permission to|has the right to|has authority to|est autorisée? à|a le droit de|darf|"
    r"ist berechtigt|ist befugt|está autorizad[oa] a|tiene permiso para|tiene derecho a|"
    r"tem permissão para|tem o direito de|está autorizad[oa] a|è autorizzat[oa] a|"
    r"имеет право|разрешено)"
)
#: … and "can", which is a right only with a scope ("can approve *any* refund").
CAN: Final = r"(?:can|can now|peut|kann|puede|pode|può|может|mag)"
SCOPE: Final = (
    r"(?:any|all|every|unlimited|without|no limit|tous|toutes|tout|nimporte|jede|jeden|jedes|"
    r"alle|alles|unbegrenzt|ohne|cualquier|todos|todas|sin|qualquer|quaisquer|sem|qualsiasi|"
    r"tutti|tutte|senza|любые|любой|все|всё|без)"
)
GRANT_OF_AUTHORITY: Final = (
    rf"\b{THE_USER} {IS_A} (?:(?:a|an|the|un|une|ein|eine|um|uma|el|la|le|il|o|een) )?"
    rf"(?:\w+ )?{ROLES}\b"
    rf"|\bпользователь (?:\w+ )?(?:является )?{ROLES}\b"
    rf"|\b{THE_USER} (?:\w+ ){{0,2}}{MAY} (?:\w+ ){{0,2}}{AUTHORITY_VERBS}\b"
    rf"|\b{THE_USER} (?:\w+ ){{0,2}}{CAN} (?:\w+ ){{0,2}}{AUTHORITY_VERBS}\b(?: \w+){{0,4}} "
    rf"{SCOPE}\b"
    r"|\b(?:skip|bypass|waive|disable|turn off|dont do|do not do|no need for) (?:the |any )?"
    r"(?:identity |id |fraud |security |kyc |age |2fa |mfa |two factor )?(?:verification|checks?|"
    r"authentication|approval|confirmation)s? (?:for|of|on) (?:them|him|her|this user|the user|"
    r"this customer|the customer|me|this account)\b"
    r"|\bapprove (?:any|every|all) (?:refunds?|transfers?|requests?|payments?|withdrawals?)"
    r" (?:he|she|they|the user|the customer) (?:asks|requests|wants)"
)
#: The same for word-free scripts (compact form): "用户是管理员", "该用户可以批准任何退款".
GRANT_OF_AUTHORITY_COMPACT: Final = (
    r"(?:该|此|这个)?(?:用户|客户|顾客)(?:是|为)(?:超级)?(?:管理员|系统管理员|超级用户)"
    r"|(?:该|此|这个)?(?:用户|客户|顾客)(?:可以|有权|被允许|能够)(?:批准|审批|授权|免除|绕过)"
    r"(?:任何|所有|一切|无限)"
)
