"""``darwin compare``: curves and paired tables of several runs or evaluations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, cast

import click
from rich.console import Console

from darwin.run.figures import FIGURE_METRICS

if TYPE_CHECKING:
    from darwin.run.figures import FigureMetric


console = Console()


@click.command("compare")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--plot",
    "plot_path",
    default="compare.png",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="PNG of the figure (--metric) over every run",
)
@click.option(
    "--window",
    default=20,
    show_default=True,
    type=click.IntRange(1),
    help="episodes in the sliding mean and in the first/last comparison",
)
@click.option(
    "--metric",
    default="success",
    show_default=True,
    type=click.Choice(FIGURE_METRICS),
    help="the figure: success, steps of successful episodes, success per lifecycle phase, "
    "or training steps against wall time (docs/results.md has one of each)",
)
@click.option(
    "--pool-seeds",
    is_flag=True,
    help="one curve per variant: runs named <variant>-s<N> are pooled (their points sorted by training step); with "
    "--per-set, a table of each variant's mean over seeds with a two-stage bootstrap interval",
)
@click.option(
    "--per-set",
    is_flag=True,
    help="arms of one experiment file (examples/self_evolve.py's presets): each run's paired gain on the training "
    "tasks every run evaluated and on each evaluation.task_sets set, whole and per app, and every run against the first",
)
def compare_cmd(
    run_dirs: tuple[str, ...], plot_path: str, window: int, metric: str, pool_seeds: bool, per_set: bool
) -> None:
    """Compare finished `darwin run` directories (e.g. seeds): a Markdown table, the paired
    differences of their evaluations (final against warm start in each run, every run's final
    against the first's) and one figure. Given `darwin eval --json` files instead: each one's
    greedy, sampled and pass@k success, and every later file against the first, paired. With
    --per-set: runs of one experiment file compared on each evaluated task set and app, and with
    --pool-seeds also each arm's mean over its seeds."""
    from darwin.run.figures import figure_table, plot_figure, read_runs
    from darwin.run.report import compare_eval_files, compare_runs, compare_task_sets

    if per_set:
        try:
            console.print(
                compare_task_sets(run_dirs, pool_seeds=pool_seeds), highlight=False, markup=False, soft_wrap=True
            )
        except (FileNotFoundError, ValueError, KeyError) as exc:
            raise click.ClickException(str(exc)) from None
        return

    files = [Path(p).is_file() for p in run_dirs]
    if any(files):
        if not all(files):
            raise click.BadParameter(
                "pass either run directories or `darwin eval --json` files, not both", param_hint="RUN_DIRS"
            )
        try:
            console.print(compare_eval_files(run_dirs), highlight=False, markup=False, soft_wrap=True)
        except (ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
            raise click.ClickException(f"{exc}") from None
        return

    own_figure = metric != "success" or pool_seeds
    try:
        _, table = compare_runs(run_dirs, None if own_figure else plot_path, window)
        if own_figure:
            figure = cast("FigureMetric", metric)
            runs = read_runs(run_dirs)  # once, for the figure and its table
            plot_figure(runs, plot_path, figure, window=window, pool_seeds=pool_seeds)
            table += f"\n{metric}:\n\n" + figure_table(runs, figure, window)
    except (FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    console.print(table, highlight=False, markup=False, soft_wrap=True)
    console.print(f"plot: {plot_path}", highlight=False)
