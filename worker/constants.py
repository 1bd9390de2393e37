"""Constants shared across memworker, each declared once with the reason for its value."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Final

#: IDs (users, assistants, orgs, threads, traces) are restricted to a safe alphabet so they can
#: be embedded in Redis keys, SQL rows and LangGraph store labels without escaping, and never
#: contain a ``{``/``}`` (which would break Redis Cluster hash tags) or a path separator.
ID_PATTERN: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@\-]{0,127}$")

#: Longest accepted id; 128 characters fits UUIDs, e-mail addresses and provider thread ids.
MAX_ID_LENGTH: Final = 128

#: Every memory file lives under this route, the way a deepagents ``StoreBackend`` is mounted.
MEMORY_ROUTE: Final = "/memories/"

#: The inbox route's default: agents write there freely and the inbox scan removes each item
#: once merged, so a file memworker wrote there would be deleted from the store by the next scan.
INBOX_ROUTE: Final = MEMORY_ROUTE + "inbox/"

#: Path prefixes nothing memworker writes may fall under: no enqueue topic, plan, ``put`` or
#: import (the deployment's own inbox route is added where settings are at hand). One place,
#: so every entry refuses the same paths (:func:`worker.namespaces.reserved_prefix`).
RESERVED_PREFIXES: Final = (INBOX_ROUTE,)

#: How far a candidate's ``occurred_at`` (when it was said) may lie after its ``created_at``
#: (when it was enqueued): the caller's clock and the client's may disagree by a little, so a
#: few minutes are let through; more is a wrong time zone or a made-up time, refused on enqueue
#: and on decode rather than let a future event time win every merge.
MAX_OCCURRED_AT_SKEW: Final = timedelta(minutes=5)

#: Largest candidate text in UTF-8 bytes unless the deployment sets ``MEMWORKER_MAX_TEXT_BYTES``
#: (the one default every entry point, source and consolidator falls back on): a conversation
#: exchange of a few paragraphs fits; one candidate cannot fill a prompt or a stream entry.
MAX_TEXT_BYTES: Final = 8192

#: Longest normalised memory path; long enough for nested topics, short enough for an index.
MAX_PATH_LENGTH: Final = 200

#: Topic/path segments: lower-case-friendly names; no dots at the start, so no ``..`` traversal.
PATH_SEGMENT_PATTERN: Final = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-.]{0,63}$")

#: A ``key`` names a slot such as ``preference.language`` for deterministic supersession.
KEY_PATTERN: Final = re.compile(r"^[a-z0-9][a-z0-9_.\-]{0,99}$")

#: Namespace UUID for deterministic candidate ids (uuid5 over namespace + idempotency key), so
#: a retried capture with the same key yields the same id and the ledger dedupes it.
CANDIDATE_ID_NAMESPACE: Final = "6f1c1f47-3b7e-4a8e-9d55-8f2b0d6a7c11"

#: Default memory files the rules consolidator routes to.
PREFERENCES_PATH: Final = "/memories/preferences.md"
FACTS_PATH: Final = "/memories/facts.md"

# --- the settings the hot-path client reads -----------------------------------------------------
# Declared here, below both :class:`worker.settings.Settings` and the client's own slice
# (:class:`worker.hotpath.settings.ClientSettings`), so the two share every default and bound.

#: The prefix of every environment variable memworker reads (``MEMWORKER_REDIS_URL``, …).
ENV_PREFIX: Final = "MEMWORKER_"

#: Where ``memworker run`` keeps its embedded Redis socket, SQLite file and files sink by default.
DEFAULT_DATA_DIR: Final = Path.home() / ".memworker"

#: The embedded Redis server's Unix socket, inside the data directory.
EMBEDDED_REDIS_SOCKET_NAME: Final = "redis.sock"

#: The default key prefix, and what a prefix may be: it is embedded in every Redis key (and in
#: Celery queue names), so it has the ids' safe alphabet and a short length.
DEFAULT_KEY_PREFIX: Final = "mw"
KEY_PREFIX_PATTERN: Final = r"^[A-Za-z0-9_\-]{1,32}$"

#: Default and bounds of the queue's shard count (see ``Settings.queue_shards``).
DEFAULT_QUEUE_SHARDS: Final = 256
MAX_QUEUE_SHARDS: Final = 1024

#: Bounds of ``MEMWORKER_MAX_TEXT_BYTES``: a few words at least, a stream entry of 1 MiB at most.
MIN_TEXT_BYTES_LIMIT: Final = 16
MAX_TEXT_BYTES_LIMIT: Final = 1_048_576

#: The hot path's default Redis timeout (a chat reply never waits longer on Redis), and the
#: largest one accepted.
DEFAULT_SOCKET_TIMEOUT_SECONDS: Final = 0.25
MAX_SOCKET_TIMEOUT_SECONDS: Final = 30.0

#: ``maxmemory-policy`` values that may evict keys without a TTL, i.e. the queue's own keys:
#: the workers refuse to start on them and the hot path to enqueue. ``volatile-*`` only evicts
#: keys with an expiry, and no queue key has one.
EVICTING_POLICIES: Final = frozenset({"allkeys-lru", "allkeys-lfu", "allkeys-random"})

# --- bounds on what agents write (checked before any work on it) --------------------------------
# An agent writes freely, into its inbox and (with direct edits) into the files memworker
# publishes, so one runaway loop or a pasted dump must cost a bounded amount: each item is
# measured by these bounds first (its length, then one C-level split into lines) and refused
# or set aside before a single line is parsed, deduplicated or turned into a candidate.

#: Most lines one inbox item may hold: an agent writes a few facts per thread; a file of
#: thousands of lines is a dump (or a runaway loop) that would fill its user's backlog.
MAX_INBOX_ITEM_LINES: Final = 1000

#: Largest inbox item in UTF-8 bytes: its line bound at about 256 bytes a line (a fact is a
#: sentence or two), so an item of a few long lines cannot carry a megabyte either.
MAX_INBOX_ITEM_BYTES: Final = 262_144

#: Most lines an agent's direct edit of a memory file may hold: a published file is rendered
#: under its budget (8 KiB by default, about a hundred entries), so an edit ten times that is
#: a dump, not an edit; it is recorded and memworker's version restored (never merged).
MAX_EDIT_LINES: Final = 1000

#: Largest direct edit in UTF-8 bytes, for the same reason (its line bound at 256 bytes a line).
MAX_EDIT_BYTES: Final = 262_144

#: The embeddings a deployment gets without a setting: the multilingual model shipped in the
#: default install, so merging decides by meaning and search is hybrid out of the box.
DEFAULT_EMBEDDINGS: Final = "local:multilingual-e5-small"
#: What turns embeddings off (``MEMWORKER_EMBEDDINGS=none``): merging and search by words only.
NO_EMBEDDINGS: Final = "none"
