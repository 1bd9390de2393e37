"""The runtime: the worker process's container, Celery and beat, and the processes of
``memworker run``."""
