"""PPO loss wrappers over verl on tiny hand-computed tensors."""

from __future__ import annotations

import math

import pytest
import torch

from darwin.algos.losses import (
    aggregate_loss,
    entropy_from_logits,
    kl_penalty,
    masked_mean,
    masked_whiten,
    ppo_policy_loss,
    value_loss,
)


def log(x: list[list[float]]) -> torch.Tensor:
    return torch.log(torch.tensor(x, dtype=torch.float64))


ZEROS = torch.zeros(1, 2, dtype=torch.float64)
ONES = torch.ones(1, 2, dtype=torch.float64)

# ---------------------------------------------------------------- policy loss (clip 0.2)


def test_inside_clip_range_is_plain_surrogate():
    # ratios 1.1 (A = 2) and 0.9 (A = -1): both inside [0.8, 1.2]
    # L = mean(-2 * 1.1, 1 * 0.9) = (-2.2 + 0.9) / 2 = -0.65
    out = ppo_policy_loss(ZEROS, log([[1.1, 0.9]]), torch.tensor([[2.0, -1.0]], dtype=torch.float64), ONES)
    assert out.loss.item() == pytest.approx(-0.65, abs=1e-9)
    assert out.clip_fraction == 0.0 and out.clip_fraction_lower == 0.0


def test_outside_clip_range_is_clipped():
    # ratio 1.5, A = 1:  max(-1.5, -1.2) = -1.2 (clipped)
    # ratio 0.5, A = -1: max(0.5, 0.8) = 0.8 (clipped)
    out = ppo_policy_loss(ZEROS, log([[1.5, 0.5]]), torch.tensor([[1.0, -1.0]], dtype=torch.float64), ONES)
    assert out.loss.item() == pytest.approx((-1.2 + 0.8) / 2, abs=1e-9)
    assert out.clip_fraction == pytest.approx(1.0, abs=1e-7)
    # approx_kl = mean(old - new) = -(log 1.5 + log 0.5) / 2
    assert out.approx_kl == pytest.approx(-(math.log(1.5) + math.log(0.5)) / 2, abs=1e-9)


def test_clip_only_when_it_lowers_the_objective():
    # ratio 1.5 with A = -1: -A * ratio = 1.5 > -A * 1.2 = 1.2 -> unclipped term kept (pessimistic)
    # ratio 0.5 with A = 1: -0.5 > -0.8 -> unclipped term kept
    out = ppo_policy_loss(ZEROS, log([[1.5, 0.5]]), torch.tensor([[-1.0, 1.0]], dtype=torch.float64), ONES)
    assert out.loss.item() == pytest.approx((1.5 - 0.5) / 2, abs=1e-9)
    assert out.clip_fraction == 0.0


def test_gradient_is_zero_where_clipped():
    log_prob = log([[1.1, 1.5]]).requires_grad_(True)
    adv = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    ppo_policy_loss(ZEROS, log_prob, adv, ONES).loss.backward()
    # d/dlogp of -A * exp(logp - old) / 2 = -A * ratio / 2 inside; 0 where clipped
    torch.testing.assert_close(log_prob.grad, torch.tensor([[-1.1 / 2, 0.0]], dtype=torch.float64))


def test_clip_higher():
    # ratio 1.25, A = 1: symmetric 0.2 clips to 1.2; clip_ratio_high = 0.28 leaves it at 1.25
    # ratio 0.75, A = -1: clip_ratio_low = 0.2 clips to 0.8 in both cases
    lp, adv = log([[1.25, 0.75]]), torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    sym = ppo_policy_loss(ZEROS, lp, adv, ONES)
    high = ppo_policy_loss(ZEROS, lp, adv, ONES, clip_ratio_low=0.2, clip_ratio_high=0.28)
    assert sym.loss.item() == pytest.approx((-1.2 + 0.8) / 2, abs=1e-9)
    assert sym.clip_fraction == pytest.approx(1.0, abs=1e-7)
    assert high.loss.item() == pytest.approx((-1.25 + 0.8) / 2, abs=1e-9)
    assert high.clip_fraction == pytest.approx(0.5, abs=1e-7)


def test_dual_clip_bounds_negative_advantages():
    # ratio 5, A = -1: max(5, 1.2) = 5, dual-clip min(5, 3) = 3
    out = ppo_policy_loss(
        torch.zeros(1, 1),
        torch.log(torch.tensor([[5.0]])),
        torch.tensor([[-1.0]]),
        torch.ones(1, 1),
    )
    assert out.loss.item() == pytest.approx(3.0, abs=1e-6)
    assert out.clip_fraction_lower == pytest.approx(1.0, abs=1e-7)
    off = ppo_policy_loss(
        torch.zeros(1, 1),
        torch.log(torch.tensor([[5.0]])),
        torch.tensor([[-1.0]]),
        torch.ones(1, 1),
        clip_ratio_c=float("inf"),
    )
    assert off.loss.item() == pytest.approx(5.0, abs=1e-5)


def test_masked_tokens_do_not_count():
    mask = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    out = ppo_policy_loss(ZEROS, log([[1.1, 50.0]]), torch.tensor([[1.0, 1.0]], dtype=torch.float64), mask)
    assert out.loss.item() == pytest.approx(-1.1, abs=1e-9)
    assert out.clip_fraction == 0.0


def test_loss_agg_modes_and_global_token_count():
    # row 0: 1 token with loss -1.1; row 1: 2 tokens with losses -1.0, -1.0 (ratio 1, A = 1)
    lp = log([[1.1, 1.0], [1.0, 1.0]])
    adv = torch.ones(2, 2, dtype=torch.float64)
    mask = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    old = torch.zeros(2, 2, dtype=torch.float64)
    token_mean = ppo_policy_loss(old, lp, adv, mask).loss.item()
    seq_mean = ppo_policy_loss(old, lp, adv, mask, loss_agg_mode="seq-mean-token-mean").loss.item()
    accum = ppo_policy_loss(old, lp, adv, mask, batch_num_tokens=6).loss.item()
    assert token_mean == pytest.approx(-3.1 / 3, abs=1e-9)
    assert seq_mean == pytest.approx((-1.1 + -1.0) / 2, abs=1e-7)  # verl adds 1e-8 to counts
    assert accum == pytest.approx(-3.1 / 6, abs=1e-9)
    with pytest.raises(ValueError, match="did you mean 'token-mean'"):
        ppo_policy_loss(old, lp, adv, mask, loss_agg_mode="token_mean")


def test_policy_loss_argument_checks():
    with pytest.raises(ValueError, match="shapes must match"):
        ppo_policy_loss(torch.zeros(1, 2), torch.zeros(1, 3), torch.zeros(1, 2), torch.ones(1, 2))
    with pytest.raises(ValueError, match="clip_ratio_c"):
        ppo_policy_loss(
            torch.zeros(1, 2),
            torch.zeros(1, 2),
            torch.zeros(1, 2),
            torch.ones(1, 2),
            clip_ratio_c=1.0,
        )


# ---------------------------------------------------------------- value loss


def test_clipped_value_loss_by_hand():
    # token 0: new 0.5, old 0.0, return 1.0, clip 0.2 -> V_clip = 0.2
    #   unclipped (0.5 - 1)^2 = 0.25, clipped (0.2 - 1)^2 = 0.64 -> max 0.64 (clipped term used)
    # token 1: new 0.1, old 0.0, return 0.0 -> both 0.01, clipped term not larger
    # loss = 0.5 * mean(0.64, 0.01) = 0.1625, clip fraction 0.5
    out = value_loss(
        torch.tensor([[0.5, 0.1]]),
        torch.tensor([[0.0, 0.0]]),
        torch.tensor([[1.0, 0.0]]),
        torch.ones(1, 2),
        clip_range_value=0.2,
    )
    assert out.loss.item() == pytest.approx(0.1625, abs=1e-6)
    assert out.clip_fraction == pytest.approx(0.5, abs=1e-7)


def test_value_loss_unclipped_is_half_mse_with_mask():
    new, ret = torch.tensor([[0.3, 0.9, 5.0]]), torch.tensor([[1.0, 0.5, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    out = value_loss(new, new, ret, mask, clip_range_value=float("inf"))
    assert out.loss.item() == pytest.approx(0.5 * (0.49 + 0.16) / 2, abs=1e-6)
    assert out.clip_fraction == 0.0


# ---------------------------------------------------------------- KL, entropy, helpers


def test_kl_estimators_by_hand():
    lp = torch.tensor([[math.log(0.5), math.log(0.2)]])
    ref = torch.tensor([[math.log(0.25), math.log(0.4)]])
    d = lp - ref  # [log 2, log 0.5]
    torch.testing.assert_close(kl_penalty(lp, ref, kind="k1"), d)
    torch.testing.assert_close(kl_penalty(lp, ref, kind="k2"), 0.5 * d**2)
    # k3 = exp(-d) + d - 1: [0.5 + log 2 - 1, 2 + log 0.5 - 1]
    expected_k3 = torch.tensor([[0.5 + math.log(2) - 1, 1 - math.log(2)]])
    torch.testing.assert_close(kl_penalty(lp, ref), expected_k3)
    torch.testing.assert_close(kl_penalty(lp, ref, kind="abs"), d.abs())


def test_kl_straight_through_gradient_is_k2s():
    lp = torch.tensor([[0.3, -0.2]], requires_grad=True)
    ref = torch.zeros(1, 2)
    kl = kl_penalty(lp, ref, kind="k3+")
    torch.testing.assert_close(kl.detach(), kl_penalty(lp.detach(), ref, kind="k3"))
    kl.sum().backward()
    torch.testing.assert_close(lp.grad, lp.detach() - ref)  # d/dx 0.5 x^2 = x


def test_kl_unknown_kind_suggests():
    with pytest.raises(ValueError, match="did you mean 'low_var_kl'"):
        kl_penalty(torch.zeros(1), torch.zeros(1), kind="low_var_k")


def test_entropy_from_logits():
    logits = torch.zeros(2, 3, 4)  # uniform over 4 -> log 4
    torch.testing.assert_close(entropy_from_logits(logits), torch.full((2, 3), math.log(4)))
    peaked = torch.tensor([[100.0, 0.0, 0.0]])
    assert entropy_from_logits(peaked).item() == pytest.approx(0.0, abs=1e-6)
    # p = (0.5, 0.5, 0) up to e^-100: entropy log 2
    assert entropy_from_logits(torch.tensor([[0.0, 0.0, -100.0]])).item() == pytest.approx(math.log(2), abs=1e-6)


def test_masked_helpers():
    x = torch.tensor([[1.0, 2.0, 100.0], [3.0, float("nan"), 4.0]])
    m = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert masked_mean(x, m).item() == pytest.approx(2.0, abs=1e-6)
    torch.testing.assert_close(masked_mean(x, m, dim=1), torch.tensor([1.5, 3.0]))
    w = masked_whiten(torch.tensor([1.0, 2.0, 3.0, 50.0]), torch.tensor([1.0, 1.0, 1.0, 0.0]))
    torch.testing.assert_close(w[:3], torch.tensor([-1.0, 0.0, 1.0]), atol=1e-6, rtol=0)  # sample std 1
    with pytest.raises(ValueError, match="at least 2"):
        masked_whiten(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 0.0]))


def test_aggregate_loss_modes():
    loss = torch.tensor([[1.0, 3.0, 9.0], [2.0, 9.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert aggregate_loss(loss, mask).item() == pytest.approx(2.0)
    assert aggregate_loss(loss, mask, loss_agg_mode="seq-mean-token-mean").item() == pytest.approx((2.0 + 2.0) / 2)
    assert aggregate_loss(loss, mask, loss_agg_mode="seq-mean-token-sum").item() == pytest.approx((4.0 + 2.0) / 2)
    assert aggregate_loss(loss, mask, loss_agg_mode="token-sum").item() == pytest.approx(6.0)
    assert aggregate_loss(loss, mask, batch_num_tokens=6).item() == pytest.approx(1.0)
