"""The queue's Lua scripts: their sources, the SHA1s Redis caches them under, their calls.

Each operation is one script in ``worker/queue/lua/<name>.lua`` whose header lists its KEYS and
ARGV by name (``-- KEYS[1]  log ...``, ``-- ARGV[2]  token ...``; ``ARGV[n…]`` names a list
that takes the rest). The header is read once, at load, and is the call's contract: a call
passes named values (:meth:`LuaScript.bind` derives the KEYS from the queue layout) and the
script orders them, refusing a missing or unknown name.

Scripts marked ``-- uses _lib.lua`` get the shared helpers prepended, and those marked
``-- uses _sets.lua`` the set helpers too (after them); the hot path's enqueue does without
the latter, because every prepended function is created again on each call.

Calls go out as EVALSHA through redis-py, the script loaded only when Redis answers NOSCRIPT
(:mod:`worker.queue.evalsha`). This module does not import redis-py.

>>> SCRIPTS["enqueue"].name, len(SCRIPTS["enqueue"].sha)
('enqueue', 40)
>>> SCRIPTS["extend"].keys, SCRIPTS["extend"].argv
(('meta', 'leases'), ('now', 'lease_ms', 'token', 'namespace'))
>>> _, keys, args = SCRIPTS["extend"].bind(
...     QueueLayout("mw", 16), now="", lease_ms=60000, token=7, namespace="user:u1")
>>> keys, args
(['mw:{s8}:ns:user:u1:meta', 'mw:{s8}:leases'], ['', 60000, 7, 'user:u1'])
>>> "local function restore_first" in SCRIPTS["ack"].source
True
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from importlib import resources
from typing import Final

from worker.errors import MemworkerError
from worker.queue.keys import QueueLayout
from worker.queue_policy import QueuePolicy

#: One KEYS or ARGV value as sent: a string, an integer (ms, counts, tokens) or bytes.
Arg = str | int | bytes
#: A script's KEYS or ARGV as sent.
Args = Sequence[Arg]
#: A named ARGV value: one value, or a list for the header's trailing ``ARGV[n…]``.
Value = Arg | Sequence[Arg]

#: A header line naming one of KEYS or ARGV: ``-- KEYS[1]  log ...``, ``-- ARGV[3…]  scopes``.
_HEADER: Final = re.compile(r"^-- (KEYS|ARGV)\[(\d+)(…?)\]\s+([a-z_]+)\b", re.MULTILINE)

#: Helper files in the order they are prepended, each to the scripts naming it; every other
#: ``.lua`` file of the folder is a script.
_LIBS: Final = ("_lib", "_sets")


class ScriptCallError(MemworkerError):
    """A script was called with other names than its header lists (a programming error)."""


@dataclass(frozen=True)
class LuaScript:
    """One script's source, the SHA1 Redis caches it under, and its header's names."""

    name: str
    source: str
    sha: str
    #: KEYS names, in order.
    keys: tuple[str, ...] = ()
    #: ARGV names, in order; the last is the rest of ARGV (a list) when ``rest``.
    argv: tuple[str, ...] = ()
    rest: bool = False

    def bind(self, layout: QueueLayout, shard: int | None = None, /, **args: Value) -> Call:
        """The call with ``args`` by name; KEYS derived from ``layout`` for ``shard`` (default:
        the ``namespace`` argument's shard) and, for a namespace's own keys, ``namespace``."""
        namespace = args.get("namespace")
        ns = namespace if isinstance(namespace, str) else None
        if shard is None:
            if ns is None:
                raise ScriptCallError(f"script {self.name}: bind needs a shard or a namespace")
            shard = layout.shard(ns)
        keys = {name: layout.key(name, shard, ns) for name in self.keys}
        return (self, *self.order(keys, args))

    def order(
        self, keys: Mapping[str, str], args: Mapping[str, Value]
    ) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV in the header's order, from values by name; a missing or unknown
        name raises :class:`ScriptCallError`."""
        _check(self, "KEYS", self.keys, keys)
        _check(self, "ARGV", self.argv, args)
        names = self.argv[:-1] if self.rest else self.argv
        values: list[Arg] = []
        for name in names:
            value = args[name]
            if not isinstance(value, str | int | bytes):
                raise ScriptCallError(f"script {self.name}: ARGV {name} is one value, not a list")
            values.append(value)
        if self.rest:
            tail = args[self.argv[-1]]
            if isinstance(tail, str | int | bytes):
                raise ScriptCallError(f"script {self.name}: ARGV {self.argv[-1]} is a list")
            values.extend(tail)
        return [keys[name] for name in self.keys], values


Call = tuple[LuaScript, Args, Args]


def _check(
    script: LuaScript, part: str, declared: tuple[str, ...], given: Mapping[str, object]
) -> None:
    if len(given) == len(declared) and all(name in given for name in declared):
        return
    missing = [name for name in declared if name not in given]
    unknown = sorted(set(given) - set(declared))
    raise ScriptCallError(
        f"script {script.name}: {part} missing {missing or 'nothing'}, unknown "
        f"{unknown or 'nothing'}; its header (lua/{script.name}.lua) lists "
        f"{', '.join(declared) or 'none'}: pass exactly those names"
    )


def parse_header(name: str, source: str) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """The KEYS names, the ARGV names and whether the last ARGV takes the rest, from the
    header of script ``name``; a header out of order, repeating a name or with a rest before
    its end raises :class:`ScriptCallError` (at load).

    >>> parse_header("x", "-- KEYS[1]  log  its log\\n-- ARGV[1]  now\\n-- ARGV[2…]  scopes")
    (('log',), ('now', 'scopes'), True)
    """
    found: dict[str, list[str]] = {"KEYS": [], "ARGV": []}
    rest = False
    for match in _HEADER.finditer(source):
        part, number, more, label = match.groups()
        names = found[part]
        if rest or int(number) != len(names) + 1 or label in names:
            raise ScriptCallError(
                f"script {name}: header line {match.group(0)!r} is out of order or repeats a "
                "name; number KEYS and ARGV from 1, one name each, a rest (…) only last"
            )
        names.append(label)
        rest = rest or bool(more)
    return tuple(found["KEYS"]), tuple(found["ARGV"]), rest


def _load(name: str, libs: dict[str, str]) -> LuaScript:
    source = resources.files("worker.queue").joinpath("lua", f"{name}.lua").read_text("utf-8")
    used = [text for lib, text in libs.items() if f"-- uses {lib}.lua" in source]
    keys, argv, rest = parse_header(name, source)
    source = "\n".join([*used, source])
    return LuaScript(name, source, hashlib.sha1(source.encode()).hexdigest(), keys, argv, rest)


def _load_all() -> dict[str, LuaScript]:
    folder = resources.files("worker.queue").joinpath("lua")
    libs = {lib: folder.joinpath(f"{lib}.lua").read_text("utf-8") for lib in _LIBS}
    check_policy_fields(libs["_lib"])
    files = sorted(f.name for f in folder.iterdir() if f.name.endswith(".lua"))
    return {name: _load(name, libs) for name in (f[:-4] for f in files) if name not in _LIBS}


def check_policy_fields(lib: str) -> None:
    """Refuse (at load) a ``_lib.lua`` whose ``policy_of`` (its HMGET) or ``policy_fields``
    lists other fields, or in another order, than :class:`~worker.queue_policy.QueuePolicy`
    declares: scripts index the policy by position and take missing values in that order."""
    declared = tuple(f.name for f in fields(QueuePolicy))
    for where, pattern in (
        ("policy_of", r"'HMGET', key, ([^)]*)\)"),
        ("policy_fields", r"function policy_fields\(\)\s*return \{([^}]*)\}"),
    ):
        found = re.search(pattern, lib)
        listed = tuple(re.findall(r"'(\w+)'", found.group(1))) if found else ()
        if listed != declared:
            raise ScriptCallError(
                f"_lib.lua's {where} lists {listed}, but QueuePolicy declares {declared}: "
                "change them together, in the same order"
            )


#: Every script by name, read once at import.
SCRIPTS: Final[dict[str, LuaScript]] = _load_all()
