"""Learner checkpoints on disk: the directory layout, atomic writes, resume.

Both learners write a checkpoint directory the same way: :func:`stage_checkpoint` checks the
inputs and makes a temporary directory next to the target, the learner writes its files into
it, and :func:`commit_checkpoint` writes the manifest (``learner.json``) last and swaps the
directory into place, so a directory with a manifest is always complete (``docs/learner.md``,
"Checkpoints"). :func:`resolve_checkpoint` finds the checkpoint to resume from, also after a
crash between the two renames.

:class:`~darwin.learner.local.LocalLearner`'s own files (weights, optimizers, RNG, positive replay)
are written and read by :func:`save_local_checkpoint` and :func:`load_local_state` through a
:class:`LearnerState` of live objects; :class:`~darwin.learner.verl_learner.VerlLearner`
writes its workers' FSDP checkpoints instead and shares the rest.

    >>> import tempfile
    >>> from pathlib import Path
    >>> root = Path(tempfile.mkdtemp())
    >>> tmp, extra = stage_checkpoint(root / "ckpt", pending=(), extra_state={"round": 1})
    >>> commit_checkpoint(tmp, root / "ckpt", {"format_version": CHECKPOINT_FORMAT_VERSION})
    >>> resolve_checkpoint(root / "ckpt") == root / "ckpt", extra
    (True, '{"round": 1}')
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import shutil
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import torch
from pydantic import JsonValue
from torch import nn

from darwin.learner.config import LearnerConfig
from darwin.learner.replay import PositiveReplay
from darwin.learner.rft import AcceptedEpisodes
from darwin.learner.verl_runtime import WeightReceiver
from darwin.replay_buffer import ReplayBuffer
from darwin.types import Trajectory

logger = logging.getLogger(__name__)

__all__ = [
    "CHECKPOINT_FORMAT_VERSION",
    "MANIFEST",
    "LearnerState",
    "ResumeState",
    "check_resume_config",
    "commit_checkpoint",
    "fsync_file",
    "load_local_state",
    "read_manifest",
    "read_pending",
    "resolve_checkpoint",
    "restore_pending",
    "save_local_checkpoint",
    "stage_checkpoint",
    "sync_policy_to_checkpoint",
    "write_pickle",
]

CHECKPOINT_FORMAT_VERSION = 1
MANIFEST = "learner.json"


@dataclass(frozen=True)
class ResumeState:
    """What :meth:`LocalLearner.load` restored besides the learner itself.

    Attributes:
        path: the checkpoint directory.
        pending: completed trajectories that were not trained yet when the checkpoint was
            written (put them back with :func:`darwin.learner.checkpoint.restore_pending`).
        extra_state: the caller's JSON state (e.g. ``{"curriculum": curriculum.state_dict()}``).
    """

    path: Path
    pending: list[Trajectory]
    extra_state: dict[str, JsonValue]


@dataclass(frozen=True)
class LearnerState:
    """The live objects a :class:`~darwin.learner.local.LocalLearner` checkpoint holds; saving
    reads them, loading writes into them in place. ``None`` where the learner has none
    (no critic in GRPO, no reference without KL or with LoRA, no positive replay)."""

    actor: nn.Module
    critic: nn.Module | None
    reference: nn.Module | None
    actor_optimizer: torch.optim.Optimizer
    critic_optimizer: torch.optim.Optimizer | None
    generator: torch.Generator
    replay: PositiveReplay[Trajectory] | None
    accepted: AcceptedEpisodes | None = None
    """The rejection-sampling fine-tune's accepted episodes (``LearnerConfig.finetunes.rft``)."""


# --------------------------------------------------------------------------------------
# Writing: stage, write the files, commit
# --------------------------------------------------------------------------------------
def stage_checkpoint(
    target: Path, pending: Sequence[Trajectory], extra_state: Mapping[str, JsonValue] | None
) -> tuple[Path, str]:
    """Check a save's inputs and make the temporary directory it writes into (next to
    ``target``, stale ones from killed saves removed); returns it and ``extra_state`` as JSON.
    :func:`commit_checkpoint` finishes the save."""
    try:
        extra_json = json.dumps(dict(extra_state or {}))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"extra_state must be JSON-serialisable: {exc}") from exc
    for t in pending:
        if t.termination is None:
            raise ValueError(f"pending trajectory {t.episode_id!r} is not completed")
    if target.exists() and not (target / MANIFEST).is_file():
        raise FileExistsError(
            f"{target} exists and is not a learner checkpoint (no {MANIFEST}); refusing to "
            "replace it: pass a new or checkpoint directory"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{target.name}.tmp-*"):  # left by a killed save
        shutil.rmtree(stale)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    return tmp, extra_json


def commit_checkpoint(tmp: Path, target: Path, manifest: dict[str, Any]) -> None:
    """Write the manifest last into the fully written ``tmp`` and swap it into ``target``
    atomically: a checkpoint directory with a manifest is always complete."""
    with open(tmp / MANIFEST, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2)
        fsync_file(fh)
    _fsync_dir(tmp)
    _swap_into_place(tmp, target)


def checkpoint_manifest(
    *,
    updates: int,
    policy_version: int,
    optimizer_steps: int,
    config: LearnerConfig,
    pending: Sequence[Trajectory],
    extra_json: str,
    **backend_fields: object,
) -> dict[str, object]:
    """``learner.json``: the counters, the config, the pending episodes and the caller's state,
    common to both learners (``backend_fields`` adds what one backend needs, e.g. ``backend``)."""
    return {
        "format_version": CHECKPOINT_FORMAT_VERSION,
        **backend_fields,
        "updates": updates,
        "policy_version": policy_version,
        "optimizer_steps": optimizer_steps,
        "config": config.model_dump(mode="json"),
        "pending_episode_ids": [t.episode_id for t in pending],
        "extra_state": json.loads(extra_json),
        "torch": torch.__version__,
        "saved_at": time.time(),
    }


def save_local_checkpoint(
    path: str | os.PathLike[str],
    state: LearnerState,
    *,
    config: LearnerConfig,
    updates: int,
    policy_version: int,
    optimizer_steps: int,
    pending: Sequence[Trajectory],
    extra_state: Mapping[str, JsonValue] | None,
) -> Path:
    """Write a :class:`~darwin.learner.local.LocalLearner` checkpoint directory atomically (see
    :meth:`LocalLearner.save`); returns its path. On any error the temporary directory is
    removed and the previous checkpoint at ``path`` stays."""
    target = Path(path)
    tmp, extra_json = stage_checkpoint(target, pending, extra_state)
    try:
        _save_torch(state.actor.state_dict(), tmp / "actor.pt")
        if state.critic is not None:
            _save_torch(state.critic.state_dict(), tmp / "critic.pt")
        if state.reference is not None:
            _save_torch(state.reference.state_dict(), tmp / "reference.pt")
        optim = {"actor": state.actor_optimizer.state_dict()}
        if state.critic_optimizer is not None:
            optim["critic"] = state.critic_optimizer.state_dict()
        _save_torch(optim, tmp / "optimizers.pt")
        _save_torch({"generator": state.generator.get_state()}, tmp / "rng.pt")
        write_pickle(list(pending), tmp / "pending.pkl")
        if state.replay is not None:
            write_pickle(state.replay.state(), tmp / "replay.pkl")
        if state.accepted is not None:
            write_pickle(state.accepted.state(), tmp / "accepted.pkl")
        manifest = checkpoint_manifest(
            updates=updates,
            policy_version=policy_version,
            optimizer_steps=optimizer_steps,
            config=config,
            pending=pending,
            extra_json=extra_json,
        )
        commit_checkpoint(tmp, target, manifest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def write_pickle(obj: object, file: Path) -> None:
    """Pickle ``obj`` to ``file`` and fsync it (trajectories, replay entries)."""
    with open(file, "wb") as fh:
        pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)
        fsync_file(fh)


# --------------------------------------------------------------------------------------
# Reading: find, check, load
# --------------------------------------------------------------------------------------
def resolve_checkpoint(path: str | os.PathLike[str]) -> Path:
    """The complete checkpoint at ``path``, or the previous one if a crash hit between the two
    renames of :meth:`LocalLearner.save` (it then sits at ``.<name>.old``)."""
    target = Path(path)
    if (target / MANIFEST).is_file():
        return target
    backup = target.parent / f".{target.name}.old"
    if not target.exists() and (backup / MANIFEST).is_file():
        logger.warning("%s is missing; resuming from the previous checkpoint %s", target, backup)
        return backup
    raise FileNotFoundError(f"{target} is not a learner checkpoint (no {MANIFEST})")


def read_manifest(src: Path) -> dict[str, Any]:
    """The manifest of the checkpoint at ``src``, checked to be of this format version."""
    try:
        manifest = json.loads((src / MANIFEST).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{src / MANIFEST}: not valid JSON ({exc})") from exc
    if manifest.get("format_version") != CHECKPOINT_FORMAT_VERSION:
        raise ValueError(
            f"{src / MANIFEST}: format_version {manifest.get('format_version')!r} is not {CHECKPOINT_FORMAT_VERSION}"
        )
    return manifest


def check_resume_config(src: Path, saved: LearnerConfig, config: LearnerConfig | None) -> LearnerConfig:
    """The config to resume a :class:`~darwin.learner.local.LocalLearner` with: ``saved`` (the
    checkpoint's) unless ``config`` is given, which may change hyperparameters but not the
    model structure (algorithm, critic.backbone, finetunes.lora, KL on/off)."""
    if config is None:
        return saved
    changed = [
        name
        for name, new, old in (
            ("algorithm", config.algorithm, saved.algorithm),
            ("critic.backbone", config.critic.backbone, saved.critic.backbone),
            ("finetunes.lora", config.finetunes.lora, saved.finetunes.lora),
        )
        if new != old
    ]
    if (config.ppo.kl_coef > 0) != (saved.ppo.kl_coef > 0):
        changed.append("ppo.kl_coef (on/off)")
    if changed:
        raise ValueError(
            f"{src}: config changes the model structure ({', '.join(changed)}) of the "
            "checkpoint; only hyperparameters may change on resume"
        )
    return config


def load_local_state(src: Path, state: LearnerState, device: torch.device) -> None:
    """Load a :class:`~darwin.learner.local.LocalLearner` checkpoint's weights, optimizer states,
    generator state and positive replay (if both the learner and the checkpoint have one)
    into ``state`` in place."""
    state.actor.load_state_dict(_load_torch(src / "actor.pt", device))
    if state.critic is not None:
        state.critic.load_state_dict(_load_torch(src / "critic.pt", device))
    if state.reference is not None:
        state.reference.load_state_dict(_load_torch(src / "reference.pt", device))
    optim = _load_torch(src / "optimizers.pt", device)
    state.actor_optimizer.load_state_dict(optim["actor"])
    if state.critic_optimizer is not None:
        state.critic_optimizer.load_state_dict(optim["critic"])
    state.generator.set_state(_load_torch(src / "rng.pt", "cpu")["generator"])
    if state.replay is not None and (src / "replay.pkl").is_file():
        with open(src / "replay.pkl", "rb") as fh:
            entries = pickle.load(fh)  # our own checkpoint: load only trusted ones
        state.replay.restore(entries)
    if state.accepted is not None and (src / "accepted.pkl").is_file():
        with open(src / "accepted.pkl", "rb") as fh:
            state.accepted.restore(pickle.load(fh))


def read_pending(src: Path) -> list[Trajectory]:
    """The pending trajectories saved with the checkpoint at ``src``."""
    with open(src / "pending.pkl", "rb") as fh:
        return pickle.load(fh)  # our own checkpoint: load only trusted ones (docs/learner.md)


def sync_policy_to_checkpoint(
    policy: WeightReceiver, weights: Mapping[str, torch.Tensor], saved_version: int, src: Path
) -> None:
    """Bring ``policy`` to a resumed actor's ``weights``: pushed with ``saved_version`` if the
    policy is older; checked to be equal if it has that version (and, for a policy on an
    inference server, pushed again if the server serves other weights: ``resync_weights``);
    an error if it is newer."""
    if saved_version > policy.version:
        policy.load_weights(weights, saved_version)
        return
    if saved_version < policy.version:
        raise ValueError(
            f"{src}: the policy is at version {policy.version}, newer than the "
            f"checkpoint's {saved_version}; load into a freshly built policy"
        )
    vlm = getattr(policy, "vlm", None)  # a weight receiver without a local model has nothing to compare
    current = vlm.model.state_dict() if vlm is not None else {}
    differing = [k for k, v in weights.items() if k in current and not torch.equal(current[k].to(v.device), v)]
    if differing:
        raise ValueError(
            f"{src}: the policy has the checkpoint's version {saved_version} but different "
            f"weights ({len(differing)} tensors, e.g. {differing[0]!r}); build the policy from "
            "the same initial model as the run that saved the checkpoint"
        )
    # A policy served elsewhere can be ahead of its local copy: a run killed after a weight push
    # but before the checkpoint leaves the server on weights no checkpoint holds.
    resync = getattr(policy, "resync_weights", None)
    if resync is not None:
        resync(weights, saved_version)


def restore_pending(buffer: ReplayBuffer, trajectories: Sequence[Trajectory]) -> None:
    """Put pending trajectories back into a fresh :class:`~darwin.replay_buffer.ReplayBuffer` as
    completed episodes (through its public ``start``/``add``/``finish``), so the next
    ``take_completed()`` hands them out again. In group mode each trajectory goes back into
    its own group (``Trajectory.group``)."""
    for t in trajectories:
        if buffer.group_size is not None and t.group is None:
            raise ValueError(
                f"pending trajectory {t.episode_id!r} has no group but the buffer is in group mode; "
                "resume with the group_size the run was started with"
            )
        buffer.start(t.episode_id, group=t.group if buffer.group_size is not None else None)
        for tr in t.transitions:
            buffer.add(tr)
        buffer.finish(t)
    if buffer.group_size is not None:
        buffer.release_partial_groups()  # their running members were lost with the old process


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------
def _swap_into_place(tmp: Path, target: Path) -> None:
    backup = target.parent / f".{target.name}.old"
    if target.exists():  # complete (it only ever appears by a rename): any backup is stale
        if backup.exists():
            shutil.rmtree(backup)
        os.rename(target, backup)
    # else a crash between the renames left the previous checkpoint in backup: keep it until
    # the new one is in place
    os.rename(tmp, target)
    _fsync_dir(target.parent)
    if backup.exists():
        shutil.rmtree(backup)


def _save_torch(obj: object, file: Path) -> None:
    with open(file, "wb") as fh:
        torch.save(obj, fh)
        fsync_file(fh)


def _load_torch(file: Path, device: torch.device | str) -> dict[str, Any]:
    if not file.is_file():
        raise FileNotFoundError(f"checkpoint file {file} is missing")
    return torch.load(file, map_location=device, weights_only=True)


def fsync_file(fh: BinaryIO | TextIO) -> None:
    """Flush ``fh`` and fsync it, so the file is on disk before the manifest names it."""
    fh.flush()
    os.fsync(fh.fileno())


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
