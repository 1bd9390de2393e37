"""Worker memory: peak RSS consolidating a backlog of N vs 100×N candidates.

A worker must not need memory proportional to its backlog: a claim covers at most
``max_batch`` candidates (default 200), the namespace state it loads is bounded by the file
budget (evicted entries stay in SQL history but are not loaded), so a 100× longer queue should
take 100× the batches at a flat memory peak.

How: the parent enqueues ``SMALL`` and then ``LARGE`` = 100 × ``SMALL`` fact candidates spread
over ``NAMESPACES`` namespaces (untimed, through :class:`~worker.queue.redis_queue.RedisQueue`),
then starts one fresh worker subprocess per backlog (``python -m bench.bench_rss --child``) that
builds the production :class:`~worker.runtime.container.Runtime` (rules consolidator, files
sink, SQLite) and drains the queue with sweeps and ``Pipeline.consolidate``. The child's peak
RSS is its ``ru_maxrss`` as reported by ``os.wait4`` for exactly that child (no psutil). The
child also reports its peak right after setup (imports, engine, Redis, consolidator), so the
printout separates the fixed interpreter cost from what consolidating adds.

The texts carry a distinct number each: the rules consolidator then rules out fuzzy duplicates
early, keeping the 100× run within the time budget. That choice only affects CPU (measured by
``bench_consolidation``), not the memory this bench is about. Goal: peak ratio ≤ 1.25×.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Final

import redis

from bench._support import (
    delete_prefix,
    drain,
    redis_url,
    sentences,
    temp_sqlite,
    unique_prefix,
    verdict,
)
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.runtime.container import build_runtime
from worker.settings import Settings

SMALL: Final = 200
LARGE: Final = 100 * SMALL
NAMESPACES: Final = 4
#: Candidates per pipelined enqueue call in the parent.
ENQUEUE_CHUNK: Final = 500
GOAL: Final = 1.25
CHILD_FLAG: Final = "--child"
#: A worker that takes longer than this is reported as a failure, not waited for.
CHILD_TIMEOUT_SECONDS: Final = 600


@dataclass(frozen=True)
class ChildConfig:
    redis_url: str
    database_url: str
    key_prefix: str
    files_dir: str
    due_at: float


@dataclass(frozen=True)
class Measurement:
    candidates: int
    batches: int
    seconds: float
    setup_kb: int
    peak_kb: int


def _settings(config: ChildConfig) -> Settings:
    return Settings(
        redis_url=config.redis_url, database_url=config.database_url,
        key_prefix=config.key_prefix, data_dir=Path(config.files_dir),
        files_dir=Path(config.files_dir), sinks=["files"],
    )  # fmt: skip


def _child(config: ChildConfig) -> None:
    """The worker process: set up like production, report the setup peak, drain, report."""
    runtime = build_runtime(_settings(config))
    runtime.redis.ping()
    runtime.store.load_state("user:warmup")
    _ = runtime.pipeline, runtime.consolidator, runtime.sinks
    setup_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    outcomes = drain(runtime.queue, runtime.pipeline, now=config.due_at)
    seconds = time.perf_counter() - started
    runtime.close()
    report = {
        "candidates": outcomes["candidates"],
        "batches": outcomes["committed"],
        "failed": sum(v for k, v in outcomes.items() if k not in ("candidates", "committed")),
        "seconds": seconds,
        "setup_kb": setup_kb,
    }
    print(json.dumps(report))


def _enqueue(config: ChildConfig, count: int) -> None:
    client = redis.Redis.from_url(config.redis_url)
    queue = RedisQueue(client, _settings(config).for_queue)
    texts = sentences(count, count)
    now = time.time()
    try:
        for start in range(0, count, ENQUEUE_CHUNK):
            batch = [
                make_candidate(user_id=f"rss-u{i % NAMESPACES}", trace_id=f"t{i}",
                               text=f"{texts[i]} (note {i})", idempotency_key=f"c{i}")
                for i in range(start, min(count, start + ENQUEUE_CHUNK))
            ]  # fmt: skip
            queue.enqueue_many(batch, now=now)
    finally:
        client.close()


def _measure(count: int) -> Measurement:
    """Enqueue ``count`` candidates, drain them in a fresh worker process, measure its peak."""
    client = redis.Redis.from_url(redis_url())
    prefix = unique_prefix("r")
    try:
        with temp_sqlite() as url, tempfile.TemporaryDirectory(prefix="mwbench-files-") as files:
            config = ChildConfig(redis_url(), url, prefix, files, due_at=0.0)
            _enqueue(config, count)
            # Every candidate is due by then (max_wait is 300 s by default).
            config = ChildConfig(redis_url(), url, prefix, files, due_at=time.time() + 3600)
            with tempfile.TemporaryFile() as errors:
                out, status, peak_kb = _run_child(config, errors)
                errors.seek(0)
                stderr = errors.read().decode(errors="replace")
            if status != 0:
                raise RuntimeError(f"worker for {count} candidates failed: {stderr[-2000:]}")
            report = json.loads(out.decode().strip().splitlines()[-1])
    finally:
        delete_prefix(client, prefix)
        client.close()
    if report["candidates"] != count or report["failed"]:
        raise RuntimeError(f"worker consumed {report} of {count} candidates")
    return Measurement(
        candidates=count, batches=report["batches"], seconds=report["seconds"],
        setup_kb=report["setup_kb"], peak_kb=peak_kb,
    )  # fmt: skip


def _run_child(config: ChildConfig, errors: IO[bytes]) -> tuple[bytes, int, int]:
    """Run one worker; its stdout, exit code and peak RSS in KB.

    The child is reaped with ``os.wait4``, which reports that one child's ``ru_maxrss``;
    ``resource.getrusage(RUSAGE_CHILDREN)`` would be the maximum over every child reaped so far
    and could not tell the second worker from the first.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.bench_rss", CHILD_FLAG, json.dumps(asdict(config))],
        cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE, stderr=errors,
    )  # fmt: skip
    assert proc.stdout is not None
    timer = threading.Timer(CHILD_TIMEOUT_SECONDS, proc.kill)
    timer.start()
    try:
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
        proc.stdout.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return out, proc.returncode, int(usage.ru_maxrss)


def run() -> list[str]:
    small = _measure(SMALL)
    large = _measure(LARGE)
    ratio = large.peak_kb / small.peak_kb

    def line(m: Measurement) -> str:
        return (
            f"{m.candidates:>7,} candidates, {m.batches:>4} batches: peak RSS "
            f"{m.peak_kb / 1024:6.1f} MiB (after setup {m.setup_kb / 1024:6.1f} MiB, "
            f"+{(m.peak_kb - m.setup_kb) / 1024:4.1f} MiB consolidating) in {m.seconds:5.1f} s"
        )

    return [
        f"worker subprocess, SQLite, rules consolidator, {NAMESPACES} namespaces, max_batch 200",
        line(small),
        line(large),
        f"peak RSS 100x backlog / 1x: {ratio:.2f}x (goal <= {GOAL}x: {verdict(ratio <= GOAL)})",
    ]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == CHILD_FLAG:
        _child(ChildConfig(**json.loads(sys.argv[2])))
    else:
        print(*run(), sep="\n")
