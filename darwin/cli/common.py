"""What the ``darwin`` commands share: parsers of command-line values (click callbacks call
them), the ``--set`` option, loading an experiment for a command, and clean credential errors.

>>> parse_size("168x364"), parse_int_list("1, 8,32", "batch sizes")
((168, 364), [1, 8, 32])
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, ProgressColumn

    from darwin.run.config import ExperimentConfig

__all__ = [
    "credentials_fail_cleanly",
    "experiment_overrides",
    "load_experiment_for_command",
    "parse_int_list",
    "parse_size",
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


def progress_bar(console: Console, label: str, *fields: ProgressColumn, time_remaining: bool = False) -> Progress:
    """The commands' progress bar on ``console``, kept on screen when done: ``label`` in bold,
    the task's description, the bar, done/total, the ``fields`` columns, the time elapsed (and
    the time remaining with ``time_remaining``)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

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
