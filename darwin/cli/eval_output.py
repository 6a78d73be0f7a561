"""What ``darwin eval`` shows: a progress bar while its episodes run, then the table of success
per task and the table of episode metrics per task (their rows come from
:class:`darwin.evaluate.EvalReport`). :mod:`darwin.cli.eval` prints them on its console.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from darwin.cli.common import credentials_fail_cleanly, progress_bar
from darwin.loop_thread import run_returning

if TYPE_CHECKING:
    from darwin.evaluate import EvalProtocol, EvalReport
    from darwin.types import Trajectory

__all__ = ["episode_metrics_table", "evaluate_with_progress", "success_table"]


def evaluate_with_progress(
    console: Console,
    description: str,
    total: int,
    evaluation: Callable[[Callable[[Trajectory], None]], Coroutine[Any, Any, EvalReport]],
) -> EvalReport:
    """Run ``evaluation`` under a progress bar of ``total`` episodes on ``console``; it is
    given the callback to call after each episode. A missing or rejected API key stops the
    command with one line."""
    with progress_bar(console, "eval", unit="episodes") as progress:
        bar = progress.add_task(description, total=total)
        with credentials_fail_cleanly():
            return run_returning(evaluation(lambda t: progress.advance(bar)))


def success_table(report: EvalReport, protocol: EvalProtocol, agent_spec: str, phones: int) -> Table:
    """Greedy success, pass@k (k = 1, 2, 4, 8 up to the samples), episodes, lost episodes and
    mean steps per task and overall."""
    from rich import box

    ks = [k for k in (1, 2, 4, 8) if k <= protocol.samples]
    table = Table(
        title=f"{agent_spec}: success per task on {phones} phone(s), "
        f"{'1 greedy + ' if protocol.greedy else ''}{protocol.samples} sampled episode(s) each",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        collapse_padding=True,
        caption_justify="left",
        caption="pass@1 is the sampled success; n: sampled episodes; lost: not scored (goal held at the start, "
        "infrastructure truncations, unverified, errors); steps: mean per sampled episode",
    )
    table.add_column("task", overflow="fold")
    for col in ("greedy", *(f"pass@{k}" for k in ks), "n", "lost", "steps"):
        table.add_column(col, justify="right", no_wrap=True)
    for row in report.success_rows(ks):
        table.add_row(*row)
    return table


def episode_metrics_table(report: EvalReport) -> Table:
    """The episode metrics per task in at most 80 columns (docs/evaluation.md, "Episode metrics")."""
    from rich import box

    from darwin.algos.task_metrics import stratum_counts

    table = Table(
        title="episode metrics per task",
        box=box.SIMPLE_HEAD,
        caption_justify="left",
        caption="n: measured episodes; SR success, PR progress, SE side effects (% of episodes); FC false "
        "completions, OT over-time episodes (counts); L: MobileGym stratum. Strata: "
        + ", ".join(f"{s} {n}" for s, n in stratum_counts(report.strata).items()),
    )
    table.add_column("task", overflow="fold")
    for col in ("n", "SR", "PR", "SE", "FC", "OT", "L"):
        table.add_column(col, justify="right", no_wrap=True)
    for row in report.metrics_rows():
        table.add_row(*row)
    return table
