"""Run every benchmark: each ``bench/bench_<name>.py`` exposes ``run() -> list[str]``.

``python -m bench`` runs them all; ``python -m bench enqueue`` runs ``bench_enqueue`` only.
A benchmark that also exposes ``main(argv) -> int`` takes options after its name:
``python -m bench llm_quality --model openai:gpt-4o-mini --json``.
A benchmark prints ratios against a baseline measured in the same run, because absolute
numbers on shared machines drift by more than the effects being measured.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
from pathlib import Path

PREFIX = "bench_"


def discover() -> list[str]:
    """Names of the benchmark modules, sorted (``enqueue`` for ``bench_enqueue.py``)."""
    folder = str(Path(__file__).parent)
    return sorted(
        m.name.removeprefix(PREFIX)
        for m in pkgutil.iter_modules([folder])
        if m.name.startswith(PREFIX)
    )


def main(argv: list[str]) -> int:
    available = discover()
    if len(argv) > 1 and argv[0] in available and argv[1].startswith("-"):
        module = importlib.import_module(f"bench.{PREFIX}{argv[0]}")
        if hasattr(module, "main"):
            return int(module.main(argv[1:]))
        print(f"benchmark {argv[0]} takes no options")
        return 2
    wanted = argv or available
    unknown = sorted(set(wanted) - set(available))
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; available: {', '.join(available)}")
        return 2
    failed = 0
    for name in wanted:
        print(f"== {name}")
        started = time.perf_counter()
        try:
            lines = importlib.import_module(f"bench.{PREFIX}{name}").run()
        except Exception as exc:  # one broken bench must not hide the others' numbers
            print(f"   FAILED: {type(exc).__name__}: {exc}")
            failed += 1
            continue
        for line in lines:
            print(f"   {line}")
        print(f"   ({time.perf_counter() - started:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
