"""The ``darwin`` command line: one module per command group below :mod:`darwin.cli`."""

from __future__ import annotations

import logging
import os

import click
from rich.console import Console
from rich.logging import RichHandler

from darwin.cli.bench import bench
from darwin.cli.compare import compare_cmd
from darwin.cli.coverage import tasks_coverage
from darwin.cli.eval import eval_cmd
from darwin.cli.judge import judge
from darwin.cli.phones import paper_path, phones, serve_policy
from darwin.cli.run import run_cmd
from darwin.cli.sft import sft_cmd
from darwin.cli.tasks import tasks
from darwin.cli.verifier import verifier
from darwin.cli.view import view_cmd

console = Console()


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), format="%(message)s", handlers=[RichHandler(console=console, show_path=False)]
    )


@click.group()
@click.option(
    "--log-level", default="warning", type=click.Choice(["debug", "info", "warning", "error"]), show_default=True
)
def main(log_level: str) -> None:
    """Darwin: train mobile GUI agents with online multi-turn RL."""
    # transformers' and huggingface_hub's own progress bars ("Loading weights") would cut through
    # darwin's progress lines; they read this when first imported (a user's own setting wins).
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    _setup_logging(log_level)


tasks.add_command(tasks_coverage)
main.add_command(tasks)
main.add_command(eval_cmd)
main.add_command(sft_cmd)
main.add_command(run_cmd)
main.add_command(compare_cmd)
main.add_command(phones)
main.add_command(serve_policy)
main.add_command(paper_path)
main.add_command(bench)
main.add_command(verifier)
main.add_command(judge)
main.add_command(view_cmd)
