"""Task and queue names, declared once.

Queue names carry the deployment's key prefix (``MEMWORKER_KEY_PREFIX``), so two deployments
sharing one broker (a RabbitMQ vhost, a Redis) never consume each other's tasks:

>>> queue_name("mw", SWEEP_LANE), queue_name("acme", DELIVER_LANE)
('mw.sweep', 'acme.deliver')
"""

from __future__ import annotations

from typing import Final

#: The sweep lane: short tasks that claim due namespaces and dispatch them, and scheduled runs
#: (coordinators that enqueue and drain). Kept apart from merges and deliveries so a long LLM
#: call or a hung sink never delays a claim.
SWEEP_LANE: Final = "sweep"
#: The consolidate lane: one task per claimed namespace batch.
CONSOLIDATE_LANE: Final = "consolidate"
#: The deliver lane: outbox passes that publish committed versions to the sinks. A sink that
#: hangs holds only this lane's threads.
DELIVER_LANE: Final = "deliver"

SWEEP_TASK: Final = "memworker.sweep"
CONSOLIDATE_TASK: Final = "memworker.consolidate"
DELIVER_TASK: Final = "memworker.deliver_outbox"
SCHEDULED_RUN_TASK: Final = "memworker.scheduled_run"


def queue_name(key_prefix: str, lane: str) -> str:
    """The Celery queue (and exchange) of ``lane`` for the deployment ``key_prefix``."""
    return f"{key_prefix}.{lane}"
