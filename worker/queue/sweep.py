"""Sweep: claim every due namespace and hand each claim to a dispatcher (one task per claim)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from worker.queue.redis_queue import Claim, RedisQueue

log = logging.getLogger(__name__)


def sweep_due(
    queue: RedisQueue, dispatch: Callable[[Claim], None], *, now: float | None = None
) -> list[Claim]:
    """Claim due namespaces and dispatch each claim; a claim that cannot be dispatched is
    released at once (due again) rather than waiting for its lease to expire."""
    claims = queue.claim_due(now=now)
    dispatched = []
    for claim in claims:
        try:
            dispatch(claim)
        except Exception:
            log.exception("could not dispatch %s; releasing its claim", claim.namespace)
            queue.release(claim, now=now)
        else:
            dispatched.append(claim)
    return dispatched
