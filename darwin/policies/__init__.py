"""Inference backends: prompts in, sampled text with token ids, log-probs and version out.

:class:`Policy` is the interface; :class:`HFPolicy` samples from a local transformers model,
:class:`ServerPolicy` from a vLLM / SGLang server that returns token ids and log-probs
(trainable; :class:`LocalPolicyServer` is a CPU stand-in), :class:`LiteLLMPolicy` calls any
hosted or OpenAI-compatible model, and :class:`DynamicBatcher` puts many concurrent callers in
front of one backend. Names are imported on first use, so importing one never loads another's
heavy libraries (transformers, litellm):

    >>> from darwin.policies import BatcherConfig
    >>> BatcherConfig(min_batch=2, max_batch=8, max_wait=0.05).max_batch
    8

See docs/policies.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from darwin.lazy_exports import lazy_exports

__all__ = [
    "BatcherConfig",
    "DynamicBatcher",
    "HFPolicy",
    "HFPolicyConfig",
    "LiteLLMPolicy",
    "LiteLLMPolicyConfig",
    "LocalPolicyServer",
    "Policy",
    "ServerPolicy",
    "ServerPolicyConfig",
    "WeightSyncUnsupported",
]

if TYPE_CHECKING:
    from darwin.policies.base import Policy, WeightSyncUnsupported
    from darwin.policies.batcher import BatcherConfig, DynamicBatcher
    from darwin.policies.hf import HFPolicy, HFPolicyConfig
    from darwin.policies.litellm import LiteLLMPolicy, LiteLLMPolicyConfig
    from darwin.policies.local_policy_server import LocalPolicyServer
    from darwin.policies.server_client import ServerPolicy
    from darwin.policies.server_client_config import ServerPolicyConfig
else:  # hidden from type checkers, so that a misspelt name is their error
    # public name -> the module that holds it, imported on first use (darwin.lazy_exports)
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "BatcherConfig": "darwin.policies.batcher",
            "DynamicBatcher": "darwin.policies.batcher",
            "HFPolicy": "darwin.policies.hf",
            "HFPolicyConfig": "darwin.policies.hf",
            "LiteLLMPolicy": "darwin.policies.litellm",
            "LiteLLMPolicyConfig": "darwin.policies.litellm",
            "LocalPolicyServer": "darwin.policies.local_policy_server",
            "Policy": "darwin.policies.base",
            "ServerPolicy": "darwin.policies.server_client",
            "ServerPolicyConfig": "darwin.policies.server_client_config",
            "WeightSyncUnsupported": "darwin.policies.base",
        },
    )
