"""Fixtures and helpers for the operator CLI tests (this module holds no tests itself).

Every test runs the real ``memworker`` app through Typer's CliRunner against real Redis (its
own key prefix) and a real database (SQLite and PostgreSQL via ``database_url``), with its own
data directory, so the files sink is a folder of the test.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from typer.testing import CliRunner

from worker.cli.app import app
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.runtime.container import Runtime, build_runtime
from worker.settings import Settings
from worker.store.memory import MemoryStore


@dataclass(frozen=True)
class Ran:
    """One CLI invocation's exit code and output."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@dataclass
class Ops:
    """One test's deployment: the CLI environment and direct handles on what it talks to."""

    env: dict[str, str]
    settings: Settings
    queue: RedisQueue
    store: MemoryStore
    redis: redis.Redis
    user: str

    def __call__(self, *args: str, input: str | None = None, **env: str) -> Ran:
        result = CliRunner().invoke(app, list(args), env={**self.env, **env}, input=input)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return Ran(result.exit_code, result.stdout, result.stderr)

    @property
    def files_dir(self) -> Path:
        return self.settings.effective_files_dir

    def sink_file(self, namespace_dirs: str, path: str) -> Path:
        """The files sink's copy, e.g. ``sink_file("user/u1/_default", "/memories/x.md")``."""
        return self.files_dir / namespace_dirs / path.lstrip("/")

    def enqueue(self, text: str, *, user: str | None = None, **fields: Any) -> str:
        """Queue a candidate as the hot path would; returns its id."""
        candidate = make_candidate(
            user_id=user or self.user, trace_id=f"t-{uuid.uuid4().hex[:8]}", text=text, **fields
        )
        self.queue.enqueue(candidate)
        return candidate.id

    def runtime(self) -> Runtime:
        """A worker's runtime on the same deployment (for "another worker" in a test)."""
        return build_runtime(self.settings)


def make_ops(
    *,
    database_url: str,
    redis_url: str,
    key_prefix: str,
    data_dir: Path,
    client: redis.Redis,
    **extra_env: str,
) -> Iterator[Ops]:
    env = {
        "MEMWORKER_REDIS_URL": redis_url,
        "MEMWORKER_DATABASE_URL": database_url,
        "MEMWORKER_KEY_PREFIX": key_prefix,
        "MEMWORKER_DATA_DIR": str(data_dir),
        "MEMWORKER_LANGGRAPH_URL": "",
        **extra_env,
    }
    settings = Settings(
        redis_url=redis_url,
        database_url=database_url,
        key_prefix=key_prefix,
        data_dir=data_dir,
        **{k.removeprefix("MEMWORKER_").lower(): json.loads(v) for k, v in extra_env.items()},
    )
    # A shared server database is migrated by `memworker db upgrade` before anything runs.
    store = MemoryStore.from_url(database_url, create=True)
    try:
        yield Ops(
            env=env,
            settings=settings,
            queue=RedisQueue(client, settings.for_queue),
            store=store,
            redis=client,
            user="u" + uuid.uuid4().hex[:10],
        )
    finally:
        store.dispose()


@pytest.fixture
def ops(
    database_url: str, redis_url: str, key_prefix: str, tmp_path: Path, redis_client: redis.Redis
) -> Iterator[Ops]:
    """The CLI against real Redis and each database (SQLite, PostgreSQL)."""
    yield from make_ops(
        database_url=database_url,
        redis_url=redis_url,
        key_prefix=key_prefix,
        data_dir=tmp_path / "data",
        client=redis_client,
    )


def redis_keys(client: redis.Redis, key_prefix: str) -> list[str]:
    """Every key of this test's deployment."""
    return sorted(k.decode() for k in client.scan_iter(match=f"{key_prefix}:*", count=1000))
