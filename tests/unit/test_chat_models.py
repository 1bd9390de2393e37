"""A chat service's model setting (the deep-agent example's ``DEEP_AGENT_MODEL``): whatever is
wrong with it is one ConfigurationError line naming the variable, as the example promises."""

from __future__ import annotations

import pytest

from tests.langgraph_app.scripted import ToolCallChatModel
from worker.errors import ConfigurationError
from worker.integrations.summary import chat_model_from


@pytest.mark.parametrize(
    "spec",
    [
        "bogus:model",  # LangChain's own error here is four lines: it lists every provider
        "scripted:ToolCallChatModel",  # a class path whose module has no package part
        "tests.langgraph_app.scripted:NoSuchModel",
        "no_such_package.module:Model",
        "",
    ],
)
def test_a_model_that_cannot_be_built_is_one_line_naming_the_variable(spec: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        chat_model_from(spec, variable="DEEP_AGENT_MODEL")

    message = str(refused.value)
    assert "\n" not in message
    assert "DEEP_AGENT_MODEL" in message


def test_a_class_path_builds_that_class() -> None:
    model = chat_model_from(
        "tests.langgraph_app.scripted:ToolCallChatModel", variable="DEEP_AGENT_MODEL"
    )

    assert isinstance(model, ToolCallChatModel)


def test_the_workers_model_setting_is_refused_in_one_line_too() -> None:
    from worker.consolidation.loading import chat_model
    from worker.settings import Settings

    with pytest.raises(ConfigurationError) as refused:
        chat_model(Settings(model="bogus:model").for_consolidation)

    assert "\n" not in str(refused.value)
