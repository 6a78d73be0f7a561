"""The Darwin paper's findings as presets of the embedded default (SimPhones, tiny model, CPU).

Each preset is `examples/spa_bench.py`'s default with one thing changed, named after the
paper's figure and a variant; run two or three seeds of each and draw them with `darwin compare`:

    darwin run examples/paper_findings.py --preset fig6a-random-init --seed 0
    darwin run examples/paper_findings.py --preset fig6a-bias-warmup --seed 0
    darwin compare runs/paper_findings_fig6a_* --pool-seeds --plot fig6a.png

- `fig2`: stability; the default itself (its success plot shades the critic warm-up).
- `fig6a-random-init`, `fig6a-bias`, `fig6a-bias-warmup`: critic robustness; a value head with
  torch's random init and no critic warm-up, the calibrated head (bias 0.1) without warm-up, and
  with it (the default's 2 warm-up updates, scaled down from the paper's 30).
  `fig6a-random-init-paper-lr`, `fig6a-bias-paper-lr`: the first two at the paper's critic
  learning rate (1e-5; the default's is 1e-3, at which one update repairs a random head).
- `fig6b-zero`, `fig6b-bootstrap`: truncation; V(s') = 0 against the critic's V(s') at the screen
  after the cut. As in the paper, the cuts are system crashes: the training phones' adbd crashes
  at random (`phones.faults`, `FIG6B_FAULTS`), and an episode that runs out of steps is a failure
  (`learner.step_budget = "terminal"`), so only the crashes are truncations.
- `fig5-cycle`, `fig5-plain`: the lifecycle protocol; the `cycle8` tasks through the lifecycle
  workflow (setup, execution, teardown, each verified; warm-started on their demonstrations)
  against the plain tasks, on 16 phones that only go home between episodes (the paper's minimal
  cleanup: state persists), each hard-reset (a factory reset) every 8 episodes it plays, as the
  paper resets its phones on a schedule.
- `fig3-phones8`, `fig3-phones16`, `fig3-phones32`: phone scaling, with the rollout size fixed
  at 256 steps per update.
- `fig4-tasks8`, `fig4-tasks16`: task scaling; 8 tasks on 16 phones against the paper's 16 of
  `paper16` (15 distinct on SimPhone) on 32 phones, with the experience per update and the mini-batch doubled (each warm-started on
  its own tasks' demonstrations).
- `shortest-path-on`, `shortest-path-off`: MobileRL's shortest-path reward adjustment and the
  default without it (its effect shows in the mean steps of successful episodes).

`darwin compare --metric` draws the other figures: `phase-success` for fig5 (success per phase),
`wall` for fig3 (training steps against wall time, with over-collection and policy lag) and
`success-steps` for the shortest paths (steps of successful episodes).

Everything else (warm start, schedule, 14-minute budget, evaluation) is the default's, so one
preset is one ~18-minute run on 2 cores; docs/results.md gives each figure next to the paper's.
"""

from pathlib import Path

from darwin.run.config import ExperimentConfig
from darwin.run.load import apply_overrides, load_experiment

FIG6B_FAULTS = "crash=0.008:0.5"
"""Fig. 6b's cuts: each call to a training phone crashes its adbd with probability 0.008 (down
0.5 s); about a fifth of the episodes end as such an infrastructure truncation (docs/results.md)."""

PRESETS: dict[str, list[str]] = {
    "fig2": [],
    "fig6a-random-init": ["learner.critic.value_head_init=random", "learner.critic.warmup_updates=0"],
    "fig6a-bias": [
        "learner.critic.value_head_init=calibrated",
        "learner.critic.value_head_bias=0.1",
        "learner.critic.warmup_updates=0",
    ],
    "fig6a-bias-warmup": ["learner.critic.value_head_init=calibrated", "learner.critic.value_head_bias=0.1"],
    "fig6a-random-init-paper-lr": [
        "learner.critic.value_head_init=random",
        "learner.critic.warmup_updates=0",
        "learner.critic.lr=1e-5",
    ],
    "fig6a-bias-paper-lr": [
        "learner.critic.value_head_init=calibrated",
        "learner.critic.value_head_bias=0.1",
        "learner.critic.warmup_updates=0",
        "learner.critic.lr=1e-5",
    ],
    "fig6b-zero": [f"phones.faults={FIG6B_FAULTS}", "learner.step_budget=terminal", "learner.truncation=zero"],
    "fig6b-bootstrap": [
        f"phones.faults={FIG6B_FAULTS}",
        "learner.step_budget=terminal",
        "learner.truncation=bootstrap",
    ],
    "fig5-cycle": [
        'tasks=["cycle8"]',
        'sft.tasks=["cycle8"]',
        "workflow.name=lifecycle",
        "phones.count=16",
        "phones.reset_between_episodes=false",
        "phones.hard_reset_every=8",
    ],
    "fig5-plain": [
        'tasks=["base8"]',
        "phones.count=16",
        "phones.reset_between_episodes=false",
        "phones.hard_reset_every=8",
    ],
    "fig3-phones8": ["phones.count=8"],
    "fig3-phones16": ["phones.count=16"],
    "fig3-phones32": ["phones.count=32"],
    "fig4-tasks8": ['tasks=["base8"]', "phones.count=16"],
    "fig4-tasks16": [
        'tasks=["paper16"]',
        'sft.tasks=["paper16"]',
        "phones.count=32",
        "rollout_steps=512",
        "learner.mini_batch_size=64",
    ],
    "shortest-path-on": ["learner.levers.shortest_path_adjustment=true"],
    "shortest-path-off": ["learner.levers.shortest_path_adjustment=false"],
}
"""Preset name -> the `--set` overrides it applies to the default."""


def build(preset: str) -> ExperimentConfig:
    if preset == "default":
        preset = "fig2"
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    default = load_experiment(Path(__file__).with_name("spa_bench.py"))
    return apply_overrides(default, [f"name=paper_findings_{preset.replace('-', '_')}", *PRESETS[preset]])
