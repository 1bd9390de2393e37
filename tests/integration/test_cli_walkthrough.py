"""The README's incident walkthrough, replayed as a new operator would, from an empty home.

The section "Operating it: an incident walkthrough" holds a python block (the stand-in model,
saved as ``broken_model.py``), a ``console`` block that replays the scene (Ben's dead letter,
Ana's unwanted preference) and the operator's ``console`` block. All run here, in order, in
one fresh home directory against a real ``memworker run`` (embedded Redis, SQLite, a Celery
worker and beat), every ``$`` line through bash; what each prints must be what the README
shows under it, except ids, times, ages and table padding (:mod:`tests.readme_support`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.readme_support import (
    Block,
    FreshHome,
    RunningServer,
    console_steps,
    mismatches,
    readme_blocks,
    started_run,
)

SECTION = "Operating it: an incident walkthrough"

pytestmark = pytest.mark.slow


def walkthrough() -> list[Block]:
    """The section's blocks, in order: the saved python file, then the console blocks."""
    blocks = [b for b in readme_blocks() if b.section == SECTION]
    assert [b.lang for b in blocks] == ["python", "console", "console"], blocks
    return blocks


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    home = FreshHome(Path(tmp_path_factory.mktemp("walkthrough"))).make()
    yield from started_run(home)


def test_the_walkthrough_has_the_incident_commands() -> None:
    commands = {
        " ".join(step.command.split()[:3])
        for block in walkthrough()
        if block.lang == "console"
        for step in console_steps(block)
    }

    assert {
        "memworker history --user",
        "memworker diff --user",
        "memworker rollback --user",
        "memworker dlq list",
        "memworker dlq retry",
    } <= commands


def test_the_scene_and_the_operator_walkthrough_print_what_the_readme_shows(
    server: RunningServer,
) -> None:
    stand_in, scene, operator = walkthrough()
    assert server.home.save_python(stand_in) == server.home.cwd / "broken_model.py"

    ran = server.home.run_console(scene) + server.home.run_console(operator)

    problems = mismatches(ran)
    if problems:
        server.skip_if_a_schedule_fired()
    assert not problems, "\n\n".join(problems)
    assert [r.command for r in ran if r.code != 0] == []
