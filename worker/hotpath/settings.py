"""The hot-path client's slice of the settings, read without pydantic.

A chat service imports the client on every start, and ``MemoryClient()`` reads its settings
there; the worker's :class:`~worker.settings.Settings` (46 fields, a pydantic-settings model)
costs more to import and build than the rest of the client together. The client needs seven
of those fields, so it reads only them, from the same ``MEMWORKER_*`` variables and ``./.env``
file (names matched case-insensitively, as pydantic-settings does), with the same defaults and
bounds (declared once in :mod:`worker.constants`).

Invariants:

- **Never more permissive than Settings.** The quick check here accepts only plain spellings
  whose value is certain (decimal digits, ``true``/``false``, a number in range, a prefix
  matching the pattern); anything else — a bad value, an unusual spelling, an override that is
  not one of the client's fields — is handed to :class:`~worker.settings.Settings` (imported
  then), which accepts it or raises, so every error message is the one the worker's settings
  give, naming the field and its variable.
- **Same result as Settings.** What the quick check accepts, ``Settings`` accepts with the same
  value (``tests/unit/test_hotpath_settings.py`` holds the two together).
- Variables of the worker's other fields are not read: a client never fails on a setting that
  only workers use.

>>> s = client_settings("redis://cache:6379/0", key_prefix="chat")
>>> (s.redis_url, s.key_prefix, s.queue_shards)
('redis://cache:6379/0', 'chat', 256)
>>> try:
...     client_settings("redis://cache:6379/0", debounce_seconds=0)
... except ConfigurationError as exc:
...     print(exc)
invalid client settings: debounce_seconds: Input should be greater than 0
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from worker.constants import (
    DEFAULT_DATA_DIR,
    DEFAULT_KEY_PREFIX,
    DEFAULT_QUEUE_SHARDS,
    DEFAULT_SOCKET_TIMEOUT_SECONDS,
    EMBEDDED_REDIS_SOCKET_NAME,
    ENV_PREFIX,
    KEY_PREFIX_PATTERN,
    MAX_QUEUE_SHARDS,
    MAX_SOCKET_TIMEOUT_SECONDS,
    MAX_TEXT_BYTES,
    MAX_TEXT_BYTES_LIMIT,
    MIN_TEXT_BYTES_LIMIT,
)
from worker.env_file import env_file_values
from worker.errors import ConfigurationError

if TYPE_CHECKING:
    from worker.settings import Settings

#: The prefix of every variable, lower-cased (variable names are matched case-insensitively).
_PREFIX: Final = ENV_PREFIX.lower()

#: Environment spellings of a boolean the quick check takes as certain (pydantic accepts more;
#: those go to Settings).
_BOOLEANS: Final = {"true": True, "false": False, "1": True, "0": False}
#: An integer or a decimal number, written plainly (no sign, exponent, leading zero of an
#: integer, spaces or underscores).
_INTEGER: Final = re.compile(r"[1-9][0-9]{0,6}")
_DECIMAL: Final = re.compile(r"[0-9]{1,7}(?:\.[0-9]{1,9})?")


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """The settings a hot-path client uses, with the worker's defaults; see the module."""

    #: Redis for the queue; unset: the embedded server of ``data_dir``.
    redis_url: str | None = None
    data_dir: Path = DEFAULT_DATA_DIR
    key_prefix: str = DEFAULT_KEY_PREFIX
    queue_shards: int = DEFAULT_QUEUE_SHARDS
    max_text_bytes: int = MAX_TEXT_BYTES
    socket_timeout_seconds: float = DEFAULT_SOCKET_TIMEOUT_SECONDS
    allow_evicting_redis: bool = False

    @property
    def embedded_redis_socket(self) -> Path:
        return self.data_dir / EMBEDDED_REDIS_SOCKET_NAME

    @classmethod
    def of(cls, settings: Settings | ClientSettings) -> ClientSettings:
        """The client's slice of settings already validated (the worker's, or a slice)."""
        if isinstance(settings, ClientSettings):
            return settings
        return cls(**{name: getattr(settings, name) for name in CLIENT_FIELDS})


#: The client's fields, in declaration order.
CLIENT_FIELDS: Final = tuple(f.name for f in fields(ClientSettings))


def client_settings(url: str | None = None, **overrides: Any) -> ClientSettings:
    """The settings a client is built with.

    With a ``url``: that URL and ``overrides``, the environment unread. Without one: the
    client's ``MEMWORKER_*`` variables as the worker reads them (the environment, then
    ``./.env``: :mod:`worker.env_file`), ``overrides`` taking precedence, so the client finds
    the same Redis as the worker. ``overrides`` may name any
    field of :class:`~worker.settings.Settings` (the worker's fields are checked, then unused);
    a bad value or an unknown name raises :class:`ConfigurationError` naming the field.
    """
    given = dict(overrides)
    if url is not None:
        given["redis_url"] = url
    else:
        # The file first: a variable of the environment overrides the file's spelling of it.
        given = _client_environment({**env_file_values(), **os.environ}) | given
    quick = _quick(given)
    if quick is not None:
        return quick
    return _validated(given, from_env=url is None)


def _client_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """The client's fields set in ``environ``, by field name (as pydantic-settings reads them:
    names lower-cased, so the last spelling of a name wins)."""
    lowered = {k.lower(): v for k, v in environ.items() if k[: len(_PREFIX)].lower() == _PREFIX}
    found = {}
    for name in CLIENT_FIELDS:
        value = lowered.get(_PREFIX + name)
        if value is not None:
            found[name] = value
    return found


def _quick(given: Mapping[str, Any]) -> ClientSettings | None:
    """``given`` as client settings when every value is certainly valid; else ``None``."""
    values: dict[str, Any] = {}
    for name, raw in given.items():
        check = _CHECKS.get(name)
        value = None if check is None else check(raw)
        if value is None and not (name == "redis_url" and raw is None):
            return None
        values[name] = value
    return ClientSettings(**values)


def _redis_url(raw: Any) -> str | None:
    return raw if isinstance(raw, str) else None


def _data_dir(raw: Any) -> Path | None:
    if isinstance(raw, Path) or (isinstance(raw, str) and raw):
        return Path(raw)
    return None


def _key_prefix(raw: Any) -> str | None:
    return raw if isinstance(raw, str) and re.fullmatch(KEY_PREFIX_PATTERN, raw) else None


def _integer(raw: Any, low: int, high: int) -> int | None:
    if isinstance(raw, str) and _INTEGER.fullmatch(raw):
        raw = int(raw)
    if type(raw) is int and low <= raw <= high:
        return raw
    return None


def _queue_shards(raw: Any) -> int | None:
    return _integer(raw, 1, MAX_QUEUE_SHARDS)


def _max_text_bytes(raw: Any) -> int | None:
    return _integer(raw, MIN_TEXT_BYTES_LIMIT, MAX_TEXT_BYTES_LIMIT)


def _socket_timeout(raw: Any) -> float | None:
    if isinstance(raw, str) and _DECIMAL.fullmatch(raw):
        raw = float(raw)
    # The comparison also refuses infinities and NaN.
    if type(raw) in (int, float) and 0 < raw <= MAX_SOCKET_TIMEOUT_SECONDS:
        return float(raw)
    return None


def _flag(raw: Any) -> bool | None:
    if type(raw) is bool:
        return raw
    return _BOOLEANS.get(raw) if isinstance(raw, str) else None


#: The quick check of each client field: its value if certainly valid, else ``None``.
_CHECKS: Final = {
    "redis_url": _redis_url,
    "data_dir": _data_dir,
    "key_prefix": _key_prefix,
    "queue_shards": _queue_shards,
    "max_text_bytes": _max_text_bytes,
    "socket_timeout_seconds": _socket_timeout,
    "allow_evicting_redis": _flag,
}
if set(_CHECKS) != set(CLIENT_FIELDS):  # pragma: no cover - guards a new client field
    raise RuntimeError("every ClientSettings field needs its quick check in _CHECKS")


def _validated(given: dict[str, Any], *, from_env: bool) -> ClientSettings:
    """``given`` checked by the worker's :class:`~worker.settings.Settings` (the environment
    unread: ``given`` already holds the client's variables): its slice, or the
    :class:`ConfigurationError` naming every bad field."""
    from pydantic import ValidationError

    from worker.settings_explicit import explicit_settings

    try:
        return ClientSettings.of(explicit_settings(**given))
    except ValidationError as exc:
        problems = "; ".join(_problem(e, from_env=from_env) for e in exc.errors())
        raise ConfigurationError(f"invalid client settings: {problems}") from None


def _problem(error: Any, *, from_env: bool) -> str:
    field = ".".join(str(p) for p in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    if not field:
        return message
    where = f" (argument or MEMWORKER_{field.upper()})" if from_env else ""
    return f"{field}: {message}{where}"
