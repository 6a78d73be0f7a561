"""``darwin bench learner --profile``: one update of an experiment's learner on a recorded batch,
phase by phase, per variant."""

from __future__ import annotations

from click.testing import CliRunner

from darwin.bench.learner import VARIANTS, profile
from darwin.cli.main import main
from darwin.learner.config import LearnerConfig


def _kl_config() -> LearnerConfig:
    """Small batches, one epoch, no warm-up, a KL term: every phase of an update runs."""
    return LearnerConfig(
        ppo={"kl_coef": 0.1},
        critic={"warmup_updates": 0},
        speed={"micro_batch_size": 4},
        mini_batch_size=8,
        ppo_epochs=1,
    )


def test_every_variant_times_one_update_phase_by_phase() -> None:
    config = _kl_config()
    results = profile(config, variants=tuple(VARIANTS), steps=12, repeats=1)
    assert [r.variant for r in results] == list(VARIANTS)
    for r in results:
        phases = r.images_s + r.values_s + r.reference_s + r.proximal_s + r.forward_backward_s + r.optimizer_s
        assert r.steps == 12 and r.repeats == 1 and r.response_tokens > 0
        assert r.forward_backward_s > 0 and r.values_s > 0 and r.reference_s > 0  # critic and KL scored
        assert abs(phases + r.other_s - r.total_s) < 0.05
    assert (
        VARIANTS["shared"]["critic"]["backbone"] == "shared"
        and VARIANTS["frozen-shared"]["speed"]["freeze_vision"] is True
    )
    assert all(r.cached_images == 0 for r in results)  # cold caches; a batch's repeats miss together
    # the same rows and shuffles in every variant: the same micro-batches, the same padding
    assert len({r.padding_share for r in results}) == 1 and 0 <= results[0].padding_share < 1


def test_a_warm_cache_serves_every_frozen_towers_screenshots() -> None:
    config = _kl_config()
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


def test_paper_shaped_rows_carry_the_presets_screenshot_history_and_response() -> None:
    """`--rows paper`: UI-TARS-1.5's own prompt, at most 8 past turns, one 504x1120 screenshot
    (720 visual tokens after the 2x2 merge) and a Thought/Action response, tokenized as served."""
    from darwin.bench.learner import PAPER_HISTORY, PAPER_SCREEN, paper_shaped_trajectories
    from darwin.models.config import TinyVLMConfig
    from darwin.models.factory import build_tiny_vlm
    from darwin.policies.hf import HFPolicy, HFPolicyConfig

    cfg = TinyVLMConfig(screen_width=PAPER_SCREEN[0], screen_height=PAPER_SCREEN[1])
    vlm = build_tiny_vlm(cfg, seed=0)
    policy = HFPolicy(vlm, HFPolicyConfig(max_new_tokens=4, seed=0))
    trajectories = paper_shaped_trajectories(policy, steps=12, per_episode=10, screen=PAPER_SCREEN)
    assert [len(t.transitions) for t in trajectories] == [10, 2]
    image_token = vlm.processor.image_token_id
    for trajectory in trajectories:
        for step, t in enumerate(trajectory.transitions):
            gen, prompt = t.decision.generation, t.decision.prompt
            assert gen is not None and len(prompt.images) == 1 and prompt.images[0].shape == (1120, 504, 3)
            assert sum(1 for m in prompt.messages if m.role == "assistant") == min(step, PAPER_HISTORY)
            assert prompt.messages[0].text.startswith("You are a GUI agent.")
            assert gen.prompt_ids.count(image_token) == cfg.visual_tokens == 720
            assert gen.text.startswith("Thought: ") and "Action: click(start_box=" in gen.text
            assert gen.response_ids[-1] == vlm.tokenizer.eos_token_id
    assert trajectories[0].transitions[-1].reward == 1.0 and trajectories[1].transitions[-1].reward == 0.0


def test_model_flops_count_the_decoder_head_attention_and_tower() -> None:
    import torch

    from darwin.bench.learner import QWEN_VOCAB, SIZES, ModelShape, forward_flops
    from darwin.models.config import TinyVLMConfig
    from darwin.models.factory import build_tiny_vlm

    vlm = build_tiny_vlm(TinyVLMConfig.model_validate(SIZES["tiny"]), seed=0)
    shape = ModelShape.of(vlm.model)
    total = sum(p.numel() for p in vlm.model.parameters())
    embed = vlm.model.get_input_embeddings().weight.numel()
    assert shape.text_parameters + shape.vision_parameters + embed == total  # tied head: counted once, as embed
    assert shape.lm_head == embed and shape.layers == 2
    one = forward_flops(shape, [10], [16], logits=True)
    assert forward_flops(shape, [10, 10], [16, 16], logits=True) == 2 * one
    assert one - forward_flops(shape, [10], [16], logits=False) == 2 * shape.lm_head * 10
    vlm.model.resize_token_embeddings(QWEN_VOCAB)
    assert ModelShape.of(vlm.model).lm_head == QWEN_VOCAB * 128
    assert torch.is_tensor(vlm.model.get_input_embeddings().weight)
