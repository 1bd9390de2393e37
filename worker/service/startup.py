"""What a worker does before it takes work: check Redis's durability, publish the policy,
count the queue's statistics where no release counted them yet, and check the model.

``memworker worker`` and ``memworker run`` call :func:`prepare_queue` before Celery starts,
so a worker never runs on a Redis that evicts candidates (unless the operator said so), and
the enqueue script finds this deployment's debounce, max wait and backlog limit in Redis.

The model check is one place for every caller that builds the consolidator (the runtime, so
every worker process and every model-using command): :func:`build_consolidator` refuses, in
one line naming the setting, a base URL that does not parse, a provider package that is not
installed and credentials that are missing (:class:`~worker.errors.ConfigurationError`, exit
code 2); :func:`probe_model_server` then asks the configured server for an answer within
:data:`MODEL_PROBE_SECONDS` (:class:`~worker.errors.ModelUnavailable`, exit code 4).

>>> from worker.settings import Settings
>>> build_consolidator(Settings().for_consolidation).name
'rules'
>>> build_consolidator(
...     Settings(model="openai:m", model_base_url="localhost:8080").for_consolidation)
Traceback (most recent call last):
...
worker.errors.ConfigurationError: MEMWORKER_MODEL_BASE_URL='localhost:8080' is not an ...
"""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from worker.consolidation.loading import chat_model, load_consolidator
from worker.consolidation.meaning import Meaning
from worker.errors import ConfigurationError, MemworkerError, ModelUnavailable
from worker.queue.stats import rebuild_stats

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from worker.consolidation.base import Consolidator
    from worker.queue.admin import QueueAdmin
    from worker.queue.deployment import Durability
    from worker.slices import ConsolidationSettings

#: How long the start-up probe waits for the model server's first answer (any HTTP status).
#: A server that is up answers a request for its model list in milliseconds; one that accepted
#: the connection and never answers must not hold a worker's start or an operator's command
#: for the whole model deadline. Never longer than ``model_timeout_seconds``.
MODEL_PROBE_SECONDS: Final = 3.0

#: Longest error text quoted from a provider: enough for its reason, never a page.
MAX_QUOTED: Final = 300


def prepare_queue(queue: QueueAdmin, *, sinks: Sequence[str] | None = None) -> Durability:
    """Refuse an evicting Redis (:class:`~worker.errors.QueueMisconfigured`, unless
    ``allow_evicting_redis``), log the other durability risks, then write the policy (and the
    ``sinks`` the workers publish to, when given) and recount the statistics of shards an
    earlier release wrote (once: a no-op afterwards)."""
    durability = queue.check_durability()
    queue.publish_policy()
    if sinks is not None:
        queue.record_sinks(sinks)
    rebuild_stats(queue.redis, queue.layout)
    return durability


def prepare_merges() -> None:
    """What a consolidating process builds before it takes work: the guards' compiled parts
    (:func:`worker.consolidation.guards.prepare`), so a worker's first batch costs what the
    others cost. The guards are imported here: the commands that only check the consolidator
    never load them."""
    from worker.consolidation import guards

    guards.prepare()


def build_consolidator(
    settings: ConsolidationSettings, *, meaning: Meaning | None = None
) -> Consolidator:
    """The configured consolidator, its chat model built and checked (no network call).

    Every failure is a one-line :class:`ConfigurationError` naming the setting to fix: the
    base URL, the provider package, the credentials, or what the loader itself refuses.
    """
    model = None
    if settings.model:
        if settings.model_base_url:
            base_url_parts(settings)
        model = _build_model(settings)
        _require_credentials(settings, model)
    try:
        return load_consolidator(settings, model=model, meaning=meaning)
    except MemworkerError as exc:
        raise type(exc)(one_line(str(exc))) from None


def probe_model_server(settings: ConsolidationSettings) -> None:
    """When a model server is configured (``MEMWORKER_MODEL_BASE_URL``), check that it answers
    an HTTP request within :data:`MODEL_PROBE_SECONDS`; :class:`ModelUnavailable` if not.

    Any HTTP answer counts (401, 404 …): the probe asks whether the server is up, not whether
    it likes the request. Without a base URL (a provider's public API) nothing is probed.
    """
    if not settings.model or not settings.model_base_url:
        return
    scheme, host, port, path = base_url_parts(settings)
    deadline = min(MODEL_PROBE_SECONDS, settings.model_timeout_seconds)
    connection: http.client.HTTPConnection
    if scheme == "https":
        context = ssl.create_default_context()
        connection = http.client.HTTPSConnection(host, port, timeout=deadline, context=context)
    else:
        connection = http.client.HTTPConnection(host, port, timeout=deadline)
    try:
        connection.request("GET", f"{path.rstrip('/')}/models")
        connection.getresponse().close()
    except TimeoutError:
        raise ModelUnavailable(
            f"the model server at {settings.model_base_url} did not answer within {deadline:g} s; "
            "start it or fix MEMWORKER_MODEL_BASE_URL"
        ) from None
    except (OSError, http.client.HTTPException) as exc:
        reason = one_line(str(exc)) or type(exc).__name__
        raise ModelUnavailable(
            f"the model server at {settings.model_base_url} is unreachable ({reason}); start it "
            "or fix MEMWORKER_MODEL_BASE_URL"
        ) from None
    finally:
        connection.close()


def base_url_parts(settings: ConsolidationSettings) -> tuple[str, str, int, str]:
    """``(scheme, host, port, path)`` of ``MEMWORKER_MODEL_BASE_URL``; ConfigurationError
    unless it is an http(s) URL with a host (and a numeric port, when one is given)."""
    url = settings.model_base_url or ""
    refused = ConfigurationError(
        f"MEMWORKER_MODEL_BASE_URL={url!r} is not an http(s) URL; give one such as "
        "http://127.0.0.1:8080/v1"
    )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise refused
    try:
        port = parts.port
    except ValueError:
        raise refused from None
    default = 443 if parts.scheme == "https" else 80
    return parts.scheme, parts.hostname, port or default, parts.path


def one_line(text: str) -> str:
    """A provider's message as one line: its first line, at most :data:`MAX_QUOTED` long."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    first = lines[0] if lines else ""
    return first if len(first) <= MAX_QUOTED else first[: MAX_QUOTED - 1] + "…"


def _build_model(settings: ConsolidationSettings) -> BaseChatModel:
    """The chat model; the provider's own refusal (missing credentials, a bad argument) is a
    one-line ConfigurationError, as a missing package already is."""
    try:
        return chat_model(settings)
    except ConfigurationError as exc:
        raise ConfigurationError(_first_clause(str(exc))) from None
    except Exception as exc:  # the provider SDK's own error type: any is a configuration one
        text = str(exc)
        if "api_key" in text.lower() or "credential" in text.lower():
            provider = (settings.model or "").partition(":")[0]
            raise _no_credentials(settings, f"{provider.upper()}_API_KEY") from None
        raise ConfigurationError(
            f"MEMWORKER_MODEL={settings.model!r} could not be built: "
            f"{one_line(text) or type(exc).__name__}"
        ) from None


def _require_credentials(settings: ConsolidationSettings, model: Any) -> None:
    """Refuse a model whose API key fields are all empty (the provider would refuse every
    call): ``anthropic_api_key`` is read from ``ANTHROPIC_API_KEY``, and so on."""
    fields = [name for name in getattr(type(model), "model_fields", {}) if name.endswith("api_key")]
    if not fields or any(_secret(getattr(model, name, None)) for name in fields):
        return
    raise _no_credentials(settings, fields[0].upper())


def _no_credentials(settings: ConsolidationSettings, variable: str) -> ConfigurationError:
    return ConfigurationError(
        f"MEMWORKER_MODEL={settings.model!r} has no credentials: set {variable}, or give the "
        'key as MEMWORKER_MODEL_KWARGS=\'{"api_key": "..."}\' ("none" for a local server '
        "that needs none)"
    )


def _secret(value: Any) -> str:
    """The text of a key field (a pydantic ``SecretStr`` or a plain string); '' when unset."""
    if value is None:
        return ""
    getter = getattr(value, "get_secret_value", None)
    return str(getter() if callable(getter) else value)


def _first_clause(message: str) -> str:
    """The loader's message with the provider's quoted text cut to one line."""
    head, sep, rest = message.partition(" (")
    if not sep:
        return one_line(message)
    quoted, close, tail = rest.rpartition("); ")
    if not close:
        return one_line(message)
    return f"{head} ({one_line(quoted)}); {one_line(tail)}"
