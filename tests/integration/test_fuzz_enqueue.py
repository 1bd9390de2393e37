"""Fuzzing the hot path: every bad candidate is refused by name, and Redis stays untouched.

Each example starts from valid arguments and corrupts exactly one of them (oversized, empty,
control characters, invalid ids, path traversal, unknown kinds, wrong types, …). The call must
raise :class:`InvalidCandidate` whose message names the corrupted argument, and no key under
the test's prefix may exist afterwards. The same holds for ``memworker enqueue`` through
Typer's CliRunner: exit code 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import string
from typing import Any, Final

import pytest
import redis
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from worker.cli.queue import register_queue
from worker.errors import InvalidCandidate
from worker.models import ENQUEUE_FIELDS, SOURCES
from worker.queue.client import MemoryClient
from worker.settings import Settings
from worker.types import MAX_ID_LENGTH

MAX_TEXT_BYTES: Final = 8192
VALID: Final[dict[str, Any]] = {
    "user_id": "u-1",
    "trace_id": "trace-1",
    "text": "I prefer green tea",
    "kind": "fact",
    "topic": "preferences",
    "key": "preference.drink",
    "assistant_id": "bot-1",
    "thread_id": "thread-1",
    "idempotency_key": "turn-1",
    "scope": "user",
    "source": "hot_path",
}
ID_ARGS: Final = ("user_id", "trace_id", "assistant_id", "thread_id")
ID_ALPHABET: Final = string.ascii_letters + string.digits + "_.@-"
FUZZ: Final = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

wrong_types = st.one_of(
    st.integers(),
    st.floats(allow_nan=True),
    st.binary(max_size=8),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.tuples(st.text(max_size=3)),
)
#: Characters that are never part of a valid id (control characters, separators, markup, …).
foreign_chars = st.one_of(
    st.characters(codec="utf-8").filter(lambda ch: ch not in ID_ALPHABET),
    st.sampled_from(list("\x00\x1b\n\r\t :/{}[]\\<>'\"é💥\u202e")),
)


@st.composite
def bad_ids(draw: st.DrawFn) -> str:
    good = draw(st.text(ID_ALPHABET, min_size=1, max_size=40).filter(lambda s: s[0].isalnum()))
    how = draw(st.sampled_from(["empty", "long", "foreign", "leading"]))
    if how == "empty":
        return ""
    if how == "long":
        return (good * (MAX_ID_LENGTH // len(good) + 2))[: draw(st.integers(129, 400))]
    if how == "leading":
        return draw(st.sampled_from("_.@-")) + good
    at = draw(st.integers(0, len(good)))
    return good[:at] + draw(foreign_chars) + good[at:]


blank = st.text(st.sampled_from(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u2003\u3000"), max_size=20)
bad_texts = st.one_of(
    blank,
    st.builds(lambda a, b: a + "\x00" + b, st.text(max_size=50), st.text(max_size=50)),
    st.builds(lambda a, b: a + "\ud800" + b, st.text(max_size=50), st.text(max_size=50)),
    st.builds(
        lambda ch, extra: ch * (MAX_TEXT_BYTES // len(ch.encode()) + 1 + extra),
        st.sampled_from(["a", "é", "€", "😀", "<"]),
        st.integers(0, 5000),
    ),
)

bad_segments = st.sampled_from(
    [
        "",
        ".",
        "..",
        ".hidden",
        "-dash",
        "a b",
        "a:b",
        "é",
        "a\x00b",
        "a\x1fb",
        "a\x01",
        "x" * 65,
        "a\\b",
        "a*",
        "~user",
        "%2e%2e",
    ]
)
good_segments = st.text(string.ascii_lowercase + string.digits + "_-", min_size=1, max_size=12)


@st.composite
def bad_topics(draw: st.DrawFn) -> str:
    how = draw(st.sampled_from(["segment", "outside", "long", "blank"]))
    if how == "blank":
        return draw(blank)
    if how == "outside":
        root = draw(st.sampled_from(["/etc", "/memoriesX", "/", "//memories", "/tmp/../memories"]))
        return root + "/" + "/".join(draw(st.lists(good_segments, min_size=1, max_size=3)))
    if how == "long":
        return "/".join(draw(st.lists(good_segments, min_size=1, max_size=3)) + ["a" * 30] * 7)
    segments = draw(st.lists(good_segments, max_size=3))
    segments.insert(draw(st.integers(0, len(segments))), draw(bad_segments))
    prefix = draw(st.sampled_from(["", "/memories/"]))
    return prefix + "/".join(segments)


bad_keys = st.one_of(
    st.just(""),
    st.text(string.ascii_lowercase, min_size=101, max_size=150),
    st.builds(lambda c, s: c + s, st.sampled_from(list("A_.-Ü ")), st.text("abc.", max_size=5)),
    st.builds(lambda s, c: "k" + s + c, st.text("abc", max_size=5), foreign_chars),
)
#: Rich console markup: a CLI error message quoting it must print it, not interpret it.
markup = st.sampled_from(["[/red]", "[/]", "[bold]x", "[link=file:///etc/passwd]x[/link]"])
unknown = st.one_of(st.text(max_size=20), markup)
bad_kinds = unknown.filter(lambda s: s not in ("fact", "turn", "forget"))
bad_scopes = unknown.filter(lambda s: s not in ("user", "agent"))
bad_sources = unknown.filter(lambda s: s not in SOURCES)
bad_idempotency = st.one_of(st.just(""), st.text(min_size=513, max_size=600))


def corrupt(arg: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[str, Any]]:
    return st.tuples(st.just(arg), values)


ID_CASES = st.one_of(*(corrupt(a, bad_ids()) for a in ID_ARGS))
TEXT_CASES = corrupt("text", bad_texts)
TOPIC_CASES = corrupt("topic", bad_topics())
ENUM_CASES = st.one_of(
    corrupt("kind", bad_kinds),
    corrupt("scope", bad_scopes),
    corrupt("source", bad_sources),
    corrupt("key", bad_keys),
    corrupt("idempotency_key", bad_idempotency),
)
TYPE_CASES = st.one_of(*(corrupt(a, wrong_types) for a in VALID))


#: Keywords outside the contract: misspellings, the worker-only ``now``/``org_id``, anything.
unknown_fields = st.one_of(
    st.sampled_from(["user", "topics", "now", "org_id", "allow_org", "max_text_bytes", "Text"]),
    st.text(min_size=1, max_size=20),
).filter(lambda name: name not in ENQUEUE_FIELDS)


@pytest.fixture
def client(settings: Settings) -> MemoryClient:
    return MemoryClient(settings)


def assert_refused(
    client: MemoryClient, redis_client: redis.Redis, prefix: str, case: tuple[str, Any]
) -> None:
    arg, value = case
    with pytest.raises(InvalidCandidate) as refused:
        client.enqueue(**{**VALID, arg: value})
    assert arg in str(refused.value), f"{arg}={value!r}: {refused.value}"
    assert redis_client.keys(f"{prefix}:*") == []


@settings(FUZZ, max_examples=2500)
@given(case=ID_CASES)
def test_invalid_ids_are_refused_naming_the_argument(
    client: MemoryClient, redis_client: redis.Redis, key_prefix: str, case: tuple[str, Any]
) -> None:
    assert_refused(client, redis_client, key_prefix, case)


@settings(FUZZ, max_examples=2000)
@given(case=TEXT_CASES)
def test_empty_oversized_nul_or_surrogate_texts_are_refused(
    client: MemoryClient, redis_client: redis.Redis, key_prefix: str, case: tuple[str, Any]
) -> None:
    assert_refused(client, redis_client, key_prefix, case)


@settings(FUZZ, max_examples=2500)
@given(case=TOPIC_CASES)
def test_topics_escaping_or_malformed_are_refused(
    client: MemoryClient, redis_client: redis.Redis, key_prefix: str, case: tuple[str, Any]
) -> None:
    assert_refused(client, redis_client, key_prefix, case)


@settings(FUZZ, max_examples=2000)
@given(case=ENUM_CASES)
def test_unknown_kinds_scopes_sources_and_bad_keys_are_refused(
    client: MemoryClient, redis_client: redis.Redis, key_prefix: str, case: tuple[str, Any]
) -> None:
    assert_refused(client, redis_client, key_prefix, case)


@settings(FUZZ, max_examples=1500)
@given(case=TYPE_CASES)
def test_arguments_of_the_wrong_type_are_refused(
    client: MemoryClient, redis_client: redis.Redis, key_prefix: str, case: tuple[str, Any]
) -> None:
    assert_refused(client, redis_client, key_prefix, case)


@settings(FUZZ, max_examples=500)
@given(name=unknown_fields, value=st.one_of(st.none(), st.text(max_size=5), st.integers()))
def test_unknown_keywords_are_refused_naming_them(
    client: MemoryClient, redis_client: redis.Redis, key_prefix: str, name: str, value: Any
) -> None:
    with pytest.raises(InvalidCandidate) as refused:
        client.enqueue(**{**VALID, name: value})
    assert repr(name) in str(refused.value), f"{name!r}: {refused.value}"
    assert redis_client.keys(f"{key_prefix}:*") == []


# --- the CLI -----------------------------------------------------------------------------------

CLI_OPTIONS: Final = {
    "user_id": "--user",
    "trace_id": "--trace",
    "assistant_id": "--assistant",
    "thread_id": "--thread",
    "kind": "--kind",
    "topic": "--topic",
    "key": "--key",
    "scope": "--scope",
}


def fits_argv(case: tuple[str, Any]) -> bool:
    """Command lines cannot carry NUL or lone surrogates; an empty ``--trace`` means "generate
    one" (a documented CLI default), so it is no bad input there."""
    arg, value = case
    return (
        isinstance(value, str)
        and "\x00" not in value
        and "\ud800" not in value
        and (arg, value) != ("trace_id", "")
    )


CLI_CASES = st.one_of(
    ID_CASES, TEXT_CASES, TOPIC_CASES,
    corrupt("kind", bad_kinds), corrupt("scope", bad_scopes), corrupt("key", bad_keys),
).filter(fits_argv)  # fmt: skip


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """memworker (only the queue commands)."""

    register_queue(app)
    return app


@settings(FUZZ, max_examples=500)
@given(case=CLI_CASES)
def test_cli_enqueue_refuses_bad_input_with_exit_2_and_one_line(
    cli: typer.Typer,
    settings: Settings,
    redis_client: redis.Redis,
    key_prefix: str,
    case: tuple[str, Any],
) -> None:
    arg, value = case
    values = {**VALID, arg: value}
    options = [x for a, flag in CLI_OPTIONS.items() for x in (flag, str(values[a]))]
    argv = ["enqueue", *options, "--", values["text"]]
    env = {
        "MEMWORKER_REDIS_URL": str(settings.redis_url),
        "MEMWORKER_KEY_PREFIX": key_prefix,
        "MEMWORKER_DATA_DIR": str(settings.data_dir),
    }
    result = CliRunner().invoke(cli, argv, env=env)
    assert result.exit_code == 2, (arg, value, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    assert redis_client.keys(f"{key_prefix}:*") == []
