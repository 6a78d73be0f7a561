"""A policy served by an OpenAI-compatible inference server that returns token ids and log-probs.

:class:`ServerPolicy` sends each prompt to a vLLM (or SGLang) chat-completions endpoint and
records what PPO needs from the answer: the prompt token ids the server conditioned on, the
sampled token ids and the log-prob of each. Prompts travel as OpenAI chat messages (each
screenshot a lossless PNG data URL before its message's text); the server renders them with
the model's own chat template, and the returned ``prompt_token_ids`` are checked against the
local rendering (the same processor path as :meth:`HFPolicy.build_inputs
<darwin.policies.hf.HFPolicy.build_inputs>` and the learner), so the learner scores exactly
the tokens that were sampled from.

    >>> from darwin.models.factory import build_tiny_vlm
    >>> from darwin.policies.server_client import ServerPolicy, ServerPolicyConfig
    >>> cfg = ServerPolicyConfig(base_url="http://127.0.0.1:8000/v1", model="ui-tars-7b", max_tokens=64)
    >>> cfg.base_url                                   # the server's root; /v1 is added per endpoint
    'http://127.0.0.1:8000'
    >>> policy = ServerPolicy(build_tiny_vlm(seed=0), cfg)   # no request is sent yet
    >>> policy.served_model, policy.version
    ('ui-tars-7b', 0)

What the request asks of the server (vLLM's names; SGLang accepts the same request):
``logprobs=true, top_logprobs=0`` (the sampled token's log-prob), ``return_token_ids=true``
(``choices[0].token_ids`` and ``prompt_token_ids``), ``return_tokens_as_token_ids=true``
(each log-prob entry's token as ``"token_id:123"``, for servers without ``return_token_ids``),
``temperature``, ``top_p=1``, ``top_k=-1``, ``repetition_penalty=1`` and ``min_p=0`` set
explicitly (vLLM otherwise applies the checkpoint's ``generation_config.json``: Qwen2-VL's
says ``top_k=1``), ``stop_token_ids`` = the model's EOS ids, ``logit_bias`` of -100 on the
forbidden ids (vision specials, pad, embedding rows past the tokenizer), the request's seed,
and ``skip_special_tokens=false``. The recorded log-probs have :class:`HFPolicy`'s meaning
(masked distribution at the sampling temperature) only if the server reports *processed*
log-probs: start vLLM with ``--logprobs-mode processed_logprobs`` (docs/scale.md).

Weights (``weight_sync``): ``"lora"`` turns the learner's merged weights back into a rank-r
PEFT adapter (the change of each adapted matrix is exactly of rank r), writes it under
``weights_dir`` and loads it through vLLM's ``POST /v1/load_lora_adapter`` (server started
with ``--enable-lora`` and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``); later requests name
the adapter, ``<lora_name_prefix>-v<version>``. ``"disk"`` writes a full transformers
checkpoint and calls SGLang's ``POST /update_weights_from_disk``. ``"none"``: the server's
weights are fixed and :meth:`ServerPolicy.load_weights` raises
:class:`~darwin.policies.base.WeightSyncUnsupported`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import httpx
import torch
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from darwin.models.factory import VLM
from darwin.models.scoring import forbidden_mask, prompt_to_messages
from darwin.policies.base import Policy, WeightSyncUnsupported
from darwin.policies.litellm import PolicyAuthError, PolicyRequestError, prompt_to_openai_messages
from darwin.policies.server_client_config import ServerPolicyConfig
from darwin.policies.server_protocol import (
    _error_message,
    _HTTPStatusError,
    _is_transient,
    _prompt_mismatch,
    parse_chat_completion,
)
from darwin.types import Generation, Prompt

logger = logging.getLogger(__name__)

_SEED_BOUND = 2**62
_LOGIT_BAN = -100.0
"""The OpenAI protocol's (and vLLM's clamped) lowest logit bias: exp(-100) ~ 4e-44, a ban."""


def _model_eos_ids(vlm: VLM) -> frozenset[int]:
    """The model's ``generation_config`` EOS ids plus the tokenizer's (as :class:`HFPolicy`)."""
    ids: set[int] = set()
    gen_eos = getattr(getattr(vlm.model, "generation_config", None), "eos_token_id", None)
    if isinstance(gen_eos, int):
        ids.add(gen_eos)
    elif gen_eos is not None:
        ids.update(int(i) for i in gen_eos)
    if vlm.tokenizer.eos_token_id is not None:
        ids.add(int(vlm.tokenizer.eos_token_id))
    if not ids:
        raise ValueError("the model and tokenizer name no EOS token; the server could not be told where responses end")
    return frozenset(ids)


class ServerPolicy(Policy):
    """Samples from an OpenAI-compatible server; records prompt ids, response ids, log-probs, version.

    ``vlm`` is the local copy of the served checkpoint (its processor renders prompts, its
    tokenizer decodes responses; the learner copies its model to train): it must be the
    model the server started from. The policy satisfies the learner's
    :class:`~darwin.learner.networks.TrainablePolicy`, so ``LocalLearner(server_policy)``
    trains locally and pushes each update to the server through :meth:`load_weights`.

    Each prompt is one request (up to ``max_concurrency`` in flight; the server batches them);
    a batch fails as a whole if any request fails for good. A request's seed is
    ``Prompt.seed``, else the next draw of the policy's generator (seeded by
    ``config.seed``). ``Generation.policy_version`` is the version whose weights the request
    was sent to.
    """

    def __init__(
        self,
        vlm: VLM,
        config: ServerPolicyConfig,
        *,
        forbidden_token_ids: Iterable[int] | None = None,
        version: int = 0,
    ) -> None:
        self.vlm = vlm
        self.config = config
        self.version = int(version)
        self._device = next(vlm.model.parameters()).device
        ids = vlm.forbidden_token_ids() if forbidden_token_ids is None else frozenset(forbidden_token_ids)
        self.forbidden_token_ids: frozenset[int] = frozenset(int(i) for i in ids)
        self._forbidden = forbidden_mask(self.forbidden_token_ids, vlm.vocab_size, self._device)
        self.eos_token_ids: frozenset[int] = _model_eos_ids(vlm)
        if not self.eos_token_ids - self.forbidden_token_ids:
            raise ValueError(f"every EOS id {sorted(self.eos_token_ids)} is forbidden, so no response could end")
        self._served_model = config.model
        self._adapters: list[str] = []  # loaded LoRA adapters, oldest first
        self._checkpoints: list[Path] = []
        self._seed_generator = torch.Generator(device="cpu").manual_seed(config.seed)
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._base_weights: dict[str, torch.Tensor] | None = None
        self._sync_lock = threading.Lock()  # served model name and version change together

    # -- what the learner reads -------------------------------------------------------
    @property
    def device(self) -> torch.device:
        """Where the local model lives (the learner's default device)."""
        return self._device

    @property
    def forbidden_mask(self) -> torch.Tensor:
        """``(vocab_size,)`` bool tensor, True at the ids banned on the server (pass to the learner)."""
        return self._forbidden

    @property
    def logprob_temperature(self) -> float:
        """Temperature of ``Generation.response_logprobs`` (the server's processed log-probs)."""
        return self.config.logprob_temperature

    @property
    def served_model(self) -> str:
        """The model name requests use now: the base name, or the latest LoRA adapter."""
        return self._served_model

    def build_inputs(self, prompts: Sequence[Prompt]) -> Any:
        """The left-padded model batch of ``prompts`` with the local processor (what the learner scores)."""
        if not prompts:
            raise ValueError("build_inputs needs at least one prompt")
        return self.vlm.build_inputs([prompt_to_messages(p) for p in prompts])

    # -- requests ---------------------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        name = self.config.api_key_env
        if name is None:
            return {}
        key = os.environ.get(name)
        if not key:
            raise PolicyAuthError(
                f"environment variable {name} is not set (or empty); export the server's API key there"
            )
        return {"Authorization": f"Bearer {key}"}

    def request_body(self, prompt: Prompt, seed: int) -> dict[str, Any]:
        """The chat-completion request for one prompt (vLLM's field names; SGLang accepts them)."""
        cfg = self.config
        body: dict[str, Any] = {
            "model": self._served_model,
            "messages": prompt_to_openai_messages(prompt, compress_level=cfg.png_compress_level),
            "max_tokens": cfg.max_tokens,
            "temperature": 0.0 if prompt.greedy else cfg.temperature,
            "top_p": 1.0,
            "top_k": -1,
            "min_p": 0.0,
            "repetition_penalty": 1.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "n": 1,
            "seed": int(seed),
            "stop_token_ids": sorted(self.eos_token_ids),
            "logprobs": True,
            "top_logprobs": 0,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            "return_prompt_token_ids": True,  # SGLang's name for prompt_token_ids
            "skip_special_tokens": False,
            "add_generation_prompt": True,
        }
        if cfg.mask_forbidden and self.forbidden_token_ids:
            body["logit_bias"] = {str(t): _LOGIT_BAN for t in sorted(self.forbidden_token_ids)}
        return body

    def _next_seed(self) -> int:
        return int(torch.randint(0, _SEED_BOUND, (1,), generator=self._seed_generator).item())

    def _async_client(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop or self._client.is_closed:
            limits = httpx.Limits(
                max_connections=self.config.max_concurrency, max_keepalive_connections=self.config.max_concurrency
            )
            self._client = httpx.AsyncClient(
                base_url=self.config.base_url, limits=limits, timeout=self.config.timeout_s
            )
            self._client_loop = loop
            self._semaphore = asyncio.Semaphore(self.config.max_concurrency)
        assert self._semaphore is not None
        return self._client, self._semaphore

    async def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        """One sampled :class:`Generation` per prompt, in order (requests run concurrently)."""
        if not prompts:
            return []
        headers = self._headers()
        client, limit = self._async_client()
        seeds = [p.seed if p.seed is not None else self._next_seed() for p in prompts]
        if any(s < 0 for s in seeds):
            raise ValueError("Prompt.seed must be non-negative")
        tasks = [
            asyncio.ensure_future(self._one(client, limit, headers, p, s)) for p, s in zip(prompts, seeds, strict=True)
        ]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _one(
        self,
        client: httpx.AsyncClient,
        limit: asyncio.Semaphore,
        headers: dict[str, str],
        prompt: Prompt,
        seed: int,
    ) -> Generation:
        body = self.request_body(prompt, seed)
        sent_version = [self.version]

        def current_body() -> dict[str, Any]:
            # Every attempt names the model serving now, and the generation carries its version.
            with self._sync_lock:
                body["model"], sent_version[0] = self._served_model, self.version
            return body

        async with limit:
            payload = await self._post_async(client, "/v1/chat/completions", current_body, headers)
        version = sent_version[0]
        completion = parse_chat_completion(payload)
        if completion.prompt_ids is None:
            raise PolicyRequestError(
                "the server returned no prompt_token_ids (request field return_token_ids: vLLM 0.10.2+; "
                "SGLang: return_prompt_token_ids); without them the learner cannot check that it scores the "
                "prompt the response was sampled from"
            )
        if self.config.verify_prompt_ids:
            local = self._local_prompt_ids(prompt)
            if local != completion.prompt_ids:
                raise PolicyRequestError(_prompt_mismatch(local, completion.prompt_ids, self.vlm))
        response = completion.response_ids
        bad = sorted(set(response) & self.forbidden_token_ids)
        if bad:
            raise PolicyRequestError(
                f"the server sampled forbidden token ids {bad[:5]}: it ignored logit_bias (mask_forbidden=True); "
                "the learner cannot score them"
            )
        body_ids = response[:-1] if response and response[-1] in self.eos_token_ids else response
        return Generation(
            text=cast(str, self.vlm.tokenizer.decode(list(body_ids), skip_special_tokens=False)),  # one sequence: a str
            prompt_ids=completion.prompt_ids,
            response_ids=response,
            response_logprobs=completion.response_logprobs,
            policy_version=version,
        )

    def _local_prompt_ids(self, prompt: Prompt) -> tuple[int, ...]:
        inputs = self.build_inputs([prompt])
        mask = inputs["attention_mask"][0].bool()
        return tuple(int(t) for t in inputs["input_ids"][0][mask].tolist())

    def _retrying(self, cls: type[AsyncRetrying] | type[Retrying]) -> Any:
        cfg = self.config
        return cls(
            stop=stop_after_attempt(cfg.max_attempts),
            wait=wait_exponential(multiplier=cfg.backoff_initial_s, max=cfg.backoff_max_s)
            + wait_random(0.0, cfg.backoff_initial_s),
            retry=retry_if_exception(_is_transient),
            before_sleep=self._log_retry,
            reraise=True,
        )

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        logger.warning(
            "%s: attempt %d/%d failed (%s: %s); retrying",
            self.config.base_url,
            state.attempt_number,
            self.config.max_attempts,
            type(exc).__name__,
            str(exc)[:300],
        )

    async def _post_async(
        self, client: httpx.AsyncClient, path: str, make_body: Any, headers: Mapping[str, str]
    ) -> object:
        try:
            async for attempt in self._retrying(AsyncRetrying):
                with attempt:
                    response = await client.post(path, json=make_body(), headers=dict(headers))
                    return self._checked(response, path)
        except (httpx.HTTPError, _HTTPStatusError) as exc:
            raise self._translate(exc, path) from None
        raise AssertionError("unreachable: tenacity either returns or re-raises")

    def _post_sync(self, path: str, body: Mapping[str, Any]) -> object:
        headers = self._headers()
        try:
            with httpx.Client(base_url=self.config.base_url, timeout=self.config.weight_sync_timeout_s) as client:
                for attempt in self._retrying(Retrying):
                    with attempt:
                        return self._checked(client.post(path, json=dict(body), headers=headers), path)
        except (httpx.HTTPError, _HTTPStatusError) as exc:
            raise self._translate(exc, path) from None
        raise AssertionError("unreachable: tenacity either returns or re-raises")

    def _checked(self, response: httpx.Response, path: str) -> object:
        if response.status_code >= 400:
            raise _HTTPStatusError(response.status_code, _error_message(response))
        if not response.content:
            return None
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            if path.endswith("/chat/completions"):
                raise PolicyRequestError(f"{path}: the server's answer is not JSON: {response.text[:200]!r}") from None
            return response.text  # vLLM's LoRA endpoints answer in plain text

    def _translate(self, exc: Exception, path: str) -> Exception:
        where = f"{self.config.base_url}{path}"
        if isinstance(exc, _HTTPStatusError):
            if exc.status in (401, 403):
                var = f"${self.config.api_key_env}" if self.config.api_key_env else "api_key_env (no key was sent)"
                return PolicyAuthError(
                    f"{where}: authentication failed (HTTP {exc.status}); check {var}. Server said: {exc.message}"
                )
            if _is_transient(exc):
                return PolicyRequestError(
                    f"{where}: giving up after {self.config.max_attempts} attempts; last error: {exc}"
                )
            if exc.status == 404 and path.endswith("load_lora_adapter"):
                return PolicyRequestError(
                    f"{where}: HTTP 404: the server has no runtime LoRA endpoint; start vLLM with --enable-lora "
                    "and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"
                )
            return PolicyRequestError(f"{where}: request failed (not retried): {exc}")
        return PolicyRequestError(
            f"{where}: giving up after {self.config.max_attempts} attempts; last error: {type(exc).__name__}: {exc}"
        )

    async def aclose(self) -> None:
        """Close the HTTP connections (inside the event loop that used them)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def close(self) -> None:
        """Drop the HTTP client (its connections close with it); for symmetry with :class:`HFPolicy`."""
        self._client = None

    # -- weights ----------------------------------------------------------------------
    def load_weights(self, weights: Mapping[str, torch.Tensor], version: int) -> None:
        """Push the learner's weights (the model's full state dict) to the server; then set ``version``.

        ``"lora"``: the change of every adapted matrix from the base checkpoint is factorised
        into a rank-``lora_rank`` PEFT adapter (exact for a LoRA learner), written to
        ``weights_dir/<prefix>-v<version>`` and loaded with ``/v1/load_lora_adapter``;
        requests then name that adapter and adapters older than ``keep_versions`` are
        unloaded. ``"disk"``: a full checkpoint in ``weights_dir/v<version>`` and
        ``/update_weights_from_disk``. Blocks until the server confirms.
        """
        cfg = self.config
        if cfg.weight_sync == "none":
            raise WeightSyncUnsupported(
                "ServerPolicy(weight_sync='none') cannot take learner weights; set weight_sync='lora' "
                "(vLLM) or 'disk' (SGLang) and weights_dir"
            )
        if int(version) <= self.version:
            raise ValueError(f"load_weights version {version} must be greater than the current version {self.version}")
        assert cfg.weights_dir is not None
        root = Path(cfg.weights_dir)
        root.mkdir(parents=True, exist_ok=True)
        if cfg.weight_sync == "lora":
            name = f"{cfg.lora_name_prefix}-v{int(version)}"
            path = root / name
            self._write_atomically(path, lambda tmp: self.write_lora_adapter(weights, tmp))
            self._post_sync("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path.resolve())})
            with self._sync_lock:
                self._served_model, self.version = name, int(version)
            self._adapters.append(name)
            self._checkpoints.append(path)
            while len(self._adapters) > cfg.keep_versions:
                old = self._adapters.pop(0)
                self._post_sync("/v1/unload_lora_adapter", {"lora_name": old})
        else:
            self._push_from_disk(weights, int(version))
        while len(self._checkpoints) > cfg.keep_versions:
            shutil.rmtree(self._checkpoints.pop(0), ignore_errors=True)
        logger.info("server %s now serves policy version %d (%s)", cfg.base_url, self.version, self._served_model)

    def _push_from_disk(self, weights: Mapping[str, torch.Tensor], version: int) -> None:
        """A full checkpoint in ``weights_dir/v<version>``, loaded with ``/update_weights_from_disk``."""
        assert self.config.weights_dir is not None
        path = Path(self.config.weights_dir) / f"v{version}"
        self._write_atomically(path, lambda tmp: self.vlm.model.save_pretrained(tmp, state_dict=dict(weights)))
        answer = self._post_sync(
            "/update_weights_from_disk", {"model_path": str(path.resolve()), "weight_version": str(version)}
        )
        if isinstance(answer, Mapping) and answer.get("success") is False:
            raise PolicyRequestError(f"/update_weights_from_disk refused {path}: {answer.get('message')}")
        with self._sync_lock:
            self.version = version
        self._checkpoints.append(path)

    def served_weight_version(self) -> str | None:
        """The label of the weights the server serves now (SGLang's ``GET /get_weight_version``;
        ``darwin serve-policy`` answers it too), or ``None`` when the server has no such endpoint."""
        path = "/get_weight_version"
        try:
            with httpx.Client(base_url=self.config.base_url, timeout=self.config.weight_sync_timeout_s) as client:
                response = client.get(path, headers=self._headers())
        except httpx.HTTPError as exc:
            raise self._translate(exc, path) from None
        if response.status_code == 404:  # vLLM: no such endpoint
            return None
        answer = self._checked(response, path)
        label = answer.get("weight_version") if isinstance(answer, Mapping) else None
        return None if label is None else str(label)

    def resync_weights(self, weights: Mapping[str, torch.Tensor], version: int) -> bool:
        """After a resume: push ``weights`` again when the server serves other weights than
        ``version`` (a run killed after a weight push but before its checkpoint leaves the
        server ahead of the learner). Only ``weight_sync="disk"`` can be ahead: LoRA requests
        name the base model or this version's adapter. Returns whether weights were pushed."""
        if self.config.weight_sync != "disk" or int(version) != self.version:
            return False
        label = self.served_weight_version()
        if label is None or label == str(int(version)):
            return False
        logger.warning(
            "the server serves weights %r but the resumed learner is at version %d: pushing the "
            "checkpoint's weights again",
            label,
            version,
        )
        self._push_from_disk(weights, int(version))
        return True

    @staticmethod
    def _write_atomically(path: Path, write: Any) -> None:
        """Write into ``<path>.tmp`` and rename, so the server never reads a half-written directory."""
        tmp = path.with_name(path.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(path, ignore_errors=True)
        tmp.mkdir(parents=True)
        write(tmp)
        tmp.rename(path)

    def write_lora_adapter(self, weights: Mapping[str, torch.Tensor], path: str | os.PathLike[str]) -> Path:
        """Write ``weights`` (full, merged) as a PEFT adapter of the base checkpoint to ``path``.

        For each adapted linear (``lora_target_modules`` of the language model) the change
        ``W - W_base`` is factorised as ``B @ A`` of rank ``lora_rank`` (``lora_alpha = r``,
        so the scaling is 1); every other tensor must equal the base checkpoint's, and each
        change must have rank <= r. Either violation raises ``ValueError`` naming the keys
        (the learner trained more than a LoRA adapter can carry: use ``weight_sync='disk'``).
        """
        import peft
        from safetensors.torch import save_file

        cfg = self.config
        base = self._base_state()
        targets = set(cfg.lora_target_modules)
        unknown = sorted(set(weights) - set(base))
        if unknown:
            raise ValueError(f"{len(unknown)} keys are not in the base model: {unknown[:5]}")
        tensors: dict[str, torch.Tensor] = {}
        changed_elsewhere: list[str] = []
        too_high: list[str] = []
        for key, value in weights.items():
            before = base[key]
            new = value.detach().to("cpu", torch.float32)
            module, _, leaf = key.rpartition(".")
            # peft's rule (the learner's): every module whose last name is a target, vision tower included
            adapted = leaf == "weight" and module.rsplit(".", 1)[-1] in targets
            if not adapted:
                if not torch.allclose(new, before, atol=1e-6, rtol=1e-5):
                    changed_elsewhere.append(key)
                continue
            delta = new - before
            b, a = _low_rank(delta, cfg.lora_rank)
            if (b @ a - delta).abs().max().item() > 1e-4 * max(1.0, delta.abs().max().item()):
                too_high.append(key)
                continue
            tensors[f"base_model.model.{module}.lora_A.weight"] = a.contiguous()
            tensors[f"base_model.model.{module}.lora_B.weight"] = b.contiguous()
        if changed_elsewhere or too_high:
            raise ValueError(
                f"weights do not fit a rank-{cfg.lora_rank} LoRA adapter on {sorted(targets)}: "
                f"{len(changed_elsewhere)} non-adapted tensors changed {changed_elsewhere[:3]}, "
                f"{len(too_high)} changes of rank > {cfg.lora_rank} {too_high[:3]}; train with "
                "LearnerConfig(lora=LoraConfig(rank=..., target_modules=...)) matching the server policy, "
                "or use weight_sync='disk'"
            )
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        modules = sorted({key.split(".")[-3] for key in tensors})  # base_model.model.<...>.<name>.lora_X.weight
        peft.LoraConfig(
            r=cfg.lora_rank, lora_alpha=cfg.lora_rank, target_modules=modules, lora_dropout=0.0
        ).save_pretrained(str(out))
        save_file(tensors, str(out / "adapter_model.safetensors"))
        return out

    def _base_state(self) -> dict[str, torch.Tensor]:
        """The served base checkpoint's tensors (float32, CPU): the local model's at construction."""
        if self._base_weights is None:
            self._base_weights = {
                k: v.detach().to("cpu", torch.float32).clone() for k, v in self.vlm.model.state_dict().items()
            }
        return self._base_weights


def _low_rank(delta: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, A)`` with ``B @ A`` the best rank-``rank`` approximation of ``delta`` (exact if its rank is lower)."""
    if not bool(delta.any()):
        return delta.new_zeros(delta.shape[0], rank), delta.new_zeros(rank, delta.shape[1])
    u, s, vh = torch.linalg.svd(delta.double(), full_matrices=False)
    k = min(rank, s.numel())
    root = s[:k].sqrt()
    b = (u[:, :k] * root).float()
    a = (root[:, None] * vh[:k]).float()
    if k < rank:  # pad to the declared rank with zero directions
        b = torch.cat([b, b.new_zeros(b.shape[0], rank - k)], dim=1)
        a = torch.cat([a, a.new_zeros(rank - k, a.shape[1])], dim=0)
    return b, a


__all__ = [
    "ServerPolicy",
]
