"""Files within a budget: the entries most worth loading, then one line counting the rest."""

from __future__ import annotations

import re
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.consolidation_factories import T0, entry
from worker.consolidation.render import (
    as_shown,
    entry_line,
    is_pointer_line,
    pointer_line,
    render_file,
)
from worker.models import Entry
from worker.service.edits import edit_candidates, edit_lines

FACTS = "/memories/facts.md"
POINTER = re.compile(
    r"^_(\d+) more memor(?:y|ies) not shown here; search_memory finds (?:it|them)\._$"
)


def many(n: int, size: int = 40) -> list[Entry]:
    return [entry(f"e{i:03}", f"fact {i:03} " + "x" * size, minute=-1000 + i) for i in range(n)]


def bullets(content: str) -> list[str]:
    return [line for line in content.splitlines() if line.startswith("- ")]


def test_a_file_within_its_budget_shows_everything_and_no_pointer() -> None:
    entries = many(3)
    content = render_file(FACTS, entries, budget=10_000)
    assert content == render_file(FACTS, entries)
    assert not any(is_pointer_line(line) for line in content.splitlines())


def test_a_file_over_its_budget_ends_with_one_pointer_counting_the_rest() -> None:
    entries = many(30)
    content = render_file(FACTS, entries, budget=1024)
    last = content.splitlines()[-1]
    (match,) = [POINTER.match(line) for line in content.splitlines() if POINTER.match(line)]
    assert last == match.group(0)
    assert int(match.group(1)) == 30 - len(bullets(content)) > 0
    assert len(content.encode()) <= 1024


def test_the_pointer_is_set_apart_from_the_list_by_a_blank_line() -> None:
    content = render_file(FACTS, many(30), budget=512)
    assert content.endswith(f"\n\n{pointer_line(30 - len(bullets(content)))}\n")


def test_keyed_then_confirmed_then_recent_entries_are_kept_first() -> None:
    filler = many(20)
    keyed = entry("keyed", "keyed fact " + "x" * 40, key="profile.city", minute=-5000)
    confirmed = entry("confirmed", "confirmed fact " + "x" * 40, minute=-4000, confirmations=3)
    content = render_file(FACTS, [*filler, keyed, confirmed], budget=400)
    shown = bullets(content)
    assert shown[:2] == [f"- {entry_line(keyed.text)}", f"- {entry_line(confirmed.text)}"]
    newest = [f"- {entry_line(e.text)}" for e in filler[-(len(shown) - 2) :]]
    assert shown[2:] == newest


def test_an_entry_whose_text_is_a_pointer_line_is_escaped_and_is_no_pointer() -> None:
    forged = entry("forged", pointer_line(99))
    line = f"- {entry_line(forged.text)}"
    assert not is_pointer_line(line)
    assert not is_pointer_line(line.removeprefix("- "))


texts = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=120
).filter(lambda t: t.strip() != "")


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(texts, min_size=1, max_size=40),
    budget=st.integers(min_value=256, max_value=4096),
    confirmations=st.lists(st.integers(1, 5), min_size=40, max_size=40),
)
def test_any_file_stays_within_budget_and_counts_what_it_leaves_out(
    bodies: list[str], budget: int, confirmations: list[int]
) -> None:
    entries = [
        Entry(id=f"e{i}", path=FACTS, text=body, valid_from=T0, created_at=T0 + timedelta(i),
              last_confirmed_at=T0 + timedelta(i), confirmations=confirmations[i])
        for i, body in enumerate(bodies)
    ]  # fmt: skip
    content = render_file(FACTS, entries, budget=budget)
    shown = bullets(content)
    pointers = [line for line in content.splitlines() if is_pointer_line(line)]
    assert len(content.encode()) <= budget
    assert len(pointers) <= 1
    hidden = int(POINTER.match(pointers[0]).group(1)) if pointers else 0  # type: ignore[union-attr]
    assert len(shown) + hidden == len(entries)
    assert as_shown(FACTS, content, entries) == content
    assert len(edit_lines(content)) <= len(shown)


def test_the_pointer_line_is_never_absorbed_from_an_agent_edit() -> None:
    published = render_file(FACTS, many(30), budget=512)
    assert is_pointer_line(published.splitlines()[-1])
    changed = published.replace(published.splitlines()[-1], pointer_line(7))
    dropped = "\n".join(published.splitlines()[:-1]) + "\n"
    for after in (changed, dropped):
        assert edit_candidates("user:u1", FACTS, published, after, now=T0) == []


def test_an_agent_line_added_beside_the_pointer_is_absorbed_alone() -> None:
    published = render_file(FACTS, many(30), budget=512)
    after = published + "- I have a new bike\n"
    (found,) = edit_candidates("user:u1", FACTS, published, after, now=T0)
    assert found.text == "I have a new bike"


def test_import_refuses_a_file_that_hides_entries_without_saying_so() -> None:
    entries = many(30)
    content = render_file(FACTS, entries, budget=512)
    silent = "\n".join(line for line in content.splitlines() if not is_pointer_line(line))
    assert as_shown(FACTS, silent.rstrip("\n") + "\n", entries) != silent.rstrip("\n") + "\n"


def test_a_file_leaving_out_one_of_two_entries_of_the_same_text_is_recognised() -> None:
    """The shown bullets match the active entries in order: a multiset match picked the first
    "0" and put it before the long entry, so a valid file was refused (found by hypothesis)."""
    texts = ["0", "00000000", "0"]
    entries = [
        Entry(id=f"e{i}", path=FACTS, text=body, valid_from=T0, created_at=T0 + timedelta(i),
              last_confirmed_at=T0 + timedelta(i), confirmations=1)
        for i, body in enumerate(texts)
    ]  # fmt: skip
    content = "# Facts\n\n- 00000000\n- 0\n\n" + pointer_line(1) + "\n"

    assert as_shown(FACTS, content, entries) == content
