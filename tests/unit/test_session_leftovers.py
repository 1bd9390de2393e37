"""A process a test starts and leaves running is killed when the session ends, and the session
fails naming it; Python's own multiprocessing helpers, which end with the interpreter, are not
leftovers. (A test's lane left running once held CI open past its last test.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Bounds the inner test session (it loads the suite's conftest: a few seconds).
SESSION_SECONDS = 120

LEAKS = """
import subprocess, sys, threading
from pathlib import Path

def test_starts_a_process_and_leaves_it_running() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                            stdout=subprocess.PIPE)
    Path(__file__).with_name("pid").write_text(str(proc.pid))
    # A thread waiting for its output, as a test's log reader does: without the kill, this
    # session would never end.
    threading.Thread(target=proc.stdout.read).start()
"""

USES_A_FORKSERVER = """
import multiprocessing

def _nothing() -> None:
    pass

def test_runs_a_function_in_a_forkserver_process() -> None:
    proc = multiprocessing.get_context("forkserver").Process(target=_nothing)
    proc.start()
    proc.join()
    assert proc.exitcode == 0
"""


def run_session(tmp_path: Path, test_code: str) -> subprocess.CompletedProcess[str]:
    test_file = tmp_path / "test_inner.py"
    test_file.write_text(test_code)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "--rootdir", str(tmp_path), str(test_file)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=SESSION_SECONDS, check=False,
    )  # fmt: skip


def test_a_process_left_running_is_killed_and_fails_the_session(tmp_path: Path) -> None:
    ran = run_session(tmp_path, LEAKS)

    assert ran.returncode == 1, ran.stdout
    assert "left running by the tests, now killed" in ran.stdout
    pid = int((tmp_path / "pid").read_text())
    assert not Path(f"/proc/{pid}").exists() or _zombie(pid)


def test_pythons_multiprocessing_helpers_are_not_leftovers(tmp_path: Path) -> None:
    ran = run_session(tmp_path, USES_A_FORKSERVER)

    assert ran.returncode == 0, ran.stdout
    assert "left running" not in ran.stdout


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True  # gone meanwhile
