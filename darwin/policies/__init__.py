"""Inference backends: prompts in, sampled text with token ids, log-probs and version out.

    >>> from darwin.policies.batcher import BatcherConfig
    >>> BatcherConfig(min_batch=2, max_batch=8, max_wait=0.05).max_batch
    8

:class:`~darwin.policies.base.Policy` is the interface; :class:`~darwin.policies.hf.HFPolicy` samples
from a local transformers model, :class:`~darwin.policies.server_client.ServerPolicy` from a vLLM / SGLang server that
returns token ids and log-probs (trainable; :class:`~darwin.policies.local_policy_server.LocalPolicyServer` is a CPU stand-in),
:class:`~darwin.policies.litellm.LiteLLMPolicy` calls any hosted or OpenAI-compatible model, and
:class:`~darwin.policies.batcher.DynamicBatcher` puts many concurrent callers in front of one backend.
Each is imported from its module, so importing one never loads another's heavy libraries
(transformers, litellm).
See docs/policies.md.
"""
