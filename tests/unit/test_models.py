"""Every way make_candidate refuses input, each with a message naming what was wrong."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from worker.errors import InvalidCandidate
from worker.models import Candidate, make_candidate
from worker.types import MAX_OCCURRED_AT_SKEW


def build(**overrides: Any) -> Candidate:
    args: dict[str, Any] = {"user_id": "u1", "trace_id": "trace-1", "text": "I prefer tea"}
    args.update(overrides)
    return make_candidate(**args)


def test_a_valid_candidate_is_built() -> None:
    c = build(topic="work/projects", key="project.current", thread_id="th-1")

    assert (c.namespace, c.path, c.key, c.thread_id) == (
        "user:u1",
        "/memories/work/projects.md",
        "project.current",
        "th-1",
    )


def test_empty_text_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="text is empty"):
        build(text="")


def test_whitespace_only_text_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="text is empty"):
        build(text=" \n\t ")


def test_text_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="text must be a string, got bytes"):
        build(text=b"tea")


def test_oversized_text_is_refused_counting_utf8_bytes() -> None:
    with pytest.raises(InvalidCandidate, match="text is 20 bytes; the limit is 16 bytes"):
        build(text="é" * 10, max_text_bytes=16)


def test_text_with_a_nul_character_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="NUL"):
        build(text="tea\x00coffee")


def test_text_with_a_lone_surrogate_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="lone surrogate"):
        build(text="tea \ud800")


def test_a_missing_user_id_is_refused_for_user_scope() -> None:
    with pytest.raises(InvalidCandidate, match="user_id is required for scope 'user'"):
        build(user_id=None)


def test_an_empty_user_id_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="user_id is empty"):
        build(user_id="")


def test_a_user_id_with_path_traversal_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match=r"user_id '\.\./admin' has characters outside"):
        build(user_id="../admin")


def test_a_user_id_with_a_hash_tag_brace_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match=r"user_id 'u\{1\}' has characters outside"):
        build(user_id="u{1}")


def test_a_user_id_with_a_colon_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="user_id 'u:1' has characters outside"):
        build(user_id="u:1")


def test_an_overlong_user_id_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="user_id is 129 characters long; the limit is 128"):
        build(user_id="u" * 129)


def test_a_user_id_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="user_id must be a string, got int"):
        build(user_id=42)


def test_an_empty_trace_id_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="trace_id is empty"):
        build(trace_id="")


def test_a_trace_id_with_spaces_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="trace_id 'req 1' has characters outside"):
        build(trace_id="req 1")


def test_a_bad_thread_id_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="thread_id 'a/b' has characters outside"):
        build(thread_id="a/b")


def test_a_bad_assistant_id_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="assistant_id '-bot' has characters outside"):
        build(assistant_id="-bot")


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="kind 'opinion' is not one of fact, turn, forget"):
        build(kind="opinion")


def test_an_unknown_scope_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="scope 'team' is not one of user, agent, org"):
        build(scope="team")


def test_org_scope_is_refused_on_the_hot_path() -> None:
    with pytest.raises(InvalidCandidate, match="scope 'org' is read-only for the hot path"):
        build(scope="org", org_id="acme")


def test_org_scope_without_an_org_id_is_refused_even_when_allowed() -> None:
    with pytest.raises(InvalidCandidate, match="org_id is required for scope 'org'"):
        build(scope="org", allow_org=True)


def test_agent_scope_without_an_assistant_id_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="assistant_id is required for scope 'agent'"):
        build(scope="agent")


def test_agent_scope_with_a_bad_user_id_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="user_id 'a b' has characters outside"):
        build(scope="agent", assistant_id="bot", user_id="a b")


def test_a_topic_with_path_traversal_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match=r"has an empty, '\.' or '\.\.' segment"):
        build(topic="notes/../../etc/passwd")


def test_a_topic_outside_the_memory_route_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="is outside /memories/"):
        build(topic="/etc/passwd")


def test_a_topic_with_a_backslash_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="backslash or a control character"):
        build(topic="notes\\secrets")


def test_a_topic_with_a_control_character_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="backslash or a control character"):
        build(topic="notes\nsecrets")


def test_an_empty_topic_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="path/topic is empty"):
        build(topic="  ")


def test_a_topic_segment_starting_with_a_dot_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match=r"path segment '\.hidden'"):
        build(topic="notes/.hidden")


def test_an_overlong_topic_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="is longer than 200 characters"):
        build(topic="/".join(["a" * 60] * 4))


def test_a_key_outside_the_slot_alphabet_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="key 'Preference Language' must match"):
        build(key="Preference Language")


def test_an_empty_idempotency_key_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="idempotency_key must be a non-empty string"):
        build(idempotency_key="")


def test_an_overlong_idempotency_key_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="at most 512 chars"):
        build(idempotency_key="k" * 513)


def test_a_naive_creation_time_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="now must be timezone-aware"):
        build(now=datetime(2025, 1, 1))


def test_the_creation_time_is_stored_in_utc() -> None:
    c = build(now=datetime(2025, 1, 1, 12, tzinfo=timezone(timedelta(hours=2))))

    assert c.created_at == datetime(2025, 1, 1, 10, tzinfo=UTC)
    assert c.created_at.utcoffset() == timedelta(0)


def test_an_unknown_field_is_refused_naming_it() -> None:
    with pytest.raises(InvalidCandidate, match=r"unknown enqueue field\(s\) 'colour'"):
        build(colour="blue")


def test_a_missing_required_field_is_refused_naming_it() -> None:
    with pytest.raises(InvalidCandidate, match=r"missing enqueue field\(s\) 'trace_id'"):
        make_candidate(user_id="u1", text="I prefer tea")  # type: ignore[call-arg]


def test_positional_arguments_are_refused() -> None:
    with pytest.raises(TypeError):
        make_candidate("u1", "trace-1", "I prefer tea")  # type: ignore[call-arg, arg-type]


def test_org_scope_with_a_bad_user_id_is_refused_when_allowed() -> None:
    with pytest.raises(InvalidCandidate, match="user_id 'a b' has characters outside"):
        build(scope="org", allow_org=True, org_id="acme", user_id="a b")


def test_operators_build_org_candidates_with_org_id_outside_the_hot_path_fields() -> None:
    c = build(scope="org", allow_org=True, org_id="acme", user_id=None)

    assert c.namespace == "org:acme"


def test_a_source_outside_the_known_integrations_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="source 'webhook' is not one of"):
        build(source="webhook")


def test_the_event_time_is_stored_in_utc() -> None:
    c = build(
        now=datetime(2025, 1, 2, tzinfo=UTC),
        occurred_at=datetime(2025, 1, 1, 12, tzinfo=timezone(timedelta(hours=2))),
    )

    assert c.occurred_at == datetime(2025, 1, 1, 10, tzinfo=UTC)
    assert c.occurred_at.utcoffset() == timedelta(0)


def test_a_candidate_is_said_when_it_occurred() -> None:
    c = build(now=datetime(2025, 1, 2, tzinfo=UTC), occurred_at=datetime(2025, 1, 1, tzinfo=UTC))

    assert c.said_at == datetime(2025, 1, 1, tzinfo=UTC)


def test_a_candidate_without_an_event_time_is_said_when_it_was_created() -> None:
    c = build(now=datetime(2025, 1, 2, tzinfo=UTC))

    assert (c.occurred_at, c.said_at) == (None, datetime(2025, 1, 2, tzinfo=UTC))


def test_a_naive_event_time_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="occurred_at must be timezone-aware"):
        build(occurred_at=datetime(2025, 1, 1))


def test_an_event_time_that_is_not_a_datetime_is_refused() -> None:
    with pytest.raises(InvalidCandidate, match="occurred_at must be timezone-aware"):
        build(occurred_at="2025-01-01T00:00:00Z")


def test_an_event_time_after_the_creation_time_is_refused() -> None:
    now = datetime(2025, 1, 1, 12, tzinfo=UTC)

    with pytest.raises(InvalidCandidate, match=r"occurred_at .* cannot lie in the future"):
        build(now=now, occurred_at=now + MAX_OCCURRED_AT_SKEW + timedelta(seconds=1))


def test_an_event_time_within_the_clock_skew_allowance_is_kept() -> None:
    now = datetime(2025, 1, 1, 12, tzinfo=UTC)

    c = build(now=now, occurred_at=now + MAX_OCCURRED_AT_SKEW)

    assert c.occurred_at == now + MAX_OCCURRED_AT_SKEW
