"""What a starting worker says: one summary of what runs where, instead of Celery's banners.

``memworker run`` and ``memworker worker`` print :func:`startup_summary` once, before their
lanes start; each lane then logs one line when it is ready (:func:`quiet_celery` silences
Celery's own banner, connection and mingle lines, and its warning about running as root, which
the summary states in one line instead).

>>> from worker.settings import Settings
>>> lines = startup_summary(Settings(), lanes={"sweep": 1}, redis="Redis at redis://r:6379/0")
>>> [line.split(":")[0].strip() for line in lines][:6]
['memworker starting (Ctrl-C stops it)', 'lanes', 'model', 'sinks', 'database', 'redis']
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from typing import Final

from worker.settings import Settings

#: Loggers that print a line per task received and finished, per sink request, or per start-up
#: step of each lane (mingle, ready): a sweep every two seconds would bury the work and three
#: lanes would repeat each start-up line three times. Kept at WARNING unless the log level is
#: DEBUG; each consolidation logs one INFO line of its own, each lane one when ready. (The
#: connection lines are :mod:`worker.runtime.outage_log`'s: one per outage and its end.)
CHATTY_LOGGERS: Final = (
    "celery.app.trace",
    "celery.worker.strategy",
    "celery.worker.consumer.mingle",
    "celery.apps.worker",
    "celery.beat",
    "httpx",  # one line per HTTP request a sink makes
)


def startup_summary(
    settings: Settings,
    *,
    lanes: Mapping[str, int],
    redis: str,
    beat: bool = False,
    pool: str = "threads",
) -> list[str]:
    """The lines a starting ``run``/``worker`` prints: lanes (one process each), model,
    sinks, database and Redis, and whether it runs as root."""
    processes = ", ".join(f"{name} ×{count}" for name, count in lanes.items())
    extra = ", beat" if beat else ""
    lines = [
        "memworker starting (Ctrl-C stops it)",
        f"  lanes:    {processes} ({pool} pool){extra}: one process each",
        f"  model:    {_model(settings)}",
        f"  sinks:    {_sinks(settings)}",
        f"  database: {redacted_url(settings.effective_database_url)}",
        f"  redis:    {redis}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        lines.append("  warning:  running as root; give the workers an unprivileged user")
    return lines


def quiet_celery(loglevel: str) -> None:
    """Celery says only what matters: its chatty loggers at WARNING (unless DEBUG) and no
    root-user SecurityWarning (the summary names it once)."""
    from celery.exceptions import SecurityWarning

    warnings.filterwarnings("ignore", category=SecurityWarning)
    if loglevel.upper() != "DEBUG":
        for name in CHATTY_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


def redacted_url(url: str) -> str:
    """A database or Redis URL without its password.

    >>> redacted_url("postgresql+psycopg://mw:secret@db/mw")
    'postgresql+psycopg://mw:***@db/mw'
    """
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.rsplit("@", maxsplit=1)[-1]


def _model(settings: Settings) -> str:
    if not settings.model:
        name = settings.consolidator.rpartition(":")[2]
        return f"none ({name})"
    where = f" at {settings.model_base_url}" if settings.model_base_url else ""
    return f"{settings.model}{where}"


def _sinks(settings: Settings) -> str:
    shown = []
    for sink in settings.sinks:
        if sink == "files":
            shown.append(f"files in {settings.effective_files_dir}")
        elif sink == "langgraph":
            shown.append(f"langgraph store at {settings.langgraph_url or '(no URL set)'}")
        else:
            shown.append(sink)
    return ", ".join(shown) or "none"
