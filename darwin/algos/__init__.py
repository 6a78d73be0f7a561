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
- :func:`~darwin.algos.novelty.novelty`, :func:`expected_novelty`: the count-based exploration
  bonus of :mod:`darwin.hindsight.novelty` (on visit counts, not step rows). ``novelty`` is not
  exported here: it shares its module's name, so ``darwin.algos.novelty`` stays the module
  (``from darwin.algos.novelty import novelty``).
- :func:`ppo_policy_loss`, :func:`value_loss`, :func:`kl_penalty`, :func:`entropy_from_logits`,
  :func:`aggregate_loss`, :func:`masked_mean`, :func:`masked_whiten`: wrappers over verl.

Each function is exported here and imported on first use (verl and torch load with the first):

    >>> import torch
    >>> from darwin.algos import masked_mean
    >>> masked_mean(torch.tensor([[1.0, 3.0, 9.0]]), torch.tensor([[1, 1, 0]])).item()
    2.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from darwin.lazy_exports import lazy_exports

__all__ = [
    "aggregate_loss",
    "entropy_from_logits",
    "expected_novelty",
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

if TYPE_CHECKING:
    from darwin.algos.adagrpo import negative_pruning_keep, shortest_path_adjusted_rewards
    from darwin.algos.gae import trajectory_gae
    from darwin.algos.gigpo import gigpo_advantages
    from darwin.algos.grpo import group_normalize, grpo_advantages
    from darwin.algos.losses import (
        aggregate_loss,
        entropy_from_logits,
        kl_penalty,
        masked_mean,
        masked_whiten,
        ppo_policy_loss,
        value_loss,
    )
    from darwin.algos.novelty import expected_novelty
    from darwin.algos.weighting import trajectory_weights, whiten_within
else:  # hidden from type checkers, so that a misspelt name is their error
    # public name -> the module that holds it, imported on first use (darwin.lazy_exports)
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "aggregate_loss": "darwin.algos.losses",
            "entropy_from_logits": "darwin.algos.losses",
            "expected_novelty": "darwin.algos.novelty",
            "gigpo_advantages": "darwin.algos.gigpo",
            "group_normalize": "darwin.algos.grpo",
            "grpo_advantages": "darwin.algos.grpo",
            "kl_penalty": "darwin.algos.losses",
            "masked_mean": "darwin.algos.losses",
            "masked_whiten": "darwin.algos.losses",
            "negative_pruning_keep": "darwin.algos.adagrpo",
            "ppo_policy_loss": "darwin.algos.losses",
            "shortest_path_adjusted_rewards": "darwin.algos.adagrpo",
            "trajectory_gae": "darwin.algos.gae",
            "trajectory_weights": "darwin.algos.weighting",
            "value_loss": "darwin.algos.losses",
            "whiten_within": "darwin.algos.weighting",
        },
    )
