"""The Darwin paper's SPA-Bench experiment.

Default preset (a 2-core laptop, no GPU, no network): the paper's 8 base tasks on 8
SimPhones, the tiny Qwen2-VL warm-started by SFT on oracle demonstrations (built and cached
on first use), then PPO with token-level GAE over whole trajectories, critic warm-up and a
calibrated value head, exactly as in the paper, with the schedule scaled for CPU:

- rollout steps per update: 256 -> 128 (a 0.8 M-parameter model on 2 cores),
- critic warm-up: 30 updates -> 2,
- actor / critic learning rates raised for a small model trained from scratch,
- mini-batch 64 -> 32, micro-batch 16 -> 8 (CPU memory and speed).

Paper preset (`--preset paper`): Table 1 hyperparameters on cloud phones listed in
$DARWIN_DEVICES (comma-separated serials or host:port), with a warm-start checkpoint given
in $DARWIN_CHECKPOINT.

    darwin run examples/spa_bench.py             # train on this machine
    darwin run examples/spa_bench.py --dry-run   # validate without touching phones
"""

import os

from darwin.experiment import ExperimentConfig, PhonesConfig, PolicySetup
from darwin.learner.config import LearnerConfig


def build(preset: str) -> ExperimentConfig:
    if preset == "default":
        return ExperimentConfig(
            name="spa_bench",
            tasks=("base8",),
            horizon=32,
            phones=PhonesConfig(kind="sim", count=8, seed=100),
            policy=PolicySetup(temperature=1.0, max_batch=8, max_wait=0.05),
            learner=LearnerConfig(
                gamma=1.0, lam=0.95, critic_warmup_updates=2, critic_warmup_epochs=4, critic_warmup_lam=1.0,
                value_head_bias=0.1, clip_ratio=0.2, ppo_epochs=2, mini_batch_size=32, micro_batch_size=8,
                actor_lr=1e-4, critic_lr=1e-3,
            ),
            rollout_steps=128,
            updates=12,
            time_budget_s=15 * 60,
            notes="CPU-scaled paper schedule: 128 steps/update, 2 warm-up updates (paper: 256, 30).",
        )
    if preset == "paper":
        devices = tuple(d for d in os.environ.get("DARWIN_DEVICES", "").split(",") if d)
        return ExperimentConfig(
            name="spa_bench_paper",
            tasks=("base8",),
            horizon=32,
            phones=PhonesConfig(kind="adb", count=max(1, len(devices)) if devices else 8, devices=devices),
            checkpoint=os.environ.get("DARWIN_CHECKPOINT"),
            policy=PolicySetup(temperature=1.0, max_batch=32, max_wait=0.05),
            learner=LearnerConfig(
                gamma=1.0, lam=0.95, critic_warmup_updates=30, critic_warmup_epochs=4, critic_warmup_lam=1.0,
                value_head_bias=0.1, clip_ratio=0.2, ppo_epochs=4, mini_batch_size=64, micro_batch_size=16,
                actor_lr=1e-6, critic_lr=1e-5,
            ),
            rollout_steps=256,
            updates=200,
            notes="Paper Table 1 hyperparameters; phones from $DARWIN_DEVICES.",
        )
    raise ValueError(f"unknown preset {preset!r}; use 'default' or 'paper'")
