"""``memworker console``: the read-only operator console on loopback (:mod:`worker.web`)."""

from __future__ import annotations

from typing import Annotated

import typer

from worker.cli.ops_support import console, operator_session
from worker.errors import ConfigurationError

#: The default port; the same as :data:`worker.web.server.DEFAULT_PORT` (kept here so the
#: command's help does not import the web stack).
DEFAULT_PORT = 8377


def register_console(app: typer.Typer) -> None:
    app.command("console")(console_command)


def console_command(
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="Port on 127.0.0.1 to serve on.")
    ] = DEFAULT_PORT,
) -> None:
    """Serve the read-only operator console on 127.0.0.1.

    HTTP basic auth: needs MEMWORKER_CONSOLE_PASSWORD; user MEMWORKER_CONSOLE_USER, default
    admin."""
    with operator_session() as runtime:
        try:
            from worker.web import server
        except ImportError as exc:
            raise ConfigurationError(
                f"the console needs its web stack ({exc.name} is not installed): "
                "pip install 'memworker[console]'"
            ) from None
        server.credentials(runtime)  # refuses before anything listens
        console.print(
            f"memworker console on http://{server.HOST}:{port}/ (read-only; Ctrl-C stops it)"
        )
        server.serve(runtime, port=port)
