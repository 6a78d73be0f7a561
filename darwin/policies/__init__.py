"""Inference backends: prompts in, sampled text with token ids, log-probs and version out.

    >>> from darwin.policies import BatcherConfig, HFPolicyConfig
    >>> BatcherConfig(min_batch=2, max_batch=8, max_wait=0.05).max_batch
    8

:class:`Policy` is the interface (``darwin.policies.base``); :class:`HFPolicy` samples
from a local transformers model, :class:`ServerPolicy` from a vLLM / SGLang server that
returns token ids and log-probs (trainable; :class:`LocalPolicyServer` is a CPU stand-in),
:class:`LiteLLMPolicy` calls any hosted or OpenAI-compatible model, and :class:`DynamicBatcher` puts many concurrent callers in
front of one backend. Heavy modules (transformers, litellm) are imported on first use.
See docs/policies.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from darwin.policies.base import ChatMessage, Policy, Prompt, WeightSyncUnsupported
from darwin.policies.batcher import (
    BatcherClosedError,
    BatcherConfig,
    BatcherStats,
    DynamicBatcher,
    batch_decision,
)

if TYPE_CHECKING:
    from darwin.policies.hf import (
        HFPolicy,
        HFPolicyConfig,
        compute_response_logprobs,
        forbidden_mask,
        masked_log_softmax,
        prompt_to_messages,
        rope_index,
    )
    from darwin.policies.litellm import (
        LiteLLMPolicy,
        LiteLLMPolicyConfig,
        PolicyAuthError,
        PolicyRequestError,
        image_data_url,
        prompt_to_openai_messages,
    )
    from darwin.policies.local_server import LocalPolicyServer
    from darwin.policies.server import ServerPolicy, ServerPolicyConfig

_LAZY = {
    "HFPolicy": "darwin.policies.hf",
    "HFPolicyConfig": "darwin.policies.hf",
    "compute_response_logprobs": "darwin.policies.hf",
    "forbidden_mask": "darwin.policies.hf",
    "masked_log_softmax": "darwin.policies.hf",
    "prompt_to_messages": "darwin.policies.hf",
    "rope_index": "darwin.policies.hf",
    "LiteLLMPolicy": "darwin.policies.litellm",
    "LiteLLMPolicyConfig": "darwin.policies.litellm",
    "PolicyAuthError": "darwin.policies.litellm",
    "PolicyRequestError": "darwin.policies.litellm",
    "image_data_url": "darwin.policies.litellm",
    "prompt_to_openai_messages": "darwin.policies.litellm",
    "LocalPolicyServer": "darwin.policies.local_server",
    "ServerPolicy": "darwin.policies.server",
    "ServerPolicyConfig": "darwin.policies.server",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'darwin.policies' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "BatcherClosedError",
    "BatcherConfig",
    "BatcherStats",
    "ChatMessage",
    "DynamicBatcher",
    "HFPolicy",
    "HFPolicyConfig",
    "LiteLLMPolicy",
    "LiteLLMPolicyConfig",
    "LocalPolicyServer",
    "Policy",
    "PolicyAuthError",
    "PolicyRequestError",
    "Prompt",
    "ServerPolicy",
    "ServerPolicyConfig",
    "WeightSyncUnsupported",
    "batch_decision",
    "compute_response_logprobs",
    "forbidden_mask",
    "image_data_url",
    "masked_log_softmax",
    "prompt_to_messages",
    "prompt_to_openai_messages",
    "rope_index",
]
