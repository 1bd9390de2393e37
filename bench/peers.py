"""The peers of the LLM economy bench, run offline: langmem and mem0 (extra ``peers``).

Both get the same :class:`~bench.peers_model.RecordingModel` as memworker, an offline
embedder (``DeterministicFakeEmbedding``: a vector seeded by the text, so an identical text
is found again, other texts rank arbitrarily) and a local store:

- **langmem**: ``create_memory_store_manager`` over a LangGraph ``InMemoryStore`` with that
  embedding index; one ``invoke`` per candidate, as after each conversation turn.
- **mem0**: ``Memory.from_config`` with llm and embedder providers ``langchain`` and a local
  Qdrant folder (telemetry off: ``MEM0_TELEMETRY=False`` and ``MEM0_DIR`` set before the
  import); one ``add`` per candidate.

``preload`` writes entries the way each system stores them, without a model call.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import logging
import os
import tempfile
import uuid
from collections.abc import Sequence
from typing import Any, Final, Protocol

from bench.peers_model import RecordingModel, langmem_reply, mem0_reply

#: Dimensions of the fake embeddings (any size works; small keeps the stores fast).
DIMS: Final = 64
#: Distributions of the peers, as ``pip`` names them.
DISTRIBUTIONS: Final = {"langmem": "langmem", "mem0": "mem0ai"}
INSTALL_HINT: Final = 'pip install -e ".[peers]"'


class Peer(Protocol):
    name: str
    model: RecordingModel

    def add(self, user: str, text: str) -> None: ...
    def preload(self, user: str, texts: Sequence[str]) -> None: ...
    def stored(self, user: str) -> list[str]: ...
    def close(self) -> None: ...


def missing() -> list[str]:
    """The peers' distributions that are not installed."""
    modules = {"langmem": "langmem", "mem0ai": "mem0"}
    return [dist for dist, module in modules.items() if importlib.util.find_spec(module) is None]


def version(name: str) -> str:
    return importlib.metadata.version(DISTRIBUTIONS[name])


class LangmemPeer:
    name = "langmem"

    def __init__(self) -> None:
        from langchain_core.embeddings import DeterministicFakeEmbedding
        from langgraph.store.memory import InMemoryStore
        from langmem import create_memory_store_manager

        self.model = RecordingModel(responder=langmem_reply)
        self.store = InMemoryStore(
            index={"dims": DIMS, "embed": DeterministicFakeEmbedding(size=DIMS)}
        )
        self.manager = create_memory_store_manager(
            self.model, namespace=("memories", "{langgraph_user_id}"), store=self.store
        )

    def add(self, user: str, text: str) -> None:
        self.manager.invoke(
            {"messages": [{"role": "user", "content": text}]},
            config={"configurable": {"langgraph_user_id": user}},
        )

    def preload(self, user: str, texts: Sequence[str]) -> None:
        for text in texts:
            value = {"kind": "Memory", "content": {"content": text}}
            self.store.put(("memories", user), key=str(uuid.uuid4()), value=value)

    def stored(self, user: str) -> list[str]:
        items = self.store.search(("memories", user), limit=100_000)
        return [str(item.value["content"]["content"]) for item in items]

    def close(self) -> None:
        return None


class Mem0Peer:
    name = "mem0"

    def __init__(self) -> None:
        self._home = tempfile.TemporaryDirectory(prefix="mwbench-mem0-")
        os.environ["MEM0_TELEMETRY"] = "False"
        os.environ["MEM0_DIR"] = _mem0_home()
        from langchain_core.embeddings import DeterministicFakeEmbedding
        from mem0 import Memory

        logging.getLogger("mem0").setLevel(logging.ERROR)  # "spaCy not installed" notices
        self.model = RecordingModel(responder=mem0_reply)
        config: dict[str, Any] = {
            "llm": {"provider": "langchain", "config": {"model": self.model}},
            "embedder": {
                "provider": "langchain",
                "config": {"model": DeterministicFakeEmbedding(size=DIMS), "embedding_dims": DIMS},
            },
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "path": os.path.join(self._home.name, "qdrant"),
                    "embedding_model_dims": DIMS,
                    "collection_name": "bench",
                },
            },
            "history_db_path": os.path.join(self._home.name, "history.db"),
        }
        self.memory = Memory.from_config(config)

    def add(self, user: str, text: str) -> None:
        self.memory.add(text, user_id=user)

    def preload(self, user: str, texts: Sequence[str]) -> None:
        for text in texts:
            self.memory.add(text, user_id=user, infer=False)

    def stored(self, user: str) -> list[str]:
        found = self.memory.get_all(filters={"user_id": user}, top_k=100_000)
        return [str(m["memory"]) for m in found["results"]]

    def close(self) -> None:
        self.memory.vector_store.client.close()
        self._home.cleanup()


@functools.cache
def _mem0_home() -> str:
    """mem0's own folder (its user id file, default paths) for this process, removed at exit:
    never the user's home. One per process: mem0 reads it once, at import."""
    folder = tempfile.TemporaryDirectory(prefix="mwbench-mem0-home-")
    _HOMES.append(folder)
    return folder.name


_HOMES: list[tempfile.TemporaryDirectory[str]] = []


def start(name: str) -> Peer:
    return LangmemPeer() if name == "langmem" else Mem0Peer()
