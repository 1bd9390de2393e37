"""The machine's RabbitMQ, driven with ``rabbitmqctl``: a private vhost per test."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

#: Bounds one ``rabbitmqctl`` call (it starts an Erlang node: a second or two, more when busy).
RABBITMQCTL_TIMEOUT = 30


def rabbitmqctl(*args: str) -> str:
    done = subprocess.run(
        ["rabbitmqctl", *args],
        capture_output=True,
        text=True,
        timeout=RABBITMQCTL_TIMEOUT,
        check=True,
    )
    return done.stdout


@contextmanager
def private_vhost() -> Iterator[str]:
    """A new vhost that the ``guest`` user may use, deleted afterwards."""
    name = "mwtest-" + uuid.uuid4().hex[:10]
    rabbitmqctl("add_vhost", name)
    rabbitmqctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
    try:
        yield name
    finally:
        rabbitmqctl("delete_vhost", name)
