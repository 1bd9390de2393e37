"""Who and which run a hook is running for: user id, thread id and trace id, read once.

A capture must carry the user and trace ids *explicitly*, captured while the run is still on
the stack: a timer or worker thread later would not inherit the context variables they come
from. :func:`read_run_ids` is called inside the hook and the result travels with the candidate.

Where each id comes from, first hit wins:

- user id: the run's context (``context={"user_id": …}`` or an object with that attribute),
  then ``config["configurable"][user_key]``, then ``config["metadata"][user_key]`` (a LangGraph
  server copies thread metadata there);
- thread id: ``runtime.execution_info.thread_id``, then ``configurable["thread_id"]``;
- trace id: the run id (``execution_info.run_id``, ``config["run_id"]``, ``configurable`` or
  ``metadata["run_id"]``), then the current LangSmith trace id, and only then a fresh id so the
  candidate is still valid.

>>> ids = read_run_ids(None, {"configurable": {"user_id": "u1", "thread_id": "t1"},
...                          "run_id": "r1"}, user_key="user_id")
>>> (ids.user_id, ids.thread_id, ids.trace_id)
('u1', 't1', 'r1')
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunIds:
    """The ids of one run, captured at one moment."""

    user_id: str | None
    thread_id: str | None
    trace_id: str


def current_config() -> Mapping[str, Any]:
    """The running graph's config, or an empty mapping outside a graph run."""
    from langgraph.config import get_config

    try:
        return get_config()
    except RuntimeError:
        return {}


def read_run_ids(
    runtime: Any, config: Mapping[str, Any] | None, *, user_key: str = "user_id"
) -> RunIds:
    """Read the user, thread and trace ids from a runtime (or tool runtime) and a config."""
    config = config or {}
    configurable = as_mapping(config.get("configurable"))
    metadata = as_mapping(config.get("metadata"))
    context = getattr(runtime, "context", None)
    execution = getattr(runtime, "execution_info", None)

    user_id = _first(
        context_value(context, user_key), configurable.get(user_key), metadata.get(user_key)
    )
    thread_id = _first(getattr(execution, "thread_id", None), configurable.get("thread_id"))
    trace_id = _first(
        getattr(execution, "run_id", None),
        config.get("run_id"),
        configurable.get("run_id"),
        metadata.get("run_id"),
        _langsmith_trace_id(),
    )
    return RunIds(user_id=user_id, thread_id=thread_id, trace_id=trace_id or uuid.uuid4().hex)


def as_mapping(value: object) -> Mapping[str, Any]:
    """``value`` if it is a mapping (a config section), else an empty one."""
    return value if isinstance(value, Mapping) else {}


def context_value(context: object, key: str) -> object:
    """``key`` of a run's context, whether a mapping or an object with attributes."""
    if context is None:
        return None
    if isinstance(context, Mapping):
        return context.get(key)
    return getattr(context, key, None)


def _first(*values: object) -> str | None:
    for value in values:
        if value is not None and str(value):
            return str(value)
    return None


def _langsmith_trace_id() -> str | None:
    try:
        from langsmith.run_helpers import get_current_run_tree
    except ImportError:  # langsmith is optional for memworker
        return None
    tree = get_current_run_tree()
    return str(tree.trace_id) if tree is not None else None
