"""A real LangGraph API server (``langgraph dev``, in-memory runtime) for the test session.

It serves the graphs of ``tests/langgraph_app`` (scripted models: the machine is offline). The
capture graph enqueues to the session's Redis, whose URL reaches the server process through
its environment; each test passes its own key prefix in the run's ``configurable``.
Import the fixtures into a test module: ``from tests.langgraph_fixtures import langgraph_url``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

REPO_ROOT = Path(__file__).resolve().parent.parent
APP_CONFIG = REPO_ROOT / "tests" / "langgraph_app" / "langgraph.json"

#: How long a cold ``langgraph dev`` may take to answer ``/ok`` (imports langchain, deepagents
#: and compiles the graphs); it usually takes a few seconds.
STARTUP_TIMEOUT_SECONDS = 120.0
#: Polling interval while waiting for the server; the only sleep the tests allow.
POLL_SECONDS = 0.2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"langgraph dev exited early:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(f"{url}/ok", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(POLL_SECONDS)
    raise RuntimeError(f"langgraph dev did not answer /ok:\n{log.read_text()[-4000:]}")


def _absolute_config() -> dict[str, object]:
    """The app's langgraph.json with graph paths made absolute: the server runs in a scratch
    directory (it keeps its state files in its working directory) and resolves relative paths
    against that."""
    spec = json.loads(APP_CONFIG.read_text())
    spec["dependencies"] = [str(APP_CONFIG.parent)]
    spec["graphs"] = {
        name: str((APP_CONFIG.parent / target.split(":")[0]).resolve()) + ":" + target.split(":")[1]
        for name, target in spec["graphs"].items()
    }
    return spec


@contextlib.contextmanager
def serve(spec: dict[str, object], workdir: Path, redis_url: str) -> Iterator[str]:
    """``langgraph dev`` serving ``spec`` (a langgraph.json) from ``workdir``; its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "LANGSMITH_TRACING": "false",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        "MEMWORKER_TEST_GRAPH_REDIS_URL": redis_url,
    }
    cli = Path(sys.executable).parent / "langgraph"
    config = workdir / "langgraph.json"
    config.write_text(json.dumps(spec))
    log = workdir / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(cli),
                "dev",
                "--no-browser",
                "--no-reload",
                "--port",
                str(port),
                "--config",
                str(config),
            ],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_ready(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def langgraph_url(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a running LangGraph API server, stopped at the end of the session."""
    with serve(_absolute_config(), tmp_path_factory.mktemp("langgraph"), redis_url) as url:
        yield url


@pytest.fixture(scope="module")
def langgraph_auth_url(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A LangGraph API server with custom auth (``tests/langgraph_app/auth.py``: an API key
    names a user and their org), for the modules that attack identity; stopped after them."""
    spec = _absolute_config()
    spec["auth"] = {"path": str(APP_CONFIG.parent / "auth.py") + ":auth"}
    with serve(spec, tmp_path_factory.mktemp("langgraph-auth"), redis_url) as url:
        yield url


@pytest.fixture
def langgraph_client(langgraph_url: str) -> SyncLangGraphClient:
    return get_sync_client(url=langgraph_url, api_key=None)


def owned_by(user_id: str) -> dict[str, str]:
    """Thread metadata naming ``user_id`` as the owner (and repeating it as ``user_id``)."""
    return {"owner": user_id, "user_id": user_id}


def converse(
    client: SyncLangGraphClient, key_prefix: str, user_id: str, text: str
) -> tuple[str, str]:
    """One finished run of the capture graph on a new thread of ``user_id``: (thread, run) ids.

    The thread's metadata records its owner under ``owner``, as the chat service (the only
    writer of threads on a server without custom auth) does for the thread scan."""
    thread = client.threads.create(metadata=owned_by(user_id))
    run = client.runs.create(
        thread["thread_id"],
        "capture",
        input={"messages": [{"role": "user", "content": text}]},
        config={"configurable": {"user_id": user_id, "mw_key_prefix": key_prefix}},
    )
    client.runs.join(thread["thread_id"], run["run_id"])
    return str(thread["thread_id"]), str(run["run_id"])
