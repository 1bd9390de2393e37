"""The queue's Lua scripts and how they are run: EVALSHA, loading the script on NOSCRIPT.

Each operation is one script in ``worker/queue/lua/<name>.lua`` whose header lists its KEYS and
ARGV. Scripts marked ``-- uses _lib.lua`` get the shared helpers prepended.

Calls go out as EVALSHA; only when Redis answers NOSCRIPT (after a restart or ``SCRIPT
FLUSH``) is the script loaded and the call re-sent. redis-py's ``register_script`` does this for
single calls, but in a pipeline it sends ``SCRIPT EXISTS`` before every ``execute()`` — a
second round trip per batch — hence :func:`run_pipeline`.

The hot path goes one step further: it sends EVALSHA calls packed with :func:`pack_command`
over its own lean pool (``worker.hotpath.pool``), skipping redis-py's per-command machinery.

>>> SCRIPTS["enqueue"].name, len(SCRIPTS["enqueue"].sha)
('enqueue', 40)
>>> "local function restore_first" in SCRIPTS["ack"].source
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

import redis
from redis.exceptions import NoScriptError

#: A script's KEYS or ARGV as sent: strings, or integers (ms, counts, tokens).
Args = Sequence[str | int]

_LIB_MARKER: Final = "-- uses _lib.lua"
_NAMES: Final = (
    "enqueue",
    "claim",
    "extend",
    "ack",
    "settle",
    "mark_due",
    "dlq_retry",
    "dlq_drop",
    "purge",
    "beat_lock",
)


@dataclass(frozen=True)
class LuaScript:
    """One script's source and the SHA1 Redis caches it under."""

    name: str
    source: str
    sha: str

    def call(self, client: redis.Redis, keys: Args, args: Args) -> Any:
        """Run the script in one round trip (two more, once, if Redis lost its script cache)."""
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            client.script_load(self.source)
            return client.evalsha(self.sha, len(keys), *keys, *args)


Call = tuple[LuaScript, Args, Args]


def pack_bulk(*parts: bytes) -> bytes:
    """``parts`` as Redis protocol (RESP) bulk strings, without the array header."""
    return b"".join(b"$%d\r\n%b\r\n" % (len(part), part) for part in parts)


def pack_command(*parts: bytes) -> bytes:
    """One command in the Redis protocol, ready to send.

    >>> pack_command(b"PING").split()
    [b'*1', b'$4', b'PING']
    """
    return b"*%d\r\n" % len(parts) + pack_bulk(*parts)


def run_pipeline(client: redis.Redis, calls: Sequence[Call]) -> list[Any]:
    """Run many script calls in one round trip; each result is a value or the exception raised.

    Calls refused with NOSCRIPT are re-sent once, after loading their scripts; NOSCRIPT means
    the call did not run, so re-sending it cannot apply it twice.
    """
    results = _send(client, calls)
    missing = [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]
    if missing:
        for script in {calls[i][0] for i in missing}:
            client.script_load(script.source)
        for i, result in zip(missing, _send(client, [calls[i] for i in missing]), strict=True):
            results[i] = result
    return results


def _send(client: redis.Redis, calls: Sequence[Call]) -> list[Any]:
    pipe = client.pipeline(transaction=False)
    for script, keys, args in calls:
        pipe.evalsha(script.sha, len(keys), *keys, *args)
    return list(pipe.execute(raise_on_error=False))


def _load(name: str, lib: str) -> LuaScript:
    source = resources.files("worker.queue").joinpath("lua", f"{name}.lua").read_text("utf-8")
    if _LIB_MARKER in source:
        source = lib + "\n" + source
    return LuaScript(name, source, hashlib.sha1(source.encode()).hexdigest())


def _load_all() -> dict[str, LuaScript]:
    lib = resources.files("worker.queue").joinpath("lua", "_lib.lua").read_text("utf-8")
    return {name: _load(name, lib) for name in _NAMES}


#: Every script by name, read once at import.
SCRIPTS: Final[dict[str, LuaScript]] = _load_all()
