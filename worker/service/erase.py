"""Erase a user everywhere: the queue, the SQL store and the sinks.

Order matters: the queue first (so no batch of the user is merged back afterwards), then SQL
in one transaction (which queues an erase tombstone per file and sink, and takes the namespace's
fence), then the tombstones are delivered (the sinks delete their copies; a delivered tombstone
is itself deleted).

What keeps erased data from coming back:

* The queue's purge refuses a namespace a worker holds an unexpired lease on, checked and
  erased in one script (after the operator confirmed, not before): that namespace is reported
  busy and left whole, to be erased once the batch is done.
* A worker whose lease expired (a zombie) finds its token gone; its commit is refused by the
  SQL fence (the erase records the namespace's version, see :mod:`worker.store.fence`), so it
  writes nothing, not even a run row, and lease tokens are never reissued to trim a later batch.
* A delivery read before the erase and landing after it is taken back out of the sink
  (:mod:`worker.service.publish`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from worker.errors import BusyNamespace, MemworkerError, SinkError
from worker.models import Namespace, Scope
from worker.queue.admin import QueueAdmin
from worker.service.progress import Progress, no_progress
from worker.service.publish import DeliveryReport, publish_now
from worker.sinks.base import ErasesAgentWrites, Sink, TidiesAfterErase
from worker.store.memory import MemoryStore

#: The steps of an erase after each namespace's purge, as a progress display names them.
ERASE_STEPS: Final = ("store", "sinks")


@dataclass(frozen=True)
class EraseTarget:
    """The namespaces an erase would cover, and what stands in its way."""

    keys: list[str]  #: the user's namespaces the store or the queue knows, per the request
    others: list[str]  #: the user's namespaces the request leaves alone (other assistants)


@dataclass(frozen=True)
class Erased:
    files: dict[str, list[str]]  #: per namespace, the paths of the files erased
    queued: dict[str, int]  #: per namespace, the queued candidates dropped
    busy: list[str]  #: namespaces left whole: a worker held them (run forget again later)
    sql_rows: dict[str, int]  #: per table, the rows deleted (tables with none left out)
    delivery: DeliveryReport  #: the sinks' deletions


def erase_target(
    queue: QueueAdmin,
    store: MemoryStore,
    user: str,
    *,
    assistant: str | None = None,
    every_assistant: bool = False,
    org: str | None = None,
) -> EraseTarget:
    """The user's namespaces to erase: one (with or without an assistant), or all of them.

    With ``org``, the user of that org; without, the user of no org: the same user id in
    another org is another person, never erased with this one."""
    every = _all_of_user(queue, store, user, org)
    if every_assistant:
        keys = every
    else:
        key = Namespace.for_user(user, assistant_id=assistant, org_id=org).key
        known = key in every or queue.namespace_state(key).known
        keys = [key] if known else []
    return EraseTarget(keys, [k for k in every if k not in keys])


def erase(
    queue: QueueAdmin,
    store: MemoryStore,
    sinks: Mapping[str, Sink],
    keys: list[str],
    *,
    now: datetime | None = None,
    progress: Progress = no_progress,
) -> Erased:
    """Erase ``keys`` from the queue, then SQL, then the sinks (see the module docstring).

    A namespace a worker holds right now is left whole and listed in ``busy``. ``now`` is a
    test's injected time; without it the tombstones are due by the database's clock.
    ``progress`` is told each step done: each namespace's purge, then the SQL erase and the
    sinks' deletions.
    """
    queued: dict[str, int] = {}
    busy: list[str] = []
    with progress(len(keys) + len(ERASE_STEPS)) as advance:
        for key in keys:
            try:
                queued[key] = queue.purge_namespace(key)
            except BusyNamespace:
                busy.append(key)
            advance(key)
        done = [k for k in keys if k not in busy]
        files = {k: [f.path for f in store.list_files(k)] for k in done}
        if not done:
            return Erased(files, queued, busy, {}, DeliveryReport(0, 0))
        # What agents wrote (inbox items) holds the user's words too, and the inbox cursors go
        # with the SQL erase: removed first, so a sink that fails here leaves the user known and
        # `forget` can simply run again (nothing is erased from SQL yet, nor re-read later).
        _erase_agent_writes(sinks, done)
        report = store.erase_namespaces(done, now=now, sinks=tuple(sinks))
        advance(ERASE_STEPS[0])
        delivery = publish_now(store, sinks, now=now, namespaces=done)
        _tidy_after_erase(sinks, files)
        advance(ERASE_STEPS[1])
    rows = {table: n for table, n in sorted(report.deleted.items()) if n}
    return Erased(files, queued, busy, rows, delivery)


def _erase_agent_writes(sinks: Mapping[str, Sink], keys: list[str]) -> None:
    """Delete what agents wrote for ``keys`` in every sink that holds such writes."""
    for sink in sinks.values():
        if not isinstance(sink, ErasesAgentWrites):
            continue
        try:
            sink.erase_agent_writes(keys)
        except SinkError as exc:
            raise SinkError(
                f"{exc}; nothing was erased from SQL. Run `memworker forget` again once the "
                f"{sink.name} sink answers"
            ) from exc


def _all_of_user(queue: QueueAdmin, store: MemoryStore, user: str, org: str | None) -> list[str]:
    found: set[str] = set()
    for key in [*store.namespaces(scope="user", user_id=user), *queue.namespaces()]:
        with contextlib.suppress(MemworkerError):
            ns = Namespace.parse(key)
            if ns.scope is Scope.USER and ns.user_id == user and ns.org_id == org:
                found.add(key)
    return sorted(found)


def _tidy_after_erase(sinks: Mapping[str, Sink], files: dict[str, list[str]]) -> None:
    for sink in sinks.values():
        if isinstance(sink, TidiesAfterErase):
            sink.tidy_after_erase(files)
