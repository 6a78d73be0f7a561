"""Warm start: behaviour cloning of the tiny model on SimPhone oracle demonstrations.

UI-TARS is an SFT model before anyone runs RL on it; the embedded default mirrors that.
:func:`train_sft` runs the simulator's :class:`~darwin.agents.scripted.OracleActor`
through the real workflow on perturbed SimPhones (state persists between episodes, as in
training), records every step's prompt exactly as :class:`~darwin.agents.TinyAgent`
builds it at RL time, and fine-tunes a fresh tiny Qwen2-VL on ``prompt -> action text +
EOS`` with the same masked log-probs the PPO learner uses
(:func:`~darwin.policies.hf.compute_response_logprobs`). It stops *short of mastery* on
purpose (a fixed step budget, optionally an earlier held-out threshold) so that RL has
room to show gains, and writes a checkpoint directory that
:func:`load_warm_start` (or ``darwin eval --agent tiny:<dir>``) turns back into the exact
agent and model. :func:`ensure_warm_start` caches checkpoints by config hash.

    >>> from darwin.sft import SFTConfig
    >>> cfg = SFTConfig(steps=100, episodes=8, phones=2)
    >>> cfg.resolved_model.screen_width, cfg.observation_size
    (168, (168, 364))
    >>> len(cfg.config_hash())
    16

See docs/sft.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import math
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from darwin.actions import Action
from darwin.agents.base import Actor, ModelActor
from darwin.agents.tiny import TinyAgent, TinyAgentConfig
from darwin.envs.base import PhoneEnv
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.envs.sim.phone import appearance_key
from darwin.memory.base import Memory
from darwin.memory.sliding_window import SlidingWindowConfig, SlidingWindowMemory
from darwin.models.config import TinyVLMConfig
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
    VerifierSpec,
)

if TYPE_CHECKING:
    import torch

    from darwin.evaluate import EvalReport
    from darwin.models.factory import VLM
    from darwin.policies.batcher import DynamicBatcher
    from darwin.policies.hf import HFPolicy

logger = logging.getLogger(__name__)

SFT_FORMAT_VERSION = 1
AGENT_FILE = "darwin_agent.json"
"""Which agent (and memory, screen size) the checkpoint was trained for."""
SFT_FILE = "darwin_sft.json"
"""SFT metadata: config, its hash, data statistics, training curve, timings."""

StopMetric = Literal["sequence_prob", "greedy_match"]


# ======================================================================================
# Configuration
# ======================================================================================
class SFTConfig(BaseModel):
    """Everything :func:`train_sft` needs; validated when built (one error lists every problem).

    Defaults are the embedded default's warm start, tuned on the reference machine (2 CPU
    cores) to train in well under 10 minutes and land clearly *below* mastery on ``base8``
    (see docs/sft.md for the measured figures). Fields that do not change the trained
    weights (``threads``) are left out of :meth:`config_hash`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # --- demonstrations ----------------------------------------------------------------
    tasks: tuple[str, ...] = Field(
        ("base8",), min_length=1, description="task ids, task-set names or task files to demonstrate"
    )
    phones: int = Field(32, ge=1, le=4096, description="demonstration phones (each its own seed and layout)")
    episodes: int = Field(
        256, ge=1, le=1_000_000,
        description="demonstration episodes in all, spread round-robin over the phones; each phone "
        "plays the tasks in its own shuffled order and keeps its state between episodes",
    )
    phone_seed: int = Field(
        1000, ge=0,
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
    eval_every: int = Field(
        0, ge=0, description="held-out metrics every N steps (0 = only at the end)"
    )
    stop_metric: StopMetric = Field(
        "sequence_prob",
        description="held-out metric for early stopping: sequence_prob (mean probability that a "
        "temperature-1 sample is exactly the oracle's action) or greedy_match (share of greedy "
        "outputs equal to the oracle's action text)",
    )
    stop_threshold: float | None = Field(
        None, gt=0, le=1.0,
        description="stop as soon as the held-out stop_metric reaches this (checked every eval_every "
        "steps); None = train all steps",
    )

    threads: int = Field(2, ge=1, le=1024, description="torch CPU threads while training (not hashed)")

    @property
    def resolved_model(self) -> TinyVLMConfig:
        """The tiny model config, its screen set to :attr:`observation_size`."""
        if self.model is not None:
            return self.model
        w, h = self.observation_size
        return TinyVLMConfig(screen_width=w, screen_height=h)

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
        if self.episodes < self.phones:
            out.append(f"episodes={self.episodes} leaves phones idle: use at least phones={self.phones} episodes")
        return out

    @model_validator(mode="after")
    def _check(self) -> SFTConfig:
        problems = self.problems()
        if problems:
            raise ValueError(f"invalid SFTConfig ({len(problems)} problem(s)):\n- " + "\n- ".join(problems))
        return self

    def config_hash(self) -> str:
        """16 hex digits identifying the trained weights (everything but ``threads``).

        SimPhone's appearance (layout version and installed apps) is part of it: the
        demonstrations are its screens, so a cache built on another launcher is never reused.
        """
        data = self.model_dump(mode="json", exclude={"threads"})
        data["model"] = self.resolved_model.model_dump(mode="json")
        blob = json.dumps({"format": SFT_FORMAT_VERSION, "config": data, "simphone": appearance_key()}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def make_agent(self) -> TinyAgent:
        """The agent the model is trained for (and must be run with)."""
        return TinyAgent(self.agent, SlidingWindowMemory(self.memory))


# ======================================================================================
# Demonstrations
# ======================================================================================
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


class _RecordingOracle(Actor):
    """Plays the oracle but answers like a model actor: the decision carries the TinyAgent
    text as its generation and the grid-rounded parsed action, so the workflow's history
    holds exactly what an RL rollout's history would.

    With ``launch_by_name`` a tap that would launch an app from the launcher is
    demonstrated as ``open_app('<label>')`` (``SimPhone.launch`` either way).
    """

    def __init__(self, agent: TinyAgent, phone_seed: int, sink: list[Demonstration], launch_by_name: bool) -> None:
        from darwin.agents.scripted import OracleActor
        from darwin.envs.sim.phone import SimPhone

        self.oracle = OracleActor()
        self.agent = agent
        self.phone_seed = phone_seed
        self.sink = sink
        self.launch_by_name = launch_by_name
        self._mirror = SimPhone(seed=0)
        self._env: PhoneEnv | None = None

    async def start_phase(self, env: PhoneEnv, task: Task, phase: Phase, instruction: str, verifier: VerifierSpec) -> None:
        self._env = env
        await self.oracle.start_phase(env, task, phase, instruction, verifier)

    async def _launched_app(self, action: Action) -> str | None:
        """The label of the app a tap launches from the launcher, if it is such a tap."""
        from darwin.actions import Click

        if not isinstance(action, Click) or self._env is None:
            return None
        state = await self._env.aprobe_state()
        if state is None or state.get("foreground") is not None or state.get("popup") is not None:
            return None
        self._mirror.restore(state)
        widget = self._mirror.layout().hit(action.x, action.y)
        if widget is None or widget.kind != "app_icon" or not widget.text:
            return None
        return widget.text

    async def act(self, observation: Observation, history: Sequence[Transition]) -> Decision:
        from darwin.actions import OpenApp

        decision = await self.oracle.act(observation, history)
        assert decision.action is not None  # the oracle always acts
        action = decision.action
        if self.launch_by_name:
            label = await self._launched_app(action)
            if label is not None:
                action = OpenApp(app=label)
        text = self.agent.format_action(action, observation)
        parsed = self.agent.parse(text, observation)
        if parsed.action is None:  # a format_action/parse mismatch is a bug in the agent
            raise RuntimeError(f"TinyAgent cannot read its own output {text!r}: {parsed.error}")
        prompt = self.agent.build_context(observation, history)
        self.sink.append(
            Demonstration(
                prompt=prompt, target=text, observation=observation, action=parsed.action,
                oracle_action=action, task_id=observation.task_id, phone_seed=self.phone_seed,
                step=observation.step,
            )
        )
        return Decision(action=parsed.action, generation=Generation(text=text), prompt=prompt)


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


def collect_demonstrations(
    config: SFTConfig, *, heldout: bool = False
) -> tuple[list[Demonstration], DemoStats]:
    """Run the oracle on perturbed SimPhones through the real workflow and record every step.

    Phone ``i`` (seed ``phone_seed + i``, or after the demo phones for ``heldout``) plays
    its share of the episodes round-robin, in its own shuffled task order (seeded by
    ``config.seed``), returning home between episodes but keeping its state, as training
    phones do. Deterministic for a given config.
    """
    from darwin.envs.sim.env import SimPhoneEnv
    from darwin.tasks import resolve_tasks
    from darwin.workflows.step import LifecycleWorkflow, StepConfig

    tasks = resolve_tasks(config.tasks)
    if heldout:
        phones, episodes = config.heldout_phones, config.heldout_episodes
        first_seed = config.phone_seed + config.phones
    else:
        phones, episodes = config.phones, config.episodes
        first_seed = config.phone_seed
    agent = config.make_agent()
    workflow = LifecycleWorkflow(config=StepConfig(observation_size=config.observation_size))
    demos: list[Demonstration] = []
    counts = {"episodes": 0, "successes": 0, "skipped": 0}

    async def play(i: int, n: int) -> None:
        seed = first_seed + i
        env = SimPhoneEnv(seed=seed, perturbation=config.perturbation, name=f"demo-{seed}")
        rng = np.random.default_rng([config.seed, seed, int(heldout)])
        order: list[Task] = []
        episode: list[Demonstration] = []
        actor = _RecordingOracle(agent, seed, episode, config.launch_by_name)
        for _ in range(n):
            if not order:
                order = [tasks[j] for j in rng.permutation(len(tasks))]
            task = order.pop(0)
            episode.clear()
            trajectory = await workflow.run(env, task, actor, episode_id=f"demo-{seed}-{counts['episodes']}")
            await env.ago_home()
            counts["episodes"] += 1
            counts["successes"] += bool(trajectory.success)
            # The workflow ends an episode whose goal already holds before anyone acts.
            if config.skip_done_episodes and trajectory.termination.reason == TerminationReason.ALREADY_DONE:
                counts["skipped"] += 1
                continue
            demos.extend(episode)
            if trajectory.termination is not None and trajectory.termination.cause:
                logger.warning("demo episode %s on phone %d ended: %s", task.id, seed, trajectory.termination.cause)

    async def run_all() -> None:
        for i in range(phones):  # sequential: deterministic, and SimPhones are in-process
            await play(i, episodes // phones + (1 if i < episodes % phones else 0))

    if phones and episodes:
        asyncio.run(run_all())
    per_task: dict[str, int] = {}
    for d in demos:
        per_task[d.task_id] = per_task.get(d.task_id, 0) + 1
    stats = DemoStats(
        episodes=counts["episodes"], successes=counts["successes"], steps=len(demos),
        phones=phones if episodes else 0, per_task_steps=per_task, skipped_done_episodes=counts["skipped"],
    )
    return demos, stats


# ======================================================================================
# Encoding: the HFPolicy input path, cached as compact tensors
# ======================================================================================
class PixelEncoder:
    """``uint8`` screenshots -> the image processor's ``pixel_values``, fast and bit-exact.

    The processor's rescale/normalise is element-wise per channel, so it is tabulated once
    (by calling the processor's own ``rescale``/``normalize`` on every byte value) and the
    patch layout is Qwen2-VL's reshape/transpose. :meth:`check` compares against the
    processor and raises on any difference (e.g. a transformers change).
    """

    def __init__(self, image_processor: Any) -> None:
        import torch
        from transformers.image_utils import ChannelDimension

        ip = image_processor
        self.patch = int(ip.patch_size)
        self.temporal = int(ip.temporal_patch_size)
        self.merge = int(ip.merge_size)
        ramp = np.broadcast_to(np.arange(256, dtype=np.uint8), (3, 1, 256)).copy()
        x: np.ndarray = ramp
        if ip.do_rescale:
            x = ip.rescale(x, ip.rescale_factor, data_format=ChannelDimension.FIRST,
                           input_data_format=ChannelDimension.FIRST)
        if ip.do_normalize:
            x = ip.normalize(x, ip.image_mean, ip.image_std, data_format=ChannelDimension.FIRST,
                             input_data_format=ChannelDimension.FIRST)
        self.lut = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32).reshape(3 * 256))
        self._offset = torch.tensor([0, 256, 512])

    def to_patches(self, images: torch.Tensor) -> torch.Tensor:
        """``(N, H, W, 3)`` uint8 -> ``(N, h*w, 3, p*p)`` uint8 in the processor's patch order."""
        n, height, width, _ = images.shape
        p, m = self.patch, self.merge
        if height % (p * m) or width % (p * m):
            raise ValueError(f"screenshots of {width}x{height} are not multiples of {p * m}")
        gh, gw = height // p, width // p
        x = images.permute(0, 3, 1, 2).reshape(n, 3, gh // m, m, p, gw // m, m, p)
        x = x.permute(0, 2, 5, 3, 6, 1, 4, 7)  # (n, gh/m, gw/m, m, m, C, p, p)
        return x.reshape(n, gh * gw, 3, p * p).contiguous()

    def from_patches(self, patches: torch.Tensor) -> torch.Tensor:
        """``(N, h*w, 3, p*p)`` uint8 patches -> ``pixel_values (N*h*w, 3*T*p*p)`` float32."""
        import torch

        n, count, channels, area = patches.shape
        out = torch.empty((n, count, channels, self.temporal, area), dtype=torch.float32)
        for c in range(channels):
            values = self.lut[c * 256: (c + 1) * 256][patches[:, :, c].long()]
            for t in range(self.temporal):  # images repeat along the temporal patch
                out[:, :, c, t] = values
        return out.view(n * count, channels * self.temporal * area)

    def grid(self, height: int, width: int, n: int) -> torch.Tensor:
        """``image_grid_thw`` rows of ``n`` screenshots of ``height x width``."""
        import torch

        return torch.tensor([[1, height // self.patch, width // self.patch]], dtype=torch.long).repeat(n, 1)

    def __call__(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(N, H, W, 3)`` uint8 -> ``pixel_values (N*h*w, 3*T*p*p)`` and ``image_grid_thw (N, 3)``."""
        n, height, width, _ = images.shape
        return self.from_patches(self.to_patches(images)), self.grid(height, width, n)

    def check(self, images: torch.Tensor, pixel_values: torch.Tensor, grid: torch.Tensor) -> None:
        """Raise unless the fast path reproduces the processor's output exactly."""
        import torch

        mine, my_grid = self(images)
        if not torch.equal(my_grid, grid.to(my_grid.dtype)) or not torch.equal(mine, pixel_values.to(mine.dtype)):
            diff = (mine - pixel_values).abs().max().item() if mine.shape == pixel_values.shape else float("nan")
            raise RuntimeError(
                "the cached pixel path no longer matches the image processor "
                f"(grid {my_grid[:1].tolist()} vs {grid[:1].tolist()}, max |diff| {diff}); "
                "this transformers version preprocesses images differently: report it"
            )


@dataclass
class EncodedDemos:
    """Demonstrations as the model sees them: prompt ids, deduplicated screenshots, targets.

    ``prompt_ids[i]`` are the unpadded ids of ``HFPolicy.build_inputs([prompt_i])``;
    ``image_ids[i]`` index ``screens`` in the prompt's image order; ``target_ids[i]`` is
    the tokenized target followed by EOS. ``screens`` holds each distinct screenshot once,
    as ``uint8`` patches (``(N, h*w, 3, p*p)``, :meth:`PixelEncoder.to_patches`).
    """

    prompt_ids: list[torch.Tensor]
    image_ids: list[list[int]]
    screens: torch.Tensor
    screen_size: tuple[int, int]
    """``(W, H)`` of every screenshot."""
    target_ids: list[list[int]]
    pad_id: int
    image_token_id: int
    video_token_id: int | None
    pixels: PixelEncoder

    def __len__(self) -> int:
        return len(self.prompt_ids)

    def batch(self, indices: Sequence[int]) -> tuple[dict[str, torch.Tensor], list[list[int]]]:
        """The left-padded model inputs of these prompts (as ``HFPolicy.build_inputs`` gives
        them) and their target ids, for :func:`~darwin.policies.hf.compute_response_logprobs`."""
        import torch

        from darwin.models.factory import mm_token_type_ids

        rows = [self.prompt_ids[i] for i in indices]
        longest = max(len(r) for r in rows)
        ids = torch.full((len(rows), longest), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), longest), dtype=torch.long)
        for k, r in enumerate(rows):
            ids[k, longest - len(r):] = r
            mask[k, longest - len(r):] = 1
        inputs = {
            "input_ids": ids,
            "attention_mask": mask,
            "mm_token_type_ids": mm_token_type_ids(ids, self.image_token_id, self.video_token_id),
        }
        image_rows = [j for i in indices for j in self.image_ids[i]]
        if image_rows:
            w, h = self.screen_size
            inputs["pixel_values"] = self.pixels.from_patches(self.screens[image_rows])
            inputs["image_grid_thw"] = self.pixels.grid(h, w, len(image_rows))
        return inputs, [self.target_ids[i] for i in indices]


def encode_demonstrations(vlm: VLM, demos: Sequence[Demonstration], *, chunk: int = 32) -> EncodedDemos:
    """Tokenize every prompt through the policy's own path (chat template + processor) once.

    Screenshots are stored once each as ``uint8``; :class:`PixelEncoder` rebuilds their
    ``pixel_values`` per batch and is checked bit-exact against the processor on every
    chunk here.
    """
    import torch

    from darwin.policies.hf import prompt_to_messages

    tok = vlm.tokenizer
    eos = tok.eos_token_id
    if eos is None:
        raise ValueError("the tokenizer has no EOS token; SFT targets must end with one")
    pixels = PixelEncoder(vlm.image_processor)
    screen_index: dict[bytes, int] = {}
    screens: list[np.ndarray] = []
    patches: list[torch.Tensor] = []
    prompt_ids: list[torch.Tensor] = []
    image_ids: list[list[int]] = []
    for start in range(0, len(demos), chunk):
        part = demos[start:start + chunk]
        batch = vlm.build_inputs([prompt_to_messages(d.prompt) for d in part])
        ids, mask = batch["input_ids"], batch["attention_mask"].bool()
        first_new = len(screens)
        flat_images: list[int] = []
        for k, d in enumerate(part):
            prompt_ids.append(ids[k][mask[k]].clone())
            rows = []
            for img in d.prompt.images:
                arr = np.ascontiguousarray(img, dtype=np.uint8)
                if screens and arr.shape != screens[0].shape:
                    raise ValueError(
                        f"screenshots of different sizes ({arr.shape[1]}x{arr.shape[0]} and "
                        f"{screens[0].shape[1]}x{screens[0].shape[0]}): record demonstrations at one size"
                    )
                key = hashlib.blake2b(arr.tobytes() + repr(arr.shape).encode(), digest_size=16).digest()
                if key not in screen_index:
                    screen_index[key] = len(screens)
                    screens.append(arr)
                rows.append(screen_index[key])
            image_ids.append(rows)
            flat_images.extend(rows)
        if flat_images:
            stacked = torch.from_numpy(np.stack([screens[j] for j in flat_images]))
            pixels.check(stacked, batch["pixel_values"], batch["image_grid_thw"])
        if len(screens) > first_new:
            patches.append(pixels.to_patches(torch.from_numpy(np.stack(screens[first_new:]))))
        logger.debug("encoded %d prompts (%d new screens)", len(part), len(screens) - first_new)
    targets = [tok.encode(d.target, add_special_tokens=False) + [int(eos)] for d in demos]
    proc = vlm.processor
    screen_tensor = torch.cat(patches) if patches else torch.zeros((0, 0, 3, 0), dtype=torch.uint8)
    size = (int(screens[0].shape[1]), int(screens[0].shape[0])) if screens else (0, 0)
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos
    return EncodedDemos(
        prompt_ids=prompt_ids, image_ids=image_ids, screens=screen_tensor, screen_size=size, target_ids=targets,
        pad_id=int(pad), image_token_id=int(proc.image_token_id),
        video_token_id=getattr(proc, "video_token_id", None), pixels=pixels,
    )


# ======================================================================================
# Training
# ======================================================================================
@dataclass(frozen=True)
class StepStats:
    """One optimizer step, for progress displays."""

    step: int
    steps: int
    loss: float
    lr: float
    tokens_per_s: float
    """Prompt and target tokens processed per second (this step)."""
    elapsed_s: float


@dataclass(frozen=True)
class HeldoutMetrics:
    """Teacher-forced (and optionally greedy) metrics on held-out demonstrations."""

    step: int
    loss: float
    """Mean target-token negative log-likelihood (EOS included)."""
    sequence_prob: float
    """Mean probability that a temperature-1 sample reproduces the oracle's action text exactly."""
    greedy_match: float | None = None
    """Share of prompts whose greedy output is exactly the oracle's action text."""
    greedy_action_match: float | None = None
    """Share whose greedy output parses to the same action (coordinates on the agent's grid)."""


@dataclass
class SFTResult:
    """What :func:`train_sft` produced."""

    vlm: VLM
    agent: TinyAgent
    config: SFTConfig
    metadata: dict[str, Any]
    path: Path | None = None
    history: list[HeldoutMetrics] = field(default_factory=list)


def lr_at(step: int, config: SFTConfig) -> float:
    """Learning rate of optimizer step ``step`` (0-based): linear warm-up, cosine to ``min_lr_ratio``.

    >>> cfg = SFTConfig(steps=101, warmup_steps=10, lr=1.0, min_lr_ratio=0.1)
    >>> [round(lr_at(s, cfg), 3) for s in (0, 9, 10, 55, 100)]
    [0.1, 1.0, 1.0, 0.55, 0.1]
    """
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    span = max(config.steps - 1 - config.warmup_steps, 1)
    progress = min(max(step - config.warmup_steps, 0) / span, 1.0)
    floor = config.min_lr_ratio
    return config.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _batches(n: int, batch_size: int, generator: torch.Generator) -> Iterator[list[int]]:
    """Endless shuffled epochs over ``range(n)`` in batches (the last partial batch of an
    epoch is topped up from the next epoch so every batch has ``batch_size`` rows)."""
    import torch

    pending: list[int] = []
    while True:
        while len(pending) < batch_size:
            pending.extend(torch.randperm(n, generator=generator).tolist())
        yield pending[:batch_size]
        pending = pending[batch_size:]


def heldout_metrics(
    vlm: VLM,
    encoded: EncodedDemos,
    demos: Sequence[Demonstration],
    agent: TinyAgent,
    *,
    step: int,
    greedy: bool = False,
    batch_size: int = 32,
) -> HeldoutMetrics:
    """Held-out loss and sequence probability (teacher forced); greedy matches if asked."""
    import torch

    from darwin.policies.hf import compute_response_logprobs, forbidden_mask

    model = vlm.model
    was_training = model.training
    model.eval()
    forbidden = forbidden_mask(vlm.forbidden_token_ids(), vlm.vocab_size)
    nll, tokens, seq_probs = 0.0, 0, []
    try:
        with torch.inference_mode():
            for start in range(0, len(encoded), batch_size):
                idx = list(range(start, min(start + batch_size, len(encoded))))
                inputs, targets = encoded.batch(idx)
                lp, mask = compute_response_logprobs(model, inputs, targets, forbidden=forbidden, temperature=1.0)
                nll -= float(lp.sum())
                tokens += int(mask.sum())
                seq_probs.extend(torch.exp(lp.sum(-1)).tolist())
        greedy_match = action_match = None
        if greedy and demos:
            texts = greedy_outputs(vlm, [d.prompt for d in demos], max_new_tokens=max(len(t) for t in encoded.target_ids) + 8)
            greedy_match = sum(t == d.target for t, d in zip(texts, demos, strict=True)) / len(demos)
            action_match = sum(
                agent.parse(t, d.observation).action == d.action for t, d in zip(texts, demos, strict=True)
            ) / len(demos)
    finally:
        model.train(was_training)
    return HeldoutMetrics(
        step=step, loss=nll / max(tokens, 1), sequence_prob=float(np.mean(seq_probs)) if seq_probs else 0.0,
        greedy_match=greedy_match, greedy_action_match=action_match,
    )


def greedy_outputs(vlm: VLM, prompts: Sequence[Prompt], *, max_new_tokens: int = 64, batch_size: int = 32) -> list[str]:
    """Greedy responses of the model through :class:`~darwin.policies.hf.HFPolicy` (the rollout path)."""
    from darwin.policies.hf import HFPolicy, HFPolicyConfig

    out: list[str] = []
    with HFPolicy(vlm, HFPolicyConfig(temperature=0.0, max_new_tokens=max_new_tokens)) as policy:
        for start in range(0, len(prompts), batch_size):
            out.extend(g.text for g in policy.generate_sync(list(prompts[start:start + batch_size])))
    return out


def train_sft(
    config: SFTConfig | None = None,
    out: str | os.PathLike[str] | None = None,
    *,
    on_step: Callable[[StepStats], None] | None = None,
    on_heldout: Callable[[HeldoutMetrics], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> SFTResult:
    """Collect demonstrations, behaviour-clone a fresh tiny model, save it to ``out`` (if given).

    The loss is the mean negative log-likelihood of the target tokens (the action text and
    EOS) under the *masked* distribution the policy samples from: log-probs come from
    :func:`~darwin.policies.hf.compute_response_logprobs` with the policy's forbidden-token
    mask at temperature 1, on inputs built exactly as :class:`~darwin.policies.hf.HFPolicy`
    builds them. Training stops after ``config.steps`` optimizer steps, or earlier when the
    held-out ``stop_metric`` reaches ``stop_threshold``. Deterministic for a given config
    and thread count; global RNGs are never touched.
    """
    import torch

    from darwin.models.factory import build_tiny_vlm
    from darwin.policies.hf import compute_response_logprobs, forbidden_mask

    config = config if config is not None else SFTConfig()
    phase = on_phase or (lambda name: None)
    timings: dict[str, float] = {}
    started = time.perf_counter()
    cpu_started = time.process_time()
    load_started = _load_average()
    with _torch_threads(config.threads):
        phase("demonstrations")
        t = time.perf_counter()
        demos, stats = collect_demonstrations(config)
        held, held_stats = collect_demonstrations(config, heldout=True)
        if not demos:
            raise ValueError("no demonstrations were collected: raise episodes")
        timings["demonstrations_s"] = time.perf_counter() - t

        phase("encoding")
        t = time.perf_counter()
        vlm = build_tiny_vlm(config.resolved_model, seed=config.model_seed)
        agent = config.make_agent()
        encoded = encode_demonstrations(vlm, demos)
        encoded_held = encode_demonstrations(vlm, held) if held else None
        timings["encoding_s"] = time.perf_counter() - t
        target_lengths = [len(x) for x in encoded.target_ids]
        stats = DemoStats(
            **{**stats.__dict__, "unique_screens": int(encoded.screens.shape[0]),
               "target_tokens": sum(target_lengths), "max_target_tokens": max(target_lengths),
               "mean_prompt_tokens": float(np.mean([len(p) for p in encoded.prompt_ids]))}
        )
        logger.info(
            "%d demonstration steps from %d episodes (%d unique screens, %.0f prompt tokens on average)",
            stats.steps, stats.episodes, stats.unique_screens, stats.mean_prompt_tokens,
        )

        phase("training")
        t = time.perf_counter()
        model = vlm.model
        model.train()
        decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
        no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=config.lr, betas=(0.9, 0.95), eps=1e-8,
        )
        forbidden = forbidden_mask(vlm.forbidden_token_ids(), vlm.vocab_size)
        generator = torch.Generator().manual_seed(config.seed)
        batches = _batches(len(encoded), config.batch_size, generator)
        history: list[HeldoutMetrics] = []
        losses: list[float] = []
        stopped_early = False
        steps_run = 0
        for step in range(config.steps):
            tick = time.perf_counter()
            lr = lr_at(step, config)
            for group in optimizer.param_groups:
                group["lr"] = lr
            inputs, targets = encoded.batch(next(batches))
            logprobs, mask = compute_response_logprobs(model, inputs, targets, forbidden=forbidden, temperature=1.0)
            loss = -logprobs.sum() / mask.sum().clamp(min=1)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if config.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            steps_run = step + 1
            value = float(loss.detach())
            if not math.isfinite(value):
                raise FloatingPointError(f"SFT loss became {value} at step {steps_run}: lower lr")
            losses.append(value)
            if on_step is not None:
                n_tokens = int(inputs["attention_mask"].sum()) + int(mask.sum())
                now = time.perf_counter()
                on_step(StepStats(steps_run, config.steps, value, lr, n_tokens / max(now - tick, 1e-9), now - started))
            due = config.eval_every and steps_run % config.eval_every == 0 and steps_run < config.steps
            if due and encoded_held is not None:
                metrics = heldout_metrics(
                    vlm, encoded_held, held, agent, step=steps_run, greedy=config.stop_metric == "greedy_match"
                )
                history.append(metrics)
                logger.info("step %d held-out: %s", steps_run, metrics)
                if on_heldout is not None:
                    on_heldout(metrics)
                value_now = metrics.sequence_prob if config.stop_metric == "sequence_prob" else metrics.greedy_match
                if config.stop_threshold is not None and value_now is not None and value_now >= config.stop_threshold:
                    logger.info(
                        "stopping short of mastery at step %d: held-out %s %.3f >= %.3f",
                        steps_run, config.stop_metric, value_now, config.stop_threshold,
                    )
                    stopped_early = True
                    break
        timings["training_s"] = time.perf_counter() - t
        model.eval()

        final: HeldoutMetrics | None = None
        if encoded_held is not None:
            phase("held-out")
            final = heldout_metrics(vlm, encoded_held, held, agent, step=steps_run, greedy=True)
            history.append(final)
            if on_heldout is not None:
                on_heldout(final)
    timings["total_s"] = time.perf_counter() - started
    timings["process_cpu_s"] = time.process_time() - cpu_started
    tail = losses[-min(20, len(losses)):]
    metadata: dict[str, Any] = {
        "format_version": SFT_FORMAT_VERSION,
        "config_hash": config.config_hash(),
        "config": config.model_dump(mode="json"),
        "model": {"config": config.resolved_model.model_dump(mode="json"), "parameters": vlm.num_parameters()},
        "data": {"train": _stats_json(stats), "heldout": _stats_json(held_stats)},
        "training": {
            "steps_run": steps_run,
            "stopped_early": stopped_early,
            "first_loss": losses[0],
            "final_loss": float(np.mean(tail)),
            "loss_curve": [round(v, 5) for v in losses[:: max(1, len(losses) // 100)]],
            "heldout": [h.__dict__ for h in history],
        },
        "wall_time_s": {k: round(v, 2) for k, v in timings.items()},
        "threads": config.threads,
        "machine": {"cpu_count": os.cpu_count(), "load_average_1m": [load_started, _load_average()]},
        "versions": _versions(),
    }
    result = SFTResult(vlm=vlm, agent=agent, config=config, metadata=metadata, history=history)
    if out is not None:
        result.path = save_warm_start(result, out)
    logger.info("SFT done in %.1fs (final loss %.4f)", timings["total_s"], metadata["training"]["final_loss"])
    return result


def _load_average() -> float | None:
    """The 1-minute load average (other processes sharing the cores skew timings), if known."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _stats_json(stats: DemoStats) -> dict[str, Any]:
    return dict(stats.__dict__)


def _versions() -> dict[str, str]:
    import platform
    from importlib import metadata

    import torch
    import transformers

    try:
        darwin_version = metadata.version("darwin-mobile-agent")
    except metadata.PackageNotFoundError:
        darwin_version = "not installed"
    return {"darwin": darwin_version, "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version()}


# ======================================================================================
# Checkpoints
# ======================================================================================
def recommended_max_new_tokens(max_target_tokens: int) -> int:
    """A response cap for the trained model: twice the longest target, at least 32."""
    return max(32, 2 * max_target_tokens)


def save_warm_start(result: SFTResult, out: str | os.PathLike[str]) -> Path:
    """Write the checkpoint directory (see docs/sft.md for the layout)."""
    path = Path(out)
    result.vlm.save_pretrained(path)
    config = result.config
    agent_record = {
        "format_version": SFT_FORMAT_VERSION,
        "kind": "tiny",
        "agent": config.agent.model_dump(mode="json"),
        "memory": config.memory.model_dump(mode="json"),
        "observation_size": list(config.observation_size),
        "max_new_tokens": recommended_max_new_tokens(result.metadata["data"]["train"]["max_target_tokens"]),
    }
    _write_json(path / AGENT_FILE, agent_record)
    _write_json(path / SFT_FILE, result.metadata)
    logger.info("saved warm-start checkpoint to %s", path)
    return path


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


@dataclass
class WarmStart:
    """A loaded warm-start checkpoint: the model and how to run it."""

    path: Path
    vlm: VLM
    agent_config: TinyAgentConfig
    memory_config: SlidingWindowConfig
    observation_size: tuple[int, int]
    max_new_tokens: int
    metadata: dict[str, Any]

    def make_agent(self) -> TinyAgent:
        """A fresh agent with the checkpoint's prompt format and memory."""
        return TinyAgent(self.agent_config, SlidingWindowMemory(self.memory_config))


def load_warm_start(path: str | os.PathLike[str]) -> WarmStart:
    """Load a checkpoint written by :func:`train_sft` / ``darwin sft``."""
    from darwin.models.factory import load_tiny_vlm

    src = Path(path)
    record_file = src / AGENT_FILE
    if not src.is_dir() or not record_file.is_file():
        raise FileNotFoundError(f"no checkpoint at {src}; run `darwin sft --out {src}` first")
    try:
        record = json.loads(record_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{record_file}: not valid JSON ({exc})") from exc
    if record.get("format_version") != SFT_FORMAT_VERSION or record.get("kind") != "tiny":
        raise ValueError(
            f"{record_file}: expected a tiny agent record of format_version {SFT_FORMAT_VERSION}, got "
            f"kind={record.get('kind')!r} format_version={record.get('format_version')!r}; retrain with `darwin sft`"
        )
    metadata_file = src / SFT_FILE
    metadata = json.loads(metadata_file.read_text(encoding="utf-8")) if metadata_file.is_file() else {}
    vlm = load_tiny_vlm(src)
    w, h = (int(v) for v in record["observation_size"])
    tiny = vlm.tiny_config
    if tiny is not None and (tiny.screen_width, tiny.screen_height) != (w, h):
        raise ValueError(f"{record_file}: observation_size {w}x{h} differs from the model's screen "
                         f"{tiny.screen_width}x{tiny.screen_height}")
    return WarmStart(
        path=src, vlm=vlm, agent_config=TinyAgentConfig.model_validate(record["agent"]),
        memory_config=SlidingWindowConfig.model_validate(record["memory"]), observation_size=(w, h),
        max_new_tokens=int(record.get("max_new_tokens", 64)), metadata=metadata,
    )


def ensure_warm_start(
    cache_dir: str | os.PathLike[str],
    config: SFTConfig | None = None,
    **train_kwargs: Any,
) -> Path:
    """The checkpoint for ``config`` under ``cache_dir``: cached if one with the same config
    hash exists, else trained now (:func:`train_sft`) and stored atomically.

    The directory is ``cache_dir/warm-start-<config_hash>``; a finished checkpoint always
    has ``darwin_sft.json`` (written last). Concurrent callers may both train; the first
    to finish wins and the other's copy is discarded.
    """
    config = config if config is not None else SFTConfig()
    root = Path(cache_dir)
    final = root / f"warm-start-{config.config_hash()}"
    if (final / SFT_FILE).is_file() and (final / AGENT_FILE).is_file():
        logger.info("using cached warm start %s", final)
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        train_sft(config, tmp, **train_kwargs)
        if final.exists():
            if (final / SFT_FILE).is_file():
                logger.info("another process cached %s first; discarding this copy", final)
                return final
            shutil.rmtree(final)  # an unfinished leftover
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


# ======================================================================================
# Acting with a checkpoint
# ======================================================================================
class TinyActorPool:
    """Model actors for N phones sharing one :class:`~darwin.policies.hf.HFPolicy` behind one
    :class:`~darwin.policies.batcher.DynamicBatcher`, so the phones' steps batch together.

    ``pool(i)`` is phone ``i``'s :class:`~darwin.agents.base.ModelActor` (its own agent,
    same checkpoint format; its memory from ``make_memory`` if given, else the checkpoint's). Sampling is from the full masked distribution at
    ``temperature`` (1.0: what RL samples; 0: greedy). Close with :meth:`aclose` inside the
    event loop that used it.
    """

    def __init__(
        self,
        checkpoint: str | os.PathLike[str] | WarmStart,
        *,
        temperature: float = 1.0,
        seed: int = 0,
        max_batch: int = 8,
        max_wait: float = 0.05,
        max_new_tokens: int | None = None,
        make_memory: Callable[[], Memory] | None = None,
        make_policy: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        from darwin.policies.batcher import BatcherConfig, DynamicBatcher
        from darwin.policies.hf import HFPolicy, HFPolicyConfig

        self.warm = checkpoint if isinstance(checkpoint, WarmStart) else load_warm_start(checkpoint)
        sampling = HFPolicyConfig(
            temperature=temperature, seed=seed,
            max_new_tokens=max_new_tokens if max_new_tokens is not None else self.warm.max_new_tokens,
        )
        # make_policy(vlm, sampling) builds another backend on the warm start (e.g. a ServerPolicy)
        self.policy: HFPolicy = HFPolicy(self.warm.vlm, sampling) if make_policy is None else make_policy(self.warm.vlm, sampling)
        self.batcher: DynamicBatcher = DynamicBatcher(
            self.policy, BatcherConfig(min_batch=max_batch, max_batch=max_batch, max_wait=max_wait)
        )
        self.make_memory = make_memory

    @property
    def observation_size(self) -> tuple[int, int]:
        """The screenshot size the checkpoint was trained on."""
        return self.warm.observation_size

    def __call__(self, index: int) -> ModelActor:
        if self.make_memory is None:
            return ModelActor(self.warm.make_agent(), self.batcher)
        return ModelActor(TinyAgent(self.warm.agent_config, self.make_memory()), self.batcher)

    async def aclose(self) -> None:
        """Close the batcher and the policy's worker thread."""
        await self.batcher.close()
        self.policy.close()


def parse_failures(transitions: Sequence[Transition]) -> int:
    """Steps whose model output did not parse (for reports)."""
    return sum(isinstance(t.decision.parse_error, ParseError) for t in transitions)


async def evaluate_warm_start(
    checkpoint: str | os.PathLike[str] | WarmStart,
    tasks: Sequence[str] = ("base8",),
    *,
    phones: int = 8,
    episodes: int = 3,
    temperature: float = 1.0,
    seed: int = 0,
    perturbation: PerturbationConfig | None = None,
    on_episode: Callable[[Any], None] | None = None,
) -> EvalReport:
    """Success of a checkpoint on SimPhones seeded ``seed, seed+1, ...``, as ``darwin eval
    --agent tiny:<checkpoint>`` measures it (sampled at ``temperature``; 0 = greedy)."""
    from darwin.envs.sim.env import SimPhoneEnv
    from darwin.evaluate import evaluate
    from darwin.tasks import resolve_tasks
    from darwin.workflows.step import LifecycleWorkflow, StepConfig

    chosen = resolve_tasks(tasks)
    pool = TinyActorPool(checkpoint, temperature=temperature, seed=seed, max_batch=min(phones, 64))
    envs = [
        SimPhoneEnv(seed=seed + i, perturbation=perturbation or PerturbationConfig(), name=f"sim-{seed + i}")
        for i in range(phones)
    ]
    workflow = LifecycleWorkflow(config=StepConfig(observation_size=pool.observation_size))
    try:
        return await evaluate(chosen, envs, pool, episodes, workflow, on_episode=on_episode)
    finally:
        await pool.aclose()


__all__ = [
    "AGENT_FILE",
    "SFT_FILE",
    "DemoStats",
    "Demonstration",
    "EncodedDemos",
    "HeldoutMetrics",
    "PixelEncoder",
    "SFTConfig",
    "SFTResult",
    "StepStats",
    "TinyActorPool",
    "WarmStart",
    "collect_demonstrations",
    "encode_demonstrations",
    "ensure_warm_start",
    "evaluate_warm_start",
    "greedy_outputs",
    "heldout_metrics",
    "load_warm_start",
    "lr_at",
    "parse_failures",
    "recommended_max_new_tokens",
    "save_warm_start",
    "train_sft",
]
