"""memworker: a background memory-consolidation worker for LLM chat services."""

from __future__ import annotations

__version__ = "0.1.0"
