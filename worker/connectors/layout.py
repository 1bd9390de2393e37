"""Where memworker's files live in a LangGraph store: one namespace template and route per scope.

The store sink writes with it, the inbox source reads with it, and the deep-agent helper
(:mod:`worker.integrations.deepagents`) gives agents the same namespace factories — one layout,
so a writer and a reader can never disagree.

- **namespace**: each scope has its own template. The defaults::

      user   ("{assistant_id}", "{user_id}", "memories")   user:u1:bot → (bot, u1, memories)
      agent  ("{assistant_id}", "_shared", "memories")     agent:bot   → (bot, _shared, memories)
      org    ("{org_id}", "_org", "memories")              org:acme    → (acme, _org, memories)

  A user namespace without an assistant fills ``{assistant_id}`` with ``_default``. A user
  inside an organisation (``org:acme:user:u1:bot``) fills ``{org_id}`` with the org when the
  template has that field, and otherwise carries it in the user label, ``u1+acme``: ids
  never hold ``+``, so the same user id in two orgs, or in none, never shares a tuple, and a
  user without an org keeps the tuple it always had. Labels that start with ``_`` are markers:
  no id can start with one, so the second label alone tells a user's tuple from a shared one.
- **key**: the path relative to the scope's route (default ``/memories/`` for every scope):
  ``/memories/preferences.md`` → ``/preferences.md``, the way a deepagents ``CompositeBackend``
  strips its route. With the org route ``/memories/policies/``, the org file
  ``/memories/policies/compliance.md`` has key ``/compliance.md``, which an agent mounting the
  org namespace at ``/policies/`` reads as ``/policies/compliance.md``.

**Validated when built.** Two distinct memory namespaces that could map to one tuple would
read and overwrite each other's files; so would a tuple that is a prefix of another's, since
deepagents lists and greps a ``StoreBackend`` by namespace *prefix*. :class:`StoreLayout`
refuses both with a :class:`~worker.errors.ConfigurationError` naming the two namespaces.
Each template part holds at most one field, so a tuple determines its ids.

Labels are sanitised one way everywhere (:func:`sanitise_label`): the SDK refuses ``.`` in a
label, so every ``.`` becomes ``~`` — ids never contain ``~``, so two ids never share a label.

>>> layout = StoreLayout()
>>> layout.namespace_for("org:acme"), layout.key_for("org:acme", "/memories/compliance.md")
(('acme', '_org', 'memories'), '/compliance.md')
>>> StoreLayout(user=("{user_id}", "memories"))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
worker.errors.ConfigurationError: ... user:u1:bot-a and user:u1:bot-b would share one tuple; ...
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Final

from worker.errors import ConfigurationError, InvalidCandidate, SinkError
from worker.models import Namespace, Scope
from worker.types import INBOX_ROUTE, MEMORY_ROUTE, SinkSettings

#: The default template of each scope (see the module docstring).
DEFAULT_USER_TEMPLATE: Final = ("{assistant_id}", "{user_id}", "memories")
DEFAULT_AGENT_TEMPLATE: Final = ("{assistant_id}", "_shared", "memories")
DEFAULT_ORG_TEMPLATE: Final = ("{org_id}", "_org", "memories")

#: The one template every scope used before templates were per scope; org namespaces all mapped
#: to one tuple under it (the migration command moves their items out).
LEGACY_TEMPLATE: Final = DEFAULT_USER_TEMPLATE

#: ``{assistant_id}`` of a user namespace without an assistant.
NO_ASSISTANT_LABEL: Final = "_default"
#: ``{assistant_id}`` of an org namespace.
ORG_ASSISTANT_LABEL: Final = "_org"
#: ``{user_id}`` of the shared (agent and org) scopes.
SHARED_USER_LABEL: Final = "_shared"
#: ``{org_id}`` of user and agent namespaces.
NO_ORG_LABEL: Final = "_none"

#: What the SDK forbids in a label (``.``) is replaced by this, which no id may contain.
DOT_REPLACEMENT: Final = "~"
#: Joins a user id and its org in the ``{user_id}`` label of a template without ``{org_id}``
#: (``u1+acme``); no id may contain it, so the label tells its user and org apart.
ORG_JOIN: Final = "+"

#: Characters deepagents' ``StoreBackend`` accepts in a label, minus ``.`` which the SDK rejects.
_LABEL_PATTERN: Final = re.compile(r"^[A-Za-z0-9\-_@+:~]+$")
#: What a sanitised id looks like (an id's alphabet with ``.`` made ``~``; a user label may
#: join its org with ``+``).
_ID_LABEL: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_@~+\-]*$")
_ID_CHARS: Final = re.compile(r"^[A-Za-z0-9_@~+\-]*$")
_FIELD: Final = re.compile(r"{([^{}]*)}")
FIELDS: Final = ("user_id", "assistant_id", "org_id", "scope")

#: The ids that tell two namespaces of a scope apart; its template must use all of them.
_IDENTIFYING: Final[Mapping[Scope, tuple[str, ...]]] = {
    Scope.USER: ("user_id", "assistant_id"),
    Scope.AGENT: ("assistant_id",),
    Scope.ORG: ("org_id",),
}
#: Two namespaces of a scope that differ only in the id a template would lack.
_TWINS: Final[Mapping[tuple[Scope, str], tuple[str, str]]] = {
    (Scope.USER, "user_id"): ("user:u1:bot", "user:u2:bot"),
    (Scope.USER, "assistant_id"): ("user:u1:bot-a", "user:u1:bot-b"),
    (Scope.AGENT, "assistant_id"): ("agent:bot-a", "agent:bot-b"),
    (Scope.ORG, "org_id"): ("org:acme", "org:globex"),
}
#: How each scope's namespaces are written in messages.
_SHAPES: Final[Mapping[Scope, str]] = {
    Scope.USER: "user:<user_id>[:<assistant_id>]",
    Scope.AGENT: "agent:<assistant_id>",
    Scope.ORG: "org:<org_id>",
}
_SETTING: Final[Mapping[Scope, str]] = {
    Scope.USER: "MEMWORKER_STORE_NAMESPACE",
    Scope.AGENT: "MEMWORKER_STORE_NAMESPACE_AGENT",
    Scope.ORG: "MEMWORKER_STORE_NAMESPACE_ORG",
}


def sanitise_label(value: str) -> str:
    """A store namespace label for ``value``: every ``.`` becomes ``~``.

    >>> sanitise_label("support.bot")
    'support~bot'
    """
    label = value.replace(".", DOT_REPLACEMENT)
    if not _LABEL_PATTERN.fullmatch(label):
        raise ConfigurationError(
            f"store namespace label {value!r} has characters outside [A-Za-z0-9_@+:~.-]"
        )
    return label


def field_values(namespace: Namespace, *, org_field: bool = True) -> dict[str, str]:
    """What each template field holds for ``namespace`` (ids, or the scope's markers); without
    ``org_field`` (the template has no ``{org_id}``) a user's org joins the user label."""
    user = namespace.user_id or SHARED_USER_LABEL
    if namespace.user_id and namespace.org_id and not org_field:
        user = f"{namespace.user_id}{ORG_JOIN}{namespace.org_id}"
    return {
        "scope": namespace.scope.value,
        "user_id": user,
        "assistant_id": namespace.assistant_id
        or (ORG_ASSISTANT_LABEL if namespace.scope is Scope.ORG else NO_ASSISTANT_LABEL),
        "org_id": namespace.org_id or NO_ORG_LABEL,
    }


def fill(template: Sequence[str], namespace: Namespace) -> tuple[str, ...]:
    """``template`` filled from ``namespace`` and sanitised (no validation of the template)."""
    values = field_values(namespace, org_field=any("{org_id}" in part for part in template))
    return tuple(sanitise_label(part.format(**values)) for part in template)


def check_route(route: str, what: str) -> str:
    """``route`` if it is a folder under ``/memories/`` (starts and ends with ``/``)."""
    if not route.startswith(MEMORY_ROUTE) or not route.endswith("/") or "//" in route:
        raise ConfigurationError(
            f"{what} {route!r} must be a folder under {MEMORY_ROUTE}, ending with '/'"
        )
    return route


@dataclass(frozen=True)
class StoreLayout:
    """The namespace template and route of each scope, validated on construction.

    Args:
        user, agent, org: the scope's namespace template; fields ``{user_id}``,
            ``{assistant_id}``, ``{org_id}``, ``{scope}``, at most one per part.
        routes: the memworker path prefix stripped from a scope's paths to make keys
            (default ``/memories/`` for every scope).
        inbox: the folder of user memory agents may write freely (default
            ``/memories/inbox/``; see :mod:`worker.connectors.inbox`), inside the user route.
    """

    user: tuple[str, ...] = DEFAULT_USER_TEMPLATE
    agent: tuple[str, ...] = DEFAULT_AGENT_TEMPLATE
    org: tuple[str, ...] = DEFAULT_ORG_TEMPLATE
    routes: Mapping[Scope, str] = field(default_factory=dict)
    inbox: str = INBOX_ROUTE

    def __post_init__(self) -> None:
        for scope in Scope:
            object.__setattr__(self, scope.value, tuple(self.template(scope)))
        routes = dict.fromkeys(Scope, MEMORY_ROUTE)
        for name, route in self.routes.items():
            if name not in {scope.value for scope in Scope}:
                raise ConfigurationError(
                    f"store route for {name!r} (MEMWORKER_STORE_ROUTES): the scopes are "
                    "user, agent and org"
                )
            routes[Scope(name)] = route
        for scope, route in routes.items():
            check_route(route, f"store route of the {scope.value} scope")
        object.__setattr__(self, "routes", routes)
        check_route(self.inbox, "inbox route")
        if not self.inbox.startswith(routes[Scope.USER]) or self.inbox == routes[Scope.USER]:
            raise ConfigurationError(
                f"inbox route {self.inbox!r} must be a folder inside the user route "
                f"{routes[Scope.USER]!r}"
            )
        shapes = {scope: _check_template(scope, self.template(scope)) for scope in Scope}
        for a, b in combinations(Scope, 2):
            _check_apart((a, self.template(a), shapes[a]), (b, self.template(b), shapes[b]))

    @classmethod
    def from_settings(cls, settings: SinkSettings) -> StoreLayout:
        """The layout the settings describe; ConfigurationError when it could leak."""
        return cls(
            user=tuple(settings.store_namespace),
            agent=tuple(settings.store_namespace_agent),
            org=tuple(settings.store_namespace_org),
            routes=dict(settings.store_routes),  # type: ignore[arg-type]  # checked when built
            inbox=settings.inbox_route,
        )

    def template(self, scope: Scope) -> tuple[str, ...]:
        value: tuple[str, ...] = getattr(self, scope.value)
        return value

    def namespace_for(self, namespace: Namespace | str) -> tuple[str, ...]:
        """The store namespace tuple of a memory namespace."""
        ns = Namespace.parse(namespace) if isinstance(namespace, str) else namespace
        return fill(self.template(ns.scope), ns)

    def route(self, namespace: Namespace | str) -> str:
        ns = Namespace.parse(namespace) if isinstance(namespace, str) else namespace
        return self.routes[ns.scope]

    def key_for(self, namespace: Namespace | str, path: str) -> str:
        """The item key of a memory path: relative to the scope's route, with a leading slash.

        :class:`InvalidCandidate` when the path is not a file under that route.
        """
        route = self.route(namespace)
        if not path.startswith(route) or len(path) == len(route):
            raise InvalidCandidate(f"path {path!r} is not a file under the store route {route}")
        return "/" + path[len(route) :]

    def path_for(self, namespace: Namespace | str, key: str) -> str:
        """Inverse of :meth:`key_for`."""
        return self.route(namespace) + key.lstrip("/")

    def parse_user(self, store_namespace: Sequence[str]) -> Namespace | None:
        """The user namespace whose tuple ``store_namespace`` is, or ``None`` (another scope's
        tuple, or not one of the layout's).

        >>> StoreLayout().parse_user(("bot", "ann~lee", "memories"))
        Namespace(scope=<Scope.USER: 'user'>, user_id='ann.lee', assistant_id='bot', org_id=None)
        """
        template = self.template(Scope.USER)
        if len(store_namespace) != len(template):
            return None
        ids: dict[str, str | None] = {}
        for part, label in zip(template, store_namespace, strict=True):
            names = _FIELD.findall(part)
            if not names:
                if label != part:
                    return None
                continue
            prefix, _, suffix = part.partition("{" + names[0] + "}")
            end = len(label) - len(suffix)
            if not (label.startswith(prefix) and label.endswith(suffix) and end > len(prefix)):
                return None
            value = label[len(prefix) : end]
            if names[0] == "assistant_id" and value == NO_ASSISTANT_LABEL:
                ids["assistant_id"] = None
            elif names[0] == "org_id" and value == NO_ORG_LABEL:
                ids["org_id"] = None
            elif names[0] == "user_id" and ORG_JOIN in value:
                user, _, org = value.partition(ORG_JOIN)
                ids["user_id"], ids["org_id"] = (
                    user.replace(DOT_REPLACEMENT, "."),
                    org.replace(DOT_REPLACEMENT, "."),
                )
            elif names[0] in ("user_id", "assistant_id", "org_id"):
                ids[names[0]] = value.replace(DOT_REPLACEMENT, ".")
            elif value != Scope.USER.value:
                return None
        try:
            namespace = Namespace.for_user(
                str(ids.get("user_id")),
                assistant_id=ids.get("assistant_id"),
                org_id=ids.get("org_id"),
            )
        except InvalidCandidate:
            return None
        return namespace if self.namespace_for(namespace) == tuple(store_namespace) else None

    @property
    def inbox_prefix(self) -> str:
        """The key prefix of inbox items in a user namespace (``/inbox/`` by default)."""
        return "/" + self.inbox[len(self.routes[Scope.USER]) :]


# --- validation ------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Free:
    """Labels ``prefix + <an id> + suffix``."""

    prefix: str
    suffix: str


_Shape = str | _Free  # a literal label, or a family of labels


def _part_shapes(scope: Scope, part: str) -> list[_Shape]:
    """The labels one template part can take in ``scope``."""
    names = _FIELD.findall(part)
    if not names:
        return [part]
    (name,) = names
    prefix, _, suffix = part.partition("{" + name + "}")
    sample = Namespace.parse(_TWINS[(scope, _IDENTIFYING[scope][0])][0])
    constant = field_values(sample)[name]
    if name in _IDENTIFYING[scope]:
        shapes: list[_Shape] = [_Free(prefix, suffix)]
        if scope is Scope.USER and name == "assistant_id":
            shapes.append(prefix + NO_ASSISTANT_LABEL + suffix)
        return shapes
    if scope is Scope.USER and name == "org_id":  # a user's org, or none
        return [_Free(prefix, suffix), sanitise_label(prefix + NO_ORG_LABEL + suffix)]
    return [sanitise_label(prefix + constant + suffix)]


def _check_template(scope: Scope, template: tuple[str, ...]) -> list[list[_Shape]]:
    setting = _SETTING[scope]
    if not template:
        raise ConfigurationError(f"store namespace template for the {scope.value} scope is empty")
    for part in template:
        names = _FIELD.findall(part)
        unknown = sorted(set(names) - set(FIELDS))
        if unknown:
            raise ConfigurationError(
                f"store namespace template part {part!r} ({setting}) uses {unknown}; "
                f"known fields: {sorted(FIELDS)}"
            )
        if len(names) > 1:
            raise ConfigurationError(
                f"store namespace template part {part!r} ({setting}) holds {len(names)} fields; "
                "put each field in its own part, so a tuple tells its ids apart"
            )
        literal = _FIELD.sub("", part)
        if "{" in literal or "}" in literal or (literal and not _LABEL_PATTERN.fullmatch(literal)):
            raise ConfigurationError(
                f"store namespace template part {part!r} ({setting}) has characters outside "
                "[A-Za-z0-9_@+:~-] or a stray brace"
            )
    used = {name for part in template for name in _FIELD.findall(part)}
    for name in _IDENTIFYING[scope]:
        if name not in used:
            a, b = _TWINS[(scope, name)]
            raise ConfigurationError(
                f"store namespace template for the {scope.value} scope {template!r} has no "
                f"{{{name}}}: {a} and {b} would share one tuple; add {{{name}}} to {setting}"
            )
    return [_part_shapes(scope, part) for part in template]


_Checked = tuple[Scope, tuple[str, ...], list[list[_Shape]]]


def _check_apart(one: _Checked, other: _Checked) -> None:
    """ConfigurationError when a tuple of one scope could equal, or be a prefix of, a tuple of
    the other."""
    (a, template_a, shapes_a), (b, template_b, shapes_b) = one, other
    shorter, longer = sorted((shapes_a, shapes_b), key=len)
    if not all(_parts_meet(x, y) for x, y in zip(shorter, longer, strict=False)):
        return
    relation = (
        "could map to one tuple"
        if len(shapes_a) == len(shapes_b)
        else "could be a prefix of one another (deepagents lists and greps by prefix)"
    )
    raise ConfigurationError(
        f"store namespace templates collide: {_SHAPES[a]} {template_a!r} ({_SETTING[a]}) and "
        f"{_SHAPES[b]} {template_b!r} ({_SETTING[b]}) {relation}; give one of them a part the "
        "other can never hold, e.g. a literal starting with '_'"
    )


def _parts_meet(xs: list[_Shape], ys: list[_Shape]) -> bool:
    return any(_meet(x, y) for x in xs for y in ys)


def _meet(x: _Shape, y: _Shape) -> bool:
    """Whether two label shapes can hold the same label (conservative for two families)."""
    if isinstance(x, str) and isinstance(y, str):
        return x == y
    if isinstance(x, str) or isinstance(y, str):
        literal, free = (x, y) if isinstance(x, str) else (y, x)
        assert isinstance(literal, str)
        assert isinstance(free, _Free)
        end = len(literal) - len(free.suffix)
        return (
            end > len(free.prefix)
            and literal.startswith(free.prefix)
            and literal.endswith(free.suffix)
            and bool(_ID_LABEL.fullmatch(literal[len(free.prefix) : end]))
        )
    assert isinstance(x, _Free)
    assert isinstance(y, _Free)
    return _ends_meet(x.prefix, y.prefix, at_start=True) and _ends_meet(
        x.suffix, y.suffix, at_start=False
    )


def _ends_meet(one: str, other: str, *, at_start: bool) -> bool:
    """Whether two families' fixed ends can line up: the shorter is an end of the longer and
    what is left over could be part of the other family's id."""
    short, long_ = sorted((one, other), key=len)
    if at_start:
        if not long_.startswith(short):
            return False
        extra = long_[len(short) :]
        return not extra or bool(_ID_LABEL.fullmatch(extra[0]) and _ID_CHARS.fullmatch(extra))
    if not long_.endswith(short):
        return False
    extra = long_[: len(long_) - len(short)]
    return bool(_ID_CHARS.fullmatch(extra))


def content_sha256(content: str) -> str:
    """The hash of a stored file's content (the sink's marker, the inbox's cursors, the agent
    edits): SHA-256 of the UTF-8 content, hex."""
    return hashlib.sha256(content.encode("utf-8", errors="surrogatepass")).hexdigest()


def item_content(value: Mapping[str, Any]) -> str:
    """The text of a stored ``FileData`` (a legacy list of lines is joined, as deepagents does)."""
    raw = value.get("content")
    if isinstance(raw, list):
        return "\n".join(str(line) for line in raw)
    return raw if isinstance(raw, str) else ""


def store_key(path: str, route: str = MEMORY_ROUTE) -> str:
    """The item key of a memory path: the path relative to ``route``, with a leading slash."""
    if not path.startswith(route) or len(path) == len(route):
        raise SinkError(f"langgraph sink: path {path!r} is not a file under {route}")
    return "/" + path[len(route) :]


def bounded_lines(content: str, *, max_bytes: int, max_lines: int) -> tuple[list[str], str | None]:
    """``content``'s lines and ``None`` when it is within both bounds, else no lines and why
    not. Measured cheapest first, so a dump costs no more than its length: its characters (a
    lower bound on its UTF-8 bytes), its bytes, then one split into lines (``str.splitlines``,
    every line break Python knows, not only ``\\n``); nothing is parsed per line before the
    bounds are met.

    >>> bounded_lines("- tea\\n- cake\\n", max_bytes=100, max_lines=5)
    (['- tea', '- cake'], None)
    >>> bounded_lines("a\\rb\\rc", max_bytes=100, max_lines=2)
    ([], '3 lines, more than 2')
    >>> bounded_lines("é" * 60, max_bytes=100, max_lines=2)
    ([], '120 bytes, more than 100')
    """
    if len(content) > max_bytes:
        return [], f"more than {max_bytes} bytes ({len(content)} characters)"
    size = len(content.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:
        return [], f"{size} bytes, more than {max_bytes}"
    lines = content.splitlines()
    if len(lines) > max_lines:
        return [], f"{len(lines)} lines, more than {max_lines}"
    return lines, None
