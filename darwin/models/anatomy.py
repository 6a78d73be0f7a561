"""Where the parts of a Qwen2-VL-family model are: its backbone, its vision tower, its hidden
size, and a hook that captures the backbone's hidden states and the LM head's logits.

The learner's critic and the learned verifier both put a scalar head on the backbone's
hidden states, so these helpers live with the models, not with either user.

    >>> from darwin.models.config import TinyVLMConfig
    >>> from darwin.models.factory import build_tiny_vlm
    >>> from darwin.models.anatomy import backbone_of, hidden_size_of
    >>> vlm = build_tiny_vlm(TinyVLMConfig(screen_width=56, screen_height=112), seed=0)
    >>> type(backbone_of(vlm.model)).__name__, hidden_size_of(vlm.model) > 0
    ('Qwen2VLModel', True)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedModel

__all__ = ["backbone_of", "capture_outputs", "hidden_size_of", "vision_tower_of"]


def backbone_of(model: PreTrainedModel) -> nn.Module:
    """The decoder (``Qwen2VLModel``: vision tower + language model, no LM head) of a
    ``*ForConditionalGeneration`` model; its output's ``last_hidden_state`` is ``(B, L, H)``."""
    inner = getattr(model, "model", None)
    if inner is None or not hasattr(inner, "get_rope_index"):
        raise TypeError(
            f"{type(model).__name__} has no Qwen2-VL-family backbone at .model; the learner needs "
            "a Qwen2-VL / Qwen2.5-VL ForConditionalGeneration model"
        )
    return inner


def vision_tower_of(backbone: nn.Module) -> nn.Module:
    """The vision tower (``.visual``) of a Qwen2-VL-family backbone (:func:`backbone_of`)."""
    tower = getattr(backbone, "visual", None)
    if tower is None:
        raise TypeError(
            f"{type(backbone).__name__} has no vision tower at .visual; freeze_vision needs a Qwen2-VL-family model"
        )
    return tower


def hidden_size_of(model: nn.Module) -> int:
    """The text decoder's hidden size ``H`` of a (vision-)language model."""
    config: Any = model.config  # a Hugging Face model's PretrainedConfig (nn.Module does not declare it)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return int(text.hidden_size)


@contextlib.contextmanager
def capture_outputs(backbone: nn.Module | None, lm_head: nn.Module | None) -> Iterator[dict[str, torch.Tensor]]:
    """Record the backbone's ``last_hidden_state`` ``(B, L, H)`` (key ``"hidden"``) and the LM
    head's logits ``(B, K, V)`` (key ``"logits"``) of the forwards run inside the block.

    The tensors keep their autograd graph, so a value head on the captured hidden states
    trains the shared backbone.
    """
    captured: dict[str, torch.Tensor] = {}
    handles = []
    if backbone is not None:

        def grab_hidden(_m: nn.Module, _a: object, out: Any) -> None:
            captured["hidden"] = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]

        handles.append(backbone.register_forward_hook(grab_hidden))
    if lm_head is not None:

        def grab_logits(_m: nn.Module, _a: object, out: torch.Tensor) -> None:
            captured["logits"] = out

        handles.append(lm_head.register_forward_hook(grab_logits))
    try:
        yield captured
    finally:
        for h in handles:
            h.remove()
