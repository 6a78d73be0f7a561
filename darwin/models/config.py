"""Typed, validated configuration of a tiny randomly initialised Qwen2-VL / Qwen2.5-VL model.

:class:`TinyVLMConfig` describes everything :func:`darwin.models.factory.build_tiny_vlm` needs: the
transformers family, the text decoder and vision tower sizes, the tokenizer's vocabulary
size and the agent's screenshot size (which fixes the image processor's pixel budget).
Every problem is reported in one error naming the field and the fix::

    >>> from darwin.models.config import TinyVLMConfig
    >>> cfg = TinyVLMConfig()                       # config A of the feasibility notes
    >>> cfg.visual_tokens, cfg.grid_thw
    (180, (1, 40, 18))
    >>> TinyVLMConfig(hidden_size=100)              # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    pydantic_core._pydantic_core.ValidationError: ... hidden_size=100 ...
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from darwin.models.tokens import MAX_BASE_VOCAB, Family, special_tokens_for
from darwin.problems import problems_message

MIN_BASE_VOCAB = 256
"""The byte-level alphabet every tokenizer starts from (all 256 bytes)."""


class TinyVLMConfig(BaseModel):
    """Sizes of a tiny Qwen2-VL-family model and of the screenshots it reads.

    The defaults are *config A* of the project's CPU feasibility notes (about 0.83 M
    parameters, 180 visual tokens for a 252x560 screenshot, ~90 ms per forward of batch 8
    on 2 cores). :meth:`preset` gives the named presets. Fields that depend on others
    (``mrope_section``, ``min_pixels``, ``max_pixels``, ``fullatt_block_indexes``) are
    derived when left as ``None``; read the resolved values from the ``resolved_*``
    properties.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    family: Family = Field("qwen2_vl", description="transformers model family")

    # --- text decoder -------------------------------------------------------------------
    vocab_size: int = Field(
        2000,
        gt=0,
        description="total tokenizer size including special tokens; the model's embedding "
        "matrix has exactly this many rows (byte-level BPE trained in-process up to it)",
    )
    hidden_size: int = Field(128, gt=0, description="text hidden size (also the vision merger's output)")
    num_hidden_layers: int = Field(2, gt=0, description="text decoder layers")
    num_attention_heads: int = Field(4, gt=0, description="text attention heads")
    num_key_value_heads: int = Field(2, gt=0, description="text key/value heads (GQA)")
    intermediate_size: int = Field(256, gt=0, description="text MLP intermediate size")
    mrope_section: tuple[int, int, int] | None = Field(
        None,
        description="multimodal RoPE split (temporal, height, width) of head_dim/2 frequencies; "
        "None derives Qwen's 1/4, 3/8, 3/8 split",
    )
    rope_theta: float = Field(10000.0, gt=0, description="RoPE base")
    max_position_embeddings: int = Field(8192, gt=0, description="longest sequence (text positions)")
    rms_norm_eps: float = Field(1e-6, gt=0, description="RMSNorm epsilon")
    tie_word_embeddings: bool = Field(
        True, description="share the input embedding and the LM head (as Qwen2-VL-2B does)"
    )

    # --- vision tower -------------------------------------------------------------------
    vision_depth: int = Field(2, gt=0, description="vision transformer blocks")
    vision_embed_dim: int = Field(64, gt=0, description="vision transformer width")
    vision_num_heads: int = Field(4, gt=0, description="vision attention heads")
    vision_mlp_ratio: int = Field(4, gt=0, description="vision MLP width / vision_embed_dim")
    patch_size: int = Field(14, gt=0, description="ViT patch size in pixels")
    spatial_merge_size: int = Field(2, gt=0, description="patches merged per side into one visual token")
    temporal_patch_size: int = Field(2, gt=0, description="frames per temporal patch (images are repeated)")
    window_size: int = Field(112, gt=0, description="qwen2_5_vl only: window-attention size in pixels")
    fullatt_block_indexes: tuple[int, ...] | None = Field(
        None,
        description="qwen2_5_vl only: vision blocks with full attention; None = the last block",
    )

    # --- screenshots --------------------------------------------------------------------
    screen_width: int = Field(252, gt=0, description="agent screenshot width in pixels")
    screen_height: int = Field(560, gt=0, description="agent screenshot height in pixels")
    min_pixels: int | None = Field(None, description="image processor lower pixel budget; None = 56*56 (Qwen default)")
    max_pixels: int | None = Field(
        None,
        description="image processor upper pixel budget; None = the screen's area plus less than "
        "one merged patch, so the screen (and any larger screen of the same aspect ratio) maps "
        "to exactly the screen's grid",
    )

    attn_implementation: Literal["sdpa", "eager"] = Field("sdpa", description="attention kernel passed to transformers")

    # ------------------------------------------------------------------------------------
    @classmethod
    def preset(cls, name: Literal["A", "B"], **overrides: object) -> TinyVLMConfig:
        """Named sizes from the feasibility notes: ``A`` (~0.83 M params, the default) or
        ``B`` (4 layers, intermediate 512, vision embed 128: ~2.1 M)."""
        presets: dict[str, dict[str, object]] = {
            "A": {},
            "B": {"num_hidden_layers": 4, "intermediate_size": 512, "vision_embed_dim": 128},
        }
        if name not in presets:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(presets)}")
        return cls(**{**presets[name], **overrides})

    # --- derived values -----------------------------------------------------------------
    @property
    def head_dim(self) -> int:
        """Text attention head size (``hidden_size // num_attention_heads``)."""
        return self.hidden_size // self.num_attention_heads

    @property
    def resolved_mrope_section(self) -> tuple[int, int, int]:
        """``mrope_section`` or Qwen's split of ``head_dim / 2`` into (1/4, 3/8, 3/8)."""
        if self.mrope_section is not None:
            return self.mrope_section
        return self._default_mrope()

    @property
    def resolved_fullatt_block_indexes(self) -> tuple[int, ...]:
        """Vision blocks with full attention (Qwen2.5-VL); the last block by default."""
        if self.fullatt_block_indexes is not None:
            return self.fullatt_block_indexes
        return (self.vision_depth - 1,)

    @property
    def factor(self) -> int:
        """Pixels per merged visual token side (``patch_size * spatial_merge_size``, 28)."""
        return self.patch_size * self.spatial_merge_size

    @property
    def resolved_min_pixels(self) -> int:
        """Image processor ``min_pixels``."""
        return self.min_pixels if self.min_pixels is not None else 56 * 56

    @property
    def resolved_max_pixels(self) -> int:
        """Image processor ``max_pixels`` (see the field's description)."""
        if self.max_pixels is not None:
            return self.max_pixels
        return self.screen_width * self.screen_height + self.factor**2 - 1

    @property
    def grid_thw(self) -> tuple[int, int, int]:
        """The image processor's ``image_grid_thw`` row for one screenshot (in patches)."""
        return (1, self.screen_height // self.patch_size, self.screen_width // self.patch_size)

    @property
    def visual_tokens(self) -> int:
        """``<|image_pad|>`` tokens one screenshot expands to in the prompt."""
        _, h, w = self.grid_thw
        return h * w // self.spatial_merge_size**2

    @property
    def num_special_tokens(self) -> int:
        """Special tokens appended after the byte-level BPE vocabulary."""
        return len(special_tokens_for(self.family))

    # --- validation ---------------------------------------------------------------------
    def problems(self) -> list[str]:
        """Every inconsistency in this config, each naming the field and a fix ([] if none)."""
        out: list[str] = []
        if self.hidden_size % self.num_attention_heads:
            out.append(
                f"hidden_size={self.hidden_size} is not divisible by num_attention_heads="
                f"{self.num_attention_heads}: pick a hidden_size that is a multiple of the heads"
            )
        elif self.head_dim % 2:
            out.append(
                f"head_dim = hidden_size/num_attention_heads = {self.head_dim} must be even for "
                "RoPE: change hidden_size or num_attention_heads"
            )
        if self.num_attention_heads % self.num_key_value_heads:
            out.append(
                f"num_attention_heads={self.num_attention_heads} is not divisible by "
                f"num_key_value_heads={self.num_key_value_heads}: use a divisor of the heads"
            )
        if not out:
            sec = self.resolved_mrope_section
            if any(s <= 0 for s in sec) or sum(sec) != self.head_dim // 2:
                out.append(
                    f"mrope_section={list(sec)} must be 3 positive ints summing to head_dim/2 = "
                    f"{self.head_dim // 2} (head_dim = hidden_size/num_attention_heads = "
                    f"{self.head_dim}); e.g. leave mrope_section=None to derive "
                    f"{list(self._default_mrope())}"
                    if self.head_dim >= 8
                    else f"head_dim={self.head_dim} is too small for 3 mrope sections: raise "
                    "hidden_size or lower num_attention_heads so head_dim >= 8"
                )
        if self.vision_embed_dim % self.vision_num_heads:
            out.append(
                f"vision_embed_dim={self.vision_embed_dim} is not divisible by vision_num_heads="
                f"{self.vision_num_heads}: pick a multiple of the heads"
            )
        elif (self.vision_embed_dim // self.vision_num_heads) % 4:
            out.append(
                f"vision head size vision_embed_dim/vision_num_heads = "
                f"{self.vision_embed_dim // self.vision_num_heads} must be a multiple of 4 (2-D "
                "vision RoPE): change vision_embed_dim or vision_num_heads"
            )
        f = self.factor
        for name, value in (
            ("screen_width", self.screen_width),
            ("screen_height", self.screen_height),
        ):
            if value % f:
                lo = max(f, value // f * f)
                out.append(
                    f"{name}={value} is not a multiple of patch_size*spatial_merge_size={f}: "
                    f"use {lo} or {lo + f} (render screenshots at that size)"
                )
        area = self.screen_width * self.screen_height
        if self.resolved_min_pixels > area:
            out.append(
                f"min_pixels={self.resolved_min_pixels} exceeds the screen area "
                f"{self.screen_width}x{self.screen_height}={area}: lower min_pixels or leave it None"
            )
        if self.resolved_max_pixels < area:
            out.append(
                f"max_pixels={self.resolved_max_pixels} is below the screen area "
                f"{self.screen_width}x{self.screen_height}={area}, so the processor would shrink "
                "every screenshot: raise max_pixels or leave it None"
            )
        if self.family == "qwen2_5_vl":
            bad = [i for i in self.resolved_fullatt_block_indexes if not 0 <= i < self.vision_depth]
            if bad:
                out.append(
                    f"fullatt_block_indexes={list(self.resolved_fullatt_block_indexes)} has "
                    f"indexes {bad} outside 0..vision_depth-1={self.vision_depth - 1}: fix them or "
                    "leave it None (last block)"
                )
            if self.window_size % f:
                out.append(
                    f"window_size={self.window_size} is not a multiple of "
                    f"patch_size*spatial_merge_size={f}: use e.g. {max(f, self.window_size // f * f)}"
                )
        minimum = MIN_BASE_VOCAB + self.num_special_tokens
        maximum = MAX_BASE_VOCAB + self.num_special_tokens
        if self.vocab_size < minimum:
            out.append(
                f"vocab_size={self.vocab_size} is below {minimum} (256 byte tokens + "
                f"{self.num_special_tokens} special tokens of {self.family}): raise vocab_size"
            )
        elif self.vocab_size > maximum:
            out.append(
                f"vocab_size={self.vocab_size} is above {maximum}, the most BPE merges the built-in "
                f"corpus supports ({MAX_BASE_VOCAB}) plus {self.num_special_tokens} special tokens: "
                "lower vocab_size"
            )
        return out

    def _default_mrope(self) -> tuple[int, int, int]:
        half = self.head_dim // 2
        t = half // 4
        h = (half - t) // 2
        return (t, h, half - t - h)

    @model_validator(mode="after")
    def _check(self) -> TinyVLMConfig:
        problems = self.problems()
        if problems:
            raise ValueError(problems_message("TinyVLMConfig", problems))
        return self
