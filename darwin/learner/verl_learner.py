"""VerlLearner: darwin's PPO (critic warm-up, token-level GAE over whole trajectories,
calibrated value head) on verl's FSDP workers on Ray.

The run uses it like :class:`~darwin.learner.local.LocalLearner` (``update``, ``save``, ``load``,
``in_warmup``, ``updates``, ``policy_version``, ``actor_state_dict``), selected with
``LearnerConfig(backend="verl", verl=VerlConfig(...))``. What differs is where the models
live: an actor group and a critic group of verl's ``TrainingWorker`` (FSDP/FSDP2, one
worker per GPU) instead of copies in the run's process. The maths stays darwin's: step
rows (:func:`~darwin.learner.step_rows.collect_step_rows`), advantages from the registered
estimator (``trajectory_gae`` for PPO) computed here on the driver, and verl's own
``ppo_loss`` / ``value_loss`` on the workers. One update:

1. step rows -> a padded verl batch (:func:`to_verl_batch`: ``prompts`` left-padded,
   ``responses`` right-padded, ``input_ids``, ``attention_mask``, ``position_ids``,
   ``response_mask``), rows added up to a multiple of ``mini_batch_size`` with
   ``response_mask = 0`` (they carry no token into any loss);
2. old values from the critic (``infer_batch``), old log-probs recomputed by the actor
   (``infer_batch``; verl's ``recompute_log_prob``, always: darwin's sampler masks
   forbidden tokens, verl's actor scores over the whole vocabulary);
3. advantages and returns (token-level GAE over whole trajectories, warm-up lambda
   during warm-up), placed on the response tokens;
4. ``train_mini_batch`` on the critic (warm-up epochs during warm-up), then, after
   warm-up, on the actor; the new actor weights go to the policy with ``version + 1``.

Warm-up is exact as in the local learner: with ``critic.warmup_updates = N`` calls
``1..N`` train only the critic (verl's own ``trainer.critic_warmup = N`` gives N - 1).

The value head is calibrated at critic creation: the actor checkpoint is loaded as a
``...ForTokenClassification`` model (verl's value-model format, ``num_labels = 1``), its
``score`` head set to weight 0 and bias ``critic.value_head_bias``, and saved for the critic
workers (:func:`prepare_critic_checkpoint`).

Policies: Qwen2-VL-family vision-language models (screenshot rows reach verl as
``multi_modal_inputs`` with 3-D rotary positions; the critic is
:class:`~darwin.learner.verl_vlm.Qwen2VLForTokenValue`) and text decoders. Algorithms: PPO
and the critic-free estimators (GRPO, GiGPO), on GPUs or, with ``VerlConfig(device="cpu")``,
on CPU workers with gloo (docs/scale.md).
"""

from __future__ import annotations

import copy
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Hashable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch
from pydantic import JsonValue

from darwin.algos.losses import masked_mean
from darwin.learner.base import LearnerBase
from darwin.learner.checkpoint import (
    ResumeState,
    checkpoint_manifest,
    commit_checkpoint,
    read_manifest,
    read_pending,
    resolve_checkpoint,
    stage_checkpoint,
    sync_policy_to_checkpoint,
    write_pickle,
)
from darwin.learner.config import LearnerConfig
from darwin.learner.metrics import UpdateMetrics
from darwin.learner.step_rows import (
    LearnerDataError,
    collect_step_rows,
    preprocess_rows,
    processor_inputs,
)
from darwin.learner.update_batch import (
    estimate_advantages,
    shaped_rewards,
    shortest_path_adjusted,
)
from darwin.learner.verl_batch import (
    VerlTrainedUpdate,
    VerlUpdateBatch,
    VerlUpdateTimings,
    _no_padding,
    _pad_rows,
    _screenshots,
    _select,
    to_verl_batch,
)
from darwin.learner.verl_engine import worker_configs
from darwin.learner.verl_runtime import (
    VerlBackendUnavailable,
    WeightReceiver,
    check_verl_runtime,
    prepare_critic_checkpoint,
)
from darwin.types import StepScore, Trajectory

if TYPE_CHECKING:
    from verl import DataProto

    from darwin.learner.verl_workers import TrainingWorkerGroup

logger = logging.getLogger(__name__)

__all__ = [
    "VerlLearner",
]

CPU_PLUGIN = "darwin.learner.verl_cpu"
VLM_MODULE = "darwin.learner.verl_vlm"


# --------------------------------------------------------------------------------------
# The learner
# --------------------------------------------------------------------------------------
class VerlLearner(LearnerBase[VerlTrainedUpdate]):
    """PPO with critic warm-up (or GRPO/GiGPO) on verl's FSDP worker groups.

    Args:
        policy: receives the actor's weights after every actor update (``load_weights``).
        config: ``LearnerConfig(backend="verl", verl=VerlConfig(model_path=...))``; the
            policy's model saved at ``verl.model_path`` is the actor's start.
        pad_token_id: pads prompts and responses (default: the policy's tokenizer's pad or
            EOS token, when it has one).
        temperature: the sampling temperature the log-probs are scored at (default: the
            policy's ``logprob_temperature``, else 1).
        work_dir: where the critic's initial checkpoint is written (default: a temporary
            directory removed by :meth:`close`).

    Example (a GPU, or ``VerlConfig(device="cpu", attn_implementation="sdpa")`` for CPU workers)::

        learner = VerlLearner(policy, LearnerConfig(backend="verl", verl=VerlConfig(
            model_path="runs/actor-hf", gpus_per_node=8)))
        metrics = learner.update(buffer.take_completed())
        learner.save("run/ckpt", pending=buffer.completed_trajectories())
        learner.close()
    """

    def __init__(
        self,
        policy: WeightReceiver,
        config: LearnerConfig,
        *,
        pad_token_id: int | None = None,
        temperature: float | None = None,
        work_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if config.backend.name != "verl" or config.verl is None:
            raise ValueError("VerlLearner needs LearnerConfig(backend='verl', verl=VerlConfig(model_path=...))")
        if not isinstance(policy, WeightReceiver):
            raise TypeError(
                f"the verl learner pushes weights with policy.load_weights(state_dict, version); got {type(policy).__name__}"
            )
        settings = config.verl
        check_verl_runtime(settings, needs_critic=config.uses_critic)
        self.policy = policy
        self.config = config
        self.settings = settings
        self.updates = 0
        self.step_scores: tuple[StepScore, ...] = ()
        """Not reported: verl's workers compute the values and advantages and keep them."""
        self.policy_version = int(policy.version)
        self.optimizer_steps = 0
        self.resume_state: ResumeState | None = None
        self._pad_id = pad_token_id if pad_token_id is not None else _policy_pad_id(policy)
        self._temperature = float(
            temperature if temperature is not None else getattr(policy, "logprob_temperature", 1.0)
        )
        # Screenshot rows are rebuilt with a copy of the policy's processor (a fast tokenizer's padding
        # state must not be shared with the sampling thread) and positioned with the policy's model.
        vlm = getattr(policy, "vlm", None)
        self._build_inputs = processor_inputs(copy.deepcopy(vlm.processor)) if vlm is not None else None
        self._rope_model = vlm.model if vlm is not None else None
        self._own_work_dir = work_dir is None
        self.work_dir = Path(work_dir) if work_dir is not None else Path(tempfile.mkdtemp(prefix="darwin-verl-"))
        self._started_ray = False
        self.actor_group: TrainingWorkerGroup
        self.critic_group: TrainingWorkerGroup | None = None
        self.last_timings = VerlUpdateTimings()
        """The last :meth:`update`'s training and weight-sync times and the workers' peak memory."""
        self._start_workers()

    # ------------------------------------------------------------------ workers
    def _start_workers(self) -> None:
        import ray
        from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
        from verl.workers.engine_workers import TrainingWorkerConfig
        from verl.workers.utils.losses import ppo_loss, value_loss

        from darwin.learner.verl_workers import darwin_training_worker

        cfg, s = self.config, self.settings
        # Every worker imports darwin's value models (verl_vlm) when verl loads; CPU workers also the platform.
        env = {"TOKENIZERS_PARALLELISM": "false", "VERL_USE_EXTERNAL_MODULES": VLM_MODULE}
        if s.device == "cpu":
            env.update(
                {
                    "VERL_USE_EXTERNAL_MODULES": f"{CPU_PLUGIN},{VLM_MODULE}",
                    "VERL_PLATFORM": "cpu",
                    "VERL_ENGINE_DEVICE": "cuda",
                }
            )
        if not ray.is_initialized():
            ray.init(
                address=s.ray_address or "local",
                num_cpus=s.ray_num_cpus if s.ray_address is None else None,
                include_dashboard=False,
                runtime_env={"env_vars": env},
            )
            self._started_ray = True
        elif s.device == "cpu":
            raise VerlBackendUnavailable(
                "Ray is already initialised in this process; the CPU platform reaches the workers through "
                "ray.init(runtime_env=...): let the verl learner start Ray, or start it with "
                f"runtime_env={{'env_vars': {env}}}"
            )

        # On GPUs the actor and the critic share one placement (each worker takes a fraction of its
        # GPU): a second pool would ask for GPUs the first one holds and wait for them forever.
        # On CPU each group gets a pool of its own (one CPU bundle per worker).
        gpu_pool = (
            RayResourcePool(process_on_nodes=[s.gpus_per_node] * s.nodes, use_gpu=True, max_colocate_count=10)
            if s.device == "cuda"
            else None
        )

        def group(worker_config: TrainingWorkerConfig) -> TrainingWorkerGroup:
            pool = (
                gpu_pool
                if gpu_pool is not None
                else RayResourcePool(process_on_nodes=[s.gpus_per_node] * s.nodes, use_gpu=False, max_colocate_count=1)
            )
            from verl.utils.device import get_device_name

            workers = RayWorkerGroup(
                resource_pool=pool,
                ray_cls_with_init=RayClassWithInitArgs(cls=ray.remote(darwin_training_worker()), config=worker_config),
                device_name=get_device_name(),
            )
            # RayWorkerGroup binds the worker class's @register methods onto the group as it starts it.
            return cast("TrainingWorkerGroup", workers)

        critic_path = (
            prepare_critic_checkpoint(
                s.model_path,
                self.work_dir / "critic-init",
                init=cfg.critic.value_head_init,
                bias=cfg.critic.value_head_bias,
                attn_implementation=s.attn_implementation,
            )
            if cfg.uses_critic
            else None
        )
        configs = worker_configs(cfg, critic_path)
        self.actor_group = group(configs.actor)
        self.actor_group.reset()
        self.actor_group.set_loss_fn(partial(ppo_loss, config=configs.actor_loss))
        if configs.critic is not None and configs.critic_loss is not None:
            self.critic_group = group(configs.critic)
            self.critic_group.reset()
            self.critic_group.set_loss_fn(partial(value_loss, config=configs.critic_loss))
        logger.info(
            "verl learner: actor%s on %d %s worker(s) (%s)",
            " and critic" if self.critic_group else "",
            s.world_size,
            s.device,
            s.strategy,
        )

    def close(self) -> None:
        """Stop the workers (and Ray, when the learner started it); remove its temporary work dir.
        Safe to call twice."""
        import ray

        for group in (getattr(self, "actor_group", None), self.critic_group):
            if group is not None and ray.is_initialized():
                for worker in group.workers:
                    ray.kill(worker)
        self.critic_group = None
        if self._started_ray and ray.is_initialized():
            ray.shutdown()
            self._started_ray = False
        if self._own_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    # ------------------------------------------------------------------ properties
    def actor_state_dict(self) -> dict[str, torch.Tensor]:
        """The actor's full weights (HF key names, CPU), gathered from the FSDP shards."""
        (state, *_rest) = [s for s in self.actor_group.full_state_dict() if s is not None]
        return state

    @property
    def _pad_multiple(self) -> int:
        return math.lcm(self.config.mini_batch_size, self.config.critic.mini_batch_size or self.config.mini_batch_size)

    # ------------------------------------------------------------------ preparation
    def prepare(
        self,
        trajectories: Sequence[Trajectory],
        *,
        group_ids: Sequence[Hashable] | None = None,
        lam: float | None = None,
    ) -> VerlUpdateBatch:
        """Rows, old values and log-probs from the workers, advantages and returns (no training)."""
        cfg = self.config
        t0 = time.perf_counter()
        collected = collect_step_rows(
            trajectories,
            group_ids=group_ids,
            drop_infra_truncated=cfg.infra_truncation == "drop",
            step_budget_terminal=cfg.step_budget == "terminal",
            agent=cfg.trained_agent,
        )
        rows = collected.rows
        if not rows:
            raise LearnerDataError(
                f"no step to train on: {len(trajectories)} trajectories, {collected.empty_trajectories} without steps, "
                f"{collected.dropped_infra} dropped infrastructure truncations, {collected.dropped_unverified} unverified"
            )
        n = len(rows)
        budget = self.settings.max_token_len_per_gpu
        longest = max(rows, key=lambda r: len(r.prompt_ids) + len(r.response_ids))
        if budget is not None and len(longest.prompt_ids) + len(longest.response_ids) > budget:
            raise LearnerDataError(
                f"episode {longest.episode_id!r} step {longest.step} has {len(longest.prompt_ids)} prompt + "
                f"{len(longest.response_ids)} response tokens, more than verl.max_token_len_per_gpu={budget} (one "
                "micro-batch's budget): raise it to at least the longest prompt + response (verl's guide: twice that)"
            )
        inputs = None
        if any(r.prompt.images for r in rows):
            if self._build_inputs is None:
                raise LearnerDataError(
                    f"{type(self.policy).__name__} has no vision-language model (policy.vlm) to rebuild the rows' "
                    "screenshots with; use HFPolicy or ServerPolicy"
                )
            inputs = preprocess_rows(self._build_inputs, rows, chunk=16)
        data = to_verl_batch(
            rows,
            pad_token_id=self._pad_id,
            pad_to_multiple=self._pad_multiple,
            temperature=self._temperature,
            inputs=inputs,
            rope_model=self._rope_model,
        )
        t1 = time.perf_counter()
        # One line per phase, so that an update cut short by a timeout still says where its time went.
        logger.info("verl prepare: %d rows built in %.1fs", n, t1 - t0)
        mask = data.batch["response_mask"][:n].bool()
        values = None
        if self.critic_group is not None:
            values = self._infer(self.critic_group, data, "values")[:n]
        t2 = time.perf_counter()
        logger.info("verl prepare: critic values in %.1fs", t2 - t1)
        warmup = self.in_warmup
        if not warmup:
            old = self._infer(self.actor_group, data, "log_probs")[:n]
            data.batch["old_log_probs"] = _pad_rows(old.masked_fill(~mask, 0.0), data)
        t3 = time.perf_counter()
        logger.info("verl prepare: actor log-probs in %.1fs", t3 - t2)
        if lam is None:
            lam = cfg.critic.warmup_lam if warmup else cfg.lam
        rewards = shaped_rewards(cfg, rows, collected.trajectories, torch.device("cpu"))
        # The same estimator, whitening, format penalty and trajectory weights as LocalLearner.
        advantages, returns = estimate_advantages(
            cfg,
            rows,
            rewards=rewards,
            response_mask=mask,
            step_indices=torch.tensor([r.step for r in rows], dtype=torch.long),
            truncated=torch.tensor([r.truncated for r in rows], dtype=torch.bool),
            values=values,
            lam=float(lam),
        )
        advantages = advantages.masked_fill(~mask, 0.0)
        data.batch["advantages"] = _pad_rows(advantages, data)
        if values is not None and returns is not None:
            data.batch["values"] = _pad_rows(values.masked_fill(~mask, 0.0), data)
            data.batch["returns"] = _pad_rows(returns.float().masked_fill(~mask, 0.0), data)
        return VerlUpdateBatch(
            rows=rows,
            trajectories=collected.trajectories,
            data=data,
            response_mask=mask,
            advantages=advantages,
            values=values,
            returns=returns,
            lam=float(lam),
            empty_trajectories=collected.empty_trajectories,
            dropped_infra=collected.dropped_infra,
            dropped_unverified=collected.dropped_unverified,
            prepare_s=t1 - t0,
            scoring_s=time.perf_counter() - t1,
            values_s=t2 - t1,
            log_probs_s=t3 - t2,
        )

    def _infer(self, group: TrainingWorkerGroup, data: DataProto, key: str) -> torch.Tensor:
        """``(N', R)`` per-response-token output of ``infer_batch`` (``values`` or ``log_probs``)."""
        from verl.utils import tensordict_utils as tu
        from verl.workers.utils.padding import no_padding_2_padding

        td = _no_padding(
            _select(data, ("input_ids", "attention_mask", "position_ids", "prompts", "responses", "response_mask"))
        )
        tu.assign_non_tensor(td, compute_loss=False, calculate_entropy=False)
        output = group.infer_batch(td).get()
        return no_padding_2_padding(tu.get(output, key), td).float().cpu()

    # ------------------------------------------------------------------ the update
    def _train_update(
        self, trajectories: list[Trajectory], group_ids: Sequence[Hashable] | None, *, warmup: bool
    ) -> VerlTrainedUpdate:
        """The rows, values and log-probs from the workers, then the critic's and the actor's epochs."""
        cfg = self.config
        batch = self.prepare(trajectories, group_ids=group_ids)
        t1 = time.perf_counter()
        epochs = cfg.critic.warmup_epochs if warmup else cfg.ppo_epochs
        critic_metrics: dict = {}
        actor_metrics: dict = {}
        seed = cfg.seed * 100_003 + self.updates  # a fresh, reproducible shuffle per update
        if self.critic_group is not None:
            mini = cfg.critic.mini_batch_size or cfg.mini_batch_size
            keys = (
                "input_ids",
                "attention_mask",
                "position_ids",
                "prompts",
                "responses",
                "response_mask",
                "values",
                "returns",
            )
            critic_metrics = self._train(
                self.critic_group, _select(batch.data, keys), mini=mini, epochs=epochs, seed=seed
            )
            self.optimizer_steps += epochs * len(batch.data) // mini
        t_critic = time.perf_counter()
        logger.info("verl update: critic trained in %.1fs", t_critic - t1)
        if not warmup:
            keys = (
                "input_ids",
                "attention_mask",
                "position_ids",
                "prompts",
                "responses",
                "response_mask",
                "old_log_probs",
                "advantages",
            )
            actor_metrics = self._train(
                self.actor_group, _select(batch.data, keys), mini=cfg.mini_batch_size, epochs=epochs, seed=seed
            )
            self.optimizer_steps += epochs * len(batch.data) // cfg.mini_batch_size
        return VerlTrainedUpdate(
            batch=batch,
            epochs=epochs,
            actor=actor_metrics,
            critic=critic_metrics,
            prepared_at=t1,
            critic_trained_at=t_critic,
        )

    def _finish_update(
        self,
        trained: VerlTrainedUpdate,
        *,
        warmup: bool,
        version_before: int,
        started: float,
        trained_at: float,
        synced: float,
    ) -> UpdateMetrics:
        memory = [
            float(v)
            for m in (trained.actor, trained.critic)
            for v in _metric_values(m, "perf/max_memory_allocated_gb")
            if float(v) > 0
        ]
        self.last_timings = VerlUpdateTimings(
            critic_train_s=trained.critic_trained_at - trained.prepared_at,
            actor_train_s=trained_at - trained.critic_trained_at,
            weight_sync_s=synced - trained_at,
            peak_memory_gib=max(memory) if memory else None,
        )
        return self._metrics(
            trained.batch,
            warmup,
            trained.epochs,
            version_before,
            trained.actor,
            trained.critic,
            trained.prepared_at - started,
            trained_at - trained.prepared_at,
            synced - started,
        )

    def _train(self, group: TrainingWorkerGroup, data: DataProto, *, mini: int, epochs: int, seed: int) -> dict:
        from verl.utils import tensordict_utils as tu

        td = _no_padding(data)
        tu.assign_non_tensor(
            td,
            global_batch_size=mini,
            mini_batch_size=mini,
            epochs=epochs,
            seed=seed,
            dataloader_kwargs={"shuffle": True},
            compute_loss=True,
            calculate_entropy=True,
        )
        output = group.train_mini_batch(td).get()
        return dict(tu.get(output, "metrics"))

    def _metrics(
        self,
        batch: VerlUpdateBatch,
        warmup: bool,
        epochs: int,
        version_before: int,
        actor: Mapping[str, object],
        critic: Mapping[str, object],
        prepare_s: float,
        train_s: float,
        total_s: float,
    ) -> UpdateMetrics:
        cfg = self.config
        trajs = batch.trajectories
        returns_per_traj = [sum(t.reward for t in traj.transitions) for traj in trajs]
        verified = [t.success for t in trajs if t.success is not None]
        lags = [version_before - r.policy_version for r in batch.rows]
        mask = batch.response_mask
        value_mean = return_mean = explained = None
        if batch.values is not None and batch.returns is not None:
            value_mean = float(masked_mean(batch.values, mask))
            return_mean = float(masked_mean(batch.returns.float(), mask))
            ret = batch.returns[mask].double()
            var = float(ret.var(unbiased=False)) if ret.numel() else 0.0
            if var > 0:
                explained = 1.0 - float((ret - batch.values[mask].double()).var(unbiased=False)) / var
        mini = cfg.mini_batch_size
        return UpdateMetrics(
            update=self.updates,
            stage="critic_warmup" if warmup else ("ppo" if cfg.algorithm.name == "gae" else cfg.algorithm.name),
            policy_version=self.policy_version,
            actor_updated=not warmup,
            trajectories=len(trajs),
            steps=len(batch),
            screenshots=_screenshots(batch.data, len(batch)),
            response_tokens=int(mask.sum()),
            empty_trajectories=batch.empty_trajectories,
            dropped_infra_trajectories=batch.dropped_infra,
            unverified_trajectories=batch.dropped_unverified,
            episode_return_mean=sum(returns_per_traj) / len(returns_per_traj),
            success_rate=(sum(verified) / len(verified)) if verified else None,
            truncated_fraction=sum(1 for t in trajs if t.termination is not None and t.termination.truncated)
            / len(trajs),
            version_lag_mean=sum(lags) / len(lags),
            version_lag_max=max(lags),
            epochs=epochs,
            optimizer_steps=epochs * len(batch.data) // mini,
            skipped_steps=0,
            policy_loss=_metric_mean(actor, "actor/pg_loss"),
            clip_fraction=_metric_mean(actor, "actor/pg_clipfrac"),
            clip_fraction_lower=_metric_mean(actor, "actor/pg_clipfrac_lower"),
            approx_kl=_metric_mean(actor, "actor/ppo_kl"),
            entropy=_metric_mean(actor, "actor/entropy"),
            actor_grad_norm=_metric_mean(actor, "grad_norm"),
            value_loss=_metric_mean(critic, "critic/vf_loss"),
            value_clip_fraction=_metric_mean(critic, "critic/vf_clipfrac"),
            critic_grad_norm=_metric_mean(critic, "grad_norm"),
            value_mean=value_mean,
            return_mean=return_mean,
            explained_variance=explained,
            shortest_path_adjusted=shortest_path_adjusted(batch.rows, trajs)
            if cfg.levers.shortest_path_adjustment
            else None,
            prepare_s=prepare_s,
            scoring_s=batch.scoring_s,
            values_s=batch.values_s,
            proximal_s=batch.log_probs_s,
            train_s=train_s,
            total_s=total_s,
        )

    # ------------------------------------------------------------------ checkpoints
    def save(
        self,
        path: str | os.PathLike[str],
        *,
        pending: Sequence[Trajectory] = (),
        extra_state: Mapping[str, JsonValue] | None = None,
    ) -> Path:
        """Write a checkpoint directory atomically: the workers' own FSDP checkpoints
        (``actor/``, ``critic/``: verl's ``save_checkpoint``, model + optimizer + extra
        state per rank) and darwin's manifest ``learner.json`` and ``pending.pkl``, as
        :meth:`LocalLearner.save` (temp directory, fsync, rename). Multi-node runs need
        ``path`` on a filesystem every node sees (each rank writes its shard)."""
        target = Path(path).absolute()
        tmp, extra_json = stage_checkpoint(target, pending, extra_state)
        try:
            self.actor_group.save_checkpoint(str(tmp / "actor"), None, self.updates, None)
            if self.critic_group is not None:
                self.critic_group.save_checkpoint(str(tmp / "critic"), None, self.updates, None)
            write_pickle(list(pending), tmp / "pending.pkl")
            manifest = checkpoint_manifest(
                updates=self.updates,
                policy_version=self.policy_version,
                optimizer_steps=self.optimizer_steps,
                config=self.config,
                pending=pending,
                extra_json=extra_json,
                backend="verl",
            )
            commit_checkpoint(tmp, target, manifest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        logger.info("verl checkpoint saved to %s (update %d, policy v%d)", target, self.updates, self.policy_version)
        return target

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        policy: WeightReceiver,
        *,
        config: LearnerConfig | None = None,
        pad_token_id: int | None = None,
        temperature: float | None = None,
        work_dir: str | os.PathLike[str] | None = None,
    ) -> VerlLearner:
        """Start workers from the checkpoint's config (or ``config``: hyperparameters may
        change, not the structure), load their FSDP checkpoints, restore the counters and
        bring ``policy`` to the saved actor weights when its version is older. ``pad_token_id``,
        ``temperature`` and ``work_dir`` are the constructor's."""
        src = resolve_checkpoint(path).absolute()
        manifest = read_manifest(src)
        if manifest.get("backend") != "verl":
            raise ValueError(f"{src} was written by the local learner; load it with LocalLearner.load")
        saved = LearnerConfig.model_validate(manifest["config"])
        if config is None:
            config = saved
        elif config.algorithm != saved.algorithm or getattr(config.verl, "model_path", None) != getattr(
            saved.verl, "model_path", None
        ):
            raise ValueError(
                f"{src}: config changes the model structure (algorithm or verl.model_path) of the checkpoint"
            )
        learner = cls(policy, config, pad_token_id=pad_token_id, temperature=temperature, work_dir=work_dir)
        learner.actor_group.load_checkpoint(str(src / "actor"), None, False)
        if learner.critic_group is not None:
            learner.critic_group.load_checkpoint(str(src / "critic"), None, False)
        learner.updates = int(manifest["updates"])
        learner.optimizer_steps = int(manifest["optimizer_steps"])
        saved_version = int(manifest["policy_version"])
        learner.policy_version = saved_version
        sync_policy_to_checkpoint(policy, learner.actor_state_dict(), saved_version, src)
        pending = read_pending(src)
        learner.resume_state = ResumeState(path=src, pending=pending, extra_state=manifest["extra_state"])
        logger.info("verl learner resumed from %s: update %d, policy v%d", src, learner.updates, saved_version)
        return learner


def _metric_values(metrics: Mapping[str, object], key: str) -> list[float]:
    """Every number of one of verl's metrics (a number, a list of them, or verl ``Metric`` objects); [] if absent."""
    if key not in metrics:
        return []
    value = metrics[key]
    items = value if isinstance(value, list | tuple) else [value]
    numbers: list[float] = []
    for item in items:
        inner = getattr(item, "value", item)  # verl.utils.metric.Metric keeps its number in .value
        if isinstance(inner, list | tuple):
            numbers.extend(float(x) for x in inner)
        else:
            numbers.append(float(inner))  # type: ignore[arg-type]  # a verl metric: a number or 0-d tensor (float() raises on anything else)
    return numbers


def _metric_mean(metrics: Mapping[str, object], key: str) -> float | None:
    """Mean of one of verl's metrics over its finite numbers (None if absent or none is finite)."""
    finite = [x for x in _metric_values(metrics, key) if math.isfinite(x)]
    return sum(finite) / len(finite) if finite else None


def _policy_pad_id(policy: object) -> int:
    vlm = getattr(policy, "vlm", None)
    tok = getattr(vlm, "tokenizer", None) or getattr(policy, "tokenizer", None)
    if tok is None:
        raise ValueError("pass pad_token_id= : the policy has no tokenizer to take a pad or EOS token from")
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    if pad is None:
        raise ValueError("the tokenizer names neither a pad nor an EOS token; pass pad_token_id=")
    return int(pad)
