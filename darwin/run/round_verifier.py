"""Stage-3 verification in the self-evolution flywheel (:class:`~darwin.run.config.RoundVerifierConfig`).

Before every round's RL, :class:`RoundVerifier` trains a learned verifier again (the current
policy's backbone with a success head, :mod:`darwin.verifiers.learned`) on everything the run has
judged so far, with nothing a person wrote about the explored apps:

- each kept task's demonstration, replayed on a fresh phone, every screen labelled by the task's
  synthesised goal (the explorer reached it: hindsight is the label);
- every earlier round's RL episodes, each final screen labelled by the verdict that rewarded it
  (with ``reward="learned"``: the learned verifier's own).

The round's RL is then rewarded through it (:func:`round_reward`), and it is measured against the
held-out apps' human-written rules: screens of oracle, near-miss, wandering and random episodes of
those tasks, labelled by their rules (:func:`~darwin.verifiers.learned.data.generate_verifier_data`),
which never train it. With ``reward="learned"`` each round also records how often the synthesised
rules, auditing, agreed with the verdicts that rewarded its RL.

    >>> from darwin.components import ComponentSpec
    >>> spec = round_reward(ComponentSpec(name="rule"), Path("round-1/verifier"), RoundVerifierConfig())
    >>> spec.kwargs["mode"], [v["name"] for v in spec.kwargs["verifiers"]]
    ('fallback', ['rule', 'learned'])
    >>> spec = round_reward(ComponentSpec(name="rule"), Path("round-1/verifier"), RoundVerifierConfig(reward="learned"))
    >>> spec.kwargs["mode"], [v["name"] for v in spec.kwargs["verifiers"]]
    ('audit', ['learned', 'rule'])
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from darwin.actions import Action, Finished
from darwin.agents.base import Actor
from darwin.components import ComponentSpec
from darwin.envs.sim.env import SimPhoneEnv
from darwin.hindsight.base import SynthesisedTask
from darwin.run.config import RoundVerifierConfig
from darwin.types import Decision, Observation, Phase, Task, Transition, VerifierSpec
from darwin.verifiers.learned.data import (
    DatasetWriter,
    examples_from_run,
    generate_verifier_data,
    load_examples,
    play_and_label,
)
from darwin.verifiers.learned.training import (
    SplitReport,
    VerifierTrainConfig,
    assign_splits,
    evaluate_saved_classifier,
    train_verifier,
)

logger = logging.getLogger(__name__)

__all__ = [
    "DemonstrationActor",
    "RLAudit",
    "RoundVerifier",
    "RoundVerifierRecord",
    "audit_of_run",
    "round_reward",
]

DATA_DIR = "verifier-data"
"""Under the run directory: the verifier's training data, grown every round."""
AGREEMENT_DIR = "verifier-agreement"
"""Under the run directory: the held-out human-written tasks' labelled screens (never trained on)."""
MODEL_DIR = "verifier"
"""Under each round's folder: the verifier that rewarded its RL."""


class DemonstrationActor(Actor):
    """Plays ``actions`` in order, then ``finished``: a synthesised task's demonstration."""

    def __init__(self, actions: Sequence[Action]) -> None:
        self.actions = list(actions)
        self._next = 0

    async def start_phase(
        self, env: object, task: Task, phase: Phase, instruction: str, verifier: VerifierSpec
    ) -> None:
        self._next = 0

    async def act(self, observation: Observation, history: Sequence[Transition]) -> Decision:
        if self._next >= len(self.actions):
            return Decision(action=Finished(content="done"))
        action = self.actions[self._next]
        self._next += 1
        return Decision(action=action)


@dataclass(frozen=True)
class RLAudit:
    """How often the auditing rule agreed with the verdicts that rewarded a round's RL
    (``reward="learned"``): phases both verified, and those on which they agreed."""

    compared: int
    agreed: int
    rewarded_success: int
    """Phases the learned verifier called a success."""
    rule_success: int
    """Phases the auditing rule called a success."""


@dataclass
class RoundVerifierRecord:
    """What one round's verifier did (``self_evolution.json``: ``rounds[i].verifier``)."""

    added: dict[str, int] = field(default_factory=dict)
    """New training examples this round, by source (``demonstrations``, ``rl``)."""
    examples: int = 0
    positives: int = 0
    """Training data so far (every round's), and how many of it are successes."""
    trained: bool = False
    skipped: str | None = None
    """Why no verifier was trained this round (the round is then rewarded by the experiment's verifier alone)."""
    chosen_on: Literal["validation", "train"] | None = None
    """Where the epoch and threshold were chosen: ``validation`` (held-out episodes of the data), or
    ``train`` when no held-out episode had both a success and a failure screen (small data)."""
    threshold: float | None = None
    validation_f1: float | None = None
    """F1 at the threshold on the examples it was chosen on."""
    agreement: SplitReport | None = None
    """Against the held-out apps' human-written rules (every example of the agreement data)."""
    rl_audit: RLAudit | None = None
    """Filled after the round's RL when the learned verifier rewarded it."""
    seconds: float = 0.0


def round_reward(verifier: ComponentSpec, model_dir: Path, settings: RoundVerifierConfig) -> ComponentSpec:
    """The round's reward: the experiment's ``verifier`` and the learned one in ``model_dir``, as
    ``settings.reward`` says. The learned verifier checks every step where ``every_step`` says so,
    else by the mode: with ``fallback`` every step (the rule keeps its every-step check, and the
    learned verifier is asked only where the rule cannot verify), with ``learned`` once per phase
    (a false positive is met once, not at every step)."""
    every_step = settings.every_step if settings.every_step is not None else settings.reward == "fallback"
    learned: dict[str, object] = {"name": "learned", "kwargs": {"path": str(model_dir), "every_step": every_step}}
    own = verifier.model_dump(mode="json")
    members = [own, learned] if settings.reward == "fallback" else [learned, own]
    mode = "fallback" if settings.reward == "fallback" else "audit"
    return ComponentSpec.model_validate({"name": "composite", "kwargs": {"verifiers": members, "mode": mode}})


def audit_of_run(run_dir: Path) -> RLAudit:
    """The audit of an audit-mode composite's verdicts in ``run_dir``'s database
    (:func:`~darwin.verifiers.audit.audit_pairs`, as ``darwin verifier audit`` reads them)."""
    from darwin.verifiers.audit import audit_pairs

    pairs = audit_pairs(run_dir)
    return RLAudit(
        compared=len(pairs),
        agreed=sum(rewarded == rule for _, rewarded, rule in pairs),
        rewarded_success=sum(rewarded for _, rewarded, _ in pairs),
        rule_success=sum(rule for _, _, rule in pairs),
    )


class RoundVerifier:
    """The flywheel's learned verifier across rounds, its data under ``run_dir``.

    Args:
        settings: what :class:`~darwin.run.config.RoundVerifierConfig` says.
        run_dir: the self-evolution run's directory.
        agreement_tasks: the held-out human-written tasks it is measured on (never trained on).
        base_tasks: the experiment's own training tasks (their RL episodes train it too).
        observation_size: the screens' size (the policy's).
        horizon: the step budget of an agreement episode.
        seed: phones and agents of the agreement episodes.
    """

    def __init__(
        self,
        settings: RoundVerifierConfig,
        run_dir: Path,
        *,
        agreement_tasks: Sequence[Task],
        base_tasks: Sequence[str],
        observation_size: tuple[int, int],
        horizon: int,
        seed: int,
    ) -> None:
        self.settings = settings
        self.data = run_dir / DATA_DIR
        self.agreement_data = run_dir / AGREEMENT_DIR
        self.agreement_tasks = list(agreement_tasks)
        self.base_tasks = tuple(base_tasks)
        self.observation_size = observation_size
        self.horizon = horizon
        self.seed = seed
        self.task_files: list[str] = []

    async def add_demonstrations(
        self, number: int, tasks: Sequence[tuple[SynthesisedTask, SimPhoneEnv]], tasks_file: Path
    ) -> int:
        """Label every screen of each task's demonstration, replayed on its fresh phone, by the
        task's synthesised goal; returns how many examples were new."""
        self.task_files.append(str(tasks_file))
        writer = DatasetWriter(self.data)
        added = 0
        for task, env in tasks:
            rows = await play_and_label(
                env,
                task.task,
                DemonstrationActor(task.demonstration),
                size=self.observation_size,
                actor_size=self.observation_size,
                budget=len(task.demonstration) + 1,
                source="demonstration",
                episode_id=f"round{number}-demonstration-{task.task.id}",
            )
            added += writer.write(rows)
        return added

    def add_rl_episodes(self, rl_dir: Path) -> int:
        """Each finished episode of a round's RL, its final screen labelled by the verdict that rewarded it."""
        return DatasetWriter(self.data).write(examples_from_run(rl_dir))

    def train(self, number: int, checkpoint: Path, out: Path, record: RoundVerifierRecord) -> Path | None:
        """Train on the data so far from ``checkpoint``'s backbone into ``out``, measure it on the
        agreement data; ``None`` (and ``record.skipped`` says why, loudly) when the data holds no
        success screen to learn from."""
        from darwin.task_registry import resolve_tasks

        clock = time.perf_counter()
        examples = load_examples(self.data)
        record.examples = len(examples)
        record.positives = sum(e.label for e in examples)
        train_tasks = (*self.task_files, *self.base_tasks)
        splits = assign_splits(examples, {t.id for t in resolve_tasks(train_tasks)}, number)
        held_out = {examples[i].label for i in splits.get("val", [])}
        record.chosen_on = "validation" if held_out == {True, False} else "train"
        if not any(examples[i].label for i in splits.get("train", [])):
            record.skipped = f"no success screen among the {len(splits.get('train', []))} training examples"
            logger.warning(
                "round %d: no learned verifier trained (%s); this round is rewarded by the experiment's verifier alone",
                number,
                record.skipped,
            )
            record.seconds = round(time.perf_counter() - clock, 2)
            return None
        config = VerifierTrainConfig(
            checkpoint=str(checkpoint),
            train_tasks=train_tasks,
            epochs=self.settings.epochs,
            batch_size=self.settings.batch_size,
            lr=self.settings.lr,
            head_lr=self.settings.head_lr,
            swapped_goals=self.settings.swapped_goals,
            choose_on=record.chosen_on,
            seed=number,
        )
        report = train_verifier(self.data, out, config)
        record.trained = True
        record.threshold = round(report.threshold, 4)
        record.validation_f1 = round(report.epochs[report.best_epoch - 1].val_f1, 4)
        record.agreement = self._agreement(out)
        record.seconds = round(time.perf_counter() - clock, 2)
        return out

    def _agreement(self, model_dir: Path) -> SplitReport | None:
        if self.settings.agreement_episodes == 0 or not self.agreement_tasks:
            return None
        if not self.agreement_data.is_dir():
            # generated once, the first time a verifier is measured, from phones and agents of their
            # own; into a side folder renamed when complete, so a run stopped halfway leaves no
            # partial set that a later measurement would take for the whole one
            partial = self.agreement_data.with_name(self.agreement_data.name + ".partial")
            if partial.exists():
                shutil.rmtree(partial)
            generate_verifier_data(
                partial,
                self.agreement_tasks,
                episodes_per_agent=self.settings.agreement_episodes,
                seed=self.seed,
                observation_size=self.observation_size,
                budget=self.horizon,
            )
            partial.rename(self.agreement_data)
        _, rows = evaluate_saved_classifier(model_dir, self.agreement_data, by="task")
        return next(row for row in rows if row.split == "all")
