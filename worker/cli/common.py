"""Helpers shared by CLI commands: settings, runtime, namespace selection, JSON output."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from worker.errors import InvalidOption
from worker.models import Namespace
from worker.runtime.container import Runtime, build_runtime
from worker.settings import load_settings


@contextmanager
def open_runtime() -> Iterator[Runtime]:
    """Settings from the environment (this is the edge) and the wired parts; closed after."""
    runtime = build_runtime(load_settings())
    try:
        yield runtime
    finally:
        runtime.close()


def namespace_from(
    user: str | None,
    assistant: str | None,
    namespace: str | None,
    org: str | None = None,
    *,
    accepted: str = "--user U [--assistant A], --org O or --namespace NS",
) -> Namespace:
    """Exactly one way of naming a namespace: --user [--assistant], --assistant, --org or
    --namespace; ``accepted`` is what the command's own error names when none is given."""
    if namespace is not None:
        if user or org:
            raise InvalidOption("give either --namespace or --user/--org, not both")
        return Namespace.parse(namespace)
    if user is not None:
        if org:
            raise InvalidOption("give either --user or --org, not both")
        return Namespace.for_user(user, assistant_id=assistant)
    if org is not None:
        return Namespace.for_org(org)
    if assistant is not None:
        return Namespace.for_agent(assistant)
    raise InvalidOption(f"name a namespace: {accepted}")


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str, ensure_ascii=False)
    sys.stdout.write("\n")
