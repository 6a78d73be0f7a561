"""Demonstration sources for fine-tuning any checkpoint, and the training examples built from
them by the agent that acts at run time.

Three sources give :class:`DemoEpisode`\\ s (screens, actions, optional words):

- :func:`episodes_from_oracle`: the SimPhone oracle (:func:`~darwin.sft.demonstrations.collect_demonstrations`);
- :func:`episodes_from_run`: a run database's episodes that a verifier accepted (rule, judge or
  learned; the verdict goes into each example's metadata); with an RL run this is
  rejection-sampling fine-tuning (the policy's own successful responses are the targets);
- :func:`episodes_from_jsonl`: a JSONL demonstration file (:mod:`darwin.sft.records`).

:func:`build_examples` replays each episode through a real
:class:`~darwin.agents.base.ModelActor` of the chosen agent format, over a policy that
answers with the demonstrated text: the prompt of every :class:`Example` is the one that
agent sends its policy at that step (memory, history rendering and all), not a copy of the
prompt code.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from darwin.actions import Action
from darwin.agents.base import ModelActor
from darwin.agents.vlm import VLMAgent
from darwin.loop_thread import run_returning
from darwin.policies.base import Policy
from darwin.readers.base import ReaderUnavailable, read_marks
from darwin.types import (
    Decision,
    Generation,
    Observation,
    ParseError,
    Phase,
    Prompt,
    Task,
    TerminationReason,
    Transition,
)

logger = logging.getLogger(__name__)

__all__ = [
    "DemoEpisode",
    "DemoStep",
    "DemoVerdict",
    "Example",
    "build_examples",
    "episodes_from_jsonl",
    "episodes_from_oracle",
    "episodes_from_run",
    "resize_screenshot",
]


@dataclass(frozen=True)
class DemoVerdict:
    """The verifier's verdict that accepted a run episode (copied into example metadata)."""

    verifier_kind: str
    success: bool | None
    reward: float | None
    reason: str


@dataclass(frozen=True)
class DemoStep:
    """One demonstrated step. ``response`` is the model's own text when it wrote the step (a
    run); else the agent formats ``action`` (with ``thought`` where its format has one).
    A step without an action (the model's output did not parse) is kept for the history only."""

    observation: Observation = field(repr=False)
    action: Action | None
    response: str | None = None
    thought: str = ""
    parse_error: ParseError | None = None


@dataclass(frozen=True)
class DemoEpisode:
    """One demonstrated episode (one phase's actor steps, in order)."""

    episode_id: str
    goal: str
    task_id: str
    steps: tuple[DemoStep, ...]
    source: str
    """``oracle``, ``run:<db>`` or ``jsonl:<file>:<line>``."""
    task: Task | None = None
    verdict: DemoVerdict | None = None


@dataclass(frozen=True)
class Example:
    """One training example: the prompt the agent sent its policy and the response to learn."""

    prompt: Prompt
    target: str
    """The response text (EOS excluded)."""
    observation: Observation = field(repr=False)
    action: Action
    """``agent.parse(target)``: the action the target means on this screen."""
    task_id: str
    episode_id: str
    step: int
    source: str
    verdict: DemoVerdict | None = None


def resize_screenshot(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``image`` at ``size`` (W, H) (bilinear; unchanged if it already has that size)."""
    from PIL import Image

    w, h = size
    if image.shape[1] == w and image.shape[0] == h:
        return image
    return np.asarray(Image.fromarray(image).convert("RGB").resize((w, h), Image.Resampling.BILINEAR), dtype=np.uint8)


# ------------------------------------------------------------------------------ sources
def episodes_from_oracle(config: object, *, heldout: bool = False) -> list[DemoEpisode]:
    """The SimPhone oracle's demonstrations of an :class:`~darwin.sft.config.SFTConfig`
    (its tasks, phones, episodes, perturbations, observation size), as episodes.

    The actions are the oracle's (launcher taps as ``open_app`` with ``launch_by_name``);
    the target agent formats them in its own convention.
    """
    from darwin.sft.config import SFTConfig
    from darwin.sft.demonstrations import collect_demonstrations

    assert isinstance(config, SFTConfig)
    demos, _ = collect_demonstrations(config, heldout=heldout)
    episodes: list[DemoEpisode] = []
    current: list[DemoStep] = []
    key: tuple[int, str] | None = None

    def close() -> None:
        if current and key is not None:
            goal = current[0].observation.goal
            episodes.append(
                DemoEpisode(
                    episode_id=f"oracle-{key[0]}-{len(episodes)}",
                    goal=goal,
                    task_id=key[1],
                    steps=tuple(current),
                    source="oracle",
                )
            )

    for d in demos:
        if d.step == 0 or key != (d.phone_seed, d.task_id):
            close()
            current, key = [], (d.phone_seed, d.task_id)
        current.append(DemoStep(observation=d.observation, action=d.oracle_action))
    close()
    return episodes


def episodes_from_jsonl(path: str | os.PathLike[str], observation_size: tuple[int, int]) -> list[DemoEpisode]:
    """The episodes of a JSONL demonstration file, screenshots resized to ``observation_size``
    (as the workflow gives them to the agent). Raises :class:`~darwin.sft.records.DemoFileError`
    naming the bad line, field and fix."""
    from darwin.sft.records import load_records

    out: list[DemoEpisode] = []
    for loaded in load_records(path):
        record = loaded.record
        task_id = record.task_id or f"jsonl-{loaded.line}"
        steps = tuple(
            DemoStep(
                observation=Observation(
                    screenshot=resize_screenshot(shot, observation_size),
                    goal=record.goal,
                    device_size=loaded.device_size,
                    task_id=task_id,
                    step=i,
                ),
                action=s.action,
                thought=s.thought,
            )
            for i, (s, shot) in enumerate(zip(record.steps, loaded.screenshots, strict=True))
        )
        out.append(
            DemoEpisode(
                episode_id=f"jsonl-{Path(path).name}-{loaded.line}",
                goal=record.goal,
                task_id=task_id,
                steps=steps,
                source=f"jsonl:{loaded.source}",
            )
        )
    return out


def open_run_store(source: str | os.PathLike[str]) -> object:
    """A :class:`~darwin.store.RunStore` for a run directory (``run.db`` inside), a SQLite
    file or a SQLAlchemy URL."""
    from darwin.database import DB_FILENAME
    from darwin.store import RunStore

    text = str(source)
    path = Path(text)
    if path.is_dir():
        if not (path / DB_FILENAME).is_file():
            raise FileNotFoundError(
                f"{path} has no {DB_FILENAME}; pass a `darwin run` / `darwin eval` directory or its run.db"
            )
        return RunStore.for_run_dir(path)
    if "://" in text:
        return RunStore(text)
    if not path.is_file():
        raise FileNotFoundError(f"no run database at {path}; pass a run directory, a run.db file or a SQLAlchemy URL")
    return RunStore(path)


def episodes_from_run(
    source: str | os.PathLike[str],
    observation_size: tuple[int, int],
    *,
    phase: Phase = Phase.EXECUTION,
) -> list[DemoEpisode]:
    """Episodes of every run in a run database that a verifier accepted (``success`` true),
    with the accepting verdict; the actor's steps of ``phase`` in order, with the model's own
    responses (rejection sampling when the run is an RL run).

    The goal is rebuilt as :func:`darwin.task_registry.goal_text` of the stored task (what the step
    workflow gives the agent; workflows whose advisers rewrite the goal are not replayed
    exactly). Episodes whose steps lack screenshots are skipped with a warning.
    """
    from darwin.store import RunStore
    from darwin.task_registry import goal_text

    store = open_run_store(source)
    assert isinstance(store, RunStore)
    out: list[DemoEpisode] = []
    try:
        for run in store.runs():
            for ep in store.episodes(run.run_id):
                if ep.success is not True or ep.termination_reason == TerminationReason.ALREADY_DONE:
                    continue
                task = store.task(ep.task_id)
                if task is None or ep.device_size is None:
                    logger.warning("episode %s: no stored task or device size; skipped", ep.episode_id)
                    continue
                accepted = [v for v in store.verdicts(ep.episode_id) if v.phase == phase and v.success]
                verdict = (
                    None
                    if not accepted
                    else DemoVerdict(
                        verifier_kind=accepted[-1].verifier_kind,
                        success=accepted[-1].success,
                        reward=accepted[-1].reward,
                        reason=accepted[-1].reason,
                    )
                )
                rows = [
                    s
                    for s in store.steps(ep.episode_id)
                    if s.phase == phase and s.agent == "actor" and s.message is None
                ]
                if not rows or any(s.screenshot_path is None for s in rows):
                    logger.warning("episode %s: steps without screenshots; skipped", ep.episode_id)
                    continue
                goal = goal_text(task)
                steps = tuple(
                    DemoStep(
                        observation=Observation(
                            screenshot=resize_screenshot(store.load_screenshot(s.screenshot_path), observation_size),  # type: ignore[arg-type]  # steps without a screenshot were skipped above
                            goal=goal,
                            device_size=ep.device_size,
                            task_id=ep.task_id,
                            phase=phase,
                            step=s.step,
                        ),
                        action=s.action,
                        response=s.response_text,
                        parse_error=s.parse_error,
                    )
                    for s in rows
                )
                out.append(
                    DemoEpisode(
                        episode_id=ep.episode_id,
                        goal=goal,
                        task_id=ep.task_id,
                        steps=steps,
                        source=f"run:{source}",
                        task=task,
                        verdict=verdict,
                    )
                )
    finally:
        store.close()
    return out


# ----------------------------------------------------------------------------- examples
class _ReplayPolicy(Policy):
    """Answers every prompt with the next demonstrated text and remembers the prompts."""

    def __init__(self) -> None:
        self.text = ""
        self.prompts: list[Prompt] = []

    async def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        self.prompts.extend(prompts)
        return [Generation(text=self.text) for _ in prompts]


def _response(agent: VLMAgent, step: DemoStep) -> str:
    """The text the model should write for ``step`` in ``agent``'s format."""
    if step.response is not None and step.response.strip():
        if step.action is None:
            return step.response
        parsed = agent.parse(step.response, step.observation)
        if parsed.action == step.action:  # the model's own words (rejection sampling)
            return step.response
    assert step.action is not None
    format_response = getattr(agent, "format_response", None)
    if step.thought and format_response is not None:
        return str(format_response(step.action, step.observation, step.thought))
    return agent.format_action(step.action, step.observation)


async def _read(agent: VLMAgent, step: DemoStep, source: str) -> DemoStep:
    """``step`` with its screen read by ``agent``'s reader (marks recorded with the step are
    kept): a demonstration from a file or a run has a screenshot but no phone, so only a
    reader of pixels can read it."""
    if agent.reader is None or step.observation.marks:
        return step
    if agent.reader.needs_phone:
        raise ReaderUnavailable(
            f"{source}: the agent's reader ({agent.reader.cache_key}) reads a phone's accessibility tree, and a "
            "stored demonstration has only its screenshot: train with agent.reader='ocr', or record the "
            "demonstrations with the marks on their observations"
        )
    observation = step.observation
    marks = await read_marks(agent.reader, observation.screenshot, observation.device_size)
    return dataclasses.replace(step, observation=dataclasses.replace(observation, marks=marks))


def build_examples(make_agent: Callable[[], VLMAgent], episodes: Sequence[DemoEpisode]) -> list[Example]:
    """Training examples of ``episodes`` for the agent ``make_agent()`` builds.

    Each episode is played by a :class:`~darwin.agents.base.ModelActor` of a fresh agent over
    a policy that answers with the demonstrated response: the example's prompt is exactly
    what that agent sends its policy at the step, with the history of its own (parsed)
    decisions, as in a rollout. With a reader on the agent each screen is read as a rollout
    reads it (stored demonstrations carry no phone: a reader of pixels only). Steps whose response does not parse stay in the history but
    are not examples.
    """

    async def play() -> list[Example]:
        out: list[Example] = []
        for ep in episodes:
            agent = make_agent()
            policy = _ReplayPolicy()
            actor = ModelActor(agent, policy)
            agent.start_episode(ep.task)
            history: list[Transition] = []
            for step in ep.steps:
                step = await _read(agent, step, ep.source)
                policy.text = _response(agent, step)
                decision: Decision = await actor.act(step.observation, history)
                prompt = policy.prompts[-1]
                history.append(
                    Transition(
                        episode_id=ep.episode_id,
                        task_id=ep.task_id,
                        step=step.observation.step,
                        phase=step.observation.phase,
                        observation=step.observation,
                        decision=decision,
                    )
                )
                if decision.action is None:
                    if step.action is not None:
                        raise ValueError(
                            f"{ep.source}: {type(agent).__name__} cannot read its own response "
                            f"{policy.text!r}: {decision.parse_error}"
                        )
                    continue
                out.append(
                    Example(
                        prompt=prompt,
                        target=policy.text,
                        observation=step.observation,
                        action=decision.action,
                        task_id=ep.task_id,
                        episode_id=ep.episode_id,
                        step=step.observation.step,
                        source=ep.source,
                        verdict=ep.verdict,
                    )
                )
        return out

    return run_returning(play())
