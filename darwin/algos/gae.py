"""Token-level GAE over whole multi-turn trajectories (paper Eq. 8).

The learner's data unit is one *step row*: the response tokens ``y_t`` an agent generated at
step ``t`` of some trajectory, right-padded to ``max_response_len`` with a ``response_mask``.
Within a step token ``k`` bootstraps from token ``k + 1``; the last token of step ``t`` gets the
step reward and bootstraps from the first token of step ``t + 1``:

    delta_t^k = gamma * V(s_t^{k+1}) - V(s_t^k)                      k < n_t
    delta_t^n = r_t + gamma * V(s_{t+1}^1) - V(s_t^n)                 n = n_t (last token)
    A_t^k     = delta_t^k + gamma * lam * A_t^{k+1}                   (A_t^{n_t + 1} := A_{t+1}^1)
    R_t^k     = A_t^k + V(s_t^k)

with ``V(s_T^1) = 0`` after the last step ``T - 1`` (terminal, and truncated by default as in the
paper) or ``V(s_T^1) = bootstrap value`` for truncated trajectories when asked.

verl's ``compute_gae_advantage_return`` runs this recursion along one row and skips mask-0
tokens, so it is exact on a row that holds a whole trajectory. It never links two rows: fed step
rows directly, each step's last token would bootstrap from 0 (DESIGN section 5). We therefore
flatten each trajectory's valid tokens into one row (time order), run verl on those rows and
scatter the results back to the step rows. See ``docs/algorithms.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from verl.trainer.ppo.core_algos import compute_gae_advantage_return

from darwin.algos._ids import IdArray, as_id_list, check_constant_per_code, factorize

__all__ = ["trajectory_gae"]


def trajectory_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    trajectory_ids: IdArray,
    step_indices: torch.Tensor | Sequence[int],
    *,
    gamma: float = 1.0,
    lam: float = 0.95,
    whiten: bool = True,
    truncated: torch.Tensor | Sequence[bool] | None = None,
    bootstrap_values: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-level GAE over whole trajectories given as (possibly shuffled) step rows.

    Args:
        rewards: ``(num_steps,)`` scalar reward ``r_t`` of each step row; it is placed on the
            row's last valid token.
        values: ``(num_steps, max_response_len)`` critic values ``V(s_t^k)`` of each response
            token (old values, computed before the update). Detached here.
        response_mask: ``(num_steps, max_response_len)`` 1 for response tokens, 0 for padding
            (bool, int or float). Only mask-1 tokens take part; every row needs at least one.
        trajectory_ids: ``(num_steps,)`` id of the trajectory each row belongs to (ints or
            strings, e.g. ``Transition.episode_id``).
        step_indices: ``(num_steps,)`` step index ``t`` of each row inside its trajectory. Within
            a trajectory they must be distinct and consecutive (no missing step); rows may come
            in any order.
        gamma: discount per *token* (``1.0`` in the paper, where per-token and per-step
            discounting coincide).
        lam: GAE lambda (``0.95`` in the paper; ``1.0`` during critic warm-up).
        whiten: normalise the advantages to zero mean and unit variance over all valid tokens of
            the batch (``verl.utils.torch_functional.masked_whiten``), as verl's GAE always does.
            ``False`` returns the raw GAE advantages. Returns are never whitened.
        truncated: ``(num_steps,)`` bool, whether the row's trajectory was cut short (step budget,
            infrastructure failure) rather than ended by the task; the same on every row of a
            trajectory (checked). It changes the result only when ``bootstrap_values`` is given.
        bootstrap_values: ``None`` (default, the paper's choice): ``V(s') = 0`` after the last
            step of every trajectory. Otherwise ``(num_steps,)``: ``bootstrap_values[i]`` is the
            value of the state after row ``i``'s step (e.g. the critic's value on the first token
            of the next state's response); it is read only on the last row of each truncated
            trajectory, whose last token then gets ``r + gamma * bootstrap``. Terminal
            trajectories always use ``V(s') = 0``.

    Returns:
        advantages: ``(num_steps, max_response_len)``, 0 on padding, dtype of ``values``.
        returns: ``(num_steps, max_response_len)`` value targets ``A + V`` (unwhitened), 0 on
            padding, dtype of ``values``.

    Example:
        >>> import torch
        >>> adv, ret = trajectory_gae(
        ...     rewards=torch.tensor([0.0, 1.0]),
        ...     values=torch.tensor([[0.5, 0.5], [0.5, 0.0]]),
        ...     response_mask=torch.tensor([[1, 1], [1, 0]]),
        ...     trajectory_ids=["ep0", "ep0"], step_indices=[0, 1], gamma=1.0, lam=1.0, whiten=False)
        >>> ret
        tensor([[1., 1.],
                [1., 0.]])
    """
    if values.dim() != 2:
        raise ValueError(f"values must be (num_steps, max_response_len), got {tuple(values.shape)}")
    num_steps, max_len = values.shape
    device, out_dtype = values.device, values.dtype
    if response_mask.shape != values.shape:
        raise ValueError(f"response_mask shape {tuple(response_mask.shape)} differs from values {tuple(values.shape)}")
    if rewards.shape != (num_steps,):
        raise ValueError(f"rewards must be (num_steps,) = ({num_steps},), got {tuple(rewards.shape)}")
    if not 0.0 <= gamma <= 1.0 or not 0.0 <= lam <= 1.0:
        raise ValueError(f"gamma and lam must lie in [0, 1], got gamma={gamma}, lam={lam}")
    traj_list = as_id_list(trajectory_ids, num_steps, "trajectory_ids")
    steps = torch.as_tensor(step_indices, dtype=torch.long).reshape(-1).cpu()
    if steps.shape != (num_steps,):
        raise ValueError(f"step_indices must have one entry per row ({num_steps}), got {tuple(steps.shape)}")
    if num_steps == 0:
        return torch.zeros_like(values), torch.zeros_like(values)

    mask = response_mask.to(device=device).bool()
    lengths = mask.sum(dim=1)
    if bool((lengths == 0).any()):
        bad = int(torch.nonzero(lengths == 0)[0])
        raise ValueError(
            f"step row {bad} (trajectory {traj_list[bad]!r}, step {int(steps[bad])}) has no valid "
            "response token, so its reward has nowhere to go; drop the row or keep its EOS token"
        )

    # 1. Time order: rows sorted by (trajectory, step). Check each trajectory's steps are 0..n-1
    #    up to an offset: a gap would silently bootstrap across a missing step.
    traj_code, traj_uniques = factorize(traj_list, device)
    num_traj = len(traj_uniques)
    code_np = traj_code.cpu().numpy()
    steps_np = steps.numpy()
    order_np = np.lexsort((steps_np, code_np))  # primary key: trajectory, then step
    same_traj = code_np[order_np][1:] == code_np[order_np][:-1]
    step_gap = steps_np[order_np][1:] - steps_np[order_np][:-1]
    if bool(np.any(same_traj & (step_gap != 1))):
        i = int(np.nonzero(same_traj & (step_gap != 1))[0][0])
        tid = traj_uniques[code_np[order_np][i]]
        raise ValueError(
            f"trajectory {tid!r} has steps {int(steps_np[order_np][i])} and "
            f"{int(steps_np[order_np][i + 1])} next to each other; step indices must be distinct "
            "and consecutive within a trajectory (a missing step would break the bootstrap chain)"
        )
    order = torch.as_tensor(order_np, dtype=torch.long, device=device)
    is_last_step = torch.ones(num_steps, dtype=torch.bool, device=device)  # in original row order
    is_last_step[order[:-1][torch.as_tensor(same_traj, device=device)]] = False

    # 2. Step rewards on each row's last valid token, in float64 so that raw advantages can be
    #    recovered exactly as returns - values.
    work = torch.float64
    last_col = (max_len - 1) - mask.flip(dims=[1]).to(torch.int8).argmax(dim=1)  # (num_steps,)
    rows = torch.arange(num_steps, device=device)
    token_rewards = torch.zeros(num_steps, max_len, dtype=work, device=device)
    token_rewards[rows, last_col] = rewards.detach().to(device=device, dtype=work)

    row_truncated = torch.zeros(num_steps, dtype=torch.bool, device=device)
    if truncated is not None:
        trunc_list = [bool(x) for x in as_id_list(truncated, num_steps, "truncated")]
        per_traj = check_constant_per_code(traj_code, trunc_list, traj_uniques, "truncated", "trajectory")
        row_truncated = torch.tensor(per_traj, dtype=torch.bool, device=device)[traj_code]
    if bootstrap_values is not None:
        if truncated is None:
            raise ValueError("bootstrap_values needs truncated= (which trajectories were cut short)")
        if bootstrap_values.shape != (num_steps,):
            raise ValueError(
                f"bootstrap_values must be (num_steps,) = ({num_steps},), got {tuple(bootstrap_values.shape)}"
            )
        boot_rows = rows[is_last_step & row_truncated]
        # Folding gamma * V(s') into the last token's reward gives exactly
        # delta = r + gamma * V(s') - V(s_last) there, without adding a token to the batch.
        token_rewards[boot_rows, last_col[boot_rows]] += (
            gamma * bootstrap_values.detach().to(device=device, dtype=work)[boot_rows]
        )

    # 3. Flatten: valid tokens of each trajectory, in time order, compacted into one row.
    sorted_row, col = torch.nonzero(mask[order], as_tuple=True)  # row-major = time order
    row = order[sorted_row]  # (num_tokens,) original row
    tok_traj = traj_code[row]  # (num_tokens,)
    num_tokens = row.numel()
    tokens_per_traj = torch.bincount(tok_traj, minlength=num_traj)
    starts = torch.cumsum(tokens_per_traj, dim=0) - tokens_per_traj
    pos = torch.arange(num_tokens, device=device) - starts[tok_traj]  # position in flat row
    flat_len = int(tokens_per_traj.max())
    # verl whitens unconditionally and masked_var raises on fewer than 2 tokens; when we do not
    # whiten, a padding row of two zero tokens keeps it happy and changes nothing else (rows
    # are independent in GAE).
    pad_rows = 1 if (not whiten and num_tokens < 2) else 0
    if whiten and num_tokens < 2:
        raise ValueError("whiten=True needs at least 2 valid tokens in the batch; pass whiten=False")
    shape = (num_traj + pad_rows, max(flat_len, 2 if pad_rows else flat_len))
    flat_rewards = torch.zeros(shape, dtype=work, device=device)
    flat_values = torch.zeros(shape, dtype=work, device=device)
    flat_mask = torch.zeros(shape, dtype=work, device=device)
    flat_rewards[tok_traj, pos] = token_rewards[row, col]
    flat_values[tok_traj, pos] = values.detach().to(dtype=work)[row, col]
    flat_mask[tok_traj, pos] = 1.0
    if pad_rows:
        flat_mask[-1, :2] = 1.0

    # 4. verl's GAE along each flattened trajectory.
    whitened, flat_returns = compute_gae_advantage_return(
        token_level_rewards=flat_rewards,
        values=flat_values,
        response_mask=flat_mask,
        gamma=gamma,
        lam=lam,
    )
    flat_advantages = whitened if whiten else flat_returns - flat_values

    # 5. Scatter back to the step rows.
    advantages = torch.zeros(num_steps, max_len, dtype=out_dtype, device=device)
    returns = torch.zeros(num_steps, max_len, dtype=out_dtype, device=device)
    advantages[row, col] = flat_advantages[tok_traj, pos].to(out_dtype)
    returns[row, col] = flat_returns[tok_traj, pos].to(out_dtype)
    return advantages, returns
