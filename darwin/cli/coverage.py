"""``darwin tasks coverage``: the share of a split's held-out goals that random exploration reached.

darwin tasks coverage                                   # the default split's held-out apps
darwin tasks coverage --apps training --steps 200       # the training apps' held-out templates
darwin tasks coverage --apps Clock,Notes --json         # chosen apps, as JSON
"""

from __future__ import annotations

import asyncio
import dataclasses
import json

import click
from rich.console import Console
from rich.table import Table

__all__ = ["tasks_coverage"]

console = Console()


def _seeds(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise click.BadParameter(f"{text!r}: write comma-separated integers, e.g. 0,1,2") from None
    if not seeds:
        raise click.BadParameter("give at least one seed, e.g. 0,1,2")
    return seeds


@click.command("coverage")
@click.option("--split-seed", default=0, show_default=True, type=int, help="the split (SplitConfig seed)")
@click.option(
    "--apps",
    "app_choice",
    default="held-out",
    show_default=True,
    help="'held-out' (the split's held-out apps), 'training' (the training apps' held-out templates), 'all', "
    "or comma-separated app labels",
)
@click.option("--steps", default=200, show_default=True, type=click.IntRange(min=1), help="actions per exploration")
@click.option(
    "--explorer-seeds", default="0,1,2", show_default=True, help="the random explorer's seeds, comma-separated"
)
@click.option("--phone-seed", default=0, show_default=True, type=int, help="the SimPhone seed explored")
@click.option(
    "--setups/--no-setups",
    default=True,
    show_default=True,
    help="also explore from each task's setup (--no-setups: tasks with setup are reported as needing it)",
)
@click.option("--json", "as_json", is_flag=True, help="print the report as one JSON object")
def tasks_coverage(
    split_seed: int, app_choice: str, steps: int, explorer_seeds: str, phone_seed: int, setups: bool, as_json: bool
) -> None:
    """Explore each app with the random agent (no task) and count the split's held-out goals
    whose rule verifier held in some recorded state (docs/self-evolution.md).

    A held-out app's goals are all its templates' instances; a training app's, its held-out
    templates' instances. Information tasks (an answer) are counted apart: an explorer never answers.
    """
    from darwin.envs.sim.env import SimPhoneEnv
    from darwin.hindsight.coverage import explore_task_starts, held_out_tasks, measure_coverage
    from darwin.templates import SplitConfig, split_templates

    seeds = _seeds(explorer_seeds)
    split = split_templates(SplitConfig(seed=split_seed))
    training = sorted({t.app for t in split.sets["unseen_templates"]})
    named = {"held-out": list(split.held_out_apps), "training": training, "all": [*split.held_out_apps, *training]}
    apps = named.get(app_choice) or [a.strip() for a in app_choice.split(",") if a.strip()]
    unknown = [a for a in apps if a not in split.held_out_apps and a not in training]
    if unknown:
        raise click.BadParameter(
            f"{', '.join(unknown)}: no held-out goals in split {split_seed}; apps: "
            f"{', '.join([*split.held_out_apps, *training])}",
            param_hint="--apps",
        )
    goals = held_out_tasks(split, apps)
    explorations = asyncio.run(explore_task_starts(goals, steps, seeds, phone_seed=phone_seed, with_setups=setups))
    report = measure_coverage(explorations, goals, SimPhoneEnv(seed=phone_seed).probe_state())
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(report), ensure_ascii=False))
        return
    for app in report.apps:
        table = Table(
            "template", "tasks", "reached", "missed", "setup", "answer", "first seed:step", box=None, pad_edge=False
        )
        table.columns[0].no_wrap = True
        table.title = f"{app.app} ({'held-out app' if app.app in split.held_out_apps else 'held-out templates'})"
        for template in app.templates:
            firsts = sorted((r.step, r.explorer_seed) for task in template.tasks for r in task.reached_at)
            c = template.counts
            table.add_row(
                template.template,
                str(c.tasks),
                str(c.reached),
                str(c.not_reached),
                str(c.needs_setup),
                str(c.answer),
                ", ".join(f"{seed}:{step}" for step, seed in firsts[:3]),
            )
        console.print(table)
        console.print()
    summary = Table(
        "app", "tasks", "reached", "missed", "setup", "answer", "share", "checked", "tpl", box=None, pad_edge=False
    )
    summary.columns[0].no_wrap = True
    for name, c in [(a.app, a.counts) for a in report.apps] + [("all", report.counts)]:
        summary.add_row(
            name,
            str(c.tasks),
            str(c.reached),
            str(c.not_reached),
            str(c.needs_setup),
            str(c.answer),
            f"{c.share:.0%}",
            "-" if c.checked_share is None else f"{c.checked_share:.0%}",
            f"{c.templates_reached}/{c.templates}",
        )
    console.print(summary)
    console.print(
        f"{report.explorations} explorations of {steps} random steps (explorer seeds {explorer_seeds}, phone seed "
        f"{phone_seed}{', from each setup too' if setups else ''}). missed: explored from the task's start, never "
        "reached; setup: no exploration from its setup; answer: an information task; share: reached / tasks; "
        "checked: reached / (reached + missed); tpl: templates with an instance reached / templates",
        highlight=False,
    )
