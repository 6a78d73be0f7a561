"""A local inference server that speaks vLLM's OpenAI-compatible protocol, backed by darwin's HFPolicy.

For tests and laptop runs of :class:`~darwin.policies.server_client.ServerPolicy` where no GPU
inference server exists: a real HTTP server (aiohttp) whose answers have vLLM's JSON shapes,
sampling with :class:`~darwin.policies.hf.HFPolicy` (so token ids and log-probs are the
model's own: what a vLLM started with ``--logprobs-mode processed_logprobs`` reports) behind a
:class:`~darwin.policies.batcher.DynamicBatcher` (concurrent requests are batched).

    >>> from darwin.models.factory import build_tiny_vlm
    >>> from darwin.policies.local_policy_server import LocalPolicyServer
    >>> with LocalPolicyServer(build_tiny_vlm(seed=0), served_model_name="tiny") as server:
    ...     import httpx
    ...     httpx.get(server.base_url + "/v1/models").json()["data"][0]["id"]
    'tiny'

Endpoints (vLLM's paths and shapes unless noted):

- ``GET /health``, ``GET /v1/models``;
- ``POST /v1/chat/completions``: non-streaming, ``n=1``; ``logprobs``/``top_logprobs=0``,
  ``return_token_ids`` (``choices[0].token_ids`` and ``prompt_token_ids``),
  ``return_tokens_as_token_ids``, ``seed``, ``max_tokens`` / ``max_completion_tokens``,
  ``skip_special_tokens``, ``stop_token_ids`` (the model's EOS ids only), ``logit_bias`` (only
  bans, -100, of ids the policy already forbids); sampling settings other than the server's
  (``temperature``, ``top_p < 1``, ``top_k > 0``, penalties) and request chat templates are
  refused with HTTP 400, never silently ignored;
- ``POST /v1/load_lora_adapter``, ``POST /v1/unload_lora_adapter`` (vLLM with
  ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``): a PEFT adapter directory; the merged weights replace
  the served ones and requests name the adapter (one adapter is served at a time: this server
  holds one model);
- ``POST /update_weights_from_disk`` (SGLang's): a transformers checkpoint directory, with an
  optional ``weight_version`` label; ``GET /get_weight_version`` (SGLang's) returns the label of
  the weights served now (``"0"`` at start).

With ``api_key`` set, every ``/v1`` path requires ``Authorization: Bearer <key>`` (vLLM's
``--api-key``; HTTP 401 ``{"error": "Unauthorized"}`` otherwise).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import json
import logging
import math
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from aiohttp import web
from PIL import Image

from darwin.loop_thread import LoopThread
from darwin.models.factory import VLM
from darwin.policies.batcher import BatcherConfig, BatcherStats, DynamicBatcher
from darwin.policies.hf import HFPolicy, HFPolicyConfig
from darwin.types import ChatMessage, Prompt

logger = logging.getLogger(__name__)

_DATA_URL = "data:image/"


class _RequestError(Exception):
    """A request the server refuses: HTTP ``status`` with vLLM's error body."""

    def __init__(self, message: str, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param


def _error(exc: _RequestError) -> web.Response:
    kind = {400: "BadRequestError", 404: "NotFoundError", 503: "ServiceUnavailableError"}.get(
        exc.status, "InternalServerError"
    )
    body = {"error": {"message": str(exc), "type": kind, "param": exc.param, "code": exc.status}}
    return web.json_response(body, status=exc.status)


def _decode_image(url: str) -> np.ndarray:
    if not url.startswith(_DATA_URL) or ";base64," not in url:
        raise _RequestError(
            "this server takes images as data:image/...;base64 URLs only (it fetches nothing)", param="messages"
        )
    try:
        raw = base64.b64decode(url.split(";base64,", 1)[1], validate=True)
        with Image.open(io.BytesIO(raw)) as img:
            return np.asarray(img.convert("RGB"), dtype=np.uint8)
    except (binascii.Error, OSError, ValueError) as exc:
        raise _RequestError(f"undecodable image: {exc}", param="messages") from None


def _to_prompt(messages: object, seed: int | None, greedy: bool = False) -> Prompt:
    """OpenAI chat messages -> a darwin Prompt (images before each message's text, as darwin renders)."""
    if not isinstance(messages, list) or not messages:
        raise _RequestError("messages must be a non-empty list", param="messages")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") not in ("system", "user", "assistant"):
            raise _RequestError(f"messages[{i}] needs a role of system, user or assistant", param="messages")
        content = message.get("content")
        texts: list[str] = []
        images: list[np.ndarray] = []
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for part in content:
                kind = part.get("type") if isinstance(part, Mapping) else None
                if kind == "text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif kind == "image_url" and isinstance(part.get("image_url"), Mapping):
                    if texts:
                        raise _RequestError(
                            f"messages[{i}]: an image after text; this server renders each message's images "
                            "before its text (darwin's prompt layout)",
                            param="messages",
                        )
                    images.append(_decode_image(str(part["image_url"].get("url", ""))))
                else:
                    raise _RequestError(f"messages[{i}]: unsupported content part {kind!r}", param="messages")
        elif content is not None:
            raise _RequestError(f"messages[{i}].content must be a string or a list of parts", param="messages")
        if len(texts) > 1:
            raise _RequestError(f"messages[{i}]: at most one text part per message", param="messages")
        out.append(ChatMessage(role=message["role"], text=texts[0] if texts else "", images=tuple(images)))
    return Prompt(messages=tuple(out), seed=seed, greedy=greedy)


class LocalPolicyServer:
    """vLLM-shaped chat-completions server over an :class:`HFPolicy` on ``vlm`` (see the module doc).

    ``temperature`` and ``max_new_tokens`` are the server's sampling settings (requests must
    match the temperature and may ask for fewer tokens); ``seed`` seeds requests that bring
    none. :meth:`start` serves on a background thread (``port=0`` picks a free port);
    :meth:`stop` shuts down. The model object is the server's: weight updates change it in
    place, so give it a copy if the caller keeps using ``vlm``.
    """

    def __init__(
        self,
        vlm: VLM,
        *,
        served_model_name: str = "darwin-tiny",
        temperature: float = 1.0,
        max_new_tokens: int = 64,
        seed: int = 0,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        max_batch: int = 8,
        max_wait: float = 0.005,
        allow_runtime_lora: bool = True,
    ) -> None:
        self.vlm = vlm
        self.served_model_name = served_model_name
        self.policy = HFPolicy(vlm, HFPolicyConfig(temperature=temperature, max_new_tokens=max_new_tokens, seed=seed))
        self.temperature = float(temperature)
        self.max_new_tokens = int(max_new_tokens)
        self._api_key = api_key
        self.host = host
        self.port = int(port)
        self.allow_runtime_lora = allow_runtime_lora
        self._batcher_config = BatcherConfig(min_batch=1, max_batch=max_batch, max_wait=max_wait)
        self._batcher: DynamicBatcher | None = None
        self._base_weights = {k: v.detach().clone() for k, v in vlm.model.state_dict().items()}
        self._weights_version = 0
        self._weight_label = "0"  # what /update_weights_from_disk named the served weights (SGLang's weight_version)
        self._active_model = served_model_name
        self._adapters: dict[str, str] = {}  # name -> path
        self._weights_lock: asyncio.Lock | None = None
        self._runner: web.AppRunner | None = None
        self._thread: LoopThread | None = None
        self.requests = 0
        """Chat-completion requests answered (any status)."""

    # -- lifecycle ---------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """``http://host:port`` once started (point ``ServerPolicyConfig.base_url`` here)."""
        return f"http://{self.host}:{self.port}"

    @property
    def active_model(self) -> str:
        """The model name requests must use now (the base name or the loaded adapter)."""
        return self._active_model

    def batcher_stats(self) -> BatcherStats:
        """Batch sizes and queueing of the requests served so far."""
        if self._batcher is None:
            raise RuntimeError("the server is not running")
        return self._batcher.stats()

    def app(self) -> web.Application:
        """The aiohttp application (routes above)."""
        app = web.Application(middlewares=[self._auth], client_max_size=256 * 1024 * 1024)
        app.router.add_get("/health", self._health)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._chat)
        if self.allow_runtime_lora:
            app.router.add_post("/v1/load_lora_adapter", self._load_lora)
            app.router.add_post("/v1/unload_lora_adapter", self._unload_lora)
        app.router.add_post("/update_weights_from_disk", self._update_from_disk)
        app.router.add_get("/get_weight_version", self._weight_version)
        return app

    async def serve(self) -> None:
        """Start serving on the running event loop (returns once listening)."""
        self._batcher = DynamicBatcher(self.policy, self._batcher_config)
        self._weights_lock = asyncio.Lock()
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        logger.info("local policy server for %s on %s", self.served_model_name, self.base_url)

    async def shutdown(self) -> None:
        """Stop listening, finish running batches, stop the policy's worker thread."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._batcher is not None:
            await self._batcher.close()
        self.policy.close()

    def start(self) -> LocalPolicyServer:
        """Serve on a background thread with its own event loop; returns when listening."""
        if self._thread is not None:
            raise RuntimeError("the server is already running")
        thread = LoopThread("darwin-local-policy-server")
        try:
            thread.call(self.serve(), timeout=None)
        except BaseException:
            thread.close()
            raise
        self._thread = thread
        return self

    def stop(self) -> None:
        """Shut down the background server (idempotent): no new requests, running batches finish."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        try:
            thread.call(self.shutdown(), timeout=None)
        finally:
            thread.close()

    def __enter__(self) -> LocalPolicyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- handlers ----------------------------------------------------------------------
    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        guarded = self._api_key is not None and request.path.startswith("/v1")
        if guarded and request.headers.get("Authorization") != f"Bearer {self._api_key}":
            return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _models(self, request: web.Request) -> web.Response:
        created = int(time.time())
        cards = [
            {
                "id": self.served_model_name,
                "object": "model",
                "created": created,
                "owned_by": "vllm",
                "root": self.served_model_name,
                "parent": None,
                "max_model_len": None,
                "permission": [],
            }
        ]
        cards += [
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "vllm",
                "root": path,
                "parent": self.served_model_name,
                "max_model_len": None,
                "permission": [],
            }
            for name, path in self._adapters.items()
        ]
        return web.json_response({"object": "list", "data": cards})

    async def _json(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise _RequestError(f"JSON decode error: {exc}") from None
        if not isinstance(body, dict):
            raise _RequestError("the request body must be a JSON object")
        return body

    async def _chat(self, request: web.Request) -> web.Response:
        self.requests += 1
        try:
            body = await self._json(request)
            settings = self._check_request(body)
            prompt = _to_prompt(body.get("messages"), settings["seed"], settings["greedy"])
        except _RequestError as exc:
            return _error(exc)
        assert self._batcher is not None
        version = self.policy.version
        gen = await self._batcher.submit(prompt)
        if gen.policy_version != version:  # sampled by weights swapped in while it queued: not the named model's
            return _error(_RequestError("weights were updated while the request waited; retry", status=503))
        limit = settings["max_tokens"]
        ids, lps = list(gen.response_ids[:limit]), list(gen.response_logprobs[:limit])
        eos = self.policy.eos_token_ids
        finished = bool(ids) and ids[-1] in eos
        body_ids = ids[:-1] if finished else ids
        text = self.vlm.tokenizer.decode(body_ids, skip_special_tokens=settings["skip_special_tokens"])
        as_ids = settings["return_tokens_as_token_ids"]
        choice: dict[str, Any] = {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": text,
                "refusal": None,
                "annotations": None,
                "audio": None,
                "function_call": None,
                "reasoning": None,
            },
            "logprobs": None,
            "finish_reason": "stop" if finished else "length",
            "stop_reason": None,
            "token_ids": ids if settings["return_token_ids"] else None,
        }
        if settings["logprobs"]:
            content = []
            for t, lp in zip(ids, lps, strict=True):
                token = f"token_id:{t}" if as_ids else cast(str, self.vlm.tokenizer.decode([t]))  # one sequence: a str
                content.append(
                    {
                        "token": token,
                        "logprob": max(float(lp), -9999.0),
                        "bytes": list(token.encode("utf-8", errors="replace")),
                        "top_logprobs": [],
                    }
                )
            choice["logprobs"] = {"content": content}
        payload = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": settings["model"],
            "choices": [choice],
            "service_tier": None,
            "system_fingerprint": None,
            "usage": {
                "prompt_tokens": len(gen.prompt_ids),
                "total_tokens": len(gen.prompt_ids) + len(ids),
                "completion_tokens": len(ids),
                "prompt_tokens_details": None,
            },
            "prompt_logprobs": None,
            "prompt_token_ids": list(gen.prompt_ids) if settings["return_token_ids"] else None,
            "kv_transfer_params": None,
        }
        return web.json_response(payload)

    def _check_request(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The request's settings, or a 400 naming the field this server cannot honour."""
        model = body.get("model") or self.served_model_name
        if model != self._active_model:
            if model == self.served_model_name or model in self._adapters:
                # one model object: a name whose weights were swapped out is busy, not gone
                raise _RequestError(
                    f"`{model}` is loaded but this server now serves `{self._active_model}`; retry", status=503
                )
            raise _RequestError(f"The model `{model}` does not exist.", status=404, param="model")
        if body.get("stream"):
            raise _RequestError("this server does not stream", param="stream")
        if body.get("n", 1) not in (1, None):
            raise _RequestError("this server returns one choice (n=1)", param="n")
        if body.get("chat_template") is not None:
            raise _RequestError(
                "Chat template is passed with request, but --trust-request-chat-template is not set. "
                "Refused request with untrusted chat template.",
                param="chat_template",
            )
        if body.get("add_generation_prompt", True) is not True or body.get("continue_final_message"):
            raise _RequestError("this server always adds the generation prompt", param="add_generation_prompt")
        temperature = body.get("temperature")
        greedy = temperature is not None and float(temperature) == 0.0  # vLLM's and SGLang's greedy
        if (
            temperature is not None
            and not greedy
            and not math.isclose(float(temperature), self.temperature, abs_tol=1e-9)
        ):
            raise _RequestError(
                f"this server samples at temperature {self.temperature} (its --temperature) or greedily (0); "
                f"the request asked {temperature}",
                param="temperature",
            )
        fixed = {
            "top_p": (None, 1, 1.0),
            "top_k": (None, 0, -1),
            "min_p": (None, 0, 0.0),
            "repetition_penalty": (None, 1, 1.0),
            "presence_penalty": (None, 0, 0.0),
            "frequency_penalty": (None, 0, 0.0),
        }
        for name, allowed in fixed.items():
            if body.get(name) not in allowed:
                raise _RequestError(
                    f"{name}={body.get(name)!r}: this server samples the full distribution only", param=name
                )
        top = body.get("top_logprobs")
        if top not in (None, 0):
            raise _RequestError(
                "this server returns the sampled token's log-prob only (top_logprobs=0)", param="top_logprobs"
            )
        stop_ids = body.get("stop_token_ids") or []
        if not set(stop_ids) <= set(self.policy.eos_token_ids) or body.get("stop"):
            raise _RequestError(
                f"this server stops at its model's EOS ids {sorted(self.policy.eos_token_ids)} only",
                param="stop_token_ids",
            )
        bias = body.get("logit_bias") or {}
        try:
            banned = {int(k): float(v) for k, v in bias.items()}
        except (TypeError, ValueError, AttributeError):
            raise _RequestError("logit_bias must map token ids to numbers", param="logit_bias") from None
        if any(v > -100.0 or t not in self.policy.forbidden_token_ids for t, v in banned.items()):
            raise _RequestError(
                "this server takes logit_bias only as a ban (-100) on ids its policy forbids", param="logit_bias"
            )
        limit = body.get("max_completion_tokens") or body.get("max_tokens") or self.max_new_tokens
        if not isinstance(limit, int) or not 1 <= limit <= self.max_new_tokens:
            raise _RequestError(
                f"max_tokens={limit!r}: this server generates 1..{self.max_new_tokens} tokens (its --max-new-tokens)",
                param="max_tokens",
            )
        seed = body.get("seed")
        if seed is not None and (not isinstance(seed, int) or seed < 0):
            raise _RequestError("seed must be a non-negative integer", param="seed")
        return {
            "model": model,
            "seed": seed,
            "greedy": greedy,
            "max_tokens": limit,
            "logprobs": bool(body.get("logprobs")),
            "return_token_ids": bool(body.get("return_token_ids")),
            "return_tokens_as_token_ids": bool(body.get("return_tokens_as_token_ids")),
            "skip_special_tokens": bool(body.get("skip_special_tokens", True)),
        }

    async def _load_lora(self, request: web.Request) -> web.Response:
        try:
            body = await self._json(request)
            name, path = body.get("lora_name"), body.get("lora_path")
            if not isinstance(name, str) or not name or not isinstance(path, str) or not path:
                raise _RequestError("Both 'lora_name' and 'lora_path' must be provided.")
            if name in self._adapters:
                raise _RequestError(f"The lora adapter '{name}' has already been loaded.")
            merged = await asyncio.to_thread(self._merge_adapter, Path(path))
            await self._swap_weights(merged, name)
            self._adapters[name] = path
        except _RequestError as exc:
            return _error(exc)
        return web.Response(text=f"Success: LoRA adapter '{name}' added successfully.")

    async def _unload_lora(self, request: web.Request) -> web.Response:
        try:
            body = await self._json(request)
            name = body.get("lora_name")
            if name not in self._adapters:
                raise _RequestError(f"The lora adapter '{name}' cannot be found.", status=404)
            del self._adapters[name]
            if self._active_model == name:  # serve the base model again
                await self._swap_weights(self._base_weights, self.served_model_name)
        except _RequestError as exc:
            return _error(exc)
        return web.Response(text=f"Success: LoRA adapter '{name}' removed successfully.")

    async def _update_from_disk(self, request: web.Request) -> web.Response:
        try:
            body = await self._json(request)
            path = body.get("model_path")
            if not isinstance(path, str) or not Path(path).is_dir():
                raise _RequestError(f"model_path {path!r} is not a checkpoint directory")
            label = body.get("weight_version")
            if label is not None and not isinstance(label, str):
                raise _RequestError(f"weight_version must be a string, got {label!r}")
            weights = await asyncio.to_thread(self._read_checkpoint, Path(path))
            await self._swap_weights(weights, self.served_model_name)
            self._weight_label = label if label is not None else str(self._weights_version)
            self._base_weights = {k: v.detach().clone() for k, v in weights.items()}
            self._adapters.clear()
        except _RequestError as exc:
            return web.json_response({"success": False, "message": str(exc), "num_paused_requests": 0}, status=400)
        return web.json_response(
            {"success": True, "message": "Succeeded to update model weights.", "num_paused_requests": 0}
        )

    async def _weight_version(self, request: web.Request) -> web.Response:
        """SGLang's ``GET /get_weight_version``: the label of the weights served now."""
        return web.json_response({"weight_version": self._weight_label})

    async def _swap_weights(self, weights: Mapping[str, torch.Tensor], active: str) -> None:
        assert self._weights_lock is not None
        async with self._weights_lock:
            self._weights_version += 1
            try:
                await self.policy.aload_weights(weights, self._weights_version)
            except KeyError as exc:
                raise _RequestError(f"the weights do not fit the served model: {exc}") from None
            self._active_model = active

    def _read_checkpoint(self, path: Path) -> dict[str, torch.Tensor]:
        from transformers import AutoModelForImageTextToText

        try:
            model = AutoModelForImageTextToText.from_pretrained(path, dtype=self.vlm.model.dtype)
        except (OSError, ValueError) as exc:
            raise _RequestError(f"cannot load a checkpoint from {path}: {exc}") from None
        return dict(model.state_dict())

    def _merge_adapter(self, path: Path) -> dict[str, torch.Tensor]:
        """The base weights with the PEFT adapter at ``path`` merged (``W + B A * alpha / r``)."""
        from safetensors.torch import load_file

        config_file, tensor_file = path / "adapter_config.json", path / "adapter_model.safetensors"
        if not config_file.is_file() or not tensor_file.is_file():
            raise _RequestError(
                f"No adapter found for {path} (needs adapter_config.json and adapter_model.safetensors)"
            )
        config = json.loads(config_file.read_text())
        rank, alpha = int(config["r"]), float(config.get("lora_alpha", config["r"]))
        tensors = load_file(str(tensor_file))
        merged = dict(self._base_weights)
        prefix = "base_model.model."
        for key, a in tensors.items():
            if not key.endswith(".lora_A.weight"):
                continue
            module = key[len(prefix) : -len(".lora_A.weight")] if key.startswith(prefix) else None
            b = tensors.get(key.replace(".lora_A.", ".lora_B."))
            target = f"{module}.weight"
            if module is None or b is None or target not in merged:
                raise _RequestError(f"adapter tensor {key} names no module of the served model")
            base = merged[target]
            merged[target] = base + (b.float() @ a.float()).to(base.dtype) * (alpha / rank)
        return merged


def serve_forever(server: LocalPolicyServer) -> None:
    """Run ``server`` in the foreground until interrupted (``darwin serve-policy``)."""

    async def main() -> None:
        await server.serve()
        try:
            await asyncio.Event().wait()
        finally:
            await server.shutdown()

    asyncio.run(main())


__all__ = ["LocalPolicyServer", "serve_forever"]
