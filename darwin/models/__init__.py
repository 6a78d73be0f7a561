"""Qwen2-VL-family vision-language models for darwin: tiny random ones built locally, and
real checkpoints (UI-TARS, Qwen2-VL, Qwen2.5-VL) loaded through transformers.

    >>> from darwin.models.config import TinyVLMConfig
    >>> from darwin.models.factory import build_tiny_vlm
    >>> vlm = build_tiny_vlm(TinyVLMConfig(family="qwen2_5_vl"), seed=0)
    >>> vlm.family, vlm.tiny_config.visual_tokens
    ('qwen2_5_vl', 180)

Each name is imported from the module that holds it; :mod:`darwin.models.config` and the token
constants import without torch/transformers (fast config validation). See docs/models.md.
"""
