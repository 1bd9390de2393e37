"""A chat service's own chat model, named by one setting: ``provider:model`` (LangChain's
``init_chat_model``) or a class path ``package.module:Class`` built without arguments.

What an agent server reads at start (the deep-agent example's ``DEEP_AGENT_MODEL``): any
failure to build the model is one :class:`~worker.errors.ConfigurationError` line naming the
variable, never the library's multi-line error.

>>> chat_model_from("bogus:model", variable="AGENT_MODEL")
Traceback (most recent call last):
...
worker.errors.ConfigurationError: AGENT_MODEL='bogus:model' could not be built (ValueError: ...
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from worker.errors import ConfigurationError, first_line

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


def chat_model_from(spec: str | None, *, variable: str) -> BaseChatModel:
    """The chat model ``spec`` names (see the module); ``variable`` is the setting's name, for
    the error. A spec whose module part has a dot (``package.module:Class``) is a class path."""
    if not spec:
        raise ConfigurationError(
            f"set {variable} to a chat model, e.g. {variable}=openai:gpt-4o-mini (with "
            "OPENAI_API_KEY), or a class as package.module:Class"
        )
    head, _, tail = spec.partition(":")
    try:
        if "." in head:
            built: BaseChatModel = getattr(importlib.import_module(head), tail)()
            return built
        from langchain.chat_models import init_chat_model

        built = init_chat_model(spec)
    except Exception as exc:  # any failure to build the model is the same one line
        raise ConfigurationError(
            f"{variable}={spec!r} could not be built ({type(exc).__name__}: {first_line(exc)}); "
            "give provider:model with its package installed (e.g. `pip install "
            "langchain-openai`) and its credentials set, or a class as package.module:Class"
        ) from None
    return built
