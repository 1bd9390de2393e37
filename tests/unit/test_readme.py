"""The README and docs/ are the user's guide: their reference parts must match the code.

The configuration reference is ``docs/configuration.md``, the command table and exit codes
``docs/cli.md``; the test command is the README's.
"""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.main import get_command

from tests.readme_support import schedules_fired, skip_if_a_schedule_fired
from worker.cli.app import app
from worker.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
CLI = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
#: Every page a reader may look a command up in.
DOCUMENTATION = "\n".join(
    path.read_text(encoding="utf-8")
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
)
#: Most lines the README may have: a front page; the rest lives in docs/.
README_MAX_LINES = 400


def test_every_setting_is_in_the_configuration_reference() -> None:
    missing = [
        f"MEMWORKER_{name.upper()}"
        for name in Settings.model_fields
        if f"| `MEMWORKER_{name.upper()}` |" not in CONFIGURATION
    ]
    assert missing == []


def test_every_command_is_documented() -> None:
    commands = get_command(app).commands  # type: ignore[attr-defined]
    missing = [name for name in commands if f"memworker {name}" not in DOCUMENTATION]
    assert missing == []


def test_ci_runs_the_readme_test_command() -> None:
    match = re.search(r"\$ pip install -e \"\.\[dev\]\" && (python -m pytest)\n", README)
    assert match is not None
    assert match.group(1) in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def _command_rows() -> dict[str, str]:
    """The command table's rows, by each ``memworker NAME`` they document."""
    table = CLI[CLI.index("## Commands") : CLI.index("exit code | meaning")]
    rows: dict[str, str] = {}
    for row in table.splitlines():
        for cell in re.findall(r"`memworker ([a-z]+)[^`]*`", row):
            rows.setdefault(cell, "")
            rows[cell] += row
    return rows


def test_the_command_table_lists_each_commands_required_options_and_its_user() -> None:
    rows = _command_rows()
    missing = []
    for name, command in get_command(app).commands.items():  # type: ignore[attr-defined]
        for sub in getattr(command, "commands", {"": command}).values():
            names = {opt for p in sub.params for opt in p.opts if opt.startswith("--")}
            required = {opt for p in sub.params if p.required for opt in p.opts if "--" in opt}
            wanted = required | ({"--user"} & names)
            missing += [f"{name}: {opt}" for opt in sorted(wanted) if opt not in rows.get(name, "")]
    assert missing == []


def test_every_exit_code_is_documented() -> None:
    from worker.cli import common as errors

    codes = {v for k, v in vars(errors).items() if k.startswith("EXIT_")}
    table = CLI[CLI.index("| exit code | meaning |") :].split("\n\n", 1)[0]

    assert sorted(codes) == sorted(int(c) for c in re.findall(r"^\| `(\d)` \|", table, re.M))


def test_the_readme_is_a_front_page() -> None:
    assert len(README.splitlines()) <= README_MAX_LINES


def test_the_migration_the_readme_prints_reaches_the_newest_schema_revision() -> None:
    from worker.store.schema import head_revision

    shown = set(re.findall(r"^upgraded .+ -> (\S+)$", DOCUMENTATION, re.M))

    assert shown == {head_revision()}


def _anchors(page: Path) -> set[str]:
    """The heading anchors of a Markdown page, as GitHub makes them."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_relative_link_of_the_documentation_points_at_a_file_and_heading() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    pages += sorted((ROOT / "examples").rglob("*.md"))
    broken = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", text):
            if "://" in target:
                continue
            linked = (page.parent / target) if target else page
            if not linked.exists() or (anchor and anchor not in _anchors(linked)):
                broken.append(f"{page.relative_to(ROOT)}: {target}#{anchor}")
    assert broken == []


def test_the_local_model_command_of_the_models_page_runs_without_pytest() -> None:
    """The reader who serves the test model runs docs/models.md's ``python -c`` as printed,
    in an environment that need not have pytest (it is a dev dependency)."""
    page = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"\$\(python -c '([^']+)'\)", page)
    no_pytest = f"import sys; sys.modules['pytest'] = None\n{code}"

    ran = subprocess.run(
        [sys.executable, "-c", no_pytest], cwd=ROOT, capture_output=True, text=True, check=False
    )

    assert ran.returncode == 0, ran.stderr


def test_a_readme_test_knows_which_schedules_fired_while_it_ran() -> None:
    quiet = schedules_fired(
        datetime(2026, 12, 7, 1, 0, tzinfo=UTC), datetime(2026, 12, 7, 1, 30, tzinfo=UTC)
    )
    crossed = schedules_fired(
        datetime(2026, 12, 7, 5, 59, tzinfo=UTC), datetime(2026, 12, 7, 6, 1, tzinfo=UTC)
    )

    assert quiet == []
    assert crossed == ["pending-safety-net at 2026-12-07 06:00 UTC"]


def test_a_readme_test_is_skipped_naming_the_schedule_that_fired_since_its_server_started() -> None:
    a_day_ago = datetime.now(UTC) - timedelta(days=1)

    with pytest.raises(pytest.skip.Exception, match="nightly-scan at"):
        skip_if_a_schedule_fired(a_day_ago)
