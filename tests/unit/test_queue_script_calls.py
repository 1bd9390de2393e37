"""Script calls are built from each script's KEYS/ARGV header: names in, order out."""

from __future__ import annotations

import pytest

from worker.queue.scripts import (
    SCRIPTS,
    QueueLayout,
    ScriptCallError,
    check_policy_fields,
    parse_header,
)

LAYOUT = QueueLayout("mw", shards=16)
#: Keys a script names that are not the queue layout's (the beat lock lives outside shards).
OUTSIDE_LAYOUT = {"beat_lock": {"lock"}}


def test_a_call_orders_named_values_as_the_header_lists_them() -> None:
    _, keys, args = SCRIPTS["mark_due"].bind(LAYOUT, namespace="user:u1", now="")

    assert keys == [LAYOUT.log("user:u1"), LAYOUT.meta("user:u1"), LAYOUT.due(8)]
    assert args == ["", "user:u1"]


def test_a_missing_argument_is_refused_by_name() -> None:
    with pytest.raises(ScriptCallError, match=r"missing \['now'\]"):
        SCRIPTS["mark_due"].bind(LAYOUT, namespace="user:u1")


def test_an_unknown_argument_is_refused_by_name() -> None:
    with pytest.raises(ScriptCallError, match=r"unknown \['when'\]"):
        SCRIPTS["mark_due"].bind(LAYOUT, namespace="user:u1", now="", when=5)


def test_the_rest_of_argv_is_one_list_appended_last() -> None:
    _, _, args = SCRIPTS["stats"].bind(LAYOUT, 3, now="", looked_at=10, scopes=["user", "org"])

    assert args == ["", 10, "user", "org"]


def test_a_header_numbered_out_of_order_is_refused_at_load() -> None:
    with pytest.raises(ScriptCallError, match="out of order"):
        parse_header("x", "-- KEYS[1]  log\n-- KEYS[3]  due\n")


def test_every_script_names_only_keys_the_layout_derives() -> None:
    for name, script in SCRIPTS.items():
        for key in set(script.keys) - OUTSIDE_LAYOUT.get(name, set()):
            assert LAYOUT.key(key, 0, "user:u1").startswith("mw:{s0}:"), (name, key)


def test_a_policy_helper_reading_other_fields_than_the_policy_declares_is_refused() -> None:
    with pytest.raises(ScriptCallError, match="QueuePolicy declares"):
        check_policy_fields("redis.call('HMGET', key, 'max_wait', 'quiet')")
