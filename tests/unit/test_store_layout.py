"""Store namespaces per scope: distinct memory namespaces never share a tuple or a prefix."""

from __future__ import annotations

import pytest

from worker.connectors.langgraph import LangGraphStoreSink
from worker.connectors.layout import StoreLayout
from worker.errors import ConfigurationError
from worker.models import Namespace
from worker.settings import Settings


def test_two_orgs_get_two_tuples_by_default() -> None:
    layout = StoreLayout()

    assert layout.namespace_for("org:acme") != layout.namespace_for("org:globex")
    assert layout.namespace_for("org:acme") == ("acme", "_org", "memories")


@pytest.mark.parametrize(
    "user_template",
    [("{assistant_id}", "{user_id}", "memories"), ("{org_id}", "{assistant_id}", "{user_id}", "m")],
    ids=["org-in-user-label", "org-label"],
)
def test_the_same_user_id_in_two_orgs_or_none_gets_three_tuples_each_parsed_back(
    user_template: tuple[str, ...],
) -> None:
    layout = StoreLayout(user=user_template)
    keys = ["user:u1.x:bot", "org:acme:user:u1.x:bot", "org:globex:user:u1.x:bot", "org:acme"]
    tuples = [layout.namespace_for(k) for k in keys]

    assert len(set(tuples)) == len(tuples)
    assert [str(layout.parse_user(t)) for t in tuples[:3]] == keys[:3]
    assert layout.parse_user(tuples[3]) is None


def test_default_tuples_of_every_scope_are_distinct_and_none_is_a_prefix_of_another() -> None:
    layout = StoreLayout()
    keys = ["user:u1", "user:u1:bot", "user:bot:u1", "agent:bot", "agent:u1", "org:bot", "org:u1"]
    tuples = [layout.namespace_for(k) for k in keys]

    assert len(set(tuples)) == len(tuples)
    for a in tuples:
        for b in tuples:
            assert a == b or a[: len(b)] != b


def test_an_org_route_turns_its_folder_into_the_key_root() -> None:
    layout = StoreLayout(routes={"org": "/memories/policies/"})  # type: ignore[dict-item]

    assert layout.key_for("org:acme", "/memories/policies/compliance.md") == "/compliance.md"
    assert layout.key_for("user:u1", "/memories/preferences.md") == "/preferences.md"


def test_a_user_template_without_the_assistant_is_refused_naming_two_namespaces() -> None:
    with pytest.raises(ConfigurationError, match=r"user:u1:bot-a and user:u1:bot-b"):
        StoreLayout(user=("{user_id}", "memories"))


def test_an_org_template_without_the_org_is_refused_naming_two_orgs() -> None:
    with pytest.raises(ConfigurationError, match=r"org:acme and org:globex"):
        StoreLayout(org=("_org", "_shared", "memories"))


def test_an_agent_template_that_can_equal_a_user_tuple_is_refused_naming_both_scopes() -> None:
    with pytest.raises(
        ConfigurationError, match=r"user:<user_id>.*agent:<assistant_id>.*one tuple"
    ):
        StoreLayout(agent=("{assistant_id}", "{scope}", "memories"))  # 'agent' could be a user id


def test_an_org_tuple_that_could_prefix_user_tuples_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"prefix"):
        StoreLayout(org=("{org_id}",))


def test_the_seed_layout_of_one_label_per_org_is_accepted_once_users_live_apart() -> None:
    layout = StoreLayout(
        user=("_users", "{user_id}", "{assistant_id}"),
        agent=("_agents", "{assistant_id}"),
        org=("{org_id}",),
        routes={"org": "/memories/policies/"},  # type: ignore[dict-item]
    )

    assert layout.namespace_for(Namespace.for_org("acme")) == ("acme",)
    assert layout.key_for("org:acme", "/memories/policies/compliance.md") == "/compliance.md"


def test_two_fields_in_one_part_are_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"holds 2 fields"):
        StoreLayout(user=("{user_id}-{assistant_id}", "memories"))


def test_the_sink_refuses_to_start_on_colliding_settings() -> None:
    settings = Settings(
        langgraph_url="http://127.0.0.1:1",
        store_namespace=("{user_id}", "memories"),
    )

    with pytest.raises(ConfigurationError, match=r"MEMWORKER_STORE_NAMESPACE"):
        LangGraphStoreSink.from_settings(settings.for_sinks)


def test_an_inbox_outside_the_user_route_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"inbox"):
        StoreLayout(routes={"user": "/memories/users/"}, inbox="/memories/inbox/")  # type: ignore[dict-item]


def test_a_user_tuple_reads_back_as_its_namespace_and_shared_tuples_as_none() -> None:
    layout = StoreLayout()
    users = [
        Namespace.for_user("ann.lee@example.com", assistant_id="bot.v2"),
        Namespace.for_user("u1"),
    ]

    assert [layout.parse_user(layout.namespace_for(ns)) for ns in users] == users
    assert layout.parse_user(layout.namespace_for("agent:bot")) is None
    assert layout.parse_user(layout.namespace_for("org:acme")) is None
    assert layout.parse_user(("bot", "u1")) is None
