"""``python -m worker`` is the ``memworker`` command.

Started by a supervisor (``memworker run``/``worker``), it first starts the watchdog that ends
it once the supervisor is gone (:func:`worker.runtime.processes.watch_supervisor_from_env`).
"""

from worker.runtime.processes import watch_supervisor_from_env

watch_supervisor_from_env()

from worker.cli import main  # noqa: E402  (after the watchdog: imports take seconds)

main()
