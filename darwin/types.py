"""Core data types that travel between phones, agents, workflows, the buffer and the learner.

Tasks and verifier specs are pydantic models (validated when built, JSON round-trip);
observations, transitions and trajectories are plain dataclasses because they carry
numpy screenshots and token arrays.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from darwin.actions import Action

ACTOR = "actor"
DEMONSTRATION = "demonstration"
"""The agent of the demonstration steps an episode starts after (:class:`DemoStart`)."""
"""Role name of the agent that acts on the phone (the one trained by default)."""


class TaskDefinitionError(ValueError):
    """A task definition is invalid; the message names the task, the field and the fix."""


class RunAbort(RuntimeError):
    """A problem no episode can work around (missing or rejected credentials, a
    misconfigured model): workflows do not turn it into an errored episode but let it stop
    the run, whose command prints its message (what is wrong and the fix) as one line."""


class VerifierSpec(BaseModel):
    """Which check decides success: a named rule predicate over phone state, with its parameters.

    ``params`` is validated against the predicate's own parameter model when the task is
    registered (see :mod:`darwin.task_registry`), so a typo fails at build time, not mid-run.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["rule"] = "rule"
    predicate: str = Field(min_length=1, description="registered predicate name, e.g. 'settings.dark_theme'")
    params: dict[str, JsonValue] = Field(default_factory=dict, description="predicate parameters")


class StateSetup(BaseModel):
    """One edit of the phone's state before an episode starts: a named setup step and its parameters.

    Task templates use it to put what an instance needs on the phone (the alarm a task
    deletes, the contact an answer task asks about). Steps are registered next to the apps
    (:mod:`darwin.envs.sim.setups`); ``params`` is validated against the step's own model
    when the task is built.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    step: str = Field(min_length=1, description="registered setup step, e.g. 'clock.alarms'")
    params: dict[str, JsonValue] = Field(default_factory=dict, description="setup step parameters")


class PhaseSpec(BaseModel):
    """One optional lifecycle phase (setup or teardown): an instruction and its own check."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    instruction: str = Field(min_length=1)
    verifier: VerifierSpec
    step_budget: int = Field(default=16, ge=1, le=256)


class Lifecycle(BaseModel):
    """Task Lifecycle Protocol (paper section 3.3): setup -> execution -> teardown, success-gated."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    setup: PhaseSpec | None = None
    teardown: PhaseSpec | None = None


class DemoStart(BaseModel):
    """Where an episode starts inside a demonstration (a reverse curriculum, Backplay): after
    the task's setup the phone plays the demonstration's actions except its last
    ``remaining``, then the agent takes over for the whole step budget. Those played steps
    begin the agent's history (``Trajectory.demonstration``), as in the warm start's SFT data,
    but they are not the agent's: no transition of the episode, no training row.

    ``actions`` is a demonstration recorded from this task's initial state (valid on a phone
    that starts in that state); ``None`` asks the simulator for its shortest plan from the
    phone's own state (phones with a SimPhone state probe), which is the demonstration whose
    snapshot after each step is the state the phone is in.

        >>> DemoStart(remaining=2).remaining
        2
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    remaining: int = Field(
        ge=0,
        le=1024,
        description="demonstration steps left to the agent; 0 plays every recorded action (a branch: the agent "
        "continues an earlier episode from where its recorded actions led)",
    )
    actions: tuple[Action, ...] | None = Field(
        default=None, description="a recorded demonstration; None: the simulator's shortest plan from the phone's state"
    )

    @model_validator(mode="after")
    def _check(self) -> DemoStart:
        if self.remaining == 0 and self.actions is None:
            raise ValueError(
                "DemoStart(remaining=0) plays the whole demonstration: it needs recorded actions (the simulator's "
                "plan played to the end would leave the goal met); give actions, or leave at least 1 step"
            )
        return self


class Task(BaseModel):
    """A natural-language goal with the metadata needed to run and verify it.

    >>> from darwin.types import Task, VerifierSpec
    >>> t = Task(id="settings_dark", instruction="Turn on dark theme.", app="Settings",
    ...          verifier=VerifierSpec(predicate="settings.dark_theme", params={"enabled": True}))
    >>> t.step_budget
    32
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    instruction: str = Field(min_length=1)
    app: str = Field(min_length=1, description="app name as shown on the launcher")
    language: Literal["ENG", "CHN"] = "ENG"
    difficulty: int = Field(default=1, ge=1, le=3)
    golden_steps: int | None = Field(default=None, ge=1, description="human step count")
    step_budget: int = Field(default=32, ge=1, le=1024, description="horizon of the execution phase")
    verifier: VerifierSpec
    lifecycle: Lifecycle | None = None
    key_components: tuple[str, ...] = ()
    source: str = Field(default="darwin", description="where the task comes from (e.g. 'spa-bench')")
    setup: tuple[StateSetup, ...] = Field(default=(), description="phone state edits applied before the episode")
    template: str | None = Field(default=None, description="the template this task is an instance of")
    params: dict[str, JsonValue] = Field(default_factory=dict, description="the template parameters of this instance")
    allowed_changes: tuple[str, ...] | None = Field(
        default=None,
        description="state paths (dotted, '*' matches one key) the task may change; a change of app data "
        "elsewhere is an unexpected side effect. None: side effects are not measured for this task",
    )
    subgoals: tuple[VerifierSpec, ...] = Field(
        default=(),
        description="checks whose share met at the end is the progress rate (empty: the verifier's own distance)",
    )
    start: DemoStart | None = Field(
        default=None,
        description="start the episode inside a demonstration (a reverse curriculum); None: from the beginning",
    )

    @field_validator("instruction")
    @classmethod
    def _strip(cls, v: str) -> str:
        return v.strip()

    def phases(self) -> list[tuple[Phase, str, VerifierSpec, int]]:
        """The phases to run in order as ``(phase, instruction, verifier, step_budget)``."""
        out: list[tuple[Phase, str, VerifierSpec, int]] = []
        lc = self.lifecycle
        if lc is not None and lc.setup is not None:
            out.append((Phase.SETUP, lc.setup.instruction, lc.setup.verifier, lc.setup.step_budget))
        out.append((Phase.EXECUTION, self.instruction, self.verifier, self.step_budget))
        if lc is not None and lc.teardown is not None:
            out.append((Phase.TEARDOWN, lc.teardown.instruction, lc.teardown.verifier, lc.teardown.step_budget))
        return out


class Phase(str, enum.Enum):
    """Lifecycle phase a step belongs to."""

    SETUP = "setup"
    EXECUTION = "execution"
    TEARDOWN = "teardown"


class TerminationReason(str, enum.Enum):
    """Why an episode (or phase) ended."""

    SUCCESS = "success"
    """The verifier confirmed the goal before the agent stopped."""
    AGENT_FINISHED = "agent_finished"
    """The agent emitted ``finished``/``answer``; the verdict says whether it was right."""
    STEP_BUDGET = "step_budget"
    """The phase exhausted its step budget (a time limit: truncation, not failure by itself)."""
    INFRA_TRUNCATED = "infra_truncated"
    """The phone or its connection failed; never a reward, always with a cause."""
    ERROR = "error"
    """A bug in the workflow, agent or verifier; recorded with the exception text."""
    ALREADY_DONE = "already_done"
    """The goal already held before the agent acted (state persists between episodes):
    nothing was played, so the episode is neither scored nor trained on."""
    BLOCKED = "blocked"
    """The action guard refused an action before it reached the phone (a purchase, a post, a
    message, a deletion: :mod:`darwin.envs.guard`); with the rule as the cause. A failure."""


class Outcome(str, enum.Enum):
    """How one episode counts, in every place that counts episodes: the rollout's statistics,
    evaluations and the run database's per-task counts. Exactly one per episode
    (:attr:`Trajectory.outcome`).

    Only ``success`` and ``failure`` are scored (:attr:`scored`); an infrastructure truncation
    is never a failure, and an unverified episode is never a silent 0 or 1.
    """

    SUCCESS = "success"
    """The verifier accepted the execution phase."""
    FAILURE = "failure"
    """The verifier rejected it (the agent's answer was wrong, or the step budget ran out)."""
    UNVERIFIED = "unverified"
    """The episode ended on its own terms but the verifier could not decide."""
    INFRASTRUCTURE = "infrastructure"
    """The phone or its connection failed (an infrastructure truncation)."""
    ERROR = "error"
    """A bug in the workflow, agent or verifier ended it."""
    ALREADY_DONE = "already_done"
    """The goal held before the agent acted: nothing was played."""
    UNFINISHED = "unfinished"
    """The episode has not ended yet."""

    @property
    def scored(self) -> bool | None:
        """True / False for a success / failure; None for the outcomes that are not scored."""
        return True if self is Outcome.SUCCESS else False if self is Outcome.FAILURE else None


@dataclass(frozen=True)
class Termination:
    """How an episode ended; ``cause`` is required for infrastructure truncations, errors and blocks."""

    reason: TerminationReason
    cause: str = ""

    def __post_init__(self) -> None:
        if (
            self.reason in (TerminationReason.INFRA_TRUNCATED, TerminationReason.ERROR, TerminationReason.BLOCKED)
            and not self.cause
        ):
            raise ValueError(f"termination {self.reason.value!r} needs a cause")

    @property
    def truncated(self) -> bool:
        """True when the episode was cut short rather than ended by the task (gym semantics)."""
        return self.reason in (TerminationReason.STEP_BUDGET, TerminationReason.INFRA_TRUNCATED)


class ParseError(BaseModel):
    """Model text that could not be turned into an action. A value, never raised."""

    model_config = ConfigDict(frozen=True)

    reason: str
    text: str = Field(default="", description="the offending text, truncated to 500 characters")

    @field_validator("text")
    @classmethod
    def _truncate(cls, v: str) -> str:
        return v[:500]


@dataclass(frozen=True)
class Mark:
    """One thing a reader found on a screen (:mod:`darwin.readers`): its text and where it is.

    ``box`` is ``(x0, y0, x1, y1)`` in device pixels (``x1``, ``y1`` exclusive), the frame
    actions use; ``clickable`` is known for the accessibility tree (``elements``) and ``None``
    for text read off the pixels (``ocr``); ``score`` is the reader's confidence where it has one.
    """

    text: str
    box: tuple[int, int, int, int]
    clickable: bool | None = None
    score: float | None = None

    @property
    def center(self) -> tuple[int, int]:
        """The box's centre pixel: where a pointing action (``click(#k)``) taps."""
        x0, y0, x1, y1 = self.box
        return (x0 + max(x1 - 1, x0)) // 2, (y0 + max(y1 - 1, y0)) // 2

    def contains(self, x: int, y: int) -> bool:
        x0, y0, x1, y1 = self.box
        return x0 <= x < x1 and y0 <= y < y1

    @property
    def area(self) -> int:
        x0, y0, x1, y1 = self.box
        return max(0, x1 - x0) * max(0, y1 - y0)


@dataclass(frozen=True)
class Observation:
    """What an agent sees at one step: the screenshot, the goal, and what a reader read.

    ``screenshot`` is an ``(H, W, 3)`` uint8 array at agent resolution; ``device_size`` is
    the phone's real ``(width, height)`` in pixels, which action coordinates refer to.
    ``marks`` are the screen's texts and boxes as the agent's reader found them (empty for
    the ``none`` reader): numbered in the prompt, and what ``click(#k)`` points at.
    """

    screenshot: np.ndarray
    goal: str
    device_size: tuple[int, int]
    task_id: str = ""
    phase: Phase = Phase.EXECUTION
    step: int = 0
    marks: tuple[Mark, ...] = ()

    def __post_init__(self) -> None:
        s = self.screenshot
        if s.dtype != np.uint8 or s.ndim != 3 or s.shape[2] != 3:
            raise ValueError(f"screenshot must be (H, W, 3) uint8, got {s.shape} {s.dtype}")


@dataclass(frozen=True)
class ChatMessage:
    """One chat turn; ``images`` are ``(H, W, 3)`` uint8 screenshots placed before the text."""

    role: Literal["system", "user", "assistant"]
    text: str
    images: tuple[np.ndarray, ...] = ()


@dataclass(frozen=True)
class Prompt:
    """What an agent's context processing (psi) hands to a policy.

    ``seed`` optionally fixes this request's sampling randomness: backends that support it
    (:class:`~darwin.policies.hf.HFPolicy`) then give the same sample whatever batch the
    request lands in and whenever it arrives. Without it the backend draws a seed.
    ``greedy`` asks for the most likely token at every step whatever the policy's temperature
    (an evaluation's greedy episodes, :class:`EpisodeSampling`); the recorded log-probs stay
    those of the policy's own distribution.
    """

    messages: tuple[ChatMessage, ...]
    seed: int | None = None
    greedy: bool = False

    @property
    def images(self) -> list[np.ndarray]:
        return [img for m in self.messages for img in m.images]


@dataclass(frozen=True)
class EpisodeSampling:
    """How a model actor samples one episode: its requests' seeds derive from ``seed`` (the
    ``t``-th request of the episode gets :meth:`request_seed` ``(t)``), so the same episode
    replayed by another checkpoint meets the same random numbers; ``greedy`` takes the most
    likely token instead of sampling. Paired evaluations (:mod:`darwin.evaluate`) give each
    episode one of these.

        >>> s = EpisodeSampling(seed=7)
        >>> s.request_seed(0) == EpisodeSampling(seed=7).request_seed(0) != s.request_seed(1)
        True
    """

    seed: int
    greedy: bool = False

    def request_seed(self, turn: int) -> int:
        """The seed of the episode's ``turn``-th request (a 31-bit non-negative int)."""
        return int(np.random.SeedSequence([self.seed, turn]).generate_state(1)[0] >> 1)


@dataclass(frozen=True)
class Generation:
    """A policy's sampled response with what training needs (token ids, log-probs, version)."""

    text: str
    prompt_ids: tuple[int, ...] = ()
    response_ids: tuple[int, ...] = ()
    response_logprobs: tuple[float, ...] = ()
    policy_version: int = 0


@dataclass(frozen=True)
class Decision:
    """One step's choice: the action (or a parse error), and for model actors the prompt and
    the generation behind it (what the learner re-scores).

    A turn that does not act on the phone (a planner's sub-goals, a reflector's note, a
    self-check's judgement: see :mod:`darwin.workflows`) holds a ``message`` instead of an
    action; exactly one of ``action``, ``parse_error`` and ``message`` is set.
    """

    action: Action | None
    parse_error: ParseError | None = None
    generation: Generation | None = None
    prompt: Prompt | None = None
    message: str | None = None
    """Words for another agent or the workflow; never sent to the phone."""

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.action, self.parse_error, self.message)) != 1:
            raise ValueError("a Decision holds exactly one of action, parse_error or message")


@dataclass(frozen=True)
class Transition:
    """The atomic data unit: one step of one episode (paper section 3.4)."""

    episode_id: str
    task_id: str
    step: int
    phase: Phase
    observation: Observation
    decision: Decision
    reward: float = 0.0
    done: bool = False
    termination: Termination | None = None
    agent: str = ACTOR
    """Which agent produced the decision (the workflow's role name: ``"actor"`` for the agent
    that acts on the phone, ``"planner"``, ``"reflector"``, ``"verifier"``...). The learner
    trains the transitions of one named agent (``LearnerConfig.trained_agent``)."""


@dataclass(frozen=True)
class EpisodeMetrics:
    """MobileGym's episode metrics of the execution phase, measured from the phone's state.

    Recorded by the step loop when the phone has a state probe and the verifier is cheap
    (rule checks); they never change rewards, verdicts or what the learner sees. Definitions
    and the functions computing them: :mod:`darwin.algos.task_metrics`, docs/evaluation.md.

    >>> m = EpisodeMetrics(progress_rate=0.5, side_effects=("apps.settings.data.notification_history",))
    >>> m.has_side_effects, m.over_time
    (True, False)
    """

    progress_rate: float
    """Share of the task's sub-goals met at the end (1.0 on success); without sub-goals, the
    fraction of the goal predicate's distance closed (a distance-based proxy)."""
    side_effects: tuple[str, ...] | None = None
    """App-data paths changed that ``Task.allowed_changes`` does not allow; ``None`` when
    the task does not declare what it may change (not measured)."""
    false_completion: bool = False
    """The agent said ``finished``/``answer`` and the verdict is a failure."""
    over_time_steps: int | None = 0
    """Actor steps after the goal first held (a final ``finished``/``answer`` not counted);
    ``None`` when the goal was not checked after each step."""
    goal_first_met_step: int | None = None
    """The execution-phase actor step after which the goal first held (``None``: never seen)."""

    @property
    def has_side_effects(self) -> bool:
        return bool(self.side_effects)

    @property
    def over_time(self) -> bool:
        return bool(self.over_time_steps)


@dataclass(frozen=True)
class VerdictUsage:
    """What a model-based verdict cost: tokens, dollars, requests, and the judge's settings.

    ``cost_usd`` is ``None`` when no request had a known price (a self-hosted model outside
    LiteLLM's price map); answers served from the judge's cache cost nothing and count in
    ``cached``. ``config`` is the judge's configuration as JSON (names of key variables,
    never keys). Stored with the verdict in the run database.

    >>> a = VerdictUsage(prompt_tokens=10, completion_tokens=5, cost_usd=0.001, requests=1)
    >>> (a + VerdictUsage(prompt_tokens=1, completion_tokens=1, requests=1, cached=1)).prompt_tokens
    11
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    requests: int = 0
    cached: int = 0
    config: dict[str, Any] | None = None

    def __add__(self, other: VerdictUsage) -> VerdictUsage:
        cost = (
            None
            if self.cost_usd is None and other.cost_usd is None
            else (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        )
        return VerdictUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=cost,
            requests=self.requests + other.requests,
            cached=self.cached + other.cached,
            config=self.config
            if other.config is None
            else (other.config if self.config is None else {"parts": [self.config, other.config]}),
        )


@dataclass(frozen=True)
class Verdict:
    """``success=None`` means unverified (e.g. the judge was unreachable): never a silent 0 or 1.

    ``usage`` is set by model-based verifiers (tokens, cost, the judge's settings).
    """

    success: bool | None
    reward: float | None = None
    reason: str = ""
    usage: VerdictUsage | None = None

    def __post_init__(self) -> None:
        if self.reward is None:
            object.__setattr__(self, "reward", None if self.success is None else float(self.success))


@dataclass(frozen=True)
class StepScore:
    """What the learner computed for one stored step in one update (``darwin view`` shows it).

    ``value``: the critic's value at the step's first response token (``None`` without a
    critic); ``advantage``: the mean over the response's tokens of the advantage it trained
    with (after whitening); ``logprob``: the behaviour policy's log-prob of the whole response.
    """

    episode_id: str
    phase: Phase
    step: int
    """:attr:`Transition.step` (with ``phase`` and the episode, where the run database stores it)."""
    update: int
    value: float | None
    advantage: float
    logprob: float


@dataclass(frozen=True)
class Branch:
    """Where a continuation episode branches off an earlier one (branching rollouts,
    :class:`darwin.rollout.Branching`): the phone was put back in the state episode ``parent``
    started from, ``parent``'s actions before its actor step ``step`` were replayed, and the
    agent took over there. The continuation's first actor step and ``parent``'s actor step
    ``step`` acted from the same phone state: :attr:`fork` names that state for the learner.

        >>> Branch(parent="e1", step=3).fork
        'e1@3'
    """

    parent: str
    step: int
    """Index of the parent's actor step (0: its first) the continuation replaces."""

    @property
    def fork(self) -> str:
        return f"{self.parent}@{self.step}"


@dataclass
class Trajectory:
    """All transitions of one episode in time order, plus how it ended and its verdicts."""

    episode_id: str
    task: Task
    transitions: list[Transition] = field(default_factory=list)
    termination: Termination | None = None
    verdicts: dict[Phase, Verdict] = field(default_factory=dict)
    """The verdict on each phase played, in play order: the verifier's (with tokens and cost for
    model judges), or the workflow's where no verifier decided (``success=None`` with the
    termination's cause, or "already held"). :attr:`phase_success` and :attr:`phase_reasons`
    read it."""
    group: str | None = None
    """The group of rollouts this episode belongs to (GRPO / GiGPO: the same task from the
    same start), set by the rollout engine in group mode; ``None`` outside group mode."""
    phone: str = ""
    """Name of the phone the episode ran on (set by the rollout engine)."""
    demonstration: list[Transition] = field(default_factory=list)
    """The demonstration steps the phone played before the agent's first step (``Task.start``,
    a reverse curriculum; agent ``"demonstration"``): the start of the agent's history in the
    execution phase, as in the warm start's SFT data, but never in :attr:`transitions`, never
    streamed, never a training row."""

    branch: Branch | None = None
    """Set on a continuation of another episode (branching rollouts): which episode, from which
    of its steps. ``None`` for an episode sampled from the curriculum."""

    @property
    def start_step(self) -> int:
        """Demonstration steps played before the agent's first (0: from the beginning)."""
        return len(self.demonstration)

    metrics: EpisodeMetrics | None = None
    """Progress, side effects, false completion and over-time of the execution phase
    (:class:`EpisodeMetrics`); ``None`` when not measured (no state probe, a model judge,
    or an episode that was not scored)."""
    next_prompt: Prompt | None = None
    """For a truncated episode: the prompt the actor would have been given at the state its
    last action led to (a screenshot taken after the cut), from which a critic reads
    ``V(s')`` to bootstrap the truncation. Recorded only when the workflow is asked to
    (``StepConfig.record_next_prompt``), by an actor that builds prompts, on a phone that
    answered one more screenshot; ``None`` otherwise."""

    @property
    def phase_success(self) -> Mapping[Phase, bool | None]:
        """Each played phase's ``success`` (read-only; write :attr:`verdicts`)."""
        return MappingProxyType({phase: verdict.success for phase, verdict in self.verdicts.items()})

    @property
    def phase_reasons(self) -> Mapping[Phase, str]:
        """Each played phase's explanation (read-only; write :attr:`verdicts`)."""
        return MappingProxyType({phase: verdict.reason for phase, verdict in self.verdicts.items()})

    @property
    def success(self) -> bool | None:
        """Execution-phase verdict (``None`` if it never ran or was unverifiable)."""
        verdict = self.verdicts.get(Phase.EXECUTION)
        return None if verdict is None else verdict.success

    @property
    def completed(self) -> bool:
        return self.termination is not None

    @property
    def outcome(self) -> Outcome:
        """How this episode counts (:class:`Outcome`): by how it ended, then by its verdict.

        >>> from darwin.task_registry import get_task
        >>> t = Trajectory("e0", get_task("amazon_0"), termination=Termination(TerminationReason.STEP_BUDGET))
        >>> from darwin.verifiers.base import Verdict
        >>> t.verdicts[Phase.EXECUTION] = Verdict(False)
        >>> t.outcome, t.outcome.scored
        (<Outcome.FAILURE: 'failure'>, False)
        """
        if self.termination is None:
            return Outcome.UNFINISHED
        reason = self.termination.reason
        if reason == TerminationReason.INFRA_TRUNCATED:
            return Outcome.INFRASTRUCTURE
        if reason == TerminationReason.ERROR:
            return Outcome.ERROR
        if reason == TerminationReason.ALREADY_DONE:
            return Outcome.ALREADY_DONE
        if self.success is None:
            return Outcome.UNVERIFIED
        return Outcome.SUCCESS if self.success else Outcome.FAILURE

    def __len__(self) -> int:
        return len(self.transitions)


__all__ = [
    "ACTOR",
    "Branch",
    "ChatMessage",
    "Decision",
    "EpisodeMetrics",
    "Generation",
    "Lifecycle",
    "Mark",
    "Observation",
    "Outcome",
    "ParseError",
    "Phase",
    "PhaseSpec",
    "Prompt",
    "Task",
    "TaskDefinitionError",
    "Termination",
    "TerminationReason",
    "Trajectory",
    "Transition",
    "Verdict",
    "VerdictUsage",
    "VerifierSpec",
]
