"""The verl learner backend on text decoders: step rows -> verl's batch (always),
configuration, and real updates on verl's FSDP workers on Ray (GRPO on two CPU workers with
gloo; PPO with the critic on a GPU). Screenshot rows and the critic on CPU:
test_verl_vlm.py."""

from __future__ import annotations

import importlib.util
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from darwin.actions import Wait
from darwin.learner.config import LearnerConfig
from darwin.learner.step_rows import LearnerDataError, StepRow, collect_step_rows
from darwin.learner.verl_batch import to_verl_batch
from darwin.learner.verl_config import VerlConfig
from darwin.learner.verl_learner import VerlLearner
from darwin.learner.verl_runtime import VerlBackendUnavailable, check_verl_runtime, prepare_critic_checkpoint
from darwin.types import (
    ChatMessage,
    Decision,
    Generation,
    Observation,
    Phase,
    Prompt,
    Task,
    Termination,
    TerminationReason,
    Trajectory,
    Transition,
    VerifierSpec,
)

TEXT = Prompt(messages=(ChatMessage(role="user", text="open the clock"),))
TASK = Task(id="clock_alarm", instruction="Set an alarm.", app="Clock", verifier=VerifierSpec(predicate="p"))
VOCAB = 256
HAS_SERVER_DEPS = all(importlib.util.find_spec(m) is not None for m in ("ray", "uvicorn", "fastapi"))
NO_SERVER_DEPS = "verl's workers import uvicorn and fastapi (verl's 'verl-core' extra): pip install uvicorn fastapi"
NO_GPU = "needs a CUDA device (torch.cuda.is_available() is False); the CPU runs are in test_verl_vlm.py"


def row(
    step: int, prompt: tuple[int, ...], response: tuple[int, ...], *, reward: float = 0.0, eid: str = "e"
) -> StepRow:
    return StepRow(eid, step, TEXT, prompt, response, tuple(-0.5 for _ in response), reward, False, 0, "g")


def trajectory(eid: str, rewards: list[float], rng: np.random.Generator, *, images: bool = False) -> Trajectory:
    """A completed text trajectory whose steps carry sampled-looking token ids."""
    transitions = []
    shot = np.zeros((4, 4, 3), np.uint8)
    prompt = Prompt(messages=(ChatMessage(role="user", text="go", images=(shot,) if images else ()),))
    for step, reward in enumerate(rewards):
        p = tuple(int(x) for x in rng.integers(1, VOCAB, int(rng.integers(3, 7))))
        r = tuple(int(x) for x in rng.integers(1, VOCAB, int(rng.integers(1, 5))))
        gen = Generation(text="x", prompt_ids=p, response_ids=r, response_logprobs=tuple(-1.0 for _ in r))
        obs = Observation(screenshot=shot, goal=TASK.instruction, device_size=(1080, 2400), task_id=TASK.id, step=step)
        last = step == len(rewards) - 1
        transitions.append(
            Transition(
                episode_id=eid,
                task_id=TASK.id,
                step=step,
                phase=Phase.EXECUTION,
                observation=obs,
                decision=Decision(action=Wait(), generation=gen, prompt=prompt),
                reward=reward,
                done=last,
                termination=Termination(TerminationReason.AGENT_FINISHED) if last else None,
            )
        )
    return Trajectory(
        episode_id=eid, task=TASK, transitions=transitions, termination=Termination(TerminationReason.AGENT_FINISHED)
    )


# --------------------------------------------------------------------------------------
# Step rows -> verl's batch (always runs)
# --------------------------------------------------------------------------------------
def test_batch_layout_left_pads_prompts_and_right_pads_responses() -> None:
    rows = [row(0, (5, 6, 7), (8, 9, 10)), row(1, (11,), (12,))]
    batch = to_verl_batch(rows, pad_token_id=0)
    b = batch.batch
    assert b["prompts"].tolist() == [[5, 6, 7], [0, 0, 11]]
    assert b["responses"].tolist() == [[8, 9, 10], [12, 0, 0]]
    assert b["input_ids"].tolist() == [[5, 6, 7, 8, 9, 10], [0, 0, 11, 12, 0, 0]]
    assert b["attention_mask"].tolist() == [[1] * 6, [0, 0, 1, 1, 0, 0]]
    assert b["response_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    # positions count the valid tokens: verl's compute_position_id_with_mask
    assert b["position_ids"].tolist() == [[0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 1, 1]]
    assert batch.meta_info["temperature"] == 1.0


def test_advantages_sit_on_response_tokens_only_and_filler_rows_carry_nothing() -> None:
    rows = [row(0, (5, 6), (8, 9, 10)), row(1, (11,), (12,)), row(2, (3, 4, 5), (6, 7))]
    adv = torch.arange(1, 10, dtype=torch.float32).reshape(3, 3)
    batch = to_verl_batch(
        rows, pad_token_id=0, pad_to_multiple=4, advantages=adv, returns=adv * 2, values=adv, old_logprobs=-adv
    )
    b = batch.batch
    assert len(batch) == 4
    assert b["advantages"].tolist() == [[1, 2, 3], [4, 0, 0], [7, 8, 0], [0, 0, 0]]
    assert b["returns"][3].abs().sum() == 0 and b["old_log_probs"][3].abs().sum() == 0
    # the filler row is row 0's tokens, attended to (a valid sequence for the model) but never scored
    assert b["response_mask"][3].sum() == 0
    assert b["input_ids"][3].tolist() == b["input_ids"][0].tolist()
    assert b["attention_mask"][3].tolist() == b["attention_mask"][0].tolist()
    assert all(
        v.dtype == torch.float32 for k, v in b.items() if k in ("advantages", "returns", "values", "old_log_probs")
    )


def test_batch_round_trips_through_verls_no_padding_conversion() -> None:
    """verl's own left_right_2_no_padding / no_padding_2_padding take our layout unchanged."""
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import left_right_2_no_padding, no_padding_2_padding

    rows = [row(0, (5, 6), (8, 9, 10)), row(1, (11,), (12,)), row(2, (3, 4, 5), (6, 7))]
    batch = to_verl_batch(rows, pad_token_id=0, pad_to_multiple=2)
    td = left_right_2_no_padding(batch.to_tensordict())
    lengths = td["input_ids"].offsets().diff().tolist()
    assert lengths == [5, 2, 5, 5]
    # a per-token model output whose value is the input token id: sliced back, it must be the
    # token that each response position predicts (verl's shift by one)
    flat = td["input_ids"].values().float()
    back = no_padding_2_padding(flat, td)
    assert back[0].tolist() == [6.0, 8.0, 9.0]  # the prompt's last token predicts response token 0
    assert back[1, 0].item() == 11.0
    assert tu.get_non_tensor_data(td, "max_response_len", -1) == 3


def test_rows_without_prompt_ids_or_with_images_are_named() -> None:
    with pytest.raises(LearnerDataError, match=r"episode 'e' step 0: no prompt token ids"):
        to_verl_batch([row(0, (), (1,))], pad_token_id=0)
    rng = np.random.default_rng(0)
    rows = collect_step_rows([trajectory("vl", [1.0], rng, images=True)]).rows
    with pytest.raises(LearnerDataError, match=r"image\(s\); pass the rows' processor inputs"):
        to_verl_batch(rows, pad_token_id=0)
    with pytest.raises(ValueError, match=r"advantages has shape \(1, 4\)"):
        to_verl_batch([row(0, (1,), (2,))], pad_token_id=0, advantages=torch.zeros(1, 4))


# --------------------------------------------------------------------------------------
# Configuration and runtime checks (always run)
# --------------------------------------------------------------------------------------
def test_config_selects_the_verl_backend_and_reports_every_problem() -> None:
    cfg = LearnerConfig(
        backend="verl",
        verl=VerlConfig(model_path="/m", gpus_per_node=4),
        mini_batch_size=16,
        speed={"micro_batch_size": 4},
    )
    assert cfg.backend.name == "verl" and cfg.verl is not None and cfg.verl.world_size == 4
    with pytest.raises(ValueError) as err:
        LearnerConfig(
            backend="verl",
            verl=VerlConfig(
                model_path="/m", gpus_per_node=3, device="cpu", strategy="fsdp", attn_implementation="flash_attention_2"
            ),
            ppo={"kl_coef": 0.1},
        )
    text = str(err.value)
    for expected in (
        "strategy='fsdp2' with device='cpu'",
        "'sdpa' with device='cpu'",
        "kl_coef > 0 is not supported",
        "mini_batch_size=32 must be a multiple of the verl world size 3",
    ):
        assert expected in text
    with pytest.raises(ValueError, match=r"backend='verl' needs verl=VerlConfig"):
        LearnerConfig(backend="verl")
    with pytest.raises(ValueError, match="verl settings given with backend='local'"):
        LearnerConfig(verl=VerlConfig(model_path="/m"))
    with pytest.raises(ValueError, match="did you mean 'backend'"):
        LearnerConfig(backnd="verl")


def test_gpu_settings_are_checked_where_they_cannot_work() -> None:
    with pytest.raises(ValueError) as err:
        LearnerConfig(
            backend="verl",
            verl=VerlConfig(
                model_path="/m",
                device="cpu",
                attn_implementation="sdpa",
                remove_padding=True,
                infer_max_token_len_per_gpu=64,
                fused_kernels="triton",
            ),
        )
    text = " ".join(str(err.value).split())
    assert "remove_padding=True with device='cpu' and attn_implementation='sdpa'" in text
    assert "infer_max_token_len_per_gpu needs max_token_len_per_gpu" in text
    assert "fused_kernels='triton' needs a GPU (Triton compiles for it): use fused_kernels='torch'" in text
    with pytest.raises(ValueError, match="remove_padding=True with device='cuda' and attn_implementation='sdpa'"):
        LearnerConfig(backend="verl", verl=VerlConfig(model_path="/m", attn_implementation="sdpa", remove_padding=True))


def test_the_paper_presets_gpu_settings_reach_verls_worker_configs(tmp_path: Path, monkeypatch) -> None:
    """What `--preset paper` asks of verl is what verl's workers are started with (built as
    VerlLearner builds them, without Ray or a GPU; verl reads each checkpoint's config)."""
    from darwin.learner.verl_engine import worker_configs
    from darwin.models.factory import build_tiny_vlm
    from darwin.run.load import load_experiment

    checkpoint = build_tiny_vlm(seed=0).save_pretrained(tmp_path / "actor")
    critic = build_tiny_vlm(seed=1).save_pretrained(tmp_path / "critic")
    monkeypatch.setenv("DARWIN_CHECKPOINT", str(checkpoint))
    spa_bench = Path(__file__).resolve().parents[2] / "examples" / "spa_bench.py"
    config = load_experiment(spa_bench, "paper").learner
    assert config.verl is not None
    w = worker_configs(config, critic_path=critic)
    assert w.critic is not None and w.critic_loss is not None
    for group, budget in ((w.actor, 3 * (8192 + 512)), (w.critic, 6 * (8192 + 512))):
        engine, model = group.engine_config, group.model_config
        assert engine.use_dynamic_bsz and engine.max_token_len_per_gpu == budget
        assert engine.infer_max_token_len_per_gpu == 2 * budget
        assert engine.use_remove_padding and model.use_remove_padding and model.enable_gradient_checkpointing
        assert (engine.model_dtype, engine.mixed_precision["param_dtype"]) == ("fp32", "bf16")
        assert model.override_config["attn_implementation"] == "flash_attention_2"
    assert (w.actor_loss.use_dynamic_bsz, w.actor_loss.ppo_max_token_len_per_gpu) == (True, 3 * (8192 + 512))
    assert (w.actor_loss.ppo_mini_batch_size, w.actor_loss.ppo_epochs) == (64, 4)
    assert (w.critic_loss.use_dynamic_bsz, w.critic_loss.ppo_max_token_len_per_gpu) == (True, 6 * (8192 + 512))
    assert w.critic.model_config.path == str(critic) and w.actor.model_config.path == str(checkpoint)
    # The actor's log-probs come from fused chunks of its LM head; the critic has no vocabulary to fuse.
    assert w.actor.model_config.use_fused_kernels and w.actor.model_config.fused_kernel_options == {
        "impl_backend": "torch"
    }
    assert not w.critic.model_config.use_fused_kernels
    # The miniature keeps the CPU path as it was: fixed micro-batches of rows, padding kept, full logits.
    cpu = worker_configs(load_experiment(spa_bench, "paper-miniature").learner, critic_path=critic)
    assert not cpu.actor.engine_config.use_dynamic_bsz and cpu.actor.engine_config.micro_batch_size_per_gpu == 2
    assert not cpu.actor.model_config.use_remove_padding and cpu.actor_loss.ppo_micro_batch_size_per_gpu == 2
    assert not cpu.actor.model_config.use_fused_kernels


def test_fused_log_probs_are_refused_for_a_text_decoder_with_the_fix(tmp_path: Path) -> None:
    from darwin.learner.verl_engine import worker_configs

    actor = _tiny_text_model(tmp_path / "actor")
    settings = VerlConfig(model_path=str(actor), device="cpu", attn_implementation="sdpa", fused_kernels="torch")
    config = LearnerConfig(backend="verl", verl=settings, algorithm="grpo", critic={"warmup_updates": 0})
    with pytest.raises(ValueError, match=r"fused_kernels='torch' with a 'qwen2' model .* set fused_kernels='off'"):
        worker_configs(config)


def test_runtime_check_names_the_missing_gpu_and_lets_the_cpu_run_the_critic() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the no-GPU message cannot show")
    with pytest.raises(VerlBackendUnavailable, match=r"no GPU \(torch.cuda.is_available\(\) is False\)"):
        check_verl_runtime(VerlConfig(model_path="/m"), needs_critic=True)
    # darwin's CPU platform runs verl's critic too (the value-model loader shim: darwin.learner.verl_vlm)
    check_verl_runtime(VerlConfig(model_path="/m", device="cpu", attn_implementation="sdpa"), needs_critic=True)


def test_verl_still_has_no_cpu_engine_of_its_own() -> None:
    """The finding behind device='cpu' (docs/scale.md). If a verl release registers a CPU
    engine, this fails: then drop darwin's platform plugin and run the critic on CPU too."""
    from verl.workers.engine.base import EngineRegistry

    devices = {key if isinstance(key, str) else key[0] for key in EngineRegistry._engines["value_model"]["fsdp2"]}
    assert "cpu" not in devices


# --------------------------------------------------------------------------------------
# The calibrated value head (always runs: plain transformers)
# --------------------------------------------------------------------------------------
def _tiny_text_model(path: Path, seed: int = 0) -> Path:
    from transformers import AutoModelForCausalLM, Qwen2Config

    cfg = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=128,
        tie_word_embeddings=False,
        pad_token_id=0,
    )
    torch.manual_seed(seed)  # a test's own model init; the library never seeds global RNGs
    AutoModelForCausalLM.from_config(cfg).save_pretrained(path)
    return path


def test_critic_checkpoint_has_the_actor_backbone_and_a_calibrated_head(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoModelForTokenClassification

    actor = _tiny_text_model(tmp_path / "actor")
    critic = prepare_critic_checkpoint(actor, tmp_path / "critic", init="calibrated", bias=0.1)
    value_model = AutoModelForTokenClassification.from_pretrained(critic)
    lm = AutoModelForCausalLM.from_pretrained(actor)
    assert torch.equal(value_model.model.layers[0].mlp.up_proj.weight, lm.model.layers[0].mlp.up_proj.weight)
    ids = torch.tensor([[3, 4, 5, 6]])
    values = value_model(input_ids=ids).logits.squeeze(-1)
    assert torch.allclose(values, torch.full_like(values, 0.1))
    random = prepare_critic_checkpoint(actor, tmp_path / "critic-random", init="random", bias=0.1)
    head = AutoModelForTokenClassification.from_pretrained(random).score.weight
    assert head.abs().sum() > 0


def test_critic_loads_with_the_configured_attention_not_verls_fixed_flash_attention(tmp_path: Path) -> None:
    """verl's load_valuehead_model always asks for flash_attention_2 (then for trl's wrapper);
    the workers' loader takes the attention from the config verl built (HFModelConfig's
    override_config), so a machine without flash-attn loads the same value model."""
    from transformers import AutoConfig

    from darwin.learner.verl_vlm import load_value_model

    critic = prepare_critic_checkpoint(
        _tiny_text_model(tmp_path / "actor"), tmp_path / "critic", init="calibrated", bias=0.1
    )
    for attention in ("sdpa", "eager"):
        config = AutoConfig.from_pretrained(critic, attn_implementation=attention)
        model = load_value_model(str(critic), torch.float32, config, False)
        assert type(model).__name__.endswith("ForTokenClassification")
        assert model.config._attn_implementation == attention
        values = model(input_ids=torch.tensor([[3, 4, 5]])).logits.squeeze(-1)
        assert torch.allclose(values, torch.full_like(values, 0.1))


# --------------------------------------------------------------------------------------
# Real updates on verl's workers
# --------------------------------------------------------------------------------------
class ReceivingPolicy:
    """The weight-sync side of a policy: a transformers model that takes the learner's weights."""

    def __init__(self, path: Path) -> None:
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(path)
        self.version = 0
        self.logprob_temperature = 1.0

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        self.model.load_state_dict(state_dict, strict=True)
        self.version = version


def _trajectories(seed: int) -> list[Trajectory]:
    rng = np.random.default_rng(seed)
    return [trajectory(f"t{seed}-{i}", [0.0, reward], rng) for i, reward in enumerate([1.0, 0.0, 1.0, 0.0])]


def _grpo_on_two_cpu_workers(
    actor_path: Path, *, mini_batch_size: int, max_token_len_per_gpu: int | None = None
) -> LearnerConfig:
    """A GRPO actor (no critic) on two gloo CPU workers, 2 rows per micro-batch unless token-budgeted."""
    settings = VerlConfig(
        model_path=str(actor_path),
        gpus_per_node=2,
        device="cpu",
        attn_implementation="sdpa",
        micro_batch_size_per_gpu=2,
        max_token_len_per_gpu=max_token_len_per_gpu,
        ray_num_cpus=2,
    )
    return LearnerConfig(
        backend="verl",
        verl=settings,
        algorithm="grpo",
        critic={"warmup_updates": 0},
        speed={"micro_batch_size": 2},
        mini_batch_size=mini_batch_size,
        ppo_epochs=1,
        actor_lr=1e-2,
    )


@pytest.mark.slow
@pytest.mark.skipif(not HAS_SERVER_DEPS, reason=NO_SERVER_DEPS)
def test_actor_trains_on_two_cpu_workers_with_gloo_and_resumes(tmp_path: Path) -> None:
    """GRPO (no critic) through verl's FSDP2 engine on two Ray CPU workers; the policy gets
    the new weights; a checkpoint written by the workers restores the same actor."""
    actor_path = _tiny_text_model(tmp_path / "actor")
    cfg = _grpo_on_two_cpu_workers(actor_path, mini_batch_size=4)
    policy = ReceivingPolicy(actor_path)
    before = {k: v.clone() for k, v in policy.model.state_dict().items()}
    learner = VerlLearner(policy, cfg, pad_token_id=0)
    try:
        assert not learner.in_warmup and learner.critic_group is None
        metrics = learner.update(_trajectories(1))
        assert metrics.actor_updated and metrics.stage == "grpo" and metrics.policy_version == 1
        assert metrics.steps == 8 and metrics.policy_loss is not None and math.isfinite(metrics.policy_loss)
        assert metrics.actor_grad_norm is not None and metrics.actor_grad_norm > 0
        assert policy.version == 1
        after = policy.model.state_dict()
        assert any(not torch.equal(before[k], after[k]) for k in before), "the update did not change the weights"
        saved = learner.save(tmp_path / "ckpt", pending=_trajectories(2)[:1], extra_state={"note": "x"})
        trained = learner.actor_state_dict()
        # A batch of infrastructure truncations only trains nothing on the workers, as LocalLearner's.
        cut = [
            Trajectory(
                episode_id=t.episode_id,
                task=t.task,
                transitions=t.transitions,
                termination=Termination(TerminationReason.INFRA_TRUNCATED, "deadline"),
            )
            for t in _trajectories(3)
        ]
        skipped = learner.update(cut)
        assert skipped.actor_skipped_reason == "infra_truncations_only" and skipped.stage == "skipped"
        assert (learner.updates, learner.policy_version, policy.version) == (2, 1, 1)
        assert all(torch.equal(trained[k], v) for k, v in learner.actor_state_dict().items())
    finally:
        learner.close()
    fresh = ReceivingPolicy(actor_path)
    resumed = VerlLearner.load(saved, fresh, pad_token_id=0)
    try:
        assert (resumed.updates, resumed.policy_version, fresh.version) == (1, 1, 1)
        assert resumed.resume_state is not None and resumed.resume_state.extra_state == {"note": "x"}
        assert [t.episode_id for t in resumed.resume_state.pending] == ["t2-0"]
        restored = resumed.actor_state_dict()
        assert all(torch.equal(trained[k], restored[k]) for k in trained)
        assert all(torch.equal(fresh.model.state_dict()[k], restored[k]) for k in restored)
    finally:
        resumed.close()


@pytest.mark.slow
@pytest.mark.skipif(not HAS_SERVER_DEPS, reason=NO_SERVER_DEPS)
def test_token_budgeted_micro_batches_train_as_row_counted_ones_on_two_cpu_workers(tmp_path: Path) -> None:
    """verl's dynamic batch size (VerlConfig.max_token_len_per_gpu, the paper preset's GPU
    setting) reaches the workers and changes how rows are grouped, not the update: the same
    batch gives the same loss and gradient norm as fixed micro-batches of 2 rows. A row longer
    than the budget is refused before any worker sees it."""
    actor_path = _tiny_text_model(tmp_path / "actor")
    trajectories = _trajectories(1)
    results = []
    for budget in (None, 24):
        cfg = _grpo_on_two_cpu_workers(actor_path, mini_batch_size=8, max_token_len_per_gpu=budget)
        learner = VerlLearner(ReceivingPolicy(actor_path), cfg, pad_token_id=0)
        try:
            results.append(learner.update(trajectories))
            if budget is not None:
                rng = np.random.default_rng(5)
                long = trajectory("long", [1.0], rng)
                step = long.transitions[0]
                assert step.decision.generation is not None
                gen = replace(step.decision.generation, prompt_ids=tuple(range(1, 31)))
                long = replace(long, transitions=[replace(step, decision=replace(step.decision, generation=gen))])
                with pytest.raises(
                    LearnerDataError, match=r"episode 'long' step 0 has 30 prompt \+ \d+ response tokens"
                ):
                    learner.update([long, *trajectories])
        finally:
            learner.close()
    fixed, budgeted = results
    assert fixed.steps == budgeted.steps == 8
    assert fixed.policy_loss is not None and budgeted.policy_loss is not None
    assert budgeted.policy_loss == pytest.approx(fixed.policy_loss, rel=1e-4, abs=1e-6)
    assert budgeted.actor_grad_norm == pytest.approx(fixed.actor_grad_norm, rel=1e-4)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_GPU)
@pytest.mark.skipif(not HAS_SERVER_DEPS, reason=NO_SERVER_DEPS)
def test_ppo_warmup_calibrated_critic_and_resume_on_gpu(tmp_path: Path) -> None:
    """PPO with one warm-up update on verl's actor and critic workers (one per GPU, at most 2)."""
    gpus = min(2, torch.cuda.device_count())
    actor_path = _tiny_text_model(tmp_path / "actor")
    attn = "flash_attention_2" if importlib.util.find_spec("flash_attn") else "sdpa"
    settings = VerlConfig(
        model_path=str(actor_path), gpus_per_node=gpus, attn_implementation=attn, micro_batch_size_per_gpu=2
    )
    cfg = LearnerConfig(
        backend="verl",
        verl=settings,
        critic={"warmup_updates": 1, "warmup_epochs": 1, "value_head_bias": 0.1},
        speed={"micro_batch_size": 2},
        mini_batch_size=2 * gpus,
        ppo_epochs=1,
    )
    policy = ReceivingPolicy(actor_path)
    before = {k: v.clone() for k, v in policy.model.state_dict().items()}
    learner = VerlLearner(policy, cfg, pad_token_id=0)
    try:
        assert learner.in_warmup
        batch = learner.prepare(_trajectories(1))
        assert batch.values is not None
        assert torch.allclose(batch.values[batch.response_mask], torch.tensor(0.1), atol=1e-3)  # calibrated head
        warm = learner.update(_trajectories(1))
        assert warm.stage == "critic_warmup" and not warm.actor_updated and policy.version == 0
        assert warm.value_loss is not None and warm.policy_loss is None
        assert all(torch.equal(before[k], v) for k, v in learner.actor_state_dict().items())
        ppo = learner.update(_trajectories(2))
        assert ppo.stage == "ppo" and ppo.actor_updated and policy.version == 1
        assert ppo.value_loss is not None and ppo.policy_loss is not None
        saved = learner.save(tmp_path / "ckpt")
        trained = learner.actor_state_dict()
    finally:
        learner.close()
    fresh = ReceivingPolicy(actor_path)
    resumed = VerlLearner.load(saved, fresh, pad_token_id=0)
    try:
        assert (resumed.updates, resumed.policy_version, resumed.in_warmup) == (2, 1, False)
        assert all(torch.equal(trained[k], v) for k, v in resumed.actor_state_dict().items())
        assert resumed.update(_trajectories(3)).policy_version == 2
    finally:
        resumed.close()
