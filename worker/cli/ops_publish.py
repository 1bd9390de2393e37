"""``memworker publish``: deliver the current files again, to every configured sink or one.

For a sink added after memory was merged (its store is empty), or a sink whose copy was lost:
the files are queued in the outbox for the chosen sinks and delivered through the workers'
own delivery path (:mod:`worker.service.republish`). Without ``--sink`` the command needs the
workers' sinks (``MEMWORKER_SINKS``), as every command that writes does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from worker.cli.common import namespace_from, print_json
from worker.cli.ops_support import (
    AssistantOpt,
    JsonOpt,
    NamespaceOpt,
    OrgOpt,
    UserOpt,
    console,
    describe_delivery,
    operator_session,
    record_delivery,
)
from worker.cli.progress import progress_of
from worker.errors import InvalidOption, NotFound

if TYPE_CHECKING:
    from worker.runtime.container import Runtime
    from worker.service.republish import Republished

#: What publish accepts as its target, for the error when none is given.
_TARGETS: Final = "--user U [--assistant A], --org O, --namespace NS, or --all for every namespace"


def register_publish(app: typer.Typer) -> None:
    app.command("publish")(publish)


def publish(
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    org: OrgOpt = None,
    all_: Annotated[bool, typer.Option("--all", help="Every namespace that has memory.")] = False,
    sink: Annotated[
        str | None,
        typer.Option(
            "--sink",
            metavar="NAME",
            help="Only this sink (a name MEMWORKER_SINKS configures, e.g. langgraph). "
            "Default: every configured sink.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Deliver the current memory files again, to every configured sink or one (--sink).

    For a sink added after memory was merged: its store holds nothing until the files are
    published to it. Goes through the outbox, like every commit: safe while workers run.
    """
    from worker.service.republish import republish

    with operator_session(writes=sink is None) as runtime:
        if all_ and (user or assistant or namespace or org):
            raise InvalidOption("give either --all or one namespace (--user/--org/--namespace)")
        chosen = _chosen_sinks(runtime, sink)
        targets = _targets(runtime, None if all_ else (user, assistant, namespace, org))
        done = republish(
            runtime.store,
            {name: runtime.sinks[name] for name in chosen},
            targets,
            progress=progress_of("publish", show=not as_json),
        )
        record_delivery(done.delivery)
        if as_json:
            print_json(_json_published(done, chosen))
            return
        _print_published(runtime, done, chosen)


def _chosen_sinks(runtime: Runtime, sink: str | None) -> list[str]:
    """The sinks to publish to: ``sink`` (refused unless configured here), or every one."""
    configured = list(runtime.sinks)
    if sink is None:
        if not configured:
            raise InvalidOption("no sink is configured (MEMWORKER_SINKS); nothing to publish to")
        return configured
    if sink not in runtime.sinks:
        raise InvalidOption(
            f"--sink {sink!r} is not configured here (MEMWORKER_SINKS gives "
            f"{', '.join(configured) or 'none'}); add it to MEMWORKER_SINKS with its settings"
        )
    return [sink]


def _targets(runtime: Runtime, one: tuple[str | None, ...] | None) -> list[str]:
    """The namespaces to publish: every one with memory (``one`` None), or the one named,
    which must have memory (:class:`NotFound` otherwise)."""
    if one is None:
        return sorted(runtime.store.namespaces())
    user, assistant, namespace, org = one
    ns = namespace_from(user, assistant, namespace, org, accepted=_TARGETS)
    if ns.key not in runtime.store.namespaces(scope=ns.scope.value, user_id=ns.user_id):
        raise NotFound(f"{ns.key} has no memory, so there is nothing to publish; check the id")
    return [ns.key]


def _json_published(done: Republished, sinks: list[str]) -> dict[str, Any]:
    return {
        "namespaces": done.namespaces,
        "sinks": sinks,
        "queued": done.queued,
        "published": done.delivery.delivered,
        "published_to": list(done.delivery.sinks_taken),
        "failed": done.delivery.failed,
        "undelivered": done.delivery.remaining,
        "set_aside": [a.as_dict() for a in done.set_aside + done.delivery.set_aside],
    }


def _print_published(runtime: Runtime, done: Republished, sinks: list[str]) -> None:
    if not done.namespaces and not done.set_aside:
        console.print("no namespace has memory yet; nothing to publish")
        return
    console.print(
        f"{len(done.namespaces)} namespace(s): {done.queued} file deliveries queued for "
        f"{', '.join(sinks)}"
    )
    for aside in done.set_aside:
        console.print(f"  [yellow]set aside[/yellow] {aside.describe()}", highlight=False)
    console.print(describe_delivery(done.delivery, runtime, sinks=sinks))
