"""The use cases of memworker, one hub each; Celery tasks, beat actions and the CLI call these.

What happens to a batch, in order:

* :mod:`.sweep` — claim due namespaces and hand each claim to a dispatcher.
* :mod:`.consolidate` — a claimed batch: read, merge, one fenced commit, ack.
* :mod:`.publish` — deliver committed versions from the outbox to the sinks.

Beside it: in :mod:`.consolidate`, ``reconcile`` (an operator consolidates one namespace now,
through the same claim and fence) and ``preview`` (what consolidating now would change,
nothing written); :mod:`.operator` (write, roll back, approve or reject, compact files over
their budget, and why); :mod:`.transfer` (import, and forget a user everywhere); :mod:`.scan`
(pull conversations from the sources into the queue); :mod:`.edits` (agents' direct edits);
:mod:`.search`; :mod:`.tick` (a scheduled tick, over :mod:`.schedules`).

This layer sits above the queue, the store, the consolidators, the sinks and the sources, and
below the callers; it reads no environment, and time comes in (``now`` arguments, an
injected clock).
"""
