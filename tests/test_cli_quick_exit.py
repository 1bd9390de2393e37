"""The console script ends its process as soon as the command is done (worker.cli.quick_exit),
and nothing a command's caller can see changes: output, status, atexit handlers, threads.

Each test runs the entry point in a fresh interpreter; the control runs ``main()``, whose
``SystemExit`` ends the process through CPython's own teardown.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

#: A Redis that is not there: commands that need one fail at once, touching nothing.
NO_REDIS = "redis://127.0.0.1:1/0"

#: Runs ``memworker <argv[1:]>`` through the function named by ``ENTRY`` (``console``, the
#: console script, or ``main``, which leaves the ending to CPython).
_RUN = """
import sys
sys.argv = ["memworker", *sys.argv[1:]]
from worker.cli import app
{setup}
getattr(app, "{entry}")()
"""


def _run(entry: str, *args: str, setup: str = "") -> subprocess.CompletedProcess[str]:
    code = _RUN.format(entry=entry, setup=setup)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
        check=False,
    )


def _env(**extra: str) -> dict[str, str]:
    """The caller's environment without its MEMWORKER_* settings, with no Redis."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")}
    return kept | {"MEMWORKER_REDIS_URL": NO_REDIS} | extra


@pytest.mark.parametrize(
    "args",
    [["--help"], ["--version"], ["no-such-command"], ["status"], ["status", "--json"]],
    ids=["help", "version", "unknown-command", "status-without-redis", "status-json"],
)
def test_the_console_script_prints_and_exits_exactly_as_main_does(args: list[str]) -> None:
    ours, pythons = _run("console", *args), _run("main", *args)
    assert (ours.returncode, ours.stdout, ours.stderr) == (
        pythons.returncode,
        pythons.stdout,
        pythons.stderr,
    )


def test_the_console_script_skips_the_interpreter_teardown() -> None:
    # An object held by a module global is destroyed by CPython's teardown, and only there.
    setup = (
        "import os\n"
        "class Witness:\n"
        "    def __del__(self): os.write(2, b'torn down')\n"
        "witness = Witness()"
    )
    assert "torn down" in _run("main", "--version", setup=setup).stderr
    ended = _run("console", "--version", setup=setup)
    assert ended.returncode == 0
    assert ended.stdout.startswith("memworker ")
    assert "torn down" not in ended.stderr


def test_atexit_handlers_still_run_after_the_command() -> None:
    setup = "import atexit, os\natexit.register(lambda: os.write(1, b'handler ran'))"
    ended = _run("console", "--help", setup=setup)
    assert ended.returncode == 0
    assert ended.stdout.rstrip().endswith("handler ran")


def test_a_running_thread_is_waited_for_as_python_would() -> None:
    # The thread blocks on standard input until the command has printed its line: when the
    # command ends, the thread is still running, so the process must wait for it.
    setup = (
        "import threading\n"
        "def echo(): print('thread read ' + sys.stdin.readline().strip(), flush=True)\n"
        "threading.Thread(target=echo).start()"
    )
    with subprocess.Popen(
        [sys.executable, "-c", _RUN.format(entry="console", setup=setup), "--version"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(PYTHONUNBUFFERED="1"),
    ) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("memworker ")
        proc.stdin.write("go\n")
        proc.stdin.close()
        assert proc.stdout.read() == "thread read go\n"
        assert proc.wait(timeout=60) == 0


@pytest.mark.parametrize("entry", ["console", "main"])
def test_an_output_whose_reader_is_gone_ends_with_pythons_status_120(entry: str) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read: the buffered version line cannot be flushed
    try:
        ended = subprocess.run(
            [sys.executable, "-c", _RUN.format(entry=entry, setup=""), "--version"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=60,
            env={k: v for k, v in _env().items() if k != "PYTHONUNBUFFERED"},
            check=False,
        )
    finally:
        os.close(write_end)
    assert ended.returncode == 120
