"""The verl learner on screenshot-reading policies: Qwen2-VL-family rows through verl's FSDP
actor and critic on two Ray CPU workers with gloo (the paper's PPO with critic warm-up)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
import torch

from darwin.learner.config import LearnerConfig
from darwin.learner.step_rows import LearnerDataError, collect_step_rows, preprocess_rows
from darwin.learner.verl_batch import to_verl_batch
from darwin.learner.verl_config import VerlConfig
from darwin.learner.verl_learner import VerlLearner
from darwin.learner.verl_runtime import prepare_critic_checkpoint
from darwin.learner.verl_vlm import (
    Qwen2_5_VLForTokenValue,
    Qwen2VLForTokenValue,
    valuehead_loader_hardcodes_flash_attention,
)
from darwin.models.config import TinyVLMConfig
from darwin.models.factory import build_tiny_vlm
from darwin.models.scoring import compute_response_logprobs
from darwin.policies.hf import HFPolicy, HFPolicyConfig
from darwin.types import Trajectory

HAS_SERVER_DEPS = all(importlib.util.find_spec(m) is not None for m in ("ray", "uvicorn", "fastapi"))
NO_SERVER_DEPS = "verl's workers import uvicorn and fastapi (verl's 'verl-core' extra): pip install uvicorn fastapi"
SCREEN = (56, 112)


def vl_policy(family: str = "qwen2_vl", seed: int = 1) -> HFPolicy:
    vlm = build_tiny_vlm(TinyVLMConfig(family=family, screen_width=SCREEN[0], screen_height=SCREEN[1]), seed=0)
    return HFPolicy(vlm, HFPolicyConfig(max_new_tokens=5, seed=seed))


def saved(policy: HFPolicy, path: Path) -> Path:
    """The policy's model in Hugging Face layout: what ``VerlConfig.model_path`` names."""
    policy.vlm.save_pretrained(path)
    return path


def cpu_config(model_path: Path, *, fused_kernels: Literal["off", "torch"] = "off", **overrides: Any) -> LearnerConfig:
    settings = VerlConfig(
        model_path=str(model_path),
        gpus_per_node=2,
        device="cpu",
        attn_implementation="sdpa",
        micro_batch_size_per_gpu=2,
        fused_kernels=fused_kernels,
        ray_num_cpus=4,
    )
    base: dict[str, Any] = {
        "backend": "verl",
        "verl": settings,
        "critic": {"warmup_updates": 1, "warmup_epochs": 1, "value_head_bias": 0.1, "lr": 1e-2},
        "mini_batch_size": 4,
        "speed": {"micro_batch_size": 2},
        "ppo_epochs": 1,
        "actor_lr": 1e-2,
    }
    for key, value in overrides.items():  # a section given as a mapping is merged field by field
        below = base.get(key)
        base[key] = {**below, **value} if isinstance(below, dict) and isinstance(value, dict) else value
    return LearnerConfig(**base)


def batch_of(kit, policy: HFPolicy, seed: int) -> list[Trajectory]:
    """Four sampled screenshot trajectories (successes and failures)."""
    return [
        kit.sampled_trajectory(policy, [0.0, reward], seed=seed * 10 + i)
        for i, reward in enumerate([1.0, 0.0, 1.0, 0.0])
    ]


# --------------------------------------------------------------------------------------
# The value model and the shim (plain transformers)
# --------------------------------------------------------------------------------------
def test_verl_still_loads_value_models_with_flash_attention() -> None:
    """The reason for darwin's value-model loader (verl_vlm.install_valuehead_loader). If a verl
    release stops writing attn_implementation="flash_attention_2" into load_valuehead_model,
    this fails: then delete the shim."""
    assert valuehead_loader_hardcodes_flash_attention()


@pytest.mark.parametrize(
    ("family", "value_class"), [("qwen2_vl", Qwen2VLForTokenValue), ("qwen2_5_vl", Qwen2_5_VLForTokenValue)]
)
def test_critic_checkpoint_of_a_vl_actor_has_its_backbone_and_a_calibrated_head(
    tmp_path: Path, family: str, value_class: type
) -> None:
    """The backbone loads (not only the vision tower: the conversion mapping), the head
    gives 0.1 everywhere, on a screenshot prompt."""
    from transformers import AutoModelForTokenClassification

    policy = vl_policy(family)
    critic = prepare_critic_checkpoint(
        saved(policy, tmp_path / "actor"), tmp_path / "critic", init="calibrated", bias=0.1
    )
    value_model = AutoModelForTokenClassification.from_pretrained(critic)
    assert type(value_model) is value_class
    actor = policy.vlm.model.state_dict()
    backbone = {k: v for k, v in value_model.state_dict().items() if not k.startswith("score.")}
    assert backbone and all(torch.equal(v, actor[k]) for k, v in backbone.items())
    assert any(".language_model." in k for k in backbone) and any(".visual." in k for k in backbone)
    inputs = policy.build_inputs([kit_prompt()])
    values = value_model(
        input_ids=inputs["input_ids"],
        attention_mask=inputs["attention_mask"],
        pixel_values=inputs["pixel_values"],
        image_grid_thw=inputs["image_grid_thw"],
        mm_token_type_ids=inputs["mm_token_type_ids"],
    ).logits
    assert values.shape == (*inputs["input_ids"].shape, 1)
    assert torch.allclose(values, torch.full_like(values, 0.1), atol=1e-6)


def kit_prompt():
    from darwin.types import ChatMessage, Prompt

    shot = np.random.default_rng(0).integers(0, 256, (SCREEN[1], SCREEN[0], 3), dtype=np.uint8)
    return Prompt(messages=(ChatMessage(role="user", text="Goal: open the clock.", images=(shot,)),))


def test_driver_levers_validate_on_verl_and_the_others_are_refused_with_the_reason(tmp_path: Path) -> None:
    cfg = cpu_config(
        tmp_path,
        levers={
            "whiten_by": "task",
            "trajectory_weighting": True,
            "shortest_path_adjustment": True,
            "negative_pruning": True,
        },
    )
    assert cfg.levers.negative_pruning and cfg.levers.shortest_path_adjustment
    with pytest.raises(ValueError) as err:
        cpu_config(tmp_path, ppo={"kl_coef": 0.1}, levers={"positive_replay_ratio": 0.5})
    text = str(err.value)
    assert "kl_coef > 0 is not supported by backend='verl' (the KL penalty needs a frozen reference model" in text
    assert "positive_replay_ratio > 0 is not supported by backend='verl' (the replay buffer" in text


def test_bootstrapped_truncation_is_refused_on_verl_with_the_reason(tmp_path: Path) -> None:
    assert cpu_config(tmp_path, truncation="zero").truncation == "zero"
    with pytest.raises(ValueError) as err:
        cpu_config(tmp_path, truncation="bootstrap")
    assert "truncation='bootstrap' is not supported by backend='verl' (V(s') at the screen" in str(err.value)


# --------------------------------------------------------------------------------------
# Screenshot rows -> verl's batch (always runs)
# --------------------------------------------------------------------------------------
def test_screenshot_rows_carry_pixels_grids_and_3d_positions(kit) -> None:
    policy = vl_policy()
    rows = collect_step_rows([kit.sampled_trajectory(policy, [0.0, 1.0], seed=3)]).rows
    inputs = preprocess_rows(policy, rows)
    batch = to_verl_batch(rows, pad_token_id=0, pad_to_multiple=4, inputs=inputs, rope_model=policy.vlm.model)
    b = batch.batch
    n, width = len(batch), b["input_ids"].shape[1]
    assert n == 4 and b["position_ids"].shape == (4, 4, width)
    # row 0 of the positions is the text positions, rows 1-3 the model's M-RoPE (not all equal: a screenshot)
    assert torch.equal(b["position_ids"][:, 0], (b["attention_mask"].cumsum(-1) - 1).clamp(min=0))
    assert not torch.equal(b["position_ids"][:, 1], b["position_ids"][:, 2])
    mm = batch.non_tensor_batch["multi_modal_inputs"]
    assert len(mm) == 4 and all(set(x) == {"pixel_values", "image_grid_thw"} for x in mm)
    assert torch.equal(mm[1]["pixel_values"], inputs[1].pixel_values) and torch.equal(
        mm[3]["image_grid_thw"], inputs[0].image_grid_thw
    )
    with pytest.raises(LearnerDataError, match=r"image\(s\); pass the rows' processor inputs"):
        to_verl_batch(rows, pad_token_id=0)


# --------------------------------------------------------------------------------------
# verl's workers on CPU: actor log-probs, critic warm-up, PPO, checkpoints
# --------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not HAS_SERVER_DEPS, reason=NO_SERVER_DEPS)
@pytest.mark.parametrize(
    ("family", "fused_kernels"), [("qwen2_vl", "off"), ("qwen2_5_vl", "off"), ("qwen2_vl", "torch")]
)
def test_verl_actor_scores_screenshot_rows_like_darwin(
    tmp_path: Path, kit, family: str, fused_kernels: Literal["off", "torch"]
) -> None:
    """verl's FSDP actor (2 CPU workers) gives the log-probs darwin's scoring gives on the
    same rows, for the tiny Qwen2-VL and a UI-TARS-1.5-format (Qwen2.5-VL) checkpoint, and
    with the log-probs fused from chunks of the LM head (the paper preset's setting)."""
    policy = vl_policy(family)
    cfg = cpu_config(
        saved(policy, tmp_path / "actor"),
        fused_kernels=fused_kernels,
        algorithm="grpo",
        critic={"warmup_updates": 0},
    )
    learner = VerlLearner(policy, cfg)
    try:
        trajectories = batch_of(kit, policy, seed=1)
        rows = collect_step_rows(trajectories).rows
        inputs = preprocess_rows(policy, rows)
        data = to_verl_batch(
            rows, pad_token_id=learner._pad_id, pad_to_multiple=4, inputs=inputs, rope_model=policy.vlm.model
        )
        verl_lp = learner._infer(learner.actor_group, data, "log_probs")[: len(rows)]
        everything = torch.zeros(policy.vlm.vocab_size, dtype=torch.bool)  # verl scores over the whole vocabulary
        with torch.no_grad():
            ours, mask = compute_response_logprobs(
                policy.vlm.model,
                policy.build_inputs([r.prompt for r in rows]),
                [r.response_ids for r in rows],
                forbidden=everything,
            )
        assert verl_lp.shape == ours.shape
        assert (verl_lp - ours).abs()[mask].max() < 1e-4
    finally:
        learner.close()


@pytest.mark.slow
@pytest.mark.skipif(not HAS_SERVER_DEPS, reason=NO_SERVER_DEPS)
def test_fused_log_probs_train_as_the_full_logits_do(tmp_path: Path, kit) -> None:
    """A GRPO update on screenshot rows (2 CPU workers) with fused_kernels='torch' gives the
    loss and gradient norm that the whole logits give, and the policy receives its new weights.
    (The weights themselves are not compared: Adam's first step moves each weight by about
    lr x sign(gradient), so a gradient of 1e-9 either side of zero differs by 2 x lr.)"""
    source = vl_policy()
    path = saved(source, tmp_path / "actor")
    trajectories = batch_of(kit, source, seed=2)
    results, weights = [], []
    for fused in ("off", "torch"):
        policy = vl_policy()
        learner = VerlLearner(
            policy, cpu_config(path, fused_kernels=fused, algorithm="grpo", critic={"warmup_updates": 0})
        )
        try:
            results.append(learner.update(trajectories))
            weights.append({k: v.clone() for k, v in policy.vlm.model.state_dict().items()})
        finally:
            learner.close()
    full, fused_update = results
    assert full.policy_loss is not None and fused_update.policy_loss is not None
    assert fused_update.policy_loss == pytest.approx(full.policy_loss, rel=1e-4, abs=1e-6)
    assert fused_update.actor_grad_norm == pytest.approx(full.actor_grad_norm, rel=1e-4)
    for trained in weights:
        assert any(not torch.equal(trained[k], v) for k, v in source.vlm.model.state_dict().items())


@pytest.mark.slow
@pytest.mark.skipif(not HAS_SERVER_DEPS, reason=NO_SERVER_DEPS)
# Six Ray worker processes (actor, critic, resumed actor) each import verl and torch: about 80 s
# alone on 2 cores, and past the suite's 600 s on a fresh clone sharing the cores (2026-11-29).
@pytest.mark.timeout(1500)
def test_ppo_with_critic_warmup_on_two_cpu_workers_and_resume(tmp_path: Path, kit) -> None:
    """The paper's schedule on verl: exactly N critic-only updates (actor bit-identical,
    first values = the calibrated bias), then PPO trains actor and critic; the policy gets
    the new weights; a checkpoint restores both workers' models."""
    policy = vl_policy()
    actor_path = saved(policy, tmp_path / "actor")
    # with the levers that are maths on the driver: per-task whitening, trajectory weights,
    # MobileRL's shortest-path adjustment and negative pruning
    cfg = cpu_config(
        actor_path,
        critic={"warmup_updates": 2},
        levers={
            "whiten_by": "task",
            "trajectory_weighting": True,
            "shortest_path_adjustment": True,
            "negative_pruning": True,
        },
    )
    before = {k: v.clone() for k, v in policy.vlm.model.state_dict().items()}
    learner = VerlLearner(policy, cfg)
    try:
        assert learner.critic_group is not None and learner.in_warmup
        first = learner.prepare(batch_of(kit, policy, seed=1))
        assert first.values is not None and torch.allclose(
            first.values[first.response_mask], torch.tensor(0.1), atol=1e-6
        )
        for update in (1, 2):
            warm = learner.update(batch_of(kit, policy, seed=update))
            assert warm.stage == "critic_warmup" and not warm.actor_updated and warm.update == update
            assert warm.value_loss is not None and warm.policy_loss is None and policy.version == 0
            assert all(torch.equal(before[k], v) for k, v in learner.actor_state_dict().items()), (
                "warm-up moved the actor"
            )
        assert not learner.in_warmup
        moved = learner.prepare(batch_of(kit, policy, seed=1))
        assert moved.values is not None and not torch.allclose(moved.values, first.values), (
            "warm-up did not train the critic"
        )
        ppo = learner.update(batch_of(kit, policy, seed=3))
        assert ppo.stage == "ppo" and ppo.actor_updated and ppo.policy_version == 1 and policy.version == 1
        assert ppo.value_loss is not None and ppo.policy_loss is not None and math.isfinite(ppo.policy_loss)
        assert isinstance(ppo.shortest_path_adjusted, int)  # the adjustment is on, and counted
        after = policy.vlm.model.state_dict()
        assert any(not torch.equal(before[k], after[k]) for k in before), "PPO did not change the policy's weights"
        ckpt = learner.save(tmp_path / "ckpt")
        trained = learner.actor_state_dict()
        probe = batch_of(kit, policy, seed=4)
        values = learner.prepare(probe).values
    finally:
        learner.close()
    fresh = vl_policy()
    resumed = VerlLearner.load(ckpt, fresh)
    try:
        assert (resumed.updates, resumed.policy_version, resumed.in_warmup, fresh.version) == (3, 1, False, 1)
        assert all(torch.equal(trained[k], v) for k, v in resumed.actor_state_dict().items())
        again = resumed.prepare(probe).values  # the restored critic scores the same rows the same
        assert values is not None and again is not None and torch.allclose(values, again, atol=1e-6)
        assert resumed.update(batch_of(kit, fresh, seed=5)).policy_version == 2
    finally:
        resumed.close()
