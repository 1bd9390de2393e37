"""The queue decodes a log entry with the checks make_candidate applies (but the size limit).

A hand-written or corrupted entry make_candidate would have refused is refused on decoding too,
with :class:`InvalidCandidate` naming its stream id, so its batch can be dead-lettered.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from worker.errors import InvalidCandidate
from worker.models import make_candidate
from worker.queue.scripts import decode_candidate

STREAM_ID = "1700000000000-0"
T0 = datetime(2025, 1, 1, 12, tzinfo=UTC)


def entry(**changes: Any) -> str:
    """The JSON of a valid stored candidate, with ``changes`` written over it by hand."""
    c = make_candidate(
        user_id="u1",
        trace_id="trace-1",
        text="I prefer tea",
        topic="preferences",
        key="preference.drink",
        thread_id="th-1",
        now=T0,
    )
    fields = json.loads(c.model_dump_json())
    fields.update(changes)
    return json.dumps(fields)


def refused(raw: str, why: str) -> None:
    """Decoding ``raw`` raises InvalidCandidate naming the stream id and matching ``why``."""
    with pytest.raises(
        InvalidCandidate, match=f"log entry {STREAM_ID} is not a valid candidate"
    ) as caught:
        decode_candidate(raw, STREAM_ID)
    assert re.search(why, str(caught.value)), str(caught.value)


def test_an_entry_make_candidate_wrote_decodes_to_the_same_candidate() -> None:
    c = make_candidate(
        user_id="u1", trace_id="t1", text="Tea", topic="work/projects", key="a.b", now=T0
    )

    assert decode_candidate(c.model_dump_json(), STREAM_ID) == c


@pytest.mark.parametrize(
    "trace_id", ["schedule-nightly", "reconcile-20261201T082500", "approval-3", "cli-0f3a"]
)
def test_the_trace_ids_the_worker_writes_itself_decode(trace_id: str) -> None:
    c = make_candidate(user_id="u1", trace_id=trace_id, text="Tea", now=T0)

    assert decode_candidate(c.model_dump_json(), STREAM_ID).trace_id == trace_id


def test_an_agent_scope_entry_decodes() -> None:
    c = make_candidate(
        user_id="u1", trace_id="t1", text="Closes at 6", scope="agent", assistant_id="bot", now=T0
    )

    assert decode_candidate(c.model_dump_json(), STREAM_ID) == c


def test_text_over_the_hot_path_limit_still_decodes() -> None:
    # The decoder does not know the deployment's limit; the entry was accepted under it.
    assert len(decode_candidate(entry(text="t" * 20_000), STREAM_ID).text) == 20_000


def test_a_bad_trace_id_is_refused() -> None:
    refused(entry(trace_id="req 1"), "trace_id 'req 1' has characters outside")


def test_an_empty_trace_id_is_refused() -> None:
    refused(entry(trace_id=""), "trace_id is empty")


def test_a_bad_thread_id_is_refused() -> None:
    refused(entry(thread_id="a/b"), "thread_id 'a/b' has characters outside")


def test_a_bad_user_id_is_refused() -> None:
    refused(entry(user_id="../admin", namespace="user:u1"), "user_id '../admin' has characters")


def test_a_user_id_other_than_the_namespaces_user_is_refused() -> None:
    refused(entry(user_id="bob"), "user_id 'bob' is not the user of namespace user:u1")


def test_an_unnormalised_path_is_refused() -> None:
    refused(entry(path="preferences"), r"path 'preferences' is not normalised")


def test_a_path_outside_the_memory_route_is_refused() -> None:
    refused(entry(path="/etc/passwd"), "is outside /memories/")


def test_a_path_with_traversal_is_refused() -> None:
    refused(entry(path="/memories/../etc/passwd.md"), r"has an empty, '\.' or '\.\.' segment")


def test_a_bad_key_is_refused() -> None:
    refused(entry(key="Preference Drink"), "key 'Preference Drink' must match")


def test_empty_text_is_refused() -> None:
    refused(entry(text="  "), "text is empty")


def test_text_with_a_nul_character_is_refused() -> None:
    refused(entry(text="tea\x00coffee"), "text contains a NUL character")


def test_an_unknown_kind_is_refused() -> None:
    refused(entry(kind="opinion"), "kind 'opinion' is not one of fact, turn, forget")


def test_an_unknown_source_is_refused() -> None:
    refused(entry(source="webhook"), "source 'webhook' is not one of")


def test_a_naive_creation_time_is_refused() -> None:
    refused(entry(created_at="2025-01-01T12:00:00"), "created_at must be timezone-aware")


def test_a_malformed_namespace_is_refused() -> None:
    refused(entry(namespace="user:u{1}"), re.escape("namespace 'user:u{1}'"))


def test_an_entry_with_an_event_time_decodes_to_the_same_candidate() -> None:
    c = make_candidate(
        user_id="u1", trace_id="t1", text="Tea", occurred_at=T0 - timedelta(days=3), now=T0
    )

    assert decode_candidate(c.model_dump_json(), STREAM_ID) == c


def test_a_naive_event_time_is_refused() -> None:
    refused(entry(occurred_at="2025-01-01T09:00:00"), "occurred_at must be timezone-aware")


def test_an_event_time_after_the_creation_time_is_refused() -> None:
    refused(entry(occurred_at="2025-01-02T12:00:00Z"), "cannot lie in the future")
