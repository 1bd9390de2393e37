"""``memworker store``: the LangGraph store's layout — move org items to their own namespaces.

``memworker store migrate-orgs --dry-run`` lists, per org file, where the old layout kept it
(one tuple shared by every org) and where it goes; without ``--dry-run`` each org's files are
published again from SQL to their own tuple and the old shared items are deleted.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from worker.cli.common import print_json
from worker.cli.ops_support import JsonOpt, console, operator_session
from worker.errors import ConfigurationError, InvalidOption


def register_store(app: typer.Typer) -> None:
    store = typer.Typer(help="The LangGraph store sink's layout.", no_args_is_help=True)
    store.command("migrate-orgs")(migrate_orgs)
    app.add_typer(store, name="store")


def migrate_orgs(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list what would move; change nothing.")
    ] = False,
    old_template: Annotated[
        str | None,
        typer.Option(
            "--old-template",
            help="The template every scope used before (a JSON list); default: the layout "
            "before per-org namespaces.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Move org memory from the one namespace all orgs shared to one namespace per org."""
    from worker.service.store_migration import migrate_org_items
    from worker.sinks.base import ReadsBack
    from worker.store_layout import LEGACY_TEMPLATE

    if old_template is None:
        old_template = json.dumps(list(LEGACY_TEMPLATE))
    try:
        template = json.loads(old_template)
    except json.JSONDecodeError:
        template = None
    if not isinstance(template, list) or not all(isinstance(p, str) for p in template):
        raise InvalidOption(f"--old-template {old_template!r} is not a JSON list of strings")
    with operator_session() as runtime:
        if "langgraph" not in runtime.settings.sinks:
            raise ConfigurationError(
                "the langgraph sink is not configured (MEMWORKER_SINKS); nothing to migrate"
            )
        sink = runtime.sinks["langgraph"]
        if not isinstance(sink, ReadsBack):
            raise ConfigurationError("the langgraph sink cannot read its items back; not migrated")
        moves = migrate_org_items(runtime.store, sink, old_template=template, dry_run=dry_run)
    if as_json:
        print_json(
            [
                {
                    "namespace": m.namespace,
                    "path": m.path,
                    "from": {"namespace": list(m.old_namespace), "key": m.old_key},
                    "to": {"namespace": list(m.new_namespace), "key": m.new_key},
                    "old_item_present": m.old_present,
                    "outcome": m.outcome,
                }
                for m in moves
            ]
        )
        return
    for m in moves:
        console.print(
            f"{m.namespace} {m.path}: {m.old_namespace} {m.old_key} -> "
            f"{m.new_namespace} {m.new_key} ({m.outcome})",
            markup=False,
        )
    console.print(f"{len(moves)} org file(s) {'to move' if dry_run else 'migrated'}")
