"""The use cases of memworker, one module each; Celery tasks, beat actions and the CLI call these.

What happens to a batch, in order:

* :mod:`.sweep` — claim due namespaces and hand each claim to a dispatcher.
* :mod:`.consolidate` — a claimed batch: read, merge (:mod:`.batch`), one fenced commit, ack.
* :mod:`.publish` — deliver committed versions from the outbox to the sinks.

Beside it: :mod:`.reconcile` (an operator consolidates one namespace now, through the same
claim and fence), :mod:`.preview` (what consolidating now would change, nothing written),
:mod:`.compact` (evict from files over their budget), :mod:`.approve` (apply a change an
operator approved), :mod:`.rollback` (bring an old version back), :mod:`.erase` (forget a
user everywhere), :mod:`.scan` (pull conversations from the sources into the queue).

This layer sits above the queue, the store, the consolidators, the sinks and the sources, and
below the callers; it reads no environment, and time comes in (``now`` arguments, an
injected clock).
"""
