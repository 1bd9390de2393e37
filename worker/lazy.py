"""Names a package exports without importing their modules until first use (PEP 562).

``import worker`` must stay cheap for a chat service that only wants the client, and the
client must not load the worker's queue: each package's public names resolve on first access.

>>> getattr_ = lazy_exports("worker.hotpath", {"MemoryClient": "worker.hotpath.client"})
>>> getattr_("MemoryClient").__name__
'MemoryClient'
>>> getattr_("Nope")
Traceback (most recent call last):
AttributeError: module 'worker.hotpath' has no attribute 'Nope'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: each name in ``homes`` read from the module
    it maps to, imported then; any other name an ``AttributeError``, as for a missing one."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)

    return __getattr__
