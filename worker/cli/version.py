"""The version line ``memworker --version`` prints, shared by the entry point (which answers
``--version`` without building the app) and the app's own ``--version`` option.

>>> version_line().split()[0]
'memworker'
"""

from __future__ import annotations

from worker import __version__


def version_line() -> str:
    """What ``memworker --version`` prints."""
    return f"memworker {__version__}"
