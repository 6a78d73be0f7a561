"""Pure RL maths for the learner: advantages and losses on step rows.

Every function is pure (no state, no RNG, no I/O) and works on step rows: one row per agent
step, holding that step's response tokens right-padded to ``max_response_len`` with a
``response_mask``. Shapes are in each docstring; the maths is in ``docs/algorithms.md``.

- :func:`trajectory_gae`: token-level GAE over whole multi-turn trajectories (paper Eq. 8).
- :func:`grpo_advantages`, :func:`group_normalize`: GRPO, normalised per trajectory.
- :func:`gigpo_advantages`: GiGPO (episode + anchor-state step advantages).
- :func:`shortest_path_adjusted_rewards`, :func:`negative_pruning_keep`: MobileRL's AdaGRPO.
- :func:`whiten_within`, :func:`trajectory_weights`: per-task whitening, equal trajectory weight.
- :mod:`darwin.algos.estimators`: the estimators by name (``gae``, ``grpo``, ``gigpo``).
- :func:`ppo_policy_loss`, :func:`value_loss`, :func:`kl_penalty`, :func:`entropy_from_logits`,
  :func:`aggregate_loss`, :func:`masked_mean`, :func:`masked_whiten`: wrappers over verl.
"""

from importlib import import_module
from typing import TYPE_CHECKING

# Names load on first use (PEP 562): the GAE and loss modules import verl, which takes seconds,
# and the episode metrics (darwin.algos.task_metrics), imported by every workflow, need none of it.
_HOMES = {
    "negative_pruning_keep": "adagrpo",
    "shortest_path_adjusted_rewards": "adagrpo",
    "trajectory_gae": "gae",
    "gigpo_advantages": "gigpo",
    "group_normalize": "grpo",
    "grpo_advantages": "grpo",
    "KL_ESTIMATORS": "losses",
    "LOSS_AGG_MODES": "losses",
    "PolicyLossOutput": "losses",
    "ValueLossOutput": "losses",
    "aggregate_loss": "losses",
    "entropy_from_logits": "losses",
    "kl_penalty": "losses",
    "masked_mean": "losses",
    "masked_whiten": "losses",
    "ppo_policy_loss": "losses",
    "value_loss": "losses",
    "trajectory_weights": "weighting",
    "whiten_within": "weighting",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module 'darwin.algos' has no attribute {name!r}")
    return getattr(import_module(f"darwin.algos.{_HOMES[name]}"), name)


if TYPE_CHECKING:
    from darwin.algos.adagrpo import negative_pruning_keep, shortest_path_adjusted_rewards
    from darwin.algos.gae import trajectory_gae
    from darwin.algos.gigpo import gigpo_advantages
    from darwin.algos.grpo import group_normalize, grpo_advantages
    from darwin.algos.losses import (
        KL_ESTIMATORS,
        LOSS_AGG_MODES,
        PolicyLossOutput,
        ValueLossOutput,
        aggregate_loss,
        entropy_from_logits,
        kl_penalty,
        masked_mean,
        masked_whiten,
        ppo_policy_loss,
        value_loss,
    )
    from darwin.algos.weighting import trajectory_weights, whiten_within

__all__ = [
    "KL_ESTIMATORS",
    "LOSS_AGG_MODES",
    "PolicyLossOutput",
    "ValueLossOutput",
    "aggregate_loss",
    "entropy_from_logits",
    "gigpo_advantages",
    "group_normalize",
    "grpo_advantages",
    "kl_penalty",
    "masked_mean",
    "masked_whiten",
    "negative_pruning_keep",
    "ppo_policy_loss",
    "shortest_path_adjusted_rewards",
    "trajectory_gae",
    "trajectory_weights",
    "value_loss",
    "whiten_within",
]
