"""The RL run's policy pool: one sampling policy over the warm start, handing an actor per phone.

:class:`ActorPool` loads a warm-start checkpoint (:mod:`darwin.sft.training`; or, with an
``agent_format``, any Qwen2-VL-family checkpoint directory such as UI-TARS), puts one
:class:`~darwin.policies.hf.HFPolicy` (or another backend) behind one
:class:`~darwin.policies.batcher.DynamicBatcher`, and gives each phone its own
:class:`~darwin.agents.base.ModelActor`, so the phones' steps batch together. It serves
``darwin eval --agent tiny:<dir>``, the warm-start evaluation and the RL experiment.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from darwin.agents.base import ModelActor
from darwin.agents.vlm import VLMAgent
from darwin.agents.warm_start import WarmStart, load_warm_start
from darwin.components import ComponentSpec
from darwin.memory.base import Memory

if TYPE_CHECKING:
    from darwin.policies.batcher import DynamicBatcher
    from darwin.policies.hf import HFPolicy


class ActorPool:
    """Model actors for N phones sharing one :class:`~darwin.policies.hf.HFPolicy` behind one
    :class:`~darwin.policies.batcher.DynamicBatcher`, so the phones' steps batch together.

    ``pool(i)`` is phone ``i``'s :class:`~darwin.agents.base.ModelActor` (its own agent,
    same checkpoint format; its memory from ``make_memory`` if given, else the checkpoint's).
    Sampling is from the full masked distribution at ``temperature`` (1.0: what RL samples;
    0: greedy). Close with :meth:`aclose` inside the event loop that used it.

    ``checkpoint`` is a darwin warm start (``darwin sft``), whose agent format it records. With
    ``agent_format`` (an agent format, :mod:`darwin.agents.formats`, e.g. ``uitars-1.5``)
    it is any Qwen2-VL-family checkpoint directory instead (``darwin.models.factory.load_vlm``); then
    ``observation_size`` (the screenshot size the agent is given) is required and
    ``max_new_tokens`` defaults to 256.
    """

    def __init__(
        self,
        checkpoint: str | os.PathLike[str] | WarmStart,
        *,
        temperature: float = 1.0,
        seed: int = 0,
        max_batch: int = 8,
        max_wait: float = 0.05,
        max_new_tokens: int | None = None,
        make_memory: Callable[[], Memory] | None = None,
        make_policy: Callable[[Any, Any], Any] | None = None,
        agent_format: ComponentSpec | str | None = None,
        observation_size: tuple[int, int] | None = None,
    ) -> None:
        from darwin.policies.batcher import BatcherConfig, DynamicBatcher
        from darwin.policies.hf import HFPolicy, HFPolicyConfig

        if agent_format is None:
            warm = checkpoint if isinstance(checkpoint, WarmStart) else load_warm_start(checkpoint)
            vlm, self._observation_size, default_tokens = warm.vlm, warm.observation_size, warm.max_new_tokens
            self._make_agent: Callable[[Memory | None], VLMAgent] = lambda memory: (
                warm.make_agent() if memory is None and warm.agent_format is None else warm.make_any_agent(memory)
            )
        else:
            from darwin.agents.formats import make_agent
            from darwin.models.factory import load_vlm

            if observation_size is None:
                raise ValueError(
                    f"agent_format {ComponentSpec.model_validate(agent_format).name!r} needs observation_size (the screenshot size the model is given)"
                )
            make_agent(agent_format)  # an unknown format fails before the model loads
            if isinstance(checkpoint, WarmStart):
                raise TypeError("agent_format applies to a checkpoint path; a WarmStart brings its own agent format")
            vlm, self._observation_size, default_tokens = load_vlm(Path(checkpoint)), observation_size, 256
            self._make_agent = lambda memory: make_agent(agent_format, memory)
        sampling = HFPolicyConfig(
            temperature=temperature,
            seed=seed,
            max_new_tokens=max_new_tokens if max_new_tokens is not None else default_tokens,
        )
        # make_policy(vlm, sampling) builds another backend on the warm start (e.g. a ServerPolicy)
        self.policy: HFPolicy = HFPolicy(vlm, sampling) if make_policy is None else make_policy(vlm, sampling)
        self.batcher: DynamicBatcher = DynamicBatcher(
            self.policy, BatcherConfig(min_batch=max_batch, max_batch=max_batch, max_wait=max_wait)
        )
        self.make_memory = make_memory
        self._memories: list[Memory] = []  # closed with the pool

    @property
    def observation_size(self) -> tuple[int, int]:
        """The screenshot size the checkpoint was trained on."""
        return self._observation_size

    def __call__(self, index: int) -> ModelActor:
        memory = None if self.make_memory is None else self.make_memory()
        if memory is not None:
            self._memories.append(memory)
        return ModelActor(self._make_agent(memory), self.batcher)

    async def aclose(self) -> None:
        """Close the batcher, the policy's worker thread and every memory the pool made."""
        await self.batcher.close()
        self.policy.close()
        for memory in self._memories:
            memory.close()
        self._memories.clear()
