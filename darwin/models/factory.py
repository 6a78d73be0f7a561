"""Build, save and load Qwen2-VL-family models: tiny random ones and real checkpoints alike.

A :class:`VLM` bundles a transformers model with its processor (tokenizer, image
processor, chat template). :func:`build_tiny_vlm` makes a tiny randomly initialised one
entirely locally; :func:`load_vlm` loads any Qwen2-VL / Qwen2.5-VL checkpoint directory
(UI-TARS-7B, Qwen2.5-VL-3B, or one saved by :meth:`VLM.save_pretrained`) through the
standard ``from_pretrained`` code paths::

    >>> import numpy as np
    >>> from darwin.models.config import TinyVLMConfig
    >>> from darwin.models.factory import build_tiny_vlm
    >>> vlm = build_tiny_vlm(TinyVLMConfig(), seed=0)
    >>> screen = np.zeros((560, 252, 3), dtype=np.uint8)
    >>> batch = vlm.build_inputs([[{"role": "user", "content": [
    ...     {"type": "image", "image": screen}, {"type": "text", "text": "Open Settings."}]}]])
    >>> out = vlm.model.generate(**batch, max_new_tokens=4, do_sample=False)
    >>> int(batch["mm_token_type_ids"].sum())     # one screenshot = 180 visual tokens
    180
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch
from transformers import (
    AutoModelForImageTextToText,
    BatchFeature,
    GenerationConfig,
    PreTrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Qwen2_5_VLConfig,
    Qwen2VLConfig,
    Qwen2VLImageProcessorPil,
)
from transformers.processing_utils import ProcessorMixin

from darwin.models.config import TinyVLMConfig
from darwin.models.processing import IMAGE_ONLY_PROCESSORS, load_processor
from darwin.models.tokenizer import build_tokenizer
from darwin.models.tokens import VISION_SPECIAL_TOKENS

logger = logging.getLogger(__name__)

TINY_CONFIG_FILE = "darwin_tiny_vlm.json"
"""Where :meth:`VLM.save_pretrained` records the :class:`TinyVLMConfig` and seed."""

TINY_FORMAT_VERSION = 1

Message = Mapping[str, Any]
"""One chat message in transformers' format: ``{"role": ..., "content": str | [blocks]}``;
an image block is ``{"type": "image", "image": PIL.Image | (H, W, 3) uint8 array}``."""


# --------------------------------------------------------------------------------------
# Helpers every policy needs (pitfalls 1 and 7 of the feasibility notes)
# --------------------------------------------------------------------------------------
def mm_token_type_ids(input_ids: torch.Tensor, image_token_id: int, video_token_id: int | None = None) -> torch.Tensor:
    """Modality of each token: 0 text, 1 image placeholder, 2 video placeholder.

    transformers 5.10's Qwen2-VL needs this tensor next to ``input_ids`` whenever
    ``image_grid_thw`` is passed (forward and ``generate``), e.g. after concatenating a
    prompt and a sampled response by hand.
    """
    out = (input_ids == image_token_id).to(torch.long)
    if video_token_id is not None:
        out = out + 2 * (input_ids == video_token_id).to(torch.long)
    return out


def forbidden_token_ids(tokenizer: PreTrainedTokenizerBase, vocab_size: int | None = None) -> frozenset[int]:
    """Token ids a policy must never sample (mask their logits to ``-inf``).

    These are the vision special tokens (``<|vision_start|>``, ``<|vision_end|>``,
    ``<|vision_pad|>``, ``<|image_pad|>``, ``<|video_pad|>``: a sampled ``<|image_pad|>``
    breaks the next forward with "Image features and image tokens do not match"), the pad
    token (unless it is also the EOS token, which must stay reachable) and, when the
    model's ``vocab_size`` is given, the embedding rows beyond the tokenizer (Qwen2.5-VL
    pads its 151,665 tokens to 151,936 rows). Apply the same mask when sampling
    and when computing training log-probs.
    """
    vocab = tokenizer.get_vocab()
    ids = {vocab[t] for t in VISION_SPECIAL_TOKENS if t in vocab}
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    if pad is not None and pad != eos:
        ids.add(pad)
    if vocab_size is not None:
        if vocab_size < len(tokenizer):
            logger.warning("model vocab_size=%d is below the tokenizer's %d tokens", vocab_size, len(tokenizer))
        ids.update(range(len(tokenizer), vocab_size))
    return frozenset(ids)


def build_inputs(
    processor: ProcessorMixin,
    conversations: Sequence[Sequence[Message]] | Sequence[Message],
    *,
    add_generation_prompt: bool = True,
) -> BatchFeature:
    """Tokenize chat conversations (with screenshots) into a left-padded model batch.

    ``conversations`` is one conversation (a list of messages) or a batch of them. The
    result holds ``input_ids``, ``attention_mask``, ``mm_token_type_ids`` and, when any
    image is present, ``pixel_values`` and ``image_grid_thw``: pass it as ``**batch`` to
    ``model(...)`` or ``model.generate(...)``. Left padding keeps the prompts' last tokens
    aligned for generation; the attention mask keeps M-RoPE positions exact.
    """
    if not conversations:
        raise ValueError("build_inputs needs at least one conversation")
    batched = not isinstance(conversations[0], Mapping)
    convs = cast(Sequence[Sequence[Message]], conversations if batched else [conversations])
    # apply_chat_template rewrites content blocks in place: give it copies.
    copies = [[_copy_message(m) for m in conv] for conv in convs]
    batch = cast(  # tokenize=True, return_dict=True: a BatchFeature
        BatchFeature,
        processor.apply_chat_template(
            copies,
            add_generation_prompt=add_generation_prompt,
            tokenize=True,
            return_dict=True,
            return_tensors="pt",
            processor_kwargs={"padding": True, "padding_side": "left"},
        ),
    )
    if "mm_token_type_ids" not in batch:
        qwen_processor: Any = processor  # a Qwen2-VL processor: image_token_id is its own, not ProcessorMixin's
        batch["mm_token_type_ids"] = mm_token_type_ids(
            batch["input_ids"], qwen_processor.image_token_id, getattr(processor, "video_token_id", None)
        )
    return batch


def _copy_message(message: Message) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, list):
        content = [dict(block) if isinstance(block, Mapping) else block for block in content]
    return {**message, "content": content}


# --------------------------------------------------------------------------------------
# The bundle
# --------------------------------------------------------------------------------------
@dataclass
class VLM:
    """A Qwen2-VL-family model and its processor, built tiny or loaded from a checkpoint.

    ``model`` is a ``Qwen2VLForConditionalGeneration`` or
    ``Qwen2_5_VLForConditionalGeneration`` in eval mode (call ``.train()`` to train);
    ``processor`` carries the tokenizer, image processor and chat template. ``tiny_config``
    and ``seed`` are set for models made by :func:`build_tiny_vlm` (and reloaded).
    """

    model: PreTrainedModel
    processor: ProcessorMixin
    tiny_config: TinyVLMConfig | None = None
    seed: int | None = None
    _forbidden: frozenset[int] | None = field(default=None, init=False, repr=False)

    @property
    def family(self) -> str:
        """``config.model_type`` of the model: ``qwen2_vl`` or ``qwen2_5_vl``."""
        return str(self.model.config.model_type)

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        """The processor's tokenizer."""
        return self.processor.tokenizer

    @property
    def image_processor(self) -> Any:
        """The processor's ``Qwen2VLImageProcessor`` (PIL backend without torchvision)."""
        return self.processor.image_processor

    @property
    def vocab_size(self) -> int:
        """Rows of the model's input embedding (>= ``len(tokenizer)``)."""
        return int(cast(torch.Tensor, self.model.get_input_embeddings().weight).shape[0])  # an embedding's weight

    def num_parameters(self) -> int:
        """Distinct parameters (tied embeddings counted once)."""
        return sum(p.numel() for p in self.model.parameters())

    def forbidden_token_ids(self) -> frozenset[int]:
        """:func:`forbidden_token_ids` for this model's tokenizer and vocabulary size."""
        if self._forbidden is None:
            self._forbidden = forbidden_token_ids(self.tokenizer, self.vocab_size)
        return self._forbidden

    def build_inputs(
        self,
        conversations: Sequence[Sequence[Message]] | Sequence[Message],
        *,
        add_generation_prompt: bool = True,
    ) -> BatchFeature:
        """:func:`build_inputs` with this model's processor."""
        return build_inputs(self.processor, conversations, add_generation_prompt=add_generation_prompt)

    def save_pretrained(self, path: str | os.PathLike[str]) -> Path:
        """Write a standard transformers checkpoint directory (plus the tiny config).

        Files: ``config.json``, ``generation_config.json``, ``model.safetensors``,
        ``tokenizer.json``, ``tokenizer_config.json``, ``processor_config.json``,
        ``chat_template.jinja`` and, for tiny models, ``darwin_tiny_vlm.json``.
        """
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(out)
        self.processor.save_pretrained(out)
        if self.tiny_config is not None:
            record = {
                "format_version": TINY_FORMAT_VERSION,
                "seed": self.seed,
                "config": self.tiny_config.model_dump(mode="json"),
            }
            (out / TINY_CONFIG_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        logger.info("saved %s model to %s", self.family, out)
        return out


# --------------------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------------------
def build_image_processor(config: TinyVLMConfig) -> Qwen2VLImageProcessorPil:
    """The Qwen2-VL image processor (PIL backend) with ``config``'s pixel budget."""
    return Qwen2VLImageProcessorPil(
        min_pixels=config.resolved_min_pixels,
        max_pixels=config.resolved_max_pixels,
        patch_size=config.patch_size,
        temporal_patch_size=config.temporal_patch_size,
        merge_size=config.spatial_merge_size,
    )


def build_processor(config: TinyVLMConfig, tokenizer: PreTrainedTokenizerBase) -> ProcessorMixin:
    """The family's processor (image-only; see :mod:`darwin.models.processing`)."""
    cls = IMAGE_ONLY_PROCESSORS[config.family]
    return cls(
        image_processor=build_image_processor(config),
        tokenizer=tokenizer,
        chat_template=tokenizer.chat_template,
    )


def hf_config(config: TinyVLMConfig, tokenizer: PreTrainedTokenizerBase) -> Qwen2VLConfig | Qwen2_5_VLConfig:
    """The transformers model config for ``config``, with token ids taken from ``tokenizer``."""
    tid = tokenizer.convert_tokens_to_ids
    eos, pad = tid("<|im_end|>"), tid("<|endoftext|>")
    text = {
        "vocab_size": len(tokenizer),
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_hidden_layers": config.num_hidden_layers,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        "max_position_embeddings": config.max_position_embeddings,
        "rms_norm_eps": config.rms_norm_eps,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": config.rope_theta,
            "mrope_section": list(config.resolved_mrope_section),
        },
        "bos_token_id": None,
        "eos_token_id": eos,
        "pad_token_id": pad,
        "tie_word_embeddings": config.tie_word_embeddings,
    }
    common: dict[str, Any] = {
        "image_token_id": tid("<|image_pad|>"),
        "video_token_id": tid("<|video_pad|>"),
        "vision_start_token_id": tid("<|vision_start|>"),
        "vision_end_token_id": tid("<|vision_end|>"),
        "tie_word_embeddings": config.tie_word_embeddings,
    }
    if config.family == "qwen2_vl":
        vision: dict[str, Any] = {
            "depth": config.vision_depth,
            "embed_dim": config.vision_embed_dim,
            "hidden_size": config.hidden_size,  # the merger's output = text hidden size
            "num_heads": config.vision_num_heads,
            "mlp_ratio": config.vision_mlp_ratio,
            "patch_size": config.patch_size,
            "spatial_merge_size": config.spatial_merge_size,
            "temporal_patch_size": config.temporal_patch_size,
        }
        return Qwen2VLConfig(text_config=text, vision_config=vision, **common)
    vision = {
        "depth": config.vision_depth,
        "hidden_size": config.vision_embed_dim,
        "intermediate_size": config.vision_embed_dim * config.vision_mlp_ratio,
        "num_heads": config.vision_num_heads,
        "out_hidden_size": config.hidden_size,  # the merger's output = text hidden size
        "patch_size": config.patch_size,
        "spatial_merge_size": config.spatial_merge_size,
        "temporal_patch_size": config.temporal_patch_size,
        "window_size": config.window_size,
        "fullatt_block_indexes": list(config.resolved_fullatt_block_indexes),
    }
    return Qwen2_5_VLConfig(text_config=text, vision_config=vision, **common)


def _generation_config(model_config: Qwen2VLConfig | Qwen2_5_VLConfig, forbidden: Iterable[int]) -> GenerationConfig:
    text = model_config.text_config
    if not isinstance(text, PreTrainedConfig):  # the model config turns a dict into its text config
        raise TypeError(f"{type(model_config).__name__}.text_config is {type(text).__name__}, not a config")
    return GenerationConfig(
        eos_token_id=[text.eos_token_id, text.pad_token_id],
        pad_token_id=text.pad_token_id,
        bos_token_id=None,
        # Sample from the policy's full distribution by default (transformers would
        # otherwise apply top_k=50), never from the forbidden tokens.
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        suppress_tokens=sorted(forbidden),
    )


def build_tiny_vlm(config: TinyVLMConfig | None = None, seed: int = 0) -> VLM:
    """Build a randomly initialised tiny Qwen2-VL / Qwen2.5-VL with tokenizer and processor.

    Everything is local and deterministic: the same ``config`` and ``seed`` give the same
    tokenizer and bit-identical weights. Weights are drawn from torch's CPU generator
    seeded with ``seed`` inside ``torch.random.fork_rng``, so the caller's RNG state is
    untouched. The model is float32, in eval mode, on the CPU.
    """
    config = config if config is not None else TinyVLMConfig()
    problems = config.problems()  # a config made with model_construct skipped validation
    if problems:
        raise ValueError("invalid TinyVLMConfig:\n- " + "\n- ".join(problems))
    tokenizer = build_tokenizer(config.family, config.vocab_size)
    processor = build_processor(config, tokenizer)
    model_config = hf_config(config, tokenizer)
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        model = AutoModelForImageTextToText.from_config(
            model_config, attn_implementation=config.attn_implementation, dtype=torch.float32
        )
    model.eval()
    vlm = VLM(model=model, processor=processor, tiny_config=config, seed=seed)
    model.generation_config = _generation_config(model_config, vlm.forbidden_token_ids())
    logger.info(
        "built tiny %s: %d parameters, vocab %d, %d visual tokens per %dx%d screen",
        config.family,
        vlm.num_parameters(),
        len(tokenizer),
        config.visual_tokens,
        config.screen_width,
        config.screen_height,
    )
    return vlm


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------
def load_vlm(
    path: str | os.PathLike[str],
    *,
    dtype: torch.dtype = torch.float32,
    processor_kwargs: Mapping[str, Any] | None = None,
    **model_kwargs: Any,
) -> VLM:
    """Load a Qwen2-VL / Qwen2.5-VL checkpoint directory (real or tiny) as a :class:`VLM`.

    The model goes through ``AutoModelForImageTextToText.from_pretrained`` (extra
    ``model_kwargs`` such as ``device_map`` or ``attn_implementation`` are passed on), the
    processor through :func:`darwin.models.processing.load_processor` (``processor_kwargs``
    such as ``{"max_pixels": 252 * 560}`` override its saved settings: a real checkpoint's
    default turns a 1080x2400 screenshot into 1272 visual tokens). A directory written
    by :meth:`VLM.save_pretrained` for a tiny model also restores ``tiny_config``. Hub ids
    work too where the hub is reachable (not on this project's machines).
    """
    src = Path(path)
    tiny, seed = _read_tiny_record(src)
    model = AutoModelForImageTextToText.from_pretrained(src, dtype=dtype, **model_kwargs)
    model.eval()
    processor = load_processor(src, str(model.config.model_type), **(processor_kwargs or {}))
    vlm = VLM(model=model, processor=processor, tiny_config=tiny, seed=seed)
    if tiny is not None:
        _check_tiny_matches(vlm, tiny, src)
    return vlm


def load_tiny_vlm(path: str | os.PathLike[str]) -> VLM:
    """Load a tiny model saved by :meth:`VLM.save_pretrained` (requires its tiny config)."""
    src = Path(path)
    if not (src / TINY_CONFIG_FILE).is_file():
        raise FileNotFoundError(
            f"{src} has no {TINY_CONFIG_FILE}, so it is not a tiny darwin model; "
            "use darwin.models.factory.load_vlm for a real checkpoint"
        )
    return load_vlm(src)


def _read_tiny_record(src: Path) -> tuple[TinyVLMConfig | None, int | None]:
    file = src / TINY_CONFIG_FILE
    if not file.is_file():
        return None, None
    try:
        record = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{file}: not valid JSON ({exc})") from exc
    if record.get("format_version") != TINY_FORMAT_VERSION:
        raise ValueError(
            f"{file}: format_version {record.get('format_version')!r} is not "
            f"{TINY_FORMAT_VERSION}; re-save it with this version of darwin"
        )
    return TinyVLMConfig.model_validate(record["config"]), record.get("seed")


def _check_tiny_matches(vlm: VLM, tiny: TinyVLMConfig, src: Path) -> None:
    if vlm.family != tiny.family:
        raise ValueError(f"{src}: {TINY_CONFIG_FILE} says {tiny.family} but config.json says {vlm.family}")
    if len(vlm.tokenizer) != tiny.vocab_size or vlm.vocab_size != tiny.vocab_size:
        raise ValueError(
            f"{src}: {TINY_CONFIG_FILE} says vocab_size={tiny.vocab_size} but the tokenizer has "
            f"{len(vlm.tokenizer)} tokens and the model {vlm.vocab_size} rows"
        )
