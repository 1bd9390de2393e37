"""The LoCoMo workload: throughput and evidence retention under a 2 KB per-file budget.

Data: the 10 LoCoMo conversations (ACL 2024, "Evaluating Very Long-Term Conversational Memory
of LLM Agents"), read from ``../shared/datasets/locomo10`` relative to the repository root by
default (``python -m bench.bench_locomo <folder>`` to point elsewhere). The bench is skipped
with a message when the folder is absent; the data is never copied into the repository.

Workload: each conversation's two speakers are two users (20 users). Each session is a thread
at its ``session_K_date_time`` (read as UTC). Each ``session_K_observation`` item — a fact about
one speaker with the dialogue turn(s) it came from, ``[text, dia_id(s)]`` — becomes one
``fact`` candidate of that speaker: created at the session time plus its position in seconds,
``thread_id``/``trace_id`` naming conversation and session, and the dia ids in its idempotency
key (so provenance survives retries). (``events_session_K`` lists carry no dia ids, so they
cannot be traced to QA evidence and are not used.) Time is simulated: before each session the
worker sweeps at that session's time (``claim_due(now=…)``, the pipeline's clock set to it),
then the session's candidates are enqueued with ``RedisQueue.enqueue_many(now=…)``; a final
sweep after the last debounce drains the rest. Consolidation is the production path
(``Pipeline.consolidate``, rules consolidator, files sink, SQLite) with
``file_budget_bytes=2048``: past 2 KB a file evicts its least confirmed, oldest entries.

Evidence retention (the quality number): a QA item lists ``evidence`` dia ids (the turns that
answer it). An evidence turn maps to the observations whose dia ids include it, of either
speaker; those are the facts a memory must keep to answer. An observation is *retained* when
its candidate's id is in the provenance of an entry that is still active and whose text is in
the owner's current memory file — so an observation merged into an equivalent entry counts as
kept. A question is retained when every evidence turn that has observations keeps at least
one of them; questions none of whose evidence turns has an observation (about 16%) are left
out and counted.

Baselines in the same run: throughput against the floor of the same I/O done raw — a pipelined
``XADD`` of the same candidate JSON plus one Core ``executemany`` of ledger rows per
(session, speaker) batch, the batches the debounce makes here; retention against the same
workload with the default 8 KB budget and with no budget at all (the reference: everything
the consolidator kept).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import redis
import sqlalchemy as sa

from bench._support import delete_prefix, redis_url, temp_sqlite, unique_prefix
from worker.models import Candidate, make_candidate
from worker.runtime.container import Runtime, build_runtime
from worker.service.consolidate import Pipeline
from worker.settings import Settings
from worker.store.engine import create_store_engine, write_transaction
from worker.store.schema import candidate_ledger, entries, namespaces

DEFAULT_DATASET: Final = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "locomo10"
BUDGET: Final = 2048
#: Budgets of the reference runs: the default, and none (larger than any file gets).
REFERENCE_BUDGETS: Final = (8192, 1_000_000_000)
#: Rounds of (2 KB pipeline run, raw baseline), interleaved.
ROUNDS: Final = 2
#: "D12:3"; one QA item spells it "D:12:3", and some list several ids in one string.
DIA_ID: Final = re.compile(r"D:?(\d+):(\d+)")
DATE_FORMAT: Final = "%I:%M %p on %d %B, %Y"


@dataclass(frozen=True)
class Observation:
    candidate: Candidate
    conversation: str
    dia_ids: tuple[str, ...]


@dataclass(frozen=True)
class Session:
    at: datetime
    conversation: str
    number: int
    observations: tuple[Observation, ...]


@dataclass(frozen=True)
class Question:
    conversation: str
    evidence: tuple[str, ...]
    text: str = ""
    #: LoCoMo's category: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.
    category: int = 0


@dataclass
class Workload:
    sessions: list[Session] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    @property
    def observations(self) -> list[Observation]:
        return [o for s in self.sessions for o in s.observations]


def _dia_ids(value: Any) -> tuple[str, ...]:
    return tuple(f"D{a}:{b}" for a, b in DIA_ID.findall(json.dumps(value)))


def load(folder: Path) -> Workload:
    """Sessions in time order, with their observations as candidates, and the QA items."""
    work = Workload()
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        conv = path.stem
        for key, by_speaker in data.items():
            match = re.fullmatch(r"session_(\d+)_observation", key)
            if not match:
                continue
            number = int(match[1])
            at = datetime.strptime(data[f"session_{number}_date_time"], DATE_FORMAT)
            at = at.replace(tzinfo=UTC)
            thread = f"locomo{conv}-s{number}"
            observations = []
            for speaker, items in by_speaker.items():
                for i, (text, dia) in enumerate(items):
                    ids = _dia_ids(dia)
                    candidate = make_candidate(
                        user_id=f"locomo{conv}-{speaker}", trace_id=thread, thread_id=thread,
                        text=text, idempotency_key=f"{thread}/{speaker}/{i}/{','.join(ids)}",
                        now=at + timedelta(seconds=i), source="import",
                    )  # fmt: skip
                    observations.append(Observation(candidate, conv, ids))
            work.sessions.append(Session(at, conv, number, tuple(observations)))
        work.questions += [
            Question(conv, _dia_ids(q.get("evidence", [])), q["question"], q["category"])
            for q in data.get("qa", [])
        ]
    work.sessions.sort(key=lambda s: (s.at, s.conversation, s.number))
    return work


# --- the pipeline run ----------------------------------------------------------------------
@dataclass
class Outcome:
    budget: int
    seconds: float
    committed: Counter[str]
    retained: set[str]  # candidate ids still present in their owner's memory files
    file_bytes: list[int]


def _replay(runtime: Runtime, work: Workload) -> Counter[str]:
    """Enqueue session by session at session time, sweeping before each; drain at the end."""
    current = [work.sessions[0].at]
    pipeline = Pipeline(
        queue=runtime.queue, store=runtime.store, consolidator=runtime.consolidator,
        settings=runtime.settings.for_consolidation, sinks=tuple(runtime.sinks),
        clock=lambda: current[0],
    )  # fmt: skip
    totals: Counter[str] = Counter()

    def sweep(at: datetime) -> None:
        current[0] = at
        totals.update(_drain(runtime, pipeline, at))

    for session in work.sessions:
        sweep(session.at)
        batch = [o.candidate for o in session.observations]
        if batch:
            arrival = session.at + timedelta(seconds=len(batch))
            runtime.queue.enqueue_many(batch, now=arrival.timestamp())
    wait = timedelta(seconds=runtime.settings.max_wait_seconds + 1)
    sweep(work.sessions[-1].at + timedelta(seconds=len(work.sessions[-1].observations)) + wait)
    return totals


def _drain(runtime: Runtime, pipeline: Pipeline, at: datetime) -> Counter[str]:
    out: Counter[str] = Counter()
    while claims := runtime.queue.claim_due(now=at.timestamp()):
        for claim in claims:
            result = pipeline.consolidate(claim)
            out[result.outcome] += 1
            out["candidates"] += result.candidates
    return out


def _retained(runtime: Runtime) -> tuple[set[str], list[int]]:
    """Candidate ids backing an active entry shown in its file; the sizes of the files."""
    store = runtime.store
    stmt = sa.select(namespaces.c.key, entries.c.path, entries.c.text, entries.c.candidate_ids)
    stmt = stmt.join(namespaces, namespaces.c.id == entries.c.namespace_id)
    with store.engine.connect() as conn:
        rows = conn.execute(stmt.where(entries.c.invalid_at.is_(None))).all()
    files: dict[str, dict[str, str]] = {}
    kept: set[str] = set()
    for ns, path, text, candidate_ids in rows:
        if ns not in files:
            files[ns] = store.current_files(ns)
        if text.strip().splitlines()[0] in files[ns].get(path, ""):
            kept.update(candidate_ids)
    sizes = [len(c.encode()) for by_path in files.values() for c in by_path.values()]
    return kept, sizes


@contextmanager
def replayed(
    work: Workload, budget: int, client: redis.Redis, **settings: Any
) -> Iterator[tuple[Runtime, float, Counter[str]]]:
    """The runtime (SQLite, files sink) after replaying ``work`` at ``budget``, with the seconds
    the replay took and its outcome counts; everything is removed on exit. ``settings`` adds
    to the run's :class:`Settings`."""
    prefix = unique_prefix("l")
    with temp_sqlite() as url, tempfile.TemporaryDirectory(prefix="mwbench-files-") as files:
        config = Settings(
            redis_url=redis_url(), database_url=url, key_prefix=prefix, data_dir=Path(files),
            files_dir=Path(files), sinks=["files"], file_budget_bytes=budget, **settings,
        )  # fmt: skip
        runtime = build_runtime(config)
        try:
            runtime.store.load_state("user:warmup")  # connection pool, first-use imports
            started = time.perf_counter()
            committed = _replay(runtime, work)
            yield runtime, time.perf_counter() - started, committed
        finally:
            runtime.close()
            delete_prefix(client, prefix)


def _pipeline_run(work: Workload, budget: int, client: redis.Redis) -> Outcome:
    with replayed(work, budget, client) as (runtime, seconds, committed):
        retained, sizes = _retained(runtime)
    return Outcome(budget, seconds, committed, retained, sizes)


# --- the raw baseline ------------------------------------------------------------------------
def _baseline_run(work: Workload, client: redis.Redis) -> float:
    """Seconds for the raw I/O floor: per (session, speaker) batch, a pipelined XADD of the
    candidates' JSON and one write transaction inserting their ledger rows."""
    prefix = unique_prefix("lb")
    now = datetime.now(UTC)
    batches: list[list[Candidate]] = []
    for session in work.sessions:
        by_ns: dict[str, list[Candidate]] = {}
        for o in session.observations:
            by_ns.setdefault(o.candidate.namespace, []).append(o.candidate)
        batches += by_ns.values()
    with temp_sqlite() as url:
        engine = create_store_engine(url)
        try:
            keys = sorted({c.namespace for b in batches for c in b})
            with write_transaction(engine) as conn:
                conn.execute(sa.insert(namespaces), [
                    {"key": k, "scope": "user", "user_id": k[5:], "version": 0,
                     "created_at": now, "updated_at": now} for k in keys])  # fmt: skip
                ids = dict(
                    conn.execute(sa.select(namespaces.c.key, namespaces.c.id)).tuples().all()
                )
            prepared = [
                ([c.model_dump_json() for c in b],
                 [{"namespace_id": ids[c.namespace], "candidate_id": c.id,
                   "trace_id": c.trace_id, "outcome": "merged", "reason": None,
                   "entry_id": None, "run_id": None, "created_at": now} for c in b])
                for b in batches
            ]  # fmt: skip
            started = time.perf_counter()
            for n, (payloads, rows) in enumerate(prepared):
                pipe = client.pipeline(transaction=False)
                for p in payloads:
                    pipe.xadd(f"{prefix}:raw:{n % 20}", {"c": p})
                pipe.execute()
                with write_transaction(engine) as conn:
                    conn.execute(sa.insert(candidate_ledger), rows)
            return time.perf_counter() - started
        finally:
            engine.dispose()
            delete_prefix(client, prefix)


# --- scoring -------------------------------------------------------------------------------
def _question_retention(work: Workload, retained: set[str]) -> tuple[int, int, int]:
    """(retained questions, scorable questions, unscorable questions)."""
    by_turn: dict[tuple[str, str], list[str]] = {}
    for o in work.observations:
        for dia in o.dia_ids:
            by_turn.setdefault((o.conversation, dia), []).append(o.candidate.id)
    kept = scored = skipped = 0
    for q in work.questions:
        turns = [by_turn[(q.conversation, d)] for d in q.evidence if (q.conversation, d) in by_turn]
        if not turns:
            skipped += 1
            continue
        scored += 1
        kept += all(any(c in retained for c in cands) for cands in turns)
    return kept, scored, skipped


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f}%" if whole else "  n/a"


def run(dataset: Path = DEFAULT_DATASET) -> list[str]:
    if not dataset.is_dir() or not any(dataset.glob("*.json")):
        return [f"skipped: LoCoMo data not found at {dataset} (pass the folder holding the "
                "locomo10 JSON files: python -m bench.bench_locomo <folder>)"]  # fmt: skip
    work = load(dataset)
    n = len(work.observations)
    users = len({o.candidate.namespace for o in work.observations})
    client = redis.Redis.from_url(redis_url())
    try:
        runs: list[Outcome] = []
        baseline = 0.0
        for _ in range(ROUNDS):
            runs.append(_pipeline_run(work, BUDGET, client))
            baseline += _baseline_run(work, client)
        references = [_pipeline_run(work, b, client) for b in REFERENCE_BUDGETS]
    finally:
        client.close()
    for outcome in (*runs, *references):
        if outcome.committed["candidates"] != n:
            raise RuntimeError(f"budget {outcome.budget}: {dict(outcome.committed)} of {n}")
    if len({frozenset(r.retained) for r in runs}) != 1:
        raise RuntimeError("two identical runs retained different observations")
    ours = sum(r.seconds for r in runs)
    rate, base_rate = ROUNDS * n / ours, ROUNDS * n / baseline
    batches = runs[0].committed["committed"]

    def describe(o: Outcome, label: str) -> str:
        kept, scored, _ = _question_retention(work, o.retained)
        obs = sum(ob.candidate.id in o.retained for ob in work.observations)
        biggest = max(o.file_bytes, default=0)
        return (f"{label:<16} questions {_share(kept, scored)}   observations "
                f"{_share(obs, n)}   largest file {biggest:>6,} B")  # fmt: skip

    _, scored, skipped = _question_retention(work, runs[0].retained)
    return [
        f"{len(work.sessions)} sessions, {users} users, {n} observation candidates, "
        f"{len(work.questions)} questions ({scored} with evidence observations, {skipped} "
        "without); SQLite, rules consolidator",
        f"enqueue→committed, 2 KB budget   {rate:>8,.0f} candidates/s "
        f"({batches} batches, {1000 * ours / (ROUNDS * batches):.1f} ms/batch)",
        f"raw XADD + Core insert per batch {base_rate:>8,.0f} candidates/s",
        f"throughput / raw I/O floor: {rate / base_rate:.2f}x",
        "evidence retention (share still in the speaker's memory files):",
        describe(runs[0], "  2 KB budget"),
        describe(references[0], "  8 KB (default)"),
        describe(references[1], "  no budget"),
    ]


if __name__ == "__main__":
    print(*run(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DATASET), sep="\n")
