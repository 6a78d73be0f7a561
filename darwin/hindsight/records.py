"""Explorations in the run database: each is an episode like any other, and can be read back.

:func:`store_exploration` records an :class:`~darwin.hindsight.exploration.Exploration` as one
episode of a run (:class:`~darwin.store.RunStore`): its task is :func:`exploration_task` of the
app (id ``explore.<app id>``, source ``exploration``, the ``no_goal`` verifier: never a
success), its seed the explorer's, its steps the actions played in order. What makes the
exploration whole again is stored beside them: the phone's JSON state before the first action
(``episodes.start_state``) and right after each action (``steps.state_after``), and, when the
exploration kept screenshots, each step's screen before its action (``steps.screenshot_path``,
what an agent saw, as for any episode) and the screen after the last one
(``episodes.final_screenshot_path``). :func:`load_explorations` reads a run's explorations back,
equal to what was stored.

A SimPhone's JSON state is about 10 KB, so an exploration takes about 10 KB per step in the
database (about what a stored screenshot takes).

    >>> import asyncio
    >>> from darwin.envs.sim.env import SimPhoneEnv
    >>> from darwin.hindsight.exploration import explore
    >>> from darwin.store import RunStore
    >>> run = asyncio.run(explore(SimPhoneEnv(seed=0), "Settings", steps=5, seed=1))
    >>> store = RunStore("sqlite://")
    >>> run_id = store.start_run("explore", config=None)
    >>> episode_id = store_exploration(store, run_id, run)
    >>> store.episode(episode_id).task_id, load_explorations(store, run_id) == [run]
    ('explore.settings', True)
    >>> store.close()
"""

from __future__ import annotations

import uuid

import numpy as np

from darwin.actions import Action
from darwin.hindsight.exploration import (
    Exploration,
    ExplorationError,
    ExploredStep,
    app_id_of,
    exploration_goal,
)
from darwin.predicates import State
from darwin.store import RunStore
from darwin.store_rows import EpisodeRow
from darwin.types import (
    Decision,
    Observation,
    Phase,
    Task,
    Termination,
    TerminationReason,
    Trajectory,
    Transition,
    VerifierSpec,
)

__all__ = ["EXPLORATION_SOURCE", "exploration_task", "load_explorations", "store_exploration"]

EXPLORATION_SOURCE = "exploration"
"""The ``source`` of an exploration's task: how :func:`load_explorations` tells explorations from other episodes."""

# The store reads a transition's step, decision and termination, never its observation (the
# screen is passed beside it, as PNG bytes): an exploration's transitions carry no pixels.
_NO_PIXELS = np.zeros((0, 0, 3), np.uint8)


def exploration_task(app: str) -> Task:
    """The task an exploration of ``app`` (its launcher label) is stored under: no goal, never a success."""
    return Task(
        id=f"explore.{app_id_of(app)}",
        instruction=exploration_goal(app),
        app=app,
        verifier=VerifierSpec(predicate="no_goal"),
        source=EXPLORATION_SOURCE,
    )


def store_exploration(store: RunStore, run_id: str, exploration: Exploration) -> str:
    """Record ``exploration`` as one episode of run ``run_id``; returns the episode's id.

    Screenshots kept by the exploration go to the store's screenshot directory (a store without
    one refuses them: open it with :meth:`RunStore.for_run_dir`).
    """
    task = exploration_task(exploration.app)
    episode_id = f"explore-{uuid.uuid4().hex}"
    store.start_episode(
        run_id,
        episode_id,
        task,
        phone=exploration.phone,
        seed=exploration.explorer_seed,
        device_size=exploration.device_size,
        start_state=exploration.start_state,
    )
    # seen[i]: the screen before action i (what an agent saw at step i); seen[-1]: after the last
    seen = (exploration.start_screenshot, *(step.screenshot for step in exploration.steps))
    transitions = []
    for number, step in enumerate(exploration.steps):
        observation = Observation(
            screenshot=_NO_PIXELS,
            goal=task.instruction,
            device_size=exploration.device_size or (0, 0),
            task_id=task.id,
            step=number,
        )
        transition = Transition(
            episode_id=episode_id,
            task_id=task.id,
            step=number,
            phase=Phase.EXECUTION,
            observation=observation,
            decision=Decision(action=step.action),
        )
        store.record_step(transition, seen[number], state_after=step.state)
        transitions.append(transition)
    ended = Termination(TerminationReason.STEP_BUDGET, cause=f"explored {len(exploration.steps)} steps")
    store.finish_episode(
        Trajectory(episode_id, task, transitions, termination=ended, phone=exploration.phone), seen[-1]
    )
    return episode_id


def load_explorations(store: RunStore, run_id: str) -> list[Exploration]:
    """The explorations stored in run ``run_id`` (:func:`store_exploration`), in the order they were stored."""
    found = []
    for episode in store.episodes(run_id):
        task = store.task(episode.task_id)
        if task is not None and task.source == EXPLORATION_SOURCE:
            found.append(_exploration(store, episode, task.app))
    return found


def _exploration(store: RunStore, episode: EpisodeRow, app: str) -> Exploration:
    def broken(what: str) -> ExplorationError:
        return ExplorationError(
            f"episode {episode.episode_id} of run {episode.run_id} is an exploration without {what}; "
            "store explorations with darwin.hindsight.records.store_exploration"
        )

    def png(rel_path: str | None) -> bytes | None:
        return None if rel_path is None else store.screenshot_file(rel_path).read_bytes()

    start = episode.start_state if isinstance(episode.start_state, dict) else None
    rows = store.steps(episode.episode_id)
    if start is None and (not rows or rows[0].screenshot_path is None):
        raise broken("a start state")  # nor the screens a phone without a probe is explored by
    # a step's screenshot is the screen before its action; the next one's (or the final) is after it
    after = [row.screenshot_path for row in rows[1:]] + [episode.final_screenshot_path]
    steps = []
    for row, shot in zip(rows, after, strict=True):
        action: Action | None = row.action
        state: State | None = row.state_after if isinstance(row.state_after, dict) else None
        if action is None:
            raise broken(f"an action at step {row.step}")
        # states everywhere (a phone with a probe) or nowhere (one without, its screens kept)
        if (state is None) != (start is None):
            raise broken(f"a state at step {row.step}" if start is not None else "a start state")
        if start is None and shot is None:
            raise broken(f"a state or a screen after step {row.step}")
        steps.append(ExploredStep(action=action, state=state, screenshot=png(shot)))
    return Exploration(
        app=app,
        phone=episode.phone,
        start_state=start,
        steps=tuple(steps),
        explorer_seed=episode.seed,
        start_screenshot=png(rows[0].screenshot_path) if rows else None,
        device_size=episode.device_size,
    )
