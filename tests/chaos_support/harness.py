"""Shared machinery of the chaos experiments: worker subprocesses, a throwaway database, checks.

Nothing here sleeps to synchronise: waits poll for a state (a ready file, an empty queue, an
exited process) and give up at a deadline.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

import sqlalchemy as sa

from worker.queue.redis_queue import RedisQueue
from worker.settings import Settings
from worker.store.memory import MemoryStore
from worker.store.schema import candidate_ledger, entries, file_versions, memory_files, namespaces

T = TypeVar("T")

#: How often the experiments look at the state they wait for.
POLL_SECONDS: Final = 0.01

#: The repository root, so subprocesses import ``tests.chaos_support`` and ``worker``.
ROOT: Final = Path(__file__).resolve().parents[2]


def wait_until(predicate: Callable[[], T], what: str, timeout: float) -> T:
    """Poll ``predicate`` until it is truthy; AssertionError naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(POLL_SECONDS)


def settings_env(settings: Settings) -> dict[str, str]:
    """``settings`` as the ``MEMWORKER_*`` variables a worker process reads."""
    env: dict[str, str] = {}
    for name, value in settings.model_dump(exclude_none=True).items():
        if isinstance(value, list | tuple):
            text = json.dumps([str(v) for v in value])
        else:
            text = str(value)
        env[f"MEMWORKER_{name.upper()}"] = text
    return env


@contextlib.contextmanager
def throwaway_database(server_url: str) -> Iterator[str]:
    """A new, migrated PostgreSQL database on ``server_url``; dropped afterwards."""
    name = "mwchaos_" + uuid.uuid4().hex[:12]
    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    url = sa.engine.make_url(server_url).set(database=name).render_as_string(hide_password=False)
    try:
        MemoryStore.from_url(url, create=True).dispose()
        yield url
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@dataclass
class WorkerProcess:
    proc: subprocess.Popen[bytes]
    mode: str  #: "timer" (the driver kills it) or a stage it kills itself at
    started: float
    kill_at: float | None = None  #: monotonic time the driver kills it, once it is ready

    @property
    def pid(self) -> int:
        return self.proc.pid


@dataclass
class Fleet:
    """Worker subprocesses running ``tests.chaos_support.worker_loop`` with one environment."""

    env: Mapping[str, str]
    state_dir: Path
    processes: list[WorkerProcess] = field(default_factory=list)
    exits: Counter[int] = field(default_factory=Counter)

    def start(self, mode: str = "none", *, die_on: int = 1, zombie: float = 0.0) -> WorkerProcess:
        env = {**os.environ, **self.env, "MEMWORKER_CHAOS_STATE_DIR": str(self.state_dir)}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        env["MEMWORKER_CHAOS_DIE_AT"] = mode if mode not in ("none", "timer") else ""
        env["MEMWORKER_CHAOS_DIE_ON"] = str(die_on)
        env["MEMWORKER_CHAOS_ZOMBIE"] = str(zombie)
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.chaos_support.worker_loop"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=(self.state_dir / "stderr.log").open("ab"),
        )
        worker = WorkerProcess(proc, mode, time.monotonic())
        self.processes.append(worker)
        return worker

    def ready(self, worker: WorkerProcess) -> bool:
        return (self.state_dir / f"{worker.pid}.ready").exists()

    def reap(self) -> list[WorkerProcess]:
        """Forget the processes that exited (counting exit codes); return them."""
        gone = [w for w in self.processes if w.proc.poll() is not None]
        for worker in gone:
            self.exits[worker.proc.returncode] += 1
            self.processes.remove(worker)
        return gone

    def kill(self, worker: WorkerProcess) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGKILL)
        worker.proc.wait(timeout=30)

    def stop_all(self) -> None:
        """SIGTERM every worker (they stop between batches), SIGKILL any that lingers."""
        for worker in self.processes:
            with contextlib.suppress(ProcessLookupError):
                worker.proc.send_signal(signal.SIGTERM)
        for worker in self.processes:
            try:
                worker.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill(worker)
        self.reap()

    def outcomes(self) -> Counter[str]:
        """Outcome → count over every consolidation every worker logged."""
        counts: Counter[str] = Counter()
        for log in self.state_dir.glob("*.log"):
            if log.name == "stderr.log":
                continue
            for line in log.read_text(encoding="utf-8").splitlines():
                record = json.loads(line)
                counts[record["outcome"]] += 1
                counts["zombie"] += bool(record.get("zombie"))
        return counts

    def stderr(self) -> str:
        path = self.state_dir / "stderr.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def pending_ids(queue: RedisQueue, namespaces_: Iterable[str]) -> dict[str, list[str]]:
    """Namespace → ids of its candidates still in the queue (leased or dead-lettered too)."""
    return {ns: [c.id for _, c in queue.pending(ns, limit=1_000_000)] for ns in namespaces_}


def queue_settled(queue: RedisQueue, namespaces_: Iterable[str]) -> bool:
    """True when every namespace's log is empty, or it is dead-lettered."""
    dead = {d.namespace for d in queue.dead_letters()}
    return all(ns in dead or queue.redis.xlen(queue.layout.log(ns)) == 0 for ns in namespaces_)


@dataclass(frozen=True)
class StoreAudit:
    """What the database holds, per namespace, for the nothing-lost/no-duplicate checks."""

    ledger: dict[str, list[str]]  #: namespace → candidate ids in the ledger (with repeats)
    entry_candidates: dict[str, list[str]]  #: namespace → candidate ids over all its entries
    active_texts: dict[str, list[str]]  #: namespace → texts of its active entries
    file_versions: dict[tuple[str, str], list[tuple[int, int]]]  #: (ns, path) → (v, ns version)
    current_files: dict[tuple[str, str], str]


def audit_store(database_url: str) -> StoreAudit:
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as conn:
            key = {row.id: row.key for row in conn.execute(sa.select(namespaces))}
            ledger: dict[str, list[str]] = {}
            for row in conn.execute(sa.select(candidate_ledger)):
                ledger.setdefault(key[row.namespace_id], []).append(row.candidate_id)
            entry_candidates: dict[str, list[str]] = {}
            active: dict[str, list[str]] = {}
            for row in conn.execute(sa.select(entries)):
                ns = key[row.namespace_id]
                entry_candidates.setdefault(ns, []).extend(row.candidate_ids)
                if row.invalid_at is None:
                    active.setdefault(ns, []).append(row.text)
            versions: dict[tuple[str, str], list[tuple[int, int]]] = {}
            current: dict[tuple[str, str], str] = {}
            stmt = (
                sa.select(
                    memory_files.c.namespace_id,
                    memory_files.c.path,
                    memory_files.c.current_version,
                    file_versions.c.version,
                    file_versions.c.namespace_version,
                    file_versions.c.content,
                )
                .join(file_versions, file_versions.c.file_id == memory_files.c.id)
                .order_by(file_versions.c.id)
            )
            for row in conn.execute(stmt):
                where = (key[row.namespace_id], row.path)
                versions.setdefault(where, []).append((row.version, row.namespace_version))
                if row.version == row.current_version:
                    current[where] = row.content
    finally:
        engine.dispose()
    return StoreAudit(ledger, entry_candidates, active, versions, current)


def version_problems(audit: StoreAudit) -> list[str]:
    """Files whose versions are not 1, 2, 3, … in commit order with growing namespace versions."""
    problems = []
    for (ns, path), rows in audit.file_versions.items():
        numbers = [v for v, _ in rows]
        ns_versions = [n for _, n in rows]
        if numbers != list(range(1, len(rows) + 1)):
            problems.append(f"{ns} {path}: versions {numbers}")
        if any(b <= a for a, b in itertools.pairwise(ns_versions)):
            problems.append(f"{ns} {path}: namespace versions {ns_versions}")
    return problems


def duplicates(values: Iterable[str]) -> dict[str, int]:
    return {v: n for v, n in Counter(values).items() if n > 1}
