"""PPO losses and masked helpers: thin, documented wrappers over verl 0.9.1's algorithm layer.

Everything here works on step rows: tensors of shape ``(batch, response_len)`` with a
``response_mask`` (1 for response tokens, 0 for padding). The maths is verl's
(``verl.trainer.ppo.core_algos`` and ``verl.utils.torch_functional``); the wrappers give it
explicit keyword arguments, typed results instead of metric dicts, and the paper's defaults.

Loss aggregation (``loss_agg_mode``, verl's ``agg_loss``):
``"token-mean"`` (default) averages over all valid tokens of the batch;
``"seq-mean-token-mean"`` averages tokens within a row, then rows;
``"seq-mean-token-sum"`` sums tokens within a row, then averages rows;
``"seq-mean-token-sum-norm"`` is the previous divided by ``response_len``;
``"token-sum"`` sums all valid tokens.
With gradient accumulation over micro-batches pass ``batch_num_tokens`` (valid tokens in the
whole mini-batch, for token-mean) or ``global_batch_size`` (rows in the mini-batch, for the
seq-mean modes) so that the summed micro-batch losses equal the mini-batch loss.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import torch
import verl.utils.torch_functional as verl_F
from omegaconf import OmegaConf
from verl.trainer.ppo import core_algos

__all__ = [
    "KL_ESTIMATORS",
    "LOSS_AGG_MODES",
    "PolicyLossOutput",
    "ValueLossOutput",
    "aggregate_loss",
    "entropy_from_logits",
    "kl_penalty",
    "masked_mean",
    "masked_whiten",
    "ppo_policy_loss",
    "value_loss",
]

LOSS_AGG_MODES = (
    "token-mean",
    "token-sum",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
)
"""Values accepted by ``loss_agg_mode`` (verl's ``agg_loss``)."""

KL_ESTIMATORS = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "k1+", "k3+", "low_var_kl+")
"""Values accepted by ``kl_penalty(kind=...)``; see its docstring."""


def _check_choice(value: str, choices: tuple[str, ...], name: str) -> None:
    if value not in choices:
        close = difflib.get_close_matches(value, choices, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"{name}={value!r} is not one of {list(choices)}{hint}")


def _check_same_shape(**tensors: torch.Tensor) -> None:
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"shapes must match, got {shapes}")


def _global_batch_info(batch_num_tokens: int | None, global_batch_size: int | None) -> dict[str, int]:
    info: dict[str, int] = {}
    if batch_num_tokens is not None:
        info["batch_num_tokens"] = int(batch_num_tokens)
    if global_batch_size is not None:
        info["global_batch_size"] = int(global_batch_size)
    return info


@dataclass(frozen=True)
class PolicyLossOutput:
    """Result of :func:`ppo_policy_loss`.

    Attributes:
        loss: scalar tensor to minimise (``-`` clipped surrogate, aggregated).
        clip_fraction: share of valid tokens where the clipped term was used
            (``-A * clip(ratio) > -A * ratio``); verl's ``actor/pg_clipfrac``.
        clip_fraction_lower: share of valid tokens hit by the dual-clip bound ``clip_ratio_c``
            (negative advantages only); verl's ``actor/pg_clipfrac_lower``.
        approx_kl: masked mean of ``old_log_prob - log_prob``; verl's ``actor/ppo_kl``.
    """

    loss: torch.Tensor
    clip_fraction: float
    clip_fraction_lower: float
    approx_kl: float


@dataclass(frozen=True)
class ValueLossOutput:
    """Result of :func:`value_loss`.

    Attributes:
        loss: scalar tensor, ``0.5 * max((V - R)^2, (V_clipped - R)^2)`` aggregated.
        clip_fraction: share of valid tokens where the clipped term was larger;
            verl's ``critic/vf_clipfrac``.
    """

    loss: torch.Tensor
    clip_fraction: float


def ppo_policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float = 3.0,
    loss_agg_mode: str = "token-mean",
    batch_num_tokens: int | None = None,
    global_batch_size: int | None = None,
) -> PolicyLossOutput:
    """PPO clipped surrogate loss (verl's registered policy loss ``"vanilla"``).

    Per token, with ``ratio = exp(log_prob - old_log_prob)`` (log-ratio clamped to +-20):

        L = max(-A * ratio, -A * clip(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high))
        L = min(L, -A * clip_ratio_c)          where A < 0 (dual-clip PPO)

    then aggregated over valid tokens with ``loss_agg_mode``.

    Args:
        old_log_prob: ``(batch, response_len)`` log-probs of the sampled tokens under the
            rollout (behaviour) policy.
        log_prob: ``(batch, response_len)`` log-probs under the current policy (carries grad).
        advantages: ``(batch, response_len)``.
        response_mask: ``(batch, response_len)`` 1 for response tokens, 0 for padding.
        clip_ratio: symmetric clip epsilon (paper: 0.2).
        clip_ratio_low: lower epsilon, ``ratio >= 1 - clip_ratio_low``; defaults to ``clip_ratio``.
        clip_ratio_high: upper epsilon, ``ratio <= 1 + clip_ratio_high``; defaults to
            ``clip_ratio``. A larger value than ``clip_ratio_low`` is DAPO's "clip-higher".
        clip_ratio_c: dual-clip bound for negative advantages (> 1; verl's default 3.0). Pass
            ``float("inf")`` to turn dual-clip off.
        loss_agg_mode: one of :data:`LOSS_AGG_MODES`.
        batch_num_tokens: valid tokens of the whole mini-batch, for token-mean with gradient
            accumulation; ``None`` uses this batch's count.
        global_batch_size: rows of the whole mini-batch, for the seq-mean modes.

    Returns:
        :class:`PolicyLossOutput` with the scalar loss and the clip statistics.
    """
    _check_same_shape(
        old_log_prob=old_log_prob,
        log_prob=log_prob,
        advantages=advantages,
        response_mask=response_mask,
    )
    _check_choice(loss_agg_mode, LOSS_AGG_MODES, "loss_agg_mode")
    low = clip_ratio if clip_ratio_low is None else clip_ratio_low
    high = clip_ratio if clip_ratio_high is None else clip_ratio_high
    if not (0.0 <= low < 1.0 and high >= 0.0):
        raise ValueError(f"need 0 <= clip_ratio_low < 1 and clip_ratio_high >= 0, got {low}, {high}")
    if not clip_ratio_c > 1.0:
        raise ValueError(f"clip_ratio_c must be > 1 (dual-clip bound), got {clip_ratio_c}")
    # verl's policy losses read their settings from an actor config (ActorConfig or DictConfig).
    config = OmegaConf.create(
        {
            "clip_ratio": clip_ratio,
            "clip_ratio_low": low,
            "clip_ratio_high": high,
            "clip_ratio_c": clip_ratio_c,
            "global_batch_info": _global_batch_info(batch_num_tokens, global_batch_size),
        }
    )
    vanilla = core_algos.get_policy_loss_fn("vanilla")
    loss, metrics = vanilla(
        old_log_prob=old_log_prob,
        log_prob=log_prob,
        advantages=advantages,
        response_mask=response_mask,
        loss_agg_mode=loss_agg_mode,
        config=config,
    )
    return PolicyLossOutput(
        loss=loss,
        clip_fraction=float(metrics["actor/pg_clipfrac"]),
        clip_fraction_lower=float(metrics["actor/pg_clipfrac_lower"]),
        approx_kl=float(metrics["actor/ppo_kl"]),
    )


def value_loss(
    new_values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    clip_range_value: float = 0.5,
    loss_agg_mode: str = "token-mean",
    batch_num_tokens: int | None = None,
    global_batch_size: int | None = None,
) -> ValueLossOutput:
    """Clipped value loss (verl's ``compute_value_loss``).

    Per token, ``V_clipped = clip(new_values, old_values - c, old_values + c)`` and

        L = 0.5 * max((new_values - returns)^2, (V_clipped - returns)^2)

    aggregated over valid tokens with ``loss_agg_mode``.

    Args:
        new_values: ``(batch, response_len)`` current critic predictions (carries grad).
        old_values: ``(batch, response_len)`` critic values at rollout time (the ones GAE used).
        returns: ``(batch, response_len)`` value targets from :func:`darwin.algos.gae.trajectory_gae`.
        response_mask: ``(batch, response_len)`` 1 for response tokens, 0 for padding.
        clip_range_value: ``c`` above (verl's critic default 0.5; returns here lie in [0, 1]).
            ``float("inf")`` gives the plain squared error.
        loss_agg_mode: one of :data:`LOSS_AGG_MODES`.
        batch_num_tokens: valid tokens of the whole mini-batch (token-mean with accumulation).
        global_batch_size: rows of the whole mini-batch (seq-mean modes with accumulation).

    Returns:
        :class:`ValueLossOutput` with the scalar loss and the clip fraction.
    """
    _check_same_shape(new_values=new_values, old_values=old_values, returns=returns, response_mask=response_mask)
    _check_choice(loss_agg_mode, LOSS_AGG_MODES, "loss_agg_mode")
    if not clip_range_value >= 0.0:
        raise ValueError(f"clip_range_value must be >= 0, got {clip_range_value}")
    loss, clipfrac = core_algos.compute_value_loss(
        vpreds=new_values,
        returns=returns,
        values=old_values,
        response_mask=response_mask,
        cliprange_value=clip_range_value,
        loss_agg_mode=loss_agg_mode,
        **_global_batch_info(batch_num_tokens, global_batch_size),
    )
    return ValueLossOutput(loss=loss, clip_fraction=float(clipfrac))


def kl_penalty(log_prob: torch.Tensor, ref_log_prob: torch.Tensor, *, kind: str = "low_var_kl") -> torch.Tensor:
    """Per-token KL estimate between the policy and a reference policy (verl's ``kl_penalty``).

    With ``d = log_prob - ref_log_prob`` (log pi - log pi_ref, on sampled tokens):

    - ``"kl"`` / ``"k1"``: ``d`` (unbiased, high variance, can be negative);
    - ``"abs"``: ``|d|``;
    - ``"mse"`` / ``"k2"``: ``0.5 * d^2``;
    - ``"low_var_kl"`` / ``"k3"`` (default, verl's actor KL-loss default):
      ``exp(-d) - (-d) - 1``, with ``-d`` clamped to +-20 and the result to +-10;
    - a ``"+"`` suffix (``"k1+"``, ``"k3+"``, ``"low_var_kl+"``) keeps that forward value but
      takes the gradient of k2 (straight-through), which is the unbiased KL gradient.

    Args:
        log_prob: ``(batch, response_len)`` log-probs under the current policy.
        ref_log_prob: ``(batch, response_len)`` log-probs under the reference policy.
        kind: one of :data:`KL_ESTIMATORS`.

    Returns:
        ``(batch, response_len)`` per-token estimates; aggregate with :func:`aggregate_loss` or
        :func:`masked_mean`, or subtract ``beta *`` it from token rewards.
    """
    _check_same_shape(log_prob=log_prob, ref_log_prob=ref_log_prob)
    _check_choice(kind, KL_ESTIMATORS, "kind")
    return core_algos.kl_penalty(log_prob, ref_log_prob, kind)  # type: ignore[arg-type]  # verl annotates torch.FloatTensor, the legacy name; it takes any float tensor


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the categorical distribution at each position (verl's ``entropy_from_logits``).

    ``H = logsumexp(logits) - sum(softmax(logits) * logits)``.

    Args:
        logits: ``(..., vocab_size)`` unnormalised log-probabilities.

    Returns:
        ``(...)`` entropies in nats, e.g. ``(batch, response_len)``.
    """
    return verl_F.entropy_from_logits(logits)


def aggregate_loss(
    loss_mat: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    loss_agg_mode: str = "token-mean",
    batch_num_tokens: int | None = None,
    global_batch_size: int | None = None,
) -> torch.Tensor:
    """Aggregate a per-token loss into a scalar (verl's ``agg_loss``).

    Args:
        loss_mat: ``(batch, response_len)`` per-token loss (e.g. KL estimate, entropy).
        response_mask: ``(batch, response_len)`` 1 for response tokens, 0 for padding.
        loss_agg_mode: one of :data:`LOSS_AGG_MODES`.
        batch_num_tokens: valid tokens of the whole mini-batch (token-mean with accumulation).
        global_batch_size: rows of the whole mini-batch (seq-mean modes with accumulation).

    Returns:
        scalar tensor.
    """
    _check_same_shape(loss_mat=loss_mat, response_mask=response_mask)
    _check_choice(loss_agg_mode, LOSS_AGG_MODES, "loss_agg_mode")
    return core_algos.agg_loss(
        loss_mat=loss_mat,
        loss_mask=response_mask,
        loss_agg_mode=loss_agg_mode,
        **_global_batch_info(batch_num_tokens, global_batch_size),
    )


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is 1 (verl's ``masked_mean``; ``+1e-8`` in the divisor).

    Args:
        values: any shape.
        mask: same shape as ``values``; NaNs under mask 0 are ignored.
        dim: dimension to reduce; ``None`` reduces everything to a scalar.

    Returns:
        ``values`` reduced over ``dim``.
    """
    _check_same_shape(values=values, mask=mask)
    return verl_F.masked_mean(values, mask, axis=dim)


def masked_whiten(values: torch.Tensor, mask: torch.Tensor, *, shift_mean: bool = True) -> torch.Tensor:
    """Normalise ``values`` to zero mean and unit variance over the mask-1 entries.

    verl's ``masked_whiten``: ``(x - mean) / sqrt(var + 1e-8)`` with the unbiased (``n - 1``)
    variance over all mask-1 entries; needs at least 2 of them. Entries under mask 0 are
    transformed too (ignore them).

    Args:
        values: any shape, e.g. ``(batch, response_len)`` advantages.
        mask: same shape as ``values``.
        shift_mean: ``False`` adds the mean back after scaling.

    Returns:
        same shape as ``values``.
    """
    _check_same_shape(values=values, mask=mask)
    if int(mask.bool().sum()) < 2:
        raise ValueError("masked_whiten needs at least 2 mask-1 entries")
    return verl_F.masked_whiten(values, mask, shift_mean=shift_mean)
