"""A worker's CPU per candidate as machine instructions: steady where CPU seconds are not.

On a shared or virtual machine a worker's CPU seconds per candidate drift by a third between
runs of the same code (frequency, neighbours); the instructions it executes do not (two runs
of one tree here agreed within 1 %). So this bench runs the ``workers`` bench's loop in one
process (claim due namespaces four at a time, consolidate each claim, run a delivery pass;
PostgreSQL, files sink; ``--users`` users × 10 candidates) under valgrind's callgrind, counting
instructions only from the first claim to the drained outbox (set-up, imports and the guards'
one-off build excluded, as a consolidate lane builds them at its start). It counts the worker
process alone: PostgreSQL's and Redis's own work is not in it, as the ``workers`` bench's CPU
figure does not count theirs either.

``--baseline DIR`` measures another checkout's ``worker`` package the same way in the same run
and prints the ratio. Needs ``valgrind`` (Debian's package) and PostgreSQL; a run takes about
a minute per tree.

    python -m bench worker_instructions --baseline path/to/a/checkout/of/the/previous/release
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final

HERE: Final = Path(__file__).resolve().parent.parent
#: Users of the measured backlog (each with ``PER_USER`` candidates): enough batches that the
#: per-batch costs dominate, few enough that callgrind's slowdown keeps a run near a minute.
USERS: Final = 50
PER_USER: Final = 10
_COLLECTED = re.compile(r"Collected : (\d+)")


def run() -> list[str]:
    return measure(USERS, baseline=None)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench worker_instructions")
    parser.add_argument("--baseline", type=Path, help="another checkout to compare against")
    parser.add_argument("--users", type=int, default=USERS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.users)
        return 0
    for line in measure(args.users, args.baseline):
        print(line)
    return 0


def measure(users: int, baseline: Path | None) -> list[str]:
    if shutil.which("valgrind") is None:
        return ["skipped: valgrind is not installed (apt-get install valgrind)"]
    from bench._support import postgres_reachable

    why = postgres_reachable()
    if why is not None:
        return [f"skipped: PostgreSQL did not answer ({why})"]
    candidates = users * PER_USER
    now = _instructions(HERE, users) / candidates
    lines = [f"this tree: {now / 1e6:.3f} M instructions per candidate ({candidates} candidates)"]
    if baseline is not None:
        base = _instructions(baseline.resolve(), users) / candidates
        lines.append(f"baseline:  {base / 1e6:.3f} M instructions per candidate")
        lines.append(f"ratio:     {now / base:.3f}x of the baseline")
    return lines


def _instructions(root: Path, users: int) -> int:
    """Run the loop with ``root``'s ``worker`` package under callgrind; its instruction count."""
    with tempfile.TemporaryDirectory(prefix="mwcg-") as out:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                f"--callgrind-out-file={out}/cg.%p",
                sys.executable,
                str(Path(__file__).resolve()),
                "--child",
                f"--users={users}",
            ],
            cwd=root,
            env=os.environ | {"PYTHONPATH": str(root)},
            capture_output=True,
            text=True,
            check=False,
            timeout=1800,
        )
    found = _COLLECTED.findall(done.stderr)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"the measured loop failed in {root}:\n{done.stderr[-2000:]}")
    return int(found[-1])


def _child(users: int) -> None:
    """The measured loop; runs in ``root``'s tree (so only APIs older releases share)."""
    import zlib
    from datetime import UTC, datetime

    import redis

    from bench._support import delete_prefix, redis_url, sentences, temp_postgres, unique_prefix
    from worker.models import make_candidate
    from worker.queue.redis_queue import RedisQueue
    from worker.runtime.container import build_runtime
    from worker.service.publish import deliver_due
    from worker.settings import Settings

    prefix, data_dir = unique_prefix("wi"), Path(tempfile.mkdtemp(prefix="mwbench-"))
    with temp_postgres() as db:
        settings = Settings(
            redis_url=redis_url(),
            database_url=db,
            key_prefix=prefix,
            data_dir=data_dir,
            sinks=["files"],
            debounce_seconds=1,
            max_wait_seconds=2,
        )
        client = redis.Redis.from_url(redis_url())
        queue_settings = getattr(settings, "for_queue", settings)  # releases before slices
        backlog = RedisQueue(client, queue_settings)  # type: ignore[arg-type]
        created = datetime.now(UTC)
        for u in range(users):
            user = f"{prefix}-u{u}"
            texts = sentences(zlib.crc32(user.encode()), PER_USER)
            backlog.enqueue_many(
                [
                    make_candidate(user_id=user, trace_id=f"{user}-t{i}", text=t, now=created)
                    for i, t in enumerate(texts)
                ]
            )
        runtime = build_runtime(settings)
        _prepare_guards()
        queue, pipeline, store = runtime.queue, runtime.pipeline, runtime.store
        future = queue.server_ms() / 1000 + 3600  # everything is due (the queue's test hook)
        _callgrind("on")
        idle = 0
        while idle < 3:
            claims = queue.claim_due(now=future, limit=4)
            for claim in claims:
                pipeline.consolidate(claim)
            report = deliver_due(
                store, runtime.sinks, now=datetime.now(UTC), gate=runtime.sink_gate
            )
            idle = 0 if claims or report.delivered else idle + 1
        _callgrind("off")
        runtime.close()
        delete_prefix(client, prefix)
        client.close()
    shutil.rmtree(data_dir, ignore_errors=True)


def _prepare_guards() -> None:
    """What a consolidate lane builds at its start; older releases built it in a first batch,
    so it is built here by checking texts that reach every part."""
    try:
        from worker.service.sweep import prepare_merges
    except ImportError:
        from worker.consolidation.guards import redact, violation

        for text in ("I prefer tea", "password is hunter2", "AKIAIOSFODNN7EXAMPLE", "ignore all"):
            violation(text)
            redact(text)
        return
    prepare_merges()


def _callgrind(state: str) -> None:
    command = ["callgrind_control", "-i", state, str(os.getpid())]
    subprocess.run(command, capture_output=True, check=True, timeout=60)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
