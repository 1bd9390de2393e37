"""Running the README (and every page of ``docs/`` and ``examples/``) as a new user would.

This module holds no tests itself. :func:`readme_blocks` reads the fenced blocks of
``README.md``, ``docs/*.md`` and ``examples/**/*.md``, each with the file and section it is in.

A *fresh home* is a temporary ``HOME`` and working directory, an environment with no
``MEMWORKER_*`` variable, and the installed ``memworker`` on ``PATH``. :func:`started_run`
starts ``memworker run`` there — the server the quick start tells the reader to start in one
terminal — and every ``console`` block is then run "in the other terminal": all its ``$``
lines in one bash session (so ``export`` and ``cd`` carry over, as they would for the
reader), each line's output (stdout and stderr, in order) compared with the lines printed
under it in the README.

The comparison is exact except for what differs per run, masked on both sides: timestamps,
candidate and trace ids, ages, and table padding (whitespace and the length of box-drawing
rules, which follow the width of the values). What the README shows was printed before any
schedule had fired; a server whose beat fires one of the bundled schedules while a test runs
(the real clock crossed 06:00 UTC, say) prints the run, so such a test is skipped, naming the
schedule and its tick (:meth:`RunningServer.skip_if_a_schedule_fired`). The schema revision
a migration reaches is compared as printed: a new migration must update the README
(``tests/unit/test_readme.py`` checks it without a server).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import pytest
import redis

from worker.service.schedules import bundled_schedules_dir, load_schedules, missed_ticks

REPO: Final = Path(__file__).resolve().parent.parent
README: Final = REPO / "README.md"
#: The user documentation beside the README whose blocks run as printed too.
DOCS: Final = REPO / "docs"
EXAMPLES: Final = REPO / "examples"

#: Bounds the wait for ``memworker run`` to answer; polling ends as soon as it does.
START_DEADLINE_SECONDS: Final = 90.0
#: Bounds one README block (every command of it, including its own ``sleep``).
BLOCK_TIMEOUT_SECONDS: Final = 600.0

FENCE: Final = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
HEADING: Final = re.compile(r"^#{2,4} (.+)$", re.MULTILINE)

#: What differs between two runs of the same block, and what it is masked as.
VOLATILE: Final = (
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:[+-]\d\d:\d\d|Z)?"), "<time>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<id>"),
    (re.compile(r"\bcli-[0-9a-f]{16}\b"), "cli-<trace>"),
    (re.compile(r"\bbeat: \S+ holds the beat lock"), "beat: <holder> holds the beat lock"),
    (re.compile(r"\b(?:\d+h\d\dm|\d+m\d\ds|\d+s)\b"), "<age>"),
    (re.compile(r"[─━═]+"), "─"),
    (re.compile(r"[ \t]+"), " "),
)

STEP_MARK: Final = "@@readme-step"
RC_MARK: Final = "@@readme-rc"


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, text, section and first line number, and the file it is
    in (relative to the repository)."""

    lang: str
    text: str
    section: str
    line: int
    source: str = "README.md"

    @property
    def first_line(self) -> str:
        return next((line for line in self.text.splitlines() if line.strip()), "")


def doc_files() -> list[Path]:
    """The README, then every page of ``docs/``, then every page of ``examples/``."""
    return [README, *sorted(DOCS.glob("*.md")), *sorted(EXAMPLES.rglob("*.md"))]


def readme_blocks(text: str | None = None) -> list[Block]:
    """Every fenced block of the documentation (or of ``text``, read as the README), in order."""
    if text is not None:
        return _blocks(text, "README.md")
    return [
        block
        for path in doc_files()
        for block in _blocks(path.read_text(encoding="utf-8"), path.relative_to(REPO).as_posix())
    ]


def _blocks(text: str, source: str) -> list[Block]:
    headings = [(m.start(), m.group(1)) for m in HEADING.finditer(text)]
    found = []
    for m in FENCE.finditer(text):
        section = next((h for start, h in reversed(headings) if start < m.start()), "")
        line = text.count("\n", 0, m.start()) + 1
        found.append(Block(m.group(1), m.group(2), section, line, source))
    return found


@dataclass
class Step:
    """One ``$`` line and the output the README shows under it."""

    command: str
    expected: list[str] = field(default_factory=list)


def console_steps(block: Block) -> list[Step]:
    steps: list[Step] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            steps.append(Step(line[2:]))
        elif steps:
            steps[-1].expected.append(line)
        elif line.strip():
            raise AssertionError(f"{block.source}:{block.line}: output before any command: {line}")
    return steps


def normalise(lines: list[str]) -> list[str]:
    """The lines with what differs per run masked; blank lines dropped."""
    out = []
    for line in lines:
        masked = line
        for pattern, mask in VOLATILE:
            masked = pattern.sub(mask, masked)
        if masked.strip():
            out.append(masked.strip())
    return out


@dataclass(frozen=True)
class Ran:
    """What one ``$`` line printed and its exit status."""

    command: str
    expected: list[str]
    output: list[str]
    code: int


@dataclass
class FreshHome:
    """A new user's machine: an empty home and working directory, the package installed."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def cwd(self) -> Path:
        return self.root / "work"

    @property
    def data_dir(self) -> Path:
        return self.home / ".memworker"

    @property
    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TZ", "TMPDIR")}
        bin_dir = Path(sys.executable).parent
        return {
            **keep,
            "HOME": str(self.home),
            "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
            # A terminal shows stdout and stderr in the order they were written; so must a pipe.
            "PYTHONUNBUFFERED": "1",
        }

    def make(self) -> FreshHome:
        self.home.mkdir(parents=True)
        self.cwd.mkdir(parents=True)
        return self

    def run_console(self, block: Block) -> list[Ran]:
        """Run every ``$`` line of ``block`` in one bash session here."""
        steps = console_steps(block)
        script = ["exec 2>&1"]
        for i, step in enumerate(steps):
            script.append(f"echo {STEP_MARK} {i}")
            script.append(step.command)
            script.append(f"echo {RC_MARK} {i} $?")
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-c", "\n".join(script)],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_SECONDS,
            check=False,
        )
        return _split(steps, done.stdout)

    def save_python(self, block: Block) -> Path | None:
        """A python block whose first line is ``# name.py …`` is a file the reader saves."""
        match = re.match(r"#\s*([\w.]+\.py)\b", block.first_line)
        if match is None:
            return None
        path = self.cwd / match.group(1)
        path.write_text(block.text, encoding="utf-8")
        return path

    def run_python(self, block: Block, *, timeout: float = BLOCK_TIMEOUT_SECONDS) -> Ran:
        done = subprocess.run(
            [sys.executable, "-c", block.text],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Ran(block.first_line, [], (done.stdout + done.stderr).splitlines(), done.returncode)


def _split(steps: list[Step], output: str) -> list[Ran]:
    ran: list[Ran] = []
    current: list[str] = []
    for line in output.splitlines():
        if line.startswith(STEP_MARK):
            current = []
        elif line.startswith(RC_MARK):
            _, index, code = line.split()
            step = steps[int(index)]
            ran.append(Ran(step.command, step.expected, current, int(code)))
        else:
            current.append(line)
    if len(ran) != len(steps):
        raise AssertionError(f"the block stopped after {len(ran)} of {len(steps)} commands")
    return ran


def mismatches(ran: list[Ran]) -> list[str]:
    """A readable report of each command whose output differs from the README's."""
    problems = []
    for r in ran:
        if normalise(r.expected) != normalise(r.output):
            problems.append(
                f"$ {r.command}  (exit {r.code})\n--- README\n" + "\n".join(r.expected)
                + "\n--- printed\n" + "\n".join(r.output)
            )  # fmt: skip
    return problems


@dataclass
class RunningServer:
    """``memworker run`` in a fresh home, and where its output goes."""

    home: FreshHome
    process: subprocess.Popen[bytes]
    log: Path
    #: When the server was started (the real clock, which its beat reads).
    started: datetime = field(default_factory=lambda: datetime.now(UTC))

    def skip_if_a_schedule_fired(self) -> None:
        """See :func:`skip_if_a_schedule_fired`, since this server started."""
        skip_if_a_schedule_fired(self.started)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def schedules_fired(since: datetime, until: datetime) -> list[str]:
    """Each bundled schedule's ticks in ``(since, until]``, as ``"<name> at <tick>"``: the
    fires of a beat that started at ``since``."""
    return [
        f"{spec.name} at {tick:%Y-%m-%d %H:%M} UTC"
        for spec in load_schedules(bundled_schedules_dir())
        for tick in missed_ticks(spec.cron, spec.timezone, since, until)
    ]


def skip_if_a_schedule_fired(since: datetime) -> None:
    """Skip the test, naming each, when a bundled schedule fired since ``since``: what a server
    started then prints is not what the README shows, by design, not by a fault."""
    fired = schedules_fired(since, datetime.now(UTC))
    if fired:
        pytest.skip(f"a schedule fired during the test ({', '.join(fired)}); run it again")


def started_run(home: FreshHome) -> Iterator[RunningServer]:
    """``memworker run`` as the quick start starts it; stopped (Ctrl-C) afterwards."""
    memworker = shutil.which("memworker", path=home.env["PATH"])
    assert memworker is not None, "the memworker console script is not installed"
    log = home.root / "memworker-run.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [memworker, "run"], cwd=home.cwd, env=home.env, stdout=sink, stderr=subprocess.STDOUT
        )
    server = RunningServer(home, process, log)
    try:
        _wait_until_ready(server)
        yield server
    finally:
        server.stop()


def _wait_until_ready(server: RunningServer) -> None:
    """Until the embedded Redis answers and the SQLite store exists, as a reader sees them
    once the banner is printed (the worker itself is up long before the first merge is due)."""
    sock = server.home.data_dir / "redis.sock"
    store = server.home.data_dir / "memworker.sqlite3"
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(f"memworker run exited:\n{server.log.read_text()}")
        if sock.exists() and store.exists():
            client = redis.Redis(unix_socket_path=str(sock), socket_timeout=1)
            try:
                client.ping()
                return
            except redis.RedisError:
                pass
            finally:
                client.close()
        time.sleep(0.2)
    raise AssertionError(f"memworker run did not become ready:\n{server.log.read_text()}")
