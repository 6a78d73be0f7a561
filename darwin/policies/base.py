"""The policy interface: prompts in, sampled text with token ids and log-probs out.

>>> import asyncio
>>> from darwin.policies.base import Policy
>>> from darwin.types import ChatMessage, Generation, Prompt
>>> class Echo(Policy):
...     async def generate(self, prompts):
...         return [Generation(text=p.messages[-1].text, policy_version=self.version) for p in prompts]
>>> out = asyncio.run(Echo().generate([Prompt(messages=(ChatMessage(role="user", text="wait()"),))]))
>>> out[0].text
'wait()'
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

import torch

from darwin.types import Generation, Prompt

__all__ = [
    "Policy",
    "WeightSyncUnsupported",
]


class WeightSyncUnsupported(TypeError):
    """The policy cannot take learner weights (e.g. a hosted model behind an API)."""


class Policy(ABC):
    """Samples responses for prompts. Backends: transformers, vLLM, LiteLLM, scripted."""

    version: int = 0
    """Bumped on every :meth:`load_weights`; recorded on each generation."""

    @abstractmethod
    async def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        """One sampled :class:`Generation` per prompt, in order."""

    def load_weights(self, weights: Mapping[str, torch.Tensor], version: int) -> None:
        """Replace the model weights by the learner's (for on-policy sampling)."""
        raise WeightSyncUnsupported(
            f"{type(self).__name__} cannot load learner weights; use a local model policy for training"
        )
