"""``darwin tasks coverage``: the share of a split's held-out goals that exploration reached.

darwin tasks coverage                                   # the default split's held-out apps, random agent
darwin tasks coverage --apps training --steps 200       # the training apps' held-out templates
darwin tasks coverage --apps Clock,Notes --json         # chosen apps, as JSON
darwin tasks coverage --explorer novelty                # the random agent's proposals, novelty picks
darwin tasks coverage --explorer novelty --agent tiny:runs/sft --temperature 1.5
darwin tasks coverage --run-dir runs/explore            # also store the explorations (run.db)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.table import Table

from darwin.agents.actors import AgentChoiceError
from darwin.cli.common import credentials_fail_cleanly
from darwin.loop_thread import run_returning

if TYPE_CHECKING:
    from darwin.agents.actors import Actors
    from darwin.agents.base import Actor
    from darwin.hindsight.exploration import Exploration

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
@click.option(
    "--explorer",
    type=click.Choice(["plain", "novelty"]),
    default="plain",
    show_default=True,
    help="plain: the agent's own actions; novelty: of --candidates proposals of the agent, the one expected "
    "to lead to the screen seen least (darwin.hindsight.novelty)",
)
@click.option(
    "--agent",
    "agent_spec",
    default=None,
    help="who proposes the actions, as `darwin eval --agent` names it (random | tiny:<checkpoint> | "
    "litellm:<model> | module:function), built with each explorer seed as its seed  "
    "[default: the random agent seeded with each explorer seed]",
)
@click.option(
    "--temperature",
    default=None,
    type=click.FloatRange(0.0, 2.0),
    help="--agent's sampling temperature (tiny: default 1.0; a high one explores more widely)",
)
@click.option(
    "--candidates",
    default=8,
    show_default=True,
    type=click.IntRange(min=1),
    help="--explorer novelty: proposals per step",
)
@click.option(
    "--run-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="also store each exploration as an episode in <run-dir>/run.db (darwin.hindsight.records)",
)
@click.option(
    "--keep-screenshots",
    is_flag=True,
    help="--run-dir: also store each step's screen (PNG, content-addressed under <run-dir>/screenshots)",
)
@click.option("--json", "as_json", is_flag=True, help="print the report as one JSON object")
def tasks_coverage(
    split_seed: int,
    app_choice: str,
    steps: int,
    explorer_seeds: str,
    phone_seed: int,
    setups: bool,
    explorer: str,
    agent_spec: str | None,
    temperature: float | None,
    candidates: int,
    run_dir: str | None,
    keep_screenshots: bool,
    as_json: bool,
) -> None:
    """Explore each app (no task) and count the split's held-out goals whose rule verifier held
    in some recorded state (docs/self-evolution.md).

    A held-out app's goals are all its templates' instances; a training app's, its held-out
    templates' instances. Information tasks (an answer) are counted apart: an explorer never answers.
    """
    from darwin.envs.sim.env import SimPhoneEnv
    from darwin.hindsight.coverage import explore_task_starts, held_out_tasks, measure_coverage
    from darwin.templates import SplitConfig, split_templates

    seeds = _seeds(explorer_seeds)
    if keep_screenshots and run_dir is None:
        raise click.BadParameter("--keep-screenshots keeps them in the run database: pass --run-dir too")
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
    actors = _actors_per_seed(agent_spec, seeds, temperature)
    observation_size = next((a.observation_size for a in actors.values() if a.observation_size), (252, 560))
    make_explorer = _explorer_maker(explorer, actors, candidates)

    async def explore_all() -> list[Exploration]:
        try:
            return await explore_task_starts(
                goals,
                steps,
                seeds,
                phone_seed=phone_seed,
                with_setups=setups,
                make_explorer=make_explorer,
                observation_size=observation_size,
                keep_screenshots=keep_screenshots,
            )
        finally:
            for built in actors.values():
                if built.aclose is not None:
                    await built.aclose()

    with credentials_fail_cleanly():
        explorations = run_returning(explore_all())
    who = f"{'novelty-picked ' if explorer == 'novelty' else ''}{agent_spec or 'random'}"
    if run_dir is not None:
        stored = _store(run_dir, f"explore {who}, {steps} steps, seeds {explorer_seeds}", explorations)
        click.echo(stored, err=as_json)
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
    proposals = f"{candidates} proposals per step of " if explorer == "novelty" else ""
    console.print(
        f"{report.explorations} explorations of {steps} steps by the {explorer} explorer ({proposals}"
        f"{agent_spec or 'the random agent'}; explorer seeds {explorer_seeds}, phone seed "
        f"{phone_seed}{', from each setup too' if setups else ''}). missed: explored from the task's start, never "
        "reached; setup: no exploration from its setup; answer: an information task; share: reached / tasks; "
        "checked: reached / (reached + missed); tpl: templates with an instance reached / templates",
        highlight=False,
    )


def _actors_per_seed(agent_spec: str | None, seeds: tuple[int, ...], temperature: float | None) -> dict[int, Actors]:
    """``--agent``'s actors, built as ``darwin eval`` builds them, once per explorer seed (none:
    the random agent, which :func:`~darwin.hindsight.exploration.explore` makes itself)."""
    from darwin.run.build import build_actors

    if agent_spec is None:
        if temperature is not None:
            raise click.BadParameter("the random agent samples no model: pass --agent too", param_hint="--temperature")
        return {}
    try:
        with credentials_fail_cleanly():
            return {seed: build_actors(agent_spec, seed, phones=1, temperature=temperature) for seed in seeds}
    except AgentChoiceError as exc:
        raise click.BadParameter(str(exc), param_hint=exc.option) from None


def _explorer_maker(explorer: str, actors: dict[int, Actors], candidates: int) -> Callable[[int], Actor] | None:
    """A fresh explorer per exploration: ``--agent``'s actor made with the seed (or the random
    agent), its model's requests seeded from it, wrapped in a novelty explorer with ``--explorer novelty``."""
    from darwin.agents.scripted import RandomActor
    from darwin.hindsight.novelty import NoveltyExplorer
    from darwin.types import EpisodeSampling

    if explorer == "plain" and not actors:
        return None  # explore's own random agent, seeded with each explorer seed

    def make(seed: int) -> Actor:
        actor = actors[seed].make(0) if actors else RandomActor(seed=seed)
        actor.use_sampling(EpisodeSampling(seed=seed))  # each exploration's requests: seeded, order-free
        return NoveltyExplorer(actor, candidates=candidates) if explorer == "novelty" else actor

    return make


def _store(run_dir: str, name: str, explorations: list[Exploration]) -> str:
    """Store ``explorations`` as one run's episodes in ``<run_dir>/run.db``; what was stored, in words."""
    from darwin.hindsight.records import store_exploration
    from darwin.store import RunStore

    with RunStore.for_run_dir(run_dir) as store:
        run_id = store.start_run(name, config=None)
        for exploration in explorations:
            store_exploration(store, run_id, exploration)
    return f"stored {len(explorations)} explorations as run {run_id} in {run_dir}/run.db"
