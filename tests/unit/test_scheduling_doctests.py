"""The examples in the scheduling and metrics docstrings run and stay true."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

import worker.metrics
import worker.runtime.beat
import worker.service.schedules

MODULES = [
    worker.service.schedules,
    worker.service.schedules,
    worker.service.schedules,
    worker.runtime.beat,
    worker.service.schedules,
    worker.metrics,
]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples_pass(module: ModuleType) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0
    assert result.failed == 0
