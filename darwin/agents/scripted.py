"""Scripted actors: the simulator's oracle (privileged) and a uniformly random agent, and the
``oracle`` and ``random`` actors of ``darwin eval --agent`` (:func:`oracle_actors`,
:func:`random_actors`)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from darwin.actions import (
    Action,
    Click,
    Direction,
    Drag,
    Finished,
    LongPress,
    OpenApp,
    PressBack,
    PressHome,
    Scroll,
    Type,
    Wait,
)
from darwin.agents.actors import Actors
from darwin.agents.base import Actor
from darwin.envs.base import PhoneEnv
from darwin.envs.sim.apps import default_apps
from darwin.envs.sim.oracle import shortest_plan
from darwin.envs.sim.phone import SimPhone
from darwin.templates import task_apps
from darwin.types import Decision, Observation, Phase, Task, Transition, VerifierSpec


class OracleActor(Actor):
    """Follows a shortest plan computed by the simulator from the phone's probed state.

    Works on any env with a SimPhone state probe (in process or served over ADB). The plan
    is recomputed whenever the phone is not in the state the plan expected (e.g. after a
    fault), so the oracle recovers from anything that leaves a solvable state.
    ``pick_cost`` above 2 makes it type a task's words into a field rather than tap a widget
    showing them, where the app allows both (see :func:`shortest_plan`).
    """

    def __init__(self, max_expansions: int = 20_000, pick_cost: int = 1) -> None:
        self.max_expansions = max_expansions
        self.pick_cost = pick_cost
        self._planner = SimPhone(seed=0)
        self._env: PhoneEnv | None = None
        self._task: Task | None = None
        self._spec: VerifierSpec | None = None
        self._plan: list[tuple[Action, bytes]] = []

    async def start_phase(
        self, env: PhoneEnv, task: Task, phase: Phase, instruction: str, verifier: VerifierSpec
    ) -> None:
        self._env, self._task, self._spec, self._plan = env, task, verifier, []

    async def act(self, observation: Observation, history: Sequence[Transition]) -> Decision:
        if self._env is None or self._spec is None or self._task is None:
            raise RuntimeError("OracleActor.act called before start_phase")
        state = await self._env.aprobe_state()
        if state is None:
            raise RuntimeError(f"OracleActor needs a phone with a state probe; {self._env.name} has none")
        self._planner.restore(state)
        key = self._planner.state_key()
        if not self._plan or self._plan[0][1] != key:
            self._plan = self._make_plan()
        if not self._plan:
            return Decision(action=Finished(content="done"))
        action, _ = self._plan.pop(0)
        return Decision(action=action)

    def _make_plan(self) -> list[tuple[Action, bytes]]:
        assert self._spec is not None and self._task is not None
        # Every app the task needs (a cross-app template's apps), so the plan may open each.
        actions = shortest_plan(
            self._planner,
            self._spec,
            apps=list(task_apps(self._task)),
            max_expansions=self.max_expansions,
            pick_cost=self.pick_cost,
        )
        # Remember the state each action expects to start from, to detect divergence.
        sim = self._planner.fork()
        plan = []
        for action in actions:
            plan.append((action, sim.state_key()))
            sim.execute(action)
        plan.append((Finished(content="done"), sim.state_key()))
        return plan


class RandomActor(Actor):
    """Uniformly random actions over the whole action space (a floor for success rates)."""

    APPS = tuple(app.label for app in default_apps())
    """Every app on a SimPhone's launcher, by name."""
    WORDS = ("hello", "Berlin", "news", "agent", "9", "test")

    def __init__(self, seed: int = 0, finish_probability: float = 0.03) -> None:
        self.rng = random.Random(seed)
        self.finish_probability = finish_probability

    async def act(self, observation: Observation, history: Sequence[Transition]) -> Decision:
        return Decision(action=self.sample(observation.device_size))

    def sample(self, device_size: tuple[int, int]) -> Action:
        r = self.rng
        w, h = device_size
        x, y = r.randrange(w), r.randrange(h)
        if r.random() < self.finish_probability:
            return Finished()
        kind = r.choices(
            ("click", "long_press", "type", "scroll", "drag", "open_app", "home", "back", "wait"),
            weights=(50, 4, 10, 10, 4, 8, 4, 8, 2),
        )[0]
        if kind == "click":
            return Click(x=x, y=y)
        if kind == "long_press":
            return LongPress(x=x, y=y)
        if kind == "type":
            return Type(content=r.choice(self.WORDS) + ("\n" if r.random() < 0.5 else ""))
        if kind == "scroll":
            return Scroll(x=x, y=y, direction=r.choice(list(Direction)))
        if kind == "drag":
            return Drag(x1=x, y1=y, x2=r.randrange(w), y2=r.randrange(h))
        if kind == "open_app":
            return OpenApp(app=r.choice(self.APPS))
        if kind == "home":
            return PressHome()
        if kind == "back":
            return PressBack()
        return Wait()


def oracle_actors() -> Actors:
    """``--agent oracle``: an :class:`OracleActor` on every phone."""
    return Actors(lambda i: OracleActor())


def random_actors(seed: int) -> Actors:
    """``--agent random``: a :class:`RandomActor` per phone, phone ``i`` seeded ``seed * 1000 + i``
    (evaluations with different seeds share no phone's seed, up to 1000 phones)."""
    return Actors(lambda i: RandomActor(seed=seed * 1000 + i))
