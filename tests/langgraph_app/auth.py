"""Custom auth for the authenticating test server: an API key names a user and their org.

Each key is a fixed identity with an ``org_id`` claim, as a real deployment's auth handler
would return from a verified token. Threads are owner-only, the way LangGraph documents it:
every thread a user creates or updates gets ``metadata["owner"]`` (and the owner's org under
``owner_org``) overwritten with the signed-in identity, and a user sees only their own threads.
The memory worker's key reads every thread (it scans them). Over the store's HTTP API a user
reaches only the tuples that hold their own user label (``alice+acme``), so no one can drop an
item into another user's inbox; runs read the store inside the server, where whose memory a run
reads is decided by memworker alone. The worker's key reaches every tuple (it publishes).
"""

from __future__ import annotations

from typing import Any

from langgraph_sdk import Auth

#: The memory worker's identity: it scans every user's threads.
WORKER = "memworker"
#: API key → the identity the server vouches for (with its organisation claim).
USERS = {
    "key-alice": {"identity": "alice", "org_id": "acme"},
    "key-bob": {"identity": "bob", "org_id": "globex"},
    # The same user id in another org: another person.
    "key-alice-globex": {"identity": "alice", "org_id": "globex"},
    "key-worker": {"identity": WORKER, "org_id": ""},
}
#: Thread-metadata keys the handler alone writes: the owner and the owner's org.
OWNER_KEY = "owner"
OWNER_ORG_KEY = "owner_org"

auth = Auth()


@auth.authenticate
async def authenticate(headers: dict[bytes, bytes]) -> Auth.types.MinimalUserDict:
    key = headers.get(b"x-api-key", b"").decode()
    user = USERS.get(key)
    if user is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="unknown API key")
    return {"identity": user["identity"], "org_id": user["org_id"]}  # type: ignore[typeddict-unknown-key]


@auth.on.threads
async def owner_only(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
    """Record the owner on every thread written, and let users see only their own threads."""
    if ctx.user.identity == WORKER:
        return None
    if isinstance(value, dict):
        metadata = value.get("metadata")
        if not isinstance(metadata, dict):
            metadata = value["metadata"] = {}
        metadata[OWNER_KEY] = ctx.user.identity
        metadata[OWNER_ORG_KEY] = ctx.user["org_id"]
    return {OWNER_KEY: ctx.user.identity}


@auth.on.store
async def own_memory_only(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Refuse a user a store tuple that is not their own (the worker publishes everywhere)."""
    if ctx.user.identity == WORKER:
        return
    org = ctx.user["org_id"]
    own = f"{ctx.user.identity}+{org}" if org else ctx.user.identity
    if own not in tuple(value.get("namespace") or ()):
        raise Auth.exceptions.HTTPException(status_code=403, detail="not your memory")
