"""Qwen2-VL / Qwen2.5-VL processors that work without torchvision.

transformers 5.10's ``Qwen2VLProcessor`` and ``Qwen2_5_VLProcessor`` insist on a video
processor, and every video processor needs torchvision, which CPU-only installs (this
project's default) do not have: neither constructing the processor nor
``AutoProcessor.from_pretrained`` works there. The subclasses below drop the video
processor and keep everything else (``__call__``, ``apply_chat_template``, image-token
expansion, ``mm_token_type_ids``) exactly as transformers implements it. Darwin's agents
only ever send screenshots, never videos.

What they save names transformers' own classes (``"processor_class": "Qwen2VLProcessor"``),
so a saved directory is a standard checkpoint: on a machine with torchvision,
``AutoProcessor.from_pretrained`` loads it like any Qwen2-VL / UI-TARS checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import torch
from transformers import Qwen2_5_VLProcessor, Qwen2VLProcessor
from transformers.processing_utils import ProcessorMixin
from transformers.utils import is_torchvision_available

logger = logging.getLogger(__name__)

TOKENIZER_CONFIG_FILE = "tokenizer_config.json"


class _ImageOnlyMixin:
    """Shared save logic (record transformers' standard processor class name on disk) and a
    vectorised check of the multimodal token counts."""

    standard_class_name: str = ""

    def _check_special_mm_tokens(self, text: list[str], text_inputs: Any, modalities: list[str]) -> None:
        """transformers' check that tokenizing kept every image token, counted on the tensor.

        transformers counts with ``list(ids).count(token_id)``, one Python object per token of
        every prompt: about 13% of the policy's time in an evaluation of the tiny model on 2
        cores (docs/benchmarks.md, "Where an evaluation's time goes"). Same rule, same error.
        """
        for modality in modalities:
            token_str = getattr(self, f"{modality}_token", None)
            token_id = getattr(self, f"{modality}_token_id", None)
            if token_str is None or token_id is None:
                continue
            ids = text_inputs["input_ids"]
            if isinstance(ids, torch.Tensor):
                ids_count = (ids == token_id).sum(dim=-1).tolist()
            else:
                ids_count = [list(row).count(token_id) for row in ids]
            text_count = [sample.count(token_str) for sample in text]
            if ids_count != text_count:
                raise ValueError(
                    f"Mismatch in `{modality}` token count between text and `input_ids`. Got ids={ids_count} "
                    f"and text={text_count}. Likely due to `truncation='max_length'`. Please disable truncation "
                    "or increase `max_length`."
                )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = super().to_dict()  # type: ignore[misc]  # a mixin: super() is the ProcessorMixin it joins
        out["processor_class"] = self.standard_class_name
        return out

    def save_pretrained(self, save_directory: str | os.PathLike[str], push_to_hub: bool = False, **kwargs: Any) -> Any:
        result = super().save_pretrained(save_directory, push_to_hub=push_to_hub, **kwargs)  # type: ignore[misc]  # a mixin: super() is the ProcessorMixin it joins
        # ProcessorMixin writes our class name into tokenizer_config.json; put the standard one.
        path = Path(save_directory) / TOKENIZER_CONFIG_FILE
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            if "processor_class" in data:
                data["processor_class"] = self.standard_class_name
                path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return result


class ImageOnlyQwen2VLProcessor(_ImageOnlyMixin, Qwen2VLProcessor):
    """``Qwen2VLProcessor`` without a video processor (no torchvision needed).

    Saves as ``Qwen2VLProcessor``; load with :func:`load_processor` (or, where torchvision
    is installed, ``AutoProcessor.from_pretrained``).
    """

    standard_class_name = "Qwen2VLProcessor"

    def __init__(
        self,
        image_processor: Any = None,
        tokenizer: Any = None,
        chat_template: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)


class ImageOnlyQwen2_5_VLProcessor(_ImageOnlyMixin, Qwen2_5_VLProcessor):  # noqa: N801 (transformers' name)
    """``Qwen2_5_VLProcessor`` without a video processor (no torchvision needed).

    Saves as ``Qwen2_5_VLProcessor``; load with :func:`load_processor`.
    """

    standard_class_name = "Qwen2_5_VLProcessor"

    def __init__(
        self,
        image_processor: Any = None,
        tokenizer: Any = None,
        chat_template: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)


IMAGE_ONLY_PROCESSORS: dict[str, type[ProcessorMixin]] = {
    "qwen2_vl": ImageOnlyQwen2VLProcessor,
    "qwen2_5_vl": ImageOnlyQwen2_5_VLProcessor,
}
"""Image-only processor class per ``config.model_type``."""


def load_processor(path: str | os.PathLike[str], model_type: str, **kwargs: Any) -> ProcessorMixin:
    """Load the processor saved in ``path`` for a model of ``model_type``.

    With torchvision installed this is ``AutoProcessor.from_pretrained(path)``, the path any
    real checkpoint takes. Without it, the standard sub-loaders (``AutoTokenizer``,
    ``AutoImageProcessor``, which falls back to the PIL image processor) run through the
    image-only processor class of ``model_type``. ``kwargs`` (e.g. ``min_pixels``,
    ``max_pixels``) override the saved sub-processor settings, as with ``AutoProcessor``.
    """
    if is_torchvision_available():
        from transformers import AutoProcessor

        return AutoProcessor.from_pretrained(path, **kwargs)
    cls = IMAGE_ONLY_PROCESSORS.get(model_type)
    if cls is None:
        raise ImportError(
            f"loading a {model_type!r} processor needs torchvision (transformers requires a video "
            f"processor); install torchvision or use one of {sorted(IMAGE_ONLY_PROCESSORS)}"
        )
    logger.debug("torchvision missing: loading %s from %s", cls.__name__, path)
    return cls.from_pretrained(path, **kwargs)
