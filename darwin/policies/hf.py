"""A transformers policy for Qwen2-VL-family models (tiny or real, CPU or GPU).

:class:`HFPolicy` samples responses with its own KV-cache decode loop (no
``model.generate``): left-padded batches with explicit M-RoPE positions, the full
distribution by default (``top_k=0``, ``top_p=1``), forbidden tokens (vision specials,
pad, embedding rows past the tokenizer) masked to ``-inf`` both when sampling and when
computing log-probs, and randomness that belongs to each *request*, not to the batch:
the same prompt with the same request seed gives the same tokens whether it is sampled
alone or inside any batch.

    >>> import numpy as np
    >>> from darwin.models.factory import build_tiny_vlm
    >>> from darwin.types import ChatMessage, Prompt
    >>> from darwin.policies.hf import HFPolicy, HFPolicyConfig
    >>> policy = HFPolicy(build_tiny_vlm(seed=0), HFPolicyConfig(max_new_tokens=8, seed=1))
    >>> screen = np.zeros((560, 252, 3), np.uint8)
    >>> prompt = Prompt(messages=(ChatMessage(role="user", text="Open Settings.", images=(screen,)),))
    >>> (gen,) = policy.generate_sync([prompt])
    >>> len(gen.response_ids) == len(gen.response_logprobs) <= 8, gen.policy_version
    (True, 0)
    >>> lp = policy.teacher_forced_logprobs([prompt], [gen.response_ids])[0]
    >>> bool(abs(lp - torch.tensor(gen.response_logprobs)).max() < 1e-4)
    True
    >>> policy.close()

Log-prob semantics (what ``Generation.response_logprobs`` holds): ``log softmax((l + m) /
T_lp)`` at the sampled token, where ``l`` are the model's logits, ``m`` is ``-inf`` on the
forbidden ids and 0 elsewhere, and ``T_lp`` is ``config.logprob_temperature``, by default
the sampling temperature (the behaviour policy's own log-probs, verl's convention; at
the default ``temperature=1`` this is simply the masked model distribution). ``top_k`` /
``top_p`` truncation is *not* folded into the log-probs: with the defaults (full
distribution) the sampled distribution and the recorded log-probs are the same object.
:func:`compute_response_logprobs` recomputes exactly this quantity (with gradients) for
the learner; :meth:`HFPolicy.teacher_forced_logprobs` is the no-grad convenience.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator
from transformers import BatchFeature, DynamicCache, PreTrainedModel
from transformers.processing_utils import ProcessorMixin

from darwin.models.factory import VLM, mm_token_type_ids
from darwin.models.scoring import (  # the pure helpers the learner shares
    compute_response_logprobs,
    forbidden_mask,
    prompt_to_messages,
    rope_index,
)
from darwin.policies.base import Policy
from darwin.types import Generation, Prompt

logger = logging.getLogger(__name__)

_SEED_BOUND = 2**62


class HFPolicyConfig(BaseModel):
    """Sampling settings of an :class:`HFPolicy` (validated when built; frozen).

    >>> HFPolicyConfig(max_new_tokens=32, temperature=0.7).logprob_temperature_resolved
    0.7
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_new_tokens: int = Field(default=64, ge=1, le=65_536, description="response length cap (paper: 512)")
    temperature: float = Field(
        default=1.0,
        ge=0.0,
        le=100.0,
        description="sampling temperature; 0 means greedy (argmax of the masked logits)",
    )
    top_p: float = Field(
        default=1.0,
        gt=0.0,
        le=1.0,
        description="nucleus sampling mass; 1.0 samples the full distribution (on-policy for PPO)",
    )
    top_k: int = Field(
        default=0,
        ge=0,
        description="keep only the k most likely tokens; 0 disables (transformers' default is 50)",
    )
    logprob_temperature: float | None = Field(
        default=None,
        gt=0.0,
        le=100.0,
        description="temperature of the recorded log-probs; None: the sampling temperature (1.0 when greedy)",
    )
    seed: int = Field(default=0, ge=0, description="seeds the policy's generator, which draws one seed per request")
    eos_token_ids: tuple[int, ...] | None = Field(
        default=None,
        description="ids that end a response; None: the model's generation_config EOS ids plus the tokenizer's EOS",
    )

    @model_validator(mode="after")
    def _check(self) -> HFPolicyConfig:
        if self.eos_token_ids is not None and not self.eos_token_ids:
            raise ValueError("eos_token_ids must name at least one id (or be None for the model's)")
        return self

    @property
    def logprob_temperature_resolved(self) -> float:
        """The temperature the recorded (and recomputed) log-probs use."""
        if self.logprob_temperature is not None:
            return self.logprob_temperature
        return self.temperature if self.temperature > 0 else 1.0


# --------------------------------------------------------------------------------------
# The policy
# --------------------------------------------------------------------------------------
class HFPolicy(Policy):
    """Samples from a transformers Qwen2-VL-family model; records ids, log-probs, version.

    ``vlm`` is a :class:`darwin.models.factory.VLM` (tiny or real; CPU or GPU); alternatively pass
    ``model=`` and ``processor=``. Generation runs on one dedicated worker thread and every
    use of the model (generation, :meth:`teacher_forced_logprobs`, :meth:`load_weights`)
    holds one lock, so the model is never used by two calls at once (``rope_deltas`` and
    the weights are shared state). Each request's seed is ``seeds[i]`` if given, else
    ``Prompt.seed``, else the next draw of the policy's own ``torch.Generator`` (seeded
    by ``config.seed``, in call order); the request's uniforms come from a generator
    seeded with it, one per decode step, and tokens are drawn by inverse CDF, so a
    request's tokens do not depend on what else is in its batch. Global RNGs are never
    touched.

    >>> import asyncio
    >>> from darwin.models.factory import build_tiny_vlm
    >>> from darwin.types import ChatMessage, Prompt
    >>> from darwin.policies.hf import HFPolicy, HFPolicyConfig
    >>> vlm = build_tiny_vlm(seed=0)
    >>> p = Prompt(messages=(ChatMessage(role="user", text="Open Clock."),))
    >>> with HFPolicy(vlm, HFPolicyConfig(max_new_tokens=4)) as a, HFPolicy(vlm, HFPolicyConfig(max_new_tokens=4)) as b:
    ...     one = asyncio.run(a.generate([p, p]))
    ...     two = b.generate_sync([p]) + b.generate_sync([p])
    >>> [g.response_ids for g in one] == [g.response_ids for g in two]
    True
    """

    def __init__(
        self,
        vlm: VLM | None = None,
        config: HFPolicyConfig | None = None,
        *,
        model: PreTrainedModel | None = None,
        processor: ProcessorMixin | None = None,
        forbidden_token_ids: Iterable[int] | None = None,
        version: int = 0,
    ) -> None:
        if vlm is None:
            if model is None or processor is None:
                raise TypeError("HFPolicy needs a VLM, or both model= and processor=")
            vlm = VLM(model=model, processor=processor)
        elif model is not None or processor is not None:
            raise TypeError("pass either a VLM or model=/processor=, not both")
        self.vlm = vlm
        self.config = config if config is not None else HFPolicyConfig()
        self.version = int(version)
        model_ = vlm.model
        self._device = next(model_.parameters()).device
        vocab = vlm.vocab_size
        lm_rows = model_.get_output_embeddings().weight.shape[0]
        if lm_rows != vocab:
            raise ValueError(f"input embedding has {vocab} rows but lm_head {lm_rows}")
        ids = vlm.forbidden_token_ids() if forbidden_token_ids is None else frozenset(forbidden_token_ids)
        self.forbidden_token_ids: frozenset[int] = frozenset(ids)
        self._forbidden = forbidden_mask(self.forbidden_token_ids, vocab, self._device)
        self.eos_token_ids: frozenset[int] = self._resolve_eos()
        reachable = self.eos_token_ids - self.forbidden_token_ids
        if not reachable:
            raise ValueError(
                f"every EOS id {sorted(self.eos_token_ids)} is forbidden, so no response could end; "
                "pass eos_token_ids or forbidden_token_ids"
            )
        self._seed_generator = torch.Generator(device="cpu").manual_seed(self.config.seed)
        self._lock = threading.RLock()
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    # -- plumbing ---------------------------------------------------------------------
    def _resolve_eos(self) -> frozenset[int]:
        if self.config.eos_token_ids is not None:
            ids = set(self.config.eos_token_ids)
        else:
            ids = set()
            gen_eos = getattr(getattr(self.vlm.model, "generation_config", None), "eos_token_id", None)
            if isinstance(gen_eos, int):
                ids.add(gen_eos)
            elif gen_eos is not None:
                ids.update(int(i) for i in gen_eos)
            if self.vlm.tokenizer.eos_token_id is not None:
                ids.add(int(self.vlm.tokenizer.eos_token_id))
        if not ids:
            raise ValueError("the model and tokenizer name no EOS token; pass HFPolicyConfig(eos_token_ids=...)")
        bad = [i for i in ids if not 0 <= i < self.vlm.vocab_size]
        if bad:
            raise ValueError(f"EOS ids {bad} are outside the vocabulary [0, {self.vlm.vocab_size})")
        return frozenset(ids)

    @property
    def device(self) -> torch.device:
        """Where the model's parameters live (inputs are moved there)."""
        return self._device

    @property
    def forbidden_mask(self) -> torch.Tensor:
        """``(vocab_size,)`` bool tensor on :attr:`device`, True at the forbidden ids.

        Pass it (and :attr:`logprob_temperature`) to :func:`compute_response_logprobs`.
        """
        return self._forbidden

    @property
    def logprob_temperature(self) -> float:
        """Temperature of ``Generation.response_logprobs`` (pass it to the learner)."""
        return self.config.logprob_temperature_resolved

    def _worker(self) -> ThreadPoolExecutor:
        if self._closed:
            raise RuntimeError("HFPolicy is closed")
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="darwin-hf-policy")
        return self._executor

    def close(self) -> None:
        """Stop the worker thread (after the call it is running). Further async calls raise."""
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def __enter__(self) -> HFPolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- inputs -----------------------------------------------------------------------
    def build_inputs(self, prompts: Sequence[Prompt]) -> BatchFeature:
        """The left-padded model batch for ``prompts`` (chat template + screenshots), on CPU.

        The learner should build its inputs with this method (or the same processor) so the
        prompt token ids match ``Generation.prompt_ids`` exactly.
        """
        if not prompts:
            raise ValueError("build_inputs needs at least one prompt")
        return self.vlm.build_inputs([prompt_to_messages(p) for p in prompts])

    def _to_device(self, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        for key, value in inputs.items():
            if isinstance(value, torch.Tensor):
                out[key] = value.to(self._device)
        if "mm_token_type_ids" not in out:
            proc: Any = self.vlm.processor  # a Qwen2-VL processor: image_token_id is its own, not ProcessorMixin's
            out["mm_token_type_ids"] = mm_token_type_ids(
                out["input_ids"], proc.image_token_id, getattr(proc, "video_token_id", None)
            )
        if out.get("pixel_values") is not None:
            out["pixel_values"] = out["pixel_values"].to(self.vlm.model.dtype)
        return out

    # -- sampling ---------------------------------------------------------------------
    async def generate(self, prompts: Sequence[Prompt], *, seeds: Sequence[int] | None = None) -> list[Generation]:
        """Sample one response per prompt on the policy's worker thread (see :meth:`generate_sync`)."""
        if not prompts:
            return []
        loop = asyncio.get_running_loop()
        call = functools.partial(self.generate_sync, list(prompts), seeds=seeds)
        return await loop.run_in_executor(self._worker(), call)

    def generate_sync(self, prompts: Sequence[Prompt], *, seeds: Sequence[int] | None = None) -> list[Generation]:
        """Sample one response per prompt, blocking the calling thread.

        ``seeds`` (one non-negative int per prompt), else each ``Prompt.seed``, fix a
        request's randomness; a request with neither takes the next seed of the policy's
        generator (in call order).
        Responses stop at the first EOS (kept as the last response token) or after
        ``max_new_tokens``; ``text`` is the decoded response without the final EOS
        (special tokens such as ``<|box_start|>`` kept).
        """
        if not prompts:
            return []
        if seeds is not None and len(seeds) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(seeds)} seeds")
        given = list(seeds) if seeds is not None else [p.seed for p in prompts]
        if any(s is not None and int(s) < 0 for s in given):
            raise ValueError("seeds must be non-negative")
        with self._lock:
            version = self.version
            resolved = [int(s) if s is not None else self._next_seed() for s in given]
            inputs = self.build_inputs(prompts)
            greedy = torch.tensor([p.greedy for p in prompts], dtype=torch.bool, device=self._device)
            with torch.inference_mode():
                tokens, logprobs = self._decode(self._to_device(inputs), resolved, greedy)
        out = []
        ids, mask = inputs["input_ids"], inputs["attention_mask"].bool()
        for row, (toks, lps) in enumerate(zip(tokens, logprobs, strict=True)):
            body = toks[:-1] if toks and toks[-1] in self.eos_token_ids else toks
            out.append(
                Generation(
                    text=cast(str, self.vlm.tokenizer.decode(body, skip_special_tokens=False)),  # one sequence: a str
                    prompt_ids=tuple(ids[row][mask[row]].tolist()),
                    response_ids=tuple(toks),
                    response_logprobs=tuple(lps),
                    policy_version=version,
                )
            )
        return out

    def _next_seed(self) -> int:
        return int(torch.randint(0, _SEED_BOUND, (1,), generator=self._seed_generator).item())

    def _decode(
        self, inputs: dict[str, torch.Tensor], seeds: list[int], greedy: torch.Tensor
    ) -> tuple[list[list[int]], list[list[float]]]:
        cfg = self.config
        model = self.vlm.model
        steps = cfg.max_new_tokens
        batch = inputs["input_ids"].shape[0]
        # Each request's randomness: one uniform per decode step from its own generator.
        uniforms = torch.stack(
            [torch.rand(steps, generator=torch.Generator().manual_seed(s), dtype=torch.float64) for s in seeds]
        ).to(self._device)
        attn = inputs["attention_mask"]
        positions, deltas = rope_index(
            model, inputs["input_ids"], attn, inputs["mm_token_type_ids"], inputs.get("image_grid_thw")
        )
        next_pos = attn.sum(-1, keepdim=True).to(positions.dtype) + deltas.to(positions.dtype)
        cache = DynamicCache(config=model.config)
        out = model(
            input_ids=inputs["input_ids"],
            attention_mask=attn,
            position_ids=positions,
            pixel_values=inputs.get("pixel_values"),
            image_grid_thw=inputs.get("image_grid_thw"),
            mm_token_type_ids=inputs["mm_token_type_ids"],
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        logits = out.logits[:, -1]
        rows = torch.arange(batch, device=self._device)  # original row of each active row
        tokens: list[list[int]] = [[] for _ in range(batch)]
        logprobs: list[list[float]] = [[] for _ in range(batch)]
        eos = torch.tensor(sorted(self.eos_token_ids), device=self._device)
        for step in range(steps):
            tok, lp = self._sample(logits, uniforms[rows, step], greedy[rows])
            for r, t, v in zip(rows.tolist(), tok.tolist(), lp.tolist(), strict=True):
                tokens[r].append(t)
                logprobs[r].append(v)
            if step == steps - 1:
                break
            alive = ~torch.isin(tok, eos)
            if not bool(alive.any()):
                break
            if not bool(alive.all()):
                keep = alive.nonzero().squeeze(1)
                cache.batch_select_indices(keep)
                rows, tok, attn, next_pos = rows[keep], tok[keep], attn[keep], next_pos[keep]
            attn = torch.cat([attn, attn.new_ones(attn.shape[0], 1)], dim=1)
            pos = (next_pos + step).view(1, -1, 1).expand(3, -1, -1)
            out = model(
                input_ids=tok.view(-1, 1),
                attention_mask=attn,
                position_ids=pos,
                past_key_values=cache,
                use_cache=True,
            )
            logits = out.logits[:, -1]
        return tokens, logprobs

    def _sample(self, logits: torch.Tensor, u: torch.Tensor, greedy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokens by inverse CDF of the (masked, tempered, truncated) distribution, the most
        likely one for ``greedy`` rows (``(B,)`` bool); their log-probs."""
        cfg = self.config
        masked = logits.float().masked_fill(self._forbidden, float("-inf"))
        recorded = torch.log_softmax(masked / cfg.logprob_temperature_resolved, dim=-1)
        if cfg.temperature == 0 or bool(greedy.all()):
            tok = masked.argmax(dim=-1)
        else:
            scaled = masked / cfg.temperature
            if cfg.top_k > 0 and cfg.top_k < scaled.shape[-1]:
                kth = torch.topk(scaled, cfg.top_k, dim=-1).values[:, -1:]
                scaled = scaled.masked_fill(scaled < kth, float("-inf"))
            probs = torch.softmax(scaled, dim=-1)
            if cfg.top_p < 1.0:
                sorted_p, order = torch.sort(probs, dim=-1, descending=True, stable=True)
                mass_before = sorted_p.cumsum(dim=-1) - sorted_p
                drop_sorted = mass_before >= cfg.top_p
                drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
                probs = probs.masked_fill(drop, 0.0)
            cdf = probs.double().cumsum(dim=-1)
            target = u.view(-1, 1) * cdf[:, -1:]
            tok = torch.searchsorted(cdf, target, right=True).squeeze(1)
            tok = tok.clamp_(max=probs.shape[-1] - 1)
            tok = torch.where(greedy, masked.argmax(dim=-1), tok)
        return tok, recorded.gather(-1, tok.view(-1, 1)).squeeze(1)

    # -- scoring ----------------------------------------------------------------------
    def teacher_forced_logprobs(
        self,
        prompts: Sequence[Prompt] | Mapping[str, torch.Tensor],
        response_ids: Sequence[Sequence[int]],
        *,
        temperature: float | None = None,
    ) -> list[torch.Tensor]:
        """Log-probs of given responses under the current weights, one 1-D float tensor each.

        ``prompts`` are :class:`Prompt` objects (rebuilt with :meth:`build_inputs`) or an
        already built left-padded batch. ``temperature`` defaults to
        :attr:`logprob_temperature`, so the result is comparable to
        ``Generation.response_logprobs``. Runs without gradients; the learner's
        differentiable version is :func:`compute_response_logprobs`.
        """
        if isinstance(prompts, Mapping):
            inputs: Mapping[str, torch.Tensor] = prompts
        else:
            if not prompts:
                return []
            inputs = self.build_inputs(prompts)
        temp = self.logprob_temperature if temperature is None else float(temperature)
        if temp <= 0:
            raise ValueError(f"temperature must be positive, got {temp}")
        with self._lock, torch.inference_mode():
            lp, _ = compute_response_logprobs(
                self.vlm.model,
                self._to_device(inputs),
                response_ids,
                forbidden=self._forbidden,
                temperature=temp,
            )
        return [lp[row, : len(r)].float().cpu() for row, r in enumerate(response_ids)]

    # -- weights ----------------------------------------------------------------------
    def load_weights(self, weights: Mapping[str, torch.Tensor], version: int, *, strict: bool = True) -> None:
        """Copy ``weights`` into the model in place (dtype/device converted) and set ``version``.

        Waits for a running generation to finish first; generations started afterwards
        carry the new version. ``version`` must be greater than the current one (policy
        lag accounting relies on it). With ``strict`` every model key must be present and
        no unknown key may appear (the error names them and nothing is loaded); without it
        missing keys keep their values and unknown keys are ignored, as in torch.
        """
        with self._lock:
            if int(version) <= self.version:
                raise ValueError(
                    f"load_weights version {version} must be greater than the current version {self.version}"
                )
            model = self.vlm.model
            expected = set(model.state_dict().keys())
            given = set(weights.keys())
            missing = sorted(k for k in expected - given if not _tied_alias(model, k))
            unexpected = sorted(given - expected)
            if strict and (missing or unexpected):
                raise KeyError(
                    f"load_weights: {len(missing)} missing keys {missing[:5]}, "
                    f"{len(unexpected)} unexpected keys {unexpected[:5]}; send the model's full "
                    "state_dict or pass strict=False (nothing was loaded)"
                )
            if missing or unexpected:
                logger.warning(
                    "load_weights(strict=False): %d model keys kept their old values, %d unknown keys ignored",
                    len(missing),
                    len(unexpected),
                )
            model.load_state_dict(dict(weights), strict=False)
            self.version = int(version)
        logger.info("policy weights updated to version %d", self.version)

    async def aload_weights(self, weights: Mapping[str, torch.Tensor], version: int, *, strict: bool = True) -> None:
        """:meth:`load_weights` on the worker thread (queued after pending generations)."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(
            self._worker(), functools.partial(self.load_weights, weights, version, strict=strict)
        )


def _tied_alias(model: PreTrainedModel, key: str) -> bool:
    """True when ``key`` is a tied parameter (e.g. ``lm_head.weight``) whose source was loaded."""
    tied = getattr(model, "_tied_weights_keys", None) or {}
    return isinstance(tied, Mapping) and key in tied and bool(getattr(model.config, "tie_word_embeddings", False))


__all__ = [
    "HFPolicy",
    "HFPolicyConfig",
]
