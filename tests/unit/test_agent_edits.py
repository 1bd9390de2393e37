"""What an agent's edit of a published file becomes: candidates from the diff, deterministic."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from worker.connectors.base import PublishedFile
from worker.connectors.files import FilesSink
from worker.errors import ExternalEdit
from worker.service.edits import absorb_external_edit, edit_candidates, load_record
from worker.store.memory import MemoryStore

T0 = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)
BEFORE = "# Preferences\n\n- prefers green tea\n- prefers aisle seats\n"
AFTER = "# Preferences\n\n- prefers green tea\n- allergic to peanuts &amp; shellfish\n"


def test_added_lines_become_facts_and_removed_lines_forgets_of_that_file() -> None:
    found = edit_candidates("user:u1:bot", "/memories/preferences.md", BEFORE, AFTER, now=T0)

    assert [(c.kind.value, c.text, c.path, c.source) for c in found] == [
        ("fact", "allergic to peanuts & shellfish", "/memories/preferences.md", "agent_edit"),
        ("forget", "prefers aisle seats", "/memories/preferences.md", "agent_edit"),
    ]
    assert {c.namespace for c in found} == {"user:u1:bot"}
    assert all(c.trace_id.startswith("agent-edit-") for c in found)


def test_absorbing_the_same_edit_twice_gives_the_same_candidate_ids() -> None:
    first = edit_candidates("user:u1", "/memories/preferences.md", BEFORE, AFTER, now=T0)
    again = edit_candidates("user:u1", "/memories/preferences.md", BEFORE, AFTER, now=T0)

    assert [c.id for c in first] == [c.id for c in again]


def test_an_edit_that_only_moves_or_reformats_lines_yields_nothing() -> None:
    shuffled = "# Preferences\n\n* prefers aisle seats\n-   prefers green tea\n\n"

    assert edit_candidates("user:u1", "/memories/preferences.md", BEFORE, shuffled, now=T0) == []


def test_an_agent_edit_of_agent_scope_memory_stays_in_agent_scope() -> None:
    found = edit_candidates("agent:bot", "/memories/notes.md", "", "- replies in French\n", now=T0)

    assert [(c.namespace, c.user_id, c.text) for c in found] == [
        ("agent:bot", None, "replies in French")
    ]


def test_an_edit_of_an_older_version_is_diffed_against_that_version_not_the_newest(
    sqlite_store: MemoryStore,
) -> None:
    namespace, path = "user:u1", "/memories/preferences.md"
    for content in ("- tea\n", "- tea\n- jazz\n", "- tea\n- jazz\n- rain\n"):
        sqlite_store.put_file(
            namespace=namespace, path=path, content=content, author="operator:t", now=T0
        )
    v3 = sqlite_store.file_history(namespace, path)[-1]
    # The store still held version 1 when the agent edited it (deliveries skipped version 2).
    edit = ExternalEdit(namespace, path, "- tea\n- peanuts\n", published_version=None)
    item = PublishedFile(namespace, path, v3.content, v3.version, T0, T0)

    done = absorb_external_edit(sqlite_store, FilesSink(Path("unused")), item, edit, now=T0)

    record = load_record(sqlite_store, namespace, path)
    assert done is None
    assert record is not None
    assert record.base_version == 1
    assert [(c["kind"], c["text"]) for c in record.candidates] == [("fact", "peanuts")]
