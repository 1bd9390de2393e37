"""The read-only operator console: its pages, what guards them, and its server.

What stands in front of every console page: credentials, methods and response headers.

The console shows stored memory, which is user input, to an operator's browser. So:

* every request carries HTTP basic credentials, compared in constant time (user and password
  both, always), or gets ``401`` and nothing else;
* only ``GET`` and ``HEAD`` are answered (``405`` otherwise): the console changes nothing;
* every response, a refusal included, carries a strict Content-Security-Policy (no script at
  all, styles only from the console itself, no framing, forms only to itself), ``nosniff``,
  no referrer and no caching, so text that got past the templates' escaping still could not
  run or leak.

The console's pages: server-rendered HTML over the runtime's store, search and queue.

Every page only reads. Stored text (memories, file contents, diffs, candidate texts, errors)
is user input: the templates are Jinja2 with autoescape on, values are never marked safe,
and :class:`~worker.cli.web.Guard` adds a Content-Security-Policy that allows no script.
Namespaces, paths and ids come in query parameters and are parsed like the CLI's options.

Serving the console: uvicorn on loopback, one process, until interrupted.

The console binds 127.0.0.1 only: it is an operator's window, reached on the host or through
an SSH tunnel, never exposed. :func:`start` runs it in a thread of the calling process (the
tests, and anything embedding it) and says which port it got; :func:`serve` runs it in the
foreground for ``memworker console``.

``memworker console``: the read-only operator console on loopback (:mod:`worker.cli.web`).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import uvicorn
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from worker.errors import ConfigurationError, MemworkerError, NotFound, Unavailable, UsageError
from worker.models import Namespace, normalise_path

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from worker.runtime.container import Runtime


#: The policy of every response: nothing but the console's own stylesheet, images and forms.
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
#: Headers added to every response (names lower-case, as ASGI carries them).
SECURITY_HEADERS: Final = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)
#: The methods a read-only console answers.
READ_METHODS: Final = frozenset({"GET", "HEAD"})
#: The realm the browser shows when it asks for the credentials.
REALM: Final = "memworker console"
CHALLENGE: Final = f'Basic realm="{REALM}", charset="UTF-8"'.encode()


def credentials_match(header: str | None, user: str, password: str) -> bool:
    """True when ``header`` (an ``Authorization`` value) is Basic ``user:password``.

    Both parts are compared with :func:`hmac.compare_digest`, and both always, so the time
    taken does not tell which part was wrong or how much of it matched.

    >>> token = base64.b64encode(b"admin:s3cret").decode()
    >>> credentials_match("Basic " + token, "admin", "s3cret")
    True
    >>> credentials_match("Basic " + token, "admin", "other"), credentials_match(None, "a", "b")
    (False, False)
    """
    scheme, _, encoded = (header or "").partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return False
    given_user, sep, given_password = decoded.partition(b":")
    user_ok = hmac.compare_digest(given_user, user.encode())
    password_ok = hmac.compare_digest(given_password, password.encode())
    return bool(sep) and user_ok and password_ok


class Guard:
    """ASGI middleware: credentials, read-only methods and the security headers."""

    def __init__(self, app: ASGIApp, *, user: str, password: str) -> None:
        self.app = app
        self.user = user
        self.password = password

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        header = headers.get(b"authorization", b"").decode("latin-1") or None
        if not credentials_match(header, self.user, self.password):
            challenge = (b"www-authenticate", CHALLENGE)
            await _refuse(send, 401, "sign in with the console's user and password\n", (challenge,))
            return
        if scope["method"] not in READ_METHODS:
            await _refuse(send, 405, "the console is read-only\n", ((b"allow", b"GET, HEAD"),))
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, secured)


async def _refuse(
    send: Send, status: int, text: str, extra: tuple[tuple[bytes, bytes], ...]
) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *extra,
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


#: Namespaces one page lists (the search box narrows them).
NAMESPACE_PAGE: Final = 500
#: Hits the memory search shows.
SEARCH_LIMIT: Final = 20
#: Longest query accepted, in characters (a search box, not a document).
MAX_QUERY_CHARS: Final = 500
#: The console's stylesheet: served by the console itself, so the policy needs no inline style.
STYLESHEET: Final = """
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 72rem; color: #222; }
nav a { margin-right: 1rem; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
pre { background: #f6f6f6; padding: 0.75rem; overflow-x: auto; white-space: pre-wrap; }
.add { color: #05630f; } .del { color: #a10d0d; } .hunk { color: #555; }
.retired { color: #777; } .error { color: #a10d0d; }
ol.timeline > li { margin-bottom: 1.25rem; }
"""


def templates() -> Environment:
    """The console's Jinja2 templates, every value escaped unless a template says otherwise
    (none does)."""
    env = Environment(
        loader=PackageLoader("worker.cli", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    env.filters["diff_class"] = diff_class
    return env


def diff_class(line: str) -> str:
    """The CSS class of one unified-diff line.

    >>> [diff_class(x) for x in ("+++ b/x", "+- tea", "-- tea", "@@ -1 +1 @@", " # X")]
    ['hunk', 'add', 'del', 'hunk', '']
    """
    if line.startswith(("+++", "---", "@@")):
        return "hunk"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    return ""


class Pages:
    """The console's endpoints over one runtime (each a plain function Starlette runs in its
    thread pool: the store and the queue are synchronous)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.env = templates()

    def render(self, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        return HTMLResponse(self.env.get_template(name).render(**values), status_code=status)

    def index(self, request: Request) -> Response:
        query = _query(request, "q")
        keys = self.runtime.store.namespaces(containing=query or None, limit=NAMESPACE_PAGE + 1)
        return self.render(
            "index.html",
            query=query,
            namespaces=keys[:NAMESPACE_PAGE],
            more=len(keys) > NAMESPACE_PAGE,
        )

    def namespace(self, request: Request) -> Response:
        ns = _namespace(request)
        store = self.runtime.store
        files = store.list_files(ns)
        if not files:
            raise NotFound(f"{ns} has no memory files")
        query = _query(request, "q")
        hits = self.runtime.memory_search.search_entries(ns, query, SEARCH_LIMIT) if query else []
        mode = "hybrid" if self.runtime.memory_search.embedder is not None else "full text"
        return self.render(
            "namespace.html",
            ns=ns,
            files=files,
            contents=store.current_files(ns),
            query=query,
            hits=hits,
            mode=mode,
        )

    def history(self, request: Request) -> Response:
        ns = _namespace(request)
        path = normalise_path(_required(request, "path"))
        versions = list(reversed(self.runtime.store.file_history(ns, path)))
        return self.render("history.html", ns=ns, path=path, versions=versions)

    def entry(self, request: Request) -> Response:
        ns = _namespace(request)
        entry_id = _required(request, "id")
        found = self.runtime.store.provenance(ns, [entry_id])
        if not found:
            raise NotFound(f"{ns} has no entry {entry_id}")
        return self.render("entry.html", ns=ns, p=found[0])

    def queue(self, request: Request) -> Response:
        admin = self.runtime.queue.admin
        stats = admin.stats().as_dict()
        return self.render("queue.html", stats=stats, dead=admin.dead_letters())

    def stylesheet(self, request: Request) -> Response:
        return Response(STYLESHEET, media_type="text/css")


def _query(request: Request, name: str) -> str:
    value = request.query_params.get(name, "").strip()
    if len(value) > MAX_QUERY_CHARS:
        raise UsageError(f"{name} is longer than {MAX_QUERY_CHARS} characters")
    return value


def _required(request: Request, name: str) -> str:
    value = _query(request, name)
    if not value:
        raise UsageError(f"the page needs ?{name}=")
    return value


def _namespace(request: Request) -> str:
    """The ``ns`` parameter, parsed as the CLI's ``--namespace`` is."""
    return Namespace.parse(_required(request, "ns")).key


def build_app(runtime: Runtime, *, user: str, password: str) -> ASGIApp:
    """The console over ``runtime``, behind :class:`~worker.cli.web.Guard`."""
    pages = Pages(runtime)

    def failed(request: Request, exc: Exception) -> Response:
        status = 404 if isinstance(exc, NotFound) else 400 if isinstance(exc, UsageError) else 503
        if not isinstance(exc, NotFound | UsageError | Unavailable):
            status = 500
        return pages.render("error.html", status, message=str(exc), status_code=status)

    routes: list[tuple[str, Callable[[Request], Response]]] = [
        ("/", pages.index),
        ("/namespace", pages.namespace),
        ("/history", pages.history),
        ("/entry", pages.entry),
        ("/queue", pages.queue),
        ("/console.css", pages.stylesheet),
    ]
    app = Starlette(
        routes=[Route(path, endpoint, methods=["GET", "HEAD"]) for path, endpoint in routes],
        exception_handlers={MemworkerError: failed, ValueError: failed},
    )
    return Guard(app, user=user, password=password)


#: The only address the console listens on.
HOST: Final = "127.0.0.1"
#: The default port of ``memworker console``.
DEFAULT_PORT: Final = 8377
#: Bounds the wait for a started server to listen (it normally takes milliseconds).
START_DEADLINE_SECONDS: Final = 10.0


def credentials(runtime: Runtime) -> tuple[str, str]:
    """The console's user and password from the settings; refuses to go on without a
    password (:class:`ConfigurationError`), so the console is never served open."""
    secret = runtime.settings.console_password
    password = secret.get_secret_value() if secret is not None else ""
    if not password:
        raise ConfigurationError(
            "the console needs a password: set MEMWORKER_CONSOLE_PASSWORD (and "
            "MEMWORKER_CONSOLE_USER, default admin); it serves nothing without one"
        )
    return runtime.settings.console_user, password


def _config(runtime: Runtime, port: int) -> uvicorn.Config:
    user, password = credentials(runtime)
    return uvicorn.Config(
        build_app(runtime, user=user, password=password),
        host=HOST,
        port=port,
        log_level="warning",
        access_log=False,
        server_header=False,
        proxy_headers=False,
        lifespan="off",
    )


def serve(runtime: Runtime, *, port: int = DEFAULT_PORT) -> None:
    """Serve the console in the foreground until interrupted (Ctrl-C)."""
    uvicorn.Server(_config(runtime, port)).run()


@dataclass(frozen=True)
class Started:
    """A console serving in a thread: its base URL."""

    url: str


class _Server(uvicorn.Server):
    """A uvicorn server that says when it listens, or has given up (its ``settled`` event)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.settled = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        finally:
            self.settled.set()

    def run_settled(self) -> None:
        try:
            self.run()
        finally:
            self.settled.set()  # it could not start (a port in use): stop waiting for it


@contextmanager
def start(runtime: Runtime, *, port: int = 0) -> Iterator[Started]:
    """Serve the console in a thread (``port=0``: any free port) until the block ends."""
    server = _Server(_config(runtime, port))
    thread = threading.Thread(target=server.run_settled, name="memworker-console", daemon=True)
    thread.start()
    if not server.settled.wait(START_DEADLINE_SECONDS) or not server.started:
        server.should_exit = True
        raise ConfigurationError(f"the console could not listen on {HOST}:{port}")
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Started(url=f"http://{HOST}:{bound}")
    finally:
        server.should_exit = True
        thread.join(timeout=START_DEADLINE_SECONDS)
