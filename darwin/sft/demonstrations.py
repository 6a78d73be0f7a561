"""Demonstrations: the simulator's oracle played through the real workflow, recorded as the
tiny agent would have seen and answered each step at RL time.

:func:`collect_demonstrations` runs :class:`~darwin.agents.scripted.OracleActor` on
perturbed SimPhones (state kept between episodes, as training phones keep it) behind an
actor that answers like a :class:`~darwin.agents.base.ModelActor`, so every recorded
prompt is the one a rollout would build. See docs/sft.md.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from darwin.actions import Action
from darwin.agents.base import Actor
from darwin.agents.tiny import TinyAgent
from darwin.envs.base import PhoneEnv
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.sft.config import SFTConfig
from darwin.types import (
    Decision,
    Generation,
    Observation,
    Phase,
    Prompt,
    Task,
    TerminationReason,
    Trajectory,
    Transition,
    VerifierSpec,
)

if TYPE_CHECKING:
    from darwin.envs.sim.ui import Widget
    from darwin.readers.base import Reader

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Demonstration:
    """One oracle step as the tiny agent would have seen and answered it at RL time."""

    prompt: Prompt
    """``agent.build_context(observation, history)`` with the phase's history so far."""
    target: str
    """``agent.format_action(oracle_action, observation)``: the response text (EOS excluded)."""
    observation: Observation = field(repr=False)
    action: Action
    """The action executed: ``agent.parse(target)``, i.e. the oracle's on the agent's grid."""
    oracle_action: Action
    task_id: str
    phone_seed: int
    step: int
    target_box: tuple[int, int, int, int] | None = None
    """``(x1, y1, x2, y2)`` in device pixels of the widget the oracle's tap or long press hit
    (None for other actions): what a step-level reward checks the agent's point against."""


class _RecordingOracle(Actor):
    """Plays the oracle but answers like a model actor: the decision carries the TinyAgent
    text as its generation and the grid-rounded parsed action, so the workflow's history
    holds exactly what an RL rollout's history would.

    With ``launch_by_name`` a tap that would launch an app from the launcher is
    demonstrated as ``open_app('<label>')`` (``SimPhone.launch`` either way). ``pick_cost``
    is the oracle's (above 2: type a task's words rather than tap a widget showing them).
    """

    def __init__(
        self, agent: TinyAgent, phone_seed: int, sink: list[Demonstration], launch_by_name: bool, pick_cost: int = 1
    ) -> None:
        from darwin.agents.scripted import OracleActor
        from darwin.envs.sim.phone import SimPhone

        self.oracle = OracleActor(pick_cost=pick_cost)
        self.agent = agent
        self.phone_seed = phone_seed
        self.sink = sink
        self.launch_by_name = launch_by_name
        self._mirror = SimPhone(seed=0)
        self._env: PhoneEnv | None = None

    async def start_phase(
        self, env: PhoneEnv, task: Task, phase: Phase, instruction: str, verifier: VerifierSpec
    ) -> None:
        self._env = env
        await self.oracle.start_phase(env, task, phase, instruction, verifier)

    @property
    def reader(self) -> Reader | None:
        """The agent's: the workflow reads every screen with it, so demonstrations carry the
        marks (and point at them) as the agent's rollouts will."""
        return self.agent.reader

    async def _hit(self, action: Action) -> tuple[Widget | None, bool]:
        """The widget a tap or long press hits on the phone's current screen, and whether that
        screen is the launcher (no app in front, no popup)."""
        from darwin.actions import Click, LongPress

        if not isinstance(action, (Click, LongPress)) or self._env is None:
            return None, False
        state = await self._env.aprobe_state()
        if state is None:
            return None, False
        self._mirror.restore(state)
        launcher = state.get("foreground") is None and state.get("popup") is None
        return self._mirror.layout().hit(action.x, action.y), launcher

    async def act(self, observation: Observation, history: Sequence[Transition]) -> Decision:
        from darwin.actions import Click, OpenApp

        decision = await self.oracle.act(observation, history)
        assert decision.action is not None  # the oracle always acts
        action = decision.action
        widget, launcher = await self._hit(action)
        target_box = widget.box if widget is not None else None
        if (
            self.launch_by_name
            and isinstance(action, Click)
            and launcher
            and widget is not None
            and widget.kind == "app_icon"
            and widget.text
        ):
            action, target_box = OpenApp(app=widget.text), None
        text = self._pointing_press(action, widget, observation) or self.agent.format_action(action, observation)
        parsed = self.agent.parse(text, observation)
        if parsed.action is None:  # a format_action/parse mismatch is a bug in the agent
            raise RuntimeError(f"TinyAgent cannot read its own output {text!r}: {parsed.error}")
        prompt = self.agent.build_context(observation, history)
        self.sink.append(
            Demonstration(
                prompt=prompt,
                target=text,
                observation=observation,
                action=parsed.action,
                oracle_action=action,
                task_id=observation.task_id,
                phone_seed=self.phone_seed,
                step=observation.step,
                target_box=target_box,
            )
        )
        return Decision(action=parsed.action, generation=Generation(text=text), prompt=prompt)

    def _pointing_press(self, action: Action, widget: Widget | None, observation: Observation) -> str | None:
        """``click('text')`` / ``click(#k)`` (and ``long_press``) for a press on ``widget`` when
        the centre of mark ``k`` (the smallest such) hits the same widget: by the text that reads
        the mark where it leads back there (:meth:`TinyAgent.press_call`), else by number; the plain coordinates where no mark's
        centre does (a mark of text beside an icon, or none). None for other actions
        (``format_action`` decides: a typed goal span or mark text is copied by reference)."""
        from darwin.actions import Click, LongPress

        if not isinstance(action, (Click, LongPress)) or not observation.marks or not self.agent.config.point:
            return None
        name = "click" if isinstance(action, Click) else "long_press"
        if widget is None:  # a press on nothing (or a phone without a state probe): no mark stands for it
            return self.agent.plain_text(action, observation)
        layout = self._mirror.layout()  # the screen _hit restored
        by_size = sorted(range(len(observation.marks)), key=lambda k: observation.marks[k].area)
        for k in by_size:
            if layout.hit(*observation.marks[k].center) is not widget:
                continue
            text = self.agent.press_call(name, k, observation)  # by its text where that leads back to k
            pressed = self.agent.parse(text, observation).action
            if isinstance(pressed, (Click, LongPress)) and layout.hit(pressed.x, pressed.y) is widget:
                return text
            return f"{name}(#{k})"
        return self.agent.plain_text(action, observation)


@dataclass(frozen=True)
class DemoStats:
    """What the demonstrations contain."""

    episodes: int
    successes: int
    steps: int
    phones: int
    per_task_steps: dict[str, int]
    skipped_done_episodes: int = 0
    unique_screens: int = 0
    target_tokens: int = 0
    max_target_tokens: int = 0
    mean_prompt_tokens: float = 0.0


def _ended_by(trajectory: Trajectory) -> TerminationReason:
    """Why a finished episode ended (a workflow's run always records it)."""
    if trajectory.termination is None:
        raise RuntimeError(f"episode {trajectory.episode_id} came back from its workflow without a termination")
    return trajectory.termination.reason


@dataclass
class _PhoneDemonstrations:
    """What one demonstration phone played (:func:`_demonstrate_on_phone`)."""

    demos: list[Demonstration]
    episodes: int
    successes: int
    skipped: int
    endings: list[str]
    """Why episodes ended early (the workflow's cause), for the caller to log."""


def _demonstrate_on_phone(
    config: SFTConfig, seed: int, episodes: int, first_episode: int, heldout: bool
) -> _PhoneDemonstrations:
    """Phone ``seed`` plays ``episodes`` demonstration episodes in its own shuffled task order
    (seeded by ``config.seed``), returning home between episodes but keeping its state, as
    training phones do; its episodes are numbered from ``first_episode``. Deterministic, and
    independent of every other phone: the phones may play in separate processes."""
    from darwin.envs.sim.env import SimPhoneEnv
    from darwin.workflows.step import LifecycleWorkflow, StepConfig

    tasks = config.demonstration_round()
    agent = config.make_agent()
    workflow = LifecycleWorkflow(config=StepConfig(observation_size=config.observation_size))
    out = _PhoneDemonstrations(demos=[], episodes=0, successes=0, skipped=0, endings=[])

    async def play() -> None:
        env = SimPhoneEnv(seed=seed, perturbation=config.perturbation, name=f"demo-{seed}")
        rng = np.random.default_rng([config.seed, seed, int(heldout)])
        order: list[Task] = []
        episode: list[Demonstration] = []
        actor = _RecordingOracle(agent, seed, episode, config.launch_by_name, config.pick_cost)
        for _ in range(episodes):
            if not order:
                order = [tasks[j] for j in rng.permutation(len(tasks))]
            task = order.pop(0)
            episode.clear()
            episode_id = f"demo-{seed}-{first_episode + out.episodes}"
            trajectory = await workflow.run(env, task, actor, episode_id=episode_id)
            await env.ago_home()
            out.episodes += 1
            out.successes += bool(trajectory.success)
            # The workflow ends an episode whose goal already holds before anyone acts.
            if config.skip_done_episodes and _ended_by(trajectory) == TerminationReason.ALREADY_DONE:
                out.skipped += 1
                continue
            out.demos.extend(episode)
            if trajectory.termination is not None and trajectory.termination.cause:
                out.endings.append(f"demo episode {task.id} on phone {seed} ended: {trajectory.termination.cause}")

    asyncio.run(play())
    return out


MIN_EPISODES_TO_FAN_OUT = 64
"""Below this many episodes the demonstrations play in this process: starting worker processes
(each imports darwin and builds its agent) costs more than the plans they would share."""


def demonstration_workers(config: SFTConfig, episodes: int, phones: int) -> int:
    """The processes :func:`collect_demonstrations` plays ``phones`` phones' ``episodes`` in:
    ``config.demo_workers``, else one per core for :data:`MIN_EPISODES_TO_FAN_OUT` episodes or
    more (one below), never more than the phones.

    >>> from darwin.sft.config import SFTConfig
    >>> demonstration_workers(SFTConfig(demo_workers=4), episodes=256, phones=2)
    2
    >>> demonstration_workers(SFTConfig(), episodes=16, phones=8)
    1
    """
    wanted = config.demo_workers
    if wanted is None:
        wanted = usable_cores() if episodes >= MIN_EPISODES_TO_FAN_OUT else 1
    return max(1, min(wanted, phones))


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity, capped by a cgroup v2 CPU quota
    (``/sys/fs/cgroup/cpu.max``) where one is set. ``os.cpu_count()`` counts the host's cores,
    which in a container can be many more than it may use.

    >>> 1 <= usable_cores() <= (os.cpu_count() or 1)
    True
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text(encoding="ascii").split()[:2]
        if quota == "max":
            return cores
        return max(1, min(cores, int(quota) // max(1, int(period))))
    except (OSError, ValueError):  # no cgroup v2 quota file (or an unreadable one): the affinity alone
        return cores


def collect_demonstrations(
    config: SFTConfig, *, heldout: bool = False, on_episode: Callable[[int, int], None] | None = None
) -> tuple[list[Demonstration], DemoStats]:
    """Run the oracle on perturbed SimPhones through the real workflow and record every step.

    Phone ``i`` (seed ``phone_seed + i``, or after the demo phones for ``heldout``) plays
    its share of the episodes round-robin, in its own shuffled task order (seeded by
    ``config.seed``), returning home between episodes but keeping its state, as training
    phones do. The phones play in :func:`demonstration_workers` processes, their
    demonstrations put back in phone order: the result is the same for any number of them
    (deterministic for a given config). ``on_episode(done, total)`` follows the episodes played
    (progress displays; with worker processes, a phone's episodes at once when it finishes).
    """
    if heldout:
        phones, episodes = config.heldout_phones, config.heldout_episodes
        first_seed = config.phone_seed + config.phones
    else:
        phones, episodes = config.phones, config.episodes
        first_seed = config.phone_seed
    if not (phones and episodes):
        phones = 0
    shares = [episodes // phones + (1 if i < episodes % phones else 0) for i in range(phones)]
    firsts = [0, *itertools.accumulate(shares)]  # phone i's episodes are numbered from firsts[i]
    jobs = [(config, first_seed + i, shares[i], firsts[i], heldout) for i in range(phones)]
    played: list[_PhoneDemonstrations] = []
    done = 0
    workers = demonstration_workers(config, episodes, phones)
    if workers == 1:
        for job in jobs:
            played.append(_demonstrate_on_phone(*job))
            done += played[-1].episodes
            if on_episode is not None:
                on_episode(done, episodes)
    else:
        # spawn, not fork: the parent may hold torch's thread pools, which a forked child inherits broken
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = [pool.submit(_demonstrate_on_phone, *job) for job in jobs]
            for future in as_completed(futures):
                done += future.result().episodes
                if on_episode is not None:
                    on_episode(done, episodes)
            played = [f.result() for f in futures]
    demos = [d for p in played for d in p.demos]
    for p in played:
        for ending in p.endings:
            logger.warning("%s", ending)
    per_task: dict[str, int] = {}
    for d in demos:
        per_task[d.task_id] = per_task.get(d.task_id, 0) + 1
    stats = DemoStats(
        episodes=sum(p.episodes for p in played),
        successes=sum(p.successes for p in played),
        steps=len(demos),
        phones=phones,
        per_task_steps=per_task,
        skipped_done_episodes=sum(p.skipped for p in played),
    )
    return demos, stats


def export_oracle_demonstrations(
    path: str | os.PathLike[str],
    tasks: Sequence[Task],
    *,
    phone_seeds: Sequence[int],
    perturbation: PerturbationConfig | None = None,
    locale: str = "auto",
    observation_size: tuple[int, int] = (252, 560),
    launch_by_name: bool = True,
    prefer_typing: bool = False,
) -> DemoStats:
    """Play the oracle once per task on each SimPhone of ``phone_seeds`` (reset to the phone's
    initial state before every episode, as training phones are) and write the successful
    episodes as a JSONL demonstration file (:func:`darwin.sft.records.write_records`), with
    each tap's and long press's ``target_box``: the demonstrations of a step-level reward
    (:class:`darwin.verifiers.demo_steps.DemoStepVerifier`) or of ``darwin sft --from-jsonl``.

    Actions are the oracle's in device pixels (launcher taps as ``open_app`` with
    ``launch_by_name``, as the SFT warm start demonstrates them); with ``prefer_typing`` the
    oracle types a task's words rather than tapping a widget showing them (as
    ``SFTConfig.prefer_typing``). Deterministic.
    """
    from darwin.envs.sim.oracle import pick_cost_for
    from darwin.evaluate import evaluation_phones
    from darwin.sft.records import EpisodeRecord, StepRecord, write_records
    from darwin.task_registry import goal_text
    from darwin.workflows.step import LifecycleWorkflow, StepConfig

    agent = TinyAgent()
    workflow = LifecycleWorkflow(config=StepConfig(observation_size=observation_size))
    written: list[tuple[EpisodeRecord, list[np.ndarray]]] = []
    counts = {"episodes": 0, "successes": 0, "done": 0}

    async def play() -> None:
        for seed in phone_seeds:
            # each episode from the phone's initial state: the evaluation phones' rule
            (env,) = evaluation_phones(seed, 1, perturbation=perturbation, locale=locale, prefix="demo")
            for task in tasks:
                sink: list[Demonstration] = []
                actor = _RecordingOracle(agent, seed, sink, launch_by_name, pick_cost_for(prefer_typing))
                trajectory = await workflow.run(env, task, actor, episode_id=f"demo-{seed}-{task.id}")
                counts["episodes"] += 1
                if (
                    trajectory.termination is not None
                    and trajectory.termination.reason == TerminationReason.ALREADY_DONE
                ):
                    counts["done"] += 1
                    continue
                if not trajectory.success or not sink:
                    logger.warning("oracle episode %s on phone %d did not succeed; not written", task.id, seed)
                    continue
                counts["successes"] += 1
                steps = tuple(StepRecord(screenshot="-", action=d.oracle_action, target_box=d.target_box) for d in sink)
                record = EpisodeRecord(
                    goal=goal_text(task),
                    steps=steps,
                    app=task.app,
                    task_id=task.id,
                    device_size=sink[0].observation.device_size,
                )
                written.append((record, [d.observation.screenshot for d in sink]))

    asyncio.run(play())
    write_records(path, written)
    per_task: dict[str, int] = {}
    for record, _ in written:
        per_task[record.task_id or ""] = per_task.get(record.task_id or "", 0) + len(record.steps)
    return DemoStats(
        episodes=counts["episodes"],
        successes=counts["successes"],
        steps=sum(per_task.values()),
        phones=len(phone_seeds),
        per_task_steps=per_task,
        skipped_done_episodes=counts["done"],
    )
