"""The deployment's ``.env`` file: ``MEMWORKER_*`` settings kept beside the processes.

Every memworker process reads its settings in one order: the environment first, then the
``.env`` file of its working directory, then the defaults. That holds for ``memworker run``,
the workers, beat, every CLI command, the chat side's ``MemoryClient()`` and the examples, so
one file next to a deployment configures all of them alike.

Only ``MEMWORKER_*`` lines are taken from the file, and only as settings: the file is not
exported into the environment, so another program's variable in it (a provider's
``OPENAI_API_KEY``) is neither read nor refused. Such a key belongs in the environment (or in
``MEMWORKER_MODEL_KWARGS``). A ``MEMWORKER_*`` name that is no setting is ignored, as it is
in the environment.

>>> import pathlib, tempfile
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / ".env").write_text("MEMWORKER_KEY_PREFIX=chat\\nOPENAI_API_KEY=sk-x\\n")
>>> env_file_values(folder / ".env")
{'MEMWORKER_KEY_PREFIX': 'chat'}
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from worker.constants import ENV_PREFIX

#: The file's name, looked up in the working directory of the process (as docker compose and
#: most process managers look up theirs), never in a parent folder.
ENV_FILE: Final = ".env"


def env_file_values(path: Path | None = None) -> dict[str, str]:
    """The ``MEMWORKER_*`` variables the file at ``path`` (``./.env`` by default) sets, by
    name as written; empty when there is no such file. A line without a value is skipped."""
    path = Path(ENV_FILE) if path is None else path
    if not path.is_file():
        return {}
    from dotenv import dotenv_values

    prefix = ENV_PREFIX.lower()
    return {
        name: value
        for name, value in dotenv_values(path, encoding="utf-8").items()
        if value is not None and name.lower().startswith(prefix)
    }
