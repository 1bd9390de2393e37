"""The CLI and the client start at once: parsing, ``--help`` and ``--version`` import nothing
heavy, and ``from worker import MemoryClient`` imports the hot path only.

Each check runs in a fresh interpreter and reads ``sys.modules`` after the call: a behaviour
(what got imported), not a timing. The timings are measured with the bench, not asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from worker.store.memory import MemoryStore

#: Packages an operator command pulls in only when it does real work (the worker runtime, the
#: SQL store, the model); none may load to parse a command line or print help.
HEAVY = ("celery", "kombu", "sqlalchemy", "alembic", "langchain_core", "langchain", "redis")

#: What the chat service's client must not drag in: the worker side of the system.
NOT_FOR_THE_HOT_PATH = (
    "celery",
    "kombu",
    "sqlalchemy",
    "alembic",
    "langchain_core",
    "langchain",
    "langgraph",
    "langgraph_sdk",
    "typer",
    "rich",
    "numpy",
    "regex",
    "croniter",
    # The client builds the one candidate model (worker.models) and reads the worker's own
    # settings (worker.settings.ClientSettings); nothing of the worker's side beyond them.
    "worker.store",
    "worker.service",
    "worker.runtime",
    "worker.consolidation",
    "worker.queue.redis_queue",
    "worker.queue.async_client",
)

#: What ``memworker status`` must not load: the worker runtime and the model (it only reads),
#: Alembic (a migrated database is checked with one query), LangChain and the consolidation.
NOT_FOR_STATUS = (
    "celery",
    "kombu",
    "alembic",
    "langchain_core",
    "langchain",
    "langgraph",
    "worker.runtime",
    "worker.consolidation",
    # The embedded store is SQLite's: PostgreSQL's dialect is loaded only for a PostgreSQL URL.
    "sqlalchemy.dialects.postgresql",
)

_PROBE = """
import json, sys
sys.argv = ["memworker", *json.loads(sys.argv[1])]
from worker.cli import main
try:
    main()
except SystemExit:
    pass
print("\\n" + json.dumps(sorted(sys.modules)))
"""


def _modules_after(code: str, *args: str, **settings: str) -> set[str]:
    """The modules loaded after running ``code``; ``settings`` are ``MEMWORKER_*`` variables
    (by default only a Redis that is not there, never touched)."""
    ran = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        # No MEMWORKER_* setting of the caller's.
        env={k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")}
        | {"MEMWORKER_REDIS_URL": "redis://127.0.0.1:1/0"}
        | settings,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    return set(json.loads(ran.stdout.strip().splitlines()[-1]))


def _loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(p for p in packages if any(m == p or m.startswith(p + ".") for m in modules))


@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["--help"],
        ["status", "--help"],
        ["reconcile", "--help"],
        ["worker", "--help"],
        ["scan", "--help"],
        ["dlq", "retry", "--help"],
    ],
    ids=" ".join,
)
def test_parsing_and_help_import_no_runtime_package(argv: list[str]) -> None:
    modules = _modules_after(_PROBE, json.dumps(argv))

    assert _loaded(modules, HEAVY) == []


def test_version_is_printed_without_building_the_app() -> None:
    modules = _modules_after(_PROBE, json.dumps(["--version"]))

    assert _loaded(modules, ("typer", "click", "rich", "worker.cli.app")) == []


def test_a_usage_error_is_reported_without_importing_the_runtime() -> None:
    modules = _modules_after(_PROBE, json.dumps(["reconcile", "--no-such-option"]))

    assert _loaded(modules, HEAVY) == []


def test_importing_the_client_loads_the_hot_path_only() -> None:
    code = (
        "import json, sys\nfrom worker import MemoryClient\nprint(json.dumps(sorted(sys.modules)))"
    )
    modules = _modules_after(code)

    assert "worker.queue.client" in modules
    assert _loaded(modules, NOT_FOR_THE_HOT_PATH) == []


def test_building_a_client_and_enqueueing_on_one_redis_loads_no_worker_side_module(
    single_redis_url: str, key_prefix: str
) -> None:
    code = (
        "import json, sys\nfrom worker import MemoryClient\n"
        "with MemoryClient() as client:\n"
        "    client.enqueue(user_id='u1', trace_id='t1', text='I prefer tea')\n"
        "    client.enqueue_many([{'user_id': 'u2', 'trace_id': 't2', 'text': 'Call me Sam'}])\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    modules = _modules_after(
        code, MEMWORKER_REDIS_URL=single_redis_url, MEMWORKER_KEY_PREFIX=key_prefix
    )

    assert "worker.queue.client" in modules
    assert _loaded(modules, NOT_FOR_THE_HOT_PATH) == []


def test_status_reads_a_live_deployment_without_the_runtime_alembic_or_langchain(
    single_redis_url: str, key_prefix: str, sqlite_url: str, tmp_path: Path
) -> None:
    MemoryStore.from_url(sqlite_url, create=True).dispose()  # as `memworker run` leaves it
    modules = _modules_after(
        _PROBE,
        json.dumps(["status", "--json"]),
        MEMWORKER_REDIS_URL=single_redis_url,
        MEMWORKER_KEY_PREFIX=key_prefix,
        MEMWORKER_DATABASE_URL=sqlite_url,
        MEMWORKER_DATA_DIR=str(tmp_path / "data"),
        MEMWORKER_LANGGRAPH_URL="",
    )

    assert "worker.store.memory" in modules  # it did read the store
    assert _loaded(modules, NOT_FOR_STATUS) == []


def test_the_newest_migration_read_without_alembic_is_the_one_alembic_finds() -> None:
    from alembic.script import ScriptDirectory

    from worker.store import schema as migrate

    alembic_head = ScriptDirectory.from_config(migrate.alembic_config()).get_current_head()

    assert migrate.head_revision() == alembic_head
