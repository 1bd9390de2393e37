"""The queue's Lua scripts and what they read and write: keys, the candidate's encoding, calls,
replies and counters.

**Keys.** A namespace lives in one shard, ``zlib.crc32(namespace_key) % settings.queue_shards``
(stable across processes and Python versions, unlike the salted ``hash()``). Every key of a
shard carries the same Redis Cluster hash tag ``{s<shard>}``, so each Lua script touches a
single slot and the queue runs unchanged on a cluster.

Per namespace (``ns`` is the namespace key, e.g. ``user:u1``), existing only while it has
candidates:

- ``<prefix>:{s7}:ns:<ns>:log`` — a Stream of candidates (fields ``c`` = JSON, ``i`` = id)
- ``<prefix>:{s7}:ns:<ns>:meta`` — a hash: batch arrivals, lease, fence, attempts, dead flag

Per shard:

- ``<prefix>:{s7}:due`` — zset namespace → due time (ms)
- ``<prefix>:{s7}:leases`` — zset namespace → lease expiry (ms)
- ``<prefix>:{s7}:dead`` — zset namespace → dead-lettered at (ms)
- ``<prefix>:{s7}:stats`` — hash: per scope the pending candidates (``user``) and the members
  of the due, leases and dead sets (``user:due``, ``user:leased``, ``user:dead``, and
  ``user:parked`` for those in both due and leases); the id floor (``floor_ms``,
  ``floor_seq``: the last id of namespaces forgotten since); ``v``, the counters' version
- ``<prefix>:{s7}:oldest:<scope>`` — zset namespace → ms of its oldest log entry
- ``<prefix>:{s7}:fence`` — counter of lease tokens (never deleted, so never reissued)
- ``<prefix>:{s7}:epoch`` — the shard's identity, created by the first claim; a new value
  means Redis lost the shard's data (restart without AOF, flush, stale failover)
- ``<prefix>:{s7}:policy`` — hash: the deployment's quiet period, max wait and max pending

>>> layout = QueueLayout("mw", shards=16)
>>> layout.shard("user:u1")
8
>>> layout.log("user:u1")
'mw:{s8}:ns:user:u1:log'
>>> layout.due(8)
'mw:{s8}:due'
>>> layout.namespace_of_meta("mw:{s8}:ns:user:u1:meta")
'user:u1'

**Scripts.** Each operation is one script in ``worker/queue/lua/<name>.lua`` whose header lists
its KEYS and ARGV by name (``-- KEYS[1]  log ...``; ``ARGV[n…]`` names a list that takes the
rest). The header is the call's contract: a call passes named values (:meth:`LuaScript.bind`
derives the KEYS from the layout) and the script orders them, refusing a missing or unknown
name. Scripts marked ``-- uses _lib.lua`` (or ``_sets.lua``) get those helpers prepended; the
hot path's enqueue does without ``_sets.lua``, since every prepended function is created again
on each call.

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

**Enqueue.** The hot-path clients and :class:`~worker.queue.redis_queue.RedisQueue` build the
same call here (:class:`EnqueueEncoder`). It carries no clock and no policy of the client's:
only its shard count, checked against the workers', and the release's default policy, used only
until a worker has written the deployment's (see :mod:`worker.types`). So a client's clock or
settings change nothing about when a namespace becomes due.

>>> from worker.models import make_candidate
>>> from worker.settings import Settings
>>> enc = EnqueueEncoder(Settings(key_prefix="mw", queue_shards=16).for_queue)
>>> c = make_candidate(user_id="u1", trace_id="t1", text="I prefer tea")
>>> _, keys, args = enc.call(c)
>>> keys[0], args[:2]
('mw:{s8}:ns:user:u1:log', ['', 'user:u1'])
>>> decode_candidate(args[3]) == c
True

**Calls** go out as EVALSHA, the script loaded only when Redis answers NOSCRIPT. redis-py's
``register_script`` would send ``SCRIPT EXISTS`` before every pipeline, a second round trip per
batch, hence :func:`run_pipeline`. On a Redis Cluster redis-py refuses scripts in a pipeline, so
the calls are grouped by the node that owns their slot; a call the node redirects or cannot
answer is sent again alone through the cluster client, which follows redirections.

>>> import redis
>>> from worker.queue.scripts import QueueLayout
>>> from worker.queue.scripts import SCRIPTS
>>> client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
>>> script, keys, args = SCRIPTS["stats"].bind(
...     QueueLayout("mwdoc", 1), 0, now="", looked_at=0, scopes=[])
>>> call_script(client, script, keys, args)[1:3]
[0, 0]
>>> client.close()

**Stats.** Every script that moves a namespace in or out of the due, leases or dead set counts
it in its shard's stats hash (see ``worker/queue/lua/_lib.lua``), so reading queue health
(:func:`collect_stats`) is one small read-only script per shard, pipelined: O(shards), whatever
the number of waiting namespaces. :func:`recount_stats` recomputes the same figures by walking
every namespace, for audits and tests.

:class:`ScriptRunner` runs the scripts on one client, each failure raised as the error that
names it; the worker's side and the operators' side share it.

>>> from worker.queue.scripts import QueueLayout
>>> import redis
>>> runner = ScriptRunner(redis.Redis(), QueueLayout("mw", 16))
>>> runner.where
'redis://localhost:6379/0'
"""

from __future__ import annotations

import hashlib
import re
import time
import zlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from importlib import resources
from typing import Any, Final, Protocol

import redis
from pydantic import ValidationError
from redis.cluster import RedisCluster
from redis.exceptions import AskError, MovedError, NoScriptError, TryAgainError

from worker.errors import BacklogFull, InvalidCandidate, MemworkerError, QueueMisconfigured
from worker.metrics import count_enqueued
from worker.models import Candidate
from worker.queue.redis import REDIS_FAILURES, RedisClient, translate, where_of
from worker.queue.types import QueueStats, ScopeStats
from worker.types import QueuePolicy, Scope

#: Suffixes of the per-namespace keys; the meta key is the one SCAN looks for.
LOG_SUFFIX: Final = ":log"
META_SUFFIX: Final = ":meta"

#: The keys scripts name in their KEYS headers (see :meth:`QueueLayout.key`): a namespace's
#: own, and its shard's.
NAMESPACE_KEYS: Final = frozenset({"log", "meta"})
SHARD_KEYS: Final = frozenset({"due", "leases", "dead", "stats", "fence", "epoch", "policy"})


def scope_of(namespace: str) -> str:
    """The scope of a namespace key (``user``, ``agent`` or ``org``); a user of an org
    (``org:<org>:user:<user>``) is of the user scope, as the scripts count it.

    >>> scope_of("agent:support-bot"), scope_of("org:acme"), scope_of("org:acme:user:u1")
    ('agent', 'org', 'user')
    """
    scope, _, rest = namespace.partition(":")
    if scope == "org" and rest.partition(":")[2].startswith("user:"):
        return "user"
    return scope


@dataclass(frozen=True)
class QueueLayout:
    """Key names for one deployment (``prefix``) split into ``shards`` hash-tagged shards."""

    prefix: str
    shards: int

    def shard(self, namespace: str) -> int:
        return zlib.crc32(namespace.encode()) % self.shards

    def base(self, shard: int) -> str:
        """Common start of every key of ``shard``, hash tag included (``mw:{s3}:``).

        Scripts that derive namespace keys inside Lua build them from this string, so the
        derived keys hash to the same slot as the shard keys passed in ``KEYS``.
        """
        return f"{self.prefix}:{{s{shard}}}:"

    def log(self, namespace: str) -> str:
        return f"{self.base(self.shard(namespace))}ns:{namespace}{LOG_SUFFIX}"

    def meta(self, namespace: str) -> str:
        return f"{self.base(self.shard(namespace))}ns:{namespace}{META_SUFFIX}"

    def due(self, shard: int) -> str:
        return f"{self.base(shard)}due"

    def leases(self, shard: int) -> str:
        return f"{self.base(shard)}leases"

    def dead(self, shard: int) -> str:
        return f"{self.base(shard)}dead"

    def stats(self, shard: int) -> str:
        return f"{self.base(shard)}stats"

    def oldest(self, shard: int, scope: str) -> str:
        return f"{self.base(shard)}oldest:{scope}"

    def fence(self, shard: int) -> str:
        return f"{self.base(shard)}fence"

    def epoch(self, shard: int) -> str:
        return f"{self.base(shard)}epoch"

    def policy(self, shard: int) -> str:
        return f"{self.base(shard)}policy"

    def key(self, name: str, shard: int, namespace: str | None = None) -> str:
        """The key a script header calls ``name``: of ``shard``, or of ``namespace`` (in that
        shard) for a namespace's own keys.

        >>> QueueLayout("mw", 16).key("log", 8, "user:u1"), QueueLayout("mw", 16).key("due", 8)
        ('mw:{s8}:ns:user:u1:log', 'mw:{s8}:due')
        """
        if name in SHARD_KEYS:
            return f"{self.base(shard)}{name}"
        if name in NAMESPACE_KEYS and namespace is not None:
            return f"{self.base(shard)}ns:{namespace}:{name}"
        raise KeyError(f"no queue key {name!r} for shard {shard}, namespace {namespace!r}")

    def meta_pattern(self) -> str:
        """SCAN pattern matching every namespace meta key of this deployment."""
        return f"{self.prefix}:{{s*}}:ns:*{META_SUFFIX}"

    def namespace_of_meta(self, key: str) -> str | None:
        """The namespace a meta key belongs to, or None if ``key`` is not one of ours."""
        head = f"{self.prefix}:{{s"
        if not (key.startswith(head) and key.endswith(META_SUFFIX)):
            return None
        _, sep, rest = key[len(head) :].partition("}:ns:")
        return rest[: -len(META_SUFFIX)] if sep else None


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
    lists other fields, or in another order, than :class:`~worker.types.QueuePolicy`
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


#: The error the enqueue script raises when a namespace's log is at max_pending.
BACKLOG_FULL: Final = "BACKLOG_FULL"
#: The error reply of an enqueue whose client uses another shard count than the workers.
SHARDS_MISMATCH: Final = "SHARDS_MISMATCH"

_ENQUEUE: Final = SCRIPTS["enqueue"]
#: The ARGV order :meth:`EnqueueEncoder.call` writes without naming them (the hot path's one
#: format); checked against the script's header at import, so the two cannot drift apart.
PACKED_ARGV: Final = ("now", "namespace", "id", "candidate", "shards", "policy")
if _ENQUEUE.argv != PACKED_ARGV or _ENQUEUE.rest:
    raise ScriptCallError(
        f"lua/enqueue.lua's ARGV header lists {_ENQUEUE.argv}, but the hot path packs "
        f"{PACKED_ARGV}: change EnqueueEncoder.call with the header"
    )

#: Namespaces whose key names are kept for the hot path. Deriving five key names costs more
#: than a dict lookup; 4096 covers the active users of one chat process, and the cache is
#: simply cleared when full (a miss only costs the derivation again).
KEYS_CACHE: Final = 4096


def to_ms(now: float | None) -> int:
    """Epoch seconds (default: this host's current time) as integer ms.

    Only for reading replies against a caller's own clock; scripts get :func:`script_now`.

    >>> to_ms(1.5)
    1500
    """
    return int((time.time() if now is None else now) * 1000)


def script_now(now: float | None) -> str | int:
    """The ``now`` argument every script takes: ``""`` (the server's ``TIME``) unless a test
    passes a time explicitly, in epoch seconds.

    >>> script_now(None), script_now(1.5)
    ('', 1500)
    """
    return "" if now is None else int(now * 1000)


def seconds_to_ms(seconds: float) -> int:
    return round(seconds * 1000)


class QueueShape(Protocol):
    """What :class:`EnqueueEncoder` reads of settings (the worker's or the client's slice)."""

    @property
    def key_prefix(self) -> str: ...
    @property
    def queue_shards(self) -> int: ...


class EnqueueEncoder:
    """Builds ``enqueue`` script calls for one deployment's settings."""

    __slots__ = ("_defaults", "_keys", "_shards", "layout")

    def __init__(self, settings: QueueShape) -> None:
        self.layout = QueueLayout(settings.key_prefix, settings.queue_shards)
        # The ARGV that never change: the shard count and the release's default policy (see
        # worker.types).
        self._shards = settings.queue_shards
        self._defaults = QueuePolicy.defaults(settings.queue_shards).packed()
        self._keys: dict[str, list[str]] = {}

    def call(self, candidate: Candidate, now: float | None = None) -> Call:
        """The enqueue script call for ``candidate`` (see ``lua/enqueue.lua``); ``now``
        (epoch seconds) is a test hook, the server's clock otherwise. The key names of a
        namespace are derived once."""
        ns = candidate.namespace
        keys = self._keys.get(ns)
        if keys is None:
            if len(self._keys) >= KEYS_CACHE:
                self._keys.clear()
            shard = self.layout.shard(ns)
            keys = self._keys[ns] = [self.layout.key(k, shard, ns) for k in _ENQUEUE.keys]
        payload = candidate.model_dump_json().encode()
        args: list[Arg] = [script_now(now), ns, candidate.id, payload, self._shards, self._defaults]
        return _ENQUEUE, keys, args

    def settle(
        self, candidates: Sequence[Candidate], results: Sequence[Any], where: str = "Redis"
    ) -> None:
        """Count each candidate Redis accepted (``memworker_enqueued_total``), then raise the
        first refusal, if any, as a :class:`~worker.errors.MemworkerError`: a full backlog
        refuses only its own namespace's candidates, so the others were enqueued and are
        counted. ``where`` names the server in the error (a redacted URL)."""
        refused: tuple[str, Exception] | None = None
        accepted = 0
        for candidate, result in zip(candidates, results, strict=True):
            if isinstance(result, Exception):
                if refused is None:
                    refused = (candidate.namespace, result)
            else:
                accepted += 1
                count_enqueued(candidate.namespace)
        if refused is not None:
            namespace, error = refused
            done = None if len(candidates) == 1 else f"{accepted} of {len(candidates)}"
            raise enqueue_error(namespace, error, where, enqueued=done) from None


def enqueue_error(
    namespace: str, error: BaseException, where: str, *, enqueued: str | None = None
) -> MemworkerError:
    """What an enqueue refusal means: :class:`BacklogFull` from the script, or a Redis failure
    translated by :func:`worker.queue.redis.translate`. ``enqueued`` (``"N of M"``) says how
    many of a pipelined batch went in, where not all of them were refused."""
    message = str(error)
    if message.startswith(SHARDS_MISMATCH):
        mine, _, theirs = message.removeprefix(SHARDS_MISMATCH).strip().partition(" ")
        return QueueMisconfigured(
            f"this client splits the queue into {mine} shards (MEMWORKER_QUEUE_SHARDS) but the "
            f"workers on {where} use {theirs}; nothing was enqueued, since no sweep would ever "
            f"find it. Set MEMWORKER_QUEUE_SHARDS={theirs} for this client (or the client's "
            "queue_shards)"
        )
    if not message.startswith(BACKLOG_FULL):
        return translate(error, where)
    pending, _, limit = message.removeprefix(BACKLOG_FULL).strip().partition(" ")
    outcome = (
        "nothing was enqueued"
        if enqueued is None or enqueued.startswith("0 of")
        else f"{enqueued} candidates were enqueued, the rest refused"
    )
    return BacklogFull(
        f"namespace {namespace} already has {pending} pending candidates (limit {limit or '?'}); "
        f"{outcome}. The worker is behind or stopped: check "
        "`memworker status`, or raise MEMWORKER_MAX_PENDING_PER_NAMESPACE on the workers"
    )


def decode_candidate(raw: str | bytes, stream_id: str = "?") -> Candidate:
    """Parse a candidate's JSON as stored in the log; a corrupt entry names its stream id."""
    try:
        return Candidate.model_validate_json(raw)
    except (ValidationError, InvalidCandidate) as exc:
        raise InvalidCandidate(
            f"log entry {stream_id} is not a valid candidate ({exc}); its batch fails until "
            "it is dead-lettered, where an operator can drop it"
        ) from None


def call_script(client: RedisClient, script: LuaScript, keys: Args, args: Args) -> Any:
    """Run ``script`` in one round trip (two more, once, if Redis lost its script cache)."""
    try:
        return client.evalsha(script.sha, len(keys), *keys, *args)
    except NoScriptError:
        client.script_load(script.source)
        return client.evalsha(script.sha, len(keys), *keys, *args)


def run_pipeline(client: RedisClient, calls: Sequence[Call]) -> list[Any]:
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


def _send(client: RedisClient, calls: Sequence[Call]) -> list[Any]:
    if isinstance(client, RedisCluster):
        return _send_cluster(client, calls)
    return _send_node(client, calls)


def _send_node(client: redis.Redis, calls: Sequence[Call]) -> list[Any]:
    pipe = client.pipeline(transaction=False)
    for script, keys, args in calls:
        pipe.evalsha(script.sha, len(keys), *keys, *args)
    return list(pipe.execute(raise_on_error=False))


#: Replies that mean "this node did not run the call; ask the cluster again" (a node that
#: could not be reached is recorded as ``TryAgainError`` too: see :func:`unreachable`).
RESEND: Final = (MovedError, AskError, TryAgainError)


#: What one call sent again through the cluster client may fail with, kept as its result.
_CALL_FAILURES: Final = (redis.ResponseError, redis.ConnectionError, redis.TimeoutError)


def unreachable(count: int) -> list[Exception]:
    """Stand-in replies for ``count`` calls whose node could not be reached: sent again."""
    return [TryAgainError("node unreachable")] * count


def _send_cluster(client: RedisCluster, calls: Sequence[Call]) -> list[Any]:
    """One pipeline per node owning the calls' slots (each call's keys share one slot)."""
    groups: dict[str, list[int]] = {}
    nodes: dict[str, Any] = {}
    for i, (_, keys, _) in enumerate(calls):
        node = client.get_node_from_key(keys[0])  # type: ignore[no-untyped-call]
        groups.setdefault(node.name, []).append(i)
        nodes[node.name] = node
    results: list[Any] = [None] * len(calls)
    for name, indexes in groups.items():
        try:
            replies = _send_node(nodes[name].redis_connection, [calls[i] for i in indexes])
        except (redis.ConnectionError, redis.TimeoutError):
            # The node went away (a failover?): the cluster client below finds its successor.
            # A call that did reach it before the connection broke runs twice: enqueue then
            # holds the candidate twice under one id (consolidation merges it once); claim,
            # extend, ack and settle are fenced by the lease token.
            replies = unreachable(len(indexes))
        for i, reply in zip(indexes, replies, strict=True):
            results[i] = reply
    for i, reply in enumerate(results):
        if isinstance(reply, RESEND):
            script, keys, args = calls[i]
            try:
                results[i] = call_script(client, script, keys, args)
            except (*_CALL_FAILURES, redis.RedisClusterException) as exc:
                # This call's failure, as a value: raising would lose the others' results,
                # such as the leases other shards of a sweep just granted. A node still down
                # mid-failover fails only the calls of its slots.
                results[i] = exc
    return results


def s(value: Any) -> str:
    """Redis replies are bytes unless the client decodes them; accept both."""
    return value.decode() if isinstance(value, bytes) else str(value)


def entries_of(raw: Any) -> list[tuple[str, Candidate]]:
    """``(stream id, candidate)`` of an XRANGE reply."""
    out = []
    for stream_id, entry_fields in raw or ():
        sid = s(stream_id)
        payload = entry_fields.get(b"c", entry_fields.get("c"))
        if payload is None:
            raise InvalidCandidate(f"log entry {sid} has no candidate field 'c'")
        out.append((sid, decode_candidate(payload, sid)))
    return out


#: Namespaces read per pipelined round trip when recounting.
PAGE: Final = 1000

#: Most due-by-now namespaces one shard's stats read looks at to split them by scope. Enough
#: for every sweep of a healthy deployment (a sweep claims ``claim_limit`` per shard); beyond
#: it (workers far behind) the rest of the shard's due namespaces are split in the proportions
#: of those looked at, so one status read stays a few milliseconds per shard.
DUE_LOOKED_AT: Final = 1000

#: Layout version of the counters, stored in each shard's stats hash (field ``v``): a shard
#: without it (fresh, or written by a release that kept no such counters) is recounted once,
#: at worker start (:func:`rebuild_stats`).
COUNTERS_VERSION: Final = "1"

#: Counter suffixes in the stats hash (see ``_lib.lua``).
_STATES: Final = ("due", "leased", "dead", "parked")


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def server_ms(reply: Any) -> int:
    """A ``TIME`` reply (seconds, microseconds) as epoch ms.

    >>> server_ms((1700000000, 250000))
    1700000000250
    """
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


def collect_stats(
    client: RedisClient,
    layout: QueueLayout,
    now_ms: int | None,
    *,
    looked_at: int = DUE_LOOKED_AT,
) -> QueueStats:
    """Per-scope counts over every shard, from the counters; see
    :class:`~worker.queue.types.ScopeStats`. One pipelined round trip.

    ``looked_at``: most due-by-now namespaces read per shard (:data:`DUE_LOOKED_AT`).

    Ages and due states are measured against the Redis server's clock (``now_ms`` is a test
    hook), the same clock that stamped them.
    """
    scopes = [scope.value for scope in Scope]
    hook = "" if now_ms is None else now_ms
    calls = [
        SCRIPTS["stats"].bind(layout, shard, now=hook, looked_at=looked_at, scopes=scopes)
        for shard in range(layout.shards)
    ]
    replies = run_pipeline(client, calls)
    pending: dict[str, int] = defaultdict(int)
    states: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    due_now: dict[str, float] = defaultdict(float)
    oldest: dict[str, int] = {}
    seen: set[str] = set()
    at_ms = 0
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
        at, due_total, looked, flat, *per_scope = reply
        at_ms = int(at)
        fields = {_s(flat[i]): int(flat[i + 1]) for i in range(0, len(flat), 2)}
        for name, value in fields.items():
            scope, _, state = name.partition(":")
            if not state and name != "v" and not name.startswith("floor_"):
                pending[scope] += value
                seen.add(scope)
            elif state in _STATES:
                states[scope][state] += value
        # Due namespaces beyond those looked at are split like the looked-at ones.
        scale = (int(due_total) / int(looked)) if int(looked) else 0.0
        for scope, ready, first in per_scope:
            name = _s(scope)
            due_now[name] += int(ready) * scale
            ms = int(float(_s(first)))
            if ms >= 0:
                oldest[name] = min(oldest.get(name, ms), ms)
    now = now_ms if now_ms is not None else at_ms
    out = {}
    for scope in sorted(seen | {s for s, c in states.items() if any(c.values())}):
        c = states[scope]
        queued = max(c["due"] - c["parked"], 0)
        due = min(round(due_now[scope]), queued)
        out[scope] = ScopeStats(
            pending=max(pending[scope], 0),  # never shown negative, even after manual edits
            waiting=queued - due,
            due=due,
            leased=max(c["leased"], 0),
            dead=max(c["dead"], 0),
            oldest_pending_age=max(now - oldest[scope], 0) / 1000 if scope in oldest else None,
        )
    return QueueStats(scopes=out)


def rebuild_stats(client: RedisClient, layout: QueueLayout) -> int:
    """Recount the set counters and oldest-entry indexes of every shard that lacks them (see
    :data:`COUNTERS_VERSION`); one pipelined round trip. Returns how many namespaces were
    recounted (0 when every shard was counted already). Each shard's recount is one script,
    so it never interleaves with a claim or an ack of that shard."""
    scopes = [scope.value for scope in Scope]
    calls = [
        SCRIPTS["stats_rebuild"].bind(layout, shard, version=COUNTERS_VERSION, scopes=scopes)
        for shard in range(layout.shards)
    ]
    recounted = 0
    for reply in run_pipeline(client, calls):
        if isinstance(reply, Exception):
            raise reply
        recounted += max(int(reply), 0)
    return recounted


def recount_stats(client: RedisClient, layout: QueueLayout, now_ms: int | None) -> QueueStats:
    """The same figures as :func:`collect_stats`, recomputed by reading every member of every
    due, leases and dead set and the oldest entry of each of their logs: O(namespaces).

    For audits and tests of the counters; ``memworker status`` and the sweep never call it.
    """
    if now_ms is None:
        now_ms = server_ms(client.time())
    pipe = client.pipeline(transaction=False)
    for shard in range(layout.shards):
        pipe.hgetall(layout.stats(shard))
        pipe.zrange(layout.due(shard), 0, -1, withscores=True)
        pipe.zrange(layout.leases(shard), 0, -1)
        pipe.zrange(layout.dead(shard), 0, -1)
    replies = pipe.execute()

    state: dict[str, str] = {}
    listed: set[str] = set()
    for shard in range(layout.shards):
        counts, due, leases, dead = replies[4 * shard : 4 * shard + 4]
        listed.update(
            _s(f)
            for f in counts
            if ":" not in _s(f) and _s(f) != "v" and not _s(f).startswith("floor_")
        )
        for ns, score in due:
            state[_s(ns)] = "due" if score <= now_ms else "waiting"
        for ns in leases:  # a parked namespace is also in `due`; leased wins
            state[_s(ns)] = "leased"
        for ns in dead:
            state[_s(ns)] = "dead"

    counts_by_scope: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for ns, where in state.items():
        counts_by_scope[scope_of(ns)][where] += 1
    pending, oldest = _read_logs(client, layout, list(state), now_ms)

    scopes = {}
    for scope in sorted(listed | set(counts_by_scope)):
        c = counts_by_scope[scope]
        scopes[scope] = ScopeStats(
            pending=pending.get(scope, 0),
            waiting=c["waiting"],
            due=c["due"],
            leased=c["leased"],
            dead=c["dead"],
            oldest_pending_age=oldest.get(scope),
        )
    return QueueStats(scopes=scopes)


def _read_logs(
    client: RedisClient, layout: QueueLayout, namespaces: list[str], now_ms: int
) -> tuple[dict[str, int], dict[str, float]]:
    """Pending entries and seconds since the oldest pending entry, per scope (a stream id
    starts with its ms). Every namespace with candidates is in the due, leases or dead set."""
    pending: dict[str, int] = defaultdict(int)
    oldest: dict[str, int] = {}
    for start in range(0, len(namespaces), PAGE):
        page = namespaces[start : start + PAGE]
        pipe = client.pipeline(transaction=False)
        for ns in page:
            pipe.xlen(layout.log(ns))
            pipe.xrange(layout.log(ns), "-", "+", count=1)
        replies = pipe.execute()
        for i, ns in enumerate(page):
            scope, entries = scope_of(ns), replies[2 * i + 1]
            pending[scope] += int(replies[2 * i])
            if entries:
                ms = int(_s(entries[0][0]).partition("-")[0])
                oldest[scope] = min(oldest.get(scope, ms), ms)
    return pending, {scope: max(now_ms - ms, 0) / 1000 for scope, ms in oldest.items()}


class ScriptRunner:
    """Runs the queue's scripts (and reads the server's clock) on ``redis``."""

    def __init__(self, redis: RedisClient, layout: QueueLayout) -> None:
        self.redis = redis
        self.layout = layout
        #: How errors name this Redis (its password redacted).
        self.where = where_of(redis)

    def run(self, name: str, **args: Value) -> Any:
        """Script ``name`` with ``args`` by name, KEYS derived from its ``namespace``."""
        return self.call(*SCRIPTS[name].bind(self.layout, **args))

    def call(self, script: LuaScript, keys: Args, args: Args) -> Any:
        """One script call; a Redis failure raised as the MemworkerError that names it."""
        try:
            return call_script(self.redis, script, keys, args)
        except REDIS_FAILURES as exc:
            raise translate(exc, self.where) from exc

    def pipeline(self, calls: Sequence[Call]) -> list[Any]:
        """Many script calls in one round trip; per-call errors come back translated."""
        try:
            results = run_pipeline(self.redis, calls)
        except REDIS_FAILURES as exc:
            raise translate(exc, self.where) from exc
        return [translate(r, self.where) if isinstance(r, Exception) else r for r in results]

    def server_ms(self) -> int:
        """The Redis server's clock (epoch ms): the queue's only clock."""
        try:
            return server_ms(self.redis.time())
        except REDIS_FAILURES as exc:
            raise translate(exc, self.where) from exc
