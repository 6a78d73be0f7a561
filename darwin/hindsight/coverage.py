"""Coverage: the share of human-written goals that exploration ever reached (issue 45, item 5).

Hindsight tasks can only teach what an explorer reached. Coverage measures that ceiling on
tasks a person wrote (a split's held-out template instances): a task counts as **reached**
when some state an exploration of its app recorded satisfies the task's own rule verifier,
evaluated as :class:`~darwin.verifiers.rule.RuleVerifier` evaluates it (the registered
predicate, :func:`~darwin.predicates.resolve`, on the JSON state).

An exploration counts for a task only if it started where the task starts: the phone's initial
state with the task's setup applied (:func:`task_start_state`). A task with setup that no
exploration started from is reported as ``needs_setup``, not as missed; an information task
(its verifier wants an answer, which an explorer never gives) is reported as ``answer``.

    >>> import asyncio
    >>> from darwin.envs.sim.env import SimPhoneEnv
    >>> from darwin.hindsight.exploration import explore
    >>> from darwin.types import Task, VerifierSpec
    >>> run = asyncio.run(explore(SimPhoneEnv(seed=0), "Settings", steps=30, seed=1))
    >>> goal = Task(id="inversion-off", instruction="Turn off color inversion.", app="Settings",
    ...             verifier=VerifierSpec(predicate="state.equals",
    ...             params={"values": {"apps.settings.data.toggles.accessibility:Color inversion": False}}))
    >>> report = measure_coverage([run], [goal], SimPhoneEnv(seed=0).probe_state())
    >>> report.counts.reached, report.apps[0].templates[0].tasks[0].reached_at
    (1, (ReachedState(exploration=0, explorer_seed=1, step=7),))
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import orjson

from darwin.agents.base import Actor
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.setups import apply_setup
from darwin.hindsight.exploration import Exploration, explore
from darwin.predicates import State, resolve
from darwin.templates import TemplateSplit
from darwin.types import StateSetup, Task

__all__ = [
    "AppCoverage",
    "CoverageCount",
    "CoverageReport",
    "CoverageStatus",
    "ReachedState",
    "TaskCoverage",
    "TemplateCoverage",
    "explore_task_starts",
    "held_out_tasks",
    "is_answer_task",
    "measure_coverage",
    "task_start_state",
]

CoverageStatus = Literal["reached", "not_reached", "needs_setup", "unexplored", "answer"]
"""``reached``: a recorded state satisfies the verifier; ``not_reached``: explored from the
task's start, never satisfied; ``needs_setup``: the task has setup and no exploration started
from it; ``unexplored``: no exploration of its app from the plain phone; ``answer``: an
information task (the explorer never answers)."""


@dataclass(frozen=True)
class ReachedState:
    """The first state of one exploration where a task's verifier held."""

    exploration: int
    """The exploration's index in the list given to :func:`measure_coverage`."""
    explorer_seed: int | None
    """The explorer's seed of that exploration (``None``: not known)."""
    step: int
    """Actions played when it held (1: right after the first, the app's opening)."""


@dataclass(frozen=True)
class TaskCoverage:
    """Whether exploration reached one task's goal."""

    task_id: str
    template: str | None
    app: str
    instruction: str
    status: CoverageStatus
    explorations: int
    """The explorations checked: of the task's app, started from the task's start state."""
    reached_at: tuple[ReachedState, ...]
    """One entry per exploration that reached the goal, at its first such step."""


@dataclass(frozen=True)
class CoverageCount:
    """Tasks by status (they add up to ``tasks``), and templates with at least one instance reached."""

    tasks: int
    reached: int
    not_reached: int
    needs_setup: int
    unexplored: int
    answer: int
    templates: int
    templates_reached: int
    share: float
    """``reached / tasks`` (0.0 for no tasks)."""
    checked_share: float | None
    """``reached / (reached + not_reached)``: among the tasks exploration could have reached;
    ``None`` when there are none."""

    @staticmethod
    def of(tasks: Sequence[TaskCoverage]) -> CoverageCount:
        def count(status: CoverageStatus) -> int:
            return sum(t.status == status for t in tasks)

        reached, not_reached = count("reached"), count("not_reached")
        by_template: dict[str, bool] = {}
        for t in tasks:
            key = t.template or t.task_id
            by_template[key] = by_template.get(key, False) or t.status == "reached"
        return CoverageCount(
            tasks=len(tasks),
            reached=reached,
            not_reached=not_reached,
            needs_setup=count("needs_setup"),
            unexplored=count("unexplored"),
            answer=count("answer"),
            templates=len(by_template),
            templates_reached=sum(by_template.values()),
            share=reached / len(tasks) if tasks else 0.0,
            checked_share=reached / (reached + not_reached) if reached + not_reached else None,
        )


@dataclass(frozen=True)
class TemplateCoverage:
    """A template's instances (a task without a template stands alone, under its own id)."""

    template: str
    app: str
    tasks: tuple[TaskCoverage, ...]
    counts: CoverageCount


@dataclass(frozen=True)
class AppCoverage:
    """One app's templates, in the order their tasks came."""

    app: str
    templates: tuple[TemplateCoverage, ...]
    counts: CoverageCount


@dataclass(frozen=True)
class CoverageReport:
    """Coverage per app and template, and over every task (``counts``)."""

    apps: tuple[AppCoverage, ...]
    counts: CoverageCount
    explorations: int
    """How many explorations were given."""


def is_answer_task(task: Task) -> bool:
    """Whether ``task``'s verifier expects an answer (``answer.matches``, alone or in ``all.of``)."""
    _, params = resolve(task.verifier, task.id)
    return bool(params.answers())


def task_start_state(task: Task, initial_state: State) -> State:
    """Where ``task`` starts: a copy of ``initial_state`` with the task's setup applied."""
    return apply_setup(copy.deepcopy(initial_state), task.setup)


def _state_key(state: State) -> bytes:
    return orjson.dumps(state, option=orjson.OPT_SORT_KEYS)


def _task_coverage(task: Task, runs: Sequence[tuple[int, Exploration]], status: CoverageStatus) -> TaskCoverage:
    reached: list[ReachedState] = []
    if status == "not_reached":
        predicate, params = resolve(task.verifier, task.id)
        for index, run in runs:
            _, states = run.states("the coverage measure")
            step = next((n for n, state in enumerate(states, 1) if predicate.fn(state, params).success), None)
            if step is not None:
                reached.append(ReachedState(exploration=index, explorer_seed=run.explorer_seed, step=step))
        status = "reached" if reached else "not_reached"
    return TaskCoverage(
        task_id=task.id,
        template=task.template,
        app=task.app,
        instruction=task.instruction,
        status=status,
        explorations=len(runs),
        reached_at=tuple(reached),
    )


def measure_coverage(
    explorations: Sequence[Exploration], tasks: Iterable[Task], initial_state: State
) -> CoverageReport:
    """For each task, whether any recorded state of an exploration of its app, started from the
    task's start state, satisfies its verifier.

    Args:
        explorations: the explorer's results (:func:`~darwin.hindsight.exploration.explore`),
            from the plain phone and, for tasks with setup, from their start states.
        tasks: the goals to check (e.g. :func:`held_out_tasks`).
        initial_state: the phone's state before any task setup (``SimPhoneEnv(seed).probe_state()``
            of the phone the explorations ran on); a task starts from it with its setup applied.
    """
    by_start: dict[tuple[str, bytes], list[tuple[int, Exploration]]] = {}
    for index, run in enumerate(explorations):
        start, _ = run.states("the coverage measure")
        by_start.setdefault((run.app, _state_key(start)), []).append((index, run))
    grouped: dict[str, dict[str, list[TaskCoverage]]] = {}
    for task in tasks:
        runs = by_start.get((task.app, _state_key(task_start_state(task, initial_state))), [])
        status: CoverageStatus
        if is_answer_task(task):
            status = "answer"
        elif not runs:
            status = "needs_setup" if task.setup else "unexplored"
        else:
            status = "not_reached"
        covered = _task_coverage(task, runs if status == "not_reached" else (), status)
        grouped.setdefault(task.app, {}).setdefault(task.template or task.id, []).append(covered)
    apps = []
    for app, by_template in grouped.items():
        templates = tuple(
            TemplateCoverage(template=name, app=app, tasks=tuple(covered), counts=CoverageCount.of(covered))
            for name, covered in by_template.items()
        )
        apps.append(
            AppCoverage(
                app=app, templates=templates, counts=CoverageCount.of([t for tp in templates for t in tp.tasks])
            )
        )
    every = [t for app_coverage in apps for tp in app_coverage.templates for t in tp.tasks]
    return CoverageReport(apps=tuple(apps), counts=CoverageCount.of(every), explorations=len(explorations))


def held_out_tasks(split: TemplateSplit, apps: Sequence[str]) -> list[Task]:
    """The split's held-out instances of ``apps`` (launcher labels): a held-out app's every
    template (``unseen_apps``), a training app's held-out templates (``unseen_templates``)."""
    chosen: list[Task] = []
    for app in apps:
        set_name = "unseen_apps" if app in split.held_out_apps else "unseen_templates"
        chosen += [t for t in split.sets[set_name] if t.app == app]
    return chosen


async def explore_task_starts(
    tasks: Sequence[Task],
    steps: int,
    explorer_seeds: Sequence[int],
    phone_seed: int = 0,
    with_setups: bool = True,
    make_explorer: Callable[[int], Actor] | None = None,
    observation_size: tuple[int, int] = (252, 560),
    keep_screenshots: bool = False,
) -> list[Exploration]:
    """An explorer on each app of ``tasks``, once per seed of ``explorer_seeds``, from a fresh
    SimPhone of ``phone_seed``; with ``with_setups``, also from each distinct start state the
    tasks' setups give (an information task's setup is skipped: no exploration reaches an answer).

    ``make_explorer(seed)`` makes a fresh explorer for each exploration (e.g. a
    :class:`~darwin.hindsight.novelty.NoveltyExplorer` around an actor made with that seed);
    ``None``: the random agent seeded ``seed``. ``observation_size`` is the screenshot size the
    explorer is shown; with ``keep_screenshots`` the explorations keep the screens (to store them)."""
    initial = SimPhoneEnv(seed=phone_seed).probe_state()
    starts: dict[tuple[str, bytes], tuple[str, tuple[StateSetup, ...]]] = {}
    for task in tasks:
        setup = task.setup if with_setups and not is_answer_task(task) else ()
        # Setups that leave the phone as it was (or as another did) share their explorations.
        key = (task.app, _state_key(task_start_state(task.model_copy(update={"setup": setup}), initial)))
        starts.setdefault(key, (task.app, setup))
    found: list[Exploration] = []
    for app, setup in starts.values():
        for seed in explorer_seeds:
            env = SimPhoneEnv(seed=phone_seed)
            env.apply_setup(setup)
            actor = None if make_explorer is None else make_explorer(seed)
            found.append(
                await explore(
                    env,
                    app,
                    steps=steps,
                    actor=actor,
                    seed=seed,
                    observation_size=observation_size,
                    keep_screenshots=keep_screenshots,
                )
            )
    return found
