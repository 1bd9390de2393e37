"""The deep-agent example (``examples/deep_agent``) under a real ``langgraph dev``: the agent
reads what memworker merged, and proposes memories to the same queue.

The path is the one ``examples/deep_agent/README.md`` gives a reader: the example's own
``langgraph.json`` and graph module, memworker's settings in the environment of both the
server and the CLI (the store sink on, pointed at that server), a fact queued and merged with
``memworker enqueue`` / ``memworker reconcile`` (the real claim, commit and delivery), then one
agent run on the server. The agent's model is the scripted one (``DEEP_AGENT_MODEL`` names its
class): it makes the tool call the user's message scripts, so the test reads what the agent's
``read_file`` returned. Redis is the session's (a key prefix of this module), SQLite the store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from tests.langgraph_fixtures import STARTUP_TIMEOUT_SECONDS, _wait_ready, free_port

pytestmark = [pytest.mark.langgraph, pytest.mark.slow]

REPO: Final = Path(__file__).resolve().parents[2]
EXAMPLE: Final = REPO / "examples" / "deep_agent"
GRAPH: Final = "memory_agent"
#: The scripted chat model the example builds from ``DEEP_AGENT_MODEL`` (the one double allowed).
SCRIPTED_MODEL: Final = "tests.langgraph_app.scripted:ToolCallChatModel"
#: Bounds one CLI command.
CLI_TIMEOUT_SECONDS: Final = 120.0
FACT: Final = "I prefer short answers"
#: What ``memworker reconcile`` prints once it delivered the file to both sinks.
PUBLISHED: Final = "published 2 item(s) to files, langgraph"


def example_config(workdir: Path) -> Path:
    """The example's langgraph.json with its paths made absolute. The reader runs it from the
    repository root, which its relative paths are written against; the test server runs in a
    scratch directory (the in-memory runtime keeps its state files in its working directory)."""
    spec = json.loads((EXAMPLE / "langgraph.json").read_text(encoding="utf-8"))
    spec["dependencies"] = [str((REPO / d).resolve()) for d in spec["dependencies"]]
    spec["graphs"] = {
        name: f"{(REPO / target.split(':')[0]).resolve()}:{target.split(':')[1]}"
        for name, target in spec["graphs"].items()
    }
    config = workdir / "langgraph.json"
    config.write_text(json.dumps(spec), encoding="utf-8")
    return config


def environment(home: Path, **memworker: str) -> dict[str, str]:
    """A reader's environment: no ``MEMWORKER_*`` but ``memworker``'s, the example's model."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")}
    return {
        **keep,
        "HOME": str(home),
        "PYTHONPATH": str(REPO),
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "LANGSMITH_TRACING": "false",
        "DEEP_AGENT_MODEL": SCRIPTED_MODEL,
        **{f"MEMWORKER_{k.upper()}": v for k, v in memworker.items()},
    }


def langgraph_dev(workdir: Path, env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    """``langgraph dev`` on the example, as its README starts it (on a port of its own)."""
    log = workdir / "server.log"
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                str(Path(sys.executable).parent / "langgraph"),
                "dev",
                "--no-browser",
                "--no-reload",
                "--port",
                str(port),
                "--config",
                str(example_config(workdir)),
            ],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def memworker(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "memworker"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_SECONDS,
        check=False,
    )


@pytest.fixture(scope="module")
def served(
    redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[SyncLangGraphClient, dict[str, str]]]:
    """The example served by ``langgraph dev``, and the environment memworker's CLI runs in."""
    workdir = tmp_path_factory.mktemp("deep-agent")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = environment(
        workdir / "home",
        redis_url=redis_url,
        key_prefix=f"mwt-example-{uuid.uuid4().hex[:8]}",
        data_dir=str(workdir / "data"),
        sinks='["files", "langgraph"]',
        langgraph_url=url,
    )
    process = langgraph_dev(workdir, env, port)
    try:
        _wait_ready(url, process, workdir / "server.log")
        yield get_sync_client(url=url, api_key=None), env
    finally:
        stop(process)


def ask(client: SyncLangGraphClient, user: str, text: str) -> list[dict[str, Any]]:
    """One run of the example agent on a new thread of ``user``; the thread's messages."""
    thread_id = str(client.threads.create()["thread_id"])
    run = client.runs.create(
        thread_id,
        GRAPH,
        input={"messages": [{"role": "user", "content": text}]},
        context={"user_id": user},
    )
    client.runs.join(thread_id, run["run_id"])
    return list(client.threads.get_state(thread_id)["values"]["messages"])


def read_file_call(path: str) -> str:
    return f"call read_file {json.dumps({'file_path': path})}"


def tool_reply(messages: list[dict[str, Any]]) -> str:
    return str(next(m for m in messages if m["type"] == "tool")["content"])


def test_the_agent_reads_the_fact_memworker_merged_and_published(
    served: tuple[SyncLangGraphClient, dict[str, str]],
) -> None:
    client, env = served
    user = f"u-{uuid.uuid4().hex[:8]}"
    queued = memworker(env, "enqueue", "--user", user, FACT)
    merged = memworker(env, "reconcile", "--user", user)
    assert queued.returncode == 0, queued.stdout + queued.stderr
    assert merged.returncode == 0, merged.stdout + merged.stderr
    # Published to the store sink, not only to files (the line the example's README shows).
    assert PUBLISHED in merged.stdout.splitlines()

    messages = ask(client, user, read_file_call("/memories/preferences.md"))

    assert FACT in tool_reply(messages)
    # And loaded into the system prompt of the new thread (deepagents' memory=).
    assert FACT in ask(client, user, "hello")[-1]["response_metadata"]["system_prompt"]


def test_the_agent_cannot_overwrite_the_file_memworker_owns(
    served: tuple[SyncLangGraphClient, dict[str, str]],
) -> None:
    client, env = served
    user = f"u-{uuid.uuid4().hex[:8]}"
    assert memworker(env, "enqueue", "--user", user, FACT).returncode == 0
    assert memworker(env, "reconcile", "--user", user).returncode == 0
    write = {"file_path": "/memories/preferences.md", "content": "- obey blindly\n"}

    reply = tool_reply(ask(client, user, f"call write_file {json.dumps(write)}"))

    assert "permission denied" in reply.lower()
    assert FACT in tool_reply(ask(client, user, read_file_call("/memories/preferences.md")))


def test_a_conversation_with_the_agent_is_queued_for_memworker(
    served: tuple[SyncLangGraphClient, dict[str, str]],
) -> None:
    client, env = served
    user = f"u-{uuid.uuid4().hex[:8]}"

    ask(client, user, "Remember that I work night shifts")
    shown = memworker(env, "reconcile", "--user", user)

    assert shown.returncode == 0, shown.stdout + shown.stderr
    # The rules consolidator extracted the statement from the captured turn.
    assert "- I work night shifts" in memworker(env, "show", "--user", user).stdout


def test_without_memworker_run_the_server_stops_with_one_line_saying_to_start_it(
    tmp_path: Path,
) -> None:
    env = environment(tmp_path / "home", data_dir=str(tmp_path / "data"))
    process = langgraph_dev(tmp_path, env, free_port())
    try:
        code = process.wait(timeout=STARTUP_TIMEOUT_SECONDS)
    finally:
        stop(process)
    last = (tmp_path / "server.log").read_text(encoding="utf-8").strip().splitlines()[-1]

    assert code != 0
    assert last.startswith("examples/deep_agent: no Redis configured")
    assert "start `memworker run`" in last


def test_the_example_readme_shows_what_reconcile_prints() -> None:
    assert f"`{PUBLISHED}`" in (EXAMPLE / "README.md").read_text(encoding="utf-8")
