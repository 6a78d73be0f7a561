"""Exploration: an actor plays an app with no task, and every state it reached is recorded.

The explorer opens the app, then lets the actor choose ``steps`` actions. There is no goal,
so nothing is verified and an action that would end an episode (``finished``, ``answer``) is
not played. When an action leaves the app (home, another app), the explorer's next action
opens it again: the random agent opens another app one step in twelve, and an exploration
meant for one app would otherwise spend most of its steps elsewhere. The re-opening is one of
the explorer's actions, so it is part of any demonstration cut from the exploration.

On a phone with a JSON state probe (a SimPhone in process, an ADB phone with the SimPhone
probe) the state after every action is kept, so the state synthesiser needs no replay. A phone
without one (a real or cloud phone) explores too when the screens are kept
(``keep_screenshots=True``): its steps carry no state, and a model describer reads the screens
(:mod:`darwin.hindsight.model_synthesizer`). With no state to say which app is in front, the
explorer starts from the launcher (it presses home first and remembers that screen) and opens
the app again after its own ``press_home`` or ``open_app`` of another app, or when a screen looks
like the launcher (:func:`looks_alike`).

    >>> import asyncio
    >>> from darwin.envs.sim.env import SimPhoneEnv
    >>> from darwin.hindsight.exploration import explore
    >>> run = asyncio.run(explore(SimPhoneEnv(seed=0), "Settings", steps=20, seed=2))
    >>> run.app, len(run.steps), run.steps[0].action.type
    ('Settings', 20, 'open_app')
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from darwin.actions import Action, OpenApp, PressHome, is_terminal
from darwin.agents.base import Actor
from darwin.agents.scripted import RandomActor
from darwin.envs.base import PhoneEnv
from darwin.envs.sim.apps import default_apps
from darwin.png import encode_png
from darwin.predicates import State
from darwin.types import Decision, Observation, Phase, Transition

__all__ = [
    "ExplorationError",
    "ExploredStep",
    "Exploration",
    "app_id_of",
    "explore",
    "exploration_goal",
    "looks_alike",
]


class ExplorationError(RuntimeError):
    """An exploration that cannot run (a phone without a state probe, an unknown app)."""


@dataclass(frozen=True)
class ExploredStep:
    """One action the explorer played, the phone's JSON state right after it (``None`` on a phone
    without a state probe), and the screen right after it as PNG bytes when the exploration kept
    screenshots (a model describer reads them)."""

    action: Action
    state: State | None
    screenshot: bytes | None = None


@dataclass(frozen=True)
class Exploration:
    """One exploration of ``app`` (its launcher label) on phone ``phone``: the state it started
    from and each action played with the state it led to, in order; ``explorer_seed`` is the
    explorer's seed (the random agent's, or the one the given actor was made with; ``None``: not
    known); ``start_screenshot`` the screen before the first action as PNG bytes (``None`` unless
    screenshots were kept); ``device_size`` the phone's ``(width, height)`` in pixels, which the
    actions' coordinates refer to (``None``: not known). On a phone without a state probe
    ``start_state`` and every step's ``state`` are ``None`` and only the screens tell what happened."""

    app: str
    phone: str
    start_state: State | None
    steps: tuple[ExploredStep, ...]
    explorer_seed: int | None = None
    start_screenshot: bytes | None = None
    device_size: tuple[int, int] | None = None

    def states(self, reader: str) -> tuple[State, tuple[State, ...]]:
        """The start state and the state after each step, for ``reader`` (who needs them, named in
        the error); raises :class:`ExplorationError` for an exploration of a phone without a probe."""
        after = tuple(step.state for step in self.steps if step.state is not None)
        if self.start_state is None or len(after) < len(self.steps):
            raise ExplorationError(
                f"{reader} reads the JSON state after each step, and the exploration of {self.app} on phone "
                f"{self.phone} has none (the phone has no state probe); synthesise from its screens with the "
                "model_hindsight synthesizer instead"
            )
        return self.start_state, after

    def actions(self, upto: int) -> tuple[Action, ...]:
        """The first ``upto`` actions: from :attr:`start_state` they lead to ``steps[upto - 1].state``."""
        return tuple(step.action for step in self.steps[:upto])


def app_id_of(label: str) -> str:
    """The SimPhone app id (``clock``) of a launcher label (``Clock``); state paths use ids."""
    for app in default_apps():
        if app.label == label:
            return app.id
    known = ", ".join(app.label for app in default_apps())
    raise ExplorationError(f"no SimPhone app is labelled {label!r}; apps: {known}")


def _thumbnail(screen: np.ndarray) -> np.ndarray:
    return np.asarray(Image.fromarray(screen).convert("L").resize((32, 64)), dtype=np.float32) / 255.0


def looks_alike(a: np.ndarray, b: np.ndarray, tolerance: float = 0.02) -> bool:
    """Whether two screens look the same at a glance: their 32x64 grey thumbnails differ by at most
    ``tolerance`` on average (a status bar's clock moving a digit changes a real phone's launcher
    by less than that; opening an app changes most of the screen)."""
    return float(np.abs(_thumbnail(a) - _thumbnail(b)).mean()) <= tolerance


def exploration_goal(app: str) -> str:
    """What an explorer is told: there is no task (a model explorer reads it; the random agent does not)."""
    return f"{app}: explore the app freely; there is no task to finish."


async def explore(
    env: PhoneEnv,
    app: str,
    steps: int,
    actor: Actor | None = None,
    seed: int = 0,
    observation_size: tuple[int, int] = (252, 560),
    keep_screenshots: bool = False,
) -> Exploration:
    """Play ``app`` on ``env`` for ``steps`` actions with no goal, recording each state reached.

    Args:
        env: the phone, in the state the exploration starts from; without a JSON state probe,
            ``keep_screenshots`` must be on, and the exploration starts from the launcher.
        app: the app's launcher label (``"Clock"``).
        steps: how many actions to play, the opening of the app included.
        actor: who chooses the actions; ``None``: :class:`~darwin.agents.scripted.RandomActor`
            seeded ``seed``. Its start hooks are not called (there is no task to start). A
            :class:`~darwin.hindsight.novelty.NoveltyExplorer` around any actor seeks screens it
            has not seen.
        seed: the random agent's seed; with ``actor`` given, the seed it was made with. Either
            way it is recorded as the exploration's ``explorer_seed``.
        observation_size: the actor's screenshots, ``(width, height)``; small by default, as
            the history keeps every one of them.
        keep_screenshots: also keep the screen before the first action and after each action
            (PNG at ``observation_size``), for a describer that reads screens.

    Returns:
        the exploration; ``len(steps)`` actions were played (decisions that would end an
        episode, or that failed to parse, are asked again and count against no step).
    """
    if steps < 1:
        raise ValueError(f"explore needs steps >= 1, got {steps}")
    app_id = app_id_of(app)
    start = await env.aprobe_state()
    launcher: np.ndarray | None = None
    if start is None:
        if not keep_screenshots:
            raise ExplorationError(
                f"phone {env.name} has no state probe, so only its screens can record what an exploration "
                "reached: pass keep_screenshots=True (a model describer reads them)"
            )
        await env.ago_home()
        launcher = await env.ascreenshot(observation_size)
    actor = actor if actor is not None else RandomActor(seed=seed)
    goal = exploration_goal(app)
    history: list[Transition] = []
    played: list[ExploredStep] = []
    state: State | None = start
    in_app = False  # without a probe: whether the app is in front, as far as the explorer can tell
    shown = await env.ascreenshot(observation_size)
    start_screenshot = encode_png(shown) if keep_screenshots else None
    # An actor that only ever finishes would never play: ask at most this many times per step.
    asks_left = 20 * steps
    while len(played) < steps and asks_left > 0:
        asks_left -= 1
        decision: Decision
        if (state.get("foreground") != app_id) if state is not None else not in_app:
            decision = Decision(action=OpenApp(app=app))
        else:
            observation = Observation(
                screenshot=shown,
                goal=goal,
                device_size=env.device_size,
                task_id=f"explore.{app_id}",
                phase=Phase.EXECUTION,
                step=len(played),
            )
            decision = await actor.act(observation, history)
            if decision.action is None or is_terminal(decision.action):
                continue
            history.append(
                Transition(
                    episode_id=f"explore.{env.name}",
                    task_id=observation.task_id,
                    step=len(played),
                    phase=Phase.EXECUTION,
                    observation=observation,
                    decision=decision,
                )
            )
        action = decision.action
        assert action is not None
        await env.aexecute(action)
        shown = await env.ascreenshot(observation_size)
        if launcher is None:
            probed = await env.aprobe_state()
            if probed is None:
                raise ExplorationError(f"phone {env.name} stopped answering its state probe after {len(played)} steps")
            state = probed
        else:
            left = isinstance(action, PressHome) or (isinstance(action, OpenApp) and action.app != app)
            in_app = not left and not looks_alike(shown, launcher)
        after = encode_png(shown) if keep_screenshots else None
        played.append(ExploredStep(action=action, state=state, screenshot=after))
    return Exploration(
        app=app,
        phone=env.name,
        start_state=start,
        steps=tuple(played),
        explorer_seed=seed,
        start_screenshot=start_screenshot,
        device_size=env.device_size,
    )
