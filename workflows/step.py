"""The paper's step loop: observe, act, execute, emit; verified at the end of each phase."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from darwin.actions import is_terminal
from darwin.agents.base import Actor
from darwin.algos.task_metrics import measure_episode
from darwin.envs.base import InfraError, PhoneEnv
from darwin.envs.guard import ActionBlocked
from darwin.predicates import JUDGED_GOAL, evaluate
from darwin.readers.base import Reader, ReaderError, read_marks
from darwin.task_registry import goal_text
from darwin.types import (
    ACTOR,
    DEMONSTRATION,
    Decision,
    DemoStart,
    Observation,
    Phase,
    Prompt,
    RunAbort,
    Task,
    Termination,
    TerminationReason,
    Trajectory,
    Transition,
    Verdict,
    VerifierSpec,
)
from darwin.verifiers.base import VerificationRequest, Verifier
from darwin.verifiers.rule import RuleVerifier
from darwin.workflows.base import Emit, Workflow

logger = logging.getLogger(__name__)


class StepConfig(BaseModel):
    """Settings of the step loop. Its rewards are the verifier's alone: a parse error is a no-op
    step with reward 0, and the learner shapes rewards (``LearnerConfig.parse_error_penalty``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    observation_size: tuple[int, int] = Field(
        default=(252, 560), description="(W, H) of screenshots given to the actor"
    )
    end_on_success: bool = Field(
        default=True, description="end a phase as soon as a cheap (rule) verifier confirms the goal"
    )
    skip_already_done: bool = Field(
        default=True,
        description="with a cheap (rule) verifier, check each phase's goal before the first action; if it already "
        "holds the phase ends at once (TerminationReason.ALREADY_DONE): an execution phase is then not scored, "
        "so a goal left over from an earlier episode is never a free success or a reward for whatever came first",
    )
    episode_metrics: bool = Field(
        default=True,
        description="with a state probe and a cheap (rule) verifier, measure the execution phase's EpisodeMetrics "
        "(progress rate, side effects, false completion, over-time) into Trajectory.metrics; they never change "
        "rewards, verdicts or what the learner sees",
    )
    demonstration_in_history: bool = Field(
        default=True,
        description="an episode started inside a demonstration (Task.start) begins the agent's history with the "
        "demonstration's steps, as the warm start saw them in SFT; False starts it empty (an ablation: the warm start "
        "then succeeds far less from the same states, docs/results.md)",
    )
    record_next_prompt: bool = Field(
        default=False,
        description="when an episode is truncated (step budget, infrastructure), take one more screenshot and "
        "record the prompt the actor would get there (Trajectory.next_prompt): the state V(s') is read from "
        "when the learner bootstraps truncations (learner.truncation='bootstrap' turns it on)",
    )
    metrics_every_step: bool = Field(
        default=True,
        description="for over-time, check the goal on the phone's state after every actor step (free when "
        "end_on_success already checks each step; otherwise one more state probe per step: a shell call on ADB "
        "phones). Off: over_time_steps and goal_first_met_step are None",
    )


class AdviserError(Exception):
    """Another agent of the workflow (a planner, a reflector, a checker) failed for good; the
    phase ends with ``termination`` (an infrastructure truncation or an error, with the cause)."""

    def __init__(self, termination: Termination) -> None:
        super().__init__(termination.cause)
        self.termination = termination


@dataclass(eq=False)  # identity: workflows key per-phase state by it
class PhaseTurns:
    """One phase in progress, as the workflow's hooks see it: where it runs, what happened,
    and :meth:`record` for the turns of agents that do not act on the phone."""

    env: PhoneEnv
    task: Task
    phase: Phase
    goal: str
    """The phase's goal text (the task's instruction as agents see it)."""
    trajectory: Trajectory
    actor: Actor
    emit: Emit | None
    screenshot: np.ndarray | None = None
    """The current screen (at observation size), taken before :meth:`StepWorkflow.step_goal`."""
    step: int = 0
    """Index of the actor's current step within the phase."""
    actor_steps: list[Transition] = field(default_factory=list)
    """The actor's transitions of this phase so far."""

    def append(self, transition: Transition) -> None:
        """Add a transition to the trajectory and stream it (store, buffer)."""
        self.trajectory.transitions.append(transition)
        if transition.agent == ACTOR:
            self.actor_steps.append(transition)
        if self.emit is not None:
            self.emit(transition)

    def next_transition(
        self,
        observation: Observation,
        decision: Decision,
        *,
        reward: float = 0.0,
        termination: Termination | None = None,
        agent: str = ACTOR,
    ) -> Transition:
        """The transition at the trajectory's next step in this phase (not appended); ``done``
        when it has a ``termination``."""
        return Transition(
            episode_id=self.trajectory.episode_id,
            task_id=self.task.id,
            step=len(self.trajectory.transitions),
            phase=self.phase,
            observation=observation,
            decision=decision,
            reward=reward,
            done=termination is not None,
            termination=termination,
            agent=agent,
        )

    def record(self, agent: str, observation: Observation, decision: Decision) -> Transition:
        """Record another agent's turn (a plan, a note, a judgement) in time order; no reward."""
        transition = self.next_transition(observation, decision, agent=agent)
        self.append(transition)
        return transition


@dataclass
class _MetricsRecorder:
    """What the execution phase's EpisodeMetrics are computed from: its start state and the
    goal checked after each actor step."""

    start: dict[str, Any]
    every_step: bool
    goal_met: list[bool] = field(default_factory=list)


class StepWorkflow(Workflow):
    """Runs the execution phase of a task (lifecycle phases are ignored; see LifecycleWorkflow)."""

    def __init__(self, verifier: Verifier | None = None, config: StepConfig | None = None) -> None:
        self.verifier = verifier or RuleVerifier()
        self.config = config or StepConfig()

    @property
    def verifier_kind(self) -> str:
        return self.verifier.kind

    def close(self) -> None:
        """Close the verifier (a learned model, a judge's connections)."""
        self.verifier.close()

    def phases(self, task: Task) -> list[tuple[Phase, str, VerifierSpec, int]]:
        return [p for p in task.phases() if p[0] == Phase.EXECUTION]

    async def run(
        self, env: PhoneEnv, task: Task, actor: Actor, emit: Emit | None = None, episode_id: str | None = None
    ) -> Trajectory:
        trajectory = Trajectory(episode_id=episode_id or uuid.uuid4().hex, task=task)
        await env.abegin_task(task)  # e.g. a SimPhone's UI language follows the task's (phones.locale = auto)
        if task.setup:
            # The instance's state goes on the phone before anything else sees it; a phone
            # that cannot take it raises SetupUnsupported (a configuration error, not an episode).
            try:
                await env.aapply_setup(task.setup)
            except InfraError as exc:
                trajectory.termination = self._infra(env, task, exc)
                return trajectory
        if task.start is not None:
            try:
                trajectory.demonstration = await self.play_start(
                    env, task, task.start, trajectory.episode_id, reader=actor.reader
                )
            except InfraError as exc:
                trajectory.termination = self._infra(env, task, exc)
                return trajectory
            except ActionBlocked as exc:  # the demonstration's own action: not the agent's, so not scored
                trajectory.termination = Termination(TerminationReason.BLOCKED, exc.block.cause)
                trajectory.verdicts[Phase.EXECUTION] = Verdict(
                    None, reason=f"the action guard blocked the demonstration: {exc.block.cause}"
                )
                return trajectory
        actor.start_episode(task)
        await self.play_phases(env, task, actor, trajectory, emit)
        try:
            await actor.end_episode(trajectory)
        except Exception:  # the episode is complete and stays so; the failure is reported, not hidden
            logger.exception("actor.end_episode failed after %s (episode %s)", task.id, trajectory.episode_id)
        return trajectory

    async def play_start(
        self, env: PhoneEnv, task: Task, start: DemoStart, episode_id: str, reader: Reader | None = None
    ) -> list[Transition]:
        """Play the demonstration of ``start`` except its last ``start.remaining`` actions on
        ``env``; the steps played, as transitions of agent ``"demonstration"`` (each with the
        screen it acted on, read by the actor's ``reader``), for the agent's history. Nothing is emitted.

        Without recorded actions the demonstration is the simulator's shortest plan from the
        phone's probed state (a phone without a SimPhone state probe cannot start inside one:
        a ``ValueError`` that says so)."""
        lifecycle = task.lifecycle
        if lifecycle is not None and lifecycle.setup is not None and self.phases(task)[0][0] == Phase.SETUP:
            raise ValueError(
                f"task {task.id} has a setup phase: its execution demonstration cannot be played before it; "
                "start lifecycle tasks at the beginning (or run them under StepWorkflow, execution only)"
            )
        actions = start.actions
        if actions is None:
            from darwin.envs.sim.oracle import OracleError, shortest_plan
            from darwin.envs.sim.phone import SimPhone
            from darwin.templates import task_apps

            state = await env.aprobe_state()
            if state is None:
                raise ValueError(
                    f"task {task.id} starts inside a demonstration with no recorded actions, which needs a phone "
                    f"with a SimPhone state probe to plan it; {env.name} has none (record the demonstration's "
                    "actions in DemoStart.actions, or use SimPhones)"
                )
            planner = SimPhone(seed=0)
            planner.restore(state)
            try:
                actions = tuple(shortest_plan(planner, task.verifier, apps=list(task_apps(task))))
            except OracleError as exc:  # no plan within the search budget: the agent starts at the beginning
                logger.warning(
                    "%s on %s: no demonstration to start inside (%s); starting at the beginning", task.id, env.name, exc
                )
                return []
        goal = goal_text(task, task.instruction)
        played: list[Transition] = []
        for step, action in enumerate(actions[: max(0, len(actions) - start.remaining)]):
            shot = await env.ascreenshot(self.config.observation_size)
            observation = Observation(
                screenshot=shot,
                goal=goal,
                device_size=env.device_size,
                task_id=task.id,
                phase=Phase.EXECUTION,
                step=step,
                marks=await read_marks(reader, shot, env.device_size, env),
            )
            played.append(
                Transition(
                    episode_id=episode_id,
                    task_id=task.id,
                    step=step,
                    phase=Phase.EXECUTION,
                    observation=observation,
                    decision=Decision(action=action),
                    agent=DEMONSTRATION,
                )
            )
            await env.aexecute(action)
        return played

    async def play_phases(
        self, env: PhoneEnv, task: Task, actor: Actor, trajectory: Trajectory, emit: Emit | None
    ) -> None:
        """Play :meth:`phases` in order, success-gated, filling ``trajectory``."""
        for phase, instruction, spec, budget in self.phases(task):
            termination, verdict = await self.run_phase(
                env, task, actor, trajectory, phase, instruction, spec, budget, emit
            )
            if termination.reason == TerminationReason.ALREADY_DONE and phase != Phase.EXECUTION:
                # A setup or teardown goal that holds already: go on; the episode keeps the
                # execution phase's ending (it is what the episode is scored by).
                trajectory.verdicts[phase] = Verdict(True, reason="already held")
                trajectory.termination = trajectory.termination or termination
                continue
            trajectory.termination = termination
            if termination.reason == TerminationReason.ALREADY_DONE:  # nothing to score: the episode ends unscored
                trajectory.verdicts[phase] = Verdict(None, reason="the goal already held before the agent acted")
                break
            trajectory.verdicts[phase] = verdict if verdict is not None else Verdict(None, reason=termination.cause)
            if verdict is None or verdict.success is not True:
                break  # success-gated: the next phase starts only after this one is verified done
        if self.config.record_next_prompt and trajectory.termination is not None and trajectory.termination.truncated:
            trajectory.next_prompt = await self._next_prompt(env, task, actor, trajectory)

    async def _next_prompt(self, env: PhoneEnv, task: Task, actor: Actor, trajectory: Trajectory) -> Prompt | None:
        """The actor's prompt at the screen after a truncated episode's last action, or None
        (no step, a phone that does not answer, an actor without prompts)."""
        own = [t for t in trajectory.transitions if t.agent == ACTOR]
        if not own:
            return None
        last = own[-1]
        history = [t for t in own if t.phase == last.phase]
        try:
            shot = await env.ascreenshot(self.config.observation_size)
            marks = await read_marks(actor.reader, shot, env.device_size, env)
        except (InfraError, ReaderError) as exc:
            logger.info(
                "no screen after the truncation of %s on %s (%s): V(s') from the last observed state",
                task.id,
                env.name,
                exc,
            )
            return None
        observation = Observation(
            screenshot=shot,
            goal=last.observation.goal,
            device_size=env.device_size,
            task_id=task.id,
            phase=last.phase,
            step=len(history),
            marks=marks,
        )
        return await actor.prompt(observation, history)

    async def run_phase(
        self,
        env: PhoneEnv,
        task: Task,
        actor: Actor,
        trajectory: Trajectory,
        phase: Phase,
        instruction: str,
        spec: VerifierSpec,
        budget: int,
        emit: Emit | None,
    ) -> tuple[Termination, Verdict | None]:
        """Play one phase; returns how it ended and its verdict (``None`` if never verified)."""
        goal = goal_text(task, instruction)
        turns = PhaseTurns(env=env, task=task, phase=phase, goal=goal, trajectory=trajectory, actor=actor, emit=emit)
        history = turns.actor_steps  # the actor's own steps of this phase (other agents' turns are not in it)
        if phase == Phase.EXECUTION and self.config.demonstration_in_history:
            history[:0] = trajectory.demonstration  # started inside a demonstration: its steps first, as in SFT
        checks_first = self.config.skip_already_done and self.verifier.cheap
        recorder: _MetricsRecorder | None = None
        start_state: dict[str, Any] | None = None
        # a goal in words (judge.goal) has nothing in the phone's state to measure over time
        measurable = spec.predicate != JUDGED_GOAL
        if phase == Phase.EXECUTION and self.config.episode_metrics and self.verifier.cheap and measurable:
            start_state, failure = await self._probe_for_metrics(env, checks_first)
            if failure is not None and checks_first:
                return self._probe_failed(env, task, failure), None
            if start_state is not None and "apps" in start_state:  # SimPhone's state: what the predicates read
                recorder = _MetricsRecorder(start=start_state, every_step=self.config.metrics_every_step)
        verdict: Verdict | None  # the check before the first step, then each step's
        if checks_first:
            try:
                verdict = await self._verify(env, task, phase, instruction, spec, history, start_state)
            except InfraError as exc:
                return self._probe_failed(env, task, exc), None
            if verdict.success:
                return Termination(TerminationReason.ALREADY_DONE), verdict
        try:
            await actor.start_phase(env, task, phase, instruction, spec)
        except InfraError as exc:  # the actor read the phone (e.g. the oracle's state probe)
            return self._infra(env, task, exc), None
        except RunAbort:
            raise  # no episode can work around it (e.g. a missing API key): stop the run
        except Exception as exc:
            logger.exception("actor failed to start phase %s of %s", phase.value, task.id)
            return Termination(TerminationReason.ERROR, f"actor.start_phase: {exc!r}"), None
        for step in range(budget):
            try:
                shot = await env.ascreenshot(self.config.observation_size)
                marks = await read_marks(actor.reader, shot, env.device_size, env)
            except InfraError as exc:
                return self._infra(env, task, exc), None
            except ReaderError as exc:  # a screen no reader can read (empty, absurd size): this episode stops
                return Termination(TerminationReason.ERROR, f"reader: {exc}"), None
            turns.screenshot, turns.step = shot, step
            try:
                step_goal = await self.step_goal(turns)
            except AdviserError as exc:
                return exc.termination, None
            obs = Observation(
                screenshot=shot,
                goal=step_goal,
                device_size=env.device_size,
                task_id=task.id,
                phase=phase,
                step=step,
                marks=marks,
            )
            try:
                decision = await actor.act(obs, history)
            except InfraError as exc:  # the actor read the phone (e.g. the oracle's state probe)
                return self._infra(env, task, exc), None
            except RunAbort:
                raise  # no episode can work around it (e.g. a missing API key): stop the run
            except Exception as exc:
                logger.exception("actor failed on %s step %d", task.id, step)
                return Termination(TerminationReason.ERROR, f"actor.act: {exc!r}"), None
            reward = 0.0  # the verdict's reward comes on the last step; shaping is the learner's
            action = decision.action
            if action is not None:
                try:
                    # Terminal actions go to the phone too: phones that keep answers record them.
                    await env.aexecute(action)
                except InfraError as exc:
                    return self._infra(env, task, exc), None
                except ActionBlocked as exc:  # never reached the phone: the episode ends here, a failure
                    return self._blocked(turns, obs, decision, exc)
            ended: TerminationReason | None = None
            if action is not None and is_terminal(action):
                try:
                    accepted = await self.confirm_finish(turns, obs, decision)
                except AdviserError as exc:
                    return exc.termination, None
                if accepted:
                    ended = TerminationReason.AGENT_FINISHED
            if ended is None and step == budget - 1:
                ended = TerminationReason.STEP_BUDGET
            verifies = ended is not None or (self.config.end_on_success and self.verifier.cheap)
            state_after: dict[str, Any] | None = None
            if recorder is not None and (recorder.every_step or ended is not None):
                state_after, failure = await self._probe_for_metrics(env, verifies)
                if failure is not None and verifies:
                    return self._probe_failed(env, task, failure), None
                if state_after is None:
                    recorder = None  # an extra probe failed: this episode goes unmeasured and plays on as it would
                elif recorder.every_step:
                    recorder.goal_met.append(evaluate(spec, state_after).success)
            verdict = None
            if verifies:
                # The verifier sees this step's action too (a judge reads the agent's answer).
                acted = turns.next_transition(obs, decision)
                try:
                    verdict = await self._verify(env, task, phase, instruction, spec, [*history, acted], state_after)
                except InfraError as exc:
                    return self._probe_failed(env, task, exc), None
                if verdict.success and ended != TerminationReason.AGENT_FINISHED:
                    ended = TerminationReason.SUCCESS
                elif ended is None:
                    verdict = None  # an intermediate check that found the goal not met yet
            termination = Termination(ended) if ended is not None else None
            if verdict is not None and verdict.reward is not None:
                reward += verdict.reward
            transition = turns.next_transition(obs, decision, reward=reward, termination=termination)
            turns.append(transition)  # into the trajectory, the stream and (the actor's) history
            if termination is not None:
                if recorder is not None and state_after is not None and verdict is not None:
                    trajectory.metrics = measure_episode(
                        task,
                        recorder.start,
                        state_after,
                        success=verdict.success,
                        agent_finished=ended == TerminationReason.AGENT_FINISHED,
                        goal_met=recorder.goal_met if recorder.every_step else None,
                    )
                return termination, verdict
        raise AssertionError("unreachable: the last step always ends the phase")

    @staticmethod
    def _blocked(
        turns: PhaseTurns, obs: Observation, decision: Decision, exc: ActionBlocked
    ) -> tuple[Termination, Verdict]:
        """End the phase on an action the guard blocked: its step gets the guard's reward
        (``-penalty``), the verdict is a failure that says why."""
        termination = Termination(TerminationReason.BLOCKED, exc.block.cause)
        verdict = Verdict(False, reward=exc.reward, reason=f"the action guard blocked it: {exc.block.cause}")
        turns.append(turns.next_transition(obs, decision, reward=exc.reward, termination=termination))
        return termination, verdict

    async def step_goal(self, turns: PhaseTurns) -> str:
        """The goal text the actor sees at this step (default: the phase's goal).

        Multi-agent workflows add guidance here (a planner's sub-goal, a reflector's note),
        recording the other agents' turns with :meth:`PhaseTurns.record`. Raise
        :class:`AdviserError` to end the phase when another agent cannot be reached.
        """
        return turns.goal

    async def confirm_finish(self, turns: PhaseTurns, observation: Observation, decision: Decision) -> bool:
        """Whether the actor's ``finished``/``answer`` ends the phase (default: always).

        A self-verifying workflow checks the screen here and returns False to play on.
        """
        return True

    @staticmethod
    async def _probe_for_metrics(env: PhoneEnv, verifies: bool) -> tuple[dict[str, Any] | None, InfraError | None]:
        """The phone's state for the metrics, as ``(state, failure)``.

        When the verifier checks the goal right after (``verifies``), this is its probe too
        (handed to :meth:`_verify`), so a failure ends the phase exactly as it would without
        metrics; otherwise it is an extra probe and a failure only leaves the episode unmeasured.
        """
        try:
            return await env.aprobe_state(), None
        except InfraError as exc:
            if not verifies:
                logger.warning("state probe failed on %s: %s (episode metrics dropped)", env.name, exc)
            return None, exc

    async def _verify(
        self,
        env: PhoneEnv,
        task: Task,
        phase: Phase,
        instruction: str,
        spec: VerifierSpec,
        history: list[Transition],
        state: dict[str, Any] | None = None,
    ) -> Verdict:
        """The verifier's verdict on the phone now; ``state``: the state already probed after the last action.

        Raises :class:`InfraError` when the phone fails while it is read (the caller truncates
        the phase with that cause).
        """
        if state is None:
            state = await env.aprobe_state()
        # Screen-reading verifiers get the final screen; rule checks only need the state.
        verifier = self.verifier
        final_screenshot = await env.ascreenshot(verifier.screen_size) if verifier.reads_screen else None
        request = VerificationRequest(
            task=task,
            phase=phase,
            instruction=instruction,
            spec=spec,
            transitions=list(history),
            final_state=state,
            final_screenshot=final_screenshot,
        )
        return await self.verifier.verify(request)

    @staticmethod
    def _probe_failed(env: PhoneEnv, task: Task, exc: InfraError) -> Termination:
        """The phone failed while the verifier read it: a truncation with the phone's own cause
        (``node_lost``, ``disconnect`` ...), not a generic one."""
        logger.warning("state probe failed on %s during %s: %s", env.name, task.id, exc)
        return Termination(TerminationReason.INFRA_TRUNCATED, exc.cause)

    @staticmethod
    def _infra(env: PhoneEnv, task: Task, exc: InfraError) -> Termination:
        logger.warning("infrastructure failure on %s during %s: %s", env.name, task.id, exc)
        return Termination(TerminationReason.INFRA_TRUNCATED, exc.cause)


class LifecycleWorkflow(StepWorkflow):
    """Setup -> execution -> teardown, each success-gated by the verifier (paper section 3.3)."""

    def phases(self, task: Task) -> list[tuple[Phase, str, VerifierSpec, int]]:
        return task.phases()
