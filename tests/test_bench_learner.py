"""``darwin bench learner --profile``: one update of an experiment's learner on a recorded batch,
phase by phase, per variant."""

from __future__ import annotations

from click.testing import CliRunner

from darwin.bench.learner import VARIANTS, profile
from darwin.cli.main import main
from darwin.learner.config import LearnerConfig


def test_every_variant_times_one_update_phase_by_phase() -> None:
    config = LearnerConfig(critic_warmup_updates=0, mini_batch_size=8, micro_batch_size=4, ppo_epochs=1, kl_coef=0.1)
    results = profile(config, variants=tuple(VARIANTS), steps=12, repeats=1)
    assert [r.variant for r in results] == list(VARIANTS)
    for r in results:
        phases = r.images_s + r.values_s + r.reference_s + r.proximal_s + r.forward_backward_s + r.optimizer_s
        assert r.steps == 12 and r.repeats == 1 and r.response_tokens > 0
        assert r.forward_backward_s > 0 and r.values_s > 0 and r.reference_s > 0  # critic and KL scored
        assert abs(phases + r.other_s - r.total_s) < 0.05
    assert VARIANTS["shared"]["critic"] == "shared" and VARIANTS["frozen-shared"]["freeze_vision"] is True
    assert all(r.cached_images == 0 for r in results)  # cold caches; a batch's repeats miss together
    # the same rows and shuffles in every variant: the same micro-batches, the same padding
    assert len({r.padding_share for r in results}) == 1 and 0 <= results[0].padding_share < 1


def test_a_warm_cache_serves_every_frozen_towers_screenshots() -> None:
    config = LearnerConfig(critic_warmup_updates=0, mini_batch_size=8, micro_batch_size=4, ppo_epochs=1, kl_coef=0.1)
    results = {
        r.variant: r
        for r in profile(config, ("plain", "frozen", "critic-frozen"), steps=12, repeats=1, warm_cache=True)
    }
    # One tower's features per row (the actor's when frozen, else the reference's and a frozen critic's).
    assert (
        results["plain"].cached_images
        == results["frozen"].cached_images
        == results["critic-frozen"].cached_images
        == 12
    )


def test_an_unknown_variant_is_named_with_the_choices() -> None:
    result = CliRunner().invoke(main, ["bench", "learner", "--profile", "--variant", "plain,tiny"])
    assert result.exit_code == 2 and "unknown variant(s) ['tiny']" in result.output and "frozen-shared" in result.output
