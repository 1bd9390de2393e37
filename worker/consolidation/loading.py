"""Build the configured consolidator at start-up, refusing mismatches before any batch runs.

- ``MEMWORKER_CONSOLIDATOR`` is a dotted path ``package.module:Class``. A class with a
  ``from_settings(settings, *, model=None)`` classmethod is built through it (``settings`` is
  the consolidation slice, :class:`~worker.types.ConsolidationSettings`); otherwise it is
  called with no arguments, or with the model when it needs one.
- When ``MEMWORKER_MODEL`` (``provider:model``) is set and the consolidator is the default, the
  LLM agent is used with ``init_chat_model(settings.model, **model_arguments(settings))``
  (base URL, timeout, ``MEMWORKER_MODEL_KWARGS``); the provider package is imported only then.
- A bad path, a class that is not a consolidator, a consolidator that needs a model with none
  configured (or a model configured for one that does not use it), or one that cannot read
  turns when turns are required, raise :class:`~worker.errors.ConfigurationError` naming the
  setting.

>>> from worker.settings import Settings
>>> load_consolidator(Settings().for_consolidation).name
'rules'
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from worker.consolidation.plan import (
    Consolidator,
)
from worker.errors import (
    ConfigurationError,
    first_line,
)

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from worker.consolidation.meaning import Meaning
    from worker.types import ConsolidationSettings


#: The default consolidator; with a model configured it is replaced by the LLM agent.
DEFAULT_CONSOLIDATOR: Final = "worker.consolidation.rules:RulesConsolidator"
LLM_CONSOLIDATOR: Final = "worker.consolidation.llm:LLMConsolidator"

#: Providers whose chat model class takes its request timeout as ``timeout`` (an alias in
#: several); others get only the consolidator's own deadline (or ``model_kwargs``).
TIMEOUT_ARGUMENT: Final = frozenset(
    {"openai", "azure_openai", "anthropic", "google_genai", "mistralai", "groq", "deepseek",
     "xai", "fireworks", "together"}
)  # fmt: skip


def import_class(path: str, setting: str) -> type[Any]:
    """The class named by ``package.module:Class``; ConfigurationError naming ``setting``."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(f"{setting}={path!r} must look like 'package.module:Class'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(
            f"{setting}={path!r}: cannot import {module_name}: {exc}"
        ) from None
    cls = getattr(module, attr, None)
    if not isinstance(cls, type):
        raise ConfigurationError(f"{setting}={path!r}: {module_name} has no class {attr}")
    return cls


def model_arguments(settings: ConsolidationSettings) -> dict[str, Any]:
    """Keyword arguments for the provider's chat model class, from the model settings.

    ``model_base_url`` becomes ``base_url``; ``model_timeout_seconds`` becomes the provider's
    own request timeout where its name for it is known (the consolidator enforces the same
    deadline on every call regardless); ``model_kwargs`` come last and win.

    >>> from worker.settings import Settings
    >>> model_arguments(Settings(model="openai:m", model_base_url="http://127.0.0.1:8080/v1",
    ...     model_timeout_seconds=30, model_kwargs={"api_key": "none"}).for_consolidation)
    {'base_url': 'http://127.0.0.1:8080/v1', 'timeout': 30.0, 'api_key': 'none'}
    >>> model_arguments(Settings(model="ollama:m", model_timeout_seconds=30).for_consolidation)
    {'client_kwargs': {'timeout': 30.0}}
    """
    provider = (settings.model or "").partition(":")[0]
    arguments: dict[str, Any] = {}
    if settings.model_base_url:
        arguments["base_url"] = settings.model_base_url
    if provider in TIMEOUT_ARGUMENT:
        arguments["timeout"] = settings.model_timeout_seconds
    elif provider == "ollama":
        arguments["client_kwargs"] = {"timeout": settings.model_timeout_seconds}
    arguments.update(settings.model_kwargs)
    return arguments


def chat_model(settings: ConsolidationSettings) -> BaseChatModel:
    """``init_chat_model(settings.model, **model_arguments(settings))``.

    A missing provider package or arguments the provider refuses are a ConfigurationError.
    """
    from langchain.chat_models import init_chat_model

    spec = settings.model or ""
    try:
        model: BaseChatModel = init_chat_model(spec, **model_arguments(settings))
    except (ImportError, ValueError, TypeError) as exc:
        raise ConfigurationError(
            f"MEMWORKER_MODEL={spec!r} could not be loaded ({first_line(exc)}); use "
            "'provider:model', "
            "install the provider package, e.g. `pip install memworker[openai]`, and check "
            "MEMWORKER_MODEL_BASE_URL and MEMWORKER_MODEL_KWARGS"
        ) from None
    return model


def load_consolidator(
    settings: ConsolidationSettings,
    *,
    model: BaseChatModel | None = None,
    require_turns: bool = False,
    meaning: Meaning | None = None,
) -> Consolidator:
    """The consolidator ``settings`` ask for (see the module docs).

    ``model`` overrides ``settings.model`` (tests pass a scripted model); ``require_turns`` is
    set by callers that will feed ``turn`` candidates (thread scans). ``meaning`` goes to a
    ``from_settings`` that takes it (the built-in consolidators do).
    """
    path = settings.consolidator
    if path == DEFAULT_CONSOLIDATOR and (model is not None or settings.model):
        path = LLM_CONSOLIDATOR
    cls = import_class(path, "MEMWORKER_CONSOLIDATOR")
    missing = [n for n in ("name", "needs_model", "handles_turns", "merge") if not hasattr(cls, n)]
    if missing:
        raise ConfigurationError(
            f"MEMWORKER_CONSOLIDATOR={path!r} is not a consolidator: it lacks "
            f"{', '.join(missing)} (see worker.consolidation.plan.Consolidator)"
        )
    if cls.needs_model and model is None and not settings.model:
        raise ConfigurationError(
            f"MEMWORKER_CONSOLIDATOR={path!r} needs a chat model; set MEMWORKER_MODEL "
            "to 'provider:model'"
        )
    if not cls.needs_model and (model is not None or settings.model):
        raise ConfigurationError(
            f"MEMWORKER_MODEL is set but MEMWORKER_CONSOLIDATOR={path!r} does not use a model; "
            "unset one of them"
        )
    if require_turns and not cls.handles_turns:
        raise ConfigurationError(
            f"MEMWORKER_CONSOLIDATOR={path!r} cannot read 'turn' candidates, which the "
            "configured thread-scan schedules produce; pick one that can"
        )
    if cls.needs_model and model is None:
        model = chat_model(settings)
    try:
        if hasattr(cls, "from_settings"):
            extra = {"meaning": meaning} if _takes(cls.from_settings, "meaning") else {}
            built = cls.from_settings(settings, model=model, **extra)
        else:
            built = cls(model) if cls.needs_model else cls()
    except ConfigurationError:
        raise
    except Exception as exc:
        raise ConfigurationError(
            f"MEMWORKER_CONSOLIDATOR={path!r} could not be built: {type(exc).__name__}: {exc}"
        ) from None
    if not isinstance(built, Consolidator):
        raise ConfigurationError(f"MEMWORKER_CONSOLIDATOR={path!r} did not build a consolidator")
    return built


def _takes(fn: Callable[..., object], name: str) -> bool:
    """Whether ``fn`` accepts a keyword argument ``name``."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())
