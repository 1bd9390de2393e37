"""The LLM economy bench counts what it claims: memworker's side, and a peer when installed."""

from __future__ import annotations

import pytest

from bench import peers
from bench.bench_llm_economy import BATCH, ours, stream
from bench.peers_model import RecordingModel, memworker_reply


def test_memworker_makes_one_call_per_batch_and_counts_every_call() -> None:
    model = RecordingModel(responder=memworker_reply)
    candidates = stream(users=2, per_user=2 * BATCH)
    tokens, calls, batches = ours(candidates, model)
    assert (calls, batches) == (4, 4)
    assert (len(model.tokens), tokens) == (calls, sum(model.tokens))


def test_recorded_prompt_tokens_include_the_bound_tool_schema() -> None:
    model = RecordingModel(responder=memworker_reply)
    ours(stream(users=1, per_user=BATCH), model)
    plain = RecordingModel(responder=memworker_reply)
    plain.invoke(model.prompts[0])  # the same messages without tools bound
    assert model.tokens[0] > plain.tokens[0]


@pytest.mark.skipif(bool(peers.missing()), reason=f"peers not installed: {peers.INSTALL_HINT}")
@pytest.mark.parametrize("name", ["langmem", "mem0"])
def test_a_peer_makes_one_recorded_call_per_added_fact(name: str) -> None:
    peer = peers.start(name)
    try:
        peer.add("u1", "I live in Lisbon")
        peer.add("u1", "I work as a nurse")
        assert len(peer.model.tokens) == 2
        assert sorted(peer.stored("u1")) == ["I live in Lisbon", "I work as a nurse"]
    finally:
        peer.close()
