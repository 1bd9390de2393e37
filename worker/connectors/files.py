"""Publish memory files to a directory: one Markdown file per memory path, written atomically.

Layout: ``<root>/<scope>/<ids…>/<path without its leading slash>``::

    user:u1      /memories/preferences.md -> <root>/user/u1/_default/memories/preferences.md
    user:u1:bot  /memories/preferences.md -> <root>/user/u1/bot/memories/preferences.md
    agent:bot    /memories/style.md       -> <root>/agent/bot/memories/style.md
    org:acme     /memories/policies.md    -> <root>/org/acme/memories/policies.md

A user namespace always has two id segments; without an assistant the second is
:data:`NO_ASSISTANT_DIR`, which starts with ``_`` and so can never be a real assistant id (ids
start with a letter or digit): two namespaces never share a directory.

Each write goes to a temporary file in the target's directory, is fsynced, then renamed over
the target (``os.replace``), so a reader sees the old or the new file, never half of one.

>>> import tempfile, datetime as dt
>>> from worker.connectors.base import PublishedFile
>>> root = tempfile.mkdtemp()
>>> t = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
>>> sink = FilesSink(root)
>>> sink.deliver(PublishedFile("user:u1", "/memories/preferences.md", "- tea\\n", 1, t, t))
>>> (sink.path_for("user:u1", "/memories/preferences.md")).read_text()
'- tea\\n'
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from worker.connectors.base import PublishedFile
from worker.connectors.layout import ORG_JOIN
from worker.errors import InvalidCandidate, SinkError
from worker.models import Namespace, Scope
from worker.types import SinkSettings

#: Second id segment of a user namespace without an assistant (see the module docstring).
NO_ASSISTANT_DIR = "_default"


class FilesSink:
    """Write each committed version to ``root``; remove files on erase."""

    name = "files"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    @classmethod
    def from_settings(cls, settings: SinkSettings) -> FilesSink:
        """The sink at ``settings.effective_files_dir``."""
        return cls(settings.effective_files_dir)

    def path_for(self, namespace: str, path: str) -> Path:
        """The file a namespace's memory path maps to; refuses anything escaping the root."""
        try:
            ns = Namespace.parse(namespace)
        except InvalidCandidate as exc:
            raise SinkError(f"files sink: {exc}") from None
        relative = _safe_relative(path)
        target = self.root.joinpath(*_namespace_dirs(ns), *relative.parts)
        root = self.root.resolve()
        resolved = target.resolve()
        if resolved != root and root not in resolved.parents:
            raise SinkError(f"files sink: path {path!r} escapes the sink root; refused")
        return target

    def deliver(self, item: PublishedFile) -> None:
        target = self.path_for(item.namespace, item.path)
        if item.deleted:
            self._remove(target)
            return
        try:
            _atomic_write(target, item.content.encode("utf-8"))
        except OSError as exc:
            raise SinkError(
                f"files sink: cannot write {item.path} of {item.namespace}: {exc}"
            ) from exc

    def erase(self, namespace: str, paths: Sequence[str]) -> None:
        targets = [self.path_for(namespace, p) for p in paths]  # validate all before deleting any
        for target in targets:
            self._remove(target)

    def tidy_after_erase(self, files: Mapping[str, Sequence[str]]) -> None:
        """Remove the folders kept for the erased files, when they are now empty.

        Folder names carry the user id, so an empty folder is still a trace of the user.
        """
        root = self.root.resolve()
        for key, paths in files.items():
            for path in paths:
                folder = self.path_for(key, path).resolve().parent
                while folder != root and root in folder.parents:
                    with contextlib.suppress(OSError):  # not empty, or already gone
                        folder.rmdir()
                    if folder.exists():
                        break
                    folder = folder.parent

    @staticmethod
    def _remove(target: Path) -> None:
        try:
            target.unlink(missing_ok=True)
        except OSError as exc:
            raise SinkError(f"files sink: cannot remove {target.name}: {exc}") from exc


def _namespace_dirs(ns: Namespace) -> tuple[str, ...]:
    """The folders of a namespace's files; a user inside an org is ``user/<user>+<org>/…``
    (ids never hold ``+``, so it never meets the same user id of another org, or of none)."""
    if ns.scope is Scope.USER:
        user = f"{ns.user_id}{ORG_JOIN}{ns.org_id}" if ns.org_id else str(ns.user_id)
        return (ns.scope.value, user, ns.assistant_id or NO_ASSISTANT_DIR)
    if ns.scope is Scope.AGENT:
        return (ns.scope.value, str(ns.assistant_id))
    return (ns.scope.value, str(ns.org_id))


def _safe_relative(path: str) -> PurePosixPath:
    """``path`` without its leading slash, refusing traversal, backslashes and empty parts."""
    if not isinstance(path, str) or not path.startswith("/") or "\\" in path or "\x00" in path:
        raise SinkError(f"files sink: path {path!r} must be an absolute POSIX path; refused")
    parts = path[1:].split("/")
    if not parts or any(p in ("", ".", "..") for p in parts):
        raise SinkError(f"files sink: path {path!r} has an empty, '.' or '..' segment; refused")
    return PurePosixPath(*parts)


def _atomic_write(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    # The temporary file lives beside the target: os.replace is atomic only within a filesystem.
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    # Persist the rename itself: fsync the directory entry.
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
