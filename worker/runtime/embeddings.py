"""Build the configured embedding model from its ``provider:model`` name.

>>> build_embeddings(None) is None and build_embeddings("  ") is None
True
>>> build_embeddings("none") is None  # MEMWORKER_EMBEDDINGS=none: merging and search by words
True
>>> build_embeddings("text-embedding-3-small")
Traceback (most recent call last):
...
worker.errors.ConfigurationError: embeddings 'text-embedding-3-small': write provider:model, \
e.g. local:multilingual-e5-small, openai:text-embedding-3-small or ollama:nomic-embed-text

Two kinds of name:

* ``local:<name>`` — a model shipped inside an installed package, run in-process with no
  download (:mod:`worker.runtime.local_embeddings`; the default, :data:`DEFAULT_EMBEDDINGS`,
  ships with the worker's install).
* any other ``provider:model`` — LangChain's :func:`~langchain.embeddings.init_embeddings`
  (``openai:text-embedding-3-small`` with ``langchain-openai``, ``ollama:nomic-embed-text``
  with ``langchain-ollama``, ``cohere:…``, ``bedrock:…``, …), configured by that provider's own
  environment variables (``OPENAI_API_KEY``, ``OLLAMA_HOST``, …).

Every way a name can be wrong — malformed, an unknown provider or local model, a provider
package that is not installed, missing credentials — raises :class:`ConfigurationError` with one
line saying what to install or set, at start-up rather than on the first batch.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from langchain_core.embeddings import Embeddings
from pydantic import ValidationError

from worker.constants import DEFAULT_EMBEDDINGS, NO_EMBEDDINGS
from worker.errors import ConfigurationError
from worker.runtime.local_embeddings import LocalEmbeddings

__all__ = ["DEFAULT_EMBEDDINGS", "NO_EMBEDDINGS", "build_embeddings"]

#: The provider name of the models shipped in packages.
LOCAL_PROVIDER: Final = "local"
#: Deadline of one call to a remote provider. Embedding a batch is a short request; past
#: this the provider is treated as unavailable and the caller retries later.
DEFAULT_TIMEOUT_SECONDS: Final = 30.0
#: How each remote provider's class takes a request deadline (providers not listed apply their
#: own default; the caller's deadline still bounds the call).
_TIMEOUT_KWARGS: Final[dict[str, Callable[[float], dict[str, Any]]]] = {
    "openai": lambda s: {"timeout": s},
    "azure_openai": lambda s: {"timeout": s},
    "mistralai": lambda s: {"timeout": s},
    "ollama": lambda s: {"client_kwargs": {"timeout": s}},
}
_EXAMPLES: Final = (
    "local:multilingual-e5-small, openai:text-embedding-3-small or ollama:nomic-embed-text"
)
_PIP_INSTALL: Final = re.compile(r"pip install ([A-Za-z0-9_.\-\[\]]+)")


def build_embeddings(
    spec: str | None, *, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
) -> Embeddings | None:
    """The embedding model named by ``spec``, or None when ``spec`` is unset or blank."""
    if spec is None or not spec.strip() or spec.strip().lower() == NO_EMBEDDINGS:
        return None
    provider, _, model = spec.strip().partition(":")
    provider, model = provider.strip().lower(), model.strip()
    if not provider or not model:
        raise ConfigurationError(f"embeddings {spec!r}: write provider:model, e.g. {_EXAMPLES}")
    if provider == LOCAL_PROVIDER:
        return LocalEmbeddings(model)
    return _langchain_embeddings(spec, provider, model, timeout_seconds)


def _langchain_embeddings(spec: str, provider: str, model: str, timeout: float) -> Embeddings:
    from langchain.embeddings import init_embeddings

    extra: dict[str, Any] = {}
    if provider in _TIMEOUT_KWARGS:
        extra = _TIMEOUT_KWARGS[provider](timeout)
    try:
        return init_embeddings(model, provider=provider, **extra)
    except ImportError as exc:
        found = _PIP_INSTALL.search(str(exc))
        package = found[1] if found else f"the LangChain integration package of {provider!r}"
        raise ConfigurationError(
            f"embeddings {spec!r} need {package}: pip install {package}"
        ) from exc
    except ValidationError as exc:  # the provider class refused an option
        raise ConfigurationError(f"embeddings {spec!r}: {_one_line(exc)}") from exc
    except ValueError as exc:  # an unknown provider (LangChain lists the ones it knows)
        raise ConfigurationError(
            f"embeddings {spec!r}: {_one_line(exc)}; or use local:<model> ({_EXAMPLES})"
        ) from exc
    except Exception as exc:  # the provider's own checks: credentials, host, options
        raise ConfigurationError(
            f"embeddings {spec!r} could not start: {_one_line(exc)} (set the provider's "
            "credentials and options in its environment variables)"
        ) from exc


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


if __name__ == "__main__":  # python -m worker.runtime.embeddings: refresh the shipped vectors
    from pathlib import Path

    from worker.consolidation import guard_meaning

    from worker.consolidation import meaning
    built = build_embeddings(DEFAULT_EMBEDDINGS)
    assert built is not None
    model = meaning.Meaning(built)
    folder = Path(meaning.__file__).parent
    guard = guard_meaning.GuardBank.load()
    for name, texts in (
        (meaning.VECTORS_FILE, model.bank.texts),
        (guard_meaning.VECTORS_FILE, guard.texts),
    ):
        meaning.write_shipped_vectors(model, str(folder / name), texts)
        print(f"wrote {name}")
