"""Self-evolution on apps never shown (issue 45): what ``darwin run`` does when an experiment
sets ``self_evolution`` (:class:`~darwin.run.config.SelfEvolutionConfig`, docs/self-evolution.md).

In the order it happens (:meth:`SelfEvolution.run`):

``warm start``
    the experiment's SFT warm start on the training apps (``sft``), as any run builds it.
``evaluation (warm start)``
    the paired evaluation of the training tasks and every ``evaluation.task_sets`` set (the
    held-out apps' human-written templates) on phones that never train.
each of ``rounds``:
    **explore** every app of ``apps`` with the current policy (or ``explorer``; with
    ``novelty_candidates`` > 1 inside the novelty explorer), from the training phones' initial
    states, keeping each state and screen, stored in the run database; **synthesise** tasks from
    what was reached (``synthesizer``), drop those already true on a training phone, cut each
    demonstration's loops (:func:`~darwin.algos.paths.erase_loops`) and replay it on a fresh
    phone, keeping the task only if the replay reaches its goal; **guard**: refuse any task the
    split holds out (:func:`~darwin.hindsight.leakage.refuse_held_out`); **fine-tune** the policy
    on the replayed demonstrations mixed with ``replay_episodes`` of the training apps'
    (:func:`finetune_policy`); **RL** on the synthesised tasks (and ``tasks``) for ``rl_updates`` updates, a :class:`~darwin.run.recipe.TrainingRecipe`
    of its own under ``round-N/rl``; **export** its trained policy as the next round's checkpoint.
``evaluation (final)``
    the same evaluation of the last round's policy; ``eval.json`` holds both (``darwin compare``
    reads it), ``self_evolution.json`` every round's counts.

Nothing human-written about a held-out app reaches training: the warm start and ``tasks`` are
checked against the split before anything runs, each round's tasks before they train, and the
explorer is told no task (:func:`~darwin.hindsight.exploration.exploration_goal`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import orjson

from darwin.actions import Finished
from darwin.agents.base import Actor
from darwin.agents.warm_start import AGENT_FILE
from darwin.algos.paths import erase_loops
from darwin.components import build_component
from darwin.envs.sim.env import SimPhoneEnv
from darwin.evaluate import EvalResult
from darwin.hindsight.base import SynthesisedTask, TaskSynthesizer, verifier_holds
from darwin.hindsight.exploration import Exploration, explore
from darwin.hindsight.leakage import refuse_held_out
from darwin.hindsight.novelty import NoveltyExplorer
from darwin.hindsight.records import store_exploration
from darwin.memory.sliding_window import SlidingWindowConfig
from darwin.predicates import SCREEN_TEXT, SCREEN_TEXTS, evaluate
from darwin.problems import ExperimentError
from darwin.readers.base import read_marks_sync
from darwin.readers.ocr import OCRReader
from darwin.run.build import (
    build_actors,
    build_eval_phones,
    build_store,
    build_workflow,
    sim_phones,
    warm_start_checkpoint,
)
from darwin.run.config import ExperimentConfig, SelfEvolutionConfig
from darwin.run.cost import RunCost
from darwin.run.recipe import RunProgress, RunResult, evaluate_experiment, run_recipe
from darwin.run.report import RunReport
from darwin.run.round_verifier import MODEL_DIR, RoundVerifier, RoundVerifierRecord, audit_of_run, round_reward
from darwin.task_registry import goal_text
from darwin.templates import split_templates
from darwin.types import Task

if TYPE_CHECKING:
    from darwin.sft.finetune import FinetuneResult, OracleSource

READ_SIZE = (504, 1120)
"""Screen size a replayed ``screen.text`` goal is read at (the reader benchmark's, docs/benchmarks.md)."""

logger = logging.getLogger(__name__)

__all__ = [
    "AgentRecord",
    "RoundRecord",
    "RoundTask",
    "SelfEvolution",
    "agent_record",
    "export_run_policy",
    "replay_demonstration",
    "run_self_evolution",
]

SELF_EVOLUTION_FILE = "self_evolution.json"


@dataclass
class RoundRecord:
    """What one round did (``self_evolution.json``'s ``rounds``)."""

    round: int
    explorations: int = 0
    explored_steps: int = 0
    candidates: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    """Candidates dropped, by reason: the synthesiser's filters, ``true_on_a_training_phone``,
    ``too_long`` (over ``max_demonstration_steps`` once its loops were cut), ``replay_failed`` (the
    cut demonstration missed the goal on a fresh phone), ``over_budget`` (past ``tasks_per_round``)."""
    tasks: list[str] = field(default_factory=list)
    """The ids of the tasks trained on."""
    demonstration_steps: list[int] = field(default_factory=list)
    """Each kept task's demonstration length after its loops were cut (its ``finished`` not counted)."""
    explorer_steps: list[int] = field(default_factory=list)
    """... and before."""
    finetune_loss: tuple[float, float] | None = None
    """The fine-tuning's loss on the demonstrations at its first step and over its last ten (``None``: none ran)."""
    finetune_data: dict[str, int] = field(default_factory=dict)
    """What the fine-tuning trained on: ``synthesised_episodes`` (the explorer's demonstrations),
    ``training_app_episodes`` (the oracle's on the warm start's tasks, ``replay_episodes``) and their
    ``steps`` in all."""
    rl_updates: int = 0
    rl_success: float | None = None
    """Training success over the round's RL episodes."""
    verifier: RoundVerifierRecord | None = None
    """Stage-3 verification (``learned_verifier``): the verifier trained for this round's RL and its agreement."""
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RoundTask:
    """A task a round trains on: its cut demonstration replayed on a fresh phone, with the screens
    the policy saw before each action and before ``finished``."""

    task: SynthesisedTask
    screens: tuple[np.ndarray, ...]
    device_size: tuple[int, int]
    explorer_steps: int
    """The explorer's actions to the goal, before the cut."""
    phone_seed: int
    """The SimPhone it was explored and replayed on."""


def replay_demonstration(
    task: SynthesisedTask, env: SimPhoneEnv, observation_size: tuple[int, int]
) -> tuple[list[np.ndarray], bool]:
    """Play ``task.demonstration`` on ``env`` (a fresh SimPhone), returning the screen before each
    action and before the closing ``finished``, and whether the task's verifier holds at the end
    (a ``screen.text`` goal: on the final screen as the OCR reader reads it at :data:`READ_SIZE`)."""
    shots: list[np.ndarray] = []
    for action in task.demonstration:
        shots.append(env.screenshot(observation_size))
        env.execute(action)
    shots.append(env.screenshot(observation_size))
    if task.task.verifier.predicate == SCREEN_TEXT:  # decided by what the final screen shows, read by OCR
        final = read_marks_sync(OCRReader(), env.screenshot(READ_SIZE), env.device_size)
        return shots, evaluate(task.task.verifier, {SCREEN_TEXTS: [[m.text for m in final]]}).success
    state = env.probe_state()
    return shots, state is not None and evaluate(task.task.verifier, state).success


def _state_key(state: object, screenshot: bytes | None) -> bytes:
    return orjson.dumps(state, option=orjson.OPT_SORT_KEYS) + b"|" + (screenshot or b"")


def _cut(candidate: SynthesisedTask, exploration: Exploration) -> SynthesisedTask:
    """The candidate with its demonstration's loops erased (states and screens as the key)."""
    steps = exploration.steps[: len(candidate.demonstration)]
    keys = [_state_key(exploration.start_state, exploration.start_screenshot)]
    keys += [_state_key(s.state, s.screenshot) for s in steps]
    kept = erase_loops(keys)
    return SynthesisedTask(candidate.task, tuple(steps[k - 1].action for k in kept), candidate.start_state)


class SelfEvolution:
    """The self-evolution run of ``config`` under ``run_dir`` (module docstring: the order)."""

    def __init__(
        self, config: ExperimentConfig, run_dir: Path, on_progress: Callable[[RunProgress], None] | None = None
    ) -> None:
        if config.self_evolution is None:
            raise ExperimentError("SelfEvolution needs an experiment with self_evolution set")
        self.config = config
        self.settings: SelfEvolutionConfig = config.self_evolution
        self.run_dir = run_dir
        self.report = RunReport(run_dir)
        self._on_progress = on_progress or (lambda p: None)
        self.progress = RunProgress(phones=config.phones.count, updates=self.settings.rounds * self.settings.rl_updates)
        self.split = split_templates(self.settings.split)
        self.rounds: list[RoundRecord] = []
        self.evaluations: dict[str, EvalResult] = {}
        self.cost = RunCost()
        self._seen: list[Task] = []
        self.verifier: RoundVerifier | None = None

    # ------------------------------------------------------------------------------ run
    async def run(self) -> RunResult:
        config, settings = self.config, self.settings
        training = config.resolve_tasks()
        from darwin.task_registry import resolve_tasks

        refuse_held_out([*training, *resolve_tasks(config.sft.tasks)], self.split)
        self._show("warm start")
        checkpoint = await asyncio.to_thread(warm_start_checkpoint, config)
        self.report.write_warm_start(checkpoint)
        if settings.learned_verifier is not None:
            explored = set(settings.apps)
            self.verifier = RoundVerifier(
                settings.learned_verifier,
                self.run_dir,
                agreement_tasks=[t for t in self.split.sets["unseen_apps"] if t.app in explored],
                base_tasks=config.tasks,
                observation_size=agent_record(checkpoint).observation_size,
                horizon=config.horizon,
                seed=config.phones.seed,
            )
        if config.evaluation.enabled:
            self.evaluations["warm_start"] = await self._evaluate("warm_start", checkpoint, training, updates=0)
        updates, env_steps, points, plot = 0, 0, [], self.run_dir / "success.png"
        for number in range(1, settings.rounds + 1):
            record = RoundRecord(round=number)
            self.rounds.append(record)
            checkpoint, result = await self._round(number, record, checkpoint)
            if result is not None:
                updates += result.updates
                env_steps += result.env_steps
                points += result.success_points
                plot = result.plot
                self.cost = self.cost + result.cost
            self._write()
        if config.evaluation.enabled:
            self.evaluations["final"] = await self._evaluate("final", checkpoint, training, updates=updates)
        self._write()
        return RunResult(self.run_dir, updates, env_steps, points, plot, self.evaluations, self.cost)

    async def _round(self, number: int, record: RoundRecord, checkpoint: Path) -> tuple[Path, RunResult | None]:
        """One round from ``checkpoint``; the policy it ends with, and its RL run's result."""
        settings = self.settings
        folder = self.run_dir / f"round-{number}"
        folder.mkdir(parents=True, exist_ok=True)
        clock = time.perf_counter()
        self._show(f"round {number}: explore")
        explorations = await self._explore(number, checkpoint)
        record.explorations = len(explorations)
        record.explored_steps = sum(len(e.steps) for e in explorations)
        record.seconds["explore"] = round(time.perf_counter() - clock, 2)

        clock = time.perf_counter()
        self._show(f"round {number}: synthesise")
        chosen = self._synthesise(explorations, record, agent_record(checkpoint).observation_size)
        record.seconds["synthesise"] = round(time.perf_counter() - clock, 2)
        if not chosen:
            logger.warning(
                "round %d: no task synthesised from %d explorations (%s); the policy is unchanged",
                number,
                len(explorations),
                record.rejected,
            )
            return checkpoint, None
        refuse_held_out([chosen_task.task for chosen_task in chosen], self.split)
        self._seen += [chosen_task.task.task for chosen_task in chosen]
        tasks_file = folder / "tasks.json"
        tasks_file.write_text(
            json.dumps([c.task.task.model_dump(mode="json", exclude_none=True) for c in chosen], indent=2)
        )

        clock = time.perf_counter()
        if settings.sft_steps > 0:
            self._show(f"round {number}: fine-tune on {len(chosen)} demonstrations")
            checkpoint = await asyncio.to_thread(self._finetune, chosen, checkpoint, folder, record)
        record.seconds["finetune"] = round(time.perf_counter() - clock, 2)

        verifier_dir = None
        if self.verifier is not None:
            clock = time.perf_counter()
            self._show(f"round {number}: train the verifier")
            verifier_dir = await self._train_verifier(number, chosen, checkpoint, folder, record, tasks_file)
            record.seconds["verifier"] = round(time.perf_counter() - clock, 2)

        clock = time.perf_counter()
        self._show(f"round {number}: RL")
        round_config = self._round_config(number, tasks_file, checkpoint, verifier_dir)
        rl_dir = folder / "rl"
        rl_dir.mkdir(exist_ok=True)
        (rl_dir / "experiment.json").write_text(round_config.model_dump_json(indent=2))
        result = await run_recipe(round_config, rl_dir, resume=False, on_progress=self._on_progress)
        record.rl_updates = result.updates
        # The flywheel's own line between rounds: updates and steps of every round so far.
        self.progress.update += result.updates
        self.progress.env_steps += result.env_steps
        self.progress.warmup = False
        scored = [success for _, success in result.success_points]
        record.rl_success = round(sum(scored) / len(scored), 4) if scored else None
        record.seconds["rl"] = round(time.perf_counter() - clock, 2)
        if self.verifier is not None and record.verifier is not None:
            # the verdicts that rewarded this round train the next round's verifier
            record.verifier.added["rl"] = await asyncio.to_thread(self.verifier.add_rl_episodes, rl_dir)
            if verifier_dir is not None and self.verifier.settings.reward == "learned":
                record.verifier.rl_audit = await asyncio.to_thread(audit_of_run, rl_dir)

        self._show(f"round {number}: export")
        exported = await export_run_policy(folder / "rl", folder / "policy")
        return exported, result

    # ------------------------------------------------------------------------- stages
    async def _explore(self, number: int, checkpoint: Path) -> list[Exploration]:
        config, settings = self.config, self.settings

        spec = settings.explorer
        if spec is None:
            actors = build_actors(
                f"tiny:{checkpoint}",
                seed=number,
                phones=settings.explorations,
                temperature=settings.explorer_temperature,
            )
        else:
            actors = build_actors(spec, seed=number, phones=settings.explorations)
        size = actors.observation_size or config.sft.observation_size

        def explorer(index: int) -> Actor:
            actor = actors.make(index)
            return actor if settings.novelty_candidates == 1 else NoveltyExplorer(actor, settings.novelty_candidates)

        found: list[Exploration] = []
        try:
            for app in settings.apps:
                runs = [
                    explore(
                        self._phone(self._phone_seed(index)),
                        app,
                        steps=settings.exploration_steps,
                        actor=explorer(index),
                        seed=number * 1000 + index,
                        observation_size=size,
                        keep_screenshots=True,
                    )
                    for index in range(settings.explorations)
                ]
                found += await asyncio.gather(*runs)
        finally:
            if actors.aclose is not None:
                await actors.aclose()
        # In the run database like any other episodes (darwin view shows them), as run "<name> round N exploration".
        store = build_store(config.store, self.run_dir)
        try:
            run_id = store.start_run(f"{config.name} round {number} exploration", config=None)
            for exploration in found:
                store_exploration(store, run_id, exploration)
        finally:
            store.close()
        return found

    def _phone(self, seed: int) -> SimPhoneEnv:
        """A fresh SimPhone of ``seed`` as the training phones are built (perturbation, locale)."""
        phone = sim_phones(self.config, seed, 1, "explore")[0]
        assert isinstance(phone, SimPhoneEnv)
        return phone

    def _phone_seed(self, index: int) -> int:
        """Exploration ``index`` runs on training phone ``index mod count``'s initial state."""
        return self.config.phones.seed + index % self.config.phones.count

    def _synthesise(
        self, explorations: list[Exploration], record: RoundRecord, observation_size: tuple[int, int]
    ) -> list[RoundTask]:
        """The round's tasks, shortest demonstrations first, at most ``tasks_per_round``, each
        replayed once on a fresh phone (screens at the policy's ``observation_size``)."""

        synthesizer = build_component("task_synthesizer", self.settings.synthesizer)
        assert isinstance(synthesizer, TaskSynthesizer)
        starts = [self._phone(self.config.phones.seed + i).probe_state() for i in range(self.config.phones.count)]
        rejected: list[str] = []
        candidates: list[tuple[SynthesisedTask, int, int]] = []
        seen = [t.verifier for t in self._seen]
        for index, exploration in enumerate(explorations):
            result = synthesizer.synthesize(exploration, seen=seen)
            record.candidates += len(result.kept) + len(result.rejected)
            rejected += [r.reason for r in result.rejected]
            seen += [t.task.verifier for t in result.kept]
            for candidate in result.kept:
                if any(verifier_holds(candidate.task.verifier, s) for s in starts):
                    rejected.append("true_on_a_training_phone")
                    continue
                candidates.append((_cut(candidate, exploration), index, candidate.steps))
        candidates.sort(key=lambda c: (len(c[0].demonstration), c[0].task.id))
        chosen: list[RoundTask] = []
        for cut, index, explorer_steps in candidates:
            if len(chosen) == self.settings.tasks_per_round:
                rejected.append("over_budget")
                continue
            if len(cut.demonstration) > self.settings.max_demonstration_steps:
                rejected.append("too_long")
                continue
            phone_seed = self._phone_seed(index % self.settings.explorations)
            env = self._phone(phone_seed)
            screens, reached = replay_demonstration(cut, env, observation_size)
            if not reached:  # the cut lost something the state key missed
                rejected.append("replay_failed")
                continue
            chosen.append(RoundTask(cut, tuple(screens), env.device_size, explorer_steps, phone_seed))
            record.demonstration_steps.append(len(cut.demonstration))
            record.explorer_steps.append(explorer_steps)
        record.tasks = [c.task.task.id for c in chosen]
        record.rejected = {reason: rejected.count(reason) for reason in sorted(set(rejected))}
        return chosen

    def _finetune(self, chosen: list[RoundTask], checkpoint: Path, folder: Path, record: RoundRecord) -> Path:
        """The policy fine-tuned on the replayed demonstrations, saved as a checkpoint of its own kind."""
        from darwin.sft.finetune import OracleSource
        from darwin.sft.records import EpisodeRecord, StepRecord, write_records

        episodes = []
        for chosen_task in chosen:
            task = chosen_task.task.task
            actions = [*chosen_task.task.demonstration, Finished()]
            steps = tuple(StepRecord(screenshot="-", action=a) for a in actions)  # write_records fills in the files
            episode = EpisodeRecord(
                goal=goal_text(task), steps=steps, app=task.app, task_id=task.id, device_size=chosen_task.device_size
            )
            episodes.append((episode, chosen_task.screens))
        demos = write_records(folder / "demonstrations.jsonl", episodes)
        settings, sft = self.settings, self.config.sft
        # The warm start's own kind of data, mixed in against forgetting: without it, 120 steps on
        # 16 synthesised demonstrations took the training sample from 41% to 12% greedy
        # (docs/results.md, "the probe").
        replay = (
            OracleSource(
                tasks=sft.tasks,
                phones=min(sft.phones, settings.replay_episodes),
                episodes=settings.replay_episodes,
                phone_seed=sft.phone_seed + 1000 * record.round,  # fresh phones each round
                heldout_phones=0,
                heldout_episodes=0,
                launch_by_name=sft.launch_by_name,
                prefer_typing=sft.prefer_typing,
            )
            if settings.replay_episodes
            else None
        )
        out = folder / "finetuned"
        result = finetune_policy(
            checkpoint,
            out,
            oracle=replay,
            jsonl=(str(demos),),
            steps=settings.sft_steps,
            batch_size=settings.sft_batch_size,
            lr=settings.sft_lr,
            seed=record.round,
        )
        training = result.metadata["training"]
        record.finetune_loss = (round(training["first_loss"], 4), round(training["final_loss"], 4))
        data = result.metadata["data"]
        record.finetune_data = {
            "synthesised_episodes": len(chosen),
            "training_app_episodes": data["oracle"]["episodes"] if replay is not None else 0,
            "steps": data["train"]["steps"],
        }
        return out

    async def _train_verifier(
        self,
        number: int,
        chosen: list[RoundTask],
        checkpoint: Path,
        folder: Path,
        record: RoundRecord,
        tasks_file: Path,
    ) -> Path | None:
        """The round's learned verifier, trained on the run's verdicts so far plus this round's
        demonstrations (each replayed on a fresh phone of its own seed); ``None`` when the data
        cannot train one yet (``record.verifier.skipped`` says why)."""
        assert self.verifier is not None
        record.verifier = RoundVerifierRecord()
        replays = [(c.task, self._phone(c.phone_seed)) for c in chosen]
        record.verifier.added["demonstrations"] = await self.verifier.add_demonstrations(number, replays, tasks_file)
        return await asyncio.to_thread(self.verifier.train, number, checkpoint, folder / MODEL_DIR, record.verifier)

    def _round_config(
        self, number: int, tasks_file: Path, checkpoint: Path, verifier_dir: Path | None = None
    ) -> ExperimentConfig:
        config, settings = self.config, self.settings
        tasks = (str(tasks_file), *config.tasks) if settings.keep_training_tasks else (str(tasks_file),)
        data = config.model_dump(mode="json")
        data.update(
            name=f"{config.name}-round{number}",
            tasks=list(tasks),
            checkpoint=str(checkpoint),
            updates=settings.rl_updates,
            self_evolution=None,
            run_dir=None,
        )
        data["evaluation"] = {**data["evaluation"], "samples": 0}
        if verifier_dir is not None and settings.learned_verifier is not None:
            data["verifier"] = round_reward(config.verifier, verifier_dir, settings.learned_verifier).model_dump(
                mode="json"
            )
        return ExperimentConfig.model_validate(data)

    async def _evaluate(self, label: str, checkpoint: Path, training: list[Task], updates: int) -> EvalResult:
        """The experiment's paired evaluation of ``checkpoint`` (the run's own store, ``eval.json``)."""
        config = self.config
        self._show(f"evaluation ({label.replace('_', ' ')})")
        actors = build_actors(f"tiny:{checkpoint}", seed=config.policy.seed, phones=config.evaluation.phones)
        store = build_store(config.store, self.run_dir)
        size = actors.observation_size or config.sft.observation_size
        workflow = build_workflow(config, size, evaluation=config.evaluation.verifier is not None)
        try:
            run_id = store.start_run(f"{config.name} evaluation {label}", config=None)
            result = await evaluate_experiment(
                config,
                label,
                training,
                build_eval_phones(config),
                actors.make,
                workflow,
                version=0 if label == "warm_start" else 1,
                updates=updates,
                store=store,
                run_id=run_id,
            )
        finally:
            workflow.close()
            store.close()
            if actors.aclose is not None:
                await actors.aclose()
        self.evaluations[label] = result
        self.report.save_evaluations(self.evaluations)
        return result

    # ------------------------------------------------------------------------ helpers
    def _write(self) -> None:
        (self.run_dir / SELF_EVOLUTION_FILE).write_text(
            json.dumps(
                {
                    "apps": list(self.settings.apps),
                    "held_out_apps": list(self.split.held_out_apps),
                    "rounds": [asdict(r) for r in self.rounds],
                },
                indent=2,
            )
        )

    def _show(self, stage: str) -> None:
        logger.info("self-evolution: %s", stage)
        self.progress.stage = stage
        self._on_progress(self.progress)


def finetune_policy(
    checkpoint: Path,
    out: Path,
    *,
    oracle: OracleSource | None,
    jsonl: tuple[str, ...],
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
) -> FinetuneResult:
    """``checkpoint`` (a tiny policy) fine-tuned on ``oracle`` and ``jsonl`` demonstrations, every
    one of them training (the RL or evaluation that follows is the test), saved in ``out`` as the
    same agent as the checkpoint (its prompt, memory and screen) with new weights."""
    from darwin.sft.finetune import FinetuneConfig, finetune

    agent = agent_record(checkpoint)
    result = finetune(
        FinetuneConfig(
            model=str(checkpoint),
            agent_format="tiny",
            observation_size=agent.observation_size,
            memory=agent.memory,
            oracle=oracle,
            jsonl=jsonl,
            heldout_fraction=0.0,
            steps=steps,
            batch_size=batch_size,
            lr=lr,
            warmup_steps=min(5, steps - 1),
            seed=seed,
            sampled_match=False,
        )
    )
    out.mkdir(parents=True, exist_ok=True)
    result.vlm.save_pretrained(out)
    shutil.copy2(checkpoint / AGENT_FILE, out / AGENT_FILE)
    return result


PROBE_PHONE_SEED = 5000
"""First phone of a probe's demonstrations: none of the warm start's, a run's or an evaluation's phones."""


def probe_finetune(
    checkpoint: Path, out: Path, tasks: tuple[str, ...], *, episodes: int, prefer_typing: bool, steps: int, lr: float
) -> FinetuneResult:
    """A fine-tuning probe (``scripts/probe_*_sft.py``): ``checkpoint`` fine-tuned on the oracle's
    ``episodes`` demonstrations of ``tasks`` (up to 8 phones from :data:`PROBE_PHONE_SEED`) with a
    flywheel round's batch, saved in ``out`` by :func:`finetune_policy`."""
    from darwin.sft.finetune import OracleSource

    oracle = OracleSource(
        tasks=tasks,
        phones=min(8, episodes),
        episodes=episodes,
        phone_seed=PROBE_PHONE_SEED,
        heldout_phones=0,
        heldout_episodes=0,
        prefer_typing=prefer_typing,
    )
    return finetune_policy(checkpoint, out, oracle=oracle, jsonl=(), steps=steps, batch_size=8, lr=lr, seed=1)


async def export_run_policy(run_dir: Path, out: Path) -> Path:
    """The last trained policy of a ``darwin run`` directory as a checkpoint directory of the
    kind its warm start is (``darwin eval --agent tiny:<out>`` and an experiment's ``checkpoint`` load it)."""
    from darwin.run.build import load_run_policy
    from darwin.run.report import WARM_START_FILE

    warm = Path(json.loads((run_dir / WARM_START_FILE).read_text())["path"])
    pool = await asyncio.to_thread(load_run_policy, run_dir)
    try:
        await asyncio.to_thread(pool.policy.vlm.save_pretrained, out)
    finally:
        await pool.aclose()
    shutil.copy2(warm / AGENT_FILE, out / AGENT_FILE)
    return out


@dataclass(frozen=True)
class AgentRecord:
    """What a checkpoint's agent record (:data:`~darwin.agents.warm_start.AGENT_FILE`) says the
    fine-tuning must match: the screen size and the memory (read without loading the model)."""

    observation_size: tuple[int, int]
    memory: SlidingWindowConfig


def agent_record(checkpoint: Path) -> AgentRecord:
    record = json.loads((checkpoint / AGENT_FILE).read_text(encoding="utf-8"))
    width, height = (int(v) for v in record["observation_size"])
    return AgentRecord((width, height), SlidingWindowConfig.model_validate(record["memory"]))


def run_self_evolution(
    config: ExperimentConfig, run_dir: Path, on_progress: Callable[[RunProgress], None] | None = None
) -> RunResult:
    """``darwin run`` of an experiment with ``self_evolution`` (:class:`SelfEvolution`), writing
    everything under ``run_dir``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "experiment.json").write_text(config.model_dump_json(indent=2))
    return asyncio.run(SelfEvolution(config, run_dir, on_progress).run())
