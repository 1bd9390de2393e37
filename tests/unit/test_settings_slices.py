"""Specification of the settings slices: each layer is handed a frozen view of Settings.

Every field reaches a slice (or is read at the edge alone), a field shared by several slices
is shared on purpose, and a ``MEMWORKER_*`` variable still reaches the slice that reads it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from worker.settings import (
    CLIENT_FIELDS,
    QUEUE_POLICY_SETTINGS,
    ClientSettings,
    Settings,
    load_settings,
)
from worker.types import (
    ConsolidationSettings,
    LaneSettings,
    QueuePolicy,
    QueueSettings,
    SinkSettings,
    SourceSettings,
    StoreSettings,
)

#: Each slice, by the property of Settings that hands it out.
SLICES: dict[str, type] = {
    "for_queue": QueueSettings,
    "for_store": StoreSettings,
    "for_consolidation": ConsolidationSettings,
    "for_sinks": SinkSettings,
    "for_sources": SourceSettings,
    "for_lanes": LaneSettings,
}

#: Fields only the edge reads (to find Redis, open the data directory, serve metrics), or that
#: reach a slice through a derived property (``effective_database_url``, ``effective_files_dir``).
EDGE_ONLY = {
    "redis_url", "data_dir", "database_url", "files_dir", "metrics_port", "console_user",
    "console_password",
}  # fmt: skip

#: Derived properties a slice may copy, and the fields they are derived from.
DERIVED = {
    "effective_database_url": {"database_url", "data_dir"},
    "effective_files_dir": {"files_dir", "data_dir"},
    "queue_policy": {setting for setting, _ in QUEUE_POLICY_SETTINGS.values()},
}

#: Fields more than one layer reads, on purpose: the key prefix names queue keys and task
#: lanes; the text limit bounds enqueue, scan and plan alike; the inbox route is refused by
#: plans and written by the sinks' layout; the LangGraph server serves sinks and sources.
SHARED = {
    "key_prefix",
    "max_text_bytes",
    "inbox_route",
    "langgraph_url",
    "langgraph_api_key",
    "queue_shards",
    "allow_evicting_redis",
}


def _slice_fields(kind: type) -> set[str]:
    return {f.name for f in dataclasses.fields(kind)}


def _homes() -> dict[str, set[str]]:
    """Each Settings field with the slices (the client's included) that read it."""
    homes: dict[str, set[str]] = {name: set() for name in Settings.model_fields}
    owners = {**{prop: _slice_fields(kind) for prop, kind in SLICES.items()}}
    owners["client"] = set(CLIENT_FIELDS)
    for owner, names in owners.items():
        for name in names:
            for source in DERIVED.get(name, {name}):
                homes[source].add(owner)
    return homes


def test_every_slice_field_is_a_settings_attribute() -> None:
    for kind in SLICES.values():
        for name in _slice_fields(kind):
            assert name in Settings.model_fields or name in DERIVED, (kind.__name__, name)


def test_every_field_reaches_a_slice_or_is_edge_only() -> None:
    homes = _homes()
    homeless = {name for name, owners in homes.items() if not owners} - EDGE_ONLY
    assert homeless == set()


def test_a_field_in_several_slices_is_shared_on_purpose() -> None:
    homes = _homes()
    several = {name for name, owners in homes.items() if len(owners) > 1 and name not in EDGE_ONLY}
    assert several == SHARED


def test_slices_are_frozen_copies_of_the_validated_values() -> None:
    settings = Settings(debounce_seconds=5, max_wait_seconds=60, key_prefix="chat")
    queue = settings.for_queue
    policy = queue.queue_policy
    assert (policy.quiet, policy.max_wait, queue.key_prefix) == (5000, 60000, "chat")
    with pytest.raises(dataclasses.FrozenInstanceError):
        queue.queue_policy = QueuePolicy(quiet=1000, shards=1)  # type: ignore[misc]
    assert settings.for_queue == queue


def test_slices_keep_secrets_out_of_their_repr() -> None:
    settings = Settings(langgraph_api_key="s3cret", model_kwargs={"api_key": "k3y"})
    for prop in SLICES:
        text = repr(getattr(settings, prop))
        assert "s3cret" not in text, prop
        assert "k3y" not in text, prop


def test_derived_attributes_reach_their_slices(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    assert settings.for_store.effective_database_url == f"sqlite:///{tmp_path}/memworker.sqlite3"
    assert settings.for_sinks.effective_files_dir == tmp_path / "files"


@pytest.mark.parametrize(
    ("variable", "value", "prop", "field", "expected"),
    [
        ("MEMWORKER_DEBOUNCE_SECONDS", "7", "for_queue", "queue_policy",
         QueuePolicy(quiet=7000, shards=256)),
        ("MEMWORKER_CLAIM_LIMIT", "9", "for_queue", "claim_limit", 9),
        ("MEMWORKER_DATABASE_TIMEOUT_SECONDS", "12", "for_store", "database_timeout_seconds", 12.0),
        ("MEMWORKER_MODEL", "openai:m", "for_consolidation", "model", "openai:m"),
        ("MEMWORKER_SENSITIVE_PATHS", '["/memories/a.md"]', "for_consolidation",
         "sensitive_paths", ["/memories/a.md"]),
        ("MEMWORKER_SINKS", '["files", "langgraph"]', "for_sinks", "sinks", ["files", "langgraph"]),
        ("MEMWORKER_THREAD_ASSISTANT_KEY", "graph_id", "for_sources", "thread_assistant_key",
         "graph_id"),
        ("MEMWORKER_BROKER_URL", "amqp://mq:5672/mw", "for_lanes", "broker_url",
         "amqp://mq:5672/mw"),
    ],
)  # fmt: skip
def test_a_variable_still_reaches_its_slice(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, prop: str, field: str,
    expected: object,
) -> None:  # fmt: skip
    monkeypatch.setenv(variable, value)
    assert getattr(getattr(load_settings(), prop), field) == expected


def test_the_client_slice_is_built_from_the_same_settings() -> None:
    settings = Settings(key_prefix="chat", queue_shards=8)
    client = ClientSettings.of(settings)
    assert (client.key_prefix, client.queue_shards) == ("chat", 8)
    assert (settings.for_queue.key_prefix, settings.for_queue.queue_shards) == ("chat", 8)


def test_every_queue_policy_field_is_set_by_a_setting() -> None:
    declared = {f.name for f in dataclasses.fields(QueuePolicy)}
    assert set(QUEUE_POLICY_SETTINGS) == declared
    for setting, _ in QUEUE_POLICY_SETTINGS.values():
        assert setting in Settings.model_fields, setting


def test_the_queue_policy_is_the_settings_values_in_its_units() -> None:
    settings = Settings(debounce_seconds=2.5, max_wait_seconds=9, max_pending_per_namespace=7)
    assert settings.queue_policy == QueuePolicy(
        quiet=2500, max_wait=9000, max_pending=7, shards=256
    )
