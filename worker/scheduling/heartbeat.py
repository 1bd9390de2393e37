"""Beat's heartbeat file: beat rewrites it on every loop, a health check reads its age.

The file holds one ISO-8601 UTC timestamp and is replaced atomically, so a reader never sees
a half-written value. Check it from a container health check with::

    python -m worker.scheduling.heartbeat /var/lib/memworker/beat.heartbeat 60

which exits 0 when the heartbeat is at most 60 seconds old and 1 otherwise.

>>> import tempfile
>>> from datetime import datetime, timedelta, UTC
>>> path = Path(tempfile.mkdtemp()) / "beat.heartbeat"
>>> t0 = datetime(2024, 1, 1, tzinfo=UTC)
>>> write_heartbeat(path, t0)
>>> heartbeat_age(path, t0 + timedelta(seconds=5))
datetime.timedelta(seconds=5)
"""

from __future__ import annotations

import os
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

#: File name of the heartbeat inside the data directory.
HEARTBEAT_FILENAME: Final = "beat.heartbeat"

#: Longest beat sleeps between loops (and so between heartbeats). Celery's default is 300 s,
#: which would make a 5-minute-old heartbeat look healthy; 15 s keeps health checks quick.
HEARTBEAT_INTERVAL_SECONDS: Final = 15.0

#: A heartbeat older than this means beat is stuck or gone: four missed intervals, so one slow
#: loop (a broker reconnect) does not flap the health check.
HEARTBEAT_STALE_AFTER_SECONDS: Final = 4 * HEARTBEAT_INTERVAL_SECONDS


def write_heartbeat(path: Path, now: datetime) -> None:
    """Atomically replace ``path`` with ``now`` as ISO UTC; creates the folder if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(now.astimezone(UTC).isoformat() + "\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def heartbeat_age(path: Path, now: datetime) -> timedelta | None:
    """How long ago the heartbeat at ``path`` was written, or None if missing or unreadable."""
    try:
        written = datetime.fromisoformat(path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    if written.tzinfo is None:
        return None
    return now - written


def is_fresh(path: Path, now: datetime, max_age: float = HEARTBEAT_STALE_AFTER_SECONDS) -> bool:
    """Whether beat wrote its heartbeat within ``max_age`` seconds before ``now``."""
    age = heartbeat_age(path, now)
    return age is not None and age <= timedelta(seconds=max_age)


def main(argv: list[str] | None = None) -> int:
    """Health-check entry point: ``PATH [MAX_AGE_SECONDS]``; 0 when fresh, 1 when stale."""
    args = sys.argv[1:] if argv is None else argv
    if not 1 <= len(args) <= 2:
        print(
            "usage: python -m worker.scheduling.heartbeat PATH [MAX_AGE_SECONDS]", file=sys.stderr
        )
        return 2
    max_age = float(args[1]) if len(args) == 2 else HEARTBEAT_STALE_AFTER_SECONDS
    return 0 if is_fresh(Path(args[0]), datetime.now(UTC), max_age) else 1


if __name__ == "__main__":
    raise SystemExit(main())
