"""``memworker console``: a read-only page over the memory, on a real server on loopback.

Each test serves the console of its own deployment (SQLite and PostgreSQL) on a free port of
127.0.0.1 and talks HTTP to it, as a browser would.
"""

from __future__ import annotations

import base64
import http.client
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from pydantic import SecretStr

from tests.integration.test_cli_support import Ops, ops
from worker.cli.web import start
from worker.runtime.container import build_runtime

__all__ = ["ops"]

PASSWORD = "correct horse battery staple"


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: str


@dataclass(frozen=True)
class Console:
    url: str
    ops: Ops

    def get(
        self, path: str, *, auth: tuple[str, str] | None = ("admin", PASSWORD), method: str = "GET"
    ) -> Reply:
        parts = urllib.parse.urlsplit(self.url)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
        headers = {}
        if auth is not None:
            token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        try:
            conn.request(method, path, headers=headers)
            response = conn.getresponse()
            body = response.read().decode()
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, body)
        finally:
            conn.close()

    def namespace_page(self, query: str = "") -> Reply:
        params = {"ns": f"user:{self.ops.user}", **({"q": query} if query else {})}
        return self.get("/namespace?" + urllib.parse.urlencode(params))


@pytest.fixture
def console(ops: Ops) -> Iterator[Console]:
    settings = ops.settings.model_copy(update={"console_password": SecretStr(PASSWORD)})
    runtime = build_runtime(settings)
    with start(runtime) as started:
        yield Console(started.url, ops)
    runtime.store.dispose()


def _merged(ops: Ops, text: str, **fields: str) -> str:
    cid = ops.enqueue(text, **fields)
    assert ops("reconcile", "--user", ops.user).code == 0
    return cid


def test_a_request_without_credentials_gets_401_and_nothing_else(console: Console) -> None:
    _merged(console.ops, "I prefer green tea")

    path = "/namespace?ns=user%3A" + console.ops.user
    reply = console.get(path)
    anonymous = console.get(path, auth=None)

    assert reply.status == 200
    assert anonymous.status == 401
    assert anonymous.headers["www-authenticate"].startswith("Basic ")
    assert "green tea" not in anonymous.body
    assert console.get(path, auth=("admin", "wrong")).status == 401


def test_a_wrong_user_with_the_right_password_gets_401(console: Console) -> None:
    assert console.get("/", auth=("root", PASSWORD)).status == 401


def test_a_users_memory_and_its_history_are_visible(console: Console) -> None:
    _merged(console.ops, "I prefer green tea", key="preference.drink")
    _merged(console.ops, "I prefer black coffee", key="preference.drink")

    page = console.namespace_page()
    history = console.get(
        "/history?" + urllib.parse.urlencode(
            {"ns": f"user:{console.ops.user}", "path": "/memories/preferences.md"}
        )
    )  # fmt: skip

    assert "- I prefer black coffee" in page.body
    assert history.status == 200
    assert history.body.index("version 2") < history.body.index("version 1")
    assert '<span class="del">-- I prefer green tea</span>' in history.body
    assert '<span class="add">+- I prefer black coffee</span>' in history.body


def test_the_index_lists_namespaces_and_its_search_box_narrows_them(console: Console) -> None:
    _merged(console.ops, "I prefer green tea")

    everyone = console.get("/")
    narrowed = console.get("/?q=" + console.ops.user)
    nobody = console.get("/?q=no-such-user-anywhere")

    assert f"user:{console.ops.user}" in everyone.body
    assert f"user:{console.ops.user}" in narrowed.body
    assert f"user:{console.ops.user}" not in nobody.body


def test_a_search_hit_links_to_the_entrys_provenance(console: Console) -> None:
    cid = _merged(console.ops, "I am allergic to peanuts", thread_id="thread-9")
    hit = console.namespace_page("peanuts")
    link = hit.body.split('href="/entry?', 1)[1].split('"', 1)[0].replace("&amp;", "&")

    entry = console.get("/entry?" + link)

    assert entry.status == 200
    assert cid in entry.body
    assert "thread-9" in entry.body
    assert "add" in entry.body


def test_hostile_stored_text_is_escaped_and_no_script_may_run(console: Console) -> None:
    hostile = 'I like <script>alert("x")</script> and <img src=x onerror=alert(1)> tea'
    _merged(console.ops, hostile)

    page = console.namespace_page("tea")  # the hit shows the entry's text as stored

    assert "<script>" not in page.body
    assert "<img src=x" not in page.body
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page.body
    assert "script-src" not in page.headers["content-security-policy"]
    assert page.headers["content-security-policy"].startswith("default-src 'none'")


def test_the_queue_page_shows_health_and_dead_letters_with_their_error(console: Console) -> None:
    ops = console.ops
    ops.enqueue("I prefer green tea")
    for _ in range(ops.settings.max_attempts):
        claim = ops.queue.claim_namespace(f"user:{ops.user}")
        assert claim is not None
        ops.queue.fail(claim, "model <b>timed</b> out")

    page = console.get("/queue")

    assert page.status == 200
    assert f"user:{ops.user}" in page.body
    assert "model &lt;b&gt;timed&lt;/b&gt; out" in page.body


def test_the_console_is_read_only(console: Console) -> None:
    assert console.get("/", method="POST").status == 405
    assert console.get("/", method="DELETE").status == 405


def test_an_unknown_namespace_is_404_and_a_malformed_one_400(console: Console) -> None:
    assert console.get("/namespace?ns=user%3Anobody-here").status == 404
    assert console.get("/namespace?ns=not-a-namespace").status == 400


def test_the_console_command_refuses_to_start_without_a_password(ops: Ops) -> None:
    ran = ops("console", "--port", "1")

    assert ran.code == 2
    assert "MEMWORKER_CONSOLE_PASSWORD" in ran.err
