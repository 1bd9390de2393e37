"""The hot path's candidate is the model's: what the worker decodes is what ``build_candidate``
built, over generated arguments.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from worker.models import EnqueueFields, build_candidate
from worker.queue.client import CandidateBuilder
from worker.queue.scripts import decode_candidate
from worker.settings import Settings

HOUR = timedelta(hours=1)
SETTINGS = Settings(redis_url="redis://cache:6379/0", key_prefix="mw", queue_shards=16)
IDS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,20}", fullmatch=True)
#: Any text a candidate may hold: non-ASCII, quotes, backslashes, control characters, …
TEXTS = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=1, max_size=80
).filter(lambda t: t.strip() != "")
#: Event times as callers pass them: any offset (stored in UTC), before the enqueue.
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


@given(fields=enqueue_fields())
def test_the_worker_decodes_the_hot_path_candidate_as_the_model_built_it(
    fields: EnqueueFields,
) -> None:
    builder = CandidateBuilder(SETTINGS, "redis://cache:6379/0")
    _script, _keys, args = builder.call(builder.candidate(fields))

    decoded = decode_candidate(args[3])

    assert decoded == build_candidate(fields, now=decoded.created_at)
    assert (decoded.namespace, decoded.id) == (args[1], args[2])


def test_a_candidate_is_stamped_with_the_current_time() -> None:
    before = datetime.now(UTC)
    builder = CandidateBuilder(SETTINGS, "x")
    _script, _keys, args = builder.call(
        builder.candidate({"user_id": "u1", "trace_id": "t", "text": "x"})
    )

    created = decode_candidate(args[3]).created_at

    assert before <= created <= datetime.now(UTC) + timedelta(seconds=1)
