"""What the ``darwin`` commands share: parsers of command-line values (click callbacks call
them), the ``--set`` option, loading an experiment for a command, and clean credential errors.

>>> parse_size("168x364"), parse_int_list("1, 8,32", "batch sizes")
((168, 364), [1, 8, 32])
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from types import SimpleNamespace, TracebackType
from typing import TYPE_CHECKING, Any

import click

from darwin.progress import HEARTBEAT_S, LINE_EVERY_S, Heartbeat, LineSchedule, StageClock

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, ProgressColumn, TaskID

    from darwin.run.config import ExperimentConfig

__all__ = [
    "credentials_fail_cleanly",
    "experiment_overrides",
    "load_experiment_for_command",
    "parse_int_list",
    "parse_size",
    "ProgressLines",
    "progress_bar",
    "task_names_line",
]


def parse_size(
    text: str, *, example: str = "252x560", max_size: tuple[int, int] | None = (1080, 2400)
) -> tuple[int, int]:
    """``"WIDTHxHEIGHT"`` -> ``(width, height)``; a bad value raises ``click.BadParameter``."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a size; write WIDTHxHEIGHT, e.g. {example}") from None
    if w <= 0 or h <= 0:
        raise click.BadParameter(f"{text!r} must be positive")
    if max_size is not None and (w > max_size[0] or h > max_size[1]):
        raise click.BadParameter(f"{text!r} must fit in {max_size[0]}x{max_size[1]}")
    return w, h


def parse_int_list(text: str, what: str, *, allow_empty: bool = False) -> list[int]:
    """``"1,8,32"`` -> ``[1, 8, 32]``: each ``>= 1`` (``what`` names them); at least one
    unless ``allow_empty`` (``""`` then skips what the list drives)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of {what}") from None
    if (not values and not allow_empty) or (values and min(values) < 1):
        raise click.BadParameter(f"{text!r}: give at least one of the {what}, each >= 1")
    return values


experiment_overrides = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="with --experiment: override a config field, as in darwin run",
)
"""The ``--set`` of the commands that read an experiment file with ``--experiment`` (eval, sft)."""


def load_experiment_for_command(experiment_file: str, overrides: tuple[str, ...]) -> ExperimentConfig:
    """``--experiment FILE`` with its ``--set`` overrides applied; a problem stops the command with its fix."""
    from darwin.problems import ExperimentError
    from darwin.run.load import apply_overrides, load_experiment

    try:
        config = load_experiment(experiment_file)
        return apply_overrides(config, overrides) if overrides else config
    except ExperimentError as exc:
        raise click.ClickException(str(exc)) from None


def task_names_line(names: tuple[str, ...], shown: int = 8) -> str:
    """The training tasks for one line: all of a few, else the first ones and a count."""
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more tasks"


@contextlib.contextmanager
def credentials_fail_cleanly() -> Iterator[None]:
    """A missing or rejected API key (a judge, a planner, a hosted agent) stops the command with
    one line naming the variable to set, not a traceback."""
    from darwin.types import RunAbort

    try:
        yield
    except RunAbort as exc:  # PolicyAuthError among them
        raise click.ClickException(str(exc)) from None


def progress_bar(
    console: Console,
    label: str,
    *fields: ProgressColumn,
    time_remaining: bool = False,
    unit: str = "",
) -> Progress | ProgressLines:
    """The commands' progress bar on ``console``, kept on screen when done: ``label`` in bold,
    the task's description, the bar, done/total, the ``fields`` columns, the time elapsed (and
    the time remaining with ``time_remaining``). A console that is no terminal (a log file, CI,
    ``tee``) would show a bar only once it ends: it gets :class:`ProgressLines` instead, which
    count in ``unit``."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    if not console.is_terminal:
        return ProgressLines(console, label, *fields, unit=unit)
    columns: list[ProgressColumn] = [
        TextColumn(f"[bold]{label}[/] {{task.description}}"),
        BarColumn(),
        MofNCompleteColumn(),
        *fields,
        TimeElapsedColumn(),
    ]
    if time_remaining:
        columns.append(TimeRemainingColumn())
    return Progress(*columns, console=console, transient=False)


@dataclass
class _LineTask:
    """One task of :class:`ProgressLines`: its state and when its next line is due."""

    description: str
    total: float | None
    completed: float
    fields: dict[str, Any]
    clock: StageClock
    schedule: LineSchedule
    base: float = 0.0
    """What was done when the description last changed: the rate counts only the work since."""
    shown: tuple[str, float, float | None] | None = None
    """The state the last line showed (a final line repeats none)."""

    @property
    def complete(self) -> bool:
        return self.total is not None and self.completed >= self.total


class ProgressLines:
    """The part of rich's ``Progress`` the commands use (``with``, ``add_task``, ``update``,
    ``advance``, ``console``), as timestamped lines: at a task's first report and each new
    description, then every :data:`~darwin.progress.LINE_EVERY_S` seconds (also while nothing
    reports, from a :class:`~darwin.progress.Heartbeat` every ``heartbeat_s``; ``None``: none),
    when a task completes and when the ``with`` block ends. A line reads
    ``[    95s] sft training: 120/1000 steps, 1m02s elapsed, about 7m30s left, loss 0.4123``:
    the time since the start, the description's own elapsed time and what is left at its rate,
    and the ``fields`` that are text columns."""

    def __init__(
        self,
        console: Console,
        label: str,
        *fields: ProgressColumn,
        unit: str = "",
        clock: Callable[[], float] = time.monotonic,
        every_s: float = LINE_EVERY_S,
        heartbeat_s: float | None = HEARTBEAT_S,
    ) -> None:
        from rich.progress import TextColumn

        self.console = console
        self.label = label
        self.unit = unit
        self._formats = [str(f.text_format) for f in fields if isinstance(f, TextColumn)]
        self._clock = clock
        self._every_s = every_s
        self._started = clock()
        self._tasks: dict[int, _LineTask] = {}
        self._lock = threading.RLock()  # the heartbeat's thread reports too
        self._heartbeat = Heartbeat(self._beat, heartbeat_s) if heartbeat_s else None

    def __enter__(self) -> ProgressLines:
        if self._heartbeat is not None:
            self._heartbeat.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._heartbeat is not None:
            self._heartbeat.__exit__(kind, error, traceback)
        with self._lock:  # where each task ended, unless its last line showed it
            for task in self._tasks.values():
                if task.shown != (task.description, task.completed, task.total):
                    self._print(task)

    def add_task(self, description: str, total: float | None = 100.0, completed: float = 0, **fields: Any) -> TaskID:
        from rich.progress import TaskID

        with self._lock:
            task_id = TaskID(len(self._tasks))
            clock = StageClock(clock=self._clock)
            task = _LineTask(description, total, completed, fields, clock, LineSchedule(self._every_s, self._clock))
            self._tasks[task_id] = task
            self._restart(task)
            self._report(task)
            return task_id

    def update(
        self,
        task_id: TaskID,
        *,
        total: float | None = None,
        completed: float | None = None,
        advance: float | None = None,
        description: str | None = None,
        **fields: Any,
    ) -> None:
        with self._lock:
            task = self._tasks[task_id]
            task.total = task.total if total is None else total
            task.completed = task.completed if completed is None else completed
            task.completed += advance or 0
            task.fields.update(fields)
            if description is not None and description != task.description:
                task.description = description
                self._restart(task)
            task.clock.advance(
                int(task.completed - task.base), None if task.total is None else int(task.total - task.base)
            )
            self._report(task)

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def _restart(self, task: _LineTask) -> None:
        task.base = task.completed
        total = None if task.total is None else int(task.total - task.base)
        task.clock.start(task.description, total=total, unit=self.unit)

    def _report(self, task: _LineTask) -> None:
        # when the schedule says so (asked first: it learns of a new description), and at once
        # when the task completes
        due = task.schedule.due(task.description)
        if due or (task.complete and task.shown != (task.description, task.completed, task.total)):
            self._print(task)

    def _beat(self) -> None:
        with self._lock:
            for task in self._tasks.values():
                if task.schedule.due(task.description):
                    self._print(task)

    def _print(self, task: _LineTask) -> None:
        from rich.text import Text

        shown = replace(
            task.clock.snapshot(),
            stage=f"{self.label} {task.description}",
            done=int(task.completed),
            total=None if task.total is None else int(task.total),
        )
        if task.complete:  # "about 0s left" tells nothing
            shown = replace(shown, left_s=None)
        view = SimpleNamespace(description=task.description, fields=task.fields)
        extras = []
        for text_format in self._formats:
            try:
                extras.append(Text.from_markup(text_format.format(task=view)).plain)
            except (KeyError, AttributeError):  # a column of a field this task lacks
                continue
        line = ", ".join([shown.line(), *extras])
        self.console.print(
            f"[{self._clock() - self._started:6.0f}s] {line}", markup=False, highlight=False, soft_wrap=True
        )
        task.shown = (task.description, task.completed, task.total)
