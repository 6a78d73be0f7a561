"""The rejection-sampling fine-tune between RL updates (``LearnerConfig.finetunes.rft``, MobileRL's
iterative SFT): which episodes it keeps, what it trains, when, and its checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from darwin.learner.config import LearnerConfig
from darwin.learner.local import LocalLearner
from darwin.learner.rft import AcceptedEpisodes
from darwin.learner.step_rows import collect_step_rows
from darwin.models.scoring import compute_response_logprobs, response_nll
from darwin.types import Phase, TerminationReason, Trajectory, Verdict


def verdict(t: Trajectory, success: bool | None) -> Trajectory:
    if success is not None:
        t.verdicts[Phase.EXECUTION] = Verdict(success)
    return t


def batch(kit, policy, seed: int) -> list[Trajectory]:
    """Two accepted episodes (one with a parse error), a rejected one, an unverified one and an
    infrastructure truncation whose verdict says success."""
    return [
        verdict(kit.sampled_trajectory(policy, [0.0, 1.0], seed=seed), True),
        verdict(kit.sampled_trajectory(policy, [0.0, 0.0, 1.0], seed=seed + 1, parse_error_steps=(0,)), True),
        verdict(kit.sampled_trajectory(policy, [0.0, 0.0], seed=seed + 2), False),
        verdict(kit.sampled_trajectory(policy, [0.0, 0.0], seed=seed + 3), None),
        verdict(kit.sampled_trajectory(policy, [0.0], seed=seed + 4, reason=TerminationReason.INFRA_TRUNCATED), True),
    ]


def mean_nll(learner: LocalLearner, trajectories: list[Trajectory]) -> float:
    rows = [r for r in collect_step_rows(trajectories).rows if not r.parse_error]
    with torch.no_grad():
        lp, mask = compute_response_logprobs(
            learner.actor,
            learner._collate(learner._row_inputs(rows)),
            [r.response_ids for r in rows],
            forbidden=learner._forbidden,
            temperature=1.0,
        )
    return float(response_nll(lp, mask))


def test_response_nll_is_the_mean_over_response_tokens() -> None:
    lp = torch.tensor([[-1.0, -3.0, 0.0], [-2.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    assert float(response_nll(lp, mask)) == pytest.approx(2.0)  # (1 + 3 + 2) / 3


def test_only_accepted_episodes_are_kept_and_the_oldest_leave_first(kit, policy) -> None:
    kept = AcceptedEpisodes(capacity=3)
    first = batch(kit, policy, seed=0)
    assert kept.add(first) == 2  # the rejected, unverified and infrastructure ones never count
    assert [t.episode_id for t in kept.trajectories] == [first[0].episode_id, first[1].episode_id]
    second = batch(kit, policy, seed=10)
    kept.add(second)
    assert [t.episode_id for t in kept.trajectories] == [
        first[1].episode_id,
        second[0].episode_id,
        second[1].episode_id,
    ]


def test_the_fine_tune_lowers_the_nll_of_the_accepted_responses_and_pushes_the_weights(kit, policy) -> None:
    config = kit.small_config(
        algorithm="grpo", finetunes={"rft": {"every": 5, "steps": 6, "lr": 1e-3, "batch_size": 4, "min_steps": 2}}
    )
    learner = LocalLearner(policy, config)
    trajectories = batch(kit, policy, seed=0)
    assert learner.update(trajectories).rft_steps is None  # not due
    accepted = trajectories[:2]
    assert [t.episode_id for t in learner.accepted.trajectories] == [t.episode_id for t in accepted]
    before = mean_nll(learner, accepted)
    version = learner.policy_version
    out = learner.rejection_finetune()
    assert out["rft_steps"] == 4 and out["rft_episodes"] == 2  # 2 + 3 steps, one parse error left out
    assert out["rft_loss_last"] < out["rft_loss_first"]
    assert mean_nll(learner, accepted) < before - 0.1
    assert learner.policy_version == policy.version == version + 1
    assert kit.params_equal(policy.vlm.model.state_dict(), learner.actor_state_dict())


def test_it_runs_every_n_actor_updates_after_the_critic_warm_up_and_waits_for_enough_steps(kit, policy) -> None:
    config = kit.small_config(
        critic={"warmup_updates": 1},
        finetunes={"rft": {"every": 2, "steps": 2, "lr": 1e-4, "batch_size": 4, "min_steps": 6}},
    )
    learner = LocalLearner(policy, config)
    seen = [learner.update(batch(kit, policy, seed=10 * i)) for i in range(5)]
    # update 1 is the warm-up; actor updates 2..5; due after the 2nd and 4th actor update (updates 3 and 5)
    assert [m.rft_steps for m in seen] == [None, None, 12, None, 20]  # the warm-up's accepted episodes count too
    assert [m.rft_loss_first is not None for m in seen] == [False, False, True, False, True]
    assert [m.policy_version for m in seen] == [0, 1, 3, 4, 6]  # each fine-tune is a version of its own
    waiting = LocalLearner(
        kit.tiny_policy(),
        kit.small_config(critic={"warmup_updates": 0}, finetunes={"rft": {"every": 1, "steps": 2, "min_steps": 100}}),
    )
    m = waiting.update(batch(kit, waiting.policy, seed=0))
    assert m.rft_steps == 4 and m.rft_loss_first is None and m.policy_version == 1  # waited: no version of its own


def test_the_accepted_episodes_survive_a_checkpoint(kit, policy, tmp_path: Path) -> None:
    config = kit.small_config(algorithm="grpo", finetunes={"rft": {"every": 3}})
    learner = LocalLearner(policy, config)
    learner.update(batch(kit, policy, seed=0))
    learner.save(tmp_path / "ckpt")
    resumed = LocalLearner.load(tmp_path / "ckpt", kit.tiny_policy(), config=config)
    assert [t.episode_id for t in resumed.accepted.trajectories] == [
        t.episode_id for t in learner.accepted.trajectories
    ]
    assert len(resumed.accepted) == 2


def test_the_verl_backend_refuses_it_with_the_reason() -> None:
    from darwin.learner.verl_config import VerlConfig

    with pytest.raises(ValueError, match=r"rft.every > 0 is not supported by backend='verl'"):
        LearnerConfig(
            algorithm="grpo",
            critic={"warmup_updates": 0},
            speed={"micro_batch_size": 2},
            finetunes={"rft": {"every": 2}},
            backend="verl",
            mini_batch_size=8,
            verl=VerlConfig(model_path="/nonexistent", micro_batch_size_per_gpu=1, gpus_per_node=1),
        )
