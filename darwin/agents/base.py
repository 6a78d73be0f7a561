"""Who chooses actions in an episode.

An :class:`Actor` maps an observation (and the history) to a :class:`~darwin.types.Decision`.
VLM agents are the paper's two functions around a policy: :class:`Agent` provides context
processing (psi: history -> prompt) and action projection (xi: text -> action), and
:class:`ModelActor` chains ``agent.build_context -> policy.generate -> agent.project_action``.
Scripted actors (the simulator's oracle, a random agent) implement :meth:`Actor.act` directly.

    >>> import asyncio, numpy as np
    >>> from darwin.agents.base import Actor
    >>> from darwin.actions import PressHome
    >>> from darwin.types import Decision, Observation
    >>> class AlwaysHome(Actor):
    ...     async def act(self, observation, history):
    ...         return Decision(action=PressHome())
    >>> obs = Observation(screenshot=np.zeros((4, 2, 3), np.uint8), goal="go home", device_size=(1080, 2400))
    >>> asyncio.run(AlwaysHome().act(obs, [])).action.type
    'press_home'
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Sequence

from darwin.actions import Action
from darwin.envs.base import PhoneEnv
from darwin.policies.base import Policy
from darwin.readers.base import Reader
from darwin.types import (
    Decision,
    EpisodeSampling,
    Observation,
    ParseError,
    Phase,
    Prompt,
    Task,
    Trajectory,
    Transition,
    VerifierSpec,
)


class Actor(ABC):
    """Chooses one action per step."""

    def start_episode(self, task: Task) -> None:
        """Called by the workflow before the first phase of every episode (model actors
        reset their agent's per-episode state, e.g. memory, here)."""

    async def end_episode(self, trajectory: Trajectory) -> None:
        """Called by the workflow once the episode has ended (model actors let their agent's
        memory learn from it here)."""

    async def start_phase(
        self, env: PhoneEnv, task: Task, phase: Phase, instruction: str, verifier: VerifierSpec
    ) -> None:
        """Called when a task phase starts on ``env`` (scripted actors may plan here)."""

    def use_sampling(self, sampling: EpisodeSampling | None) -> None:
        """How the next episode samples (set by the rollout engine before it starts): a paired
        evaluation's seed and greedy flag, or ``None`` for the policy's own sampling (training).
        Actors without a model distribution to sample (scripted ones) have nothing to fix."""

    @abstractmethod
    async def act(self, observation: Observation, history: Sequence[Transition]) -> Decision:
        """The decision for the current step. Must not raise on bad model output."""

    async def prompt(self, observation: Observation, history: Sequence[Transition]) -> Prompt | None:
        """The prompt :meth:`act` would send a model for this step, without acting (a
        truncated episode's next state, for the critic); ``None`` for actors without a model."""
        return None

    @property
    def reader(self) -> Reader | None:
        """What reads each screen into the observation's marks before :meth:`act` (the
        workflow calls it); ``None``: the observation carries no marks."""
        return None


class Agent(ABC):
    """A VLM agent's prompt building and output parsing, kept outside the learner.

    ``reader`` reads each screen into marks before :meth:`build_context` sees it (the
    workflow calls it: :func:`darwin.readers.read_marks`); ``None`` sees pixels only.
    """

    reader: Reader | None = None

    @abstractmethod
    def build_context(self, observation: Observation, history: Sequence[Transition]) -> Prompt:
        """psi: the prompt for the current step (memory lives here)."""

    @abstractmethod
    def project_action(self, text: str, observation: Observation) -> Action | ParseError:
        """xi: parse model text into an action in device pixels; never raises."""

    def start_episode(self, task: Task | None = None) -> None:
        """Forget per-episode state (VLM agents: ``memory.start_episode(task)``); called at
        every episode start."""

    async def observe(self, history: Sequence[Transition]) -> None:
        """Called before :meth:`build_context` with the episode so far (VLM agents: ``await
        memory.observe(history)``)."""

    async def end_episode(self, trajectory: Trajectory) -> None:
        """Called once the episode has ended (VLM agents: ``await memory.end_episode(trajectory)``)."""


class ModelActor(Actor):
    """An :class:`Agent` driving a :class:`Policy`: the paper's data path for one step."""

    def __init__(self, agent: Agent, policy: Policy) -> None:
        self.agent = agent
        self.policy = policy
        self.sampling: EpisodeSampling | None = None
        self._requests = 0  # this episode's policy requests so far: the next one's turn

    def use_sampling(self, sampling: EpisodeSampling | None) -> None:
        self.sampling = sampling

    @property
    def reader(self) -> Reader | None:
        return self.agent.reader

    def start_episode(self, task: Task) -> None:
        self._requests = 0
        self.agent.start_episode(task)

    async def end_episode(self, trajectory: Trajectory) -> None:
        await self.agent.end_episode(trajectory)

    async def prompt(self, observation: Observation, history: Sequence[Transition]) -> Prompt | None:
        await self.agent.observe(history)
        return self.agent.build_context(observation, history)

    async def act(self, observation: Observation, history: Sequence[Transition]) -> Decision:
        await self.agent.observe(history)
        prompt = self.agent.build_context(observation, history)
        if self.sampling is not None:
            seed = self.sampling.request_seed(self._requests)
            prompt = dataclasses.replace(prompt, seed=seed, greedy=self.sampling.greedy)
        self._requests += 1
        (generation,) = await self.policy.generate([prompt])
        projected = self.agent.project_action(generation.text, observation)
        if isinstance(projected, ParseError):
            return Decision(action=None, parse_error=projected, generation=generation, prompt=prompt)
        return Decision(action=projected, generation=generation, prompt=prompt)
