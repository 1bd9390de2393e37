"""A pre-screen for the guard rules: the rows that can match a text at all, found in one look.

Two necessary conditions are read off each row's pattern, once:

- **literals** (:func:`needed_literals`): strings one of which every match contains —
  usually how it starts (``\\b(?:password|pwd) is`` starts with ``password`` or ``pwd is``);
  where a pattern starts with something unreadable (``[\\s_]?token``), what follows it;
- **digits** (:func:`min_digits`): the fewest decimal digits a match holds (a card number 13,
  an SSN 9).

:class:`Screen` looks for every row's literals of one form in one search of that form (all of
them as one trie-shaped pattern) and counts the text's digits once; only the rows passing both
are searched. Both are necessary conditions, so the verdict is the one the rows give when all
are searched in table order. A row without readable literals is screened on digits alone.

The literals are read with the standard library's regular-expression parser (a row it cannot
parse is always searched). A literal ends at anything that is not one: a class of more than
:data:`MAX_CLASS` characters, ``.``, a category, a backreference, a repeat after its first
pass; it is cut at :data:`MAX_LITERAL` characters. Zero-width items (``\\b``, look-arounds)
are stepped over. A case-insensitive form's ASCII literals are held in lower case and looked
for in the text lower-cased (with the three non-ASCII letters ``regex`` equates with ASCII ones
mapped to them); its other literals are searched for with ``regex`` and the rows' own flags,
and only in a text that is not ASCII.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

import regex

try:  # private modules of the standard library: a Python without them screens no row
    from re import _constants as sre  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - every supported Python has them
    sre = sre_parse = None

#: Longest literal kept: past a few characters a literal is rare enough to be a good screen.
MAX_LITERAL: Final = 8
#: Largest character class read as alternatives (``[sz]``, ``[xyz]``); a wider one ends a literal.
MAX_CLASS: Final = 8
#: Most partial literals carried while reading; past it each ends where it is (still sound).
_MAX_PARTIAL: Final = 4096

# A partial literal: the text read so far, whether reading may go on after it, and whether it
# is held somewhere inside the match rather than at its start (then it ends there).
_Partial = tuple[str, bool, bool]
_Items = Sequence[tuple[Any, Any]]

#: A row that needs digits is screened on them alone when its literals are shorter than this
#: and ASCII (a separator, one letter: in most texts, so searching costs more than it saves).
_WEAK: Final = 3


def _weak(literal: str) -> bool:
    return len(literal) < _WEAK and literal.isascii()


_STOP: Final[frozenset[_Partial]] = frozenset({("", False, False)})
_SKIP: Final[frozenset[_Partial]] = frozenset({("", True, False)})


#: Non-ASCII characters ``regex``'s case-insensitive matching equates with an ASCII letter
#: (İ, ſ, the Kelvin sign: found by trying every code point). A literal ends at one.
_TWINS: Final = frozenset("\u0130\u017f\u212a")


def _fold_char(char: str) -> str:
    """A case-insensitive row's character as its literal holds it: ASCII in lower case (so a
    match maps back to its literal), anything else as written."""
    return char.lower() if char.isascii() else char


def _klass(items: _Items, fold: bool) -> frozenset[_Partial]:
    chars: set[str] = set()
    for op, av in items:
        if op is sre.LITERAL:
            chars.add(chr(av))
        elif op is sre.RANGE and av[1] - av[0] < MAX_CLASS:
            chars.update(chr(c) for c in range(av[0], av[1] + 1))
        else:  # NEGATE, CATEGORY, a wide range
            return _STOP
    if fold:
        if not chars.isdisjoint(_TWINS):
            return _STOP
        chars = {_fold_char(c) for c in chars}
    if len(chars) > MAX_CLASS:
        return _STOP
    return frozenset((c, True, False) for c in chars)


def _item(op: Any, av: Any, fold: bool) -> frozenset[_Partial]:
    """The partial literals of one parsed item (``("", True, False)``: zero-width); ``fold``:
    case-insensitive (see :func:`_fold_char`)."""
    if op is sre.LITERAL:
        char = chr(av)
        if fold and char in _TWINS:
            return _STOP
        return frozenset({(_fold_char(char) if fold else char, True, False)})
    if op is sre.IN:
        return _klass(av, fold)
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
        return _SKIP
    if op is sre.SUBPATTERN:
        if (av[1] | av[2]) & re.IGNORECASE:  # a change of case rule inside: not read
            return _STOP
        return _sequence(av[3], fold)
    if op is sre.BRANCH:
        return frozenset().union(*(_sequence(alternative, fold) for alternative in av[1]))
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
        low, high, sub = av
        once = _sequence(sub, fold)
        if high != 1:  # after a first pass the count is open: the literal ends there
            once = frozenset((text, False, inner) for text, _, inner in once)
        return once | _SKIP if low == 0 else once
    return _STOP  # ANY, NOT_LITERAL, GROUPREF, CATEGORY, possessive/atomic items


def _join(text: str, more: _Partial) -> _Partial:
    """A partial start ``text`` (reading on) followed by an item's partial ``more``."""
    added, going, inner = more
    if inner:  # held further in: either tells; the start, unless one letter, screens better
        return (text, False, False) if len(text) >= min(len(added), 2) else more
    joined = text + added
    if len(joined) >= MAX_LITERAL:
        return joined[:MAX_LITERAL], False, False
    return joined, going, False


def _joined(items: _Items, fold: bool) -> frozenset[_Partial]:
    partial: frozenset[_Partial] = _SKIP
    for op, av in items:
        if not any(going for _, going, _ in partial):
            break
        step = _item(op, av, fold)
        out = {p if not p[1] else _join(p[0], more) for p in partial for more in step}
        partial = frozenset(out)
        if len(partial) > _MAX_PARTIAL:
            partial = frozenset((text, False, inner) for text, _, inner in partial)
    return partial


def _sequence(items: _Items, fold: bool, *, whole: bool = False) -> frozenset[_Partial]:
    """What a match of ``items`` starts with, or what a later stretch of it starts with (then
    held inside the match, not at its start): the start when it tells something (never an
    empty literal), else, or for the ``whole`` pattern, whichever has the longest shortest
    literal (a literal read on from an outer start is worth more than a short inner one)."""
    readable = [(op, av) for op, av in items if op not in (sre.AT, sre.ASSERT, sre.ASSERT_NOT)]
    if whole and len(readable) == 1 and readable[0][0] is sre.BRANCH:  # each alternative whole
        alternatives = readable[0][1][1]
        return frozenset().union(*(_sequence(a, fold, whole=True) for a in alternatives))
    best = _joined(items, fold)
    score = _score(best)
    if score and not whole:
        return best
    for skip in range(1, len(items)):
        later = frozenset((text, False, True) for text, _, _ in _joined(items[skip:], fold))
        if _score(later) > score:
            best, score = later, _score(later)
    return best


def _score(found: frozenset[_Partial]) -> int:
    return min((len(text) for text, _, _ in found), default=0)


@lru_cache(maxsize=256)  # a screen reads each row's pattern for literals and for digits
def _parsed(pattern: str) -> Any:
    """``pattern`` parsed by the standard library, or None where it may read it otherwise than
    ``regex`` does: syntax it refuses, or warns of (a ``[[:alpha:]]`` class is a POSIX class to
    ``regex``, a nested set to it); always None where the parser is missing, so every row is
    searched as by a full scan."""
    if sre_parse is None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return sre_parse.parse(pattern)
        except (re.error, OverflowError, RecursionError, Warning):
            return None


def needed_literals(pattern: str, *, fold: bool = False) -> frozenset[str] | None:
    """Strings one of which every match of ``pattern`` contains (None: no such set is known);
    ``fold``: the pattern is case-insensitive (the strings are then in lower case).

    >>> sorted(needed_literals(r"\\b(?:pw|password)s? is"))
    ['password', 'pw is', 'pws is']
    >>> sorted(needed_literals(r"[\\s_]?token")), sorted(needed_literals(r"[a-z]+@"))
    (['token'], ['@'])
    >>> needed_literals(r"\\w+") is None
    True
    """
    parsed = _parsed(pattern)
    if parsed is None:
        return None
    found = {text for text, _, _ in _sequence(parsed.data, fold, whole=True)}
    return None if not found or "" in found else frozenset(found)


def _digit_class(items: _Items) -> bool:
    """Every character the class matches is a decimal digit."""
    return all(
        (op is sre.CATEGORY and av is sre.CATEGORY_DIGIT)
        or (op is sre.LITERAL and chr(av).isdecimal())
        or (op is sre.RANGE and all(chr(c).isdecimal() for c in range(av[0], av[1] + 1)))
        for op, av in items
    )


def _digits_of(items: _Items) -> int:
    total = 0
    for op, av in items:
        if op is sre.LITERAL:
            total += chr(av).isdecimal()
        elif op is sre.IN:
            total += _digit_class(av)
        elif op is sre.SUBPATTERN:
            total += _digits_of(av[3])
        elif op is sre.BRANCH:
            total += min(_digits_of(alternative) for alternative in av[1])
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            total += av[0] * _digits_of(av[2])
    return total


def min_digits(pattern: str) -> int:
    """The fewest decimal digits (``\\d``: Unicode's ``Nd``) any match of ``pattern`` holds.

    >>> min_digits(r"(?:\\d[ -]?){12,18}\\d"), min_digits(r"pin (?:is )?\\d{4}|code")
    (13, 0)
    """
    parsed = _parsed(pattern)
    return 0 if parsed is None else _digits_of(parsed.data)


def count_digits(text: str) -> int:
    """Decimal digits in ``text`` as the rows' ``\\d`` reads them (``regex``'s ``Nd``)."""
    if text.isascii():  # bytes: a deletion in C, where ``str.translate`` looks up each character
        return len(text) - len(text.encode().translate(None, _ASCII_DIGITS))
    return len(_DIGIT.findall(text))


_ASCII_DIGITS: Final = b"0123456789"
_DIGIT: Final = regex.compile(r"\d")


def any_literal(literals: Iterable[str]) -> re.Pattern[str]:
    """One pattern found wherever any of ``literals`` is (an empty literal: everywhere; none:
    nowhere)."""
    found = set(literals)
    if "" in found:
        return re.compile("")
    return re.compile(_trie(found) or "(?!)")


def _trie(literals: Iterable[str]) -> str:
    """A pattern matching, at a position, the longest of ``literals`` found there (a trie: each
    step tries the longer continuation before stopping, so the first match is the longest)."""
    tree: dict[str, Any] = {}
    for literal in literals:
        node = tree
        for char in literal:
            node = node.setdefault(char, {})
        node[""] = {}
    return _node(tree)


def _node(node: dict[str, Any]) -> str:
    branches = [re.escape(char) + _node(child) for char, child in sorted(node.items()) if char]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{body})?" if "" in node else body


_CASE_TWINS: Final = str.maketrans({"\u0130": "i", "\u017f": "s", "\u212a": "k"})


def _folded(text: str) -> str:
    """``text`` as a case-insensitive form's ASCII literals are looked for in it: every
    character that matches an ASCII letter case-insensitively (that letter in either case, or
    one of :data:`_TWINS`) becomes that letter in lower case, one character for one."""
    return text.lower() if text.isascii() else text.translate(_CASE_TWINS).lower()


@dataclass(frozen=True)
class _Form:
    """The literals of one form's rows, as one pattern, and the rows each literal tells."""

    fold: bool
    #: Any literal of ASCII characters, found by one search (in :func:`_folded` text if
    #: ``fold``), and the longest one at every position (a look-ahead: overlapping ones too).
    any: re.Pattern[str]
    every: re.Pattern[str]
    #: Literal found → the rows it and every literal that is a prefix of it belong to.
    rows: dict[str, frozenset[int]]
    #: Case-insensitive forms: literals holding other characters, searched with the rows' own
    #: engine and flags, and only in a text that is not ASCII (nothing else can match them).
    wide: regex.Pattern[str] | None
    wide_rows: frozenset[int]

    def found(self, text: str) -> frozenset[int]:
        """The rows whose literals ``text`` holds."""
        out: set[int] = set()
        if self.wide is not None and not text.isascii() and self.wide.search(text):
            out |= self.wide_rows
        key = _folded(text) if self.fold else text
        if self.any.search(key) is None:  # the usual case: no literal at all
            return frozenset(out)
        for match in self.every.finditer(key):
            out |= self.rows[match.group(1)]
        return frozenset(out)


@dataclass(frozen=True)
class Screen:
    """Per form of the text, the rows' literals; :meth:`rows` finds those a text holds."""

    #: Rows (by index) without literals: searched when the text has their digits.
    unscreened: frozenset[int]
    forms: dict[str, _Form]
    #: Row index → the fewest digits its matches hold.
    digits: tuple[int, ...]

    def literals(self, form: str) -> frozenset[str]:
        """The literals of ``form``'s rows that an ASCII text can hold (ASCII themselves)."""
        screen = self.forms.get(form)
        return frozenset() if screen is None else frozenset(filter(str.isascii, screen.rows))

    def unscreened_rows(self, digits: int) -> list[int]:
        """:meth:`rows` for texts that hold no literal: the unscreened rows ``digits`` allow."""
        return sorted(row for row in self.unscreened if self.digits[row] <= digits)

    def rows(self, forms: dict[Any, tuple[str, ...]], digits: int) -> list[int]:
        """The rows, in table order, that may match some text of ``forms`` (form → its
        texts) holding ``digits`` decimal digits."""
        found = set(self.unscreened)
        for form, screen in self.forms.items():
            for text in forms[form]:
                found |= screen.found(text)
        return sorted(row for row in found if self.digits[row] <= digits)


#: Flags under which a pattern reads otherwise than the standard parser reads it: verbose
#: layout, full case folding (``ss`` matches ``ß``), version 1 sets. Such a row is unscreened.
_UNREAD_FLAGS: Final = regex.VERBOSE | regex.FULLCASE | regex.V1


def build_screen(rows: Sequence[tuple[str, regex.Pattern[str]]]) -> Screen:
    """A screen for ``rows`` ((form, compiled pattern) each, indexed by position). A form's
    rows must share their flags (the search of its literals uses them)."""
    unscreened: set[int] = set()
    literals: dict[str, dict[str, set[int]]] = {}
    flags: dict[str, int] = {}
    for index, (form, pattern) in enumerate(rows):
        if flags.setdefault(form, pattern.flags) != pattern.flags:
            raise ValueError(f"the rows of form {form!r} have different flags; give each form one")
        found = (
            None
            if pattern.flags & _UNREAD_FLAGS
            else needed_literals(pattern.pattern, fold=bool(pattern.flags & regex.IGNORECASE))
        )
        if found is None or (min_digits(pattern.pattern) and any(map(_weak, found))):
            unscreened.add(index)
            continue
        for literal in found:
            literals.setdefault(form, {}).setdefault(literal, set()).add(index)
    digits = tuple(
        0 if pattern.flags & _UNREAD_FLAGS else min_digits(pattern.pattern) for _, pattern in rows
    )
    forms = {form: _form(mine, flags[form]) for form, mine in literals.items()}
    return Screen(frozenset(unscreened), forms, digits)


def _form(literals: dict[str, set[int]], flags: int) -> _Form:
    fold = bool(flags & regex.IGNORECASE)
    wide = {lit: idx for lit, idx in literals.items() if fold and not lit.isascii()}
    plain = {lit: idx for lit, idx in literals.items() if lit not in wide}
    trie = _trie(plain)
    rows = {lit: frozenset().union(*_prefixed(lit, plain)) for lit in plain}
    wide_pattern = regex.compile(_trie(wide), flags) if wide else None
    wide_rows = frozenset().union(*wide.values())
    any_, every = re.compile(trie or "(?!)"), re.compile(f"(?=({trie}))" if trie else "(?!)")
    return _Form(fold, any_, every, rows, wide_pattern, wide_rows)


def _prefixed(literal: str, literals: dict[str, set[int]]) -> Iterator[set[int]]:
    """The rows of ``literal`` and of every literal it starts with (found where it is)."""
    return (
        literals[literal[:end]] for end in range(1, len(literal) + 1) if literal[:end] in literals
    )
