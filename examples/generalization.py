"""Generalisation: train on template instances, evaluate on AndroidWorld-Generalization's three held-out regimes.

The templates (darwin.templates; `darwin tasks list --templates`) are split once, seeded:

- training: ``train_instances`` instances of each training template,
- unseen instances: new parameters of the training templates,
- unseen templates: held-out templates of the training apps,
- unseen apps: every template of the held-out apps.

The run warm-starts the tiny Qwen2-VL by SFT on oracle demonstrations of the training tasks
only (nothing held out is ever demonstrated), trains it with the default run's PPO settings
(examples/spa_bench.py), and evaluates the warm start and the final policy on phones that
never train, on all four sets; `darwin run` prints the gain on each and eval.json keeps
them (``per_set``). AndroidWorld-Generalization reports RL gains of +26.1 / +15.7 / +8.3
points on unseen instances / templates / apps for a 7B model; docs/results-archive.md has ours.

    darwin tasks split --out runs/split --seed 0     # the same split as task files, to inspect
    darwin run examples/generalization.py --dry-run
    darwin run examples/generalization.py
"""

from darwin.learner.config import LearnerConfig
from darwin.run.config import EvaluationConfig, ExperimentConfig, PhonesConfig, PolicyConfig
from darwin.sft.config import SFTConfig
from darwin.templates import SplitConfig, split_templates

SPLIT = SplitConfig(seed=0, unseen_apps=2, train_instances=4, eval_instances=2)


def build(preset: str) -> ExperimentConfig:
    if preset != "default":
        raise ValueError(f"unknown preset {preset!r}; this experiment has only 'default'")
    split = split_templates(SPLIT)
    train = tuple(t.id for t in split.sets["train"])  # sampled instance ids rebuild their tasks
    held_out = {
        name: tuple(t.id for t in split.sets[name]) for name in ("unseen_instances", "unseen_templates", "unseen_apps")
    }
    return ExperimentConfig(
        name="generalization",
        tasks=train,
        horizon=16,
        phones=PhonesConfig(provider="sim", count=8, seed=300),
        sft=SFTConfig(tasks=train, steps=400, episodes=1024),
        policy=PolicyConfig(temperature=1.0, max_batch=8, max_wait=0.05),
        learner=LearnerConfig(
            gamma=1.0,
            lam=1.0,
            ppo={"clip_ratio": 0.2, "kl_coef": 0.1, "old_logprobs": "recompute"},
            critic={"warmup_updates": 2, "warmup_epochs": 4, "warmup_lam": 1.0, "value_head_bias": 0.1, "lr": 1e-3},
            levers={"format_penalty_advantage": 0.5, "whiten_by": "task", "trajectory_weighting": True},
            speed={"micro_batch_size": 8},
            ppo_epochs=1,
            mini_batch_size=32,
            actor_lr=1e-4,
        ),
        rollout_steps=256,
        updates=40,
        time_budget_s=10 * 60,
        evaluation=EvaluationConfig(samples=1, phones=16, task_sets=held_out),
        notes=f"templates split with {SPLIT!r}: {len(train)} training instances of {len(split.train_templates)} templates; "
        f"held out: {len(split.held_out_templates)} templates, apps {', '.join(split.held_out_apps)}. "
        "PPO settings of examples/spa_bench.py; horizon 16; SFT 400 steps on training tasks only.",
    )
