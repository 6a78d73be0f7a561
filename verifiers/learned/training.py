"""Fit a learned verifier on labelled screens and measure it on held-out splits.

``darwin verifier train --data DIR --out DIR`` runs :func:`train_verifier`: it splits the
dataset (:func:`darwin.verifiers.learned.data.split_of`: episodes of the training tasks 80/10/10 into
train, validation and test; other tasks of the training apps are *unseen tasks*; tasks of
other apps are *unseen apps*), trains a :class:`~darwin.verifiers.learned.model.SuccessClassifier`
(binary cross-entropy on batches where positives are drawn up to a fixed share; with
``history``, the default, each example's prompt also carries the screen before its last action
with that action marked), keeps the epoch with the best validation F1, picks the decision
threshold on validation data (the middle of the F1-best gap between validation scores, see
:func:`darwin.algos.classification.best_threshold`), and reports accuracy, precision, recall and
F1 with 95 % intervals from resampling whole episodes on every test split (``report.json`` next
to the model).

    >>> config = VerifierTrainConfig(checkpoint=".darwin-cache/warm-start-<hash>")
    >>> config.init, config.epochs, config.history
    ('agent', 4, True)
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field

from darwin.actions import Action
from darwin.algos.classification import (
    MetricsWithIntervals,
    best_threshold,
    binary_metrics,
    bootstrap_metrics,
)
from darwin.models.factory import VLM, build_processor, build_tiny_vlm, load_tiny_vlm
from darwin.verifiers.learned.data import (
    Split,
    VerifierExample,
    load_examples,
    load_image,
    load_previous_image,
    split_of,
)
from darwin.verifiers.learned.model import SuccessClassifier, load_classifier

logger = logging.getLogger(__name__)

__all__ = [
    "EpochLog",
    "SplitReport",
    "assign_splits",
    "VerifierReport",
    "VerifierTrainConfig",
    "evaluate_classifier",
    "evaluate_saved_classifier",
    "classifier_probabilities",
    "previous_screens",
    "swapped_goal_negatives",
    "train_verifier",
]

REPORT_FILE = "report.json"
TEST_SPLITS: tuple[Split, ...] = ("test_episodes", "test_tasks", "test_apps")


class VerifierTrainConfig(BaseModel):
    """Settings of :func:`train_verifier` (validated when built)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    init: Literal["agent", "fresh"] = Field(
        "agent",
        description="'agent': start from the warm-start agent's backbone (stage 3: the agent verifies its "
        "own outcomes); 'fresh': a new tiny model of the same shape",
    )
    checkpoint: str = Field(min_length=1, description="the warm-start checkpoint (its backbone and tiny-model shape)")
    train_tasks: tuple[str, ...] = Field(("base8",), description="task ids or sets whose episodes train the verifier")
    epochs: int = Field(4, ge=1, le=100)
    batch_size: int = Field(16, ge=1, le=512)
    lr: float = Field(2e-4, gt=0.0, le=1.0, description="backbone learning rate")
    head_lr: float = Field(1e-3, gt=0.0, le=1.0, description="head learning rate")
    positive_fraction: float = Field(
        0.25,
        gt=0.0,
        lt=1.0,
        description="share of positives in every batch (positives are drawn again, with replacement, to fill it): "
        "success screens are rare (~8 % of screens) and a batch without one teaches nothing about them",
    )
    history: bool = Field(
        True,
        description="also show the classifier the screen before the example's last action with that action drawn on it "
        "(a tap dot, a swipe arrow, the typed text), so it sees what the agent just did; examples without one (an "
        "episode's first screen, old data) get the single-screen prompt. The model's record says which it reads",
    )
    swapped_goals: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="each epoch, this share of the training positives is shown again with the goal of another "
        "training task (half of the time of the same app, when it has another) and labelled not achieved: the screen satisfies its own "
        "goal, not that one, so the classifier has to read the goal instead of recognising a task's usual final "
        "screen. A screen labelled achieved for that other goal anywhere in the data is never paired with it",
    )
    choose_on: Literal["validation", "train"] = Field(
        "validation",
        description="which examples choose the best epoch and the threshold: 'validation' (held-out episodes of the "
        "training tasks); 'train' (the training examples themselves: for data too small to hold an episode out, "
        "e.g. one self-evolution round's; the threshold then fits the data it was trained on and is optimistic)",
    )
    seed: int = Field(0, description="shuffling, the split salt and the bootstrap")
    bootstrap_resamples: int = Field(1000, ge=100, le=100_000)


@dataclass(frozen=True)
class EpochLog:
    epoch: int
    loss: float
    val_f1: float
    threshold: float
    seconds: float


@dataclass(frozen=True)
class SplitReport:
    """One split's size and metrics (with intervals) at the chosen threshold."""

    split: str
    examples: int
    positives: int
    metrics: MetricsWithIntervals


@dataclass(frozen=True)
class VerifierReport:
    threshold: float
    best_epoch: int
    epochs: list[EpochLog]
    splits: list[SplitReport]
    train_examples: int
    train_positives: int

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def assign_splits(examples: Sequence[VerifierExample], train_tasks: set[str], salt: int) -> dict[str, list[int]]:
    seen_apps = {e.app for e in examples if e.task_id in train_tasks}
    out: dict[str, list[int]] = {}
    for i, e in enumerate(examples):
        split = split_of(e.task_id, e.episode_id, train_tasks=train_tasks, seen_apps=seen_apps, app=e.app, salt=salt)
        out.setdefault(split, []).append(i)
    return out


class _History:
    """The examples' previous screens, last actions and device sizes, indexed like the examples
    (``None`` where an example has no previous screen, and everywhere for a screen-only model)."""

    def __init__(
        self,
        previous: list[np.ndarray | None],
        actions: list[Action | None],
        sizes: list[tuple[int, int] | None],
    ) -> None:
        self.previous, self.actions, self.sizes = previous, actions, sizes

    @classmethod
    def of(cls, examples: Sequence[VerifierExample], previous: Sequence[np.ndarray | None] | None) -> _History:
        """``previous`` (``None``: no history at all) with the examples' actions and device sizes."""
        prev: list[np.ndarray | None] = list(previous) if previous is not None else [None] * len(examples)
        if len(prev) != len(examples):
            raise ValueError(f"{len(prev)} previous screens for {len(examples)} examples")
        return cls(
            prev,
            [e.action() if p is not None else None for e, p in zip(examples, prev, strict=True)],
            [e.device_size if p is not None else None for e, p in zip(examples, prev, strict=True)],
        )

    def subset(self, idx: Sequence[int]) -> _History:
        return _History([self.previous[i] for i in idx], [self.actions[i] for i in idx], [self.sizes[i] for i in idx])

    def inputs(
        self,
        model: SuccessClassifier,
        goals: Sequence[str],
        screens: Sequence[np.ndarray],
        start: int,
        end: int,
    ) -> Mapping[str, torch.Tensor]:
        """``model.inputs`` for the examples ``start:end`` (``goals`` and ``screens`` are that slice)."""
        return model.inputs(goals, screens, self.previous[start:end], self.actions[start:end], self.sizes[start:end])


def previous_screens(
    data: str | Path, examples: Sequence[VerifierExample], history: bool
) -> list[np.ndarray | None] | None:
    """The examples' previous screens for a model that reads them (``history``), else ``None``."""
    return [load_previous_image(data, e) for e in examples] if history else None


def _probabilities(
    model: SuccessClassifier,
    goals: Sequence[str],
    screens: Sequence[np.ndarray],
    batch: int,
    history: _History,
) -> np.ndarray:
    model.eval()
    out: list[np.ndarray] = []
    with torch.no_grad():
        for start in range(0, len(goals), batch):
            end = min(start + batch, len(goals))
            logits = model(history.inputs(model, goals[start:end], screens[start:end], start, end))
            out.append(torch.sigmoid(logits).numpy())
    return np.concatenate(out) if out else np.zeros(0)


def _backbone(config: VerifierTrainConfig, screen_size: tuple[int, int]) -> VLM:
    """The warm start's model (``init='agent'``) or a new one of its shape, with an image
    processor for the data's screen size: a Qwen2-VL vision tower takes any image size, so
    the verifier may read the screen at a higher resolution than the agent acts on."""
    warm = load_tiny_vlm(config.checkpoint)
    tiny = warm.tiny_config
    if tiny is None:
        raise ValueError(f"{config.checkpoint}: not a tiny darwin model (no tiny config)")
    tiny = tiny.model_copy(update={"screen_width": screen_size[0], "screen_height": screen_size[1]})
    if config.init == "fresh":
        return build_tiny_vlm(tiny, seed=config.seed)
    return VLM(model=warm.model, processor=build_processor(tiny, warm.tokenizer), tiny_config=tiny, seed=warm.seed)


def _balanced_order(
    positives: list[int], negatives: list[int], fraction: float, generator: torch.Generator
) -> list[int]:
    """One epoch: every negative once and positives drawn (with replacement) to make up
    ``fraction`` of the examples, shuffled."""
    wanted = max(len(positives), round(fraction * len(negatives) / (1.0 - fraction)))
    draws = torch.randint(len(positives), (wanted,), generator=generator).tolist()
    pool = negatives + [positives[i] for i in draws]
    return [pool[i] for i in torch.randperm(len(pool), generator=generator).tolist()]


def swapped_goal_negatives(
    examples: Sequence[VerifierExample],
    positives: Sequence[int],
    share: float,
    generator: torch.Generator,
) -> list[tuple[int, str]]:
    """``round(share * len(positives))`` draws of ``(example index, another task's goal)``: a
    positive's screen with the goal of another task among ``positives``' tasks: half of the
    time one of the same app when that app has another task (a finished alarm under "set the
    home time zone": the fine-grained mistake), otherwise any other task (another app's settings
    page under "turn on notification history": the wrong-app mistake). Pairs whose screen is
    labelled achieved for that goal somewhere in ``examples`` are dropped (so fewer may come back).

        >>> rows = [VerifierExample(id=str(i), image=f"{i}.png", goal=f"goal {t}", label=True, task_id=t, app="A")
        ...         for i, t in enumerate(["t1", "t2"])]
        >>> swapped_goal_negatives(rows, [0, 1], 1.0, torch.Generator().manual_seed(0))
        [(0, 'goal t2'), (1, 'goal t1')]
    """
    wanted = round(share * len(positives))
    if wanted == 0 or not positives:
        return []
    goal_of: dict[str, tuple[str, str]] = {}
    for i in positives:
        goal_of.setdefault(examples[i].task_id, (examples[i].app, examples[i].goal))
    achieved = {(e.image, e.goal) for e in examples if e.label}
    out: list[tuple[int, str]] = []
    for draw in torch.randint(len(positives), (wanted,), generator=generator).tolist():
        example = examples[positives[draw]]
        others = [(app, goal) for task, (app, goal) in goal_of.items() if task != example.task_id]
        same_app = [goal for app, goal in others if app == example.app]
        pick_same_app = bool(same_app) and bool(torch.randint(2, (1,), generator=generator))
        candidates = same_app if pick_same_app else [goal for _, goal in others]
        if not candidates:
            continue
        goal = candidates[int(torch.randint(len(candidates), (1,), generator=generator))]
        if (example.image, goal) not in achieved:
            out.append((positives[draw], goal))
    return out


def classifier_probabilities(
    model: SuccessClassifier,
    examples: Sequence[VerifierExample],
    screens: Sequence[np.ndarray],
    previous: Sequence[np.ndarray | None] | None = None,
    *,
    batch: int = 32,
) -> np.ndarray:
    """``(N,)`` success probabilities of ``examples`` under their own goals; ``previous``: the
    examples' previous screens (:func:`previous_screens`) for a model trained with history."""
    return _probabilities(model, [e.goal for e in examples], screens, batch, _History.of(examples, previous))


def evaluate_classifier(
    model: SuccessClassifier,
    examples: Sequence[VerifierExample],
    screens: Sequence[np.ndarray],
    threshold: float,
    rng: np.random.Generator,
    *,
    batch: int = 32,
    resamples: int = 1000,
    previous: Sequence[np.ndarray | None] | None = None,
) -> MetricsWithIntervals:
    """Metrics of ``p >= threshold`` on ``examples`` with intervals from resampling whole
    episodes (an episode's screens are correlated); ``previous``: the examples' previous screens
    (:func:`previous_screens`) for a model trained with history."""
    probs = classifier_probabilities(model, examples, screens, previous, batch=batch)
    return bootstrap_metrics(
        probs >= threshold,
        np.array([e.label for e in examples]),
        rng,
        resamples=resamples,
        groups=np.array([e.episode_id for e in examples]),
    )


def evaluate_saved_classifier(
    model_dir: str | Path,
    data: str | Path,
    *,
    train_tasks: Sequence[str] | None = None,
    threshold: float | None = None,
    by: Literal["split", "task"] = "split",
) -> tuple[float, list[SplitReport]]:
    """The classifier saved in ``model_dir`` measured on the dataset ``data``: the threshold used
    (``threshold``, else the model's) and a row per group, each with intervals from resampling
    whole episodes. ``by="split"``: the training splits (``train_tasks``, else the model's
    training tasks, with its split salt); ``by="task"``: a row per task, then ``all``. Every
    example is scored once (with its previous screen when the model was trained with them)."""
    from darwin.task_registry import resolve_tasks

    model, record = load_classifier(model_dir)
    config = record.get("config", {})
    names = list(train_tasks) if train_tasks else list(config.get("train_tasks", ["base8"]))
    seed = int(config.get("seed", 0))
    examples = load_examples(data)
    groups: list[tuple[str, list[int]]]
    if by == "split":
        groups = sorted(assign_splits(examples, {t.id for t in resolve_tasks(names)}, seed).items())
    else:
        by_task: dict[str, list[int]] = {}
        for i, e in enumerate(examples):
            by_task.setdefault(e.task_id, []).append(i)
        groups = [*sorted(by_task.items()), ("all", list(range(len(examples))))]
    chosen = float(threshold if threshold is not None else record["threshold"])
    # every example scored once; each row resamples its own episodes
    probs = classifier_probabilities(
        model,
        examples,
        [load_image(data, e) for e in examples],
        previous_screens(data, examples, model.history),
    )
    labels = np.array([e.label for e in examples])
    episodes = np.array([e.episode_id for e in examples])
    rng = np.random.default_rng(seed)
    reports = [
        SplitReport(
            split,
            len(idx),
            int(labels[idx].sum()),
            bootstrap_metrics(probs[idx] >= chosen, labels[idx], rng, groups=episodes[idx]),
        )
        for split, idx in groups
    ]
    return chosen, reports


def train_verifier(
    data: str | Path,
    out: str | Path,
    config: VerifierTrainConfig,
    *,
    on_epoch: Callable[[EpochLog], None] | None = None,
) -> VerifierReport:
    """Train, choose the threshold, evaluate every split, save model and ``report.json`` to ``out``."""
    from darwin.task_registry import resolve_tasks

    examples = load_examples(data)
    train_tasks = {t.id for t in resolve_tasks(config.train_tasks)}
    splits = assign_splits(examples, train_tasks, config.seed)
    if config.choose_on == "train":
        splits["val"] = list(splits.get("train", []))
    if not splits.get("train") or not splits.get("val"):
        raise ValueError(
            f"{data}: no training or validation examples for tasks {sorted(train_tasks)}; generate episodes of "
            "those tasks (darwin verifier data --tasks ...) or name other --train-tasks"
        )
    screens = [load_image(data, e) for e in examples]
    screen_size = (int(screens[0].shape[1]), int(screens[0].shape[0]))
    if any(s.shape != screens[0].shape for s in screens):
        raise ValueError(f"{data}: screens of different sizes; generate the data at one --screen-size")
    vlm = _backbone(config, screen_size)
    model = SuccessClassifier(vlm, history=config.history)
    history = _History.of(examples, previous_screens(data, examples, config.history))

    train_idx = splits["train"]
    labels = np.array([e.label for e in examples])
    positives = int(labels[train_idx].sum())
    if positives == 0:
        raise ValueError(f"{data}: the training split has no positive example; generate oracle episodes")
    loss_fn = torch.nn.BCEWithLogitsLoss()
    train_pos = [i for i in train_idx if labels[i]]
    train_neg = [i for i in train_idx if not labels[i]]
    head_params = list(model.head.parameters())
    optimizer = torch.optim.AdamW(
        [{"params": list(model.backbone.parameters()), "lr": config.lr}, {"params": head_params, "lr": config.head_lr}],
        weight_decay=0.0,
    )
    generator = torch.Generator().manual_seed(config.seed)
    val_idx = splits["val"]
    best: tuple[float, int, float, dict[str, torch.Tensor]] | None = None
    logs: list[EpochLog] = []
    for epoch in range(1, config.epochs + 1):
        clock = time.perf_counter()
        model.train()
        # (example, goal shown, label): the balanced draw with each example's own goal, plus
        # positives' screens under another task's goal as negatives
        order = [
            (i, examples[i].goal, bool(labels[i]))
            for i in _balanced_order(train_pos, train_neg, config.positive_fraction, generator)
        ]
        swapped = swapped_goal_negatives(examples, train_pos, config.swapped_goals, generator)
        if swapped:
            pool = order + [(i, goal, False) for i, goal in swapped]
            order = [pool[k] for k in torch.randperm(len(pool), generator=generator).tolist()]
        total = 0.0
        for start in range(0, len(order), config.batch_size):
            chunk = order[start : start + config.batch_size]
            part = history.subset([i for i, _, _ in chunk])
            logits = model(
                part.inputs(model, [goal for _, goal, _ in chunk], [screens[i] for i, _, _ in chunk], 0, len(chunk))
            )
            loss = loss_fn(logits, torch.tensor([label for _, _, label in chunk], dtype=torch.float32))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            total += loss.item() * len(chunk)
        probs = _probabilities(
            model,
            [examples[i].goal for i in val_idx],
            [screens[i] for i in val_idx],
            32,
            history.subset(val_idx),
        )
        threshold = best_threshold(probs, labels[val_idx], midpoint=True)
        val_f1 = binary_metrics(probs >= threshold, labels[val_idx]).f1
        log = EpochLog(epoch, total / len(order), float(val_f1), threshold, time.perf_counter() - clock)
        logs.append(log)
        if on_epoch is not None:
            on_epoch(log)
        if best is None or (not math.isnan(val_f1) and val_f1 > best[0]):
            state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            best = (val_f1 if not math.isnan(val_f1) else -1.0, epoch, threshold, state)
    assert best is not None
    _, best_epoch, threshold, state = best
    model.load_state_dict(state)

    rng = np.random.default_rng(config.seed)
    reports: list[SplitReport] = []
    shown = ("train", *TEST_SPLITS) if config.choose_on == "train" else ("train", "val", *TEST_SPLITS)
    for split in shown:
        idx = splits.get(split, [])
        if not idx:
            continue
        metrics = evaluate_classifier(
            model,
            [examples[i] for i in idx],
            [screens[i] for i in idx],
            threshold,
            rng,
            resamples=config.bootstrap_resamples,
            previous=history.subset(idx).previous if config.history else None,
        )
        reports.append(SplitReport(split, len(idx), int(labels[idx].sum()), metrics))
    report = VerifierReport(threshold, best_epoch, logs, reports, len(train_idx), positives)
    metadata = {"config": config.model_dump(mode="json"), "data": str(data), "best_epoch": best_epoch}
    model.save(out, threshold=threshold, screen_size=screen_size, metadata=metadata)
    (Path(out) / REPORT_FILE).write_text(json.dumps(report.to_json(), indent=2), encoding="utf-8")
    return report
