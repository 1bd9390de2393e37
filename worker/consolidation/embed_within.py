"""Embed texts within one total deadline, keeping only vectors fit to store or rank with.

Every embedding call of the worker goes through :func:`embed_within`: a batch's texts, sent
to the model in chunks of :data:`EMBED_BATCH`, each chunk retried with backoff, all of it
within **one** deadline for the whole call — not a deadline per model call, which a hung
provider turns into attempts × chunks × deadline (3.5-3.75 times the per-call deadline,
about 113 s a commit at the default, before this module). A provider that has not answered
by the deadline is abandoned on its daemon thread; its texts get ``None``.

Every vector is checked before anyone uses it (:func:`usable_vector`): finite values, the
expected dimension, a non-zero length. A vector that fails is ``None`` too: never stored
(the entry stays searchable by its words) and never used to rank (a query falls back to the
full-text ranking). A NaN in a query vector, unchecked, turns every cosine into NaN and the
ranking into noise ("My sister lives in Oslo" first for "peanuts allergy").

>>> import time
>>> from langchain_core.embeddings import FakeEmbeddings
>>> found = embed_within(FakeEmbeddings(size=4), ["tea", "cake"], time.monotonic() + 5)
>>> [v.shape for v in found if v is not None]
[(4,), (4,)]
>>> usable_vector([1.0, float("nan")]) is None, usable_vector([0.0, 0.0]) is None
(True, True)
>>> usable_vector([3.0, 4.0], dim=3) is None, usable_vector([3.0, 4.0]).tolist()
(True, [3.0, 4.0])
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Final, TypeVar

import numpy as np
from langchain_core.embeddings import Embeddings

from worker.errors import ModelUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Texts sent to the model per call: providers take batches of this size comfortably.
EMBED_BATCH: Final = 64
#: Attempts per chunk (a provider's blip is retried) while the deadline leaves time.
ATTEMPTS: Final = 3
#: Longest wait between two attempts: past it, a provider that is down stays down.
MAX_RETRY_WAIT_SECONDS: Final = 10.0

Vector = np.ndarray


class DeadlinePassed(Exception):
    """The call's deadline passed before the model answered (internal to this module)."""


def usable_vector(values: object, *, dim: int | None = None) -> Vector | None:
    """``values`` as a float32 vector, or ``None`` when it is unfit to store or rank with:
    not a flat sequence of numbers, a value that is not finite (in float32: a float64 too
    large for it counts as infinite), not ``dim`` values when ``dim`` is given, or a vector
    of length zero (no direction, so no cosine)."""
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is refused just below
            vector = np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError, OverflowError):
        return None
    if vector.ndim != 1 or vector.shape[0] == 0 or (dim is not None and vector.shape[0] != dim):
        return None
    if not bool(np.isfinite(vector).all()):
        return None
    norm = float(np.linalg.norm(vector.astype(np.float64)))
    if not np.isfinite(norm) or norm == 0.0:
        return None
    return vector


def remaining(deadline: float) -> float:
    """Seconds left before ``deadline`` (a :func:`time.monotonic` value); never negative."""
    return max(0.0, deadline - time.monotonic())


def within(fn: Callable[[], T], deadline: float, *, name: str = "embed-call") -> T:
    """``fn()`` on a daemon thread, waited for until ``deadline``; :class:`DeadlinePassed`
    past it (the thread is abandoned: a provider that never answers cannot keep the process
    from exiting, as a pool's threads joined at exit would). ``fn``'s exception is raised."""
    result: list[T] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def call() -> None:
        try:
            result.append(fn())
        except BaseException as exc:
            failure.append(exc)
        finally:
            done.set()

    left = remaining(deadline)
    if left <= 0:
        raise DeadlinePassed
    threading.Thread(target=call, name=name, daemon=True).start()
    if not done.wait(left):
        raise DeadlinePassed
    if failure:
        raise failure[0]
    return result[0]


def embed_within(
    embeddings: Embeddings,
    texts: Sequence[str],
    deadline: float,
    *,
    dim: int | None = None,
    attempts: int = ATTEMPTS,
    retry_wait_seconds: float = 0.5,
    label: str = "embeddings",
    required: bool = False,
) -> list[Vector | None]:
    """One vector or ``None`` per text of ``texts``, in order, all computed before
    ``deadline`` (a :func:`time.monotonic` value: the *total* for the call, every chunk,
    attempt and wait between attempts included).

    ``None`` marks a text whose vector failed :func:`usable_vector` (``dim``: the dimension
    expected, e.g. that of vectors already stored; without it the most common length among
    this call's vectors) or that was not embedded: the provider failed every attempt, or the
    deadline came first (the chunks after it are not sent). Never raises for the provider;
    what went wrong is logged once per call, under ``label`` (the model's name). ``required``:
    a text the model did not answer for raises :class:`ModelUnavailable` instead (a merge,
    which decides by the vectors, waits rather than deciding without them); a vector refused
    by the checks is still ``None``."""
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    raw: list[object | None] = [None] * len(texts)
    for start in range(0, len(texts), EMBED_BATCH):
        chunk = list(texts[start : start + EMBED_BATCH])
        got, why = _chunk(embeddings, chunk, deadline, attempts, retry_wait_seconds)
        if got is None and required:
            raise ModelUnavailable(f"{label}: {why}; the batch waits for the model")
        if got is None:
            log.warning(
                "%s: %d of %d text(s) left without a vector: %s",
                label,
                len(texts) - start,
                len(texts),
                why,
            )
            break
        raw[start : start + len(chunk)] = got
    return _checked(raw, dim, label)


def _chunk(
    embeddings: Embeddings, chunk: list[str], deadline: float, attempts: int, wait: float
) -> tuple[list[object] | None, str]:
    """The model's answer for ``chunk`` (one per text), or ``None`` and why not."""
    why = ""
    for attempt in range(attempts):
        try:
            got = within(lambda: embeddings.embed_documents(chunk), deadline)
        except DeadlinePassed:
            return None, "no answer before the deadline"
        except Exception as exc:  # the provider's own errors: retried while time is left
            why = f"{type(exc).__name__}: {exc}"
        else:
            if isinstance(got, list | tuple) and len(got) == len(chunk):
                return list(got), ""
            why = f"the model returned {len(got) if isinstance(got, list | tuple) else got!r} "
            why += f"vectors for {len(chunk)} texts"
        pause = min(MAX_RETRY_WAIT_SECONDS, wait * 2**attempt)
        if attempt + 1 < attempts and remaining(deadline) > pause:
            threading.Event().wait(pause)
        elif attempt + 1 < attempts:
            return None, f"{why} (no time left to try again before the deadline)"
    return None, why


def _checked(raw: list[object | None], dim: int | None, label: str) -> list[Vector | None]:
    """:func:`usable_vector` of each answer, against ``dim`` or the most common length."""
    if dim is None:
        lengths = Counter(len(v) for v in raw if isinstance(v, list | tuple))
        dim = lengths.most_common(1)[0][0] if lengths else None
    out = [None if v is None else usable_vector(v, dim=dim) for v in raw]
    refused = sum(1 for v, o in zip(raw, out, strict=True) if v is not None and o is None)
    if refused:
        log.warning(
            "%s: %d vector(s) refused (not finite, not %s values, or of length zero); their "
            "texts stay searchable by their words",
            label,
            refused,
            dim,
        )
    return out
