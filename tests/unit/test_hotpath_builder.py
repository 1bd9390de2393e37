"""The hot path writes a candidate's stored form itself: byte for byte what the model writes.

The clients skip building a :class:`~worker.models.Candidate` (``model_construct`` and
``model_dump_json`` were a third of an enqueue's client time) and write the JSON directly;
these tests hold that shortcut to the model over generated arguments, so the worker decodes
exactly what ``make_candidate`` would have produced.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from worker.models import EnqueueFields, build_candidate, validate_enqueue
from worker.queue.client import CandidateBuilder, random_id, stored_json
from worker.queue.scripts import EnqueueEncoder, decode_candidate
from worker.settings import Settings

HOUR = timedelta(hours=1)
SETTINGS = Settings(redis_url="redis://cache:6379/0", key_prefix="mw", queue_shards=16)
IDS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,20}", fullmatch=True)
#: Any text a candidate may hold: non-ASCII, quotes, backslashes, control characters, …
TEXTS = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=1, max_size=80
).filter(lambda t: t.strip() != "")
TIMES = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
#: Event times as callers pass them: any offset (stored in UTC), before the creation times drawn.
OCCURRED = st.datetimes(
    min_value=datetime(1990, 1, 1),
    max_value=datetime(1999, 12, 31),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-HOUR)]),
)


@st.composite
def enqueue_fields(draw: st.DrawFn) -> dict[str, Any]:
    fields: dict[str, Any] = {"trace_id": draw(IDS), "text": draw(TEXTS)}
    if draw(st.booleans()):
        fields.update(scope="agent", assistant_id=draw(IDS), user_id=draw(st.none() | IDS))
    else:
        fields.update(user_id=draw(IDS), assistant_id=draw(st.none() | IDS))
    fields["thread_id"] = draw(st.none() | IDS)
    fields["kind"] = draw(st.sampled_from(["fact", "turn", "forget"]))
    topics = ["preferences", "work/projects", "/memories/notes.md"]
    fields["topic"] = draw(st.none() | st.sampled_from(topics))
    fields["key"] = draw(st.none() | st.sampled_from(["preference.language", "a-b_c"]))
    fields["source"] = draw(st.sampled_from(["hot_path", "middleware", "tool"]))
    fields["idempotency_key"] = draw(st.text(min_size=1, max_size=20))
    fields["occurred_at"] = draw(st.none() | OCCURRED)
    return fields


@given(fields=enqueue_fields(), created=TIMES)
def test_the_stored_json_is_byte_for_byte_what_the_model_writes(
    fields: EnqueueFields, created: datetime
) -> None:
    model = build_candidate(fields, now=created)

    written = stored_json(model.id, validate_enqueue(fields, now=created), created)

    assert written == model.model_dump_json().encode()


@given(fields=enqueue_fields())
def test_the_worker_decodes_the_hot_path_candidate_as_the_model_built_it(
    fields: EnqueueFields,
) -> None:
    hot = CandidateBuilder(SETTINGS, "redis://cache:6379/0").candidate(fields)

    decoded = decode_candidate(hot.payload)

    assert decoded == build_candidate(fields, now=decoded.created_at)
    assert (decoded.namespace, decoded.id) == (hot.namespace, hot.id)


def test_the_hot_call_is_the_one_the_encoder_builds_for_the_model() -> None:
    fields: EnqueueFields = {"user_id": "u1", "trace_id": "t1", "text": "I prefer tea"}
    hot = CandidateBuilder(SETTINGS, "redis://cache:6379/0").candidate(fields)
    model = decode_candidate(hot.payload)

    assert CandidateBuilder(SETTINGS, "x").call(hot) == EnqueueEncoder(SETTINGS).call(model)


def test_a_candidate_is_stamped_with_the_current_time() -> None:
    before = datetime.now(UTC)
    hot = CandidateBuilder(SETTINGS, "x").candidate({"user_id": "u1", "trace_id": "t", "text": "x"})

    created = decode_candidate(hot.payload).created_at

    assert before <= created <= datetime.now(UTC) + timedelta(seconds=1)


def test_random_ids_are_distinct_version_4_uuids() -> None:
    ids = {random_id() for _ in range(10_000)}

    assert len(ids) == 10_000
    assert {uuid.UUID(i).version for i in ids} == {4}
    assert {uuid.UUID(i).variant for i in ids} == {uuid.RFC_4122}
    assert all(uuid.UUID(i).hex == i for i in ids)
