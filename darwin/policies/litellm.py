"""A policy backed by any hosted or OpenAI-compatible model through LiteLLM.

For zero-shot evaluation and as an LLM backend (Gemini, OpenAI, Claude, a local vLLM or
llama.cpp server...). Screenshots travel as base64 PNG data URLs in OpenAI's vision
message format; API keys are read from an environment variable at call time and never
stored on the policy, in its config, or in logs. Transient failures (timeouts, connection
errors, HTTP 429 and 5xx) are retried with exponential backoff (tenacity) a bounded number
of times; authentication failures raise :class:`PolicyAuthError` at once. Hosted models
return no token ids or log-probs (empty tuples), so this policy cannot be trained.

    >>> from darwin.policies.litellm import LiteLLMPolicy, LiteLLMPolicyConfig
    >>> cfg = LiteLLMPolicyConfig(model="openai/ui-tars-7b", api_base="http://127.0.0.1:8000/v1",
    ...                           api_key_env="VLLM_API_KEY", max_tokens=256)
    >>> policy = LiteLLMPolicy(cfg)          # no request, no key needed yet
    >>> policy.config.timeout_s, policy.config.max_attempts
    (60.0, 4)

``litellm`` is imported on first use (it takes a few seconds). Unless the environment
already says otherwise, ``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set before that import
so LiteLLM uses its bundled model price map instead of downloading one (darwin runs
offline by default).
"""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from darwin.policies.base import Policy
from darwin.problems import refuse_fields
from darwin.types import Generation, Prompt, RunAbort

logger = logging.getLogger(__name__)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECRET_KEYS = {"api_key", "apikey", "key", "token", "access_token", "authorization", "secret"}


class PolicyAuthError(RunAbort):
    """The provider rejected the credentials (HTTP 401/403) or the key variable is unset.

    A :class:`~darwin.types.RunAbort`: no episode can work around it, so workflows let it
    stop the run (``darwin run`` / ``eval`` print it as one line naming the variable)."""


class PolicyRequestError(RuntimeError):
    """A request failed for good: a non-retryable error, or retries were exhausted."""


@dataclass(frozen=True)
class Completion:
    """One answer with what it cost: tokens as the provider reported them (``None`` when it
    reported none) and the price in US dollars from LiteLLM's bundled price map (``None``
    for models the map does not list, e.g. a self-hosted ``openai/<served-name>``)."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None


class LiteLLMPolicyConfig(BaseModel):
    """Settings of a :class:`LiteLLMPolicy` (validated when built; frozen; holds no secrets).

    Validation errors never echo input values (a key pasted by mistake stays out of
    tracebacks and logs).

    ``model`` is a LiteLLM model name: ``"gemini/gemini-2.5-flash"``, ``"gpt-4o"``, or
    ``"openai/<served-name>"`` with ``api_base`` for any OpenAI-compatible server (vLLM,
    SGLang, llama.cpp). ``api_key_env`` names the environment variable holding the key;
    leave it ``None`` to let LiteLLM read its provider's standard variable
    (``OPENAI_API_KEY``, ``GEMINI_API_KEY``, ...).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    model: str = Field(min_length=1, description="LiteLLM model name, e.g. 'openai/ui-tars-7b'")
    api_base: str | None = Field(
        default=None, description="base URL of an OpenAI-compatible server, e.g. http://host:8000/v1"
    )
    api_key_env: str | None = Field(default=None, description="name of the environment variable that holds the API key")
    max_tokens: int = Field(default=512, ge=1, le=1_000_000, description="response length cap")
    temperature: float | None = Field(default=None, ge=0.0, le=2.0, description="None: provider default")
    top_p: float | None = Field(default=None, gt=0.0, le=1.0, description="None: provider default")
    timeout_s: float = Field(default=60.0, gt=0.0, le=3600.0, description="per-attempt timeout")
    max_attempts: int = Field(default=4, ge=1, le=20, description="attempts per request (1 = no retry)")
    backoff_initial_s: float = Field(default=1.0, ge=0.0, le=600.0)
    backoff_max_s: float = Field(default=30.0, ge=0.0, le=3600.0)
    max_concurrency: int = Field(default=8, ge=1, le=1024, description="requests in flight per policy")
    png_compress_level: int = Field(default=1, ge=0, le=9, description="zlib level of the PNG screenshots")
    extra_params: dict[str, JsonValue] = Field(
        default_factory=dict,
        description="further litellm.acompletion arguments (e.g. {'seed': 0}); never secrets",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_inline_secret(cls, data: Any) -> Any:
        return refuse_fields(
            data,
            {
                "api_key": "API keys are never part of a config: put the key in an environment variable "
                "and pass its name, e.g. api_key_env='OPENAI_API_KEY'"
            },
        )

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str | None) -> str | None:
        if v is not None and not _ENV_NAME.match(v):
            raise ValueError(
                f"api_key_env must be the *name* of an environment variable (letters, digits, "
                f"underscores), e.g. 'OPENAI_API_KEY'; got a value of {len(v)} characters"
            )
        return v

    @field_validator("extra_params")
    @classmethod
    def _no_secret_params(cls, v: dict[str, JsonValue]) -> dict[str, JsonValue]:
        bad = sorted(k for k in v if k.lower() in _SECRET_KEYS)
        if bad:
            raise ValueError(f"extra_params may not carry credentials ({bad}); use api_key_env")
        reserved = sorted(k for k in v if k in {"model", "messages", "api_base", "base_url", "timeout"})
        if reserved:
            raise ValueError(f"extra_params may not override {reserved}; use the config fields")
        return v

    @model_validator(mode="after")
    def _check(self) -> LiteLLMPolicyConfig:
        if self.backoff_max_s < self.backoff_initial_s:
            raise ValueError("backoff_max_s must be at least backoff_initial_s")
        return self


def image_data_url(image: np.ndarray, *, compress_level: int = 1) -> str:
    """An ``(H, W, 3)`` uint8 screenshot as a ``data:image/png;base64,...`` URL.

    >>> image_data_url(np.zeros((2, 2, 3), np.uint8))[:30]
    'data:image/png;base64,iVBORw0K'
    """
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"screenshots must be (H, W, 3) uint8 arrays, got {image.shape} {image.dtype}")
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG", compress_level=compress_level)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def prompt_to_openai_messages(prompt: Prompt, *, compress_level: int = 1) -> list[dict[str, Any]]:
    """A :class:`Prompt` in OpenAI's chat format: images as ``image_url`` parts before the text.

    >>> from darwin.types import ChatMessage, Prompt
    >>> prompt_to_openai_messages(Prompt(messages=(ChatMessage(role="user", text="hi"),)))
    [{'role': 'user', 'content': 'hi'}]
    """
    if not prompt.messages:
        raise ValueError("a Prompt needs at least one message")
    out: list[dict[str, Any]] = []
    for message in prompt.messages:
        if not message.images:
            out.append({"role": message.role, "content": message.text})
            continue
        parts: list[dict[str, Any]] = [
            {"type": "image_url", "image_url": {"url": image_data_url(img, compress_level=compress_level)}}
            for img in message.images
        ]
        if message.text:
            parts.append({"type": "text", "text": message.text})
        out.append({"role": message.role, "content": parts})
    return out


def _litellm() -> ModuleType:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banner on every failure
    return litellm


_MISSING_CREDENTIALS = re.compile(r"missing credentials|api_key client option must be set|no api key", re.IGNORECASE)


def _missing_credentials(exc: BaseException) -> bool:
    """LiteLLM reports a provider key that is not set as a server error (HTTP 500): spot it."""
    return bool(_MISSING_CREDENTIALS.search(str(exc)))


class LiteLLMPolicy(Policy):
    """Generates with a hosted or OpenAI-compatible model via ``litellm.acompletion``.

    Each prompt is one chat completion (up to ``max_concurrency`` at once); a batch fails
    as a whole if any of its requests fails for good (the others are cancelled). The
    returned :class:`Generation` has the text and ``policy_version`` only;
    :meth:`complete` returns :class:`Completion` objects with token usage and cost instead.
    :meth:`load_weights` raises :class:`WeightSyncUnsupported`.
    """

    def __init__(self, config: LiteLLMPolicyConfig) -> None:
        self.config = config
        self._semaphore: asyncio.Semaphore | None = None
        self._semaphore_loop: asyncio.AbstractEventLoop | None = None

    def check_credentials(self) -> None:
        """Fail now, naming the variable to set, if the model's API key is missing (before any
        phone starts). With ``api_key_env`` that variable must be set; without it and without
        ``api_base``, LiteLLM's list of the provider's key variables is checked (a local server
        named by ``api_base`` may need no key). Raises :class:`PolicyAuthError`."""
        config = self.config
        if config.api_key_env is not None:
            self._api_key()
            return
        if config.api_base is not None:
            return
        try:
            found = _litellm().validate_environment(model=config.model)
        except Exception:  # noqa: BLE001 - an unusual provider: the first request will tell
            return
        if not found.get("keys_in_environment", True):
            names = " or ".join(found.get("missing_keys") or ["the provider's API key variable"])
            raise PolicyAuthError(
                f"{config.model}: no API key: export {names} (or name your variable with api_key_env)"
            )

    def _api_key(self) -> str | None:
        name = self.config.api_key_env
        if name is None:
            return None
        key = os.environ.get(name)
        if not key:
            raise PolicyAuthError(
                f"environment variable {name} is not set (or empty); export the API key for {self.config.model} there"
            )
        return key

    def _limit(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._semaphore_loop is not loop:
            self._semaphore = asyncio.Semaphore(self.config.max_concurrency)
            self._semaphore_loop = loop
        return self._semaphore

    async def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        """One completion per prompt, in order."""
        return [Generation(text=c.text, policy_version=self.version) for c in await self.complete(prompts)]

    async def complete(self, prompts: Sequence[Prompt]) -> list[Completion]:
        """Like :meth:`generate`, with each answer's token usage and cost (:class:`Completion`)."""
        if not prompts:
            return []
        key = self._api_key()
        limit = self._limit()
        tasks = [asyncio.ensure_future(self._one(p, key, limit)) for p in prompts]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _one(self, prompt: Prompt, key: str | None, limit: asyncio.Semaphore) -> Completion:
        cfg = self.config
        messages = prompt_to_openai_messages(prompt, compress_level=cfg.png_compress_level)
        kwargs: dict[str, Any] = {
            **cfg.extra_params,
            "model": cfg.model,
            "messages": messages,
            "max_tokens": cfg.max_tokens,
            "timeout": cfg.timeout_s,
            "num_retries": 0,  # tenacity retries, not LiteLLM's
            "max_retries": 0,  # nor the OpenAI client's
        }
        if cfg.api_base is not None:
            kwargs["api_base"] = cfg.api_base
        if key is not None:
            kwargs["api_key"] = key
        if prompt.greedy:
            kwargs["temperature"] = 0.0
        elif cfg.temperature is not None:
            kwargs["temperature"] = cfg.temperature
        if cfg.top_p is not None:
            kwargs["top_p"] = cfg.top_p
        litellm = _litellm()
        retrying = AsyncRetrying(
            stop=stop_after_attempt(cfg.max_attempts),
            wait=wait_exponential(multiplier=cfg.backoff_initial_s, max=cfg.backoff_max_s)
            + wait_random(0.0, cfg.backoff_initial_s),
            retry=retry_if_exception(_is_transient),
            before_sleep=self._log_retry(key),
            reraise=True,
        )
        try:
            async with limit:
                async for attempt in retrying:
                    with attempt:
                        response = await litellm.acompletion(**kwargs)
        except Exception as exc:  # noqa: BLE001 - translated and re-raised
            err = self._translate(exc, key)
            # Auth errors drop the provider's exception (it may quote key fragments).
            raise err from (None if isinstance(err, PolicyAuthError) else exc)
        prompt_tokens, completion_tokens = _usage(response)
        return Completion(
            text=_response_text(response),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=_cost(litellm, response),
        )

    def _log_retry(self, key: str | None) -> Any:
        def log(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            logger.warning(
                "%s: attempt %d/%d failed (%s: %s); retrying",
                self.config.model,
                state.attempt_number,
                self.config.max_attempts,
                type(exc).__name__,
                _redact(str(exc), key)[:300],
            )

        return log

    def _translate(self, exc: Exception, key: str | None) -> Exception:
        """A darwin error whose message names the model and the cause, with the key redacted."""
        model = self.config.model
        detail = _redact(f"{type(exc).__name__}: {exc}", key)[:500]
        if isinstance(exc, PolicyAuthError):
            return exc
        if _missing_credentials(exc):
            return PolicyAuthError(
                f"{model}: no API key: set api_key_env to the variable that holds it, or export the "
                f"provider's standard variable (e.g. OPENAI_API_KEY, GEMINI_API_KEY). Provider said: {detail}"
            )
        status = _status(exc)
        litellm = _litellm()
        if status in (401, 403) or isinstance(exc, (litellm.AuthenticationError, litellm.PermissionDeniedError)):
            where = (
                f"the key in ${self.config.api_key_env}"
                if self.config.api_key_env
                else "the provider's API key environment variable (or set api_key_env)"
            )
            return PolicyAuthError(
                f"{model}: authentication failed (HTTP {status or 401}); check {where}. Provider said: {detail}"
            )
        if _is_transient(exc):
            return PolicyRequestError(
                f"{model}: giving up after {self.config.max_attempts} attempts; last error: {detail}"
            )
        return PolicyRequestError(f"{model}: request failed (not retried): {detail}")


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _is_transient(exc: BaseException) -> bool:
    """Timeouts, connection errors, HTTP 408/409/429 and 5xx: worth another attempt."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    if _missing_credentials(exc):
        return False
    litellm = _litellm()
    if isinstance(exc, (litellm.AuthenticationError, litellm.PermissionDeniedError)):
        return False
    transient = (
        litellm.Timeout,
        litellm.APIConnectionError,
        litellm.RateLimitError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.BadGatewayError,
    )
    if isinstance(exc, transient):
        return True
    status = _status(exc)
    return status is not None and (status in (408, 409, 429) or status >= 500)


def _redact(text: str, key: str | None) -> str:
    if key:
        text = text.replace(key, "***")
    return text


def _usage(response: Any) -> tuple[int | None, int | None]:
    usage = getattr(response, "usage", None)
    if usage is None:
        return None, None
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    return (prompt if isinstance(prompt, int) else None, completion if isinstance(completion, int) else None)


def _cost(litellm: ModuleType, response: Any) -> float | None:
    """The answer's price from LiteLLM's price map; ``None`` when the model is not listed."""
    try:
        cost = litellm.completion_cost(completion_response=response)
    except Exception:  # noqa: BLE001 - unknown models raise various errors: no price
        return None
    return float(cost) if isinstance(cost, int | float) and cost > 0 else None


def _response_text(response: Any) -> str:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, KeyError, TypeError) as exc:
        raise PolicyRequestError(f"malformed completion response: {type(exc).__name__}: {exc}") from None
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    # Some providers return a list of content parts.
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


__all__ = [
    "Completion",
    "LiteLLMPolicy",
    "LiteLLMPolicyConfig",
    "PolicyAuthError",
    "PolicyRequestError",
    "image_data_url",
    "prompt_to_openai_messages",
]
