"""``python -m worker`` is the ``memworker`` command."""

from worker.cli.app import main

main()
