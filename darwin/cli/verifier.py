"""``darwin verifier``: data, training and evaluation of the learned verifier (stage 3).

    darwin verifier data  --out runs/verifier/data --tasks paper16 --episodes 10
    darwin verifier train --data runs/verifier/data --out runs/verifier/model
    darwin verifier eval  --model runs/verifier/model --data runs/verifier/data

The model folder is then any experiment's reward: ``verifier=ComponentSpec(name="learned",
kwargs={"path": "runs/verifier/model"})`` (or ``--set verifier.name=learned --set
verifier.kwargs.path=...``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import click
import numpy as np

from darwin.algos.classification import Interval, MetricsWithIntervals
from darwin.cli.common import parse_size

__all__ = ["verifier"]


def _table(rows: list[tuple[str, int, int, MetricsWithIntervals]], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    def cell(i: Interval) -> str:
        return "-" if np.isnan(i.value) else f"{i.value:.3f} [{i.low:.2f}, {i.high:.2f}]"

    table = Table(title=title)
    for name in ("split", "examples", "positives", "accuracy", "precision", "recall", "F1"):
        table.add_column(name, justify="left" if name == "split" else "right")
    for split, n, pos, m in rows:
        table.add_row(split, str(n), str(pos), *(cell(i) for i in (m.accuracy, m.precision, m.recall, m.f1)))
    Console().print(table)


@click.group()
def verifier() -> None:
    """Learned verifier: generate labelled screens, train, evaluate."""


@verifier.command("data")
@click.option(
    "--out", required=True, type=click.Path(file_okay=False), help="dataset folder (appended to if it exists)"
)
@click.option("--tasks", "task_names", default="paper16", show_default=True, help="comma-separated task ids or sets")
@click.option("--episodes", default=10, show_default=True, type=click.IntRange(1), help="episodes per task and agent")
@click.option("--seed", default=0, show_default=True, type=int, help="phones, agents' randomness")
@click.option(
    "--checkpoint",
    default=None,
    type=click.Path(file_okay=False, exists=True),
    help="a warm start: adds its episodes (and sets the screen size)",
)
@click.option("--budget", default=12, show_default=True, type=click.IntRange(1, 256), help="steps per episode")
@click.option(
    "--screen-size",
    default=None,
    help="WxH of the stored screens  [default: the checkpoint's observation size, else 168x364]; "
    "a multiple of it lets the verifier read finer detail than the agent",
)
@click.option(
    "--from-run",
    "from_runs",
    multiple=True,
    type=click.Path(file_okay=False, exists=True),
    help="instead of playing: the final screens of a finished run directory, labelled by its stored verdicts (repeatable)",
)
@click.option(
    "--verifier-kind",
    default=None,
    help="with --from-run: use the verdicts of this verifier (rule, llm_judge, ...), or human: the labels given in `darwin view`  [default: the last stored]",
)
@click.option(
    "--keep-hidden-successes",
    is_flag=True,
    help="also keep screens where the goal holds while a different app (or the launcher) is in front from "
    "the one where it was reached: the state is done, the screen shows nothing of it; dropped by default",
)
def data_cmd(
    out: str,
    task_names: str,
    episodes: int,
    seed: int,
    checkpoint: str | None,
    budget: int,
    screen_size: str | None,
    from_runs: tuple[str, ...],
    verifier_kind: str | None,
    keep_hidden_successes: bool,
) -> None:
    """Play episodes on SimPhones and label every screen with the task's rule predicate, or
    take the labelled final screens of finished runs (``--from-run``)."""
    from darwin.task_registry import resolve_tasks
    from darwin.verifiers.learned.data import (
        DatasetWriter,
        examples_from_run,
        generate_verifier_data,
        load_examples,
    )

    if from_runs:
        writer = DatasetWriter(out)
        added = sum(writer.write(examples_from_run(run, verifier_kind)) for run in from_runs)
        if not writer.seen:
            kind = f"{verifier_kind!r} " if verifier_kind else ""
            raise click.ClickException(
                f"no labelled final screen in {', '.join(from_runs)}: no finished episode has a stored final screen "
                f"and a decided {kind}execution verdict (runs stored before schema 3 keep no final screens)"
            )
        examples = load_examples(out)
        click.echo(
            f"{added} new examples from {len(from_runs)} run(s); {out} holds {len(examples)} ({sum(e.label for e in examples)} positive)"
        )
        return

    size = (168, 364)
    if checkpoint is not None:
        from darwin.agents.warm_start import load_warm_start

        size = load_warm_start(checkpoint).observation_size
    if screen_size is not None:
        size = parse_size(screen_size)
    tasks = resolve_tasks([t.strip() for t in task_names.split(",") if t.strip()])
    total_episodes = len(tasks) * episodes * (5 if checkpoint else 4)
    with click.progressbar(length=total_episodes, label="episodes") as bar:
        added = generate_verifier_data(
            out,
            tasks,
            episodes_per_agent=episodes,
            seed=seed,
            observation_size=size,
            budget=budget,
            warm_start=checkpoint,
            on_episode=lambda _eid, _n: bar.update(1),
            keep_hidden_successes=keep_hidden_successes,
        )
    examples = load_examples(out)
    positives = sum(e.label for e in examples)
    click.echo(f"{added} new examples; {out} holds {len(examples)} ({positives} positive)")


@verifier.command("train")
@click.option("--data", required=True, type=click.Path(file_okay=False, exists=True), help="a dataset folder")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="where the model and report.json go")
@click.option(
    "--checkpoint",
    required=True,
    type=click.Path(file_okay=False, exists=True),
    help="the warm start (backbone for --init agent, screen size)",
)
@click.option(
    "--init",
    default="agent",
    show_default=True,
    type=click.Choice(["agent", "fresh"]),
    help="agent: the warm start's backbone (stage 3); fresh: a new tiny model",
)
@click.option(
    "--train-tasks",
    default="base8",
    show_default=True,
    help="comma-separated task ids or sets that train it; other tasks are held out",
)
@click.option("--epochs", default=4, show_default=True, type=click.IntRange(1, 100))
@click.option(
    "--lr",
    default=2e-4,
    show_default=True,
    type=click.FloatRange(0.0, 1.0, min_open=True),
    help="backbone learning rate",
)
@click.option(
    "--head-lr",
    default=1e-3,
    show_default=True,
    type=click.FloatRange(0.0, 1.0, min_open=True),
    help="head learning rate",
)
@click.option("--batch-size", default=16, show_default=True, type=click.IntRange(1, 512))
@click.option("--seed", default=0, show_default=True, type=int)
@click.option(
    "--history/--no-history",
    default=True,
    show_default=True,
    help="also read the screen before each example's last action with that action marked on it "
    "(--no-history: the goal and the current screen only)",
)
@click.option(
    "--swapped-goals",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0.0, 1.0),
    help="each epoch, show this share of the training positives again under another task's goal, "
    "labelled not achieved (teaches reading the goal)",
)
def train_cmd(
    data: str,
    out: str,
    checkpoint: str,
    init: str,
    train_tasks: str,
    epochs: int,
    lr: float,
    head_lr: float,
    batch_size: int,
    seed: int,
    history: bool,
    swapped_goals: float,
) -> None:
    """Fit the classifier, pick its threshold on validation data, report the held-out splits."""
    from darwin.verifiers.learned.training import VerifierTrainConfig, train_verifier

    config = VerifierTrainConfig(
        init=init,
        checkpoint=checkpoint,
        epochs=epochs,
        lr=lr,
        head_lr=head_lr,
        batch_size=batch_size,
        seed=seed,
        train_tasks=tuple(t.strip() for t in train_tasks.split(",") if t.strip()),
        history=history,
        swapped_goals=swapped_goals,
    )
    report = train_verifier(
        data,
        out,
        config,
        on_epoch=lambda log: click.echo(
            f"epoch {log.epoch}: loss {log.loss:.4f}  val F1 {log.val_f1:.3f} at threshold {log.threshold:.3f}  ({log.seconds:.0f} s)"
        ),
    )
    _table(
        [(s.split, s.examples, s.positives, s.metrics) for s in report.splits],
        f"learned verifier (epoch {report.best_epoch}, threshold {report.threshold:.3f})",
    )
    click.echo(f"model and report.json in {out}")


@verifier.command("audit")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--seed", default=0, show_default=True, type=int, help="bootstrap resamples")
def audit_cmd(run_dir: str, seed: int) -> None:
    """How a reward verifier did during a run, against the verifier that audited it
    (``composite`` in ``audit`` mode, e.g. the learned verifier audited by the rule): its
    precision and recall per task and overall, the auditor's verdict taken as the truth."""
    from darwin.database import DB_FILENAME
    from darwin.verifiers.audit import audit_metrics, audit_pairs

    if not (Path(run_dir) / DB_FILENAME).is_file():
        raise click.ClickException(f"{run_dir}: no {DB_FILENAME}; pass a run directory")
    pairs = audit_pairs(run_dir)
    if not pairs:
        raise click.ClickException(f"{run_dir}: no audited verdicts; train with verifier composite, mode 'audit'")
    _table(audit_metrics(pairs, seed), f"reward verdicts of {run_dir} against their auditor")


@verifier.command("eval")
@click.option("--model", "model_dir", required=True, type=click.Path(file_okay=False, exists=True))
@click.option("--data", required=True, type=click.Path(file_okay=False, exists=True))
@click.option("--train-tasks", default=None, help="splits as in training  [default: the model's training tasks]")
@click.option("--threshold", default=None, type=click.FloatRange(0.0, 1.0), help="[default: the model's]")
@click.option(
    "--by",
    "rows_by",
    default="split",
    show_default=True,
    type=click.Choice(["split", "task"]),
    help="split: the training splits; task: a row per task and one for all (data the model never saw, "
    "e.g. a run's final screens from darwin verifier data --from-run)",
)
def eval_cmd(
    model_dir: str, data: str, train_tasks: str | None, threshold: float | None, rows_by: Literal["split", "task"]
) -> None:
    """Measure a trained verifier on a dataset, split as in training or by task (with the previous
    screens and marked last actions when the model was trained with them)."""
    from darwin.verifiers.learned.training import evaluate_saved_classifier

    chosen, reports = evaluate_saved_classifier(
        model_dir,
        data,
        train_tasks=train_tasks.split(",") if train_tasks else None,
        threshold=threshold,
        by=rows_by,
    )
    _table(
        [(r.split, r.examples, r.positives, r.metrics) for r in reports],
        f"{model_dir} on {data} (threshold {chosen:.3f})",
    )
    figures = {r.split: {"examples": r.examples, "positives": r.positives, "f1": r.metrics.f1.value} for r in reports}
    Path(model_dir, "eval.json").write_text(json.dumps(figures, indent=2), encoding="utf-8")
