"""HFPolicy on the tiny Qwen2-VL / Qwen2.5-VL: log-probs, ragged batches, masking, weights."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from darwin.models.config import TinyVLMConfig
from darwin.models.factory import VLM, build_tiny_vlm
from darwin.models.scoring import compute_response_logprobs
from darwin.policies.batcher import BatcherConfig, DynamicBatcher
from darwin.policies.hf import HFPolicy, HFPolicyConfig
from darwin.types import ChatMessage, Generation, Prompt

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

FAMILIES = ["qwen2_vl", "qwen2_5_vl"]
_MODELS: dict[str, VLM] = {}


def tiny(family: str = "qwen2_vl") -> VLM:
    if family not in _MODELS:
        _MODELS[family] = build_tiny_vlm(TinyVLMConfig(family=family), seed=0)
    return _MODELS[family]


@pytest.fixture(params=FAMILIES)
def both(request: pytest.FixtureRequest) -> VLM:
    """Each model family (tests where the family matters: positions, vision tower)."""
    return tiny(request.param)


@pytest.fixture
def vlm() -> VLM:
    """The default family (family-independent logic)."""
    return tiny()


def screen(width: int, height: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def prompt(goal: str, *screens: np.ndarray, system: bool = True) -> Prompt:
    messages = [ChatMessage(role="system", text="You are a GUI agent.")] if system else []
    messages.append(ChatMessage(role="user", text=goal, images=tuple(screens)))
    return Prompt(messages=tuple(messages))


def ragged_prompts() -> list[Prompt]:
    """Different image counts and sizes, prompt lengths, with and without a system turn.

    Screens are small (the processor keeps their aspect ratio: 56x112 is 8 visual tokens,
    168x364 is 78) so the tests stay fast; sizes are what matters for raggedness.
    """
    return [
        prompt("Open Settings.", screen(168, 364, 0)),
        prompt("Turn on dark theme in the display settings, then go back home.", screen(56, 112, 1)),
        prompt("Open Chrome.", system=False),  # text only
        prompt("Set an alarm for 7:30 in the Clock app.", screen(112, 252, 2)),
        prompt("Compare.", screen(56, 112, 3), screen(84, 168, 4), system=False),
    ]


def bias_logits(vlm: VLM, bias: dict[int, float]) -> torch.utils.hooks.RemovableHandle:
    """Add a constant to some logits of every forward (a test-only lm_head bias)."""
    add = torch.zeros(vlm.vocab_size)
    for token, value in bias.items():
        add[token] = value

    def hook(module: torch.nn.Module, args: object, output: torch.Tensor) -> torch.Tensor:
        return output + add.to(output.dtype)

    return vlm.model.lm_head.register_forward_hook(hook)


@pytest.fixture
def eos_bias(request: pytest.FixtureRequest) -> Iterator[int]:
    """Make <|im_end|> likely (~1/3 per step) so responses end at ragged lengths."""
    model = request.getfixturevalue("both" if "both" in request.fixturenames else "vlm")
    eos = model.tokenizer.convert_tokens_to_ids("<|im_end|>")
    handle = bias_logits(model, {eos: 7.5})
    yield eos
    handle.remove()


def assert_same(a: Sequence[Generation], b: Sequence[Generation], atol: float = 1e-5) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.response_ids == y.response_ids
        assert x.prompt_ids == y.prompt_ids
        assert x.text == y.text
        np.testing.assert_allclose(x.response_logprobs, y.response_logprobs, atol=atol, rtol=0)


# --- log-probs -------------------------------------------------------------------------
def test_sampled_logprobs_equal_teacher_forced_forward(both: VLM, eos_bias: int) -> None:
    prompts = ragged_prompts()
    with HFPolicy(both, HFPolicyConfig(max_new_tokens=12, seed=7)) as policy:
        gens = policy.generate_sync(prompts)
        lengths = {len(g.response_ids) for g in gens}
        assert len(lengths) > 1, "the EOS bias should give ragged response lengths"
        batched = policy.teacher_forced_logprobs(prompts, [g.response_ids for g in gens])
        for p, g, lp in zip(prompts, gens, batched, strict=True):
            assert lp.shape == (len(g.response_ids),)
            torch.testing.assert_close(lp, torch.tensor(g.response_logprobs), atol=1e-4, rtol=0)
            (single,) = policy.teacher_forced_logprobs([p], [g.response_ids])
            torch.testing.assert_close(single, torch.tensor(g.response_logprobs), atol=1e-4, rtol=0)
            assert torch.isfinite(lp).all()


def test_prompt_ids_are_the_unpadded_model_inputs(vlm: VLM) -> None:
    prompts = ragged_prompts()
    with HFPolicy(vlm, HFPolicyConfig(max_new_tokens=2)) as policy:
        gens = policy.generate_sync(prompts)
        for p, g in zip(prompts, gens, strict=True):
            alone = vlm.build_inputs([{"role": m["role"], "content": m["content"]} for m in _messages(p)])
            assert g.prompt_ids == tuple(alone["input_ids"][0].tolist())
            image_pad = vlm.processor.image_token_id
            n_images = sum(len(m.images) for m in p.messages)
            assert (image_pad in g.prompt_ids) == (n_images > 0)


def _messages(p: Prompt) -> list[dict]:
    from darwin.models.scoring import prompt_to_messages

    return prompt_to_messages(p)


def test_learner_function_is_differentiable_and_matches(vlm: VLM) -> None:
    prompts = ragged_prompts()[:2]
    with HFPolicy(vlm, HFPolicyConfig(max_new_tokens=5, seed=1)) as policy:
        gens = policy.generate_sync(prompts)
        inputs = policy.build_inputs(prompts)
    lp, mask = compute_response_logprobs(
        vlm.model,
        dict(inputs),
        [g.response_ids for g in gens],
        forbidden=policy.forbidden_mask,
        temperature=policy.logprob_temperature,
    )
    assert lp.requires_grad and mask.all()
    lp.sum().backward()
    grad = vlm.model.lm_head.weight.grad
    assert grad is not None and grad.abs().sum() > 0
    vlm.model.zero_grad(set_to_none=True)
    torch.testing.assert_close(lp.detach(), torch.tensor([g.response_logprobs for g in gens]), atol=1e-4, rtol=0)


def test_temperature_semantics(vlm: VLM) -> None:
    """Recorded log-probs use the sampling temperature unless logprob_temperature says otherwise."""
    p = ragged_prompts()[:2]
    with HFPolicy(vlm, HFPolicyConfig(max_new_tokens=6, temperature=0.5, seed=2)) as hot:
        gens = hot.generate_sync(p)
        ids = [g.response_ids for g in gens]
        at_half = hot.teacher_forced_logprobs(p, ids)
        at_one = hot.teacher_forced_logprobs(p, ids, temperature=1.0)
    assert hot.logprob_temperature == 0.5
    for g, a, b in zip(gens, at_half, at_one, strict=True):
        torch.testing.assert_close(a, torch.tensor(g.response_logprobs), atol=1e-4, rtol=0)
        assert not torch.allclose(a, b, atol=1e-3)
    cfg = HFPolicyConfig(max_new_tokens=6, temperature=0.5, seed=2, logprob_temperature=1.0)
    with HFPolicy(vlm, cfg) as untempered:
        gens1 = untempered.generate_sync(p)
    for g, g1, b in zip(gens, gens1, at_one, strict=True):
        assert g1.response_ids == g.response_ids  # same sampling, only the record differs
        torch.testing.assert_close(b, torch.tensor(g1.response_logprobs), atol=1e-4, rtol=0)


# --- ragged batches and seeds ------------------------------------------------------------
def test_ragged_batch_equals_one_by_one_with_same_seed(both: VLM, eos_bias: int) -> None:
    prompts = ragged_prompts()
    cfg = HFPolicyConfig(max_new_tokens=8, seed=11)
    with HFPolicy(both, cfg) as batched, HFPolicy(both, cfg) as single:
        together = batched.generate_sync(prompts)
        alone = [single.generate_sync([p])[0] for p in prompts]
    assert_same(together, alone)
    assert len({g.response_ids for g in together}) > 1


def test_explicit_seeds_make_requests_independent_of_batch_order(vlm: VLM) -> None:
    prompts = ragged_prompts()
    seeds = [101, 202, 303, 404, 505]
    with HFPolicy(vlm, HFPolicyConfig(max_new_tokens=8)) as policy:
        forward = policy.generate_sync(prompts, seeds=seeds)
        backward = policy.generate_sync(prompts[::-1], seeds=seeds[::-1])[::-1]
        pair = policy.generate_sync([prompts[3], prompts[0]], seeds=[seeds[3], seeds[0]])
        other_seed = policy.generate_sync(prompts[:1], seeds=[999])
    assert_same(forward, backward)
    assert_same([forward[3], forward[0]], pair)
    assert other_seed[0].response_ids != forward[0].response_ids


def test_prompt_seeds_make_batched_arrival_order_irrelevant(vlm: VLM) -> None:
    from dataclasses import replace

    prompts = [replace(p, seed=1000 + i) for i, p in enumerate(ragged_prompts())]
    with HFPolicy(vlm, HFPolicyConfig(max_new_tokens=6, seed=0)) as policy:
        expected = [policy.generate_sync([p])[0] for p in prompts]

    async def main() -> list[Generation]:
        with HFPolicy(vlm, HFPolicyConfig(max_new_tokens=6, seed=99)) as backend:
            async with DynamicBatcher(backend, BatcherConfig(min_batch=2, max_batch=3, max_wait=0.05)) as b:
                order = [3, 0, 4, 1, 2]  # arrival order differs from prompt order
                futures = {i: asyncio.ensure_future(b.submit(prompts[i])) for i in order}
                return [await futures[i] for i in range(len(prompts))]

    assert_same(asyncio.run(main()), expected)
    with HFPolicy(vlm, HFPolicyConfig(max_new_tokens=6)) as policy:  # seeds= overrides Prompt.seed
        assert_same(policy.generate_sync(prompts[:1], seeds=[1000]), expected[:1])
        assert policy.generate_sync(prompts[:1], seeds=[7])[0].response_ids != expected[0].response_ids


def test_policy_seed_reproduces_and_global_rng_is_untouched(vlm: VLM) -> None:
    prompts = ragged_prompts()[:3]
    state = torch.get_rng_state()
    with HFPolicy(vlm, HFPolicyConfig(max_new_tokens=6, seed=5)) as a:
        first = a.generate_sync(prompts)
        second = a.generate_sync(prompts)  # the generator moved on: new samples
    with HFPolicy(vlm, HFPolicyConfig(max_new_tokens=6, seed=5)) as b:
        again = b.generate_sync(prompts)
    assert torch.equal(state, torch.get_rng_state())
    assert_same(first, again)
    assert [g.response_ids for g in first] != [g.response_ids for g in second]


def test_responses_stop_at_first_eos_which_is_kept(vlm: VLM, eos_bias: int) -> None:
    with HFPolicy(vlm, HFPolicyConfig(max_new_tokens=3, seed=3)) as policy:
        gens = policy.generate_sync(ragged_prompts() * 2)
    ended = [g for g in gens if g.response_ids[-1] == eos_bias]
    assert ended and len(ended) < len(gens)
    for g in gens:
        body = g.response_ids[:-1]
        assert not set(body) & policy.eos_token_ids
        if g.response_ids[-1] not in policy.eos_token_ids:
            assert len(g.response_ids) == 3
        assert "<|im_end|>" not in g.text
        assert len(g.response_logprobs) == len(g.response_ids)


def test_top_k_one_and_tiny_top_p_are_greedy(vlm: VLM) -> None:
    prompts = ragged_prompts()[:3]
    greedy = HFPolicy(vlm, HFPolicyConfig(max_new_tokens=6, temperature=0))
    top_k = HFPolicy(vlm, HFPolicyConfig(max_new_tokens=6, top_k=1))
    top_p = HFPolicy(vlm, HFPolicyConfig(max_new_tokens=6, top_p=1e-6))
    g0 = greedy.generate_sync(prompts)
    for policy in (top_k, top_p):
        assert [g.response_ids for g in policy.generate_sync(prompts)] == [g.response_ids for g in g0]


def test_greedy_matches_transformers_generate(both: VLM) -> None:
    p = ragged_prompts()[0]
    with HFPolicy(both, HFPolicyConfig(max_new_tokens=8, temperature=0)) as policy:
        (gen,) = policy.generate_sync([p])
        inputs = policy.build_inputs([p])
    with torch.inference_mode():
        out = both.model.generate(**inputs, max_new_tokens=8, do_sample=False)
    ref = out[0, inputs["input_ids"].shape[1] :].tolist()
    assert list(gen.response_ids) == ref[: len(gen.response_ids)]


# --- forbidden tokens --------------------------------------------------------------------
def test_forbidden_tokens_are_never_sampled(both: VLM) -> None:
    image_pad = both.processor.image_token_id
    forbidden = both.forbidden_token_ids()
    assert image_pad in forbidden
    handle = bias_logits(both, {t: 40.0 for t in forbidden})
    try:
        prompts = ragged_prompts()
        # The bias works: without the mask the policy samples image_pad and friends.
        unmasked = HFPolicy(both, HFPolicyConfig(max_new_tokens=2), forbidden_token_ids=())
        assert any(set(g.response_ids) & forbidden for g in unmasked.generate_sync(prompts[:2]))
        with HFPolicy(both, HFPolicyConfig(max_new_tokens=6, seed=4)) as policy:
            gens = policy.generate_sync(prompts)
            for g in gens:
                assert not set(g.response_ids) & forbidden
                assert all(np.isfinite(g.response_logprobs))
            # ... and scoring a forbidden token gives -inf (same mask in log-prob computation);
            # vision placeholders cannot even be fed back to the model.
            vision_start = both.tokenizer.convert_tokens_to_ids("<|vision_start|>")
            (lp,) = policy.teacher_forced_logprobs(prompts[:1], [(vision_start,)])
            assert lp.item() == float("-inf")
            with pytest.raises(ValueError, match="vision placeholder"):
                policy.teacher_forced_logprobs(prompts[:1], [(image_pad,)])
            # The follow-up prompt with the response appended still runs (no image/token mismatch).
            follow = Prompt(messages=(*prompts[0].messages, ChatMessage(role="assistant", text=gens[0].text)))
            policy.generate_sync([follow])
    finally:
        handle.remove()


# --- weights -----------------------------------------------------------------------------
def test_load_weights_changes_outputs_and_bumps_version() -> None:
    vlm = build_tiny_vlm(TinyVLMConfig(), seed=0)
    prompts = ragged_prompts()[:2]
    policy = HFPolicy(vlm, HFPolicyConfig(max_new_tokens=6))
    before = policy.generate_sync(prompts, seeds=[1, 2])
    assert all(g.policy_version == 0 for g in before)
    old_lp = policy.teacher_forced_logprobs(prompts, [g.response_ids for g in before])

    new = {
        k: v + 0.05 * torch.randn(v.shape, generator=torch.Generator().manual_seed(0))
        for k, v in build_tiny_vlm(TinyVLMConfig(), seed=1).model.state_dict().items()
    }
    policy.load_weights(new, version=1)
    assert policy.version == 1
    after = policy.generate_sync(prompts, seeds=[1, 2])
    assert all(g.policy_version == 1 for g in after)
    assert [g.response_ids for g in after] != [g.response_ids for g in before]
    new_lp = policy.teacher_forced_logprobs(prompts, [g.response_ids for g in before])
    assert not torch.allclose(old_lp[0], new_lp[0])
    torch.testing.assert_close(vlm.model.state_dict()["lm_head.weight"], new["lm_head.weight"])

    with pytest.raises(ValueError, match="must be greater"):
        policy.load_weights(new, version=1)
    partial = {k: v for k, v in new.items() if "visual" not in k}
    snapshot = {k: v.clone() for k, v in vlm.model.state_dict().items()}
    with pytest.raises(KeyError, match="missing keys"):
        policy.load_weights({k: v * 0 for k, v in partial.items()}, version=2)
    assert policy.version == 1
    assert all(torch.equal(snapshot[k], v) for k, v in vlm.model.state_dict().items())  # nothing loaded
    policy.load_weights(partial, version=2, strict=False)
    assert policy.version == 2


def test_async_calls_and_weight_swap_serialise_on_one_worker() -> None:
    vlm = build_tiny_vlm(TinyVLMConfig(), seed=0)
    prompts = ragged_prompts()[:3]
    new = build_tiny_vlm(TinyVLMConfig(), seed=1).model.state_dict()

    async def main(policy: HFPolicy) -> list[list[Generation]]:
        calls = [policy.generate([prompts[0]], seeds=[0]), policy.generate([prompts[1]], seeds=[1])]
        calls.append(policy.aload_weights(new, 1))
        calls.append(policy.generate([prompts[2]], seeds=[2]))
        out = await asyncio.gather(*calls)
        return [out[0], out[1], out[3]]

    with HFPolicy(vlm, HFPolicyConfig(max_new_tokens=5)) as policy:
        a, b, c = asyncio.run(main(policy))
        assert [a[0].policy_version, b[0].policy_version, c[0].policy_version] == [0, 0, 1]
        assert_same(c, policy.generate_sync([prompts[2]], seeds=[2]))
    with HFPolicy(build_tiny_vlm(TinyVLMConfig(), seed=0), HFPolicyConfig(max_new_tokens=5)) as fresh:
        assert_same(a + b, fresh.generate_sync(prompts[:2], seeds=[0, 1]))


def test_batcher_over_hf_policy_equals_sequential_generation(vlm: VLM, eos_bias: int) -> None:
    prompts = ragged_prompts() + ragged_prompts()[:2]
    cfg = HFPolicyConfig(max_new_tokens=6, seed=21)

    async def main() -> tuple[list[Generation], dict[int, int]]:
        with HFPolicy(vlm, cfg) as backend:
            async with DynamicBatcher(backend, BatcherConfig(min_batch=4, max_batch=4, max_wait=0.2)) as b:
                outs = []
                for p in prompts:  # submitted in order, served in arrival order
                    outs.append(asyncio.ensure_future(b.submit(p)))
                    await asyncio.sleep(0)
                results = list(await asyncio.gather(*outs))
                return results, b.stats().batch_sizes

    results, sizes = asyncio.run(main())
    assert max(sizes) <= 4 and sum(k * v for k, v in sizes.items()) == len(prompts)
    with HFPolicy(vlm, cfg) as sequential:
        expected = [sequential.generate_sync([p])[0] for p in prompts]
    assert_same(results, expected)


# --- config --------------------------------------------------------------------------------
def test_config_reports_every_problem() -> None:
    with pytest.raises(ValidationError) as info:
        HFPolicyConfig(max_new_tokens=0, temperature=-1, top_p=0, top_k=-2, extra_field=1)
    locs = {e["loc"][0] for e in info.value.errors()}
    assert locs == {"max_new_tokens", "temperature", "top_p", "top_k", "extra_field"}


def test_constructor_errors(vlm: VLM) -> None:
    with pytest.raises(TypeError, match="needs a VLM"):
        HFPolicy()
    eos = vlm.tokenizer.convert_tokens_to_ids("<|im_end|>")
    with pytest.raises(ValueError, match="every EOS id"):
        HFPolicy(vlm, HFPolicyConfig(eos_token_ids=(eos,)), forbidden_token_ids=[eos])
    policy = HFPolicy(model=vlm.model, processor=vlm.processor)
    assert policy.forbidden_token_ids == vlm.forbidden_token_ids()
    with pytest.raises(ValueError, match="seeds"):
        policy.generate_sync(ragged_prompts()[:2], seeds=[1])
    policy.close()
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(policy.generate(ragged_prompts()[:1]))


def test_greedy_prompts_are_argmax_beside_sampled_ones_in_one_batch(both: VLM) -> None:
    """``Prompt.greedy`` rows take the most likely token whatever the policy's temperature
    (an evaluation's greedy episodes); the sampled rows of the same batch are unchanged, and the
    recorded log-probs stay those of the policy's own distribution."""
    from dataclasses import replace

    prompts = [replace(p, seed=50 + i) for i, p in enumerate(ragged_prompts()[:4])]
    mixed = [replace(p, greedy=i % 2 == 0) for i, p in enumerate(prompts)]
    with HFPolicy(both, HFPolicyConfig(max_new_tokens=6, temperature=0)) as cold:
        greedy = cold.generate_sync(prompts)
    with HFPolicy(both, HFPolicyConfig(max_new_tokens=6, temperature=1.0)) as hot:
        sampled = hot.generate_sync(prompts)
        together = hot.generate_sync(mixed)
        alone_greedy = hot.generate_sync(mixed[:1])
    for i, g in enumerate(together):
        expected = greedy[i] if i % 2 == 0 else sampled[i]
        assert g.response_ids == expected.response_ids
    assert together[1].response_logprobs == sampled[1].response_logprobs
    assert alone_greedy[0].response_ids == greedy[0].response_ids
    assert any(greedy[i].response_ids != sampled[i].response_ids for i in range(4))  # the check can fail
