"""Probe: where does the text a policy types come from: its goal, or a goal it trained on?

A task whose instances differ in a string (``Search for 'bitcoin price'``) is solved on an unseen
instance only if the policy copies that string from its goal into ``type('...')``. A policy that
memorised its training instances types their strings instead. This probe reads every ``type``
action of a run directory (``darwin run`` or ``darwin eval --run-dir``) and sorts its
text, per task template, into:

- ``goal``: a substring of the episode's own goal (case and spacing ignored, a trailing newline
  that submits it dropped);
- ``trained``: not that, but a substring of the goal of a task the policy trained on (``--trained``);
- ``other``: neither.

    python scripts/typed_text_source.py runs/few-shot-sft/eval --experiment examples/self_evolve.py \\
        --trained "$(cat runs/few-shot-sft/trained_tasks.txt)"

docs/results.md, "Self-evolution: the replaying flywheel and the few-shot SFT probe".
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from darwin.actions import Type
from darwin.run.load import load_experiment
from darwin.store import RunStore
from darwin.task_registry import resolve_tasks
from darwin.types import Task

SOURCES = ("goal", "trained", "other")


def normalise(text: str) -> str:
    """Case-folded, single-spaced, without the newline that submits a typed text."""
    return " ".join(text.split()).casefold()


def typed_text_source(typed: str, goal: str, trained_goals: Iterable[str]) -> str:
    """``'goal'``, ``'trained'`` or ``'other'`` for one typed text (see the module docstring).

    >>> typed_text_source("bitcoin price\\n", "Search for 'Bitcoin price' in Chrome.", [])
    'goal'
    >>> typed_text_source("world cup 2026", "Search for 'bitcoin price'.", ["Search for world cup 2026"])
    'trained'
    >>> typed_text_source("t hiking", "Search for 'bitcoin price'.", ["Search for hiking trails"])
    'other'
    """
    text = normalise(typed)
    if text and text in normalise(goal):
        return "goal"
    if text and any(text in normalise(g) for g in trained_goals):
        return "trained"
    return "other"


@dataclass
class TypedTextReport:
    """Counts of typed texts by source, per task template (the task id without its instance)."""

    by_template: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, template: str, source: str) -> None:
        self.by_template.setdefault(template, Counter())[source] += 1

    @property
    def total(self) -> Counter[str]:
        return sum(self.by_template.values(), Counter())

    def rows(self) -> list[str]:
        """A fixed-width table: one row per template and the total, counts and the goal's share."""
        lines = [f"{'template':<40} {'typed':>6} {'goal':>6} {'trained':>8} {'other':>6} {'goal %':>7}"]
        for name, counts in [*sorted(self.by_template.items()), ("all", self.total)]:
            n = sum(counts.values())
            share = 100 * counts["goal"] / n if n else 0.0
            lines.append(
                f"{name:<40} {n:>6} {counts['goal']:>6} {counts['trained']:>8} {counts['other']:>6} {share:>6.1f}%"
            )
        return lines


def typed_text_report(store: RunStore, trained_goals: Iterable[str]) -> TypedTextReport:
    """Every ``type`` action of every run in ``store``, sorted by :func:`typed_text_source`."""
    trained = list(trained_goals)
    report = TypedTextReport()
    tasks: dict[str, Task | None] = {}  # an evaluation runs each task many times: read it once
    for run in store.runs():
        for episode in store.episodes(run.run_id):
            if episode.task_id not in tasks:
                tasks[episode.task_id] = store.task(episode.task_id)
            task = tasks[episode.task_id]
            if task is None:
                raise ValueError(f"episode {episode.episode_id} names task {episode.task_id!r}, not in the database")
            template = task.template or task.id
            for step in store.steps(episode.episode_id):
                action = step.action
                if isinstance(action, Type):
                    report.add(template, typed_text_source(action.content, task.instruction, trained))
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a run directory with a run.db (a darwin run or darwin eval)")
    parser.add_argument("--trained", default="", help="comma-separated ids of the tasks the policy trained on")
    parser.add_argument("--experiment", help="an experiment file whose warm start's tasks (sft.tasks) count as trained")
    parser.add_argument("--preset", default="default")
    args = parser.parse_args(argv)
    if not (args.run_dir / "run.db").is_file():
        parser.error(f"{args.run_dir} has no run.db: pass the directory darwin run or darwin eval wrote")
    names = [n for n in args.trained.split(",") if n]
    if args.experiment is not None:
        names += load_experiment(args.experiment, args.preset).sft.tasks
    trained = [t.instruction for t in resolve_tasks(names)]
    store = RunStore.for_run_dir(args.run_dir)
    try:
        report = typed_text_report(store, trained)
    finally:
        store.close()
    print("\n".join(report.rows()))  # noqa: T201 - a script's report


if __name__ == "__main__":
    main()
