"""One batch through the consolidator: merge → validate → apply, for the pipeline to commit.

>>> from datetime import UTC, datetime
>>> from worker.consolidation.rules import RulesConsolidator
>>> from worker.models import NamespaceState
>>> from worker.models import make_candidate
>>> from worker.settings import Settings
>>> t = datetime(2025, 1, 1, tzinfo=UTC)
>>> c = make_candidate(user_id="u1", trace_id="t1", text="I prefer tea", now=t)
>>> plan, applied = consolidate_batch(RulesConsolidator(), NamespaceState("user:u1", 0, None),
...     [c], now=t, settings=Settings().for_consolidation, current_files={})
>>> print(applied.files[0].content, end="")
# Preferences
<BLANKLINE>
- I prefer tea

Build the configured consolidator at start-up, refusing mismatches before any batch runs.

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
from collections.abc import Callable, Collection, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Protocol

from worker.consolidation.plan import (
    Consolidator,
    Operation,
    Plan,
    Reject,
    apply_plan,
    validate_plan,
)
from worker.errors import (
    ConfigurationError,
    ConsolidatorError,
    InvalidPlan,
    MemworkerError,
    first_line,
)
from worker.models import AppliedPlan, Candidate, NamespaceState
from worker.types import reserved_prefix

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from worker.consolidation.meaning import Meaning
    from worker.types import ConsolidationSettings


class Limits(Protocol):
    """The settings a batch is held to; the consolidation slice
    (:class:`~worker.types.ConsolidationSettings`) satisfies it."""

    @property
    def max_removals_per_run(self) -> int: ...
    @property
    def max_text_bytes(self) -> int: ...
    @property
    def file_budget_bytes(self) -> int: ...
    @property
    def sensitive_paths(self) -> Collection[str]: ...
    @property
    def inbox_route(self) -> str: ...


@dataclass(frozen=True)
class Merge:
    """One batch merged: the ``batch`` the ledger did not hold yet (each id once), how many of
    the given candidates were ``skipped``, the plan and what applying it writes (both None when
    nothing was new)."""

    batch: Sequence[Candidate]
    skipped: int
    plan: Plan | None = None
    applied: AppliedPlan | None = None


def merge_new(
    consolidator: Consolidator,
    state: NamespaceState,
    candidates: Sequence[Candidate],
    *,
    recorded: Set[str],
    current_files: Mapping[str, str],
    now: datetime,
    settings: Limits,
) -> Merge:
    """Merge the ``candidates`` that the ledger (``recorded``) does not hold into ``state``.

    **The ledger is the proof.** A candidate is skipped only because the unique ledger holds
    it, so a batch committed whose ack was lost merges nothing twice; a retried capture
    enqueued twice merges once.
    """
    batch = _unique([c for c in candidates if c.id not in recorded])
    skipped = len(candidates) - len(batch)
    if not batch:
        return Merge(batch, skipped)
    plan, applied = consolidate_batch(
        consolidator, state, batch, now=now, settings=settings, current_files=current_files
    )
    return Merge(batch, skipped, plan, applied)


def consolidate_batch(
    consolidator: Consolidator,
    state: NamespaceState,
    batch: Sequence[Candidate],
    *,
    now: datetime,
    settings: Limits,
    current_files: Mapping[str, str],
) -> tuple[Plan, AppliedPlan]:
    """Merge ``batch`` into ``state``; raise InvalidPlan (batch stays pending) on any problem.

    A consolidator's unexpected exception becomes :class:`ConsolidatorError`, so the pipeline
    handles one family of errors. A candidate whose path is reserved (under the deployment's
    inbox route, which a hot-path client cannot know) is rejected here, named, so it neither
    reaches the consolidator nor fails the rest of its batch.
    """
    refused = _reserved_rejects(batch, (settings.inbox_route,))
    held = {cid for op in refused for cid in op.candidate_ids}
    rest = [c for c in batch if c.id not in held]
    try:
        plan = consolidator.merge(state, rest, now=now) if rest else Plan()
    except MemworkerError:
        raise
    except Exception as exc:
        raise ConsolidatorError(
            f"consolidator {consolidator.name!r} failed on {state.namespace}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if refused:
        plan = plan.model_copy(update={"ops": [*plan.ops, *refused]})
    problems = validate_plan(
        state, batch, plan,
        max_removals=settings.max_removals_per_run, max_text_bytes=settings.max_text_bytes,
        reserved=(settings.inbox_route,), meaning=getattr(consolidator, "meaning", None),
    )  # fmt: skip
    if problems:
        raise InvalidPlan(problems)
    applied = apply_plan(
        state, batch, plan, now=now, current_files=current_files,
        file_budget_bytes=settings.file_budget_bytes, sensitive_paths=settings.sensitive_paths,
    )  # fmt: skip
    return plan, applied


def _reserved_rejects(batch: Sequence[Candidate], reserved: Collection[str]) -> list[Operation]:
    """A reject for each candidate of ``batch`` whose path falls under a reserved prefix."""
    return [
        Reject(
            candidate_ids=[c.id],
            reason=f"path {c.path} is under the reserved prefix {prefix} (the inbox route); "
            "send it with another topic",
        )
        for c in batch
        if c.path is not None and (prefix := reserved_prefix(c.path, reserved)) is not None
    ]


def _unique(batch: Sequence[Candidate]) -> list[Candidate]:
    """First occurrence of each candidate id."""
    seen: set[str] = set()
    out = []
    for candidate in batch:
        if candidate.id not in seen:
            seen.add(candidate.id)
            out.append(candidate)
    return out


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
