"""PostgreSQL's search index takes commits through a small GIN pending list (migration 0007).

An entry that waits in the pending list must be searchable, and an erased or retired one must
not be, exactly as when the index held it: the list is part of the index that every query
reads. These tests write far fewer entries than fill the list, so every entry they search for
is still in it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from alembic import command

from tests.store_support import at, commit, entry, plan, unique_ns
from worker.store import MemoryStore, search_text
from worker.store import schema as migrate
from worker.store.engine import create_store_engine

pytestmark = pytest.mark.postgres

_INDEX = f"ix_{search_text.DOCS}_tsv"


@pytest.fixture
def engine(empty_pg_database_url: str) -> Iterator[sa.Engine]:
    e = create_store_engine(empty_pg_database_url)
    yield e
    e.dispose()


def _options(engine: sa.Engine) -> set[str]:
    with engine.connect() as conn:
        held = conn.exec_driver_sql(
            f"SELECT reloptions FROM pg_class WHERE relname = '{_INDEX}'"
        ).scalar_one()
    return set(held or ())


def _merge_pending(engine: sa.Engine) -> int:
    """Merge the pending list into the index now; the number of its pages merged (0: none of
    the entries written were still waiting there)."""
    with engine.begin() as conn:
        return int(
            conn.exec_driver_sql(
                f"SELECT gin_clean_pending_list('{_INDEX}'::regclass)"
            ).scalar_one()
        )


def _ids(store: MemoryStore, ns: str, query: str) -> list[str]:
    return [e.id for e in store.search_entries(ns, query, limit=10)]


def test_a_new_store_indexes_through_a_pending_list_of_64_kb(engine: sa.Engine) -> None:
    migrate.upgrade(engine)

    assert _options(engine) == {"fastupdate=on", "gin_pending_list_limit=64"}
    assert migrate.head_revision() >= "0007"


def test_upgrading_a_0006_store_bounds_its_pending_list_and_its_entries_stay_found(
    engine: sa.Engine,
) -> None:
    # A store with an entry, taken back to 0006 (the later revisions' columns go with it; the
    # code of today writes them, so the entry is committed before the downgrade).
    migrate.upgrade(engine)
    store = MemoryStore(engine)
    ns = unique_ns()
    commit(store, ns, plan((entry("old", "Keeps bees in the garden"),)), expected=0)
    command.downgrade(migrate.alembic_config(engine), "0006")
    with engine.begin() as conn:  # the index as a 0006 release created it
        conn.exec_driver_sql(f"ALTER INDEX {_INDEX} SET (fastupdate = off)")
        conn.exec_driver_sql(f"ALTER INDEX {_INDEX} RESET (gin_pending_list_limit)")

    migrate.upgrade(engine)
    commit(store, ns, plan((entry("new", "Keeps a beehive on the roof"),)), expected=1)

    assert _options(engine) == {"fastupdate=on", "gin_pending_list_limit=64"}
    assert sorted(_ids(store, ns, "keeps")) == ["new", "old"]


def test_an_entry_still_in_the_pending_list_is_found_right_after_its_commit(
    engine: sa.Engine,
) -> None:
    migrate.upgrade(engine)
    store = MemoryStore(engine)
    ns, other = unique_ns(), unique_ns()

    commit(store, ns, plan((entry("e1", "Plays the bandoneon on Sundays"),)), expected=0)
    commit(store, other, plan((entry("o1", "Plays the bandoneon too"),)), expected=0)

    assert _ids(store, ns, "bandoneon") == ["e1"]
    assert _ids(store, other, "bandoneon") == ["o1"]
    assert _merge_pending(engine) > 0  # both were searched while waiting in the list


def test_erased_and_retired_entries_in_the_pending_list_are_never_found(
    engine: sa.Engine,
) -> None:
    migrate.upgrade(engine)
    store = MemoryStore(engine)
    erased, kept = unique_ns(), unique_ns()
    first = entry("k1", "Secret hobby is falconry")
    commit(store, erased, plan((entry("x1", "Secret hobby is falconry"),)), expected=0)
    commit(store, kept, plan((first,)), expected=0)
    retired = first.model_copy(
        update={"invalid_at": at(5), "invalid_reason": "superseded", "superseded_by": "k2"}
    )
    commit(
        store,
        kept,
        plan((entry("k2", "Hobby is now archery"),), changed=(retired,)),
        expected=1,
    )

    store.erase_namespaces([erased], now=at(9))

    assert _ids(store, erased, "falconry") == []
    assert _ids(store, kept, "falconry") == []
    assert _ids(store, kept, "archery") == ["k2"]
    assert _merge_pending(engine) > 0  # and all of them were still in the list


def test_downgrading_0007_empties_the_pending_list_into_the_index_and_keeps_every_entry(
    engine: sa.Engine,
) -> None:
    migrate.upgrade(engine)
    store = MemoryStore(engine)
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", "Collects enamel pins"),)), expected=0)

    command.downgrade(migrate.alembic_config(engine), "0006")

    assert migrate.current_revision(engine) == "0006"
    assert _options(engine) == {"fastupdate=off"}
    assert _merge_pending(engine) == 0  # nothing left waiting: merged, not dropped
    assert _ids(store, ns, "enamel") == ["e1"]
