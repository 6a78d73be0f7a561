"""trajectory_gae against a hand-written loop implementation of paper Eq. 8 and hand-computed values."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from verl.trainer.ppo.core_algos import compute_gae_advantage_return

from darwin.algos.gae import trajectory_gae
from darwin.algos.losses import masked_whiten

# --------------------------------------------------------------------------------------------
# Reference: paper Eq. 8 written out with loops, one trajectory at a time.
#
#   delta_t^k = gamma * V(s_t^{k+1}) - V(s_t^k)               for k < n_t
#   delta_t^n = r_t + gamma * V(s_{t+1}^1) - V(s_t^n)          for the last token n = n_t
#   A_t^k     = delta_t^k + gamma * lam * A_t^{k+1}            (the token after the last one of
#                                                              step t is the first of step t+1)
#   R_t^k     = A_t^k + V(s_t^k)
#   V(s_T^1) = 0 after the last step (or the bootstrap value if truncated and asked), A_T^1 = 0.
# --------------------------------------------------------------------------------------------


def reference_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    trajectory_ids: list,
    step_indices: list[int],
    gamma: float,
    lam: float,
    whiten: bool,
    truncated: list[bool] | None = None,
    bootstrap_values: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    num_steps, max_len = values.shape
    adv = torch.zeros(num_steps, max_len, dtype=torch.float64)
    ret = torch.zeros(num_steps, max_len, dtype=torch.float64)
    for tid in dict.fromkeys(trajectory_ids):
        rows = [i for i in range(num_steps) if trajectory_ids[i] == tid]
        rows.sort(key=lambda i: step_indices[i])  # time order
        valid = {i: [k for k in range(max_len) if mask[i, k]] for i in rows}
        last_row = rows[-1]
        v_after_last = 0.0
        if bootstrap_values is not None and truncated is not None and truncated[last_row]:
            v_after_last = float(bootstrap_values[last_row])
        a_next = 0.0  # A of the token after the current one (A_T^1 = 0)
        for t in reversed(range(len(rows))):
            i = rows[t]
            cols = valid[i]
            for j in reversed(range(len(cols))):
                k = cols[j]
                v = float(values[i, k])
                if j < len(cols) - 1:  # inside the step: bootstrap from token k+1
                    delta = gamma * float(values[i, cols[j + 1]]) - v
                else:  # last token of step t: reward + first token of step t+1
                    if t + 1 < len(rows):
                        nxt = rows[t + 1]
                        v_next = float(values[nxt, valid[nxt][0]])
                    else:
                        v_next = v_after_last
                    delta = float(rewards[i]) + gamma * v_next - v
                a = delta + gamma * lam * a_next
                adv[i, k] = a
                ret[i, k] = a + v
                a_next = a
    if whiten:
        xs = [float(adv[i, k]) for i in range(num_steps) for k in range(max_len) if mask[i, k]]
        mean = sum(xs) / len(xs)
        var = sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)
        for i in range(num_steps):
            for k in range(max_len):
                if mask[i, k]:
                    adv[i, k] = (adv[i, k] - mean) / math.sqrt(var + 1e-8)
    return adv, ret


@dataclass
class Batch:
    rewards: torch.Tensor
    values: torch.Tensor
    mask: torch.Tensor
    trajectory_ids: list
    step_indices: list[int]
    truncated: list[bool]
    bootstrap_values: torch.Tensor

    def permuted(self, perm: torch.Tensor) -> Batch:
        p = perm.tolist()
        return Batch(
            self.rewards[perm],
            self.values[perm],
            self.mask[perm],
            [self.trajectory_ids[i] for i in p],
            [self.step_indices[i] for i in p],
            [self.truncated[i] for i in p],
            self.bootstrap_values[perm],
        )


def random_batch(seed: int, max_len: int = 7, holes: bool = False, dtype=torch.float64) -> Batch:
    """Random trajectories of mixed lengths as right-padded step rows, in trajectory-step order."""
    g = torch.Generator().manual_seed(seed)
    num_traj = int(torch.randint(1, 6, (1,), generator=g))
    rewards, values, masks, tids, steps, trunc, boots = [], [], [], [], [], [], []
    for j in range(num_traj):
        n_steps = int(torch.randint(1, 6, (1,), generator=g))
        is_trunc = bool(torch.rand(1, generator=g) < 0.5)
        offset = int(torch.randint(0, 3, (1,), generator=g))  # steps need not start at 0
        for t in range(n_steps):
            length = int(torch.randint(1, max_len + 1, (1,), generator=g))
            m = torch.zeros(max_len, dtype=torch.long)
            m[:length] = 1
            if holes and length > 2:  # mask-0 tokens inside the response (skipped, like verl)
                m[int(torch.randint(1, length - 1, (1,), generator=g))] = 0
            v = torch.rand(max_len, generator=g, dtype=dtype)
            v[m == 0] = torch.randn(int((m == 0).sum()), generator=g, dtype=dtype) * 100  # junk
            masks.append(m)
            values.append(v)
            rewards.append(
                float(torch.rand(1, generator=g))
                if t == n_steps - 1
                else float(torch.rand(1, generator=g) < 0.2) * -0.1
            )
            tids.append(f"traj-{j}")
            steps.append(offset + t)
            trunc.append(is_trunc)
            boots.append(float(torch.rand(1, generator=g)))
    return Batch(
        torch.tensor(rewards, dtype=dtype),
        torch.stack(values),
        torch.stack(masks),
        tids,
        steps,
        trunc,
        torch.tensor(boots, dtype=dtype),
    )


def run(b: Batch, *, gamma: float, lam: float, whiten: bool, bootstrap: bool = False):
    return trajectory_gae(
        b.rewards,
        b.values,
        b.mask,
        b.trajectory_ids,
        b.step_indices,
        gamma=gamma,
        lam=lam,
        whiten=whiten,
        truncated=b.truncated,
        bootstrap_values=b.bootstrap_values if bootstrap else None,
    )


def ref(b: Batch, *, gamma: float, lam: float, whiten: bool, bootstrap: bool = False):
    return reference_gae(
        b.rewards,
        b.values,
        b.mask,
        b.trajectory_ids,
        b.step_indices,
        gamma,
        lam,
        whiten,
        b.truncated,
        b.bootstrap_values if bootstrap else None,
    )


GAMMA_LAM = [(1.0, 0.95), (1.0, 1.0), (0.99, 0.95), (0.9, 1.0), (1.0, 0.0), (0.0, 0.5), (0.5, 0.5)]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(("gamma", "lam"), GAMMA_LAM)
@pytest.mark.parametrize("whiten", [False, True])
@pytest.mark.parametrize("bootstrap", [False, True])
def test_matches_reference_on_random_trajectories(seed, gamma, lam, whiten, bootstrap):
    b = random_batch(seed)
    if whiten and int(b.mask.sum()) < 2:
        pytest.skip("whitening needs two tokens")
    perm = torch.randperm(len(b.step_indices), generator=torch.Generator().manual_seed(1000 + seed))
    b = b.permuted(perm)  # rows in shuffled order
    adv, ret = run(b, gamma=gamma, lam=lam, whiten=whiten, bootstrap=bootstrap)
    adv_ref, ret_ref = ref(b, gamma=gamma, lam=lam, whiten=whiten, bootstrap=bootstrap)
    torch.testing.assert_close(adv, adv_ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(ret, ret_ref, atol=1e-6, rtol=0)


@pytest.mark.parametrize("seed", range(4))
def test_mask_holes_inside_a_response_are_skipped(seed):
    b = random_batch(seed, holes=True)
    adv, ret = run(b, gamma=0.95, lam=0.9, whiten=False, bootstrap=True)
    adv_ref, ret_ref = ref(b, gamma=0.95, lam=0.9, whiten=False, bootstrap=True)
    torch.testing.assert_close(adv, adv_ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(ret, ret_ref, atol=1e-6, rtol=0)


@pytest.mark.parametrize("seed", range(4))
def test_shuffled_rows_are_scattered_back(seed):
    b = random_batch(seed)
    perm = torch.randperm(len(b.step_indices), generator=torch.Generator().manual_seed(seed))
    adv, ret = run(b, gamma=1.0, lam=0.95, whiten=True)
    adv_p, ret_p = run(b.permuted(perm), gamma=1.0, lam=0.95, whiten=True)
    torch.testing.assert_close(adv_p, adv[perm], atol=1e-12, rtol=0)
    torch.testing.assert_close(ret_p, ret[perm], atol=1e-12, rtol=0)


def test_float32_inputs_keep_dtype_and_precision():
    b64 = random_batch(3)
    b32 = Batch(
        b64.rewards.float(),
        b64.values.float(),
        b64.mask,
        b64.trajectory_ids,
        b64.step_indices,
        b64.truncated,
        b64.bootstrap_values.float(),
    )
    adv, ret = run(b32, gamma=1.0, lam=0.95, whiten=False, bootstrap=True)
    assert adv.dtype == ret.dtype == torch.float32
    adv_ref, ret_ref = ref(b32, gamma=1.0, lam=0.95, whiten=False, bootstrap=True)
    torch.testing.assert_close(adv.double(), adv_ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(ret.double(), ret_ref, atol=1e-6, rtol=0)


def test_padding_is_zero_and_padding_values_are_ignored():
    b = random_batch(5)
    adv, ret = run(b, gamma=1.0, lam=0.95, whiten=True)
    assert bool((adv[b.mask == 0] == 0).all()) and bool((ret[b.mask == 0] == 0).all())
    other = b.values.clone()
    other[b.mask == 0] = -7.0
    adv2, ret2 = trajectory_gae(b.rewards, other, b.mask, b.trajectory_ids, b.step_indices)
    torch.testing.assert_close(adv2, adv, atol=0, rtol=0)
    torch.testing.assert_close(ret2, ret, atol=0, rtol=0)


def test_truncated_without_bootstrap_is_like_terminal():
    b = random_batch(2)
    as_terminal = trajectory_gae(
        b.rewards,
        b.values,
        b.mask,
        b.trajectory_ids,
        b.step_indices,
        whiten=False,
        truncated=[False] * len(b.truncated),
    )
    default = trajectory_gae(
        b.rewards,
        b.values,
        b.mask,
        b.trajectory_ids,
        b.step_indices,
        whiten=False,
        truncated=b.truncated,
    )
    torch.testing.assert_close(default, as_terminal, atol=0, rtol=0)


def test_bootstrap_ignored_for_terminal_trajectories():
    b = random_batch(4)
    no_trunc = [False] * len(b.truncated)
    with_boot = trajectory_gae(
        b.rewards,
        b.values,
        b.mask,
        b.trajectory_ids,
        b.step_indices,
        whiten=False,
        truncated=no_trunc,
        bootstrap_values=b.bootstrap_values,
    )
    without = trajectory_gae(b.rewards, b.values, b.mask, b.trajectory_ids, b.step_indices, whiten=False)
    torch.testing.assert_close(with_boot, without, atol=0, rtol=0)


def test_gamma_lam_one_gives_monte_carlo_returns():
    """gamma = lam = 1: R = sum of the trajectory's rewards from this step on (+ bootstrap), A = R - V."""
    b = random_batch(6)
    adv, ret = run(b, gamma=1.0, lam=1.0, whiten=False, bootstrap=True)
    for i, tid in enumerate(b.trajectory_ids):
        rows = [j for j, t in enumerate(b.trajectory_ids) if t == tid]
        future = sum(float(b.rewards[j]) for j in rows if b.step_indices[j] >= b.step_indices[i])
        last = max(rows, key=lambda j: b.step_indices[j])
        if b.truncated[last]:
            future += float(b.bootstrap_values[last])
        valid = b.mask[i].bool()
        torch.testing.assert_close(ret[i][valid], torch.full_like(ret[i][valid], future), atol=1e-9, rtol=0)
        torch.testing.assert_close(adv[i][valid], ret[i][valid] - b.values[i][valid], atol=1e-9, rtol=0)


def test_whiten_is_masked_whiten_of_raw_advantages():
    b = random_batch(7)
    raw, ret = run(b, gamma=1.0, lam=0.95, whiten=False)
    white, ret_w = run(b, gamma=1.0, lam=0.95, whiten=True)
    torch.testing.assert_close(ret_w, ret, atol=0, rtol=0)
    expected = masked_whiten(raw, b.mask.double()) * b.mask
    torch.testing.assert_close(white, expected, atol=1e-9, rtol=0)
    valid = white[b.mask.bool()]
    assert abs(float(valid.mean())) < 1e-9 and abs(float(valid.std()) - 1.0) < 1e-6


# --------------------------------------------------------------------------------------------
# Tiny example by hand. Trajectory "A" (terminal or truncated), rows given last step first:
#   step 0: tokens V = [0.5, 0.2], reward 0      step 1: token V = [0.6], reward 1
# Trajectory "B": one step, one token V = [0.3], reward 0, terminal.
# gamma = 0.9, lam = 0.5 (gamma * lam = 0.45).
#   A step 1 tok 0: delta = 1 + 0.9 * 0 - 0.6 = 0.4                 A = 0.4       R = 1.0
#   A step 0 tok 1: delta = 0 + 0.9 * 0.6 - 0.2 = 0.34              A = 0.34 + 0.45 * 0.4 = 0.52
#                                                                                R = 0.72
#   A step 0 tok 0: delta = 0.9 * 0.2 - 0.5 = -0.32                 A = -0.32 + 0.45 * 0.52 = -0.086
#                                                                                R = 0.414
#   B: A = 0 - 0.3 = -0.3, R = 0.
# Truncated with bootstrap V(s') = 0.5:
#   step 1 tok 0: delta = 1 + 0.45 - 0.6 = 0.85,  A = 0.85,  R = 1.45
#   step 0 tok 1: A = 0.34 + 0.45 * 0.85 = 0.7225,          R = 0.9225
#   step 0 tok 0: A = -0.32 + 0.45 * 0.7225 = 0.005125,     R = 0.505125
# --------------------------------------------------------------------------------------------

HAND_REWARDS = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
HAND_VALUES = torch.tensor([[0.6, 9.0, 9.0], [0.5, 0.2, 9.0], [0.3, 9.0, 9.0]], dtype=torch.float64)
HAND_MASK = torch.tensor([[1, 0, 0], [1, 1, 0], [1, 0, 0]])
HAND_TIDS = ["A", "A", "B"]
HAND_STEPS = [1, 0, 0]


def test_hand_computed_terminal():
    adv, ret = trajectory_gae(
        HAND_REWARDS,
        HAND_VALUES,
        HAND_MASK,
        HAND_TIDS,
        HAND_STEPS,
        gamma=0.9,
        lam=0.5,
        whiten=False,
    )
    expected_adv = torch.tensor([[0.4, 0, 0], [-0.086, 0.52, 0], [-0.3, 0, 0]], dtype=torch.float64)
    expected_ret = torch.tensor([[1.0, 0, 0], [0.414, 0.72, 0], [0.0, 0, 0]], dtype=torch.float64)
    torch.testing.assert_close(adv, expected_adv, atol=1e-12, rtol=0)
    torch.testing.assert_close(ret, expected_ret, atol=1e-12, rtol=0)


def test_hand_computed_truncated_with_bootstrap():
    adv, ret = trajectory_gae(
        HAND_REWARDS,
        HAND_VALUES,
        HAND_MASK,
        HAND_TIDS,
        HAND_STEPS,
        gamma=0.9,
        lam=0.5,
        whiten=False,
        truncated=torch.tensor([True, True, False]),
        bootstrap_values=torch.tensor([0.5, 123.0, 77.0], dtype=torch.float64),  # only row 0 is read
    )
    expected_adv = torch.tensor([[0.85, 0, 0], [0.005125, 0.7225, 0], [-0.3, 0, 0]], dtype=torch.float64)
    expected_ret = torch.tensor([[1.45, 0, 0], [0.505125, 0.9225, 0], [0.0, 0, 0]], dtype=torch.float64)
    torch.testing.assert_close(adv, expected_adv, atol=1e-12, rtol=0)
    torch.testing.assert_close(ret, expected_ret, atol=1e-12, rtol=0)


def test_verl_on_step_rows_does_not_chain_steps():
    """The pitfall flattening avoids: fed step rows, verl's GAE bootstraps each step's end from 0."""
    token_rewards = torch.zeros(3, 3, dtype=torch.float64)
    token_rewards[0, 0] = 1.0
    _, per_row_ret = compute_gae_advantage_return(token_rewards, HAND_VALUES, HAND_MASK.double(), 0.9, 0.5)
    _, ret = trajectory_gae(
        HAND_REWARDS,
        HAND_VALUES,
        HAND_MASK,
        HAND_TIDS,
        HAND_STEPS,
        gamma=0.9,
        lam=0.5,
        whiten=False,
    )
    assert abs(float(per_row_ret[1, 1]) - 0.0) < 1e-12  # step 0's last token never sees step 1
    assert abs(float(ret[1, 1]) - 0.72) < 1e-12


def test_single_token_batch():
    adv, ret = trajectory_gae(
        torch.tensor([1.0]),
        torch.tensor([[0.25, 0.0]]),
        torch.tensor([[1, 0]]),
        [0],
        [0],
        whiten=False,
    )
    torch.testing.assert_close(adv, torch.tensor([[0.75, 0.0]]))
    torch.testing.assert_close(ret, torch.tensor([[1.0, 0.0]]))
    with pytest.raises(ValueError, match="at least 2 valid tokens"):
        trajectory_gae(torch.tensor([1.0]), torch.tensor([[0.25, 0.0]]), torch.tensor([[1, 0]]), [0], [0])


def test_empty_batch():
    adv, ret = trajectory_gae(torch.zeros(0), torch.zeros(0, 4), torch.zeros(0, 4), [], [])
    assert adv.shape == ret.shape == (0, 4)


def test_tensor_ids_and_no_grad():
    values = torch.tensor([[0.1, 0.2], [0.3, 0.4]], requires_grad=True)
    adv, ret = trajectory_gae(
        torch.tensor([0.0, 1.0]),
        values,
        torch.ones(2, 2),
        torch.tensor([7, 7]),
        torch.tensor([0, 1]),
    )
    assert not adv.requires_grad and not ret.requires_grad


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"response_mask": torch.tensor([[1, 1], [0, 0]])}, "no valid response token"),
        ({"step_indices": [0, 2]}, "consecutive"),
        ({"step_indices": [1, 1]}, "consecutive"),
        ({"truncated": [True, False]}, "same on every row"),
        ({"bootstrap_values": torch.zeros(2)}, "needs truncated"),
        (
            {"truncated": [True, True], "bootstrap_values": torch.zeros(3)},
            "bootstrap_values must be",
        ),
        ({"rewards": torch.zeros(3)}, "rewards must be"),
        ({"response_mask": torch.ones(2, 3)}, "response_mask shape"),
        ({"trajectory_ids": ["a"]}, "trajectory_ids has 1 entries"),
        ({"gamma": 1.5}, "gamma and lam"),
    ],
)
def test_errors_name_the_problem(kwargs, message):
    args = {
        "rewards": torch.zeros(2),
        "values": torch.zeros(2, 2),
        "response_mask": torch.ones(2, 2),
        "trajectory_ids": ["a", "a"],
        "step_indices": [0, 1],
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        trajectory_gae(**args)
