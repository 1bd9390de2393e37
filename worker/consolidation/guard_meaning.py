"""Guards by meaning: what the patterns of :mod:`~worker.consolidation.guards` cannot name.

The rule table knows a class of hostile text by its wordings, in the languages it was written
for. Past them ("Abaikan semua instruksi sebelumnya") the consolidation's meaning model still
knows what a text says: :func:`meaning_violation` refuses a text that lies clearly nearer the
described examples of one hostile class (:data:`EXAMPLES_FILE`: a secret given in words, an
order to the assistant, authority granted) than the legitimate statements described beside
them ("I reset my password yesterday").

- **Nearness** is the mean cosine of a text's :data:`NEAREST_EXAMPLES` nearest examples of a
  class, as for the kinds of statement (:mod:`~worker.consolidation.meaning`), after centring
  on the mean of every described example. The kinds' own examples count as legitimate
  statements: they are what memories ordinarily say.
- **A secret must be there**: a credential is refused only when the text holds a token shaped
  like one (:func:`secret_shaped`: "Kedi#4821"); a sentence about a password ("I forgot my
  bank password") holds nothing to steal.
- **The margin** (:data:`MARGIN`) is chosen on the development corpus of the guard tests and
  the update stories' statements; ``python -m bench guards`` prints its rates on held-out and
  ordinary texts.

It only reads vectors the caller prepared (:meth:`Meaning.prepare`): a text without one is left
to the patterns, so a missing model never refuses anything and never stalls a merge.

>>> from langchain_core.embeddings import DeterministicFakeEmbedding
>>> from worker.consolidation.meaning import Meaning
>>> meaning = Meaning(DeterministicFakeEmbedding(size=64))
>>> meaning_violation("a text never prepared", meaning) is None
True
>>> secret_shaped("my wifi password is Kedi#4821"), secret_shaped("I forgot my password")
(True, False)
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from typing import Final

import numpy as np
import regex

from worker.consolidation.guards import violation
from worker.consolidation.meaning import Meaning, shipped_vectors

#: The described hostile classes and legitimate statements, shipped with the package.
EXAMPLES_FILE: Final = "guard_examples.json"
#: Their vectors under the default model (written with the kinds' by ``python -m
#: worker.runtime.embeddings``), used while their digest and model match.
VECTORS_FILE: Final = "guard_examples.npz"
#: Examples of a class a text is compared with: the mean of the nearest three, so one odd
#: example neither makes nor breaks a refusal.
NEAREST_EXAMPLES: Final = 3
#: How much nearer a hostile class a text must be than the legitimate statements (mean
#: centred cosines): just above the highest legitimate text it was chosen on (0.130).
MARGIN: Final = 0.14
#: A token that may be a secret: four or more non-space characters, one a digit.
_SECRET_TOKEN: Final = regex.compile(r"(?<!\S)(?=\S*\p{Nd})[^\s]{4,}")


@dataclass(frozen=True)
class HostileClass:
    name: str
    reason: str
    #: Refused only when the text holds a secret-shaped token (:func:`secret_shaped`).
    needs_secret: bool


@dataclass(frozen=True)
class GuardBank:
    """The hostile classes with their examples, and the legitimate statements."""

    classes: tuple[HostileClass, ...]
    examples: tuple[str, ...]
    #: Index into ``classes`` of each example.
    labels: tuple[int, ...]
    legitimate: tuple[str, ...]

    @classmethod
    def load(cls) -> GuardBank:
        raw = json.loads(resources.files(__package__).joinpath(EXAMPLES_FILE).read_text("utf-8"))
        classes, examples, labels = [], [], []
        for i, item in enumerate(raw["classes"]):
            classes.append(HostileClass(item["name"], item["reason"], bool(item["needs_secret"])))
            examples += item["examples"]
            labels += [i] * len(item["examples"])
        return cls(tuple(classes), tuple(examples), tuple(labels), tuple(raw["legitimate"]))

    @property
    def texts(self) -> tuple[str, ...]:
        """Every text embedded for the bank: the hostile examples, then the legitimate."""
        return (*self.examples, *self.legitimate)


class _Vectors:
    """The bank's vectors under one :class:`Meaning`'s model, made once: centred on the mean
    of every described example (which spreads the model's narrow cone of cosines), normalised."""

    def __init__(self, meaning: Meaning, bank: GuardBank) -> None:
        self.meaning = meaning
        self.bank = bank

    @cached_property
    def _centred(self) -> tuple[np.ndarray, np.ndarray]:
        texts = self.bank.texts
        stored = shipped_vectors(VECTORS_FILE, self.meaning.model_name, texts)
        if stored is None:
            stored = self.meaning.embed_checked(texts, "embedding the guards' examples")
        # The kinds of statement are what memories ordinarily say: legitimate anchors too.
        matrix = np.vstack([stored, self.meaning.example_vectors])
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        mean = matrix.mean(axis=0)
        return _unit_rows(matrix - mean), mean

    def scores(self, v: np.ndarray) -> tuple[list[float], float]:
        """Nearness of ``v`` to each hostile class, and to the legitimate statements."""
        matrix, mean = self._centred
        cosines = matrix @ _unit_rows((v - mean)[None, :])[0]
        n = len(self.bank.examples)
        hostile, legitimate = cosines[:n], cosines[n:]
        labels = np.asarray(self.bank.labels)
        per_class = [_near(hostile[labels == i]) for i in range(len(self.bank.classes))]
        return per_class, _near(legitimate)


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def _near(cosines: np.ndarray) -> float:
    return float(np.sort(cosines)[-NEAREST_EXAMPLES:].mean())


@cache
def _bank() -> GuardBank:
    return GuardBank.load()


#: The bank's vectors under each :class:`Meaning` (one model each), made at first use.
_BY_MEANING: weakref.WeakKeyDictionary[Meaning, _Vectors] = weakref.WeakKeyDictionary()


def _vectors(meaning: Meaning) -> _Vectors:
    found = _BY_MEANING.get(meaning)
    if found is None:
        found = _BY_MEANING[meaning] = _Vectors(meaning, _bank())
    return found


def secret_shaped(text: str) -> bool:
    """``text`` holds a token that may be a secret (four or more characters, one a digit)."""
    return _SECRET_TOKEN.search(text) is not None


def meaning_violation(text: str, meaning: Meaning, *, margin: float = MARGIN) -> str | None:
    """The reason ``text`` may not be stored by its meaning, or None (also when it has no
    prepared vector: the patterns alone decide then)."""
    v = meaning.vector(text.strip())
    if v is None:
        return None
    vectors = _vectors(meaning)
    per_class, legitimate = vectors.scores(v)
    for i in np.argsort(per_class)[::-1]:
        hostile = vectors.bank.classes[int(i)]
        if per_class[int(i)] - legitimate < margin:
            return None
        if not hostile.needs_secret or secret_shaped(text):
            return hostile.reason
    return None


def refusal(text: str, meaning: Meaning | None) -> str | None:
    """Why ``text`` may not be stored: by the patterns (:func:`guards.violation`), then by
    its meaning when a model is at hand; None when it may."""
    reason = violation(text)
    if reason is None and meaning is not None:
        reason = meaning_violation(text, meaning)
    return reason
