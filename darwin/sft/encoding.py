"""Encoding: demonstrations through the :class:`~darwin.policies.hf.HFPolicy` input path
once, cached as compact tensors (prompt ids, each distinct screenshot once as ``uint8``
patches, target ids ending in EOS) that :meth:`EncodedDemos.batch` turns back into the
policy's exact model inputs. See docs/sft.md.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from darwin.models.pixels import PixelEncoder
from darwin.sft.demonstrations import Demonstration
from darwin.types import Prompt

if TYPE_CHECKING:
    import torch

    from darwin.models.factory import VLM

logger = logging.getLogger(__name__)


@dataclass
class EncodedDemos:
    """Demonstrations as the model sees them: prompt ids, deduplicated screenshots, targets.

    ``prompt_ids[i]`` are the unpadded ids of ``HFPolicy.build_inputs([prompt_i])``;
    ``image_ids[i]`` index ``screens`` in the prompt's image order; ``target_ids[i]`` is
    the tokenized target followed by EOS. ``screens`` holds each distinct screenshot once,
    as ``uint8`` patches (``(N, h*w, 3, p*p)``, :meth:`PixelEncoder.to_patches`).
    """

    prompt_ids: list[torch.Tensor]
    image_ids: list[list[int]]
    screens: torch.Tensor
    screen_size: tuple[int, int]
    """``(W, H)`` of every screenshot."""
    target_ids: list[list[int]]
    pad_id: int
    image_token_id: int
    video_token_id: int | None
    pixels: PixelEncoder

    def __len__(self) -> int:
        return len(self.prompt_ids)

    def batch(self, indices: Sequence[int]) -> tuple[dict[str, torch.Tensor], list[list[int]]]:
        """The left-padded model inputs of these prompts (as ``HFPolicy.build_inputs`` gives
        them) and their target ids, for :func:`~darwin.models.scoring.compute_response_logprobs`."""
        import torch

        from darwin.models.factory import mm_token_type_ids

        rows = [self.prompt_ids[i] for i in indices]
        longest = max(len(r) for r in rows)
        ids = torch.full((len(rows), longest), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), longest), dtype=torch.long)
        for k, r in enumerate(rows):
            ids[k, longest - len(r) :] = r
            mask[k, longest - len(r) :] = 1
        inputs = {
            "input_ids": ids,
            "attention_mask": mask,
            "mm_token_type_ids": mm_token_type_ids(ids, self.image_token_id, self.video_token_id),
        }
        image_rows = [j for i in indices for j in self.image_ids[i]]
        if image_rows:
            w, h = self.screen_size
            inputs["pixel_values"] = self.pixels.from_patches(self.screens[image_rows])
            inputs["image_grid_thw"] = self.pixels.grid(h, w, len(image_rows))
        return inputs, [self.target_ids[i] for i in indices]


class PromptAndTarget(Protocol):
    """What :func:`encode_demonstrations` reads of an example (a :class:`Demonstration`, or a
    :class:`darwin.sft.sources.Example`)."""

    @property
    def prompt(self) -> Prompt: ...
    @property
    def target(self) -> str: ...


def encode_demonstrations(
    vlm: VLM,
    demos: Sequence[Demonstration] | Sequence[PromptAndTarget],
    *,
    chunk: int = 32,
    on_chunk: Callable[[int, int], None] | None = None,
) -> EncodedDemos:
    """Tokenize every prompt through the policy's own path (chat template + processor) once.

    Screenshots are stored once each as ``uint8``; :class:`PixelEncoder` rebuilds their
    ``pixel_values`` per batch and is checked bit-exact against the processor on every
    chunk here. ``on_chunk(done, total)`` follows the prompts encoded (progress displays).
    """
    import torch

    from darwin.models.scoring import prompt_to_messages

    tok = vlm.tokenizer
    eos = tok.eos_token_id
    if eos is None:
        raise ValueError("the tokenizer has no EOS token; SFT targets must end with one")
    pixels = PixelEncoder(vlm.image_processor)
    screen_index: dict[bytes, int] = {}
    screens: list[np.ndarray] = []
    patches: list[torch.Tensor] = []
    prompt_ids: list[torch.Tensor] = []
    image_ids: list[list[int]] = []
    for start in range(0, len(demos), chunk):
        part = demos[start : start + chunk]
        batch = vlm.build_inputs([prompt_to_messages(d.prompt) for d in part])
        ids, mask = batch["input_ids"], batch["attention_mask"].bool()
        first_new = len(screens)
        flat_images: list[int] = []
        for k, d in enumerate(part):
            prompt_ids.append(ids[k][mask[k]].clone())
            rows = []
            for img in d.prompt.images:
                arr = np.ascontiguousarray(img, dtype=np.uint8)
                if screens and arr.shape != screens[0].shape:
                    raise ValueError(
                        f"screenshots of different sizes ({arr.shape[1]}x{arr.shape[0]} and "
                        f"{screens[0].shape[1]}x{screens[0].shape[0]}): record demonstrations at one size"
                    )
                key = hashlib.blake2b(arr.tobytes() + repr(arr.shape).encode(), digest_size=16).digest()
                if key not in screen_index:
                    screen_index[key] = len(screens)
                    screens.append(arr)
                rows.append(screen_index[key])
            image_ids.append(rows)
            flat_images.extend(rows)
        if flat_images:
            stacked = torch.from_numpy(np.stack([screens[j] for j in flat_images]))
            pixels.check(stacked, batch["pixel_values"], batch["image_grid_thw"])
        if len(screens) > first_new:
            patches.append(pixels.to_patches(torch.from_numpy(np.stack(screens[first_new:]))))
        logger.debug("encoded %d prompts (%d new screens)", len(part), len(screens) - first_new)
        if on_chunk is not None:
            on_chunk(start + len(part), len(demos))
    targets = [tok.encode(d.target, add_special_tokens=False) + [int(eos)] for d in demos]
    proc: Any = vlm.processor  # a Qwen2-VL processor: image_token_id is its own, not ProcessorMixin's
    screen_tensor = torch.cat(patches) if patches else torch.zeros((0, 0, 3, 0), dtype=torch.uint8)
    size = (int(screens[0].shape[1]), int(screens[0].shape[0])) if screens else (0, 0)
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos
    return EncodedDemos(
        prompt_ids=prompt_ids,
        image_ids=image_ids,
        screens=screen_tensor,
        screen_size=size,
        target_ids=targets,
        pad_id=int(pad),
        image_token_id=int(proc.image_token_id),
        video_token_id=getattr(proc, "video_token_id", None),
        pixels=pixels,
    )
