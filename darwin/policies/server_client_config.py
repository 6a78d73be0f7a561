"""Configuration of :class:`~darwin.policies.server_client.ServerPolicy`: where the server is, how to
sample, and how learner weights reach it (:class:`ServerPolicyConfig`)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["DEFAULT_LORA_TARGETS", "ServerPolicyConfig"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class ServerPolicyConfig(BaseModel):
    """Where the server is, how to sample, and how learner weights reach it (frozen; no secrets).

    >>> ServerPolicyConfig(base_url="http://gpu:8000", model="m", weight_sync="lora", weights_dir="/shared/w").weight_sync
    'lora'
    """

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    base_url: str = Field(description="the server's root URL, e.g. http://gpu-box:8000 (a trailing /v1 is dropped)")
    model: str = Field(min_length=1, description="the served model name (vLLM --served-model-name)")
    api_key_env: str | None = Field(
        default=None, description="name of the environment variable holding the server's API key (vLLM --api-key)"
    )
    max_tokens: int = Field(default=64, ge=1, le=65_536, description="response length cap")
    temperature: float = Field(default=1.0, ge=0.0, le=100.0, description="sampling temperature; 0 = greedy")
    seed: int = Field(default=0, ge=0, description="seeds the generator that draws a seed for each request without one")
    timeout_s: float = Field(default=120.0, gt=0.0, le=3600.0, description="per-attempt timeout of a generation")
    max_attempts: int = Field(default=4, ge=1, le=20, description="attempts per request (1 = no retry)")
    backoff_initial_s: float = Field(default=0.5, ge=0.0, le=600.0)
    backoff_max_s: float = Field(default=10.0, ge=0.0, le=3600.0)
    max_concurrency: int = Field(default=64, ge=1, le=4096, description="requests in flight per policy")
    verify_prompt_ids: bool = Field(
        default=True,
        description="compare the server's prompt_token_ids with the local chat-template rendering "
        "(fails at once when the server's template or image processing differ from the learner's)",
    )
    mask_forbidden: bool = Field(
        default=True, description="send logit_bias -100 on the forbidden token ids (the learner masks them)"
    )
    png_compress_level: int = Field(default=1, ge=0, le=9, description="zlib level of the PNG screenshots")
    weight_sync: Literal["none", "lora", "disk"] = Field(
        default="none",
        description="'lora': PEFT adapter + vLLM /v1/load_lora_adapter; 'disk': full checkpoint + "
        "SGLang /update_weights_from_disk; 'none': fixed server weights",
    )
    weights_dir: str | None = Field(
        default=None,
        description="a directory the server can read (same path on both machines) for adapters / checkpoints",
    )
    lora_rank: int = Field(default=8, ge=1, le=1024, description="'lora': adapter rank (the learner's LoraConfig.rank)")
    lora_target_modules: tuple[str, ...] = Field(
        default=DEFAULT_LORA_TARGETS, min_length=1, description="'lora': adapted module names (the learner's)"
    )
    lora_name_prefix: str = Field(
        default="darwin", pattern=r"^[A-Za-z0-9_.\-]+$", description="adapter names: <prefix>-v<version>"
    )
    keep_versions: int = Field(
        default=2,
        ge=1,
        le=100,
        description="adapters kept loaded / checkpoints kept on disk (in-flight requests may still name the previous one)",
    )
    weight_sync_timeout_s: float = Field(
        default=600.0, gt=0.0, le=36_000.0, description="timeout of one weight-update call"
    )

    @field_validator("base_url")
    @classmethod
    def _root_url(cls, v: str) -> str:
        if not re.match(r"^https?://[^/\s]+", v):
            raise ValueError("base_url must be an http(s) URL such as http://127.0.0.1:8000")
        v = v.rstrip("/")
        return v[: -len("/v1")] if v.endswith("/v1") else v

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str | None) -> str | None:
        if v is not None and not _ENV_NAME.match(v):
            raise ValueError(
                f"api_key_env must be the *name* of an environment variable (letters, digits, underscores), "
                f"e.g. 'VLLM_API_KEY'; got a value of {len(v)} characters"
            )
        return v

    @model_validator(mode="after")
    def _check(self) -> ServerPolicyConfig:
        problems = []
        if self.weight_sync != "none" and not self.weights_dir:
            problems.append(
                f"weight_sync={self.weight_sync!r} needs weights_dir: a directory both this process and the "
                "server can read (e.g. a shared volume), where adapters / checkpoints are written"
            )
        if self.backoff_max_s < self.backoff_initial_s:
            problems.append("backoff_max_s must be at least backoff_initial_s")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def logprob_temperature(self) -> float:
        """Temperature of the recorded log-probs: the sampling temperature (1.0 when greedy)."""
        return self.temperature if self.temperature > 0 else 1.0
