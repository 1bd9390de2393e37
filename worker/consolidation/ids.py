"""Deterministic ids for the entries a plan creates.

An entry created by an ``Add`` or ``Supersede`` gets ``uuid5(namespace, first candidate id, n)``
where ``n`` counts earlier entry-creating ops of the same plan with the same first candidate (a
turn can yield several memories). Ids therefore depend only on the plan, never on a clock or a
random source: replaying a batch makes the same ids, and a consolidator can refer to an entry it
creates earlier in the same plan (duplicates within one batch, or a split LLM batch).

>>> ids = EntryIds("user:u1")
>>> first = ids.next("c1")
>>> first == EntryIds("user:u1").next("c1")
True
>>> first != ids.next("c1")
True
"""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Final

from worker.consolidation.types import Add, Operation, Supersede

#: uuid5 namespace for entry ids; fixed forever, since changing it would re-key every replay.
ENTRY_ID_NAMESPACE: Final = uuid.UUID("0b6f3c59-2f1e-4d3a-9a57-41d1c0e7a2b4")


class EntryIds:
    """Hands out the ids of new entries in plan order."""

    def __init__(self, namespace: str) -> None:
        self._namespace = namespace
        self._seen: Counter[str] = Counter()

    def next(self, first_candidate_id: str) -> str:
        n = self._seen[first_candidate_id]
        self._seen[first_candidate_id] += 1
        return uuid5_hex(f"{self._namespace}\x00{first_candidate_id}\x00{n}")


_NAMESPACE_BYTES: Final = ENTRY_ID_NAMESPACE.bytes


def uuid5_hex(name: str) -> str:
    """``uuid.uuid5(ENTRY_ID_NAMESPACE, name).hex``, from the digest's bytes (no UUID object).

    >>> name = "user:u1/c1/0"
    >>> uuid5_hex(name) == uuid.uuid5(ENTRY_ID_NAMESPACE, name).hex
    True
    """
    digest = bytearray(hashlib.sha1(_NAMESPACE_BYTES + name.encode("utf-8")).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    return digest.hex()


def created_ids(namespace: str, ops: Sequence[Operation]) -> list[str | None]:
    """For each op, the id of the entry it creates (None for ops that create none).

    An entry-creating op without candidates creates no id here; validation rejects it.
    """
    ids = EntryIds(namespace)
    out: list[str | None] = []
    for op in ops:
        if isinstance(op, Add | Supersede) and op.candidate_ids:
            out.append(ids.next(op.candidate_ids[0]))
        else:
            out.append(None)
    return out
