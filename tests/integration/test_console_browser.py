"""The console in a real browser: headless Chromium (Debian's ``chromium`` package) signs in,
renders the pages and runs whatever they would let it run.

Each test starts a fresh Chromium profile with the network features that call home turned
off, loads a page of a console served on loopback (``tests/integration/test_console.py``'s
fixture), and reads the DOM the browser built, or a screenshot. Skipped where no ``chromium``
is installed (CI installs it: ``.ci/run``).
"""

from __future__ import annotations

import shutil
import subprocess
import urllib.parse
from pathlib import Path
from typing import Final

import pytest

from tests.integration.test_cli_support import ops
from tests.integration.test_console import PASSWORD, Console, console

__all__ = ["console", "ops"]

CHROMIUM: Final = shutil.which("chromium") or shutil.which("chromium-browser")
#: Bounds one browser run (a page load takes about a second).
BROWSER_TIMEOUT_SECONDS: Final = 60
#: Headless, no sandbox (containers), and nothing that reaches out to the network by itself.
FLAGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
#: Stored text that would change the page's title if the browser ran any of it.
HOSTILE: Final = (
    "I like <img src=x onerror=\"document.title='pwned'\"> and "
    "<script>document.title='pwned'</script> green tea"
)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package")


def browse(url: str, profile: Path, *args: str) -> str:
    """Run Chromium on ``url`` with ``args`` in a fresh profile; its standard output."""
    assert CHROMIUM is not None
    ran = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, url],
        capture_output=True,
        text=True,
        timeout=BROWSER_TIMEOUT_SECONDS,
        check=True,
    )
    return ran.stdout


def signed_in(console: Console, path: str, user: str = "admin") -> str:
    """``path`` of the console, with the credentials in the URL as a browser sends them."""
    parts = urllib.parse.urlsplit(console.url)
    secret = urllib.parse.quote(PASSWORD, safe="")
    return f"http://{user}:{secret}@{parts.hostname}:{parts.port}{path}"


def _namespace_path(console: Console, query: str) -> str:
    return "/namespace?" + urllib.parse.urlencode({"ns": f"user:{console.ops.user}", "q": query})


def _remember(console: Console, text: str) -> None:
    console.ops.enqueue(text)
    assert console.ops("reconcile", "--user", console.ops.user).code == 0


def test_a_browser_shows_hostile_memory_as_text_and_runs_none_of_it(
    console: Console, tmp_path: Path
) -> None:
    _remember(console, HOSTILE)

    dom = browse(
        signed_in(console, _namespace_path(console, "tea")), tmp_path / "profile", "--dump-dom"
    )

    assert f"<title>user:{console.ops.user} · memworker console</title>" in dom
    assert "pwned" not in dom.split("</title>")[0]
    assert "&lt;img src=x onerror=" in dom
    assert "<img" not in dom
    assert "<script>" not in dom


def test_a_browser_without_credentials_sees_no_memory(console: Console, tmp_path: Path) -> None:
    _remember(console, "I prefer green tea")

    dom = browse(console.url + _namespace_path(console, "tea"), tmp_path / "profile", "--dump-dom")

    assert "green tea" not in dom  # the browser is left at the sign-in challenge


def test_a_screenshot_of_a_files_history(console: Console, tmp_path: Path) -> None:
    _remember(console, "I prefer green tea")
    _remember(console, "I prefer black coffee instead of tea")
    shot = tmp_path / "history.png"
    path = "/history?" + urllib.parse.urlencode(
        {"ns": f"user:{console.ops.user}", "path": "/memories/preferences.md"}
    )

    browse(signed_in(console, path), tmp_path / "profile", f"--screenshot={shot}",
           "--window-size=1100,800", "--hide-scrollbars")  # fmt: skip

    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10_000
