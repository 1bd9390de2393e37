"""What the commands share: consoles, progress bars, errors, settings and runtime, namespaces,
confirmations.

Where the CLI's human-readable output goes: Rich consoles that never wrap a piped line.

On a terminal, Rich lays text and tables out to the terminal's width. Written to a pipe or a
file, it would assume 80 columns and break long lines (a diff line, an error message, a table
row) in the middle, so ``memworker status > status.txt`` or ``| grep`` would see fragments.
Off a terminal these consoles are as wide as :data:`PIPED_WIDTH`: text is never wrapped and
tables take their natural width. ``--json`` stays the machine format; this is for people.

>>> import io
>>> console = CliConsole(file=io.StringIO())
>>> console.print("x" * 200)
>>> len(console.file.getvalue().splitlines())
1

The CLI's progress bars: on stderr (stdout stays the report), shown only on a terminal.

A long command (``reconcile --all``, ``publish --all``, ``import``, ``forget``, ``dlq retry
--all``) shows how far it got while it runs; piped into a file or a script, or captured by a
test, it prints no bar at all (Rich's ``console.is_terminal``), so its output is only the
report. The bar is transient: once done, it leaves no line behind.

>>> import io
>>> from worker.cli.common import CliConsole
>>> with progress_bar(2, "reconcile", console=CliConsole(file=io.StringIO())) as advance:
...     advance("user:u1")

How every CLI command reports failure: one line, what was wrong and what to do; no traceback.

Helpers shared by CLI commands: settings, runtime, namespace selection, JSON output.

Every ``worker.cli`` module imports only Typer, Rich and :mod:`worker.errors` at module level:
the runtime, the store, Redis and the services are imported inside the command that uses them,
so ``memworker --version`` and ``--help`` start at once (``tests/integration/test_cli_imports.py``).

What the operator commands share: a guarded runtime, publishing, confirmations, durations.

Not a command module (it registers nothing): the ``ops_*`` command modules import from here.

>>> parse_duration("6h")
datetime.timedelta(seconds=21600)
>>> parse_duration("1d12h")
datetime.timedelta(days=1, seconds=43200)
"""

from __future__ import annotations

import contextlib
import gc
import getpass
import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer
from rich.console import Console, ConsoleDimensions
from rich.markup import escape

from worker.errors import (
    ConfigurationError,
    InvalidOption,
    MemworkerError,
    NotFound,
    QueueUnavailable,
    Unavailable,
    UsageError,
)

if TYPE_CHECKING:
    from rich.console import Console

    from worker.models import Namespace
    from worker.runtime.container import Runtime
    from worker.service.bulkhead import Progress
    from worker.service.publish import DeliveryReport


#: Width assumed when the output is not a terminal: wider than any line memworker prints
#: (texts are at most MEMWORKER_MAX_TEXT_BYTES), so nothing wraps; tables are only as wide
#: as their content, and rules are capped at :data:`RULE_WIDTH`.
PIPED_WIDTH: Final = 100_000

#: Width of a horizontal rule (a file header in ``memworker show``) when the console is wider.
RULE_WIDTH: Final = 80


class CliConsole(Console):
    """A Rich console without highlighting that is :data:`PIPED_WIDTH` wide off a terminal.

    The check is made at every print (not at import), so output redirected after start-up,
    or captured by a test runner, is treated as piped.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("highlight", False)
        super().__init__(**kwargs)

    @property
    def size(self) -> ConsoleDimensions:
        measured = super().size
        if self.is_terminal:
            return measured
        return ConsoleDimensions(PIPED_WIDTH, measured.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]

    def rule_width(self, title: str) -> int:
        """How wide a rule titled ``title`` is drawn: the terminal's width; off a terminal
        :data:`RULE_WIDTH`, or wider when the title needs it (a rule never cuts its title)."""
        if self.is_terminal:
            return self.width
        return max(RULE_WIDTH, len(title) + 2 * len(" ── "))


def make_console(*, stderr: bool = False) -> CliConsole:
    """The console for stdout (reports) or stderr (errors, prompts, progress)."""
    return CliConsole(stderr=stderr)


def _nothing(_step: str) -> None:
    return None


@contextlib.contextmanager
def progress_bar(
    total: int, what: str, *, console: Console | None = None
) -> Iterator[Callable[[str], None]]:
    """A bar of ``total`` steps labelled ``what`` on ``console`` (stderr by default); yields
    what is told each step done, by name. Nothing is shown off a terminal or for no steps."""
    if console is None:
        console = stderr
    if total <= 0 or not console.is_terminal:
        yield _nothing
        return
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn(f"[bold]{escape(what)}[/bold] {{task.description}}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=total)
        yield lambda step: bar.update(task, advance=1, description=escape(step))


def progress_of(what: str, *, show: bool = True) -> Progress:
    """A :data:`worker.service.bulkhead.Progress` for a use case: bars labelled ``what``
    (none when ``show`` is false, e.g. for ``--json``)."""

    def opened(total: int) -> AbstractContextManager[Callable[[str], None]]:
        return progress_bar(total if show else 0, what)

    return opened


#: Exit codes, so scripts can tell a usage mistake from an outage.
EXIT_DECLINED = 0  #: the operator answered no at a confirmation: nothing changed, by choice
EXIT_FAILURE = 1  #: the operation failed (e.g. a plan was rejected)
EXIT_USAGE = 2  #: bad input or configuration: fix the command or the settings
EXIT_NOT_FOUND = 3  #: the user, file or version asked for does not exist
EXIT_UNAVAILABLE = 4  #: Redis, the database, a sink or the model could not be reached

stderr = make_console(stderr=True)


def exit_code_for(exc: MemworkerError) -> int:
    """The exit code of an error's tier (see :mod:`worker.errors`).

    >>> from worker.errors import InvalidOption, StoreUnavailable, StaleVersion
    >>> [exit_code_for(e("x")) for e in (InvalidOption, StoreUnavailable, StaleVersion)]
    [2, 4, 1]
    """
    if isinstance(exc, UsageError):
        return EXIT_USAGE
    if isinstance(exc, NotFound):
        return EXIT_NOT_FOUND
    if isinstance(exc, Unavailable):
        return EXIT_UNAVAILABLE
    return EXIT_FAILURE


@contextlib.contextmanager
def cli_errors() -> Iterator[None]:
    """Turn memworker errors into ``error: …`` on stderr and the matching exit code."""
    try:
        yield
    except MemworkerError as exc:
        # Escaped: the message may quote user input, which must not be read as Rich markup.
        stderr.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(exit_code_for(exc)) from None


@contextmanager
def open_runtime() -> Iterator[Runtime]:
    """Settings from the environment (this is the edge) and the wired parts; closed after."""
    from worker.runtime.container import build_runtime
    from worker.settings import load_settings

    runtime = build_runtime(load_settings())
    try:
        yield runtime
    finally:
        runtime.close()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a short read-only command runs.

    Such a command spends most of its time importing (Redis, SQLAlchemy, the store: hundreds
    of modules), which allocates long-lived objects only; the collector, run every few hundred
    allocations, rescans that growing heap again and again (a tenth of ``memworker status``)
    and frees nothing. What little cyclic garbage the command makes is freed when it exits.
    Not for long-running commands (``worker``, ``run``, ``beat``).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def namespace_from(
    user: str | None,
    assistant: str | None,
    namespace: str | None,
    org: str | None = None,
    *,
    accepted: str = "--user U [--assistant A], --org O or --namespace NS",
) -> Namespace:
    """Exactly one way of naming a namespace: --user [--assistant] [--org] (with --org, the
    user of that org), --assistant, --org alone (the org's own memory) or --namespace;
    ``accepted`` is what the command's own error names when none is given."""
    from worker.models import Namespace

    if namespace is not None:
        if user or org:
            raise InvalidOption("give either --namespace or --user/--org, not both")
        return Namespace.parse(namespace)
    if user is not None:  # with --org: the user of that org (the same id in two orgs is two)
        return Namespace.for_user(user, assistant_id=assistant, org_id=org)
    if org is not None:
        return Namespace.for_org(org)
    if assistant is not None:
        return Namespace.for_agent(assistant)
    raise InvalidOption(f"name a namespace: {accepted}")


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str, ensure_ascii=False)
    sys.stdout.write("\n")


console = make_console()

UserOpt = Annotated[str | None, typer.Option("--user", help="User id.")]
AssistantOpt = Annotated[str | None, typer.Option("--assistant", help="Assistant id.")]
OrgOpt = Annotated[
    str | None,
    typer.Option(
        "--org", help="Organisation id: with --user, that org's user; alone, the org's memory."
    ),
]
NamespaceOpt = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        help="A namespace key, e.g. user:u1, user:u1:bot, org:acme:user:u1, agent:bot.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]

#: ``30m``, ``6h``, ``2d``, ``1w``, or several such parts (``1d12h``), each unit at most once.
_DURATION: Final = re.compile(r"(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_UNIT_SECONDS: Final = (7 * 86400, 86400, 3600, 60, 1)
#: The longest duration an option takes: ten years (520 weeks) reaches back past any
#: conversation a source still holds, and keeps ``now - duration`` a valid date (a bigger one
#: overflows Python's dates instead of meaning anything).
MAX_DURATION: Final = timedelta(weeks=520)
#: Digits a part may have before it is refused as out of range without being converted
#: (Python refuses to convert integers of thousands of digits at all).
_MAX_DIGITS: Final = 12


def parse_duration(text: str, *, option: str = "--since") -> timedelta:
    """A positive duration of at most :data:`MAX_DURATION`, such as ``6h``, ``2d`` or
    ``1d12h``; anything else is refused as :class:`InvalidOption` naming ``option``.

    >>> parse_duration("99999999w")
    Traceback (most recent call last):
    ...
    worker.errors.InvalidOption: --since '99999999w' is out of range: give 1s to 520w (10 years)
    """
    match = _DURATION.fullmatch(text.strip()) if text.strip() else None
    if match is None or not any(match.groups()):
        raise InvalidOption(
            f"{option} {text!r} is not a duration; use a number and a unit, e.g. 30m, 6h, 2d, 1w"
        )
    values = [(v, unit) for v, unit in zip(match.groups(), _UNIT_SECONDS, strict=True) if v]
    if any(len(v.lstrip("0")) > _MAX_DIGITS for v, _ in values):
        raise _out_of_range(option, text)
    seconds = sum(int(v) * unit for v, unit in values)
    if seconds <= 0:
        raise InvalidOption(f"{option} {text!r} is zero; give a positive duration, e.g. 6h")
    if seconds > MAX_DURATION.total_seconds():
        raise _out_of_range(option, text)
    return timedelta(seconds=seconds)


def _out_of_range(option: str, text: str) -> InvalidOption:
    weeks = MAX_DURATION.days // 7
    return InvalidOption(f"{option} {text!r} is out of range: give 1s to {weeks}w (10 years)")


def now_utc() -> datetime:
    """The CLI is the edge: the one place operator commands read this host's clock, for what
    only this command compares (a scan's window). Anything written to SQL that other processes
    compare takes the database's clock instead (``store.db_now()``)."""
    return datetime.now(UTC)


def operator_name() -> str:
    """``operator:<login>``, the author recorded for operator-written versions."""
    try:
        login = getpass.getuser()
    except (KeyError, OSError):  # no login name in some containers
        login = "unknown"
    return f"operator:{login}"


#: The deliveries the running operator command made (see :func:`operator_session`).
_DELIVERIES: ContextVar[list[DeliveryReport] | None] = ContextVar("deliveries", default=None)


@contextlib.contextmanager
def operator_session(*, writes: bool = False) -> Iterator[Runtime]:
    """A runtime whose Redis trouble becomes one clear line and exit code 4, like the store's.

    A command that publishes and had a delivery fail (or a sink skipped as failing) exits 1
    once its output is printed, as the exit-code table says: what it wrote is committed, but
    not yet in every sink (the workers retry it). Every publish goes through
    :func:`publish_namespaces` or :func:`record_delivery`, so no command can forget this.

    A command that ``writes`` (commits, erases, publishes) is refused before it changes
    anything when its sinks lack one the workers publish to (:func:`require_workers_sinks`).
    """
    import redis

    from worker.queue.redis import redacted

    deliveries: list[DeliveryReport] = []
    token = _DELIVERIES.set(deliveries)
    try:
        with cli_errors(), open_runtime() as runtime:
            try:
                if writes:
                    require_workers_sinks(runtime)
                yield runtime
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                raise QueueUnavailable(
                    f"Redis at {redacted(runtime.redis_url)} is unreachable ({exc}); nothing "
                    "was changed in the queue. Start Redis or fix MEMWORKER_REDIS_URL"
                ) from None
    finally:
        _DELIVERIES.reset(token)
    failed = sum(r.failed for r in deliveries)
    skipped = sorted({s for r in deliveries for s in r.skipped_sinks})
    if failed or skipped:
        what = f"{failed} delivery(ies) failed" if failed else f"{', '.join(skipped)} skipped"
        stderr.print(
            f"[red]error:[/red] committed, but {what}; the workers retry "
            "(`memworker status` shows sink lag)",
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_FAILURE)


def workers_sinks(runtime: Runtime) -> list[str] | None:
    """The sinks the workers recorded at start, or None when that cannot be known (no worker
    of this release started yet, or no Redis to ask: a command that needs none goes on)."""
    import redis

    from worker.errors import MemworkerError

    try:
        return runtime.queue.admin.workers_sinks()
    except (MemworkerError, redis.RedisError):
        return None


def sinks_missing(runtime: Runtime, recorded: list[str] | None) -> list[str]:
    """The workers' sinks this command's settings (``MEMWORKER_SINKS``) lack."""
    mine = {s.strip() for s in runtime.settings.sinks}
    return [s for s in recorded or () if s not in mine]


def require_workers_sinks(runtime: Runtime) -> None:
    """Refuse (exit 2, nothing changed) a command that would commit or publish to fewer sinks
    than the workers use: the outbox files each commit under the committing process's sinks,
    so a sink this command lacks would never receive what it writes (nor an erase's deletion).
    It cannot publish to the workers' sinks itself: building one needs that sink's settings
    (``MEMWORKER_LANGGRAPH_URL`` …), which are the workers'."""
    recorded = workers_sinks(runtime)
    missing = sinks_missing(runtime, recorded)
    if not missing:
        return
    mine = ", ".join(runtime.settings.sinks) or "none"
    raise ConfigurationError(
        f"the workers publish to {', '.join(recorded or ())}, but this command's "
        f"MEMWORKER_SINKS has only {mine}, so {', '.join(missing)} would never receive what "
        "it writes; nothing was changed. Run it with the workers' settings (MEMWORKER_SINKS "
        "and what those sinks need, e.g. MEMWORKER_LANGGRAPH_URL; `memworker status` shows "
        "the workers' sinks)"
    )


def record_delivery(report: DeliveryReport) -> DeliveryReport:
    """Note a delivery the running operator command made, for its exit code; returns it."""
    deliveries = _DELIVERIES.get()
    if deliveries is not None:
        deliveries.append(report)
    return report


def publish_namespaces(runtime: Runtime, namespaces: Sequence[str]) -> DeliveryReport:
    """Deliver what the outbox holds for the namespaces this command touched, so its files
    appear in the sinks right away; bounded, and the report says what is still due.

    Workers deliver too; deliveries are claimed, so doing it here never doubles one.
    """
    from worker.service.publish import publish_now

    report = publish_now(runtime.store, runtime.sinks, namespaces=namespaces)
    return record_delivery(report)


def describe_delivery(
    report: DeliveryReport, runtime: Runtime, *, sinks: Sequence[str] | None = None
) -> str:
    """One line (and one per item set aside) saying what a publish to ``sinks`` (the
    runtime's by default) did. A sink is named as published to only when it took something: a
    sink whose every delivery failed is named among the failures, never beside "published"."""
    targets = list(runtime.sinks) if sinks is None else list(sinks)
    taken = report.sinks_taken
    if taken:
        line = f"published {report.delivered} item(s) to {', '.join(taken)}"
    elif not targets:
        line = "no sink is configured (MEMWORKER_SINKS): nothing was delivered"
    else:
        line = "no sink took anything"
    if report.failed:
        untaken = [name for name in targets if name not in taken]
        where = f" ({', '.join(untaken)} took nothing)" if untaken else ""
        line += (
            f"; {report.failed} delivery(ies) failed{where} and will be retried by the workers "
            "(`memworker status` shows sink lag)"
        )
    if report.skipped_sinks:
        line += f"; skipped {', '.join(report.skipped_sinks)} (failing: left alone for a while)"
    if report.remaining:
        line += f"; {report.remaining} delivery(ies) not yet done; the workers retry them"
    for aside in report.set_aside:
        line += f"\n  set aside {aside.describe()}"
    return line


def confirm(question: str, yes: bool) -> None:
    """Ask unless ``--yes``. Answering "no" is a decision, not a failure: the command stops
    with nothing changed and exit code 0. No answer at all (no terminal to ask on, end of
    input, Ctrl-C) is a usage error (exit 2): a script must say ``--yes``."""
    if yes:
        return
    try:
        agreed = typer.confirm(question, default=False, err=True)
    except typer.Abort:
        stderr.print()  # end the unanswered prompt's line
        raise InvalidOption(
            "no answer to the confirmation (no terminal to ask on?), so nothing was changed; "
            "pass --yes to run without asking"
        ) from None
    if not agreed:
        stderr.print("nothing was changed (you answered no; pass --yes to skip this question)")
        raise typer.Exit(EXIT_DECLINED)


def require_known(runtime: Runtime, ns: Namespace) -> None:
    """:class:`NotFound` unless the store has memory for ``ns`` or the queue knows it."""
    from worker.service.consolidate import require_known as known_or_refused

    known_or_refused(runtime.store, runtime.queue, ns)
