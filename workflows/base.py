"""Workflows turn (phone, task, actor) into a trajectory: the interaction pattern.

Subclass :class:`Workflow` to try new patterns (planning, self-verification, several
agents); :class:`~darwin.workflows.step.StepWorkflow` is the paper's plain step loop.

    >>> import asyncio
    >>> from darwin.workflows.base import Workflow
    >>> from darwin.types import Trajectory
    >>> class DoNothing(Workflow):
    ...     async def run(self, env, task, actor, emit=None, episode_id=None):
    ...         return Trajectory(episode_id="e0", task=task)
    >>> from darwin.task_registry import get_task
    >>> asyncio.run(DoNothing().run(None, get_task("amazon_0"), None)).task.id
    'amazon_0'
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from darwin.agents.base import Actor
from darwin.envs.base import PhoneEnv
from darwin.types import Task, Trajectory, Transition

Emit = Callable[[Transition], None]
"""Receives every transition the moment it happens (e.g. the replay buffer)."""


class Workflow(ABC):
    """Runs one episode of ``task`` on ``env`` with ``actor``.

    The contract every workflow keeps (the rollout engine, the replay buffer, the run
    database and the learner rely on it):

    1. **Emit order.** Each transition is handed to ``emit`` once, the moment it is complete
       (its reward and ``done`` known), in time order; the returned trajectory's
       ``transitions`` are exactly the emitted ones, in the same order, with ``step`` their
       index in the episode. Turns of agents other than the one acting on the phone (a plan,
       a judgement) are transitions too, with their ``agent`` name and no reward.
    2. **Verdicts.** For every phase it played, ``verdicts[phase]`` holds the
       :class:`~darwin.types.Verdict`: the verifier's answer (True, False, or None
       when it could not decide: never a silent 0 or 1) with its explanation, or, where no
       verifier decided, ``Verdict(None, reason=<why>)``. ``phase_success`` and
       ``phase_reasons`` read it. The execution phase's answer is ``trajectory.success``;
       :attr:`~darwin.types.Trajectory.outcome` is read from it.
    3. **Termination.** The returned trajectory has ``termination`` set: exactly one
       :class:`~darwin.types.TerminationReason`, with a cause for infrastructure truncations,
       errors and actions the guard blocked (``ActionBlocked`` from ``env.aexecute``). A phone
       failure (:class:`~darwin.envs.base.InfraError`) ends the episode as
       ``infra_truncated``, never as a failure. The last actor transition has ``done=True``
       and carries the same termination.

    A minimal workflow that keeps the contract: one step, judged by the task's rule::

        >>> import asyncio
        >>> from darwin.actions import PressHome
        >>> from darwin.agents.base import Actor
        >>> from darwin.envs.sim.env import SimPhoneEnv
        >>> from darwin.task_registry import get_task
        >>> from darwin.types import Decision, Observation, Phase, Termination, TerminationReason, Trajectory, Transition
        >>> from darwin.verifiers.rule import RuleVerifier
        >>> from darwin.verifiers.base import VerificationRequest
        >>> class AlwaysHome(Actor):
        ...     async def act(self, observation, history):
        ...         return Decision(action=PressHome())
        >>> class OneStep(Workflow):
        ...     async def run(self, env, task, actor, emit=None, episode_id=None):
        ...         trajectory = Trajectory(episode_id=episode_id or "e0", task=task)
        ...         phase, instruction, spec, _ = next(p for p in task.phases() if p[0] == Phase.EXECUTION)
        ...         obs = Observation(screenshot=await env.ascreenshot((56, 112)), goal=instruction,
        ...                           device_size=env.device_size, task_id=task.id)
        ...         decision = await actor.act(obs, [])
        ...         await env.aexecute(decision.action)
        ...         end = Termination(TerminationReason.STEP_BUDGET)      # a budget of one step
        ...         step = Transition(trajectory.episode_id, task.id, 0, phase, obs, decision, done=True, termination=end)
        ...         verdict = await RuleVerifier().verify(VerificationRequest(
        ...             task=task, phase=phase, instruction=instruction, spec=spec, transitions=[step],
        ...             final_state=await env.aprobe_state(), final_screenshot=None))
        ...         step = Transition(trajectory.episode_id, task.id, 0, phase, obs, decision,
        ...                           reward=float(verdict.success is True), done=True, termination=end)
        ...         trajectory.transitions.append(step)
        ...         if emit is not None:
        ...             emit(step)                                         # 1. emitted when complete
        ...         trajectory.verdicts[phase] = verdict                   # 2. the verdict
        ...         trajectory.termination = end                           # 3. how it ended
        ...         return trajectory
        >>> seen = []
        >>> done = asyncio.run(OneStep().run(SimPhoneEnv(seed=0), get_task("amazon_0"), AlwaysHome(), emit=seen.append))
        >>> seen == done.transitions, done.termination.reason.value, done.outcome.value
        (True, 'step_budget', 'failure')
    """

    @property
    def verifier_kind(self) -> str:
        """Name of the verifier behind this workflow's verdicts (stored with each verdict)."""
        return "custom"

    @abstractmethod
    async def run(
        self, env: PhoneEnv, task: Task, actor: Actor, emit: Emit | None = None, episode_id: str | None = None
    ) -> Trajectory:
        """Play the episode, emitting transitions as they happen; return the trajectory."""

    def close(self) -> None:
        """Release what the workflow holds open (its verifier's, its advisers'); default: nothing.

        Called once by the run's cleanup, also after an error; it must be safe to call twice.
        """
