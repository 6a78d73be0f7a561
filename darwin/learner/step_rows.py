"""From completed trajectories to step rows and model batches.

The learner's data unit is one *step row*: the prompt an agent built at step ``t``
(``Decision.prompt``), the response tokens the policy sampled (``Generation.response_ids``)
with their behaviour log-probs, the step reward and how the trajectory ended.

:func:`collect_step_rows` checks the trajectories and turns them into :class:`StepRow` s;
:func:`preprocess_rows` builds each row's model inputs once per update, from the prompt ids
and screenshots recorded at sampling time where that reproduces the policy's own processor
path (:meth:`HFPolicy.build_inputs`, or the same code on a copy of the processor:
:func:`processor_inputs`), else through it, checked against the recorded ids;
:func:`attach_positions` and :func:`attach_image_features` add what every pass would
otherwise recompute (M-RoPE positions; a frozen tower's image features); :func:`collate`
left-pads any subset of rows into a batch identical to ``policy.build_inputs(prompts)`` of
those rows (tested), so micro-batches of shuffled rows never re-run the image processor.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from transformers.processing_utils import ProcessorMixin

from darwin.models.factory import build_inputs
from darwin.models.pixels import PixelEncoder
from darwin.models.scoring import prompt_to_messages, rope_index
from darwin.types import ACTOR, Branch, Phase, Prompt, TerminationReason, Trajectory, Transition

__all__ = [
    "BuildInputs",
    "HasBuildInputs",
    "LearnerDataError",
    "RowInputs",
    "StepRow",
    "ImageFeatureCache",
    "StepRows",
    "actor_skip_reason",
    "attach_image_features",
    "attach_positions",
    "collate",
    "collect_step_rows",
    "observation_anchor",
    "unverified",
    "preprocess_rows",
    "processor_inputs",
]


class LearnerDataError(ValueError):
    """Trajectories the learner cannot train on; the message names the episode, step and fix."""


@dataclass(frozen=True)
class StepRow:
    """One agent step as the learner sees it.

    Attributes:
        episode_id: the trajectory's id (GAE chains the rows of one episode).
        step: index of the step inside its trajectory, ``0..len-1``.
        prompt: what the policy was asked (``Decision.prompt``).
        prompt_ids: the prompt's token ids at sampling time (``Generation.prompt_ids``; may
            be empty for backends that do not record them).
        response_ids: ``(n,)`` sampled token ids, ``n >= 1``.
        old_logprobs: ``(n,)`` behaviour log-probs of ``response_ids``.
        reward: the step reward ``r_t`` as the workflow gave it (the verdict's reward on the last
            step); the learner shapes it (:func:`darwin.learner.update_batch.shaped_rewards`).
        truncated: the trajectory was cut short (infrastructure; the step budget unless it counts as terminal).
        policy_version: version of the weights that sampled the response.
        group: group of the trajectory (``Trajectory.group`` in group mode, else the task id,
            unless ``group_ids`` are given).
        task_id: the trajectory's task.
        parse_error: the response did not parse (the step was a no-op).
        anchor: hash of the observation the agent saw at this step (screenshot bytes and
            goal): GiGPO's anchor state; equal on SimPhone whenever the screen is equal.
        origin: the transition's phase and :attr:`~darwin.types.Transition.step` (where the run
            database stores it; ``step`` counts the learner's rows only).
        fork: branching rollouts: the phone state this step acted from when other rows of the
            batch acted from exactly the same one (:attr:`darwin.types.Branch.fork`: an
            episode's step and the first steps of its continuations from there); ``""``
            otherwise.
    """

    episode_id: str
    step: int
    prompt: Prompt
    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    old_logprobs: tuple[float, ...]
    reward: float
    truncated: bool
    policy_version: int
    group: Hashable
    task_id: str = ""
    parse_error: bool = False
    anchor: str = ""
    fork: str = ""
    origin: tuple[Phase, int] = (Phase.EXECUTION, 0)


def observation_anchor(screenshot: np.ndarray, goal: str) -> str:
    """GiGPO's anchor state of one step: a hash of the pixels and goal the agent saw.

    Works on any phone (no UI tree needed) and is exact on SimPhone, whose rendering is
    deterministic::

        >>> import numpy as np
        >>> a = observation_anchor(np.zeros((2, 2, 3), np.uint8), "open Clock")
        >>> a == observation_anchor(np.zeros((2, 2, 3), np.uint8), "open Clock"), len(a)
        (True, 16)
    """
    digest = hashlib.blake2b(digest_size=8)
    digest.update(np.ascontiguousarray(screenshot).tobytes())
    digest.update(str(screenshot.shape).encode())
    digest.update(goal.encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class StepRows:
    """Result of :func:`collect_step_rows`: the rows plus what was left out."""

    rows: list[StepRow]
    trajectories: list[Trajectory]
    """The trajectories the rows come from (after dropping)."""
    empty_trajectories: int
    """Trajectories without any step (e.g. a phone failed before the first screenshot)."""
    dropped_infra: int
    """Infrastructure-truncated trajectories left out (``infra_truncation='drop'``)."""
    dropped_unverified: int = 0
    """Trajectories whose last phase has no verdict (the verifier could not decide, or the
    episode ended in an error): never trained on, neither as a success nor as a failure."""


def unverified(trajectory: Trajectory) -> bool:
    """True when the verifier gave the trajectory's last played phase no verdict (``None``)
    although the phone did not fail: a judge that could not decide, an episode ended by an
    error. Infrastructure truncations are not counted here (``infra_truncation`` decides)."""
    if trajectory.termination is None or trajectory.termination.reason == TerminationReason.INFRA_TRUNCATED:
        return False
    if not trajectory.phase_success or not trajectory.transitions:
        return False  # nothing was verified yet or nothing was played (e.g. hand-built, already done)
    return list(trajectory.phase_success.values())[-1] is None


INFRA_TRUNCATIONS_ONLY = "infra_truncations_only"
"""``actor_skip_reason``: every trajectory left to train on ended in an infrastructure truncation."""
NO_VERDICT = "no_verdict"
"""``actor_skip_reason``: nothing is left to train on (every trajectory unverified or without a step)."""


def actor_skip_reason(trajectories: Sequence[Trajectory]) -> str | None:
    """Why an update on ``trajectories`` must not train (``LearnerConfig.infra_only_updates =
    'skip'``), or None when it may.

    The update would train on the trajectories that played a step and are not
    :func:`unverified`. When every one of them ended in an infrastructure truncation
    (:data:`INFRA_TRUNCATIONS_ONLY`), or none is left (:data:`NO_VERDICT`), the batch holds no
    verdict: its rewards say how the phones failed, not how the agent did. A batch with an
    incomplete trajectory gives None, so that :func:`collect_step_rows` names the problem::

        >>> from darwin.types import Task, Termination, VerifierSpec
        >>> task = Task(id="t", instruction="i", app="a", verifier=VerifierSpec(predicate="p"))
        >>> cut = Trajectory(episode_id="e", task=task, termination=Termination(TerminationReason.INFRA_TRUNCATED, "hang"))
        >>> actor_skip_reason([cut])
        'no_verdict'
    """
    if any(t.termination is None for t in trajectories):
        return None
    left = [t for t in trajectories if t.transitions and not unverified(t)]
    if any(t.termination is not None and t.termination.reason != TerminationReason.INFRA_TRUNCATED for t in left):
        return None
    return INFRA_TRUNCATIONS_ONLY if left else NO_VERDICT


def collect_step_rows(
    trajectories: Sequence[Trajectory],
    *,
    group_ids: Sequence[Hashable] | None = None,
    drop_infra_truncated: bool = False,
    step_budget_terminal: bool = False,
    agent: str = ACTOR,
) -> StepRows:
    """Check completed trajectories and flatten them into step rows (time order per episode).

    Every step of ``agent`` in a kept trajectory becomes a row, parse errors included (their
    generation exists; the step was a no-op). Steps of
    other agents (a planner's sub-goals, a reflector's notes: :attr:`Transition.agent`) stay
    out of the loss; their rewards are credited to ``agent``'s latest step before them (its
    first step when none precedes), so the episode's return is unchanged. Rows are numbered
    ``0..n-1`` over ``agent``'s steps. Trajectories left :func:`unverified` are dropped and
    counted. Raises
    :class:`LearnerDataError` for an incomplete trajectory, a repeated episode id, a step
    without a generation (scripted actors), a generation without prompt, response tokens or
    matching finite log-probs.

    Args:
        trajectories: completed trajectories (``ReplayBuffer.take_completed()``).
        group_ids: one group id per trajectory; default: ``Trajectory.group``, else the task id.
        drop_infra_truncated: leave out trajectories ended by an infrastructure failure.
        step_budget_terminal: an episode that ran out of steps ends as a failure (its rows are
            not ``truncated``, so nothing is bootstrapped after it); only infrastructure cuts
            stay truncations (``LearnerConfig.step_budget='terminal'``).
        agent: the agent trained (:attr:`darwin.types.Transition.agent`; default ``"actor"``).
    """
    if group_ids is not None and len(group_ids) != len(trajectories):
        raise LearnerDataError(f"group_ids has {len(group_ids)} entries for {len(trajectories)} trajectories")
    rows: list[StepRow] = []
    kept: list[Trajectory] = []
    seen: set[str] = set()
    empty = dropped = unscored = 0
    # (episode, step) pairs that continuations of this batch branched from
    branched = {(t.branch.parent, t.branch.step) for t in trajectories if t.branch is not None}
    for index, trajectory in enumerate(trajectories):
        eid = trajectory.episode_id
        if trajectory.termination is None:
            raise LearnerDataError(
                f"episode {eid!r} is not completed (no termination); train only on completed "
                "trajectories, e.g. ReplayBuffer.take_completed()"
            )
        if eid in seen:
            raise LearnerDataError(
                f"episode {eid!r} appears twice in the update batch; each trajectory is trained once"
            )
        seen.add(eid)
        if drop_infra_truncated and trajectory.termination.reason == TerminationReason.INFRA_TRUNCATED:
            dropped += 1
            continue
        if unverified(trajectory):
            unscored += 1
            continue
        for position, transition in enumerate(trajectory.transitions):
            if transition.step != position:
                raise LearnerDataError(
                    f"episode {eid!r} step {position}: transition.step is {transition.step}; a "
                    "trajectory's transitions must be its steps 0, 1, 2, ... in order"
                )
        own, rewards = _own_steps(trajectory.transitions, agent)
        if not own:
            empty += 1
            continue
        truncated = trajectory.termination.truncated and not (
            step_budget_terminal and trajectory.termination.reason == TerminationReason.STEP_BUDGET
        )
        if group_ids is not None:
            group = group_ids[index]
        else:
            group = trajectory.group if trajectory.group is not None else trajectory.task.id
        for row_step, (transition, reward) in enumerate(zip(own, rewards, strict=True)):
            where = f"episode {eid!r} step {transition.step}"
            fork = ""
            if row_step == 0 and trajectory.branch is not None:
                fork = trajectory.branch.fork
            elif (eid, row_step) in branched:
                fork = Branch(eid, row_step).fork
            decision = transition.decision
            gen = decision.generation
            if gen is None:
                raise LearnerDataError(
                    f"{where} has no generation (a scripted actor's decision?): the learner trains "
                    "on model decisions only; use ModelActor for training episodes or filter "
                    "scripted episodes out before update()"
                )
            if decision.prompt is None:
                raise LearnerDataError(
                    f"{where} has a generation but no prompt: the actor must record "
                    "Decision(prompt=...) so the learner can re-score the response"
                )
            if not gen.response_ids:
                raise LearnerDataError(
                    f"{where}: the generation has no response token ids (a hosted model?); "
                    "train with a local policy that records ids and log-probs (HFPolicy)"
                )
            if len(gen.response_logprobs) != len(gen.response_ids):
                raise LearnerDataError(
                    f"{where}: {len(gen.response_ids)} response ids but "
                    f"{len(gen.response_logprobs)} log-probs; they must pair up one to one"
                )
            if not all(math.isfinite(x) for x in gen.response_logprobs):
                raise LearnerDataError(f"{where}: non-finite behaviour log-prob (a forbidden token was sampled?)")
            if not math.isfinite(reward):
                raise LearnerDataError(f"{where}: reward {reward} is not finite")
            rows.append(
                StepRow(
                    episode_id=eid,
                    step=row_step,
                    prompt=decision.prompt,
                    prompt_ids=tuple(gen.prompt_ids),
                    response_ids=tuple(int(t) for t in gen.response_ids),
                    old_logprobs=tuple(float(x) for x in gen.response_logprobs),
                    reward=float(reward),
                    truncated=truncated,
                    policy_version=int(gen.policy_version),
                    group=group,
                    task_id=trajectory.task.id,
                    parse_error=decision.parse_error is not None,
                    anchor=observation_anchor(transition.observation.screenshot, transition.observation.goal),
                    fork=fork,
                    origin=(transition.phase, transition.step),
                )
            )
        kept.append(trajectory)
    return StepRows(
        rows=rows, trajectories=kept, empty_trajectories=empty, dropped_infra=dropped, dropped_unverified=unscored
    )


def _own_steps(transitions: Sequence[Transition], agent: str) -> tuple[list[Transition], list[float]]:
    """``agent``'s transitions and their rewards with the other agents' rewards folded in.

    >>> from darwin.types import Decision, Observation, Transition
    >>> import numpy as np
    >>> obs = Observation(screenshot=np.zeros((2, 2, 3), np.uint8), goal="g", device_size=(2, 2))
    >>> def t(step, who, r):
    ...     return Transition("e", "task", step, obs.phase, obs, Decision(action=None, message="m"), r, agent=who)
    >>> own, rewards = _own_steps([t(0, "planner", 0.5), t(1, "actor", 0.0), t(2, "actor", 0.0),
    ...                            t(3, "verifier", 1.0)], "actor")
    >>> [x.step for x in own], rewards
    ([1, 2], [0.5, 1.0])
    """
    own: list[Transition] = []
    rewards: list[float] = []
    pending = 0.0  # rewards of other agents' turns before the first own step
    for transition in transitions:
        if transition.agent == agent:
            own.append(transition)
            rewards.append(transition.reward + pending)
            pending = 0.0
        elif rewards:
            rewards[-1] += transition.reward
        else:
            pending += transition.reward
    return own, rewards


@dataclass(frozen=True)
class RowInputs:
    """One prompt's model inputs without padding (a slice of the processor's batch output).

    Attributes:
        input_ids: ``(L,)`` prompt token ids (image placeholders expanded).
        mm_token_type_ids: ``(L,)`` 0 text, 1 image placeholder, 2 video placeholder.
        pixel_values: ``(patches, C*T*P*P)`` the prompt's image patches, or ``None`` (no
            image, or the features are in ``image_embeds``).
        image_grid_thw: ``(images, 3)`` the grid of each image, or ``None``.
        position_ids: ``(3, L)`` the prompt's M-RoPE positions, computed once per update
            (:func:`attach_positions`), or ``None`` (each forward computes them).
        image_embeds: ``(image tokens, H)`` the vision tower's features of the prompt's
            images, computed once per update under a frozen tower
            (:func:`attach_image_features`), or ``None``.
    """

    input_ids: torch.Tensor
    mm_token_type_ids: torch.Tensor
    pixel_values: torch.Tensor | None
    image_grid_thw: torch.Tensor | None
    position_ids: torch.Tensor | None = None
    image_embeds: torch.Tensor | None = None


BuildInputs = Callable[[Sequence[Prompt]], Mapping[str, torch.Tensor]]
"""Prompts -> a left-padded model batch, e.g. :meth:`HFPolicy.build_inputs`."""


@runtime_checkable
class HasBuildInputs(Protocol):
    """An object with a :data:`BuildInputs` method, e.g. an :class:`~darwin.policies.hf.HFPolicy`."""

    def build_inputs(self, prompts: Sequence[Prompt]) -> Mapping[str, torch.Tensor]: ...


def processor_inputs(processor: ProcessorMixin) -> BuildInputs:
    """:meth:`HFPolicy.build_inputs` on another processor object (the same code path).

    The learner tokenizes with its own copy of the policy's processor: a fast tokenizer
    changes its padding state on every call and must not be shared with the policy's
    sampling thread.
    """

    def build(prompts: Sequence[Prompt]) -> Mapping[str, torch.Tensor]:
        if not prompts:
            raise ValueError("build_inputs needs at least one prompt")
        return build_inputs(processor, [prompt_to_messages(p) for p in prompts])

    return build


def preprocess_rows(
    build: BuildInputs | HasBuildInputs,
    rows: Sequence[StepRow],
    *,
    chunk: int = 16,
    pixels: PixelEncoder | None = None,
    image_token_id: int | None = None,
) -> list[RowInputs]:
    """Every row's model inputs, split per row.

    The first chunk always goes through the policy's processor path (``policy.build_inputs``
    or a :data:`BuildInputs` such as :func:`processor_inputs`). With ``pixels`` and
    ``image_token_id``, the other rows are then built from what the sampler recorded: the
    prompt ids (``Generation.prompt_ids``) and the screenshots through the
    :class:`~darwin.models.pixels.PixelEncoder`, without re-running the chat template or the
    image processor. This fast path is taken only when it reproduces the processor's inputs
    of the first chunk exactly; otherwise (screenshots the processor resizes, rows without
    recorded ids) every chunk goes through the processor.

    Raises :class:`LearnerDataError` when a rebuilt prompt differs from the ids recorded at
    sampling time: the learner would train on a different context than the one the
    response was sampled from (another processor or template).
    """
    make = build.build_inputs if isinstance(build, HasBuildInputs) else build  # a policy, or a BuildInputs function
    out = _processor_rows(make, rows[:chunk])
    rest = rows[chunk:]
    if not rest:
        return out
    if pixels is not None and image_token_id is not None and all(r.prompt_ids for r in rows):
        recorded = _recorded_rows(rows[:chunk], pixels, image_token_id)
        if recorded is not None and all(_same_inputs(a, b) for a, b in zip(recorded, out, strict=True)):
            for start in range(0, len(rest), chunk):
                part = _recorded_rows(rest[start : start + chunk], pixels, image_token_id)
                out += part if part is not None else _processor_rows(make, rest[start : start + chunk])
            return out
    for start in range(0, len(rest), chunk):
        out += _processor_rows(make, rest[start : start + chunk])
    return out


def _same_inputs(a: RowInputs, b: RowInputs) -> bool:
    def same(x: torch.Tensor | None, y: torch.Tensor | None) -> bool:
        return (x is None and y is None) or (x is not None and y is not None and torch.equal(x, y.to(x.dtype)))

    return (
        same(a.input_ids, b.input_ids)
        and same(a.mm_token_type_ids, b.mm_token_type_ids)
        and same(a.pixel_values, b.pixel_values)
        and same(a.image_grid_thw, b.image_grid_thw)
    )


def _recorded_rows(rows: Sequence[StepRow], pixels: PixelEncoder, image_token_id: int) -> list[RowInputs] | None:
    """Rows from their recorded prompt ids and screenshots (None when the screenshots are
    not all one size at the model's grid, which the encoder needs)."""
    images = [image for row in rows for image in row.prompt.images]
    if images and (len({im.shape for im in images}) != 1 or not pixels.keeps(images[0].shape[0], images[0].shape[1])):
        return None
    values, grid = pixels(torch.from_numpy(np.stack(images))) if images else (None, None)
    per_image = int(grid[0].prod()) if grid is not None else 0
    tokens_per_image = per_image // pixels.merge**2
    out: list[RowInputs] = []
    image = 0
    for row in rows:
        ids = torch.tensor(row.prompt_ids, dtype=torch.long)
        mm = (ids == image_token_id).long()
        n = len(row.prompt.images)
        if int(mm.sum()) != n * tokens_per_image:
            raise LearnerDataError(
                f"episode {row.episode_id!r} step {row.step}: the recorded prompt has {int(mm.sum())} image "
                f"placeholders for {n} screenshot(s) of {tokens_per_image} tokens; train with the processor "
                "that sampled the data"
            )
        row_values = row_grid = None
        if n:
            assert values is not None and grid is not None
            # Copies, not views: see _processor_rows.
            row_values = values[image * per_image : (image + n) * per_image].clone()
            row_grid = grid[image : image + n].clone()
        image += n
        out.append(RowInputs(input_ids=ids, mm_token_type_ids=mm, pixel_values=row_values, image_grid_thw=row_grid))
    return out


def _processor_rows(
    make: Callable[[Sequence[Prompt]], Mapping[str, torch.Tensor]], part: Sequence[StepRow]
) -> list[RowInputs]:
    """One chunk of rows through the processor, checked against the recorded prompt ids."""
    out: list[RowInputs] = []
    if not part:
        return out
    batch = make([r.prompt for r in part])
    ids, attn = batch["input_ids"], batch["attention_mask"].bool()
    mm = batch["mm_token_type_ids"]
    pixels, grid = batch.get("pixel_values"), batch.get("image_grid_thw")
    image_row = patch_row = 0
    for i, row in enumerate(part):
        valid = attn[i]
        row_ids = ids[i][valid]
        if row.prompt_ids and tuple(row_ids.tolist()) != row.prompt_ids:
            raise LearnerDataError(
                f"episode {row.episode_id!r} step {row.step}: the prompt rebuilt with the "
                f"policy's processor ({row_ids.numel()} tokens) differs from the ids recorded "
                f"at sampling time ({len(row.prompt_ids)} tokens); train with the processor "
                "that sampled the data"
            )
        n_images = len(row.prompt.images)
        row_pixels = row_grid = None
        if n_images:
            if grid is None or pixels is None:
                raise LearnerDataError(
                    f"episode {row.episode_id!r} step {row.step}: the prompt has images but "
                    "the processor returned no pixel_values"
                )
            # Copies, not views of the chunk's tensors: a pickled view carries its whole storage,
            # so verl's Ray transfer of one row shipped every row of its chunk (16 x 13.5 MB per
            # paper-sized row; 55 GB per call at 256 rows, which filled Ray's object store and its
            # disk on an H100 on 2026-11-28).
            row_grid = grid[image_row : image_row + n_images].clone()
            patches = int(row_grid.prod(dim=-1).sum())
            row_pixels = pixels[patch_row : patch_row + patches].clone()
            image_row += n_images
            patch_row += patches
        out.append(
            RowInputs(
                input_ids=row_ids,
                mm_token_type_ids=mm[i][valid],
                pixel_values=row_pixels,
                image_grid_thw=row_grid,
            )
        )
    if grid is not None and (image_row != grid.shape[0] or pixels is None or patch_row != pixels.shape[0]):
        raise LearnerDataError(
            "the processor returned more images than the prompts hold; cannot split its batch per row"
        )
    return out


def attach_positions(rope_model: torch.nn.Module, inputs: Sequence[RowInputs], *, chunk: int = 32) -> list[RowInputs]:
    """Each row with its prompt's M-RoPE positions ``(3, L)`` from the model's own
    ``get_rope_index`` (computed once per update instead of once per forward; the response
    positions follow from them: :func:`darwin.models.scoring.response_batch`)."""
    out: list[RowInputs] = []
    for start in range(0, len(inputs), chunk):
        part = inputs[start : start + chunk]
        batch = collate(part, 0)
        positions, _ = rope_index(
            rope_model,
            batch["input_ids"],
            batch["attention_mask"],
            batch["mm_token_type_ids"],
            batch.get("image_grid_thw"),
        )
        length = batch["input_ids"].shape[1]
        for i, row in enumerate(part):
            n = row.input_ids.numel()
            out.append(replace(row, position_ids=positions[:, i, length - n :].cpu().clone()))
    return out


class ImageFeatureCache:
    """The frozen vision tower's features of screenshots seen before, least recently used
    first out, within ``max_bytes``. Valid only while the tower does not change (the
    learner keeps one only under ``speed.freeze_vision``); keys are hashes of the pixels."""

    def __init__(self, max_bytes: int = 256 * 2**20) -> None:
        self.max_bytes = int(max_bytes)
        self._entries: OrderedDict[str, torch.Tensor] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(image: np.ndarray) -> str:
        digest = hashlib.blake2b(np.ascontiguousarray(image).tobytes(), digest_size=16)
        digest.update(str(image.shape).encode())
        return digest.hexdigest()

    def get(self, key: str) -> torch.Tensor | None:
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def put(self, key: str, features: torch.Tensor) -> None:
        if key in self._entries:
            return
        self._entries[key] = features
        self._bytes += features.numel() * features.element_size()
        while self._bytes > self.max_bytes and self._entries:
            _, old = self._entries.popitem(last=False)
            self._bytes -= old.numel() * old.element_size()

    def __len__(self) -> int:
        return len(self._entries)


def attach_image_features(
    backbone: torch.nn.Module,
    inputs: Sequence[RowInputs],
    *,
    images: Sequence[Sequence[np.ndarray]] | None = None,
    cache: ImageFeatureCache | None = None,
    chunk: int = 32,
) -> list[RowInputs]:
    """Each row with its images' features ``(image tokens, H)`` from ``backbone``'s vision
    tower (no gradient) in place of its pixels: with a frozen tower every model's features
    are these, so one pass per update serves every scoring and training forward. With
    ``cache`` and each row's screenshots (``images``), screenshots seen before are not run
    through the tower again."""
    if cache is not None and images is None:
        raise ValueError("attach_image_features: a cache needs the rows' screenshots to key them")
    param = next(backbone.parameters())
    vision_language: Any = backbone  # a Qwen2-VL-family backbone: get_image_features is its own, not nn.Module's
    keys = (
        [[ImageFeatureCache.key(im) for im in row_images] for row_images in images]
        if cache is not None and images is not None
        else None
    )
    found: dict[int, list[torch.Tensor]] = {}
    todo: list[int] = []
    for i, row in enumerate(inputs):
        n = 0 if row.image_grid_thw is None else row.image_grid_thw.shape[0]
        if n == 0 or row.pixel_values is None:
            continue
        cached = [cache.get(k) for k in keys[i]] if cache is not None and keys is not None else [None]
        if all(c is not None for c in cached) and len(cached) == n:
            found[i] = [c for c in cached if c is not None]
            if cache is not None:
                cache.hits += n
        else:
            todo.append(i)
            if cache is not None:
                cache.misses += n
    with torch.no_grad():
        for start in range(0, len(todo), chunk):
            part = todo[start : start + chunk]
            part_images = [_images_of(inputs[i]) for i in part]
            grid = torch.cat([g for _, g in part_images]).to(param.device)
            pixels = torch.cat([v for v, _ in part_images]).to(param.device, param.dtype)
            features = list(vision_language.get_image_features(pixels, grid).pooler_output)
            for i in part:
                n = _images_of(inputs[i])[1].shape[0]
                found[i] = [f.cpu() for f in features[:n]]
                del features[:n]
                if cache is not None and keys is not None:
                    for key, f in zip(keys[i], found[i], strict=True):
                        cache.put(key, f)
    return [
        replace(row, pixel_values=None, image_embeds=torch.cat(found[i])) if i in found else row
        for i, row in enumerate(inputs)
    ]


def _images_of(row: RowInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """A row's ``(pixel_values, image_grid_thw)``; only rows with images are passed."""
    if row.pixel_values is None or row.image_grid_thw is None:
        raise ValueError("internal: attach_image_features ran the vision tower on a row without images")
    return row.pixel_values, row.image_grid_thw


def collate(
    rows: Sequence[RowInputs],
    pad_token_id: int,
    *,
    device: torch.device | str | None = None,
    pixel_dtype: torch.dtype | None = None,
) -> dict[str, torch.Tensor]:
    """Left-pad rows into one model batch (what ``build_inputs`` returns for those prompts).

    Returns ``input_ids``, ``attention_mask`` and ``mm_token_type_ids`` ``(B, L)`` (int64,
    ``L`` the longest prompt) and, when any row has images, ``pixel_values``
    ``(sum patches, D)`` (or ``image_embeds`` ``(sum image tokens, H)`` when the rows carry
    features) and ``image_grid_thw`` ``(sum images, 3)`` in row order; ``position_ids``
    ``(3, B, L)`` when the rows carry positions.
    """
    if not rows:
        raise ValueError("collate needs at least one row")
    length = max(r.input_ids.numel() for r in rows)
    batch = len(rows)
    ids = torch.full((batch, length), int(pad_token_id), dtype=torch.long)
    attn = torch.zeros(batch, length, dtype=torch.long)
    mm = torch.zeros(batch, length, dtype=torch.long)
    for i, r in enumerate(rows):
        n = r.input_ids.numel()
        ids[i, length - n :] = r.input_ids
        attn[i, length - n :] = 1
        mm[i, length - n :] = r.mm_token_type_ids
    out = {"input_ids": ids, "attention_mask": attn, "mm_token_type_ids": mm}
    with_positions = sum(r.position_ids is not None for r in rows)
    if with_positions:
        if with_positions != batch:
            raise ValueError("collate: some rows carry position_ids and some do not; attach them to every row")
        positions = torch.ones(3, batch, length, dtype=torch.long)  # pads: 1, as get_rope_index writes them
        for i, r in enumerate(rows):
            assert r.position_ids is not None
            positions[:, i, length - r.position_ids.shape[1] :] = r.position_ids
        out["position_ids"] = positions
    features = [r.image_embeds for r in rows if r.image_embeds is not None]
    pixels = [r.pixel_values for r in rows if r.pixel_values is not None]
    if features and pixels:
        raise ValueError("collate: some rows carry image features and some pixels; attach features to every row")
    if features:
        out["image_embeds"] = torch.cat(features, dim=0)
    elif pixels:
        out["pixel_values"] = torch.cat(pixels, dim=0)
    if features or pixels:
        out["image_grid_thw"] = torch.cat([r.image_grid_thw for r in rows if r.image_grid_thw is not None], dim=0)
    if device is not None:
        out = {k: v.to(device) for k, v in out.items()}
    if pixel_dtype is not None:
        for key in ("pixel_values", "image_embeds"):
            if key in out:
                out[key] = out[key].to(pixel_dtype)
    return out
