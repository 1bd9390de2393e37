"""What stands in front of every console page: credentials, methods and response headers.

The console shows stored memory, which is user input, to an operator's browser. So:

* every request carries HTTP basic credentials, compared in constant time (user and password
  both, always), or gets ``401`` and nothing else;
* only ``GET`` and ``HEAD`` are answered (``405`` otherwise): the console changes nothing;
* every response, a refusal included, carries a strict Content-Security-Policy (no script at
  all, styles only from the console itself, no framing, forms only to itself), ``nosniff``,
  no referrer and no caching, so text that got past the templates' escaping still could not
  run or leak.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

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
