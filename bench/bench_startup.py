"""Start-up: ``memworker --version``, ``from worker import MemoryClient`` and ``memworker status``
against a live worker, each in a fresh interpreter.

A command-line tool and a chat service's import pay these on every start, so the bench runs
each one ``--runs`` times (default 9) as a new process and reports the median, min and max of
its wall time and of its CPU time (user + system, from ``os.wait4``: less sensitive than wall
time to other processes on a shared machine). Runs of different subjects alternate, so a burst
of load elsewhere hits all of them alike.

``status`` reads a real deployment: a private key prefix on the bench Redis, a migrated SQLite
file in a temporary folder and a ``memworker worker`` (the three lanes) started on them, so the
command sees the heartbeat, stats and schedules a live deployment has. The worker is stopped
afterwards and the prefix deleted.

``--baseline DIR`` runs every subject a second time with the ``worker`` package of another
checkout (e.g. the main branch) first on the path, alternating with this one, and prints the
ratio: the figure to compare, measured in the same minutes. Goals: status ≤ 0.5 s, the import
≤ 0.2 s, ``--version`` ≤ 0.15 s (on an idle machine; the ratios hold on a busy one).

    python -m bench startup --runs 15 --baseline path/to/a/checkout/of/main
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import redis

from bench._support import delete_prefix, redis_url, unique_prefix

HERE: Final = Path(__file__).resolve().parent.parent

#: The console script's entry point, as ``python -c`` code: ``main``, or ``console`` in the
#: releases whose console script ended the process itself (a ``--baseline`` checkout may be).
_ENTRY: Final = "from worker.cli import app\ngetattr(app, 'console', app.main)()"

#: What each subject runs, as ``python -c``; the CLI ones call the console script's entry point.
SUBJECTS: Final = {
    "--version": "import sys; sys.argv = ['memworker', '--version']\n" + _ENTRY,
    "import MemoryClient": "from worker import MemoryClient",
    "status": "import sys; sys.argv = ['memworker', 'status']\n" + _ENTRY,
}

#: Seconds the worker gets to report its three lanes ready.
WORKER_READY_TIMEOUT: Final = 120.0


@dataclass
class Samples:
    """Wall and CPU seconds of one subject's runs under one checkout."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def line(self) -> str:
        w, c = self.wall, self.cpu
        return (
            f"wall median {statistics.median(w):.3f} s (min {min(w):.3f}, max {max(w):.3f}), "
            f"cpu median {statistics.median(c):.3f} s (min {min(c):.3f})"
        )


def _run_once(code: str, root: Path, env: dict[str, str]) -> tuple[float, float]:
    """One fresh interpreter running ``code`` with ``root`` first on the path: (wall, cpu)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=root,
        env=env | {"PYTHONPATH": str(root)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    stderr = process.stderr.read().decode() if process.stderr else ""
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{code!r} under {root} exited {process.returncode}: {stderr[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


@contextmanager
def live_deployment() -> Iterator[dict[str, str]]:
    """The environment of a deployment with a worker running on it; stopped afterwards."""
    prefix = unique_prefix("startup")
    client = redis.Redis.from_url(redis_url())
    with tempfile.TemporaryDirectory(prefix="memworker-startup-") as folder:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")} | {
            "MEMWORKER_REDIS_URL": redis_url(),
            "MEMWORKER_KEY_PREFIX": prefix,
            "MEMWORKER_DATA_DIR": str(Path(folder) / "data"),
            "MEMWORKER_LANGGRAPH_URL": "",
        }
        log = Path(folder) / "worker.log"
        with log.open("wb") as out:
            worker = subprocess.Popen(
                [sys.executable, "-m", "worker", "worker", "--concurrency", "1",
                 "--sweep-concurrency", "1", "--deliver-concurrency", "1", "--loglevel", "INFO"],
                cwd=HERE, env=env | {"PYTHONPATH": str(HERE)}, stdout=out, stderr=out,
            )  # fmt: skip
        try:
            _wait_ready(worker, log)
            yield env
        finally:
            worker.terminate()
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
            delete_prefix(client, prefix)
            client.close()


def _wait_ready(worker: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + WORKER_READY_TIMEOUT
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if text.count("lane ready") >= 3:
            return
        if worker.poll() is not None:
            raise RuntimeError(f"the worker exited {worker.returncode}: {text[-800:]}")
        time.sleep(0.5)
    raise RuntimeError(f"the worker was not ready within {WORKER_READY_TIMEOUT:g} s")


def measure(runs: int, baseline: Path | None) -> list[str]:
    roots = [HERE] if baseline is None else [HERE, baseline.resolve()]
    samples = {(s, r): Samples() for s in SUBJECTS for r in roots}
    with live_deployment() as env:
        for i in range(runs):
            for subject, code in SUBJECTS.items():
                for root in roots if i % 2 == 0 else roots[::-1]:
                    wall, cpu = _run_once(code, root, env)
                    samples[subject, root].wall.append(wall)
                    samples[subject, root].cpu.append(cpu)
    lines = []
    for subject in SUBJECTS:
        ours = samples[subject, HERE]
        lines.append(f"{subject:20} this checkout: {ours.line()}")
        if baseline is not None:
            base = samples[subject, roots[1]]
            ratio_wall = statistics.median(ours.wall) / statistics.median(base.wall)
            ratio_cpu = statistics.median(ours.cpu) / statistics.median(base.cpu)
            lines.append(f"{'':20} baseline:      {base.line()}")
            lines.append(f"{'':20} ratio:         wall {ratio_wall:.2f}, cpu {ratio_cpu:.2f}")
    return lines


def run() -> list[str]:
    return measure(runs=9, baseline=None)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench startup")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--baseline", type=Path, help="another checkout to compare against")
    args = parser.parse_args(argv)
    for line in measure(args.runs, args.baseline):
        print(line)
    return 0
