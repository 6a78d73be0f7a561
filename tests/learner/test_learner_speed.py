"""The learner's fast paths compute what the plain paths compute.

- a frozen vision tower's features, computed once and scattered into the embeddings, give the
  log-probs and values of a forward that runs the tower (1e-5);
- while the actor's tower trains, the reference (and a critic whose tower is frozen) read the
  base model's cached features and score as if they ran their own towers (1e-5);
- M-RoPE positions computed once per row and extended over the response equal the model's
  own ``get_rope_index`` over prompt + response;
- rows rebuilt from the sampler's recorded prompt ids and screenshots equal the processor's;
- only stale rows are re-scored for decoupled PPO's proximal log-probs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from darwin.learner.config import LearnerConfig
from darwin.learner.local import LocalLearner
from darwin.learner.step_rows import (
    ImageFeatureCache,
    attach_image_features,
    attach_positions,
    collate,
    collect_step_rows,
    preprocess_rows,
)
from darwin.models.anatomy import vision_tower_of
from darwin.models.pixels import PixelEncoder
from darwin.models.scoring import (
    MIN_SHARED_PREFIX,
    compute_response_logprobs,
    response_batch,
    rope_index,
    shared_prefix_length,
)


def _rows_and_inputs(policy, trajectories):
    rows = collect_step_rows(trajectories).rows
    return rows, preprocess_rows(policy, rows, chunk=8)


def test_precomputed_positions_equal_the_models_rope_index(policy, trajectories):
    rows, inputs = _rows_and_inputs(policy, trajectories)
    with_positions = attach_positions(policy.vlm.model, inputs, chunk=3)
    part = [0, 3, 5, 6]
    responses = [rows[i].response_ids for i in part]
    plain = response_batch(policy.vlm.model, collate([inputs[i] for i in part], 0), responses)
    fast = response_batch(policy.vlm.model, collate([with_positions[i] for i in part], 0), responses)
    mask = plain.model_inputs["attention_mask"].bool()
    want = plain.model_inputs["position_ids"]
    got = fast.model_inputs["position_ids"]
    assert want is not None and got is not None and want.shape == got.shape
    assert torch.equal(got[:, mask], want[:, mask])  # every real token, prompt and response
    full, _ = rope_index(
        policy.vlm.model,
        plain.model_inputs["input_ids"],
        plain.model_inputs["attention_mask"],
        plain.model_inputs["mm_token_type_ids"],
        plain.model_inputs["image_grid_thw"],
    )
    assert torch.equal(full[:, mask], got[:, mask])


def test_frozen_tower_features_give_the_same_logprobs_and_values(policy, trajectories, kit):
    learner = LocalLearner(policy, kit.small_config(speed={"freeze_vision": True}))
    rows, inputs = _rows_and_inputs(policy, trajectories)
    fast_inputs = attach_image_features(learner._actor_backbone, attach_positions(learner.actor, inputs))
    assert all(r.pixel_values is None and r.image_embeds is not None for r in fast_inputs)
    responses = [r.response_ids for r in rows]
    plain = collate(inputs, learner._pad_id)
    fast = collate(fast_inputs, learner._pad_id)
    assert "pixel_values" not in fast and "image_embeds" in fast
    with torch.no_grad():
        want, mask = compute_response_logprobs(learner.actor, plain, responses, forbidden=policy.forbidden_mask)
        got, got_mask = compute_response_logprobs(learner.actor, fast, responses, forbidden=policy.forbidden_mask)
        want_values, _ = learner.critic(plain, responses)
        got_values, _ = learner.critic(fast, responses)
    assert torch.equal(mask, got_mask)
    assert torch.allclose(got[mask], want[mask], atol=1e-5, rtol=0)
    assert torch.allclose(got_values[mask], want_values[mask], atol=1e-5, rtol=0)


def test_frozen_tower_stays_put_and_its_features_are_cached(policy, trajectories, kit):
    learner = LocalLearner(policy, kit.small_config(critic={"lr": 1e-2}, speed={"freeze_vision": True}, actor_lr=1e-2))
    tower_before = {k: v.clone() for k, v in vision_tower_of(learner._actor_backbone).state_dict().items()}
    text_before = learner.actor.get_input_embeddings().weight.detach().clone()
    assert all(not p.requires_grad for p in vision_tower_of(learner._actor_backbone).parameters())
    assert all(not p.requires_grad for p in vision_tower_of(learner.critic.trunk).parameters())
    learner.update(trajectories)
    assert kit.params_equal(vision_tower_of(learner._actor_backbone), tower_before)
    assert kit.params_equal(vision_tower_of(policy.vlm.model.model), tower_before)  # what the policy received
    assert not torch.equal(learner.actor.get_input_embeddings().weight, text_before)  # the text side trains
    cache = learner.image_features
    assert cache is not None and cache.misses == 7 and cache.hits == 0 and len(cache) == 7
    learner.update(trajectories[:1])
    assert cache.hits == 3 and cache.misses == 7  # the same screenshots: no tower pass


def test_the_reference_and_a_frozen_critic_tower_read_the_base_models_cached_features(policy, trajectories, kit):
    learner = LocalLearner(
        policy, kit.small_config(ppo={"kl_coef": 0.1}, critic={"freeze_vision": True, "lr": 1e-2}, actor_lr=1e-2)
    )
    critic_tower, actor_tower = vision_tower_of(learner.critic.trunk), vision_tower_of(learner._actor_backbone)
    assert all(not p.requires_grad for p in critic_tower.parameters())
    assert all(p.requires_grad for p in actor_tower.parameters())
    critic_before = {k: v.clone() for k, v in critic_tower.state_dict().items()}
    actor_before = {k: v.clone() for k, v in actor_tower.state_dict().items()}

    batch = learner.prepare(trajectories)
    assert all(r.pixel_values is not None for r in batch.inputs)  # the actor's tower runs in its passes
    assert batch.critic_inputs is not None
    assert all(r.pixel_values is None and r.image_embeds is not None for r in batch.critic_inputs)
    # The same scores as the critic and the reference running their own towers on the pixels.
    longest, mask = batch.response_mask.shape[1], batch.response_mask
    with torch.no_grad():
        (want_values,) = learner._score(batch.rows, batch.inputs, longest, learner._critic_values)
        (want_ref,) = learner._score(batch.rows, batch.inputs, longest, learner._reference_logprobs)
    assert torch.allclose(batch.values[mask], want_values[mask], atol=1e-5, rtol=0)
    assert torch.allclose(batch.ref_logprobs[mask], want_ref[mask], atol=1e-5, rtol=0)
    cache = learner.image_features
    assert cache is not None and cache.misses == 7 and cache.hits == 0

    learner.update(trajectories)  # prepares again: every screenshot was seen
    assert cache.misses == 7 and cache.hits == 7
    assert kit.params_equal(critic_tower, critic_before)
    assert not kit.params_equal(actor_tower, actor_before)
    assert not kit.params_equal(vision_tower_of(learner.reference.model), actor_tower.state_dict())


def test_the_reference_reads_cached_features_and_the_critic_its_own_tower_by_default(policy, trajectories, kit):
    learner = LocalLearner(policy, kit.small_config(ppo={"kl_coef": 0.1}))
    assert all(p.requires_grad for p in vision_tower_of(learner.critic.trunk).parameters())
    batch = learner.prepare(trajectories)
    assert batch.critic_inputs is None
    assert learner.image_features is not None and learner.image_features.misses == 7
    longest, mask = batch.response_mask.shape[1], batch.response_mask
    with torch.no_grad():
        (want_ref,) = learner._score(batch.rows, batch.inputs, longest, learner._reference_logprobs)
    assert torch.allclose(batch.ref_logprobs[mask], want_ref[mask], atol=1e-5, rtol=0)
    without_reference = LocalLearner(policy, kit.small_config(ppo={"kl_coef": 0.0}))
    assert without_reference.image_features is None


def test_unfrozen_tower_trains(policy, trajectories, kit):
    learner = LocalLearner(policy, kit.small_config(actor_lr=1e-2))
    before = {k: v.clone() for k, v in vision_tower_of(learner._actor_backbone).state_dict().items()}
    learner.update(trajectories)
    assert learner.image_features is None  # no reference (kl_coef 0) and no frozen tower: nothing to cache
    assert not kit.params_equal(vision_tower_of(learner._actor_backbone), before)


def test_feature_cache_evicts_the_least_recently_used_within_its_bytes():
    cache = ImageFeatureCache(max_bytes=3 * 16)  # three (2, 2) float32 tensors
    keys = [ImageFeatureCache.key(np.full((2, 2, 3), i, np.uint8)) for i in range(4)]
    assert len(set(keys)) == 4
    for k in keys[:3]:
        cache.put(k, torch.zeros(2, 2))
    assert cache.get(keys[0]) is not None  # now the most recently used
    cache.put(keys[3], torch.zeros(2, 2))
    assert len(cache) == 3 and cache.get(keys[1]) is None and cache.get(keys[0]) is not None
    with pytest.raises(ValueError, match="screenshots"):
        attach_image_features(torch.nn.Linear(1, 1), [], cache=cache)


def _counting(policy, calls: list[int]):
    """The policy's processor path, recording how many prompts each call built."""

    def build(prompts):
        calls.append(len(prompts))
        return policy.build_inputs(prompts)

    return build


def test_rows_rebuilt_from_the_sampler_equal_the_processors(policy, trajectories):
    rows = collect_step_rows(trajectories).rows
    calls: list[int] = []
    counting = _counting(policy, calls)

    pixels = PixelEncoder(policy.vlm.processor.image_processor)
    image_token = policy.vlm.model.config.image_token_id
    fast = preprocess_rows(counting, rows, chunk=2, pixels=pixels, image_token_id=image_token)
    assert calls == [2]  # only the first chunk ran through the processor (the check)
    for row, got in zip(rows, fast, strict=True):
        want = policy.build_inputs([row.prompt])  # what the sampler fed the model for this step
        assert tuple(got.input_ids.tolist()) == row.prompt_ids == tuple(want["input_ids"][0].tolist())
        assert torch.equal(got.mm_token_type_ids, want["mm_token_type_ids"][0])
        assert torch.equal(got.pixel_values, want["pixel_values"])
        assert torch.equal(got.image_grid_thw, want["image_grid_thw"])
        # its own storage, not a view of every row's: verl pickles each row to its workers
        assert got.pixel_values.untyped_storage().nbytes() == got.pixel_values.numel() * got.pixel_values.element_size()


def test_rows_fall_back_to_the_processor_when_the_encoder_cannot_reproduce_it(policy, trajectories):
    rows = collect_step_rows(trajectories).rows
    calls: list[int] = []
    counting = _counting(policy, calls)

    class Skewed(PixelEncoder):  # an encoder that disagrees with the processor
        def from_patches(self, patches):
            return super().from_patches(patches) + 1.0

    skewed = Skewed(policy.vlm.processor.image_processor)
    out = preprocess_rows(counting, rows, chunk=2, pixels=skewed, image_token_id=policy.vlm.model.config.image_token_id)
    assert sum(calls) == len(rows)  # every chunk through the processor
    plain = preprocess_rows(policy, rows, chunk=8)
    assert all(torch.equal(a.pixel_values, b.pixel_values) for a, b in zip(out, plain, strict=True))


def test_only_stale_rows_are_rescored_for_the_proximal_policy(policy, trajectories, kit):
    learner = LocalLearner(policy, kit.small_config(ppo={"old_logprobs": "recompute"}, actor_lr=1e-2))
    batch = learner.prepare(trajectories)  # sampled by the current weights: nothing is stale
    assert torch.equal(
        batch.old_logprobs,
        batch.old_logprobs.new_tensor(0)
        .expand_as(batch.old_logprobs)
        .masked_scatter(batch.response_mask, _behaviour(batch)),
    )
    learner.update(trajectories)  # the actor moves on: the same rows are now stale
    stale = learner.prepare(trajectories)
    with torch.no_grad():
        current, mask = compute_response_logprobs(
            learner.actor,
            collate(stale.inputs, learner._pad_id),
            [r.response_ids for r in stale.rows],
            forbidden=policy.forbidden_mask,
        )
    assert torch.allclose(stale.old_logprobs[mask], current[mask], atol=1e-5)
    assert not torch.allclose(stale.old_logprobs[mask], _behaviour(stale), atol=1e-4)


def _behaviour(batch) -> torch.Tensor:
    return torch.tensor([x for r in batch.rows for x in r.old_logprobs], dtype=torch.float32)


def test_verl_refuses_a_frozen_tower():
    with pytest.raises(ValueError, match="freeze_vision"):
        LearnerConfig(backend="verl", speed={"freeze_vision": True}, verl={"model_path": "/tmp/x"})


def test_a_shared_critic_scores_values_and_proximal_logprobs_in_one_pass(policy, trajectories, kit):
    learner = LocalLearner(
        policy, kit.small_config(ppo={"old_logprobs": "recompute"}, critic={"backbone": "shared"}, actor_lr=1e-2)
    )
    learner.update(trajectories)  # the actor moves on: the rows are stale
    calls: list[str] = []
    real_forward = learner.actor.forward
    learner.actor.forward = lambda *a, **k: calls.append("actor") or real_forward(*a, **k)
    merged = learner.prepare(trajectories)
    learner.actor.forward = real_forward
    with torch.no_grad():
        plain = collate(merged.inputs, learner._pad_id)
        responses = [r.response_ids for r in merged.rows]
        current, mask = compute_response_logprobs(learner.actor, plain, responses, forbidden=policy.forbidden_mask)
        values, _ = learner.critic(plain, responses, backbone_grad=False)
    micro_batches = -(-len(merged.rows) // learner.config.speed.micro_batch_size)
    reference_passes = micro_batches if learner.config.ppo.kl_coef > 0 and learner.reference is None else 0
    assert len(calls) == micro_batches + reference_passes  # values and log-probs share a forward
    assert torch.allclose(merged.old_logprobs[mask], current[mask], atol=1e-5)
    assert torch.allclose(merged.values[mask], values[mask], atol=1e-5)
    assert not torch.allclose(merged.old_logprobs[mask], _behaviour(merged), atol=1e-4)


def test_a_shared_prompt_prefix_gives_the_same_logprobs_values_and_gradients(policy, trajectories, kit):
    learner = LocalLearner(policy, kit.small_config())
    rows, inputs = _rows_and_inputs(policy, trajectories)
    batch = collate(attach_positions(learner.actor, inputs), learner._pad_id)
    responses = [r.response_ids for r in rows]
    seq = response_batch(learner.actor, batch, responses, share_prefix=True)
    assert seq.prefix is not None  # the system turn, and the chat template's tokens around it
    shared = seq.prefix.input_ids.shape[1]
    assert shared >= MIN_SHARED_PREFIX and seq.prompt_length == batch["input_ids"].shape[1] - shared

    def scores(share: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        learner.actor.zero_grad(set_to_none=True)
        lp, mask = compute_response_logprobs(
            learner.actor, batch, responses, forbidden=policy.forbidden_mask, share_prefix=share
        )
        lp.sum().backward()  # gradients flow through the prefix's keys and values too
        grad = learner.actor.get_input_embeddings().weight.grad.clone()
        with torch.no_grad():
            values, _ = learner.critic(batch, responses, share_prefix=share)
        return lp.detach(), mask, values, grad

    want, mask, want_values, want_grad = scores(False)
    got, got_mask, got_values, got_grad = scores(True)
    assert torch.equal(mask, got_mask)
    assert torch.allclose(got[mask], want[mask], atol=1e-5, rtol=0)
    assert torch.allclose(got_values[mask], want_values[mask], atol=1e-5, rtol=0)
    prefix_rows = seq.prefix.input_ids[0].unique()
    assert want_grad[prefix_rows].abs().sum() > 0  # the prefix's tokens get a gradient
    assert torch.allclose(got_grad, want_grad, atol=1e-5, rtol=1e-4)


def test_prompts_without_a_common_prefix_are_not_split():
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    mask = torch.ones_like(ids)
    assert shared_prefix_length(ids, mask, torch.zeros_like(ids)) == 0
    # an image token ends the shared text even where the ids agree
    same = torch.tensor([[7, 7, 7, 7], [7, 7, 7, 7]])
    mm = torch.tensor([[0, 0, 1, 0], [0, 0, 1, 0]])
    assert shared_prefix_length(same, torch.ones_like(same), mm) == 2
