"""`memworker run`, the zero-setup mode, as a newcomer uses it: a real subprocess."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import redis

from worker.errors import StoreError
from worker.queue.client import MemoryClient
from worker.runtime.processes import embedded_redis
from worker.service.schedules import HEARTBEAT_FILENAME
from worker.settings import Settings
from worker.store.memory import MemoryStore

#: Bounds every wait on the subprocess; polling ends as soon as the state is reached.
DEADLINE_SECONDS = 60.0

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], what: str) -> T:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; only its parent's wait is missing.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


@contextlib.contextmanager
def speaking(argv: list[str], env: dict[str, str]) -> Iterator[list[str]]:
    """Run ``python -m worker <argv>``; yield the lines it has printed so far.

    On the way out it gets a Ctrl-C and :data:`DEADLINE_SECONDS` to stop. One that does not
    is killed and the test fails saying so: left running, it would hold the test session open
    after its last test (the reader of its output waits for it).
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker", *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    out = proc.stdout
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(out.readline, "")), daemon=True)
    reader.start()
    try:
        yield lines
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=DEADLINE_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(
                f"{argv} still ran {DEADLINE_SECONDS:.0f} s after Ctrl-C"
            ) from None
        finally:
            reader.join(timeout=DEADLINE_SECONDS)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "memworker"


@pytest.fixture
def run_process(data_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")}
    env |= {
        "MEMWORKER_DATA_DIR": str(data_dir),
        "MEMWORKER_DEBOUNCE_SECONDS": "0.2",
        "MEMWORKER_MAX_WAIT_SECONDS": "1",
        "MEMWORKER_SWEEP_INTERVAL_SECONDS": "0.2",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker", "run", "--loglevel", "WARNING"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def open_store(settings: Settings) -> MemoryStore | None:
    try:
        return MemoryStore.from_url(settings.effective_database_url)
    except StoreError:
        return None  # `memworker run` has not created it yet


def embedded_redis_pid(data_dir: Path) -> int:
    sock = data_dir / "redis.sock"
    wait_for(sock.exists, "the embedded Redis socket")
    client = redis.Redis(unix_socket_path=str(sock))
    try:
        return int(wait_for(lambda: client.info("server")["process_id"], "redis to answer"))
    finally:
        client.close()


def test_run_consolidates_an_enqueued_memory_with_no_services_configured(
    run_process: subprocess.Popen[bytes], data_dir: Path
) -> None:
    embedded_redis_pid(data_dir)
    settings = Settings(data_dir=data_dir, debounce_seconds=0.2, max_wait_seconds=1)
    with MemoryClient(settings) as client:
        client.enqueue(user_id="u1", trace_id="t1", text="I prefer short answers")
    store = wait_for(lambda: open_store(settings), "the embedded store to be migrated")
    try:
        files = wait_for(lambda: store.current_files("user:u1"), "the consolidated memory file")
    finally:
        store.dispose()
    assert "I prefer short answers" in files["/memories/preferences.md"]
    sink_file = data_dir / "files" / "user" / "u1" / "_default" / "memories" / "preferences.md"
    wait_for(sink_file.exists, "the files sink to publish the memory")


def test_ctrl_c_stops_run_and_its_embedded_redis(
    run_process: subprocess.Popen[bytes], data_dir: Path
) -> None:
    redis_pid = embedded_redis_pid(data_dir)
    run_process.send_signal(signal.SIGINT)
    assert run_process.wait(timeout=DEADLINE_SECONDS) == 130  # the shell's "interrupted"
    wait_for(lambda: not pid_alive(redis_pid), "the embedded redis-server to stop")
    assert not (data_dir / "redis.sock").exists()


def children_of(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended while we looked
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def test_a_killed_run_leaves_no_process_behind(
    run_process: subprocess.Popen[bytes], data_dir: Path
) -> None:
    redis_pid = embedded_redis_pid(data_dir)

    # The embedded beat is a child process too; wait until it is up (redis + beat).
    def redis_and_beat() -> set[int] | None:
        children = children_of(run_process.pid)
        return children if len(children) >= 2 else None

    children = wait_for(redis_and_beat, "the embedded beat process")
    assert redis_pid in children
    run_process.kill()
    run_process.wait()
    for child in children:
        wait_for(lambda child=child: not pid_alive(child), f"orphan {child} to die")


#: SIGTERM's bit in /proc/<pid>/status SigCgt: set once Celery installed its handler.
SIGTERM_CAUGHT = 1 << (signal.SIGTERM - 1)
#: What `memworker run` starts: the embedded Redis, three lanes and beat.
RUN_CHILDREN = 5


def catches_sigterm(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) & SIGTERM_CAUGHT)


def test_a_killed_run_leaves_no_lane_behind_once_the_lanes_handle_sigterm(
    run_process: subprocess.Popen[bytes], data_dir: Path
) -> None:
    # The state an orphaned lane was once found in, 16 minutes later: Celery up, its SIGTERM
    # handler installed (a warm shutdown against the dead embedded broker would never end).
    redis_pid = embedded_redis_pid(data_dir)

    def all_up() -> set[int] | None:
        children = children_of(run_process.pid)
        lanes = children - {redis_pid}
        if len(children) < RUN_CHILDREN or not all(catches_sigterm(p) for p in lanes):
            return None
        return children | {g for c in children for g in children_of(c)}

    everything = wait_for(all_up, "every lane and beat to handle SIGTERM")
    run_process.kill()
    run_process.wait()

    deadline = time.monotonic() + DEADLINE_SECONDS
    while (left := {p for p in everything if pid_alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == set(), f"still alive after {DEADLINE_SECONDS:.0f} s: {sorted(left)}"


def test_a_second_run_on_the_same_data_dir_is_refused(
    run_process: subprocess.Popen[bytes], data_dir: Path
) -> None:
    embedded_redis_pid(data_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")}
    second = subprocess.run(
        [sys.executable, "-m", "worker", "run"],
        env=env | {"MEMWORKER_DATA_DIR": str(data_dir)},
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
        check=False,
    )
    assert second.returncode == 2
    assert "already running" in second.stderr


#: What `memworker run` may print before it is ready: one summary, then a line per lane and
#: beat's lock line (the issue's bound; Celery's banners alone were about 110 lines).
READY_LINES_MAX = 15


def test_run_prints_one_summary_and_a_line_per_lane_before_it_is_ready(data_dir: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")}
    with speaking(
        ["run", "--loglevel", "INFO"], env | {"MEMWORKER_DATA_DIR": str(data_dir)}
    ) as lines:
        wait_for(
            lambda: sum("lane ready" in line for line in list(lines)) == 3,
            "the three lanes to say they are ready",
        )
        before_ready = list(lines)
    text = "".join(before_ready)

    assert len(before_ready) <= READY_LINES_MAX, text
    for part in ("lanes:", "model:", "sinks:", "database:", "redis:"):
        assert part in text
    for noise in ("SecurityWarning", "-------------- [queues]", "mingle", "Connected to"):
        assert noise not in text


#: What a Redis outage may add to `run`'s output, however long it lasts: the supervisor's
#: "unreachable" and "answers again", and beat's "holding the lock" once Redis is back.
OUTAGE_LINES_MAX = 3


def test_a_redis_outage_is_logged_once_when_it_starts_and_once_when_it_ends(
    tmp_path: Path,
) -> None:
    redis_dir, data = tmp_path / "redis", tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")}
    env |= {"MEMWORKER_DATA_DIR": str(data), "MEMWORKER_BEAT_LOCK_SECONDS": "3"}
    # Each Redis is entered before the process and left after it: it stops with Redis up.
    with contextlib.ExitStack() as outage, contextlib.ExitStack() as back:
        url = outage.enter_context(embedded_redis(redis_dir, appendonly=False))
        run = ["run", "--loglevel", "INFO"]
        with speaking(run, env | {"MEMWORKER_REDIS_URL": url}) as lines:
            wait_for(lambda: sum("lane ready" in x for x in list(lines)) == 3, "three lanes")
            wait_for(lambda: any("holding" in x for x in list(lines)), "beat's lock")
            before = len(lines)
            outage.close()  # Redis is gone
            wait_for(lambda: any("unreachable" in x for x in lines[before:]), "the outage line")
            _beat_loops(data / HEARTBEAT_FILENAME, 8)  # eight seconds: Celery retried meanwhile
            back.enter_context(embedded_redis(redis_dir, appendonly=False))
            wait_for(lambda: any("answers again" in x for x in lines[before:]), "the end")
            wait_for(lambda: any("holding" in x for x in lines[before:]), "beat's lock")
            during = lines[before:]
    text = "".join(during)

    assert len(during) <= OUTAGE_LINES_MAX, text
    assert "Traceback" not in text


def _beat_loops(heartbeat: Path, count: int) -> None:
    """Wait until beat has looped ``count`` times (its heartbeat changes every loop)."""
    seen: set[str] = set()

    def looped() -> bool:
        with contextlib.suppress(OSError):
            seen.add(heartbeat.read_text())
        return len(seen) >= count

    wait_for(looped, f"{count} beat loops")


def test_a_lane_on_its_own_logs_a_broker_outage_in_two_lines(tmp_path: Path) -> None:
    redis_dir = tmp_path / "redis"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")}
    env |= {"MEMWORKER_DATA_DIR": str(tmp_path / "data")}
    with contextlib.ExitStack() as outage, contextlib.ExitStack() as back:
        url = outage.enter_context(embedded_redis(redis_dir, appendonly=False))
        lane = ["worker", "--lanes", "sweep", "--loglevel", "INFO"]
        with speaking(lane, env | {"MEMWORKER_REDIS_URL": url}) as lines:
            wait_for(lambda: any("lane ready" in x for x in list(lines)), "the lane")
            before = len(lines)
            outage.close()
            wait_for(lambda: any("unreachable" in x for x in lines[before:]), "the outage line")
            started = time.monotonic()
            # Celery retries after 2, 4 and 6 s: three retries, each once three lines.
            wait_for(lambda: time.monotonic() - started > 13, "three reconnect attempts")
            back.enter_context(embedded_redis(redis_dir, appendonly=False))
            wait_for(lambda: any("answers again" in x for x in lines[before:]), "the end")
            during = lines[before:]
    text = "".join(during)

    assert [x for x in during if x.strip()] == [x for x in during if "broker" in x], text
    assert len(during) == 2, text
