"""Every ``console`` and ``python`` block of the documentation runs as printed, from an empty home.

The documentation is ``README.md``, ``docs/*.md`` and ``examples/**/*.md``. Each block is
listed in :data:`HANDLING` by its section and first line, with how it is run: against the
``memworker run`` this module starts in a fresh home directory (the server the quick start
tells the reader to start), with a chat model the test provides (the one double the project
allows), by another test, or not here at all and why. A block added to the documentation
without an entry, or an entry whose block is gone, fails the first test. Every ``env`` block
(settings a reader exports) is read by the worker's settings, and a model it names is built.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
from langchain_core.language_models import BaseChatModel

from tests.readme_support import (
    REPO,
    Block,
    FreshHome,
    RunningServer,
    mismatches,
    readme_blocks,
    started_run,
)
from worker.consolidation.loading import chat_model
from worker.service.schedules import load_schedules
from worker.settings import Settings


class How(enum.Enum):
    """How a README block is exercised."""

    SERVER = "is the `memworker run` the test starts in the fresh home (the package is installed)"
    CONSOLE = "runs in bash in the fresh home against that server; output compared"
    PYTHON = "runs with python in the fresh home against that server"
    PYTHON_WITH_MODEL = "runs in the fresh home with a chat model `model` the test provides"
    WALKTHROUGH = (
        "runs in tests/integration/test_cli_walkthrough.py (its own fresh home and server)"
    )
    CLIENT_ALONE = (
        "runs in tests/integration/test_client_alone.py: a fresh virtual environment with only "
        "the packages it names, then an enqueue against real Redis"
    )
    CI = "is the test command itself: test_ci_runs_the_readme_test_command checks CI runs it"
    DOCKER = "needs Docker: tests/integration/test_compose.py checks the compose file it runs"
    POSTGRES = (
        "runs in bash in the fresh home against that server, its database URL pointed at the "
        "test session's throw-away PostgreSQL database; output compared"
    )
    EXAMPLE = (
        "runs in tests/integration/test_example_deep_agent.py: the example under `langgraph dev`, "
        "the same settings, a scripted model instead of the reader's paid one"
    )


#: (section, how the block's first line starts, how it is run): a block is run the way of the
#: first entry that matches it. Most entries name the whole first line, so that a changed
#: block is looked at again; a section whose every block runs one way has an empty prefix.
HANDLING: Final[list[tuple[str, str, How]]] = [
    ("Quick start", "$ python3 -m venv .venv && . .venv/bin/activate", How.SERVER),
    ("Quick start", '$ memworker enqueue --user u1 "I prefer short answers" && memworker '
     "reconcile --user u1 --dry-run", How.CONSOLE),
    ("Quick start", '$ pip install -e ".[dev]" && python -m pytest', How.CI),
    ("Enqueue from your chat service",
     "$ pip install --no-deps memworker && pip install redis prometheus-client "
     "pydantic-settings", How.CLIENT_ALONE),
    ("Enqueue from your chat service", "", How.PYTHON),
    ("Wire a deep agent to its memory in one call", "", How.PYTHON_WITH_MODEL),
    ("Capture conversations", "", How.PYTHON_WITH_MODEL),
    ("Operating it: an incident walkthrough", "# broken_model.py: a stand-in for that night's "
     "model, whose answers were never a valid plan", How.WALKTHROUGH),
    ("Operating it: an incident walkthrough",
     '$ memworker enqueue --user ben "Remember that I work night shifts"', How.WALKTHROUGH),
    ("Operating it: an incident walkthrough", "$ memworker show --user ana", How.WALKTHROUGH),
    ("Switch to PostgreSQL", "$ export MEMWORKER_DATABASE_URL=", How.POSTGRES),
    ("A deep agent that reads its memory", '$ pip install ".[examples,openai]"', How.EXAMPLE),
    ("Run it", '$ pip install ".[examples,openai]"', How.EXAMPLE),
    ("Talk to it", "", How.EXAMPLE),
    ("Compose", "$ docker compose up -d", How.DOCKER),
    ("Compose", "$ export MEMWORKER_SINKS='[\"files\",\"langgraph\"]' MEMWORKER_LANGGRAPH_URL=",
     How.DOCKER),
    ("Compose", "$ docker compose run --rm cli memworker status", How.DOCKER),
    ("Compose", "$ GRAFANA_ADMIN_PASSWORD=change-me docker compose --profile "
     "observability up -d", How.DOCKER),
]  # fmt: skip

#: The database URL the PostgreSQL step prints; the test points it at its own database.
README_DATABASE_URL: Final = "postgresql+psycopg://postgres@127.0.0.1:5432/memworker"
#: Where each provider of an ``env`` block's ``MEMWORKER_MODEL`` comes from (its extra).
PROVIDER_PACKAGES: Final = {
    "openai": "langchain_openai",
    "anthropic": "langchain_anthropic",
    "ollama": "langchain_ollama",
}


def handling(block: Block) -> How | None:
    """How ``block`` is run (None: nobody said)."""
    for section, prefix, how in HANDLING:
        if block.section == section and block.first_line.startswith(prefix):
            return how
    return None


#: The chat model the LangGraph snippets take as ``model``: the scripted double, answering
#: every call with a plain reply (no tool call), as a real model would when nothing is asked.
MODEL_PRELUDE: Final = f"""
import sys
sys.path.insert(0, {str(REPO)!r})
from langchain_core.messages import AIMessage
from tests.support.scripted_model import ScriptedChatModel
model = ScriptedChatModel(responder=lambda prompt: AIMessage("Noted."))
"""

pytestmark = pytest.mark.slow


def runnable_blocks() -> list[Block]:
    return [b for b in readme_blocks() if b.lang in ("console", "python")]


def blocks_run_as(how: How) -> list[Block]:
    return [b for b in runnable_blocks() if handling(b) is how]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    home = FreshHome(Path(tmp_path_factory.mktemp("readme"))).make()
    yield from started_run(home)


def test_every_console_and_python_block_is_run_or_marked() -> None:
    blocks = runnable_blocks()
    unmarked = [f"{b.source}:{b.line}: {b.first_line}" for b in blocks if handling(b) is None]
    unused = [
        entry
        for entry in HANDLING
        if not any(b.section == entry[0] and b.first_line.startswith(entry[1]) for b in blocks)
    ]

    assert unmarked == []
    assert unused == []


def test_the_server_block_starts_the_memworker_run_the_test_starts() -> None:
    (block,) = blocks_run_as(How.SERVER)

    assert block.text.strip().endswith("&& memworker run")


def test_the_quick_start_prints_what_the_readme_shows(server: RunningServer) -> None:
    (block,) = blocks_run_as(How.CONSOLE)

    ran = server.home.run_console(block)

    problems = mismatches(ran)
    if problems:
        server.skip_if_a_schedule_fired()
    assert not problems, "\n\n".join(problems)
    assert [r.command for r in ran if r.code != 0] == []


@pytest.mark.parametrize("block", blocks_run_as(How.PYTHON), ids=lambda b: f"{b.source}:{b.line}")
def test_python_block_runs_against_memworker_run(server: RunningServer, block: Block) -> None:
    ran = server.home.run_python(block)

    assert ran.code == 0, "\n".join(ran.output)


@pytest.mark.parametrize(
    "block", blocks_run_as(How.PYTHON_WITH_MODEL), ids=lambda b: f"{b.source}:{b.line}"
)
def test_python_block_runs_with_a_provided_chat_model(server: RunningServer, block: Block) -> None:
    with_model = Block(block.lang, MODEL_PRELUDE + block.text, block.section, block.line)

    ran = server.home.run_python(with_model)

    assert ran.code == 0, "\n".join(ran.output)
    # Capture never fails the reply; it says so instead. As printed, nothing may be dropped.
    assert [line for line in ran.output if "dropped" in line] == []


def test_the_schedule_example_loads_as_a_schedule_file(tmp_path: Path) -> None:
    (block,) = [b for b in readme_blocks() if b.lang == "toml"]
    (tmp_path / "example.toml").write_text(block.text, encoding="utf-8")

    (spec,) = load_schedules(tmp_path)

    assert (spec.name, spec.cron, spec.timezone) == (
        "weekday-morning",
        "0 9 * * 1-5",
        "Europe/Berlin",
    )


def test_the_deep_agent_blocks_start_the_example_the_example_test_serves() -> None:
    commands = "\n".join(b.text for b in blocks_run_as(How.EXAMPLE))

    assert "--config examples/deep_agent/langgraph.json" in commands
    assert """MEMWORKER_SINKS='["files","langgraph"]'""" in commands
    assert "DEEP_AGENT_MODEL=" in commands


@pytest.mark.postgres
def test_the_postgresql_step_runs_as_printed_on_a_fresh_database(
    server: RunningServer, empty_pg_database_url: str
) -> None:
    (block,) = blocks_run_as(How.POSTGRES)
    assert README_DATABASE_URL in block.text
    pointed = Block(
        block.lang,
        block.text.replace(README_DATABASE_URL, empty_pg_database_url),
        block.section,
        block.line,
        block.source,
    )

    ran = server.home.run_console(pointed)

    problems = mismatches(ran)
    if problems:
        server.skip_if_a_schedule_fired()
    assert not problems, "\n\n".join(problems)
    assert [r.command for r in ran if r.code != 0] == []


def env_blocks() -> list[Block]:
    return [b for b in readme_blocks() if b.lang == "env"]


def _variables(block: Block) -> dict[str, str]:
    pairs = [line.split("=", 1) for line in block.text.splitlines() if line.strip()]
    assert all(len(pair) == 2 for pair in pairs), f"{block.source}:{block.line}: not NAME=value"
    return {pair[0]: pair[1] for pair in pairs}


@pytest.mark.parametrize("block", env_blocks(), ids=lambda b: f"{b.source}:{b.line}")
def test_env_block_is_valid_settings_and_builds_its_model(
    block: Block, monkeypatch: pytest.MonkeyPatch
) -> None:
    variables = _variables(block)
    for name in [n for n in os.environ if n.startswith("MEMWORKER_")]:
        monkeypatch.delenv(name)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)

    settings = Settings()  # the worker's settings, read from that environment

    known = {f"MEMWORKER_{field.upper()}" for field in Settings.model_fields}
    assert [n for n in variables if n.startswith("MEMWORKER_") and n not in known] == []
    if settings.model is not None:
        pytest.importorskip(PROVIDER_PACKAGES[settings.model.partition(":")[0]])
        assert isinstance(chat_model(settings.for_consolidation), BaseChatModel)
    if settings.embeddings:
        from langchain_core.embeddings import Embeddings

        from worker.runtime.embeddings import NO_EMBEDDINGS, build_embeddings

        built = build_embeddings(settings.embeddings)
        if settings.embeddings.strip().lower() == NO_EMBEDDINGS:
            assert built is None  # the documented way to turn them off
        else:
            assert isinstance(built, Embeddings)
