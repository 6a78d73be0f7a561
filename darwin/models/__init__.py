"""Qwen2-VL-family vision-language models for darwin: tiny random ones built locally, and
real checkpoints (UI-TARS, Qwen2-VL, Qwen2.5-VL) loaded through transformers.

    >>> from darwin.models import TinyVLMConfig, build_tiny_vlm
    >>> vlm = build_tiny_vlm(TinyVLMConfig(family="qwen2_5_vl"), seed=0)
    >>> vlm.family, vlm.tiny_config.visual_tokens
    ('qwen2_5_vl', 180)

The config and token constants import without torch/transformers (fast config
validation); everything else is imported on first use. See docs/models.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from darwin.models.config import TinyVLMConfig
from darwin.models.tokens import (
    CHAT_TEMPLATE,
    QWEN2_VL_SPECIAL_TOKENS,
    VISION_SPECIAL_TOKENS,
    Family,
    special_tokens_for,
)

if TYPE_CHECKING:
    from darwin.models.factory import (
        TINY_CONFIG_FILE,
        VLM,
        build_image_processor,
        build_inputs,
        build_processor,
        build_tiny_vlm,
        forbidden_token_ids,
        hf_config,
        load_tiny_vlm,
        load_vlm,
        mm_token_type_ids,
    )
    from darwin.models.processing import (
        ImageOnlyQwen2_5_VLProcessor,
        ImageOnlyQwen2VLProcessor,
        load_processor,
    )
    from darwin.models.tokenizer import build_tokenizer

_LAZY = {
    "TINY_CONFIG_FILE": "darwin.models.factory",
    "VLM": "darwin.models.factory",
    "build_image_processor": "darwin.models.factory",
    "build_inputs": "darwin.models.factory",
    "build_processor": "darwin.models.factory",
    "build_tiny_vlm": "darwin.models.factory",
    "forbidden_token_ids": "darwin.models.factory",
    "hf_config": "darwin.models.factory",
    "load_tiny_vlm": "darwin.models.factory",
    "load_vlm": "darwin.models.factory",
    "mm_token_type_ids": "darwin.models.factory",
    "ImageOnlyQwen2VLProcessor": "darwin.models.processing",
    "ImageOnlyQwen2_5_VLProcessor": "darwin.models.processing",
    "load_processor": "darwin.models.processing",
    "build_tokenizer": "darwin.models.tokenizer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'darwin.models' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "CHAT_TEMPLATE",
    "QWEN2_VL_SPECIAL_TOKENS",
    "TINY_CONFIG_FILE",
    "VISION_SPECIAL_TOKENS",
    "VLM",
    "Family",
    "ImageOnlyQwen2VLProcessor",
    "ImageOnlyQwen2_5_VLProcessor",
    "TinyVLMConfig",
    "build_image_processor",
    "build_inputs",
    "build_processor",
    "build_tiny_vlm",
    "build_tokenizer",
    "forbidden_token_ids",
    "hf_config",
    "load_processor",
    "load_tiny_vlm",
    "load_vlm",
    "mm_token_type_ids",
    "special_tokens_for",
]
