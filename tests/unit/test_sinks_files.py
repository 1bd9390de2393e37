"""The files sink: atomic writes, traversal refused, erase."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from worker.connectors.base import PublishedFile
from worker.connectors.files import FilesSink
from worker.connectors.langgraph import LangGraphStoreSink
from worker.errors import ConfigurationError, SinkError
from worker.runtime.container import load_sinks
from worker.settings import Settings

T = datetime(2025, 1, 1, tzinfo=UTC)


def _item(
    content: str, namespace: str = "user:u1", path: str = "/memories/preferences.md"
) -> PublishedFile:
    return PublishedFile(namespace, path, content, 1, T, T)


def test_a_delivery_writes_the_file_under_scope_and_ids(tmp_path: Path) -> None:
    FilesSink(tmp_path).deliver(_item("- tea\n", "user:u1:bot"))

    assert (tmp_path / "user/u1/bot/memories/preferences.md").read_text() == "- tea\n"


def test_a_redelivery_replaces_the_file_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    sink = FilesSink(tmp_path)
    sink.deliver(_item("- tea\n"))
    sink.deliver(_item("- coffee\n"))

    folder = tmp_path / "user/u1/_default/memories"
    assert [(p.name, p.read_text()) for p in folder.iterdir()] == [("preferences.md", "- coffee\n")]


def test_a_path_escaping_the_root_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SinkError, match="refused"):
        FilesSink(tmp_path / "root").deliver(_item("x", path="/memories/../../../escape.md"))

    assert not (tmp_path / "escape.md").exists()


def test_a_symlink_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "user/u1/_default").mkdir(parents=True)
    (root / "user/u1/_default/memories").symlink_to(tmp_path)

    with pytest.raises(SinkError, match="escapes"):
        FilesSink(root).deliver(_item("x"))


def test_erase_removes_the_files_and_ignores_missing_ones(tmp_path: Path) -> None:
    sink = FilesSink(tmp_path)
    sink.deliver(_item("- tea\n"))

    sink.erase("user:u1", ["/memories/preferences.md", "/memories/never-written.md"])

    assert not (tmp_path / "user/u1/_default/memories/preferences.md").exists()


def test_a_deleted_version_removes_the_file(tmp_path: Path) -> None:
    sink = FilesSink(tmp_path)
    sink.deliver(_item("- tea\n"))

    sink.deliver(PublishedFile("user:u1", "/memories/preferences.md", "", 2, T, T, deleted=True))

    assert not (tmp_path / "user/u1/_default/memories/preferences.md").exists()


def test_load_sinks_builds_files_and_langgraph_sinks(tmp_path: Path) -> None:
    settings = Settings(
        sinks=["files", "langgraph"], files_dir=tmp_path, langgraph_url="http://127.0.0.1:1"
    )

    sinks = load_sinks(settings.for_sinks)

    assert [type(s) for s in sinks] == [FilesSink, LangGraphStoreSink]


def test_load_sinks_builds_a_sink_from_a_dotted_path(tmp_path: Path) -> None:
    settings = Settings(sinks=["worker.connectors.files:FilesSink"], files_dir=tmp_path)

    assert [s.name for s in load_sinks(settings.for_sinks)] == ["files"]


@pytest.mark.parametrize(
    "overrides",
    [
        {"sinks": ["nowhere"]},
        {"sinks": ["langgraph"]},
        {"sinks": ["no.such.module:Sink"]},
        {"sinks": ["worker.connectors.files:NoSuchClass"]},
    ],
    ids=["unknown", "langgraph-without-url", "bad-module", "bad-attribute"],
)
def test_load_sinks_refuses_a_bad_entry(overrides: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        load_sinks(Settings(**overrides).for_sinks)  # type: ignore[arg-type]
