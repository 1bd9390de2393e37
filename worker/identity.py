"""Whose memory something is: one rule for every path that reads or files memory under a user.

Runs (the capture middleware, the memory and search tools, the deep-agent helper), thread
scans, the inbox and agents' edits all decide a user the same way, here:

- **What the server vouches for decides.** For a run, the identity an authenticating
  LangGraph server puts in the run (:mod:`worker.integrations.run_context` reads it); for a
  scanned thread, the owner the server's auth handler (or the chat service, the only writer
  of a deployment-named field) records in the thread's metadata (:func:`thread_owner`). Its
  organisation claim, when there is one, is the organisation.
- **What a client writes may repeat it, never replace it.** A run's context, ``configurable``
  and metadata, and a thread's own ``user_id``/``org_id`` metadata, are written by clients: a
  claim naming another user or organisation raises :class:`~worker.errors.IdentityMismatch`
  and nothing is read or filed.
- **With orgs, the org is part of the user.** The same user id in two organisations is two
  people: :meth:`Identity.user_namespace` is ``org:<org>:user:<user>[:<assistant>]``. Without
  an org it is ``user:<user>[:<assistant>]``, so a deployment without orgs must keep its user
  ids unique across the deployment.

>>> decide(("alice", "acme"), [("metadata", "alice")], []).user_namespace("bot").key
'org:acme:user:alice:bot'
>>> thread_owner({"owner": "alice", "user_id": "bob"}, owner_key="owner")
Traceback (most recent call last):
...
worker.errors.IdentityMismatch: the thread's metadata names user 'bob', but its owner is 'alice'; a thread is filed only under its owner's memory, so nothing was filed. Leave user_id out of the metadata, or write the owner's id there
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from worker.errors import IdentityMismatch, InvalidCandidate, UnknownOwner
from worker.namespaces import Namespace, validate_id

#: Default keys naming the user and the organisation in what a client writes (a run's context,
#: ``configurable`` and metadata; a thread's metadata).
USER_KEY: Final = "user_id"
ORG_KEY: Final = "org_id"
#: The thread-metadata key that names a thread's owner by default: where LangGraph's
#: documented owner-only auth handler records the authenticated identity on every thread it
#: creates or updates (``metadata["owner"] = ctx.user.identity``), overwriting what the client
#: sent. The LangGraph server itself records no owner: without such a handler (or a chat
#: service that alone writes the field), a thread has no owner to establish.
OWNER_KEY: Final = "owner"

#: ``(where, value)``: one client-written claim of a user or org id.
Claim = tuple[str, object]


@dataclass(frozen=True)
class Identity:
    """Whose memory it is. ``authenticated``: a server vouched for ``user_id`` (and
    ``org_id``), rather than a client's claim."""

    user_id: str | None
    org_id: str | None
    authenticated: bool

    def user_namespace(self, assistant_id: str | None = None) -> Namespace:
        """The user's namespace, inside the org when there is one; :class:`InvalidCandidate`
        (from the ids' check) when there is no user or an id is malformed."""
        return Namespace.for_user(self.user_id or "", assistant_id=assistant_id, org_id=self.org_id)


def decide(
    vouched: tuple[str, str | None] | None,
    user_claims: Sequence[Claim],
    org_claims: Sequence[Claim],
    *,
    subject: str = "run",
) -> Identity:
    """The identity: ``vouched`` ``(user, org)`` when a server vouched for one, every claim
    checked against it; else the first user claim and the first org claim.

    Raises :class:`IdentityMismatch` for a claim naming another user or org than the vouched
    one; ``subject`` (``run`` or ``thread``) words the message.
    """
    if vouched is None:
        return Identity(_first(user_claims), _first(org_claims), authenticated=False)
    user_id, org_id = vouched
    _refuse_other("user", user_id, user_claims, subject)
    _refuse_other("organisation", org_id, org_claims, subject)
    return Identity(user_id, org_id, authenticated=True)


def thread_owner(
    metadata: Mapping[str, object],
    *,
    owner_key: str = OWNER_KEY,
    org_key: str | None = None,
    user_key: str = USER_KEY,
    claimed_org_key: str = ORG_KEY,
) -> Identity:
    """The owner of a scanned thread, from ``metadata[owner_key]`` (and its org from
    ``metadata[org_key]`` when the deployment names one) — fields only the server's auth
    handler (or the chat service) writes. The thread's own ``user_key``/``claimed_org_key``
    metadata is client-written: it may repeat the owner, never replace it.

    Raises :class:`UnknownOwner` when the owner (or, with ``org_key``, the org) is missing or
    not a valid id, and :class:`IdentityMismatch` when the client's claims name someone else.
    """
    owner = _text(metadata.get(owner_key))
    if owner is None:
        raise UnknownOwner(
            f"the thread's metadata has no {owner_key!r} (the owner its server's auth handler "
            "records); its owner cannot be established, so nothing was filed. Record the "
            f"owner under {owner_key!r} on every thread, or set MEMWORKER_THREAD_OWNER_KEY"
        )
    org = _text(metadata.get(org_key)) if org_key else None
    if org_key and org is None:
        raise UnknownOwner(
            f"the thread's metadata has no {org_key!r} (its owner's organisation); nothing "
            f"was filed. Record the org under {org_key!r} on every thread"
        )
    for value, what in ((owner, owner_key), (org, org_key)):
        try:
            if value is not None:
                validate_id(value, str(what))
        except InvalidCandidate as exc:
            raise UnknownOwner(
                f"the thread's owner is no valid id ({exc}); nothing was filed"
            ) from None
    user_claims = [("metadata", v)] if (v := metadata.get(user_key)) is not None else []
    org_claims = (
        [("metadata", v)]
        if org_key != claimed_org_key and (v := metadata.get(claimed_org_key)) is not None
        else []
    )
    return decide((owner, org), user_claims, org_claims, subject="thread")


def _refuse_other(what: str, decided: str | None, claims: Sequence[Claim], subject: str) -> None:
    """:class:`IdentityMismatch` for the first claim naming another ``what`` than decided."""
    for where, value in claims:
        claimed = _text(value)
        if claimed is not None and claimed != decided:
            raise _mismatch(what, claimed, decided, where, subject)


def _mismatch(
    what: str, claimed: str, decided: str | None, where: str, subject: str
) -> IdentityMismatch:
    if subject == "run":
        vouched = f"authenticated {decided!r}" if decided else f"vouched for no {what}"
        return IdentityMismatch(
            f"the run's {where} names {what} {claimed!r}, but the server {vouched}; an "
            f"authenticated run reads and writes only its own {what}'s memory, so nothing was "
            f"read or written. Pass no {what} id in the run, or the authenticated one"
        )
    owner = f"its owner is {decided!r}" if decided else f"its owner has no {what}"
    field = "user_id" if what == "user" else "org_id"
    return IdentityMismatch(
        f"the {subject}'s {where} names {what} {claimed!r}, but {owner}; a {subject} is filed "
        f"only under its owner's memory, so nothing was filed. Leave {field} out of the "
        f"{where}, or write the owner's id there"
    )


def _first(claims: Sequence[Claim]) -> str | None:
    for _where, value in claims:
        text = _text(value)
        if text is not None:
            return text
    return None


def _text(value: object) -> str | None:
    """A non-empty id as a string (an integer id too), or None."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None
