"""Advantage estimators: ``gae``, ``grpo``, ``gigpo``, and a user's own by import path.

An estimator turns one update batch of step rows into per-token advantages (and value
targets when it uses a critic). The learner picks it by ``LearnerConfig.algorithm``, a
:class:`~darwin.components.ComponentSpec` of kind ``"algorithm"``: a built-in name or the
import path of a function decorated with :func:`advantage_estimator`
(``learner.algorithm = "my_lab.estimators:sign_advantage"``)::

    >>> import torch
    >>> from darwin.algos.estimators import AdvantageInputs, AdvantageOutput, advantage_estimator, get_estimator
    >>> @advantage_estimator(needs_critic=False)
    ... def sign_advantage(x: AdvantageInputs) -> AdvantageOutput:
    ...     return AdvantageOutput(torch.sign(x.rewards)[:, None] * x.response_mask)
    >>> x = AdvantageInputs(rewards=torch.tensor([1.0, -0.5]), response_mask=torch.ones(2, 2, dtype=torch.bool),
    ...                     trajectory_ids=["a", "b"], step_indices=torch.tensor([0, 0]),
    ...                     group_ids=["g", "g"], anchor_ids=["s0", "s1"])
    >>> sign_advantage.fn(x).advantages.tolist()
    [[1.0, 1.0], [-1.0, -1.0]]
    >>> get_estimator("grpo").needs_critic
    False
    >>> get_estimator("gpro")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    darwin.components.ComponentError: algorithm 'gpro' is not built in (did you mean 'grpo'?)...

Shapes: ``N`` step rows (the rows of one trajectory contiguous and in time order), ``R``
the longest response.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch

from darwin.algos.branching import sibling_advantages
from darwin.algos.gae import trajectory_gae
from darwin.algos.gigpo import gigpo_advantages
from darwin.algos.grpo import grpo_advantages
from darwin.algos.losses import masked_whiten
from darwin.components import ComponentSpec, build_component

__all__ = [
    "AdvantageInputs",
    "AdvantageOutput",
    "Estimator",
    "EstimatorConfig",
    "advantage_estimator",
    "get_estimator",
]


@dataclass(frozen=True)
class EstimatorConfig:
    """The learner's knobs that estimators read (from ``LearnerConfig``)."""

    gamma: float = 1.0
    lam: float = 0.95
    whiten: bool = True
    bootstrap_truncated: bool = False
    grpo_norm_by_std: bool = True
    grpo_weighting: Literal["trajectory", "step"] = "trajectory"
    gigpo_gamma: float = 0.95
    gigpo_omega: float = 1.0
    gigpo_step_norm: Literal["mean_norm", "mean_std_norm"] = "mean_norm"


@dataclass(frozen=True)
class AdvantageInputs:
    """One update batch as the estimators see it.

    Attributes:
        rewards: ``(N,)`` step rewards.
        response_mask: ``(N, R)`` bool.
        trajectory_ids: ``(N,)`` episode id of each row.
        step_indices: ``(N,)`` step index inside its trajectory.
        group_ids: ``(N,)`` group of each row (same task from the same start in group mode).
        anchor_ids: ``(N,)`` hash of the observation each step saw (GiGPO's anchor state).
        values: ``(N, R)`` critic values, or ``None`` without a critic.
        truncated: ``(N,)`` bool: the row's trajectory was cut short.
        next_values: ``(N,)`` the critic's ``V(s')`` at the state a truncated trajectory's last
            action led to, read on its last row; NaN where that state was not observed (then
            ``V`` of the last observed state, the last step's own, stands in), or ``None``.
        fork_ids: ``(N,)`` branching rollouts: the exact phone state each row acted from when
            other rows of the batch acted from it too (``StepRow.fork``; ``""``: none), or
            ``None``. The ``gae`` estimator gives those rows their sibling advantage
            (:func:`darwin.algos.branching.sibling_advantages`).
        settings: the learner's estimator settings.
    """

    rewards: torch.Tensor
    response_mask: torch.Tensor
    trajectory_ids: Sequence[Hashable]
    step_indices: torch.Tensor
    group_ids: Sequence[Hashable]
    anchor_ids: Sequence[Hashable]
    values: torch.Tensor | None = None
    truncated: torch.Tensor | None = None
    next_values: torch.Tensor | None = None
    fork_ids: Sequence[Hashable] | None = None
    settings: EstimatorConfig = field(default_factory=EstimatorConfig)


@dataclass(frozen=True)
class AdvantageOutput:
    """``advantages`` ``(N, R)`` (0 on padding) and ``returns`` ``(N, R)`` value targets, or
    ``None`` for critic-free estimators."""

    advantages: torch.Tensor
    returns: torch.Tensor | None = None


@dataclass(frozen=True)
class Estimator:
    """An advantage estimator: ``fn(inputs) -> AdvantageOutput``, and whether it needs a critic."""

    fn: Callable[[AdvantageInputs], AdvantageOutput]
    needs_critic: bool


def advantage_estimator(*, needs_critic: bool) -> Callable[[Callable[[AdvantageInputs], AdvantageOutput]], Estimator]:
    """Decorator: make ``fn(inputs) -> AdvantageOutput`` an :class:`Estimator` an experiment
    can name by its import path."""

    def wrap(fn: Callable[[AdvantageInputs], AdvantageOutput]) -> Estimator:
        return Estimator(fn, needs_critic)

    return wrap


def get_estimator(spec: ComponentSpec | str) -> Estimator:
    """The estimator ``spec`` names (a built-in name or an import path); a
    :class:`~darwin.components.ComponentError` with a "did you mean" otherwise."""
    estimator = build_component("algorithm", ComponentSpec.model_validate(spec))
    assert isinstance(estimator, Estimator)  # checked by build_component
    return estimator


@advantage_estimator(needs_critic=True)
def gae_estimator(x: AdvantageInputs) -> AdvantageOutput:
    """Token-level GAE over whole trajectories (the paper's PPO), :func:`trajectory_gae`.

    Rows with siblings from branching rollouts (``fork_ids``) take their sibling advantage
    on every token instead (the return over the mean of returns from the same state), before
    whitening; the value targets stay GAE's."""
    if x.values is None:
        raise ValueError("the 'gae' estimator needs critic values")
    s = x.settings
    forks = list(x.fork_ids) if x.fork_ids is not None else []
    branched = any(f != "" for f in forks)
    boot = None
    if s.bootstrap_truncated:
        # V(s'): the state after the cut where it was observed, else the last observed state
        # (the value before the last step's first token).
        boot = x.values[:, 0]
        if x.next_values is not None:
            boot = torch.where(torch.isfinite(x.next_values), x.next_values.to(boot.dtype), boot)
    advantages, returns = trajectory_gae(
        x.rewards,
        x.values,
        x.response_mask,
        list(x.trajectory_ids),
        x.step_indices,
        gamma=s.gamma,
        lam=s.lam,
        whiten=s.whiten and int(x.response_mask.sum()) >= 2 and not branched,
        truncated=x.truncated,
        bootstrap_values=boot,
    )
    if branched:
        mask = x.response_mask.bool()
        sibling, forked = sibling_advantages(x.rewards, list(x.trajectory_ids), x.step_indices, forks, gamma=s.gamma)
        sibling = sibling.to(device=advantages.device, dtype=advantages.dtype)
        advantages = torch.where(forked[:, None] & mask, sibling[:, None], advantages)
        if s.whiten and int(mask.sum()) >= 2:
            advantages = masked_whiten(advantages, mask.to(advantages.dtype)) * mask
    return AdvantageOutput(advantages, returns)


@advantage_estimator(needs_critic=False)
def grpo_estimator(x: AdvantageInputs) -> AdvantageOutput:
    """Group-normalised trajectory scores on every token, :func:`grpo_advantages`."""
    s = x.settings
    return AdvantageOutput(
        grpo_advantages(
            x.rewards,
            x.response_mask,
            list(x.trajectory_ids),
            list(x.group_ids),
            norm_by_std=s.grpo_norm_by_std,
            weighting=s.grpo_weighting,
        )
    )


@advantage_estimator(needs_critic=False)
def gigpo_estimator(x: AdvantageInputs) -> AdvantageOutput:
    """Episode advantage + omega x step advantage over anchor-state groups, :func:`gigpo_advantages`."""
    s = x.settings
    return AdvantageOutput(
        gigpo_advantages(
            x.rewards,
            x.response_mask,
            list(x.trajectory_ids),
            x.step_indices,
            list(x.group_ids),
            list(x.anchor_ids),
            gamma=s.gigpo_gamma,
            omega=s.gigpo_omega,
            step_norm=s.gigpo_step_norm,
            episode_norm_by_std=s.grpo_norm_by_std,
        )
    )
