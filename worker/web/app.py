"""The console's pages: server-rendered HTML over the runtime's store, search and queue.

Every page only reads. Stored text (memories, file contents, diffs, candidate texts, errors)
is user input: the templates are Jinja2 with autoescape on, values are never marked safe,
and :class:`~worker.web.guard.Guard` adds a Content-Security-Policy that allows no script.
Namespaces, paths and ids come in query parameters and are parsed like the CLI's options.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from worker.errors import MemworkerError, NotFound, Unavailable, UsageError
from worker.models import Namespace, normalise_path
from worker.web.guard import Guard

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from worker.runtime.container import Runtime

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
        loader=PackageLoader("worker.web", "templates"),
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
    """The console over ``runtime``, behind :class:`~worker.web.guard.Guard`."""
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
