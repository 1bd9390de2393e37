"""``memworker put``: operators write shared, read-only memory (org policies, agent notes).

The file becomes operator-owned: the consolidator never edits it (changes it proposes wait in
``memworker approvals``), and the hot path cannot write org scope at all. It is versioned and
published like any other file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from worker.cli.common import print_json
from worker.cli.ops_support import (
    JsonOpt,
    console,
    describe_delivery,
    operator_name,
    operator_session,
    record_delivery,
)
from worker.errors import InvalidCandidate, InvalidOption


def register_put(app: typer.Typer) -> None:
    app.command("put")(put)


def put(
    file: Annotated[
        str, typer.Argument(metavar="FILE", help="Markdown file to store ('-' reads stdin).")
    ],
    path: Annotated[str, typer.Option("--path", help="Memory path, e.g. policies/compliance.md.")],
    org: Annotated[str | None, typer.Option("--org", help="Organisation id.")] = None,
    assistant: Annotated[
        str | None, typer.Option("--assistant", help="Assistant id (agent scope).")
    ] = None,
    author: Annotated[
        str | None, typer.Option("--author", help="Recorded author (default: your login).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write an operator-owned memory file for an org or an assistant, then publish it."""
    from worker.models import Namespace, normalise_path
    from worker.namespaces import refuse_reserved
    from worker.service.put import put_file

    with operator_session(writes=True) as runtime:
        if (org is None) == (assistant is None):
            raise InvalidOption("name exactly one owner: --org ID or --assistant A")
        ns = Namespace.for_org(org) if org is not None else Namespace.for_agent(str(assistant))
        wanted = normalise_path(path)
        try:
            refuse_reserved(wanted, f"--path {path!r}", (runtime.settings.inbox_route,))
        except InvalidCandidate as exc:
            raise InvalidOption(str(exc)) from None
        content = _read(file, limit=runtime.settings.file_budget_bytes)
        who = f"operator:{author}" if author and not author.startswith("operator:") else author
        done = put_file(
            runtime.store,
            runtime.sinks,
            namespace=ns.key,
            path=wanted,
            content=content,
            author=who or operator_name(),
        )
        delivery = record_delivery(done.delivery)
        if as_json:
            print_json(
                {
                    "namespace": ns.key,
                    "path": wanted,
                    "version": done.version,
                    "published": delivery.delivered,
                }
            )
            return
        console.print(
            f"{ns.key} {wanted}: version {done.version} written (read-only for the workers)"
        )
        console.print(describe_delivery(delivery, runtime))


def _read(file: str, *, limit: int) -> str:
    """The file's text, read no further than ``limit`` bytes (so ``/dev/zero`` or a huge file
    is refused at once rather than read to the end); an empty file is refused too."""
    try:
        if file == "-":
            raw = sys.stdin.buffer.read(limit + 1)
        else:
            with Path(file).open("rb") as handle:
                raw = handle.read(limit + 1)
    except FileNotFoundError:
        raise InvalidOption(f"{file} does not exist; give the Markdown file to store") from None
    except OSError as exc:
        raise InvalidOption(f"cannot read {file}: {exc.strerror}") from None
    if len(raw) > limit:
        raise InvalidOption(
            f"{file} is over {limit} bytes; memory files are at most {limit} "
            "(MEMWORKER_FILE_BUDGET_BYTES)"
        )
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidOption(f"{file} is not UTF-8 text; memory files are Markdown") from None
    if not content.strip():
        raise InvalidOption(f"{file} is empty; give the Markdown to store")
    return content
