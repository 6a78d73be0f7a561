"""Token names, ids layout and the chat template of the Qwen2-VL family (no heavy imports).

Kept free of torch/transformers so that configs validate quickly (``darwin run --dry-run``).
"""

from __future__ import annotations

from typing import Literal

QWEN2_VL_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
"""Qwen2-VL's special tokens in id order (151643.. in the real tokenizer)."""

QWEN2_5_VL_EXTRA_TOKENS: tuple[str, ...] = (
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
"""Added tokens Qwen2.5-VL appends after Qwen2-VL's (not special: they decode as text)."""

VISION_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
"""Tokens that only mean something next to real image/video features: never sample them."""

CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""Qwen2-VL / Qwen2.5-VL / UI-TARS chat template (jinja), verbatim in behaviour."""

Family = Literal["qwen2_vl", "qwen2_5_vl"]
"""The transformers model family: ``qwen2_vl`` (Qwen2-VL, UI-TARS-1.0) or ``qwen2_5_vl``
(Qwen2.5-VL, UI-TARS-1.5)."""

MAX_BASE_VOCAB = 2874
"""Largest base vocabulary (bytes + merges) the built-in corpus supports; a test checks it."""


def special_tokens_for(family: Family) -> tuple[str, ...]:
    """The added tokens of ``family`` in id order (appended after the BPE vocabulary)."""
    if family == "qwen2_vl":
        return QWEN2_VL_SPECIAL_TOKENS
    if family == "qwen2_5_vl":
        return QWEN2_VL_SPECIAL_TOKENS + QWEN2_5_VL_EXTRA_TOKENS
    raise ValueError(f"unknown family {family!r}: use 'qwen2_vl' or 'qwen2_5_vl'")
