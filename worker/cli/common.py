"""Helpers shared by CLI commands: settings, runtime, namespace selection, JSON output.

Every ``worker.cli`` module imports only Typer, Rich and :mod:`worker.errors` at module level:
the runtime, the store, Redis and the services are imported inside the command that uses them,
so ``memworker --version`` and ``--help`` start at once (``tests/integration/test_cli_imports.py``).
"""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from worker.errors import InvalidOption

if TYPE_CHECKING:
    from worker.models import Namespace
    from worker.runtime.container import Runtime


@contextmanager
def open_runtime() -> Iterator[Runtime]:
    """Settings from the environment (this is the edge) and the wired parts; closed after."""
    from worker.runtime.container import build_runtime
    from worker.settings import load_settings

    runtime = build_runtime(load_settings())
    try:
        yield runtime
    finally:
        runtime.close()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a short read-only command runs.

    Such a command spends most of its time importing (Redis, SQLAlchemy, the store: hundreds
    of modules), which allocates long-lived objects only; the collector, run every few hundred
    allocations, rescans that growing heap again and again (a tenth of ``memworker status``)
    and frees nothing. What little cyclic garbage the command makes is freed when it exits.
    Not for long-running commands (``worker``, ``run``, ``beat``).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def namespace_from(
    user: str | None,
    assistant: str | None,
    namespace: str | None,
    org: str | None = None,
    *,
    accepted: str = "--user U [--assistant A], --org O or --namespace NS",
) -> Namespace:
    """Exactly one way of naming a namespace: --user [--assistant] [--org] (with --org, the
    user of that org), --assistant, --org alone (the org's own memory) or --namespace;
    ``accepted`` is what the command's own error names when none is given."""
    from worker.models import Namespace

    if namespace is not None:
        if user or org:
            raise InvalidOption("give either --namespace or --user/--org, not both")
        return Namespace.parse(namespace)
    if user is not None:  # with --org: the user of that org (the same id in two orgs is two)
        return Namespace.for_user(user, assistant_id=assistant, org_id=org)
    if org is not None:
        return Namespace.for_org(org)
    if assistant is not None:
        return Namespace.for_agent(assistant)
    raise InvalidOption(f"name a namespace: {accepted}")


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str, ensure_ascii=False)
    sys.stdout.write("\n")
