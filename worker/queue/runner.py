"""The queue's script calls on one Redis client, each failure raised as the error that names
it: what the worker's side (:class:`~worker.queue.redis_queue.RedisQueue`) and the operators'
side (:class:`~worker.queue.admin.QueueAdmin`) share.

>>> from worker.queue.keys import QueueLayout
>>> import redis
>>> runner = ScriptRunner(redis.Redis(), QueueLayout("mw", 16))
>>> runner.where
'redis://localhost:6379/0'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from worker.queue.connect import REDIS_FAILURES, RedisClient
from worker.queue.evalsha import call_script, run_pipeline
from worker.queue.failures import translate, where_of
from worker.queue.keys import QueueLayout
from worker.queue.scripts import SCRIPTS, Args, Call, LuaScript, Value
from worker.queue.stats import server_ms


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
