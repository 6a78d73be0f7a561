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
- :func:`~darwin.algos.novelty.novelty`, :func:`~darwin.algos.novelty.expected_novelty`: the
  count-based exploration bonus of :mod:`darwin.hindsight.novelty` (on visit counts, not step rows).
- :func:`ppo_policy_loss`, :func:`value_loss`, :func:`kl_penalty`, :func:`entropy_from_logits`,
  :func:`aggregate_loss`, :func:`masked_mean`, :func:`masked_whiten`: wrappers over verl.
"""
