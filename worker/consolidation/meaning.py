"""Meaning by vectors: kinds of statement, restatements, and embedding within one deadline.

**Embedding.** Every embedding call of the worker goes through :func:`embed_within`: a batch's
texts, sent in chunks of :data:`EMBED_BATCH`, each chunk retried with backoff, all within
**one** deadline for the whole call, not one per model call (which a hung provider would
multiply by attempts × chunks). A provider that has not answered by the deadline is abandoned
on its daemon thread; its texts get ``None``.

Every vector is checked before use (:func:`usable_vector`): finite values, the expected
dimension, a non-zero length. A vector that fails is ``None`` too: never stored (the entry
stays searchable by its words) and never used to rank (a query falls back to the full-text
ranking); one NaN in a query vector would turn every cosine into NaN.

>>> import time
>>> from langchain_core.embeddings import FakeEmbeddings
>>> found = embed_within(FakeEmbeddings(size=4), ["tea", "cake"], time.monotonic() + 5)
>>> [v.shape for v in found if v is not None]
[(4,), (4,)]
>>> usable_vector([1.0, float("nan")]) is None, usable_vector([0.0, 0.0]) is None
(True, True)
>>> usable_vector([3.0, 4.0], dim=3) is None, usable_vector([3.0, 4.0]).tolist()
(True, [3.0, 4.0])

**Meaning.** Every place that asks "is this about the same thing?" asks it here, the same way:
the rules consolidator (a restatement confirms, a new value of a single-valued attribute
supersedes), the LLM prompt's choice of entries (:mod:`~worker.consolidation.llm`) and the
trust check on a model's plan (:mod:`~worker.consolidation.plan`).

- **One vector per text.** :meth:`Meaning.prepare` embeds the texts a merge will compare in
  one call, under one deadline, before the merge starts; the merge itself only reads vectors,
  so it stays pure and deterministic. Vectors are cached per process by text
  (:class:`CachingEmbeddings`), a cache shared with the search index.
- **Kinds of statement** (:data:`ATTRIBUTES_FILE`): where one lives, employer, age, partner …
  are *single-valued* (a new value retires the old); likes, pets, allergies … are
  *multi-valued* (never retired by another statement). A text's kind is the kind whose
  described examples, in many languages, it lies nearest to (:meth:`Meaning.kind`), not a
  regular expression over a few wordings; a text between two kinds may be either
  (:meth:`Meaning.kinds_near`).
- **Whose attribute**: the direction from statements about the user to the same about
  someone else (:attr:`Bank.subject_pairs`) tells a relative's age or home from the user's
  (:meth:`Meaning.someone_else`), as the pairs nearest the text draw it (:data:`NEAREST_PAIRS`).
- **Whose words**: the direction from the user's own words to the same written about a named
  person (:attr:`Bank.observed_pairs`) tells an extractor's observations
  (:meth:`Meaning.observation`): they must lie further into an attribute to be taken for one
  value of it, and the merge models do not answer for them (:meth:`Meaning.stories_apart`).
- **Not a value of now**: the directions from values held to the same wished or planned
  (:attr:`Bank.wished_pairs`, :meth:`Meaning.wished`) and to the same held once
  (:attr:`Bank.former_pairs`, :meth:`Meaning.former`): a wish retires no value that holds, and
  a past the user tells is not retired by a later value (:func:`~.plan.adds_beside`).
- **A change told**: the direction from values said plainly to the same told as a change
  (:attr:`Bank.change_pairs`): of two kinds that give one attribute (a job title, an
  employer), the newer retires the older only when it tells a change (:meth:`Meaning.told_alone`).
- **Which person, value, setting**: where two statements differ only in a short stretch of words
  and that stretch names a person on both sides, nearer the bank's persons than its wording
  and things (:attr:`Bank.person_words`), they say the same of two people
  (:meth:`Meaning.persons_apart`: "Mon frère habite à Lyon" / "Ma sœur habite à Lyon", which
  lie nearer than most restatements); where it names a thing on either side
  (:attr:`Bank.thing_words`), they give two values (:meth:`Meaning.values_apart`: "… dans un
  bar" / "… maintenant dans un restaurant"); where it names a setting on both sides
  (:attr:`Bank.setting_words`), a value for each of two settings, the one not retiring the
  other (:meth:`Meaning.settings_apart`: "… to watch is tennis" / "… to play is squash").
  Where they differ only in a few words in place of others and each whole text leans
  towards another attribute, they give one value of two attributes
  (:meth:`Meaning.attributes_apart`: "I live in Berlin" / "I work in Berlin").
- **Restatement**: nearly the same vector, the same numbers and not two people
  (:meth:`Meaning.restates`);
  **the same attribute**: both of one single-valued kind, about the user, and near each other
  (:meth:`Meaning.same_attribute`); **what a model's plan may replace**, a looser test for the
  trust check (:meth:`Meaning.may_replace`).
- **Learned merges** (:class:`MergeModel`, :meth:`Meaning.merge_score`): whether a newer
  statement takes an older one's place, one model for single-valued attributes, one for
  multi-valued ones.

Thresholds are chosen on the development half of the update stories in ``bench/`` and reported
on the other half (``python -m bench updates``).

>>> from langchain_core.embeddings import DeterministicFakeEmbedding
>>> m = Meaning(DeterministicFakeEmbedding(size=64))
>>> m.prepare(["I have 2 cats", "I have 3 cats"])
>>> round(m.similarity("I have 2 cats", "I have 2 cats"), 6)
1.0
>>> m.restates("I have 2 cats", "I have 3 cats")  # other numbers: never the same thing
False
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from typing import Any, Final, NamedTuple, TypeVar

import numpy as np
import regex
from langchain_core.embeddings import Embeddings

from worker.consolidation.text import WORD_FREE_CHAR, content_stems, spaced
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


#: The described kinds of statement, shipped with the package.
ATTRIBUTES_FILE: Final = "attributes.json"
#: The sections of pairs in :data:`ATTRIBUTES_FILE`, in the order their texts are embedded
#: after the examples (:attr:`Bank.texts`): each pair's two sides differ in one respect (whose,
#: "also", told about by name, wished, past, a change), and their difference is a direction.
PAIR_SECTIONS: Final = (
    "subject_pairs",
    "additive_pairs",
    "observed_pairs",
    "wished_pairs",
    "former_pairs",
    "change_pairs",
)
#: Their vectors under the default model, shipped beside them (written by ``python -m
#: worker.runtime.embeddings``) so a worker does not pay for embedding them at its first batch.
#: Used only while its digest matches the examples and its model is the one in use.
VECTORS_FILE: Final = "attributes.npz"
#: Texts whose vectors one process keeps (384 floats each: 20,000 are about 30 MB): a worker
#: serves many namespaces, and a namespace's entries are compared again at its next batch.
CACHE_TEXTS: Final = 20_000
#: Examples of a kind that a text is compared with: the mean of its nearest three, so one odd
#: example neither makes nor breaks a kind.
NEAREST_EXAMPLES: Final = 3
#: Subject pairs nearest a text that decide whether it is about someone else
#: (:meth:`Meaning.someone_else`): the pairs in its own language and wording, since the
#: direction averaged over all pairs barely reaches, e.g., a Chinese or Japanese statement
#: about a relative. Chosen on the development half of the update stories.
NEAREST_PAIRS: Final = 10
#: Deadline for embedding one merge's texts, in all (not per call): past it the batch waits
#: for the model like for any unavailable dependency.
DEFAULT_DEADLINE_SECONDS: Final = 60.0
#: Most words (characters of a word-free script) of a stretch one text has in place of
#: another's that may name a person (:meth:`Meaning.persons_apart`): "meri chhoti behen" for
#: "mera chhota bhai", "妹妹" for "弟弟"; a longer one rewrites the statement and says nothing
#: of whom it is about.
MAX_SWAPPED_WORDS: Final = 3
#: Most stretches two texts may differ in to be the same said of two people: the person and
#: the words that agree with them ("Mi hermano mayor es alto y moreno" / "Mi hermana mayor es
#: alta y morena"). Past it the text is rewritten, and no stretch is embedded: a client's
#: text can make a merge embed at most this many pairs of stretches per pair of texts.
MAX_SWAPS: Final = 3
#: Most stretches two texts may differ in to give a value for each of two settings
#: (:meth:`Meaning.settings_apart`): the setting and the value ("… to watch is tennis" / "…
#: to play is squash"), or one value of two attributes (:func:`_reworded`: the verb and a
#: word agreeing with it). A statement said again in other words differs in more places, and
#: its stretches, cut where the words happen to align, may each lean towards a setting.
MAX_SETTING_SWAPS: Final = 2
#: Longest text compared by meaning: a memory is a sentence or two; a longer text is compared
#: by its words only (its vector would average too much to say what it is about).
MAX_MEANING_CHARS: Final = 400


#: The learned merge decision (:class:`MergeModel`), shipped with the package.
MERGE_MODEL_FILE: Final = "merge_model.json"

#: The kind of statement that corrects the one before it (its own rule in the consolidator).
CORRECTION: Final = "correction"

_NUMBER: Final = regex.compile(r"\p{Nd}+(?:[.,]\p{Nd}+)?")


@dataclass(frozen=True)
class Thresholds:
    """The cut-offs of :class:`Meaning`'s answers (chosen on the development half of the
    update stories, see the module notes)."""

    #: Cosine at or above which two texts with the same numbers say the same thing.
    restate: float = 0.96
    #: Least nearness (centred cosine, mean of the nearest examples) for a text to be of a kind.
    kind_score: float = 0.22
    #: How much nearer a text must be to its kind than to the next kind.
    kind_margin: float = 0.015
    #: Kinds this near a text's nearest are kinds it may be too: an entry between two kinds
    #: may still give the attribute a clear statement gives.
    kind_spread: float = 0.03
    #: How far along the user → someone-else direction that the subject pairs nearest a text
    #: draw (:data:`NEAREST_PAIRS`) it must lie to be about someone else (0 is half-way
    #: between those pairs' two sides).
    someone_else: float = 0.06
    #: Least nearness to an attribute (:meth:`Meaning.attribute_scores`) for a text to give
    #: it *firmly* (:meth:`Meaning.firmly`), as a statement of it does, not only lean towards
    #: it as a story that touches on it does: what a correction must reach to correct
    #: (:meth:`Meaning.corrects`), and two texts that may both be about someone else to be
    #: taken for one attribute of the user's (:meth:`Meaning.both_others`). Statements of a
    #: value mostly reach it, the third-person observations an extractor writes mostly do not.
    #: Chosen on the development half and on LoCoMo.
    firm: float = 0.30
    #: Least cosine of two texts near a kind in common for a model's plan to retire one for
    #: the other (the trust check).
    replaceable: float = 0.82
    #: Least :meth:`Meaning.merge_score` (1 is the merge models' own threshold, at which the
    #: rules merge) at which the trust check lets a model's plan retire an entry for a
    #: candidate (:meth:`Meaning.vouches`): a model may see a new value where the rules are
    #: unsure. On the development half's labelled pairs it lets more updates through than 1,
    #: and next to no more pairs of distinct facts.
    vouch: float = 0.85
    #: Least cosine of two texts of one single-valued kind for one to retire the other (two
    #: favourites of different things are one kind, but far apart).
    same_attribute: float = 0.82
    #: How far along the plain → "also" direction a text must lie to add one more of its kind
    #: (:meth:`Meaning.adds`; on the development half the "also" statements, in every
    #: language, lie past 0.02, the restatements below 0.01).
    adds: float = 0.015
    #: The same for a statement of a single-valued attribute, which says it adds a value
    #: beside the held one ("I also work at Globex", "Ich wohne auch in Bonn") rather than
    #: replacing it (:meth:`Meaning.adds_one`): further out than :attr:`adds`, since a new
    #: value said with a "now" or a "so" leans that way too (the development half's updates
    #: lie at or below 0.066).
    adds_single: float = 0.07
    #: How far along the user → someone-else direction a statement of an attribute whose
    #: value is a person may lie and still be the user's own ("my girlfriend is called
    #: Priya"), short of a relative's partner ("my sister's husband is called Tom").
    own_person: float = 0.15
    #: How far apart along the user → someone-else direction two texts on its two sides must
    #: lie to be told apart as about two people (:meth:`Meaning.whose_apart`). A text that
    #: mentions someone in passing lies near the middle ("Moved to Cork to be closer to my
    #: mum"), one about another person further out ("My aunt lives in Perth").
    subjects_apart: float = 0.1
    #: The same, along the direction the subject pairs nearest each text draw
    #: (:meth:`Meaning.someone_else`'s own measure, in the text's language): two texts this
    #: far apart on it are told apart too, however near they lie on the whole direction, which
    #: barely reads some languages (Hinglish: "Meri behen Pune mein rehti hai"). It stays above
    #: a move that mentions someone in passing ("Moved to Cork to be closer to my mum", 0.14
    #: apart), which must stay one move. The merge models were refitted with it (``python -m
    #: bench updates --fit`` leaves out pairs told apart).
    subjects_apart_near: float = 0.17
    #: How far along the direction from the user's own words to observations written about a
    #: named person (:attr:`Bank.observed_pairs`) a text must lie to be such an observation
    #: (:meth:`Meaning.observation`): the user's own statements mostly lie well below it
    #: (one without a subject lies further: "Our new place is in Cambridge"), an extractor's
    #: observations of a conversation almost all past it.
    observation: float = 0.05
    #: :attr:`firm` for two observations (:meth:`Meaning.observation`): an extractor's
    #: observations tell one person's life in stories, and a story that leans towards an
    #: attribute reaches :attr:`firm` ("Jon is working on promoting his business", as the
    #: employer), while an observation of a value lies further ("Tom has gone fully vegan").
    #: Chosen on LoCoMo conversations replayed through the rules alone: the lowest of the best.
    firm_observed: float = 0.40
    #: How far along the held → wished direction (:attr:`Bank.wished_pairs`) a text must lie
    #: to give a value only wished, planned or imagined (:meth:`Meaning.wished`), which then
    #: retires no value that holds (:func:`~.plan.adds_beside`). One step above the lowest
    #: value that changes nothing on the development half, whose updates lie lower (the
    #: nearest ones ask to be called by a new name, :attr:`Kind.asked`).
    wished: float = 0.05
    #: How much further along the holding → held-once direction (:attr:`Bank.former_pairs`) a
    #: held text must lie than a new one to tell a past beside it (:meth:`Meaning.former`),
    #: which the new one then does not retire (:func:`~.plan.adds_beside`).
    former: float = 0.1
    #: How far along the plain → changed direction (:attr:`Bank.change_pairs`) a statement
    #: must lie to tell a change ("New job! I'm a receptionist now", "मेरा प्रमोशन हो गया"),
    #: which a job title or an employer said alone does not (:meth:`Meaning.told_alone`). The
    #: middle of the development halves' gap (``bench/data/work_pairs.jsonl`` and the update
    #: stories, the pairs the check reads) between the highest title or employer said alone
    #: ("I'm employed by a firm called Sparks & Co", -0.005) and the lowest that retires the
    #: held one ("Trabalho como enfermeira num centro de saúde", 0.016, the held title said
    #: again).
    change: float = 0.005
    #: How much nearer the persons than the other phrases of :attr:`Bank.person_words` a
    #: stretch of words must lie to name a person (:meth:`Meaning.names_person`): the mean
    #: cosine of the three nearest of each. The middle of the gap, on the development half of
    #: ``bench/data/person_pairs.jsonl``, between the lowest stretch naming a person
    #: ("parrain", -0.004) and the highest naming none ("rehta", -0.036).
    person: float = -0.02
    #: :attr:`person` for the one stretch two texts differ in, in a pair the merge models
    #: would merge (:meth:`Meaning.persons_swapped`): the stretch lies nearer the persons than
    #: all the bank's other phrases. It overrides a merge, so it errs towards the merge: on
    #: the development halves, the updates and new values that differ in one stretch lie at
    #: -0.022 or below, 14 of the 16 such pairs of two people above 0 (test halves: the
    #: updates at -0.003 or below, 15 of 17 pairs of two people above 0).
    swapped_person: float = 0.0
    #: How much nearer each of two texts in nearly the same words must lie to the attribute it
    #: leans towards most than to the one the other leans towards most, to give the same value
    #: of two attributes (:meth:`Meaning.attributes_apart`: "I live in Berlin" / "I work in
    #: Berlin"). Between the highest pair of one attribute said again, of the development
    #: halves (``bench/data/attribute_pairs.jsonl``, ``person_pairs``, ``value_pairs``,
    #: ``several_pairs`` and the update stories: "我住在广州" / "我家在广州", 0.010) and the
    #: lowest of two attributes taken apart there but one ("Ich komme aus Hamburg" / "Ich wohne
    #: in Hamburg", 0.023); a restatement in two languages reached 0.076 and stays twice.
    attributes: float = 0.02
    #: How much nearer the bank's wording than its persons, things and settings the words one
    #: text adds beside a person must lie to say only how or when (:meth:`Meaning.says_only_how`:
    #: "still", "现在", "abhi"), not whom ("in law", "medio", "belle", "step"). The middle of
    #: the gap on the words of the development pairs (``bench/data/person_pairs.jsonl`` and
    #: the rules' tests) between the highest that names whom ("step", 0.023) and the lowest
    #: that says how ("अभी भी", 0.036).
    how: float = 0.03
    #: How much nearer the things of :attr:`Bank.thing_words` than its wording and persons a
    #: stretch of words must lie to name a thing (:meth:`Meaning.names_thing`): the mean
    #: cosine of the three nearest of each. The middle of the gap, on the development halves,
    #: between the highest stretch of a restatement (a relative's, in
    #: ``bench/data/person_pairs.jsonl``, or the user's own, in the update stories: "吃辣" /
    #: "了", -0.003) and the lowest new value said in the held value's words
    #: (``bench/data/value_pairs.jsonl``: "銀行" / "今病院", 0.009).
    thing: float = 0.003
    #: How much nearer the settings of :attr:`Bank.setting_words` than the persons, wording and
    #: things a stretch of words must lie to name a setting (:meth:`Meaning.names_setting`;
    #: the mean cosine of the three nearest of each). The middle of the gap, on the
    #: development halves, between the highest stretch of a new value or a restatement (of
    #: the update stories and ``bench/data/value_pairs.jsonl``: "trois ans" / "lundi",
    #: -0.001) and the lowest pair of settings it takes apart (``bench/data/setting_pairs.jsonl``:
    #: "matin" / "soir", 0.007).
    setting: float = 0.003


class WordNearness(NamedTuple):
    """How near a stretch of words lies to each group of the bank's words
    (:attr:`Bank.words`): the mean cosine of its :data:`NEAREST_EXAMPLES` nearest of each."""

    persons: float
    wording: float
    things: float
    #: The wording and the things as one group (what a person is told apart from).
    others: float
    settings: float


@dataclass(frozen=True)
class Kind:
    """One kind of statement (see :data:`ATTRIBUTES_FILE`)."""

    name: str
    single: bool
    about: str
    #: The attribute the kind gives: kinds sharing one (employer, job: "work") retire each
    #: other's statements; by default the kind's own name.
    attribute: str = ""
    #: The attribute's value is another person (a partner): a statement of it may be about
    #: that person ("my girlfriend is called Priya") and still give the user's attribute.
    person: bool = False
    #: Attributes a new value of may end this kind's value, though it may as well hold beside
    #: it ("I'm a student" / "I work weekends at a pub", or "/ now I work at GSK"): the rules
    #: keep both, a model's plan may retire one for the other (:meth:`Meaning.may_replace`).
    ends_with: tuple[str, ...] = ()
    #: The value is said as a request or a wish ("call me Kate", "keep your answers short",
    #: "やっぱり「ゆっきー」って呼んでほしい"): such a statement gives the value that holds,
    #: though it lies towards wishes (:meth:`Meaning.wished`).
    asked: bool = False

    @property
    def gives(self) -> str:
        return self.attribute or self.name


@dataclass(frozen=True)
class MergeModel:
    """Whether a newer statement takes an older one's place, learned from pairs.

    A logistic model over a few readings of the two texts (:meth:`Meaning.pair_features`):
    their cosine, seen from the origin and from the kinds' examples' mean (which discounts
    what every statement shares), how near both lie to one single-valued attribute and to one
    multi-valued one, whether that attribute is what each text is mostly about, the content
    stems they share, whom they are about, and whether the newer one corrects. Two are fitted
    on the development half of the update stories (``python -m bench updates --fit`` writes
    :data:`MERGE_MODEL_FILE`): one on pairs nearer a single-valued attribute than a
    multi-valued one, the other on pairs nearer a multi-valued one that do not say they add
    one more (:meth:`Meaning.merge_score`).

    >>> model = MergeModel(("cosine",), (0.9,), (0.05,), (2.0,), 0.0, 0.5)
    >>> round(model.probability({"cosine": 0.95}), 3), round(model.probability({"cosine": 0.85}), 3)
    (0.881, 0.119)
    """

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    threshold: float

    @classmethod
    def load(cls) -> tuple[MergeModel, MergeModel]:
        """The models shipped with the package: one value, several values."""
        raw = json.loads(resources.files(__package__).joinpath(MERGE_MODEL_FILE).read_text("utf-8"))
        return cls.of(raw["one"]), cls.of(raw["several"])

    @classmethod
    def of(cls, raw: dict[str, Any]) -> MergeModel:
        """A model from its JSON form (that of :func:`dataclasses.asdict`)."""
        return cls(
            tuple(raw["features"]), tuple(raw["mean"]), tuple(raw["scale"]),
            tuple(raw["weights"]), float(raw["bias"]), float(raw["threshold"]),
        )  # fmt: skip

    def probability(self, features: dict[str, float]) -> float:
        """The model's answer for one pair's ``features``."""
        columns = zip(self.features, self.mean, self.scale, self.weights, strict=True)
        z = self.bias + sum(w * (features[name] - m) / s for name, m, s, w in columns)
        return float(1.0 / (1.0 + np.exp(-z)))


@dataclass(frozen=True)
class Bank:
    """The described kinds and their example texts, in file order."""

    kinds: tuple[Kind, ...]
    examples: tuple[str, ...]
    #: Index into ``kinds`` of each example.
    labels: tuple[int, ...]
    #: The same statements about the user and about someone else, in pairs.
    subject_pairs: tuple[tuple[str, str], ...] = ()
    #: The same statements said plainly and said as one more of their kind ("also"), in pairs.
    additive_pairs: tuple[tuple[str, str], ...] = ()
    #: The same statements in the user's own words and written about them by name, in pairs.
    observed_pairs: tuple[tuple[str, str], ...] = ()
    #: The same values said as held and said as wished, planned or imagined, in pairs.
    wished_pairs: tuple[tuple[str, str], ...] = ()
    #: The same values said as holding now and said as having held once, in pairs.
    former_pairs: tuple[tuple[str, str], ...] = ()
    #: The same values said plainly and said as a change that has just happened, in pairs.
    change_pairs: tuple[tuple[str, str], ...] = ()
    #: Phrases that name a person the user knows ("my sister", "mi suegro", "我妈妈") …
    person_words: tuple[str, ...] = ()
    #: … what two wordings of one statement differ by ("lives" / "is based", "still") …
    wording_words: tuple[str, ...] = ()
    #: … and things: places, employers, jobs, foods, pastimes (:meth:`Meaning.names_person`,
    #: :meth:`Meaning.names_thing`).
    thing_words: tuple[str, ...] = ()
    #: Phrases that name a setting: a time, a place or an occasion, a way of doing it ("in the
    #: morning", "on weekends", "to cook"; :meth:`Meaning.names_setting`).
    setting_words: tuple[str, ...] = ()

    @classmethod
    def load(cls) -> Bank:
        raw = json.loads(resources.files(__package__).joinpath(ATTRIBUTES_FILE).read_text("utf-8"))
        kinds, examples, labels = [], [], []
        for i, item in enumerate(raw["classes"]):
            attribute = item.get("attribute", "")
            person = bool(item.get("person", False))
            ends = tuple(item.get("ends_with", ()))
            kind = Kind(
                item["name"], bool(item["single"]), item["about"], attribute, person, ends,
                asked=bool(item.get("asked", False)),
            )  # fmt: skip
            kinds.append(kind)
            examples += item["examples"]
            labels += [i] * len(item["examples"])
        pairs: dict[str, Any] = {s: tuple(map(tuple, raw[s]["pairs"])) for s in PAIR_SECTIONS}
        words = raw["person_words"]
        return cls(
            tuple(kinds), tuple(examples), tuple(labels), **pairs,
            person_words=tuple(words["persons"]), wording_words=tuple(words["wording"]),
            thing_words=tuple(words["things"]),
            setting_words=tuple(raw["setting_words"]["settings"]),
        )  # fmt: skip

    @cached_property
    def attributes(self) -> dict[str, tuple[int, ...]]:
        """Each attribute the kinds give (:attr:`Kind.gives`), with the kinds giving it."""
        out: dict[str, list[int]] = {}
        for i, kind in enumerate(self.kinds):
            out.setdefault(kind.gives, []).append(i)
        return {name: tuple(kinds) for name, kinds in out.items()}

    @cached_property
    def single_attributes(self) -> np.ndarray:
        """Per attribute: whether it holds one value at a time (a correction is not one)."""
        return np.array(
            [
                name != CORRECTION and any(self.kinds[i].single for i in kinds)
                for name, kinds in self.attributes.items()
            ]
        )

    @cached_property
    def correction_attribute(self) -> int:
        """The index of the correction among :attr:`attributes`."""
        return list(self.attributes).index(CORRECTION)

    @cached_property
    def multi_attributes(self) -> np.ndarray:
        """Per attribute: whether it holds several values at once (a correction is not one)."""
        multi = ~self.single_attributes
        multi[self.correction_attribute] = False
        return multi

    @cached_property
    def person_attributes(self) -> np.ndarray:
        """Per attribute: whether its value is another person (:attr:`Kind.person`)."""
        return np.array(
            [any(self.kinds[i].person for i in kinds) for kinds in self.attributes.values()]
        )

    @property
    def words(self) -> tuple[str, ...]:
        """The phrases a stretch of words is compared with: persons, wording, things,
        settings."""
        return (*self.person_words, *self.wording_words, *self.thing_words, *self.setting_words)

    @property
    def texts(self) -> tuple[str, ...]:
        """Every text embedded for the bank: the examples, then the subject pairs' own sides,
        then their other sides, then the same of each other section of pairs in
        :data:`PAIR_SECTIONS`' order, then the :attr:`words`."""
        texts = list(self.examples)
        for section in PAIR_SECTIONS:
            pairs: tuple[tuple[str, str], ...] = getattr(self, section)
            texts += [a for a, _ in pairs] + [b for _, b in pairs]
        return (*texts, *self.words)


class CachingEmbeddings(Embeddings):
    """``inner`` with its document vectors kept per text (an LRU of :data:`CACHE_TEXTS`).

    Shared by the consolidation (which embeds every candidate before merging) and the search
    index (which stores entry vectors after the commit), so a text is embedded once.
    """

    def __init__(self, inner: Embeddings, *, capacity: int = CACHE_TEXTS) -> None:
        self.inner = inner
        self.capacity = capacity
        #: float32 arrays (1.5 KB for 384 values), not lists of Python floats (about 12 KB).
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def cached(self, text: str) -> np.ndarray | None:
        with self._lock:
            vector = self._cache.get(text)
            if vector is not None:
                self._cache.move_to_end(text)
            return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = list(dict.fromkeys(t for t in texts if self.cached(t) is None))
        fresh = self.inner.embed_documents(missing) if missing else []
        found = {t: np.asarray(v, dtype=np.float32) for t, v in zip(missing, fresh, strict=True)}
        with self._lock:
            for text, vector in found.items():
                self._cache[text] = vector
                self._cache.move_to_end(text)
            while len(self._cache) > self.capacity:
                self._cache.popitem(last=False)
        return [(found[t] if t in found else self._vector_of(t)).tolist() for t in texts]

    def _vector_of(self, text: str) -> np.ndarray:
        vector = self.cached(text)
        if vector is None:  # evicted between the two looks: embed it again
            vector = np.asarray(self.inner.embed_documents([text])[0], dtype=np.float32)
        return vector

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)

    def __getattr__(self, name: str) -> object:  # model_name, dimension of the inner model
        return getattr(self.inner, name)


class Meaning:
    """Vectors of texts and what they say about two texts (see the module notes)."""

    def __init__(
        self,
        embeddings: Embeddings,
        *,
        thresholds: Thresholds | None = None,
        deadline_seconds: float = DEFAULT_DEADLINE_SECONDS,
        bank: Bank | None = None,
    ) -> None:
        self.embeddings = (
            embeddings
            if isinstance(embeddings, CachingEmbeddings)
            else CachingEmbeddings(embeddings)
        )
        self.thresholds = thresholds or Thresholds()
        self.deadline_seconds = deadline_seconds
        self.bank = bank or Bank.load()
        #: Unit vectors of the texts prepared, oldest first (at most :data:`CACHE_TEXTS`).
        self._unit: dict[str, np.ndarray] = {}
        #: The kinds near each text (see :meth:`kinds_near`), dropped with its vector.
        self._kinds: dict[str, tuple[Kind, ...]] = {}
        #: Whether a text's nearest kind is clear of the next by the margin.
        self._clear: dict[str, bool] = {}
        #: Each text's nearness to each kind and to each attribute (see :meth:`_scores_of`).
        self._scores: dict[str, tuple[np.ndarray, np.ndarray] | None] = {}
        #: How far each text lies towards someone else (see :meth:`_local_side`).
        self._local_sides: dict[str, float | None] = {}
        #: The learned merge decisions (:class:`MergeModel`): one value, several values.
        self.merge_models = MergeModel.load()

    # --- vectors ---------------------------------------------------------------------------
    def prepare(self, texts: Iterable[str]) -> None:
        """Embed the ``texts`` not known yet, in one call under the deadline; raise
        :class:`ModelUnavailable` when the model fails or runs past it (the batch waits)."""
        wanted = [t for t in dict.fromkeys(texts) if t not in self._unit and _comparable(t)]
        if not wanted:
            return
        for text, vector in zip(wanted, self._embed(wanted, "embedding"), strict=True):
            if vector is not None:  # a vector that is not finite or is zero says nothing
                self._unit[text] = vector / np.linalg.norm(vector)
                self._forget_readings(text)  # read without a vector if asked before
        for old in list(self._unit)[: max(0, len(self._unit) - CACHE_TEXTS)]:
            del self._unit[old]
            self._forget_readings(old)

    def _forget_readings(self, text: str) -> None:
        """Drop what was read of ``text`` (its kinds, scores, side): read again from its
        vector when next asked."""
        self._kinds.pop(text, None)
        self._clear.pop(text, None)
        self._scores.pop(text, None)
        self._local_sides.pop(text, None)

    def _embed(self, texts: Sequence[str], what: str) -> list[np.ndarray | None]:
        """Checked vectors of ``texts``, all within the deadline (one for the whole call);
        :class:`ModelUnavailable` when the model does not answer for every one of them."""
        deadline = time.monotonic() + self.deadline_seconds
        return embed_within(self.embeddings, texts, deadline, label=what, required=True)

    def vector(self, text: str) -> np.ndarray | None:
        """The unit vector of a prepared ``text`` (None when it was not prepared or is too
        long to compare by meaning)."""
        return self._unit.get(text)

    def similarity(self, a: str, b: str) -> float | None:
        """Cosine of two prepared texts; None when either has no vector."""
        va, vb = self.vector(a), self.vector(b)
        if va is None or vb is None:
            return None
        return float(va @ vb)

    def nearest(self, text: str, others: Sequence[str], k: int) -> list[int]:
        """Indices of the ``k`` texts of ``others`` nearest ``text`` (those without a vector
        last, in order), nearest first."""
        v = self.vector(text)
        rows = [(i, self.vector(o)) for i, o in enumerate(others)]
        known = [(i, u) for i, u in rows if u is not None]
        if v is None or not known:
            return list(range(min(k, len(others))))
        scores = np.stack([u for _, u in known]) @ v
        order = [known[j][0] for j in np.argsort(-scores, kind="stable")]
        rest = [i for i, u in rows if u is None]
        return (order + rest)[:k]

    # --- what two texts are ----------------------------------------------------------------
    def restates(self, a: str, b: str) -> bool:
        """``a`` says what ``b`` says in other words: nearly the same vector, same numbers,
        not one about the user and the other about someone else (:meth:`whose_apart`;
        "I have two sons" and "My brother has two sons" lie that near), nor the same of two
        people nor two values in the same words (:meth:`words_apart`)."""
        cosine = self.similarity(a, b)
        if cosine is None or cosine < self.thresholds.restate or _numbers(a) != _numbers(b):
            return False
        return not self._told_apart(a, b) and not self.words_apart(a, b)

    def words_apart(self, a: str, b: str) -> bool:
        """Two texts in nearly the same words say the same of two people
        (:meth:`persons_apart`: "Mon frère habite à Lyon" / "Ma sœur habite à Lyon"), give
        two values (:meth:`values_apart`: "Le week-end, je travaille dans un bar" / "…
        maintenant dans un restaurant") or the same value of two attributes
        (:meth:`attributes_apart`: "I live in Berlin" / "I work in Berlin"), or one tells a
        past the other does not (:meth:`former`, either way: "I used to live in Paris" / "I
        live in Paris"): they lie nearer than most restatements, yet neither says the other
        again."""
        return (
            self.persons_apart(a, b)
            or self.values_apart(a, b)
            or self.attributes_apart(a, b)
            or self.former(a, b)
            or self.former(b, a)
        )

    def attributes_apart(self, a: str, b: str) -> bool:
        """Two prepared texts that differ only where one has a few words in place of the
        other's (:func:`_reworded`) lean towards two attributes, each nearer its own than the
        other's by more than :attr:`Thresholds.attributes`: the same value of two attributes
        ("I live in Berlin" / "I work in Berlin", "Nací en Sevilla" / "Vivo en Sevilla"),
        which lie nearer than most restatements. Neither restates nor replaces the other.

        It reads the whole texts, not the stretches: "live" and "work" alone say little, the
        sentence each makes says where one lives or works."""
        if not _reworded(a, b):
            return False
        first, second = self.attribute_scores(a), self.attribute_scores(b)
        if first is None or second is None:
            return False
        own, other = int(np.argmax(first)), int(np.argmax(second))
        if own == other:
            return False
        margin = min(first[own] - first[other], second[other] - second[own])
        return bool(margin > self.thresholds.attributes)

    def persons_apart(self, a: str, b: str) -> bool:
        """Where ``b``'s words stand in place of ``a``'s, both name a person
        (:meth:`names_person`): the same said of two people, never one fact said again.

        It errs towards two people: a person named in other words ("mi mamá" / "mi madre") is
        kept twice rather than one relative's fact lost. The stretches are embedded (a few
        words, only for two texts already taken for one). A few words added beside a person
        make another person ("my father" / "my father-in-law", "mi hermano" / "mi medio
        hermano", "my brother" / "my brother's wife"; :func:`_widened`), unless they only say
        how or when ("my father still", "弟弟现在": :meth:`says_only_how`)."""
        swaps, widened = _swapped(a, b), _widened(a, b)
        if widened is not None:  # every stretch embedded in one call
            added, beside = widened
            self.prepare([added, *(phrase for pair in [*swaps, *beside] for phrase in pair)])
            if not self.says_only_how(added):
                swaps += beside
        return any(self.names_person(x) and self.names_person(y) for x, y in self._ready(swaps))

    def says_only_how(self, phrase: str) -> bool:
        """A prepared ``phrase`` lies nearer the bank's wording ("now", "also", "still" …)
        than its persons, things and settings by more than :attr:`Thresholds.how`: it names
        no one and nothing."""
        near = self._nearest_words(phrase)
        if near is None:
            return False
        return near.wording - max(near.persons, near.things, near.settings) > self.thresholds.how

    def values_apart(self, a: str, b: str) -> bool:
        """Where ``b``'s words stand in place of ``a``'s, either side names a thing
        (:meth:`names_thing`: a place, an employer, a job, a food …): a new value said in the
        held value's words, never the held one said again. Two wordings of one statement
        differ by verbs, particles and adverbs ("I've got" / "I own", "住" / "家").

        It errs towards two values: a thing named in other words ("doctor" / "physician")
        is kept twice, or retires the held one, rather than the new value lost. The
        stretches are those :meth:`persons_apart` embeds."""
        return any(
            self.names_thing(x) or self.names_thing(y) for x, y in self._prepared_swaps(a, b)
        )

    def settings_apart(self, a: str, b: str) -> bool:
        """Where ``b``'s words stand in place of ``a``'s, both name a setting
        (:meth:`names_setting`: "in the morning" / "in the evening", "to watch" / "to play"):
        a value for each of two settings, the one not replacing the other ("My favourite sport
        to watch is tennis" / "My favourite sport to play is squash"). The rules ask it of a
        pair they would merge, not of a restatement: a job said again in other words ("病院で
        働いています" / "病院に勤めています") differs in words that lean towards "at work". The
        stretches are those :meth:`persons_apart` embeds, of two texts that differ in at most
        :data:`MAX_SETTING_SWAPS` places."""
        swaps = _swapped(a, b)
        if len(swaps) > MAX_SETTING_SWAPS:
            return False
        return any(self.names_setting(x) and self.names_setting(y) for x, y in self._ready(swaps))

    def two_people(self, old: str, new: str) -> bool:
        """Two prepared texts say the same of two people (:meth:`persons_swapped`): neither
        the rules nor a model's plan retires the one for the other. Unless the attribute
        they give has a person for its value (:meth:`gives_a_person`) and neither is clearly
        about someone else (:meth:`someone_else`): then the swapped words give the user's
        partner or status ("Estoy casado." / "Me he divorciado."), while "Mein Bruder ist
        verheiratet" / "Meine Schwester ist verheiratet" are two people's marriages."""
        if not self.persons_swapped(old, new):
            return False
        others = self.someone_else(old) or self.someone_else(new)
        return others or not self.gives_a_person(old, new)

    def persons_swapped(self, a: str, b: str) -> bool:
        """The two texts differ in one stretch of words only, and on both sides it names a
        person clearly (:attr:`Thresholds.swapped_person`): the same said of two people ("My
        friend works at Hooli" / "My sister works at Hooli", "我儿子今年六岁" / "我侄子今年六岁"),
        which the merge models, reading whole texts, may still take for one fact. The rules
        ask it of a pair they would merge (:meth:`persons_apart` asks it, more loosely, of a
        restatement)."""
        only = _only_swap(a, b)
        if only is None:
            return False
        return all(self._person_margin(phrase) > self.thresholds.swapped_person
                   for phrase in self._ready([only])[0])  # fmt: skip

    def _person_margin(self, phrase: str) -> float:
        """How much nearer the bank's persons than its other phrases a prepared ``phrase``
        lies (as :meth:`names_person` measures; -1 without a vector)."""
        near = self._nearest_words(phrase)
        return -1.0 if near is None else near.persons - near.others

    def _prepared_swaps(self, a: str, b: str) -> list[tuple[str, str]]:
        """The stretches of words ``b`` has in place of ``a``'s (:func:`_swapped`), embedded."""
        return self._ready(_swapped(a, b))

    def _ready(self, swaps: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """``swaps``, their stretches embedded (:meth:`prepare`)."""
        self.prepare([phrase for pair in swaps for phrase in pair])
        return swaps

    def names_person(self, phrase: str) -> bool:
        """A prepared ``phrase`` lies nearer the bank's persons than its wording and things
        (:attr:`Bank.person_words`; the mean cosine of the :data:`NEAREST_EXAMPLES` nearest of
        each), by more than :attr:`Thresholds.person`."""
        return self._person_margin(phrase) > self.thresholds.person

    def names_thing(self, phrase: str) -> bool:
        """A prepared ``phrase`` lies nearer the bank's things than its wording and persons
        (:attr:`Bank.thing_words`, as :meth:`names_person` measures), by more than
        :attr:`Thresholds.thing`."""
        near = self._nearest_words(phrase)
        if near is None:
            return False
        return near.things - max(near.persons, near.wording) > self.thresholds.thing

    def names_setting(self, phrase: str) -> bool:
        """A prepared ``phrase`` lies nearer the bank's settings than its persons, wording and
        things (:attr:`Bank.setting_words`, as :meth:`names_person` measures), by more than
        :attr:`Thresholds.setting`."""
        near = self._nearest_words(phrase)
        if near is None:
            return False
        nearest_other = max(near.persons, near.wording, near.things)
        return near.settings - nearest_other > self.thresholds.setting

    def _nearest_words(self, phrase: str) -> WordNearness | None:
        """How near a prepared ``phrase`` lies to each group of the bank's words; None without
        a vector."""
        v = self.vector(phrase)
        if v is None:
            return None
        return WordNearness(
            *(float(np.sort(rows @ v)[-NEAREST_EXAMPLES:].mean()) for rows in self._word_vectors)
        )

    @cached_property
    def _word_vectors(self) -> tuple[np.ndarray, ...]:
        """The unit vectors of each group of :class:`WordNearness`, in its order (the bank's
        last texts, :attr:`Bank.texts`)."""
        bank = self.bank
        rows = _unit_rows(self._bank_vectors[len(bank.texts) - len(bank.words) :])
        persons = len(bank.person_words)
        wording = persons + len(bank.wording_words)
        things = wording + len(bank.thing_words)
        return (rows[:persons], rows[persons:wording], rows[wording:things],
                rows[persons:things], rows[things:])  # fmt: skip

    def kind(self, text: str) -> Kind | None:
        """The kind of statement ``text`` is (None when it is near none clearly enough, or has
        no vector)."""
        near = self.kinds_near(text)
        return near[0] if len(near) == 1 or (near and self._clear[text]) else None

    def kinds_near(self, text: str) -> tuple[Kind, ...]:
        """The kinds ``text`` is near enough to be, nearest first: one when it is clearly of
        a kind; several when it lies between them ("I work at Henkel": employer or job)."""
        if text not in self._kinds:
            scores = self._scores_of(text)
            found = None if scores is None else scores[0]
            self._kinds[text], self._clear[text] = self._classify(found)
        return self._kinds[text]

    def corrects(self, text: str) -> bool:
        """A prepared ``text`` is a correction of something said before ("sorry, I meant 43"):
        clearly of the correction kind and :meth:`firmly` so, as firmly as two observations
        must be (:meth:`_firm_for`) when it is an :meth:`observation`: an extractor writes the
        corrected fact, not the user's "sorry, I meant", and its stories of a setback lean
        towards the corrections ("Calvin had a car accident, but no one was hurt")."""
        kind = self.kind(text)
        return (
            kind is not None
            and kind.name == CORRECTION
            and self.firmly(CORRECTION, text, floor=self._firm_for(text, text))
        )

    def firmly(self, attribute: str, *texts: str, floor: float | None = None) -> bool:
        """Every prepared text lies as near ``attribute`` (a :attr:`Kind.gives`) as a
        statement of it does, not only leaning towards it as a story that touches on it does
        (:attr:`Thresholds.firm`, or ``floor`` when given)."""
        index = list(self.bank.attributes).index(attribute)
        least = self.thresholds.firm if floor is None else floor
        for text in texts:
            scores = self.attribute_scores(text)
            if scores is None or scores[index] < least:
                return False
        return True

    def same_attribute(self, a: str, b: str) -> bool:
        """``a`` and ``b`` give a value of the same single-valued attribute of the user (each
        may retire the other, the newer winning)."""
        shared = _shared_kind(self, a, b)
        if shared is None or not shared.single:
            return False
        if self.someone_else(a) or self.someone_else(b):
            return False  # whose attribute it is cannot be told apart: both stay
        cosine = self.similarity(a, b)
        return cosine is not None and cosine >= self.thresholds.same_attribute

    def someone_else(self, text: str) -> bool:
        """``text`` is about someone other than the user ("my brother is 30", "mi madre vive
        en Lima"): it lies far enough along the direction from the user's statements to the
        same statements about another person, as the :data:`NEAREST_PAIRS` subject pairs
        nearest it draw that direction (:attr:`Bank.subject_pairs`; :meth:`_local_side`)."""
        side = self._local_side(text)
        return side is not None and side > self.thresholds.someone_else

    def _local_side(self, text: str) -> float | None:
        """How far a prepared ``text`` lies past the middle of the user → someone-else
        direction of the :data:`NEAREST_PAIRS` subject pairs nearest it (either side's
        cosine); None without a vector. The whole direction (:meth:`_side`) places two texts
        against each other and is what the merge models read; this one answers for one text
        in its own language."""
        if text not in self._local_sides:
            v = self.vector(text)
            self._local_sides[text] = None if v is None else _side_along(self._subject_sides, v)
        return self._local_sides[text]

    def _side(self, text: str) -> float | None:
        """How far a prepared ``text`` lies past the middle of the user → someone-else
        direction (None without a vector)."""
        return self._past_middle(text, self._subject)

    def _past_middle(self, text: str, line: tuple[np.ndarray, float]) -> float | None:
        """How far a prepared ``text`` lies past the middle of ``line`` (a direction and its
        middle, :meth:`_direction`); None without a vector."""
        v = self.vector(text)
        if v is None:
            return None
        direction, middle = line
        return float(v @ direction) - middle

    def about_the_same(self, a: str, b: str) -> bool:
        """One may replace the other: a restatement or the same single-valued attribute."""
        return self.restates(a, b) or self.same_attribute(a, b)

    def may_replace(self, old: str, new: str) -> bool:
        """What a plan from outside (a model's) may do: retire ``old`` for ``new`` when they
        are about the same thing, a looser test than the rules' own decision: a restatement,
        or two statements near a kind in common, or of kinds one of which may end the other
        (:attr:`Kind.ends_with`: studies, then work), and near each other (a model may see a
        new value where the rules are unsure), never two of unrelated kinds, nor one about
        the user and the other about someone else (:meth:`whose_apart`): "Mein Bruder wohnt in
        Hamburg" never ends "Ich wohne in Hamburg", whoever's plan says so, nor what
        :meth:`never_retires` names (two people; one value of two attributes: "I live in
        Berlin" never ends "I work in Berlin")."""
        if self._told_apart(old, new) or self.never_retires(old, new):
            return False
        if self.about_the_same(old, new):
            return True
        cosine = self.similarity(old, new)
        if cosine is None or cosine < self.thresholds.replaceable:
            return False
        return not _reach(self.kinds_near(old)).isdisjoint(_reach(self.kinds_near(new)))

    # --- the kinds ---------------------------------------------------------------------------
    @cached_property
    def _bank_vectors(self) -> np.ndarray:
        """The vectors of the examples, then of the subject pairs (own sides, other sides):
        the shipped ones when they are this model's for these texts, else embedded now."""
        shipped = self._shipped_bank
        if shipped is not None:
            return shipped
        return self.embed_checked(self.bank.texts, "embedding the kinds' examples")

    @cached_property
    def _shipped_bank(self) -> np.ndarray | None:
        """The vectors of the examples and subject pairs shipped for this model, if any."""
        return shipped_vectors(VECTORS_FILE, self.model_name, self.bank.texts)

    def embed_checked(self, texts: Sequence[str], what: str) -> np.ndarray:
        """The vectors of described examples (``texts``), all usable, within the deadline;
        :class:`ModelUnavailable` otherwise."""
        vectors = self._embed(texts, what)
        if any(v is None for v in vectors):
            raise ModelUnavailable(f"{what}: the embedding model gave an unusable vector")
        return np.asarray(vectors, dtype=np.float64)

    @property
    def example_vectors(self) -> np.ndarray:
        """The vectors of the kinds' examples (statements memories ordinarily hold)."""
        return self._bank_vectors[: len(self.bank.examples)]

    @property
    def model_name(self) -> str | None:
        """The spec of the model (``local:<name>``), when it says one."""
        name = getattr(self.embeddings.inner, "model_name", None)
        return name if isinstance(name, str) else None

    @cached_property
    def _examples(self) -> tuple[np.ndarray, np.ndarray]:
        """The examples' vectors, centred on their mean and normalised, and that mean."""
        matrix = self._bank_vectors[: len(self.bank.examples)].copy()
        mean = matrix.mean(axis=0)
        centred = matrix - mean
        centred /= np.linalg.norm(centred, axis=1, keepdims=True)
        return centred, mean

    @cached_property
    def _subject(self) -> tuple[np.ndarray, float]:
        """The unit direction from statements about the user to the same statements about
        someone else, and the point half-way between the two sides along it."""
        return _direction_of(*self._subject_sides)

    @cached_property
    def _subject_sides(self) -> tuple[np.ndarray, np.ndarray]:
        """The unit vectors of the subject pairs' own sides and of their other sides."""
        start, pairs = len(self.bank.examples), len(self.bank.subject_pairs)
        return _unit_rows(self._bank_vectors[start : start + pairs]), _unit_rows(
            self._bank_vectors[start + pairs : start + 2 * pairs]
        )

    @cached_property
    def _additive(self) -> tuple[np.ndarray, float]:
        """As :attr:`_subject`, from plain statements to the same said as one more ("also")."""
        return self._section_direction("additive_pairs")

    @cached_property
    def _observed(self) -> tuple[np.ndarray, float]:
        """As :attr:`_subject`, from the user's own words to the same written about by name."""
        return self._section_direction("observed_pairs")

    @cached_property
    def _wished(self) -> tuple[np.ndarray, float]:
        """As :attr:`_subject`, from values held to the same wished, planned or imagined."""
        return self._section_direction("wished_pairs")

    @cached_property
    def _former(self) -> tuple[np.ndarray, float]:
        """As :attr:`_subject`, from values holding now to the same that held once."""
        return self._section_direction("former_pairs")

    @cached_property
    def _change(self) -> tuple[np.ndarray, float]:
        """As :attr:`_subject`, from values said plainly to the same told as a change."""
        return self._section_direction("change_pairs")

    def _section_direction(self, section: str) -> tuple[np.ndarray, float]:
        """:meth:`_direction` of one section of pairs of :data:`PAIR_SECTIONS` (its texts
        follow the examples and the sections before it, :attr:`Bank.texts`)."""
        before = PAIR_SECTIONS[: PAIR_SECTIONS.index(section)]
        start = len(self.bank.examples) + 2 * sum(len(getattr(self.bank, b)) for b in before)
        return self._direction(start, len(getattr(self.bank, section)))

    def _direction(self, start: int, pairs: int) -> tuple[np.ndarray, float]:
        """The direction of ``pairs`` pairs of bank texts from ``start`` (their first sides,
        then their second sides) and the point half-way between the sides along it."""
        matrix = _unit_rows(self._bank_vectors[start : start + 2 * pairs])
        return _direction_of(matrix[:pairs], matrix[pairs:])

    def adds(self, text: str) -> float | None:
        """How far ``text`` lies along the direction towards statements that add one more of
        their kind ("I'm allergic to penicillin as well", "我也喜欢听摇滚乐"), past half-way;
        None without a vector."""
        return self._past_middle(text, self._additive)

    def observation(self, text: str) -> bool:
        """A prepared ``text`` is written about someone by name, in the third person, as an
        extractor writes its observations of a conversation ("Jon is working on promoting
        his business"), not in the user's own words: it lies past
        :attr:`Thresholds.observation` along the direction of :attr:`Bank.observed_pairs`.
        Unknown (no vector) counts as an observation: the rule it lifts is kept."""
        along = self._past_middle(text, self._observed)
        return along is None or along > self.thresholds.observation

    def wished(self, text: str) -> bool:
        """A prepared ``text`` gives a value the user wishes, plans or imagines, not one that
        holds now ("Ich würde gern bei Porsche arbeiten"): it lies past
        :attr:`Thresholds.wished` along the direction of :attr:`Bank.wished_pairs`. Unknown
        (no vector) is not, nor is one whose kinds (:meth:`kinds_near`) all give a value asked
        for (:attr:`Kind.asked`: "please call me Kate")."""
        along = self._past_middle(text, self._wished)
        if along is None:
            return False
        near = self.kinds_near(text)
        if near and all(kind.asked for kind in near):
            return False  # "please call me Kate" is the name that holds, not a wish
        return along > self.thresholds.wished

    def former(self, old: str, new: str) -> bool:
        """A prepared ``old`` tells a past beside ``new``, a value that held once ("I used to
        work at Siemens") and stays true when the value changes: ``old`` lies further than
        ``new`` along the direction of :attr:`Bank.former_pairs`, by more than
        :attr:`Thresholds.former`. Not the other way round: a change told in the past tense ("I
        left Google and joined Stripe") lies as far towards the past as a past told for itself.
        Unknown (either without a vector) is not."""
        a, b = self.vector(old), self.vector(new)
        if a is None or b is None:
            return False
        direction, _ = self._former
        return float((a - b) @ direction) > self.thresholds.former

    def changes(self, text: str) -> float | None:
        """How far a prepared ``text`` lies along the plain → changed direction
        (:attr:`Bank.change_pairs`), past half-way: a statement that tells a change ("I've just
        started at Nestlé") lies past 0, one that only says what holds below; None without a
        vector."""
        return self._past_middle(text, self._change)

    def told_alone(self, old: str, new: str) -> bool:
        """Two prepared texts lie nearest two kinds that give one attribute (a job title and
        an employer are both work) and ``new`` tells no change (:meth:`changes` below
        :attr:`Thresholds.change`): each says its own side of the attribute, and both hold
        ("I'm an electrician" / "I'm employed by a firm called Sparks & Co"). A change of job
        tells itself ("I've left nursing; I'm now a teacher at Hillside Primary", "My new
        employer is Ocado") and retires the held one."""
        first_old, first_new = self._first_kind(old), self._first_kind(new)
        if first_old is None or first_new is None or first_old == first_new:
            return False
        if first_old.gives != first_new.gives:
            return False
        change = self.changes(new)
        return change is not None and change < self.thresholds.change

    def _first_kind(self, text: str) -> Kind | None:
        """The kind a prepared ``text`` lies nearest, when it is near one at all."""
        near = self.kinds_near(text)
        return near[0] if near else None

    def adds_one(self, text: str) -> bool:
        """A prepared ``text`` says it adds one more value clearly enough to hold even of a
        single-valued attribute (:meth:`adds` past :attr:`Thresholds.adds_single`, further
        out than :meth:`another_of_several` asks): "I also work at Globex" holds beside "I
        work at Acme"."""
        adds = self.adds(text)
        return adds is not None and adds > self.thresholds.adds_single

    def kinds_known(self) -> bool:
        """The kinds' examples have vectors without asking the model now: shipped for this
        model, or embedded already (by a merge). Search asks this first, so a query never
        waits for a model to embed the examples."""
        return "_bank_vectors" in self.__dict__ or self._shipped_bank is not None

    def _nearness(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Nearness of each row of ``vectors`` to each kind (the mean centred cosine of its
        :data:`NEAREST_EXAMPLES` nearest examples) and to each attribute (that of its nearest
        kind giving it): a kinds x rows and an attributes x rows array. A row at the
        examples' mean is near nothing (zeros)."""
        examples, mean = self._examples
        centred = np.asarray(vectors, np.float64) - mean
        norms = np.linalg.norm(centred, axis=1, keepdims=True)
        scores = examples @ (centred / np.maximum(norms, 1e-12)).T
        kinds = np.stack([
            np.sort(scores[rows], axis=0)[-NEAREST_EXAMPLES:].mean(axis=0)
            for rows in self._kind_rows
        ])  # fmt: skip
        attributes = np.stack([kinds[list(i)].max(axis=0) for i in self.bank.attributes.values()])
        return kinds, attributes

    def profiles(self, vectors: np.ndarray) -> np.ndarray:
        """What each row of ``vectors`` (any of the model's vectors: a stored entry's, a
        query's) is about: its nearness to each attribute (:meth:`attribute_scores`), centred
        and of length one, one row each. Two profiles' dot product says how alike what two
        texts are about is, whatever their words ("What pet do I have?" and "I've got a
        tabby called Miso" both lie near the pets): search re-orders its first hits by it.
        A row at the examples' mean gets a profile of zeros."""
        found = self._nearness(vectors)[1].T
        found -= found.mean(axis=1, keepdims=True)
        length = np.linalg.norm(found, axis=1, keepdims=True)
        profiles: np.ndarray = np.where(length > 0, found / np.maximum(length, 1e-12), 0.0)
        return profiles

    @cached_property
    def _kind_rows(self) -> list[np.ndarray]:
        """The rows of :attr:`_examples` of each kind, in the bank's order of kinds."""
        labels = np.asarray(self.bank.labels)
        return [np.flatnonzero(labels == i) for i in range(len(self.bank.kinds))]

    def _scores_of(self, text: str) -> tuple[np.ndarray, np.ndarray] | None:
        """A prepared ``text``'s nearness to each kind and to each attribute
        (:meth:`_nearness`), computed once; None without a vector or at the examples' mean."""
        if text not in self._scores:
            v = self.vector(text)
            at_mean = v is None or not np.linalg.norm(v - self._examples[1])
            if at_mean:
                self._scores[text] = None
            else:
                kinds, attributes = self._nearness(np.asarray(v)[None, :])
                self._scores[text] = (kinds[:, 0], attributes[:, 0])
        return self._scores[text]

    def _classify(self, found: np.ndarray | None) -> tuple[tuple[Kind, ...], bool]:
        if found is None:
            return (), False
        per_kind = found.tolist()
        order = np.argsort(per_kind)[::-1]
        best, second = per_kind[order[0]], per_kind[order[1]]
        t = self.thresholds
        if best < t.kind_score:
            return (), False
        near = tuple(
            self.bank.kinds[int(i)] for i in order if per_kind[int(i)] >= best - t.kind_spread
        )
        return near, best - second >= t.kind_margin

    # --- one learned answer: may the newer statement take the older one's place? -------------
    def attribute_scores(self, text: str) -> np.ndarray | None:
        """Nearness of a prepared ``text`` to each attribute (:attr:`Bank.attributes`): that
        of its nearest kind giving it (None without a vector)."""
        scores = self._scores_of(text)
        return None if scores is None else scores[1]

    def pair_features(self, old: str, new: str) -> dict[str, float] | None:
        """What the merge model reads of two prepared texts (see :class:`MergeModel`); None
        when either has no vector."""
        cosine = self.similarity(old, new)
        a, b = self.attribute_scores(old), self.attribute_scores(new)
        side_a, side_b = self._side(old), self._side(new)
        if cosine is None or a is None or b is None or side_a is None or side_b is None:
            return None
        shared = np.minimum(a, b)
        best_single = _best_single(self.bank, a, b)
        stems_a, stems_b = content_stems(old), content_stems(new)
        correction = self.bank.correction_attribute
        return {
            "cosine": cosine,
            "centred": self._centred_cosine(old, new),
            "single": float(shared[best_single]),
            "multi": float(shared[self.bank.multi_attributes].max()),
            "old_focus": float(a[best_single] - a.max()),
            "new_focus": float(b[best_single] - b.max()),
            "stems": len(stems_a & stems_b) / max(1, len(stems_a | stems_b)),
            "someone_else": max(side_a, side_b),
            "subjects_apart": abs(side_a - side_b),
            "correction": float(b[correction]),
        }

    def _centred_cosine(self, old: str, new: str) -> float:
        """Cosine of two prepared texts seen from the kinds' examples' mean, not the origin:
        it tells a merge from two facts better than the plain cosine."""
        mean = self._examples[1]
        a, b = self._unit[old] - mean, self._unit[new] - mean
        return float(a @ b / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12))

    def merge_score(self, old: str, new: str) -> float | None:
        """How surely ``new`` takes ``old``'s place: the probability of the merge model that
        answers for them (:attr:`merge_models`: one-value for two statements nearer a
        single-valued attribute, several-values otherwise) over its threshold, so that 1 or
        more merges.

        None when either text has no vector. 0 when one is about the user and the other about
        someone else (:meth:`whose_apart`), and, of a multi-valued attribute, when the newer
        is not the older restated (:meth:`another_of_several`): both stay."""
        features = self.pair_features(old, new)
        if features is None:
            return None
        if self.whose_apart(old, new, features):
            return 0.0
        one, several = self.merge_models
        if features["multi"] <= features["single"]:
            return one.probability(features) / one.threshold
        if self.another_of_several(old, new):
            return 0.0
        return several.probability(features) / several.threshold

    def both_others(self, old: str, new: str) -> bool:
        """Both prepared texts may be about someone other than the user, and the kinds do not
        say they give one attribute of the user's, so the rules keep both (whether they are
        about one person cannot be told; :meth:`same_attribute` asks the same of one text).

        That is: both lie past the middle of the user → someone-else direction
        (:meth:`someone_else` asks more of one text alone); they are not both clearly and
        firmly of one single-valued attribute (:meth:`_firmly_one`) unless both are someone
        else's ("My sister's favourite colour is green" / "My friend's favourite film is
        Heat" may be two people); what they give in common is not the user's partner
        (:meth:`_own_persons`); and the newer, in the user's own words, does not say the older
        again (:meth:`_said_again`: who "we" are is then no question). Observations an
        extractor writes about the user in the third person ("Dana ran a charity race") lie
        here too. A model's plan may still merge them, its trust check asking the merge models
        alone (:func:`~.plan.vouched`)."""
        sides = [self._side(t) for t in (old, new)]
        if not all(side is not None and side > 0 for side in sides):
            return False
        if not (self.someone_else(old) and self.someone_else(new)) and self._firmly_one(old, new):
            return False  # both clearly and firmly give one single-valued attribute: the user's
        features = self.pair_features(old, new)
        if features is None or self._own_persons(old, new, features):
            return False
        return not self._said_again(old, new, features)

    def partner_stays(self, old: str, new: str) -> bool:
        """``old`` clearly gives an attribute whose value is a person (the user's partner),
        the attribute two prepared texts are both nearest, and ``new`` is not clearly of a
        kind giving it: a statement the user makes with "we" ("Tenemos dos hijos") leans
        towards the partner as much as towards what it is about, and never takes the
        partner's place; a change of partner or status is clearly of the kind ("Me he
        divorciado"). The rules ask it; the trust check on a model's plan does not (it refused
        correct changes of partner that a perfect model proposed)."""
        gives = self._person_attribute(old, new)
        held, clear = self.kind(old), self.kind(new)
        if gives is None or held is None or held.gives != gives:
            return False
        return clear is None or clear.gives != gives

    def stories_apart(self, old: str, new: str) -> bool:
        """Both prepared texts are observations an extractor wrote (:meth:`observation`) and
        the kinds do not take them for one single-valued attribute, clearly and firmly
        (:attr:`Thresholds.firm_observed`): the merge models, learned from the user's own
        words, do not answer for them, and the rules keep both. An extractor tells one
        person's life in stories, each leaning towards several kinds, which the merge models
        took for one fact said again or for a new value ("Jon believes taking risks is
        essential for success" / "Jon is determined to make his business successful")."""
        if not (self.observation(old) and self.observation(new)):
            return False
        return not self._firmly_one(old, new)

    def _firmly_one(self, old: str, new: str) -> bool:
        """Both prepared texts are clearly of kinds giving one single-valued attribute and
        lie firmly near it (:meth:`firmly`, at :meth:`_firm_for`)."""
        clear_old, clear_new = self.kind(old), self.kind(new)
        return (
            clear_old is not None
            and clear_new is not None
            and clear_old.single
            and clear_old.gives == clear_new.gives
            and self.firmly(clear_old.gives, old, new, floor=self._firm_for(old, new))
        )

    def _firm_for(self, old: str, new: str) -> float:
        """How near their attribute two texts must lie for the kinds to take them for one
        attribute of the user's (:meth:`both_others`): :attr:`Thresholds.firm_observed` for
        two observations (:meth:`observation`), else :attr:`Thresholds.firm`."""
        if self.observation(old) and self.observation(new):
            return self.thresholds.firm_observed
        return self.thresholds.firm

    def _said_again(self, old: str, new: str, features: dict[str, float]) -> bool:
        """In the user's own words (neither is an :meth:`observation`), ``new`` says again
        what ``old`` says of a multi-valued attribute, by the several-values merge model, and
        they are not both about someone else (:meth:`someone_else`): "I have two sons" and
        "I'm the father of two boys" lean towards others, yet are one fact said twice;
        "my father works at Acme" and "my friend works at Acme" may be two people."""
        if features["multi"] <= features["single"]:
            return False
        if self.someone_else(old) and self.someone_else(new):
            return False  # "my father …" / "my friend …": two others, maybe two people
        return not (self.observation(old) or self.observation(new)) and self.merges(old, new)

    def another_of_several(self, old: str, new: str) -> bool:
        """Of a multi-valued attribute, ``new`` is not ``old`` restated: it says it adds one
        more (:meth:`adds`), the two hold other numbers, or where ``new``'s words stand in
        place of ``old``'s both name a thing (:meth:`names_thing`: "We have two cats" / "We have
        two dogs"), other than one word in another form ("intolerant" / "intolerance")."""
        adds = self.adds(new)
        if adds is None or adds > self.thresholds.adds or _numbers(old) != _numbers(new):
            return True
        swaps = self._prepared_swaps(old, new)
        return any(
            self.names_thing(x) and self.names_thing(y)
            for x, y in swaps
            if not _inflected(x.split(), y.split())  # "intolerant" / "intolerance": one thing
        )

    def _told_apart(self, a: str, b: str) -> bool:
        """:meth:`whose_apart` for two prepared texts, their features read only when one is
        about the user and the other about someone else (False without vectors)."""
        if self.someone_else(a) == self.someone_else(b):
            return False
        features = self.pair_features(a, b)
        return features is not None and self.whose_apart(a, b, features)

    def whose_apart(self, old: str, new: str, features: dict[str, float]) -> bool:
        """One of two prepared texts is about the user and the other about someone else
        (:meth:`someone_else`), the two lie far apart along that direction
        (:meth:`_far_apart`), and what they give in common is not an attribute
        whose value is a person ("my girlfriend is called Priya" / "Priya and I split up" both
        give the user's relationship): whose attribute each gives cannot be told apart."""
        if self.someone_else(old) == self.someone_else(new):
            return False
        if not self._far_apart(old, new, features):
            return False  # one mentions someone in passing: both may be the user's
        return not self._own_persons(old, new, features)

    def _far_apart(self, old: str, new: str, features: dict[str, float]) -> bool:
        """Two prepared texts lie far apart along the user → someone-else direction: the
        whole one (:attr:`Thresholds.subjects_apart`), or the one the subject pairs nearest
        each draw (:attr:`Thresholds.subjects_apart_near`)."""
        if features["subjects_apart"] > self.thresholds.subjects_apart:
            return True
        a, b = self._local_side(old), self._local_side(new)
        return a is not None and b is not None and abs(a - b) > self.thresholds.subjects_apart_near

    def _own_persons(self, old: str, new: str, features: dict[str, float]) -> bool:
        """What two prepared texts give in common is an attribute of the user's whose value
        is a person (a partner), and neither lies so far towards someone else that it is
        another person's person (:meth:`_own_person`)."""
        if features["multi"] > features["single"] or not self._own_person(old, new):
            return False
        return self._person_attribute(old, new) is not None

    def _person_attribute(self, old: str, new: str) -> str | None:
        """The single-valued attribute two prepared texts are both nearest, when its value is
        a person (the user's partner); else None."""
        a, b = self.attribute_scores(old), self.attribute_scores(new)
        if a is None or b is None:
            return None
        best = _best_single(self.bank, a, b)
        return list(self.bank.attributes)[best] if self.bank.person_attributes[best] else None

    def gives_a_person(self, old: str, new: str) -> bool:
        """Two prepared texts are both nearest an attribute whose value is a person (the
        user's partner: "My girlfriend is Anna" / "My girlfriend is Maya")."""
        return self._person_attribute(old, new) is not None

    def _own_person(self, old: str, new: str) -> bool:
        """Neither text lies so far towards someone else that it is another person's person
        ("my sister's husband is called Tom", past :attr:`Thresholds.own_person`)."""
        sides = [self._side(t) for t in (old, new)]
        return all(side is not None and side <= self.thresholds.own_person for side in sides)

    def vouches(self, old: str, new: str) -> bool:
        """A model's plan may retire ``old`` for ``new`` on the merge models' word: a
        :meth:`merge_score` of :attr:`Thresholds.vouch` or more, unless they say the same of
        two people (:meth:`two_people`) or give the same value of two attributes
        (:meth:`attributes_apart`)."""
        if self.never_retires(old, new):
            return False
        return self._scores_at_least(old, new, self.thresholds.vouch)

    def never_retires(self, old: str, new: str) -> bool:
        """What no plan may retire, whatever the merge models say: the same said of two
        people (:meth:`two_people`) or one value of two attributes (:meth:`attributes_apart`).
        Both trust checks (:meth:`may_replace`, :meth:`vouches`) ask it."""
        return self.two_people(old, new) or self.attributes_apart(old, new)

    def merges(self, old: str, new: str) -> bool:
        """``new`` takes ``old``'s place (a :meth:`merge_score` of 1 or more)."""
        return self._scores_at_least(old, new, 1.0)

    def _scores_at_least(self, old: str, new: str, bar: float) -> bool:
        score = self.merge_score(old, new)
        return score is not None and score >= bar


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    """A copy of ``matrix`` with every row scaled to length 1."""
    unit: np.ndarray = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return unit


def _direction_of(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, float]:
    """The unit direction from the rows of ``first`` to those of ``second`` (pairs, row by
    row) and the point half-way between the two sides along it."""
    direction = (second - first).mean(axis=0)
    direction /= np.linalg.norm(direction)
    middle = float(((first @ direction).mean() + (second @ direction).mean()) / 2)
    return direction, middle


def _side_along(sides: tuple[np.ndarray, np.ndarray], v: np.ndarray) -> float:
    """How far the unit vector ``v`` lies past the middle of the direction drawn by the
    :data:`NEAREST_PAIRS` pairs of ``sides`` (first sides, second sides) nearest it."""
    first, second = sides
    nearest = np.argsort(np.maximum(first @ v, second @ v), kind="stable")[-NEAREST_PAIRS:]
    direction, middle = _direction_of(first[nearest], second[nearest])
    return float(v @ direction) - middle


#: One place where two texts' words differ: the operation (``replace``, ``insert``,
#: ``delete``) and the words of each side there.
Difference = tuple[str, list[str], list[str]]


def _differences(a: str, b: str) -> list[Difference]:
    """Where the words of ``a`` and ``b`` differ, aligned (:func:`~.text.spaced`), in order.

    >>> _differences("My brother lives in Lyon.", "My sister lives in Lyon now.")
    [('replace', ['brother'], ['sister']), ('insert', [], ['now'])]
    """
    first, second, changes = _aligned(a, b)
    return [(tag, first[i1:i2], second[j1:j2]) for tag, i1, i2, j1, j2 in changes]


def _aligned(a: str, b: str) -> tuple[list[str], list[str], list[tuple[str, int, int, int, int]]]:
    """The words of ``a`` and ``b`` (:func:`~.text.spaced`) and where they differ, as
    :class:`difflib.SequenceMatcher` opcodes (the equal stretches left out)."""
    first, second = spaced(a).split(), spaced(b).split()
    matcher = difflib.SequenceMatcher(a=first, b=second, autojunk=False)
    return first, second, [op for op in matcher.get_opcodes() if op[0] != "equal"]


def _swapped(a: str, b: str) -> list[tuple[str, str]]:
    """The short stretches of words ``b`` has in place of ``a``'s, in pairs: the
    replacements of at most :data:`MAX_SWAPPED_WORDS` words among :func:`_differences`, each
    stretch as a phrase.

    >>> _swapped("My brother lives in Lyon.", "My sister lives in Lyon now.")
    [('brother', 'sister')]
    >>> _swapped("我哥哥住在上海。", "我姐姐住在上海。")
    [('哥哥', '姐姐')]
    >>> _swapped("a b c d e f g h", "a x c y e z g w")  # more than MAX_SWAPS: none
    []
    """
    replaced = [(x, y) for tag, x, y in _differences(a, b) if tag == "replace"]
    if len(replaced) > MAX_SWAPS:
        return []  # rewritten, not said of another person (and never many stretches embedded)
    return [
        (_phrase(x), _phrase(y)) for x, y in replaced if max(len(x), len(y)) <= MAX_SWAPPED_WORDS
    ]


def _reworded(a: str, b: str) -> bool:
    """``b`` differs from ``a`` only where it has a few words in place of ``a``'s: at most
    :data:`MAX_SETTING_SWAPS` stretches of at most :data:`MAX_SWAPPED_WORDS` words, none
    added or left out.

    >>> _reworded("I live in Berlin.", "I work in Berlin.")
    True
    >>> _reworded("I live in Berlin.", "I live in Berlin now.")
    False
    """
    differences = _differences(a, b)
    return 0 < len(differences) <= MAX_SETTING_SWAPS and all(
        tag == "replace" and max(len(x), len(y)) <= MAX_SWAPPED_WORDS for tag, x, y in differences
    )


def _widened(a: str, b: str) -> tuple[str, list[tuple[str, str]]] | None:
    """Where ``b`` adds at most :data:`MAX_SWAPPED_WORDS` words to ``a``'s, and nothing else
    differs: the words added, and the word of ``a`` on each side of them alone and with them,
    in pairs (None otherwise).

    >>> _widened("My father lives in Cork.", "My father-in-law lives in Cork.")
    ('in law', [('father', 'father in law'), ('lives', 'in law lives')])
    >>> _widened("My brother lives in Cork.", "My sister lives in Cork.") is None
    True
    """
    first, second, changed = _aligned(a, b)
    if len(changed) != 1 or changed[0][0] != "insert":
        return None
    _, at, _, j1, j2 = changed[0]
    added = second[j1:j2]
    if len(added) > MAX_SWAPPED_WORDS:
        return None
    pairs = [([first[at - 1]], [first[at - 1], *added])] if at > 0 else []
    if at < len(first):
        pairs.append(([first[at]], [*added, first[at]]))
    return _phrase(added), [(_phrase(x), _phrase(y)) for x, y in pairs]


def _only_swap(a: str, b: str) -> tuple[str, str] | None:
    """The one stretch of at most :data:`MAX_SWAPPED_WORDS` words ``b`` has in place of
    ``a``'s, when the two texts differ in nothing else (:func:`_differences`) but words that
    agree with it (:func:`_inflected`: "Mi hermano está casado" / "Mi hermana está casada").

    >>> _only_swap("My friend works at Hooli.", "My sister works at Hooli.")
    ('friend', 'sister')
    >>> _only_swap("Mera dost Pune mein rehta hai.", "Meri behen Pune mein rehti hai.")
    ('mera dost', 'meri behen')
    >>> _only_swap("My friend works at Hooli.", "My sister works at Globex.") is None
    True
    """
    differences = _differences(a, b)
    if any(tag != "replace" for tag, _, _ in differences):
        return None
    swapped = [(x, y) for _, x, y in differences if not _inflected(x, y)]
    if len(swapped) != 1 or max(map(len, swapped[0])) > MAX_SWAPPED_WORDS:
        return None
    return _phrase(swapped[0][0]), _phrase(swapped[0][1])


def _inflected(first: Sequence[str], second: Sequence[str]) -> bool:
    """One word in place of another that differs from it in its last two letters at most:
    the same word, agreeing with another ("casado" / "casada", "karta" / "karti", "ka" /
    "ki"). Letters only: "30" / "31" is another value.

    >>> _inflected(["casado"], ["casada"]), _inflected(["Lyon"], ["Lima"])
    (True, False)
    """
    if len(first) != 1 or len(second) != 1 or not (first[0].isalpha() and second[0].isalpha()):
        return False
    x, y = first[0], second[0]
    pairs = enumerate(zip(x, y, strict=False))
    shared = next((i for i, (p, q) in pairs if p != q), min(len(x), len(y)))
    return x != y and shared >= max(1, max(len(x), len(y)) - 2)


def _phrase(words: Sequence[str]) -> str:
    """``words`` as written: spaced, except between two characters of a word-free script."""
    out = ""
    for word in words:
        glued = out and WORD_FREE_CHAR.match(out[-1]) and WORD_FREE_CHAR.match(word)
        out += word if glued or not out else f" {word}"
    return out


def _best_single(bank: Bank, a: np.ndarray, b: np.ndarray) -> int:
    """The single-valued attribute two texts' attribute scores ``a`` and ``b`` are both
    nearest (the largest of the smaller of their two scores)."""
    return int(np.argmax(np.where(bank.single_attributes, np.minimum(a, b), -np.inf)))


def _reach(kinds: Iterable[Kind]) -> set[str]:
    """The attributes ``kinds`` give, and those whose new value may end theirs."""
    return {a for k in kinds for a in (k.gives, *k.ends_with)}


def _shared_kind(meaning: Meaning, a: str, b: str) -> Kind | None:
    """The kind both texts may be of, where one is clearly of it and the other clearly of no
    other kind."""
    first, second = meaning.kinds_near(a), meaning.kinds_near(b)
    clear_a, clear_b = meaning.kind(a), meaning.kind(b)
    for clear, other, other_clear in ((clear_a, second, clear_b), (clear_b, first, clear_a)):
        if clear is None or (other_clear is not None and other_clear.gives != clear.gives):
            continue
        if any(k.gives == clear.gives for k in other):
            return clear
    return None


def texts_digest(texts: Sequence[str]) -> str:
    """What vectors of ``texts`` depend on (the texts), to know a stored matrix is theirs."""
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]


def shipped_vectors(name: str, model: str | None, texts: Sequence[str]) -> np.ndarray | None:
    """The vectors of ``texts`` shipped in the package file ``name``, if ``model`` made them
    from these very texts."""
    if model is None:
        return None
    try:
        with resources.files(__package__).joinpath(name).open("rb") as handle:
            stored = np.load(handle)
            if str(stored["model"]) != model or str(stored["digest"]) != texts_digest(texts):
                return None
            vectors = np.asarray(stored["vectors"], dtype=np.float64)
    except (OSError, KeyError, ValueError):
        return None
    return vectors if len(vectors) == len(texts) else None


def write_shipped_vectors(
    meaning: Meaning, path: str, texts: Sequence[str], *, fresh: bool = False
) -> int:
    """Write the vectors of ``texts`` (a bank of described examples) under ``meaning``'s
    model to ``path``, to ship beside the bank, with the texts they are of; how many texts
    were embedded.

    A text whose vector ``path`` already holds under the same model keeps it, unless
    ``fresh``: the bundled engine's arithmetic differs from one CPU to another (two
    machines' vectors of a text agree to a cosine of 0.9999), so embedding every example
    again on another machine would move every answer that lies near a threshold, while an
    edit of the bank should change what it adds, no more."""
    kept = {} if fresh else stored_by_text(path, meaning.model_name)
    missing = [t for t in dict.fromkeys(texts) if t not in kept]
    if missing:
        embedded = np.asarray(meaning.embeddings.embed_documents(missing))
        kept.update(zip(missing, embedded, strict=True))
    vectors = np.stack([np.asarray(kept[t], dtype=np.float32) for t in texts])
    np.savez_compressed(
        path, vectors=vectors, model=meaning.model_name or "", digest=texts_digest(texts),
        texts=np.asarray(texts, dtype=str),
    )  # fmt: skip
    return len(missing)


def stored_by_text(path: str, model: str | None) -> dict[str, np.ndarray]:
    """The vectors a file :func:`write_shipped_vectors` wrote holds, by text, when ``model``
    made them (none for another model, a missing file or one without its texts)."""
    try:
        with np.load(path) as stored:
            if model is None or str(stored["model"]) != model:
                return {}
            return dict(zip(stored["texts"].tolist(), stored["vectors"], strict=True))
    except (OSError, KeyError, ValueError):
        return {}


def numbers_of(text: str) -> tuple[str, ...]:
    """The numbers written in ``text``, in order (any script's digits)."""
    return tuple(_NUMBER.findall(text))


_numbers = numbers_of


def _comparable(text: str) -> bool:
    return bool(text.strip()) and len(text) <= MAX_MEANING_CHARS
