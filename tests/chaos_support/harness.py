"""Shared machinery of the chaos experiments: worker subprocesses, a throwaway database, checks.

Nothing here sleeps to synchronise: waits poll for a state (a ready file, an empty queue, an
exited process) and give up at a deadline.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

import sqlalchemy as sa

from tests.chaos_support.worker_loop import forked_main
from tests.support.skewed import faketime
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


class Proc(Protocol):
    """What the fleet needs of a worker process: ``subprocess.Popen`` has it, and so does
    :class:`ForkedProcess`."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...


#: Modules a forkserver imports once, so a forked worker starts in milliseconds instead of
#: the ~1-2 s an interpreter takes to import SQLAlchemy, redis-py and the worker.
FORKSERVER_PRELOAD: Final = ["tests.chaos_support.worker_loop"]


class ForkedProcess:
    """A worker forked from a preloaded forkserver (``multiprocessing``), seen as a ``Popen``.

    The child is a real, separate process (its own sockets, connections and pid), SIGKILLed
    for real; only the imports were done before the fork.
    """

    def __init__(self, process: BaseProcess) -> None:
        self.process = process

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.exitcode

    def poll(self) -> int | None:
        return self.process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self.process.join(timeout)
        if self.process.exitcode is None:
            raise subprocess.TimeoutExpired("forked worker", timeout or 0.0)
        return self.process.exitcode

    def send_signal(self, sig: int) -> None:
        os.kill(self.pid, sig)


def _forkserver() -> Any:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(FORKSERVER_PRELOAD)  # ignored once the server runs
    return context


@dataclass
class WorkerProcess:
    proc: Proc
    mode: str  #: "timer" (the driver kills it) or a stage it kills itself at
    started: float
    kill_at: float | None = None  #: monotonic time the driver kills it, once it is ready

    @property
    def pid(self) -> int:
        return self.proc.pid


@dataclass
class Fleet:
    """Worker subprocesses running ``tests.chaos_support.worker_loop`` with one environment.

    ``forked``: fork them from a preloaded forkserver (fast start-ups, for experiments that
    kill and replace workers by the hundred) instead of starting a fresh interpreter each.
    """

    env: Mapping[str, str]
    state_dir: Path
    forked: bool = False
    processes: list[WorkerProcess] = field(default_factory=list)
    exits: Counter[int] = field(default_factory=Counter)

    def start(self, mode: str = "none", *, die_on: int = 1, zombie: float = 0.0) -> WorkerProcess:
        env = {**os.environ, **self.env, "MEMWORKER_CHAOS_STATE_DIR": str(self.state_dir)}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        env["MEMWORKER_CHAOS_DIE_AT"] = mode if mode not in ("none", "timer") else ""
        env["MEMWORKER_CHAOS_DIE_ON"] = str(die_on)
        env["MEMWORKER_CHAOS_ZOMBIE"] = str(zombie)
        stderr = self.state_dir / "stderr.log"
        proc: Proc
        if self.forked:
            process = _forkserver().Process(target=forked_main, args=(env, str(stderr)))
            process.start()
            proc = ForkedProcess(process)
        else:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.chaos_support.worker_loop"],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr.open("ab"),
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
            code = worker.proc.returncode
            assert code is not None
            self.exits[code] += 1
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


class HostRefused(Exception):
    """A chat host's enqueue raised a MemworkerError (its class name and message)."""


@dataclass
class ChatHost:
    """A chat service's process (``tests.chaos_support.enqueuer``) with the real hot-path
    client, its clock shifted by ``offset`` under ``faketime`` (``"+1d"``, ``"-1d"``)."""

    offset: str
    proc: subprocess.Popen[str]
    believed_time: float  #: what the host's clock said at start, for checking the skew

    @classmethod
    def start(cls, offset: str, settings: Settings) -> ChatHost:
        args = [settings.redis_url or "", settings.key_prefix, str(settings.queue_shards)]
        command = [faketime(), "-f", offset, sys.executable, "-m", "tests.chaos_support.enqueuer"]
        env = {**os.environ}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        proc = subprocess.Popen(
            [*command, *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        return cls(offset, proc, float(cls._reply(proc)["time"]))

    def enqueue(self, **fields: Any) -> str:
        """The candidate id; :class:`HostRefused` when the client raised."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(fields) + "\n")
        self.proc.stdin.flush()
        reply = self._reply(self.proc)
        if "error" in reply:
            raise HostRefused(f"{reply['error']}: {reply['message']}")
        return str(reply["id"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    @staticmethod
    def _reply(proc: subprocess.Popen[str]) -> dict[str, Any]:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, f"chat host exited with {proc.wait()}"
        reply: dict[str, Any] = json.loads(line)
        return reply


def pending_ids(queue: RedisQueue, namespaces_: Iterable[str]) -> dict[str, list[str]]:
    """Namespace → ids of its candidates still in the queue (leased or dead-lettered too)."""
    return {ns: [c.id for _, c in queue.admin.pending(ns, limit=1_000_000)] for ns in namespaces_}


def queue_settled(queue: RedisQueue, namespaces_: Iterable[str]) -> bool:
    """True when every namespace's log is empty, or it is dead-lettered."""
    dead = {d.namespace for d in queue.admin.dead_letters()}
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
