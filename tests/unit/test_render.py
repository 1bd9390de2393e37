"""Rendering memory files: stable Markdown, byte-for-byte deterministic."""

from __future__ import annotations

from tests.support.consolidation_factories import at, entry
from worker.consolidation.render import render_file


def test_title_comes_from_the_path() -> None:
    assert render_file("/memories/work/side-projects.md", []).startswith("# Work / Side projects\n")


def test_entries_are_ordered_by_creation_time_then_id() -> None:
    entries = [
        entry("b", "second", minute=2),
        entry("z", "first", minute=1),
        entry("a", "third", minute=2),
    ]
    body = render_file("/memories/facts.md", entries)
    assert body == "# Facts\n\n- first\n- third\n- second\n"


def test_inactive_entries_are_not_rendered() -> None:
    gone = entry("a", "old").model_copy(update={"invalid_at": at(0)})
    assert render_file("/memories/facts.md", [gone, entry("b", "kept")]) == "# Facts\n\n- kept\n"


def test_entries_of_other_paths_are_not_rendered() -> None:
    other = entry("a", "elsewhere", path="/memories/preferences.md")
    assert render_file("/memories/facts.md", [other]) == "# Facts\n"


def test_multiline_text_cannot_start_a_new_bullet() -> None:
    body = render_file("/memories/facts.md", [entry("a", "line one\n- fake bullet\n# fake title")])
    assert body == "# Facts\n\n- line one - fake bullet # fake title\n"


def test_rendering_is_independent_of_input_order() -> None:
    entries = [entry(f"e{i}", f"fact {i}", minute=i % 3) for i in range(10)]
    assert render_file("/memories/facts.md", entries) == render_file(
        "/memories/facts.md", list(reversed(entries))
    )
