"""Script replies turned into the queue's values: claims and log entries."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from worker.errors import InvalidCandidate
from worker.queue.encoding import decode_candidate
from worker.queue.types import Claim

if TYPE_CHECKING:
    from worker.models import Candidate

log = logging.getLogger(__name__)


def s(value: Any) -> str:
    """Redis replies are bytes unless the client decodes them; accept both."""
    return value.decode() if isinstance(value, bytes) else str(value)


def claims_of_shards(results: list[Any]) -> list[Claim]:
    """Claims of every shard that answered. A shard's error is logged, not raised, unless all
    failed: raising would orphan the leases the other shards just granted."""
    claims: list[Claim] = []
    errors = [r for r in results if isinstance(r, Exception)]
    for result in results:
        if not isinstance(result, Exception):
            claims.extend(claims_of(result))
    if errors and len(errors) == len(results):
        raise errors[0]
    for error in errors:
        log.error("claiming one queue shard failed: %s", error)
    return claims


def claims_of(result: Any) -> list[Claim]:
    """The claims one ``claim`` script call granted."""
    if isinstance(result, Exception):
        raise result
    return [
        Claim(
            namespace=s(ns),
            token=int(token),
            covered=s(covered),
            count=int(count),
            attempts=int(n),
            due_at_ms=int(due),
            epoch=s(epoch),
        )
        for ns, token, covered, count, n, due, epoch in result
    ]


def entries_of(raw: Any) -> list[tuple[str, Candidate]]:
    """``(stream id, candidate)`` of an XRANGE reply."""
    out = []
    for stream_id, fields in raw or ():
        sid = s(stream_id)
        payload = fields.get(b"c", fields.get("c"))
        if payload is None:
            raise InvalidCandidate(f"log entry {sid} has no candidate field 'c'")
        out.append((sid, decode_candidate(payload, sid)))
    return out
