"""Import is a merge: a ledger row is kept only where the imported document backs it.

A ledger row says "this candidate was consumed", so a crafted row for the id a future candidate
will get would swallow that candidate (acknowledged, never merged). Each test crafts rows from
a real export, imports under a fresh namespace, then sends the real candidate and reconciles:
it must merge. On SQLite and PostgreSQL (the ``ops`` fixture runs both).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.integration.test_cli_support import Ops, ops
from worker.models import make_candidate

__all__ = ["ops"]

Doc = dict[str, Any]
FUTURE_KEY = "next-week"


def _exported(ops: Ops) -> Doc:
    ops.enqueue("I prefer green tea", key="preference.drink")
    ops.enqueue("I have a dog named Rex")
    ops("reconcile", "--user", ops.user)
    return dict(json.loads(ops("export", "--user", ops.user).out))


def _copy(ops: Ops) -> str:
    return f"{ops.user}-copy"


def _future_id(ops: Ops) -> str:
    return make_candidate(user_id=_copy(ops), trace_id="t", text="I like jazz",
                          idempotency_key=FUTURE_KEY).id  # fmt: skip


def _row(doc: Doc, candidate_id: str, outcome: str, entry_id: str | None) -> Doc:
    return {**doc["ledger"][0], "candidate_id": candidate_id, "outcome": outcome,
            "entry_id": entry_id, "reason": None}  # fmt: skip


def _import(ops: Ops, tmp_path: Path, doc: Doc, *flags: str) -> tuple[int, str]:
    path = tmp_path / "crafted.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    ran = ops("import", str(path), "--namespace", f"user:{_copy(ops)}", *flags)
    assert ran.code == 0, ran.err
    return ran.code, " ".join(ran.out.split())


def _future_candidate_merges(ops: Ops) -> bool:
    ops.enqueue("I like jazz", user=_copy(ops), idempotency_key=FUTURE_KEY)
    ops("reconcile", "--user", _copy(ops))
    return any(e.text == "I like jazz" for e in ops.store.load_state(f"user:{_copy(ops)}").entries)


def test_a_merged_row_no_entry_backs_is_dropped_and_the_real_candidate_merges(
    ops: Ops, tmp_path: Path
) -> None:
    doc = _exported(ops)
    doc["ledger"].append(_row(doc, _future_id(ops), "merged", doc["entries"][0]["id"]))

    _, out = _import(ops, tmp_path, doc)

    assert f"dropped ledger row {_future_id(ops)} (merged)" in out
    assert "no imported entry's provenance holds this candidate id" in out
    assert _future_candidate_merges(ops)


def test_a_rejected_row_is_dropped_since_nothing_can_vouch_for_it(ops: Ops, tmp_path: Path) -> None:
    doc = _exported(ops)
    doc["ledger"].append(_row(doc, _future_id(ops), "rejected", None))

    _, out = _import(ops, tmp_path, doc)

    assert f"dropped ledger row {_future_id(ops)} (rejected)" in out
    assert _future_candidate_merges(ops)


def test_a_duplicate_row_pointing_at_a_real_entry_it_never_confirmed_is_dropped(
    ops: Ops, tmp_path: Path
) -> None:
    doc = _exported(ops)
    doc["ledger"].append(_row(doc, _future_id(ops), "duplicate", doc["entries"][1]["id"]))

    _, out = _import(ops, tmp_path, doc)

    assert f"dropped ledger row {_future_id(ops)} (duplicate)" in out
    assert _future_candidate_merges(ops)


def test_a_pending_approval_row_no_approval_holds_is_dropped(ops: Ops, tmp_path: Path) -> None:
    doc = _exported(ops)
    doc["ledger"].append(_row(doc, _future_id(ops), "pending_approval", None))

    _, out = _import(ops, tmp_path, doc)

    assert "no imported approval holds this candidate id" in out
    assert _future_candidate_merges(ops)


def test_a_forgotten_row_is_dropped(ops: Ops, tmp_path: Path) -> None:
    doc = _exported(ops)
    doc["ledger"].append(_row(doc, _future_id(ops), "forgotten", doc["entries"][0]["id"]))

    _, out = _import(ops, tmp_path, doc)

    assert f"dropped ledger row {_future_id(ops)} (forgotten)" in out
    assert _future_candidate_merges(ops)


def test_the_rows_an_entry_backs_are_kept_and_still_dedupe(ops: Ops, tmp_path: Path) -> None:
    doc = _exported(ops)
    dog = next(e for e in doc["entries"] if "dog" in e["text"])
    (backed,) = [r for r in doc["ledger"] if r["candidate_id"] in dog["candidate_ids"]]

    _, out = _import(ops, tmp_path, doc)
    kept = json.loads(ops("export", "--user", _copy(ops)).out)["ledger"]

    assert "dropped" not in out
    assert backed["candidate_id"] in {r["candidate_id"] for r in kept}
    assert len(kept) == len(doc["ledger"])


def test_the_json_report_lists_the_dropped_rows(ops: Ops, tmp_path: Path) -> None:
    doc = _exported(ops)
    doc["ledger"].append(_row(doc, _future_id(ops), "merged", None))
    path = tmp_path / "crafted.json"
    path.write_text(json.dumps(doc), encoding="utf-8")

    ran = ops("import", str(path), "--namespace", f"user:{_copy(ops)}", "--json")

    (reason,) = json.loads(ran.out)["dropped_ledger_rows"]
    assert reason.startswith(f"ledger row {_future_id(ops)} (merged): ")
