"""Self-evolution on apps never shown (issue 45, docs/self-evolution.md).

The templates are split as in examples/generalization.py: two apps (Calendar, Chrome) are held
out entirely. The run:

1. warm-starts the tiny Qwen2-VL by SFT on oracle demonstrations of the training apps only
   (1,000 steps, typed text where an app offers it as in examples/spa_bench.py; every arm shares
   it through the cache),
2. evaluates it, paired, on a sample of the training tasks and on every human-written task of
   the held-out apps (``unseen_apps``), which never train,
3. runs ``rounds`` of self-evolution on the held-out apps: the current policy explores them at
   a high temperature with no task; tasks are synthesised from the app data the explorations
   changed (``state.equals`` rules, goal text from phrase rules that never read a template);
   the policy is fine-tuned on the explorer's own demonstrations (loops cut, replayed to check
   they reach the goal) mixed with 64 oracle demonstrations of the training apps (against
   forgetting), then trained by RL on those tasks and the training sample,
4. evaluates the last round's policy as in 2; `darwin run` prints the gain on each set.

No human-written task, demonstration or reward of Calendar or Chrome enters training: a guard
refuses the split's held-out templates in every round's tasks.

    darwin run examples/self_evolve.py --dry-run
    darwin run examples/self_evolve.py                       # 2 rounds; see the timings below
    darwin run examples/self_evolve.py --preset miniature    # the CI test's run: a minute or two

On 2 cores the warm start's SFT takes 43 minutes on first use (cached, shared by every arm); after
it, the default took 32 minutes (partly sharing the machine), and the arms 49 (train_apps_rl) and
62 minutes (few_shot) side by side (docs/results-archive.md, "Self-evolution: the arms" and "the
replaying flywheel").

The ``miniature`` preset explores Chrome with the random agent (an untrained warm start
explores nothing in a few steps) for one round of two RL updates, to exercise every stage.

Two more presets are the arms issue 45's table compares self-evolution with, from the same warm
start, on the same evaluation, with as many RL updates as the default's rounds make (2 x 6):

    darwin run examples/self_evolve.py --preset train_apps_rl   # RL on the training sample only
    darwin run examples/self_evolve.py --preset few_shot        # + 8 human-written tasks per held-out app

``few_shot`` is AndroidWorld-Generalization's few-shot adaptation (one model for all held-out
apps, the rule reward): the training sample plus ``darwin.templates.few_shot_instances`` (8
instances of each held-out app, none of them evaluated). It is the one arm that trains on human
data of the held-out apps, by design.
"""

from darwin.components import ComponentSpec
from darwin.learner.config import LearnerConfig
from darwin.run.config import (
    EvaluationConfig,
    ExperimentConfig,
    PhonesConfig,
    PolicyConfig,
    RoundVerifierConfig,
    SelfEvolutionConfig,
)
from darwin.sft.config import SFTConfig
from darwin.templates import SplitConfig, few_shot_instances, split_templates

SPLIT = SplitConfig(seed=0, unseen_apps=2, train_instances=4, eval_instances=2)


def build(preset: str) -> ExperimentConfig:
    split = split_templates(SPLIT)
    train = tuple(t.id for t in split.sets["train"])
    unseen_apps = tuple(t.id for t in split.sets["unseen_apps"])
    learner = LearnerConfig(
        gamma=1.0,
        lam=1.0,
        ppo={"clip_ratio": 0.2, "kl_coef": 0.1, "old_logprobs": "recompute"},
        critic={"warmup_updates": 1, "warmup_epochs": 4, "warmup_lam": 1.0, "value_head_bias": 0.1, "lr": 1e-3},
        levers={"format_penalty_advantage": 0.5, "whiten_by": "batch", "trajectory_weighting": True},
        speed={"micro_batch_size": 8},
        ppo_epochs=1,
        mini_batch_size=32,
        actor_lr=1e-4,
    )
    training_sample = train[::12]  # 17 training instances, one template in twelve: RL keeps them against forgetting
    rounds, rl_updates = 2, 6

    def full_size(
        name: str, tasks: tuple[str, ...], notes: str, self_evolution: SelfEvolutionConfig | None = None
    ) -> ExperimentConfig:
        """Every full-size arm: the same warm start, phones, sampling, RL budget and evaluation."""
        return ExperimentConfig(
            name=name,
            tasks=tasks,
            horizon=20,
            phones=PhonesConfig(provider="sim", count=8, seed=300),
            sft=SFTConfig(tasks=train, steps=1000, episodes=1024, prefer_typing=True),
            policy=PolicyConfig(temperature=1.0, max_batch=8, max_wait=0.05),
            learner=learner,
            rollout_steps=256,
            updates=rounds * rl_updates,  # the arms without rounds make as many updates as the rounds do
            evaluation=EvaluationConfig(samples=2, phones=4, task_sets={"unseen_apps": unseen_apps}),
            self_evolution=self_evolution,
            notes=notes,
        )

    if preset == "default":
        return full_size(
            "self_evolve",
            training_sample,
            f"held out: apps {', '.join(split.held_out_apps)} ({len(unseen_apps)} human-written tasks, "
            "evaluated only); SFT warm start (1,000 steps, typing) on the training apps; 2 rounds of "
            "explore (policy at T=1.5, 8 x 80 steps per app) -> hindsight tasks -> 120 fine-tuning steps "
            "(with 64 training-app demonstrations) -> 6 RL updates.",
            SelfEvolutionConfig(
                apps=split.held_out_apps,
                split=SPLIT,
                rounds=rounds,
                explorations=8,
                exploration_steps=80,
                explorer_temperature=1.5,
                max_demonstration_steps=16,
                tasks_per_round=16,
                sft_steps=120,
                rl_updates=rl_updates,
            ),
        )
    if preset == "train_apps_rl":
        return full_size(
            "self_evolve_train_apps_rl",
            training_sample,
            "the arm with no held-out app at all: RL on the training sample for as many updates as the "
            "default's rounds make, from the same warm start, on the same evaluation.",
        )
    if preset == "few_shot":
        shots = tuple(t.id for t in few_shot_instances(split, per_app=8))
        return full_size(
            "self_evolve_few_shot",
            training_sample + shots,
            f"few-shot adaptation (AndroidWorld-Generalization): RL with the rule reward on the training sample and "
            f"{len(shots)} human-written instances of {', '.join(split.held_out_apps)} (8 per app, none evaluated), "
            "as many updates as the default's rounds make, from the same warm start.",
        )
    if preset == "miniature":
        return ExperimentConfig(
            name="self_evolve_miniature",
            tasks=train[:2],
            horizon=12,
            phones=PhonesConfig(provider="sim", count=2, seed=100),
            sft=SFTConfig(
                tasks=train[:2], steps=3, warmup_steps=1, batch_size=4, phones=2, episodes=4, heldout_episodes=0
            ),
            policy=PolicyConfig(temperature=1.0, max_batch=2, max_wait=0.01),
            learner=learner.model_copy(update={"mini_batch_size": 8}),
            rollout_steps=12,
            evaluation=EvaluationConfig(samples=1, phones=1, task_sets={"unseen_apps": unseen_apps[-2:]}),
            self_evolution=SelfEvolutionConfig(
                apps=("Chrome",),
                split=SPLIT,
                rounds=1,
                explorations=2,
                exploration_steps=60,
                explorer=ComponentSpec(name="random"),
                max_demonstration_steps=8,
                tasks_per_round=2,
                sft_steps=3,
                sft_batch_size=4,
                replay_episodes=2,
                rl_updates=2,
                learned_verifier=RoundVerifierConfig(reward="learned", epochs=1, agreement_episodes=0),
            ),
            notes="every stage of examples/self_evolve.py in a minute or two: Chrome explored by the random agent",
        )
    raise ValueError(
        f"unknown preset {preset!r}; this experiment has 'default', 'train_apps_rl', 'few_shot' and 'miniature'"
    )
