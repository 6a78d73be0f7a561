"""verl's actor and critic on a GPU in bf16, with flash-attention where it is installed (``pytest -m gpu``): the tiny
Qwen2-VL and a Qwen2.5-VL-shaped model of about 1 B parameters with random weights. Without
a GPU every test here skips with its reason; CI never has one."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch

from darwin.bench.learner import SIZES  # 1b: 12 text layers of width 2048, a 4-block tower of width 1024
from darwin.learner.config import LearnerConfig
from darwin.learner.step_rows import collect_step_rows, preprocess_rows
from darwin.learner.verl_batch import to_verl_batch
from darwin.learner.verl_config import VerlConfig
from darwin.learner.verl_learner import VerlLearner
from darwin.models.config import TinyVLMConfig
from darwin.models.factory import build_tiny_vlm
from darwin.models.scoring import compute_response_logprobs
from darwin.policies.hf import HFPolicy, HFPolicyConfig

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA device (torch.cuda.is_available() is False)"
    ),
]
ATTENTION = "flash_attention_2" if importlib.util.find_spec("flash_attn") else "sdpa"
"""flash-attention where it is installed (pip install flash-attn --no-build-isolation), else PyTorch's sdpa."""

SCREEN = (56, 112)


@pytest.mark.parametrize(("family", "size"), [("qwen2_vl", "tiny"), ("qwen2_5_vl", "1b")])
def test_ppo_with_critic_warmup_on_gpu_in_bf16(tmp_path: Path, kit, family: str, size: str) -> None:
    cfg = TinyVLMConfig(family=family, screen_width=SCREEN[0], screen_height=SCREEN[1], **SIZES[size])
    vlm = build_tiny_vlm(cfg, seed=0)
    if size == "1b":
        assert 0.8e9 < sum(p.numel() for p in vlm.model.parameters()) < 1.3e9
    policy = HFPolicy(vlm, HFPolicyConfig(max_new_tokens=5, seed=1))
    trajectories = [kit.sampled_trajectory(policy, [0.0, r], seed=i) for i, r in enumerate([1.0, 0.0, 1.0, 0.0])]
    later = [kit.sampled_trajectory(policy, [0.0, r], seed=10 + i) for i, r in enumerate([0.0, 1.0, 1.0, 0.0])]
    path = vlm.save_pretrained(tmp_path / "actor")
    settings = VerlConfig(
        model_path=str(path),
        gpus_per_node=1,
        attn_implementation=ATTENTION,
        model_dtype="fp32",
        compute_dtype="bf16",
        micro_batch_size_per_gpu=2,
    )
    config = LearnerConfig(
        backend="verl",
        verl=settings,
        critic={"warmup_updates": 1, "warmup_epochs": 1, "value_head_bias": 0.1},
        speed={"micro_batch_size": 2},
        ppo_epochs=1,
        mini_batch_size=4,
    )
    learner = VerlLearner(policy, config)
    try:
        rows = collect_step_rows(trajectories).rows
        data = to_verl_batch(
            rows,
            pad_token_id=learner._pad_id,
            pad_to_multiple=4,
            inputs=preprocess_rows(policy, rows),
            rope_model=policy.vlm.model,
        )
        verl_lp = learner._infer(learner.actor_group, data, "log_probs")[: len(rows)]
        everything = torch.zeros(vlm.vocab_size, dtype=torch.bool)
        with torch.no_grad():
            ours, mask = compute_response_logprobs(
                vlm.model,
                policy.build_inputs([r.prompt for r in rows]),
                [r.response_ids for r in rows],
                forbidden=everything,
            )
        assert (verl_lp - ours).abs()[mask].max() < 0.1  # bf16 against fp32
        first = learner.prepare(trajectories)
        assert first.values is not None and torch.allclose(
            first.values[first.response_mask], torch.tensor(0.1), atol=2e-3
        )
        warm = learner.update(trajectories)
        assert warm.stage == "critic_warmup" and not warm.actor_updated and warm.screenshots == warm.steps
        ppo = learner.update(later)
        assert ppo.actor_updated and ppo.policy_version == 1 and policy.version == 1
        assert ppo.policy_loss is not None and math.isfinite(ppo.policy_loss) and ppo.value_loss is not None
    finally:
        learner.close()
