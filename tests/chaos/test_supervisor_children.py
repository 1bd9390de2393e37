"""A supervisor's children end whatever state they are in: when it is SIGKILLed (the kernel's
PDEATHSIG), where that is missing (the parent-pid watchdog), and on a normal stop (SIGTERM
escalates to SIGKILL of the child's whole group after the grace period). Every child here
ignores SIGTERM and has a child of its own, as a Celery lane stuck in its shutdown would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Bounds every wait; polling ends as soon as the state is reached.
DEADLINE_SECONDS = 30.0

#: A child that ignores SIGTERM, starts a grandchild in its own process group, writes both
#: pids to ``argv[1]`` and then waits forever.
STUBBORN = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    {before}
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    with open(sys.argv[1] + ".tmp", "w") as out:
        out.write(f"{{os.getpid()}} {{grandchild.pid}}")
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    while True:
        time.sleep(1)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:  # a zombie has exited; only its parent's wait is missing
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for(predicate: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


#: Pids the stubborn children wrote, ended at each test's teardown whatever the test found.
_STARTED: list[int] = []


def _pids(path: Path) -> list[int]:
    _wait_for(path.exists, "the child to start")
    pids = [int(p) for p in path.read_text().split()]
    _STARTED.extend(pids)
    return pids


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Callable[[str], subprocess.Popen[bytes]]]:
    """Start a Python process running ``code`` (a supervisor, or a plain parent)."""
    started: list[subprocess.Popen[bytes]] = []

    def start(code: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tmp_path)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    while _STARTED:  # a test that failed leaves nothing running
        pid = _STARTED.pop()
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _supervisor(pid_file: Path, grace: float = 30.0) -> str:
    child = STUBBORN.format(before="")
    return textwrap.dedent(
        f"""
        import sys
        from worker.runtime.processes import Child, supervise
        argv = [sys.executable, "-c", {child!r}, {str(pid_file)!r}]
        sys.exit(supervise([Child("stubborn", argv)], grace_seconds={grace}))
        """
    )


def test_a_sigkilled_supervisors_child_ends_although_it_ignores_sigterm(
    host: Callable[[str], subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    supervisor = host(_supervisor(tmp_path / "pids"))
    child, _ = _pids(tmp_path / "pids")

    supervisor.kill()
    supervisor.wait()

    # Its own child is not the supervisor's to end: it needs its own parent-death signal, as
    # Celery's prefork pool sets (the lanes' default thread pool has none).
    _wait_for(lambda: not _alive(child), f"orphan {child} to end")


def test_without_pdeathsig_the_watchdog_ends_an_orphan_and_its_group(
    host: Callable[[str], subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    # A plain parent (no PR_SET_PDEATHSIG, as on systems without it): only the watchdog acts.
    watchdog = (
        "from worker.runtime.processes import watch_parent\n"
        "watch_parent(os.getppid(), grace_seconds=0.5, poll_seconds=0.05)"
    )
    child_code = STUBBORN.format(before=watchdog)
    pid_file = tmp_path / "pids"
    parent = host(
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', {child_code!r}, {str(pid_file)!r}],"
        " process_group=0)\n"
        "time.sleep(3600)"
    )
    child, grandchild = _pids(pid_file)

    parent.kill()
    parent.wait()

    _wait_for(lambda: not _alive(child), f"orphan {child} to end")
    _wait_for(lambda: not _alive(grandchild), f"its child {grandchild} to end")


def test_a_stop_kills_a_child_that_ignores_sigterm_and_its_group_after_the_grace(
    host: Callable[[str], subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    supervisor = host(_supervisor(tmp_path / "pids", grace=0.5))
    child, grandchild = _pids(tmp_path / "pids")

    supervisor.send_signal(signal.SIGTERM)

    assert supervisor.wait(timeout=DEADLINE_SECONDS) == 0
    _wait_for(lambda: not _alive(child), f"child {child} to be killed")
    _wait_for(lambda: not _alive(grandchild), f"its child {grandchild} to be killed")


def test_the_watchdog_ignores_a_supervisor_pid_that_is_not_its_parent(
    host: Callable[[str], subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    # A grandchild inheriting the variable must not take itself for an orphan.
    code = (
        "import os\n"
        "os.environ['MEMWORKER_SUPERVISOR_PID'] = '1'\n"
        "from worker.runtime.processes import watch_supervisor_from_env\n"
        "assert watch_supervisor_from_env() is None\n"
        "assert 'MEMWORKER_SUPERVISOR_PID' not in os.environ\n"
    )
    assert host(code).wait(timeout=DEADLINE_SECONDS) == 0


def test_a_stop_deadline_ends_a_process_and_its_group_that_hang_in_their_shutdown(
    host: Callable[[str], subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    # A lane run on its own, in a shutdown that never ends: nobody but itself can end it.
    deadline = "from worker.runtime.processes import stop_within\nstop_within(0.5)"
    stubborn = STUBBORN.format(before=deadline)
    pid_file = tmp_path / "pids"
    parent = host(
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', {stubborn!r}, {str(pid_file)!r}],"
        " process_group=0)\n"
        "time.sleep(3600)"
    )
    child, grandchild = _pids(pid_file)

    _wait_for(lambda: not _alive(child), f"{child} to end at its deadline")
    _wait_for(lambda: not _alive(grandchild), f"its child {grandchild} to end with it")
    assert parent.poll() is None  # a deadline ends its own process, nothing above it
