"""An update without a verdict (unverified trajectories left out, the rest all infrastructure
truncations, or nothing left) does not move the actor: ``LearnerConfig.infra_only_updates``."""

from __future__ import annotations

import pytest

from darwin.learner.config import LearnerConfig
from darwin.learner.local import LocalLearner
from darwin.learner.step_rows import LearnerDataError, actor_skip_reason
from darwin.types import Phase, TerminationReason, Verdict

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


def _infra_and_unverified(policy, kit, seed: int = 20) -> list:
    """What the user's adb run trained on: phones cut by faults, and episodes the rule verifier
    could not decide (no state probe)."""
    cut = [
        kit.sampled_trajectory(policy, [0.0] * (1 + i), seed=seed + i, reason=TerminationReason.INFRA_TRUNCATED)
        for i in range(2)
    ]
    for t in cut:
        t.verdicts = {Phase.EXECUTION: Verdict(None, reason="timeout")}
    undecided = kit.sampled_trajectory(policy, [0.0, 0.0], seed=seed + 5, reason=TerminationReason.AGENT_FINISHED)
    undecided.verdicts = {Phase.EXECUTION: Verdict(None, reason="the phone has no state probe; use an LLM judge")}
    return [*cut, undecided]


@pytest.mark.parametrize("infra_truncation", ["truncate", "drop"])
def test_an_update_of_infrastructure_truncations_only_moves_neither_actor_nor_critic(policy, kit, infra_truncation):
    learner = LocalLearner(
        policy, kit.small_config(infra_truncation=infra_truncation, actor_lr=1e-2, critic={"lr": 1e-2})
    )
    actor = {k: v.clone() for k, v in learner.actor.state_dict().items()}
    critic = {k: v.clone() for k, v in learner.critic.state_dict().items()}
    served = {k: v.clone() for k, v in policy.vlm.model.state_dict().items()}
    batch = _infra_and_unverified(policy, kit)
    assert actor_skip_reason(batch) == "infra_truncations_only"
    metrics = learner.update(batch)
    assert kit.params_equal(learner.actor, actor) and kit.params_equal(learner.critic, critic)
    assert kit.params_equal(policy.vlm.model, served) and policy.version == 0
    assert (learner.updates, learner.policy_version, learner.optimizer_steps) == (1, 0, 0)
    assert metrics.actor_skipped_reason == "infra_truncations_only" and metrics.stage == "skipped"
    assert not metrics.actor_updated and metrics.steps == 0 and metrics.policy_loss is None
    assert (metrics.dropped_infra_trajectories, metrics.unverified_trajectories) == (2, 1)
    assert metrics.as_dict()["actor_skipped"] == 1.0  # metrics.jsonl's flag


def test_the_setting_train_keeps_training_on_them_and_a_verified_trajectory_lifts_the_skip(policy, kit):
    batch = _infra_and_unverified(policy, kit)
    trained = LocalLearner(policy, kit.small_config(infra_only_updates="train", actor_lr=1e-2))
    before = {k: v.clone() for k, v in trained.actor.state_dict().items()}
    metrics = trained.update(batch)
    assert metrics.actor_updated and metrics.actor_skipped_reason is None and "actor_skipped" not in metrics.as_dict()
    assert not kit.params_equal(trained.actor, before) and policy.version == 1
    # One verified failure among the truncations: the batch has a verdict and trains the actor.
    failed = kit.sampled_trajectory(policy, [0.0, 0.0], seed=40, reason=TerminationReason.AGENT_FINISHED)
    failed.verdicts = {Phase.EXECUTION: Verdict(False)}
    learner = LocalLearner(kit.tiny_policy(), kit.small_config(actor_lr=1e-2))
    assert actor_skip_reason([*batch, failed]) is None
    assert learner.update([*batch, failed]).actor_updated and learner.policy_version == 1


def test_an_all_unverified_batch_is_skipped_not_an_error(policy, kit):
    undecided = [
        t for t in _infra_and_unverified(policy, kit) if t.termination.reason != TerminationReason.INFRA_TRUNCATED
    ]
    learner = LocalLearner(policy, kit.small_config())
    metrics = learner.update(undecided)
    assert metrics.actor_skipped_reason == "no_verdict" and policy.version == 0 and learner.updates == 1
    strict = LocalLearner(kit.tiny_policy(), kit.small_config(infra_only_updates="train"))
    with pytest.raises(LearnerDataError, match="1 unverified"):
        strict.update(undecided)


def test_the_setting_is_validated():
    with pytest.raises(ValueError, match="infra_only_updates"):
        LearnerConfig(infra_only_updates="sometimes")
