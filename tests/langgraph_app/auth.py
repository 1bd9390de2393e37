"""Custom auth for the authenticating test server: an API key names a user and their org.

Each key is a fixed identity with an ``org_id`` claim, as a real deployment's auth handler
would return from a verified token. No ``@auth.on`` rules: every authenticated user may run
any graph and reach the store, so whose memory a run reads is decided by memworker alone.
"""

from __future__ import annotations

from langgraph_sdk import Auth

#: API key → the identity the server vouches for (with its organisation claim).
USERS = {
    "key-alice": {"identity": "alice", "org_id": "acme"},
    "key-bob": {"identity": "bob", "org_id": "globex"},
}

auth = Auth()


@auth.authenticate
async def authenticate(headers: dict[bytes, bytes]) -> Auth.types.MinimalUserDict:
    key = headers.get(b"x-api-key", b"").decode()
    user = USERS.get(key)
    if user is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="unknown API key")
    return {"identity": user["identity"], "org_id": user["org_id"]}  # type: ignore[typeddict-unknown-key]
