"""Learned verification (self-evolution stage 3): a classifier the agent's own backbone carries.

A :class:`SuccessClassifier` is a Qwen2-VL-family backbone (by default the warm-start agent's:
the agent learns to verify its own outcomes) with a scalar head on the hidden state of the
prompt's last token. Its prompt is the goal and the current screen, built through the same
chat-template path as the agent's prompts::

    user: <screen> "Goal: <app>: <instruction>\\nIs the goal achieved on this screen?"

``darwin verifier train`` (:mod:`darwin.verifier_train`) fits it on labelled screens
(:mod:`darwin.verifier_data`) and picks the decision threshold on validation data; a
:class:`LearnedVerifier` loads the result and serves as any experiment's reward::

    verifier=ComponentSpec(name="learned", kwargs={"path": "runs/verifier"})

It is *cheap* (one forward pass of a tiny model), so by default the step loop checks it after
every step like a rule, ending the phase at the first screen it accepts (``every_step=False``:
only when the phase ends); it reads the screen at the size it was trained on
(:attr:`LearnedVerifier.screen_size`).

    >>> from darwin.models import TinyVLMConfig, build_tiny_vlm
    >>> vlm = build_tiny_vlm(TinyVLMConfig(screen_width=56, screen_height=112), seed=0)
    >>> model = SuccessClassifier(vlm)
    >>> import numpy as np
    >>> batch = model.inputs(["Settings: Turn on dark theme."], [np.zeros((112, 56, 3), np.uint8)])
    >>> model(batch).shape
    torch.Size([1])
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import nn

from darwin.learner.models import backbone_of, hidden_size_of
from darwin.models.factory import VLM, load_tiny_vlm
from darwin.models.scoring import prompt_to_messages, rope_index
from darwin.tasks import goal_text
from darwin.types import ChatMessage, Prompt
from darwin.verifiers.base import Verdict, VerificationRequest, Verifier

__all__ = ["HEAD_FILE", "VERIFIER_FILE", "LearnedVerifier", "SuccessClassifier", "load_classifier", "verifier_prompt"]

VERIFIER_FILE = "darwin_verifier.json"
HEAD_FILE = "verifier_head.pt"
FORMAT_VERSION = 1
QUESTION = "Is the goal achieved on this screen?"


def verifier_prompt(goal: str, screen: np.ndarray) -> Prompt:
    """The classifier's prompt for one ``(goal, screen)`` pair."""
    return Prompt(messages=(ChatMessage(role="user", text=f"Goal: {goal}\n{QUESTION}", images=(screen,)),))


class SuccessClassifier(nn.Module):
    """A VLM backbone and a scalar head: ``forward(inputs) -> (B,)`` logits of "goal achieved".

    The head reads the prompt's last hidden state (which has attended to goal and screen)
    together with the mean and the maximum of the screen tokens' hidden states (a small
    switch or counter that decides success is one token among ~80: an average alone washes
    it out). It starts at weight 0 and bias 0 (every first probability is 0.5), drawn from
    no RNG.
    """

    def __init__(self, vlm: VLM) -> None:
        super().__init__()
        self.vlm = vlm
        self.model = vlm.model
        self.backbone = backbone_of(vlm.model)
        param = next(self.backbone.parameters())
        self.head = torch.nn.utils.skip_init(nn.Linear, 3 * hidden_size_of(vlm.model), 1, device=param.device, dtype=torch.float32)
        with torch.no_grad():
            self.head.weight.zero_()
            self.head.bias.zero_()

    def inputs(self, goals: Sequence[str], screens: Sequence[np.ndarray]) -> Mapping[str, torch.Tensor]:
        """A left-padded model batch for ``(goal, screen)`` pairs."""
        conversations = [prompt_to_messages(verifier_prompt(g, s)) for g, s in zip(goals, screens, strict=True)]
        batch = self.vlm.build_inputs(conversations)
        return {k: v.to(self.head.weight.device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}

    def forward(self, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        positions, _ = rope_index(
            self.model, inputs["input_ids"], inputs["attention_mask"], inputs["mm_token_type_ids"],
            inputs.get("image_grid_thw"),
        )
        out = self.backbone(
            input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"], position_ids=positions,
            pixel_values=inputs.get("pixel_values"), image_grid_thw=inputs.get("image_grid_thw"),
            mm_token_type_ids=inputs["mm_token_type_ids"], use_cache=False,
        )
        hidden = out.last_hidden_state.float()
        last = hidden[:, -1]  # left padding: every prompt ends at the last position
        screen = (inputs["mm_token_type_ids"] == 1).unsqueeze(-1)
        mean = (hidden * screen).sum(1) / screen.sum(1).clamp(min=1)
        peak = hidden.masked_fill(~screen, float("-inf")).amax(1)
        peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))  # a prompt without a screen
        return self.head(torch.cat([last, mean, peak], dim=-1)).squeeze(-1)

    def save(self, path: str | Path, *, threshold: float, screen_size: tuple[int, int], metadata: Mapping[str, object]) -> Path:
        """Write the backbone (a transformers checkpoint), the head and the decision settings."""
        out = Path(path)
        self.vlm.save_pretrained(out)
        torch.save(self.head.state_dict(), out / HEAD_FILE)
        record = {
            "format_version": FORMAT_VERSION, "threshold": threshold, "screen_size": list(screen_size),
            "question": QUESTION, **metadata,
        }
        (out / VERIFIER_FILE).write_text(json.dumps(record, indent=2), encoding="utf-8")
        return out


def load_classifier(path: str | Path) -> tuple[SuccessClassifier, dict[str, object]]:
    """A saved classifier and its record (threshold, screen size, training metadata)."""
    src = Path(path)
    record_file = src / VERIFIER_FILE
    if not record_file.is_file():
        raise FileNotFoundError(f"no learned verifier at {src}; train one with `darwin verifier train --out {src}`")
    record = json.loads(record_file.read_text(encoding="utf-8"))
    if record.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{record_file}: format_version {record.get('format_version')!r}, this darwin reads {FORMAT_VERSION}")
    model = SuccessClassifier(load_tiny_vlm(src))
    model.head.load_state_dict(torch.load(src / HEAD_FILE, map_location="cpu", weights_only=True))
    model.eval()
    return model, record


class LearnedVerifier(Verifier):
    """A trained :class:`SuccessClassifier` as a verifier: success when ``p >= threshold``.

    Args:
        path: the folder ``darwin verifier train`` wrote.
        threshold: overrides the threshold chosen on validation data.
        every_step: checked after every step like a rule (the first screen it accepts ends
            the phase with the reward), or only when the phase ends (the agent said
            ``finished`` or the step budget ran out): one check per phase, so a false
            positive of the verifier is not met ~10 times per episode.
    """

    kind = "learned"

    def __init__(self, path: str, threshold: float | None = None, every_step: bool = True) -> None:
        self.path = path
        self.every_step = every_step
        self.model, self.record = load_classifier(path)
        chosen = float(threshold if threshold is not None else self.record["threshold"])  # type: ignore[arg-type]
        if not 0.0 <= chosen <= 1.0 or math.isnan(chosen):
            raise ValueError(f"threshold must lie in [0, 1], got {chosen}")
        self.threshold = chosen
        w, h = self.record["screen_size"]  # type: ignore[misc]
        self._screen_size = (int(w), int(h))
        self._lock = threading.Lock()  # one forward at a time: phones share the model

    @property
    def cheap(self) -> bool:
        return self.every_step

    @property
    def reads_screen(self) -> bool:
        return True

    @property
    def screen_size(self) -> tuple[int, int]:
        return self._screen_size

    def probability(self, goal: str, screen: np.ndarray) -> float:
        """``p(goal achieved | screen)``; the screen is resized to :attr:`screen_size` if needed."""
        w, h = self._screen_size
        if screen.shape[:2] != (h, w):
            screen = np.asarray(Image.fromarray(screen).resize((w, h), Image.BILINEAR), dtype=np.uint8)
        with self._lock, torch.no_grad():
            logit = self.model(self.model.inputs([goal], [screen]))
        return float(torch.sigmoid(logit)[0])

    async def verify(self, request: VerificationRequest) -> Verdict:
        if request.final_screenshot is None:
            return Verdict(success=None, reason="learned verifier: no screenshot of the final screen was taken")
        goal = goal_text(request.task, request.instruction)
        p = await asyncio.to_thread(self.probability, goal, request.final_screenshot)
        return Verdict(success=p >= self.threshold, reason=f"learned: p={p:.3f} (threshold {self.threshold:.3f})")
