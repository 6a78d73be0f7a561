"""The warm start's configuration: :class:`SFTConfig` (validated, frozen) and its hash.

Everything :func:`~darwin.sft.training.train_sft` needs in one pydantic model, plus the
:meth:`SFTConfig.config_hash` that names cached checkpoints
(:func:`~darwin.sft.cache.ensure_warm_start`). ``SFT_FORMAT_VERSION`` is hashed and
written into every checkpoint record, so bumping it invalidates old caches.

    >>> from darwin.sft.config import SFTConfig
    >>> SFTConfig().config_hash() == SFTConfig(threads=8).config_hash()  # threads do not change weights
    True
    >>> try:  # one error lists every problem, each with its fix
    ...     SFTConfig(steps=5, warmup_steps=10)
    ... except ValueError as err:
    ...     print("warmup_steps=10 must be below steps=5" in str(err))
    True

:func:`sft_config_from_fields` builds one from fields (e.g. :func:`read_sft_config_file`'s)
and the command line's flags, as ``darwin sft`` does:

    >>> sft_config_from_fields({"steps": 100}, {"steps": 50, "lr": None}, preset="B").steps
    50
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from darwin.agents import pointing
from darwin.agents.tiny import TinyAgent, TinyAgentConfig
from darwin.agents.warm_start import SFT_FORMAT_VERSION
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.envs.sim.phone import appearance_key
from darwin.memory.sliding_window import SlidingWindowConfig, SlidingWindowMemory
from darwin.models.config import TinyVLMConfig
from darwin.problems import problems_message
from darwin.types import Task

"""Version of the checkpoint records and of the config hash (part of the hashed blob)."""

StopMetric = Literal["sequence_prob", "greedy_match"]


class SFTConfig(BaseModel):
    """Everything :func:`~darwin.sft.training.train_sft` needs; validated when built (one error lists every problem).

    Defaults are the embedded default's warm start, tuned on the reference machine (2 CPU
    cores) to train in well under 10 minutes and land clearly *below* mastery on ``base8``
    (see docs/sft.md for the measured figures). Fields that do not change the trained
    weights (``threads``, ``demo_workers``) are left out of :meth:`config_hash`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # --- demonstrations ----------------------------------------------------------------
    tasks: tuple[str, ...] = Field(
        ("base8",), min_length=1, description="task ids, task-set names or task files to demonstrate"
    )
    task_weights: dict[str, int] = Field(
        default_factory=dict,
        description="times a task id appears in each phone's shuffled round of tasks (unlisted tasks: 1); "
        "e.g. {'booking.com_0': 4} demonstrates that task four times as often as each other one",
    )
    phones: int = Field(32, ge=1, le=4096, description="demonstration phones (each its own seed and layout)")
    episodes: int = Field(
        256,
        ge=1,
        le=1_000_000,
        description="demonstration episodes in all, spread round-robin over the phones; each phone "
        "plays the tasks in its own shuffled order and keeps its state between episodes",
    )
    phone_seed: int = Field(
        1000,
        ge=0,
        description="demo phone i is SimPhone(seed=phone_seed + i); evaluation phones start at seed 0, "
        "so the default never trains on an evaluation phone's layout",
    )
    heldout_phones: int = Field(
        4, ge=0, le=1024, description="extra phones (seeds after the demo phones) for held-out metrics; 0 = none"
    )
    heldout_episodes: int = Field(16, ge=0, le=100_000, description="held-out episodes in all")
    perturbation: PerturbationConfig = Field(
        default_factory=PerturbationConfig, description="SimPhone perturbations (theme, wallpaper, orders, pop-ups)"
    )
    observation_size: tuple[int, int] = Field(
        (168, 364),
        description="(W, H) of the screenshots the agent sees (StepConfig.observation_size); must be "
        "multiples of 28 and equal the model's screen. RL and evaluation must use the same size",
    )
    launch_by_name: bool = Field(
        True,
        description="demonstrate a tap on a launcher icon as open_app('<app>') (same effect, grounded in "
        "the goal's text); False keeps the oracle's icon taps (the model must find icons by sight)",
    )
    prefer_typing: bool = Field(
        False,
        description="demonstrate typing a task's words into a field rather than tapping a widget that shows "
        "them (a shuffled list row reading 'Berlin'), where the app offers both: the typed text is copied "
        "from the goal, the row must be read off the screen; plans may then be a step longer",
    )
    skip_done_episodes: bool = Field(
        True,
        description="count episodes whose goal already held when they started (state persists between "
        "episodes) as skipped; the workflow ends them before the first action, so they never yield "
        "demonstrations (an immediate finished() could not be told from the screen)",
    )
    agent: TinyAgentConfig = Field(default_factory=TinyAgentConfig, description="TinyAgent prompt/format settings")
    memory: SlidingWindowConfig = Field(
        default_factory=SlidingWindowConfig, description="the agent's sliding-window memory"
    )

    # --- model ---------------------------------------------------------------------------
    model: TinyVLMConfig | None = Field(
        None, description="tiny model sizes; None = preset A with the observation size as its screen"
    )
    model_seed: int = Field(0, ge=0, description="seed of the random initial weights")

    @property
    def pick_cost(self) -> int:
        """The oracle's cost of a tap on a widget showing a task's words (:func:`shortest_plan`)."""
        from darwin.envs.sim.oracle import pick_cost_for

        return pick_cost_for(self.prefer_typing)

    # --- optimisation --------------------------------------------------------------------
    steps: int = Field(225, ge=1, le=1_000_000, description="optimizer steps (the cosine schedule spans them)")
    batch_size: int = Field(32, ge=1, le=4096, description="demonstration steps per optimizer step")
    lr: float = Field(2e-3, gt=0, le=1.0, description="peak AdamW learning rate")
    weight_decay: float = Field(0.01, ge=0, le=1.0, description="AdamW weight decay (matrices only)")
    warmup_steps: int = Field(20, ge=0, description="linear warm-up steps before the cosine decay")
    min_lr_ratio: float = Field(0.1, ge=0, le=1.0, description="final learning rate / lr")
    grad_clip: float | None = Field(1.0, gt=0, description="global gradient-norm clip; None = off")
    seed: int = Field(0, ge=0, description="seeds the demo task orders and the batch order")

    # --- stopping short of mastery ----------------------------------------------------------
    eval_every: int = Field(0, ge=0, description="held-out metrics every N steps (0 = only at the end)")
    stop_metric: StopMetric = Field(
        "sequence_prob",
        description="held-out metric for early stopping: sequence_prob (mean probability that a "
        "temperature-1 sample is exactly the oracle's action) or greedy_match (share of greedy "
        "outputs equal to the oracle's action text)",
    )
    stop_threshold: float | None = Field(
        None,
        gt=0,
        le=1.0,
        description="stop as soon as the held-out stop_metric reaches this (checked every eval_every "
        "steps); None = train all steps",
    )

    threads: int = Field(2, ge=1, le=1024, description="torch CPU threads while training (not hashed)")
    demo_workers: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="processes the demonstration phones play in (the demonstrations are the same for any "
        "number; not hashed); None = one per core from 64 episodes, else one",
    )

    @property
    def resolved_model(self) -> TinyVLMConfig:
        """The tiny model config, its screen set to :attr:`observation_size`."""
        if self.model is not None:
            return self.model
        w, h = self.observation_size
        return TinyVLMConfig(screen_width=w, screen_height=h)

    def demonstrated_tasks(self) -> list[Task]:
        """The tasks :attr:`tasks` names, in order, each once (resolved from the task registry or files)."""
        from darwin.task_registry import resolve_tasks

        return resolve_tasks(self.tasks)

    def demonstration_round(self) -> list[Task]:
        """One round of a demonstration phone's tasks before shuffling: each task :attr:`task_weights` times."""
        return [t for t in self.demonstrated_tasks() for _ in range(self.task_weights.get(t.id, 1))]

    def problems(self) -> list[str]:
        """Every inconsistency, each with its fix ([] if none)."""
        out: list[str] = []
        w, h = self.observation_size
        if w <= 0 or h <= 0 or w > 1080 or h > 2400:
            out.append(f"observation_size={self.observation_size} must lie within 1x1..1080x2400")
        elif w % 28 or h % 28:
            out.append(
                f"observation_size={w}x{h} must be multiples of 28 (the model's merged patch): "
                f"e.g. {max(28, w // 28 * 28)}x{max(28, h // 28 * 28)}"
            )
        if self.model is not None and (self.model.screen_width, self.model.screen_height) != (w, h):
            out.append(
                f"model screen {self.model.screen_width}x{self.model.screen_height} differs from "
                f"observation_size {w}x{h}: set both to the same size (or leave model=None)"
            )
        if self.warmup_steps >= self.steps and self.steps > 1:
            out.append(f"warmup_steps={self.warmup_steps} must be below steps={self.steps}")
        if self.stop_threshold is not None and self.heldout_phones * self.heldout_episodes == 0:
            out.append("stop_threshold needs held-out data: set heldout_phones and heldout_episodes > 0")
        if self.stop_threshold is not None and self.eval_every == 0:
            out.append("stop_threshold is checked every eval_every steps: set eval_every > 0")
        for task_id, weight in sorted(self.task_weights.items()):
            if weight < 1:
                out.append(f"task_weights[{task_id!r}]={weight} must be at least 1: remove the task from tasks instead")
        unknown = (
            sorted(set(self.task_weights) - {t.id for t in self.demonstrated_tasks()}) if self.task_weights else []
        )
        if unknown:
            out.append(
                f"task_weights names {unknown}, not among the demonstrated tasks {list(self.tasks)}: weight a task id they hold"
            )
        if self.episodes < self.phones:
            out.append(f"episodes={self.episodes} leaves phones idle: use at least phones={self.phones} episodes")
        return out

    @model_validator(mode="after")
    def _check(self) -> SFTConfig:
        problems = self.problems()
        if problems:
            raise ValueError(problems_message("SFTConfig", problems))
        return self

    def config_hash(self) -> str:
        """16 hex digits identifying the trained weights (everything but ``threads`` and ``demo_workers``).

        SimPhone's appearance (layout version and installed apps) is part of it: the
        demonstrations are its screens, so a cache built on another launcher is never reused;
        so is, with a reader, how pointing calls are written (``POINTING_VERSION``).
        """
        data = self.model_dump(mode="json", exclude={"threads", "demo_workers"})
        data["model"] = self.resolved_model.model_dump(mode="json")
        if self.agent.reader.name != "none":
            data["pointing"] = pointing.POINTING_VERSION  # how the demonstrations' pointing calls are written
        blob = json.dumps({"format": SFT_FORMAT_VERSION, "config": data, "simphone": appearance_key()}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def make_agent(self) -> TinyAgent:
        """The agent the model is trained for (and must be run with)."""
        return TinyAgent(self.agent, SlidingWindowMemory(self.memory))


class SFTConfigFileError(ValueError):
    """An SFTConfig file that is not a mapping of fields; the message names the file."""


def read_sft_config_file(path: str | Path) -> dict[str, object]:
    """The :class:`SFTConfig` fields of a JSON or YAML file (JSON is YAML); a file that does
    not parse, or is not a mapping, raises :class:`SFTConfigFileError`."""
    import yaml

    try:
        loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise SFTConfigFileError(f"{path}: {exc}") from None
    if not isinstance(loaded, dict):
        raise SFTConfigFileError(f"{path}: expected a mapping of SFTConfig fields")
    return loaded


def sft_config_from_fields(
    fields: Mapping[str, object], flags: Mapping[str, object], *, preset: Literal["A", "B"] | None = None
) -> SFTConfig:
    """The validated :class:`SFTConfig` of ``fields`` with every flag that is not ``None`` put
    over them; with ``preset``, the tiny model of that size preset at the resulting
    observation size. A problem raises pydantic's ``ValidationError`` listing them all."""
    data = dict(fields)
    data.update({k: v for k, v in flags.items() if v is not None})
    if preset is not None:
        w, h = data.get("observation_size") or SFTConfig.model_fields["observation_size"].default  # type: ignore[misc]  # observation_size is a (W, H) pair, validated by SFTConfig
        data["model"] = TinyVLMConfig.preset(preset, screen_width=w, screen_height=h)
    return SFTConfig.model_validate(data)
