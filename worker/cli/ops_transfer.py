"""``memworker export`` / ``memworker import``: one namespace's files and history as JSON.

The document carries every version of every file, the entries, the candidate ledger and pending
approvals (format ``memworker.namespace.v1``). Import validates the whole document before
writing anything — its shape, and then as a merge would (:mod:`worker.service.transfer`: files
are the rendering of their entries, guards, entry ids, versions) — then writes it in one
transaction into a namespace that has no memory yet, and publishes the files. Exporting the
imported namespace gives the same bytes.

Erase is final for import too: a document of a namespace that was erased here (``memworker
forget``), or one imported into such a namespace, is refused naming it, unless the operator
passes ``--restore-erased``; the import then says that it restored an erased namespace, and
what it brought back.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Final

import typer

from worker.cli.common import namespace_from, print_json
from worker.cli.errors import stderr
from worker.cli.ops_support import (
    AssistantOpt,
    JsonOpt,
    NamespaceOpt,
    OrgOpt,
    UserOpt,
    console,
    describe_delivery,
    operator_session,
    publish_namespaces,
)
from worker.cli.progress import progress_bar
from worker.errors import ErasedNamespace, InvalidOption, StoreRefused

#: The steps of an import a progress bar names: the validated write, then its delivery.
IMPORT_STEPS: Final = ("written", "published")


def register_transfer(app: typer.Typer) -> None:
    app.command("export")(export)
    app.command("import")(import_)


def render(document: dict[str, Any]) -> str:
    """The document as stable JSON text (same document, same bytes)."""
    return json.dumps(document, indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def export(
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    org: OrgOpt = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write to this file instead of stdout.")
    ] = None,
) -> None:
    """Print (or write) a namespace's files, history, entries and ledger as JSON."""
    with operator_session() as runtime:
        ns = namespace_from(user, assistant, namespace, org)
        text = render(runtime.store.export_namespace(ns.key))
        if out is None:
            sys.stdout.write(text)
            return
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise InvalidOption(f"cannot write {out}: {exc.strerror}") from None
        stderr.print(f"exported {ns.key} to {out}")


def import_(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A `memworker export` document.")],
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", help="Import under this namespace instead of the file's."),
    ] = None,
    restore_erased: Annotated[
        bool,
        typer.Option(
            "--restore-erased",
            help="Bring back a namespace that was erased (`memworker forget`); without it, "
            "importing an erased namespace is refused: erase is final.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Validate an export document, then write it in one transaction and publish its files."""
    from worker.models import Namespace
    from worker.service.transfer import import_document
    from worker.store.transfer import describe_erased, parse_document

    with operator_session(writes=True) as runtime:
        data = _load(file)
        try:
            doc = parse_document(data)
        except StoreRefused as exc:  # a bad document is the caller's mistake, not an outage
            raise InvalidOption(f"{file}: {exc}") from None
        key = Namespace.parse(namespace).key if namespace is not None else doc.namespace
        ns = Namespace.parse(key)
        if key in runtime.store.namespaces(scope=ns.scope.value, user_id=ns.user_id):
            raise InvalidOption(
                f"{key} already has memory; nothing was imported. Erase it first "
                "(`memworker forget`, then import with --restore-erased) or import under another "
                "--namespace"
            )
        erased = runtime.store.erased_namespaces(key, doc.namespace)
        if erased and not restore_erased:
            raise InvalidOption(_refused_erased(file, describe_erased(erased)))
        with progress_bar(0 if as_json else len(IMPORT_STEPS), "import") as advance:
            try:
                doc, result, dropped = import_document(
                    runtime.store, data, namespace=key, sinks=tuple(runtime.sinks),
                    now=runtime.store.db_now(), reserved=(runtime.settings.inbox_route,),
                    restore_erased=restore_erased,
                )  # fmt: skip
            except ErasedNamespace as exc:  # erased between the check and the write
                raise InvalidOption(f"{file}: {exc}") from None
            except StoreRefused as exc:
                raise InvalidOption(
                    f"{file}: {exc}; fix the document and import it again"
                ) from None
            advance(IMPORT_STEPS[0])
            delivery = publish_namespaces(runtime, [key])
            advance(IMPORT_STEPS[1])
        if as_json:
            print_json(
                {
                    "namespace": key,
                    "version": result.version,
                    "files": [{"path": p, "versions": n} for p, n in result.files],
                    "entries": len(doc.entries),
                    "ledger_rows": len(doc.ledger),
                    "pending_approvals": len(doc.approvals),
                    "restored_erased": erased,
                    "published": delivery.delivered,
                    "dropped_ledger_rows": dropped,
                }
            )
            return
        if erased:
            console.print(f"restoring erased data (--restore-erased): {describe_erased(erased)}")
        versions = sum(n for _, n in result.files)
        console.print(
            f"imported {key}: {len(result.files)} file(s), {versions} version(s), "
            f"{len(doc.entries)} entries, {len(doc.ledger)} ledger row(s), "
            f"{len(doc.approvals)} pending approval(s)"
        )
        for reason in dropped:
            console.print(f"dropped {reason}")
        console.print(describe_delivery(delivery, runtime))


def _refused_erased(file: Path, erased: str) -> str:
    return (
        f"{file}: {erased}: erase is final, so nothing was imported. To bring it back on "
        "purpose, import again with --restore-erased"
    )


def _load(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidOption(f"{file} does not exist") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidOption(f"{file} is not a JSON export document: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidOption(f"{file} is not a JSON export document (expected an object)")
    return data
