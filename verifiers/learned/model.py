"""Learned verification (self-evolution stage 3): a classifier the agent's own backbone carries.

A :class:`SuccessClassifier` is a Qwen2-VL-family backbone (by default the warm-start agent's:
the agent learns to verify its own outcomes) with a scalar head on the hidden state of the
prompt's last token. Its prompt is the goal and the current screen, built through the same
chat-template path as the agent's prompts::

    user: <screen> "Goal: <app>: <instruction>\\nIs the goal achieved on this screen?"

A model trained with history (``darwin verifier train --history``, the default; its record
says ``"inputs": "screen+previous_marked"``) also reads the screen before the last action
with that action drawn on it (:func:`darwin.verifiers.marks.draw_action`: a tap dot, a swipe
arrow, the typed text), so it sees what the agent just did::

    user: <previous screen, marked> <screen> "Goal: ...\\nThe first image is the screen before
          the last action (marked); the second is the screen now.\\nIs the goal achieved on this screen?"

Screens without a previous one (an episode's first) get the single-screen prompt.

``darwin verifier train`` (:mod:`darwin.verifiers.learned.training`) fits it on labelled screens
(:mod:`darwin.verifiers.learned.data`) and picks the decision threshold on validation data; a
:class:`LearnedVerifier` loads the result and serves as any experiment's reward::

    verifier=ComponentSpec(name="learned", kwargs={"path": "runs/verifier"})

It is *cheap* (one forward pass of a tiny model), so by default the step loop checks it after
every step like a rule, ending the phase at the first screen it accepts (``every_step=False``:
only when the phase ends); it reads the screen at the size it was trained on
(:attr:`LearnedVerifier.screen_size`).

    >>> from darwin.models.config import TinyVLMConfig
    >>> from darwin.models.factory import build_tiny_vlm
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
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import nn

from darwin.actions import Action, is_terminal
from darwin.models.anatomy import backbone_of, hidden_size_of
from darwin.models.factory import VLM, load_tiny_vlm
from darwin.models.scoring import prompt_to_messages, rope_index
from darwin.task_registry import goal_text
from darwin.types import ChatMessage, Prompt, Transition, Verdict
from darwin.verifiers.base import VerificationRequest, Verifier
from darwin.verifiers.marks import draw_action

__all__ = [
    "HEAD_FILE",
    "INPUTS_HISTORY",
    "INPUTS_SCREEN",
    "VERIFIER_FILE",
    "LearnedVerifier",
    "SuccessClassifier",
    "last_move",
    "load_classifier",
    "verifier_prompt",
]

VERIFIER_FILE = "darwin_verifier.json"
HEAD_FILE = "verifier_head.pt"
FORMAT_VERSION = 1
QUESTION = "Is the goal achieved on this screen?"
HISTORY_NOTE = "The first image is the screen before the last action (marked); the second is the screen now."
INPUTS_SCREEN = "screen"
"""A saved record's ``inputs``: the goal and the current screen (records without ``inputs``)."""
INPUTS_HISTORY = "screen+previous_marked"
"""A saved record's ``inputs``: also the screen before the last action, with the action marked."""


def _resized(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``image`` at ``size = (W, H)`` (unchanged when it already is)."""
    w, h = size
    if image.shape[:2] == (h, w):
        return image
    return np.asarray(Image.fromarray(image).resize((w, h), Image.Resampling.BILINEAR), dtype=np.uint8)


def verifier_prompt(
    goal: str,
    screen: np.ndarray,
    previous: np.ndarray | None = None,
    last_action: Action | None = None,
    device_size: tuple[int, int] | None = None,
) -> Prompt:
    """The classifier's prompt for ``(goal, screen)``; with ``previous`` (the screen before the
    last action, resized to ``screen``'s size) two images: ``previous`` with ``last_action``
    drawn on it (its coordinates are pixels of a ``device_size`` phone), then ``screen``.

    >>> from darwin.actions import Click
    >>> screen = np.zeros((112, 56, 3), np.uint8)
    >>> len(verifier_prompt("g", screen).messages[0].images)
    1
    >>> two = verifier_prompt("g", screen, screen, Click(x=540, y=1200), (1080, 2400)).messages[0]
    >>> len(two.images), int(two.images[0].sum()) > 0, two.text.splitlines()[1].startswith("The first image")
    (2, True, True)
    """
    if previous is None:
        return Prompt(messages=(ChatMessage(role="user", text=f"Goal: {goal}\n{QUESTION}", images=(screen,)),))
    previous = _resized(previous, (int(screen.shape[1]), int(screen.shape[0])))
    if last_action is not None:
        if device_size is None:
            raise ValueError("a marked last action needs the device_size its coordinates refer to")
        previous = draw_action(previous, last_action, device_size)
    text = f"Goal: {goal}\n{HISTORY_NOTE}\n{QUESTION}"
    return Prompt(messages=(ChatMessage(role="user", text=text, images=(previous, screen)),))


def last_move(transitions: Sequence[Transition]) -> Transition | None:
    """The last transition whose action acted on the phone (not ``finished``/``answer``, not a
    parse error): its observation is the screen before that action. ``None`` when there is none.

    Once-per-phase checks come after the agent's ``finished``, which changes no screen: the
    move before it is the one that matters (and the one the training data marks).
    """
    for transition in reversed(transitions):
        action = transition.decision.action
        if action is not None and not is_terminal(action):
            return transition
    return None


def _last_image_mask(mm_token_type_ids: torch.Tensor) -> torch.Tensor:
    """``(B, L)`` True on the tokens of each prompt's last image (the current screen).

    An image's placeholder tokens form one run between ``<|vision_start|>`` and
    ``<|vision_end|>``, so the runs of image tokens are the images, in order.

    >>> _last_image_mask(torch.tensor([[0, 1, 1, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 0, 0, 0]])).long().tolist()
    [[0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 0, 0, 0]]
    """
    image = mm_token_type_ids == 1
    starts = image & ~torch.nn.functional.pad(image, (1, 0))[:, :-1]
    run = torch.cumsum(starts.long(), dim=1)
    return image & (run == run.amax(dim=1, keepdim=True))


class SuccessClassifier(nn.Module):
    """A VLM backbone and a scalar head: ``forward(inputs) -> (B,)`` logits of "goal achieved".

    The head reads the prompt's last hidden state (which has attended to the goal and every
    image) together with the mean and the maximum of the current screen's tokens' hidden
    states (a small switch or counter that decides success is one token among ~80: an average
    alone washes it out; the previous screen's tokens are left out of both, so they keep their
    meaning with or without history). It starts at weight 0 and bias 0 (every first
    probability is 0.5), drawn from no RNG.

    ``history``: the model reads the previous screen with the last action marked (what
    :meth:`save` records as ``inputs``); callers pass it when this is True.
    """

    def __init__(self, vlm: VLM, history: bool = False) -> None:
        super().__init__()
        self.vlm = vlm
        self.history = history
        self.model = vlm.model
        self.backbone = backbone_of(vlm.model)
        param = next(self.backbone.parameters())
        self.head = torch.nn.utils.skip_init(
            nn.Linear, 3 * hidden_size_of(vlm.model), 1, device=param.device, dtype=torch.float32
        )
        with torch.no_grad():
            self.head.weight.zero_()
            self.head.bias.zero_()

    def inputs(
        self,
        goals: Sequence[str],
        screens: Sequence[np.ndarray],
        previous: Sequence[np.ndarray | None] | None = None,
        actions: Sequence[Action | None] | None = None,
        device_sizes: Sequence[tuple[int, int] | None] | None = None,
    ) -> Mapping[str, torch.Tensor]:
        """A left-padded model batch for ``(goal, screen)`` pairs; with ``previous`` (``None``
        entries: no previous screen), the history prompts of :func:`verifier_prompt`."""
        n = len(goals)
        prev = list(previous) if previous is not None else [None] * n
        acts = list(actions) if actions is not None else [None] * n
        sizes = list(device_sizes) if device_sizes is not None else [None] * n
        if not len(screens) == len(prev) == len(acts) == len(sizes) == n:
            raise ValueError("goals, screens, previous, actions and device_sizes must have the same length")
        conversations = [
            prompt_to_messages(verifier_prompt(g, s, p, a, d))
            for g, s, p, a, d in zip(goals, screens, prev, acts, sizes, strict=True)
        ]
        batch = self.vlm.build_inputs(conversations)
        return {k: v.to(self.head.weight.device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}

    def forward(self, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        positions, _ = rope_index(
            self.model,
            inputs["input_ids"],
            inputs["attention_mask"],
            inputs["mm_token_type_ids"],
            inputs.get("image_grid_thw"),
        )
        out = self.backbone(
            input_ids=inputs["input_ids"],
            attention_mask=inputs["attention_mask"],
            position_ids=positions,
            pixel_values=inputs.get("pixel_values"),
            image_grid_thw=inputs.get("image_grid_thw"),
            mm_token_type_ids=inputs["mm_token_type_ids"],
            use_cache=False,
        )
        hidden = out.last_hidden_state.float()
        last = hidden[:, -1]  # left padding: every prompt ends at the last position
        screen = _last_image_mask(inputs["mm_token_type_ids"]).unsqueeze(-1)
        mean = (hidden * screen).sum(1) / screen.sum(1).clamp(min=1)
        peak = hidden.masked_fill(~screen, float("-inf")).amax(1)
        peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))  # a prompt without a screen
        return self.head(torch.cat([last, mean, peak], dim=-1)).squeeze(-1)

    def save(
        self, path: str | Path, *, threshold: float, screen_size: tuple[int, int], metadata: Mapping[str, object]
    ) -> Path:
        """Write the backbone (a transformers checkpoint), the head and the decision settings
        (``inputs``: :data:`INPUTS_HISTORY` or :data:`INPUTS_SCREEN`, as :attr:`history` says)."""
        out = Path(path)
        self.vlm.save_pretrained(out)
        torch.save(self.head.state_dict(), out / HEAD_FILE)
        record = {
            "format_version": FORMAT_VERSION,
            "threshold": threshold,
            "screen_size": list(screen_size),
            "question": QUESTION,
            "inputs": INPUTS_HISTORY if self.history else INPUTS_SCREEN,
            **metadata,
        }
        (out / VERIFIER_FILE).write_text(json.dumps(record, indent=2), encoding="utf-8")
        return out


def load_classifier(path: str | Path) -> tuple[SuccessClassifier, dict[str, Any]]:
    """A saved classifier and its record (threshold, screen size, inputs, training metadata);
    a record without ``inputs`` (written before history existed) reads the screen only."""
    src = Path(path)
    record = read_classifier_record(src)
    model = SuccessClassifier(load_tiny_vlm(src), history=record.get("inputs", INPUTS_SCREEN) == INPUTS_HISTORY)
    model.head.load_state_dict(torch.load(src / HEAD_FILE, map_location="cpu", weights_only=True))
    model.eval()
    return model, record


def read_classifier_record(path: str | Path) -> dict[str, Any]:
    """The record ``darwin verifier train`` wrote at ``path``, checked (format version, inputs),
    without loading the model."""
    src = Path(path)
    record_file = src / VERIFIER_FILE
    if not record_file.is_file():
        raise FileNotFoundError(f"no learned verifier at {src}; train one with `darwin verifier train --out {src}`")
    record = json.loads(record_file.read_text(encoding="utf-8"))
    if record.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{record_file}: format_version {record.get('format_version')!r}, this darwin reads {FORMAT_VERSION}"
        )
    inputs = record.get("inputs", INPUTS_SCREEN)
    if inputs not in (INPUTS_SCREEN, INPUTS_HISTORY):
        raise ValueError(f"{record_file}: inputs {inputs!r}, this darwin reads {INPUTS_SCREEN!r} or {INPUTS_HISTORY!r}")
    return record


def _checked_threshold(threshold: float | None, record: dict[str, Any]) -> float:
    chosen = float(threshold if threshold is not None else record["threshold"])
    if not 0.0 <= chosen <= 1.0 or math.isnan(chosen):
        raise ValueError(f"threshold must lie in [0, 1], got {chosen}")
    return chosen


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
        self.threshold = _checked_threshold(threshold, self.record)
        w, h = self.record["screen_size"]
        self._screen_size = (int(w), int(h))
        self._lock = threading.Lock()  # one forward at a time: phones share the model

    @classmethod
    def check_arguments(cls, path: str, threshold: float | None = None, every_step: bool = True) -> None:
        """The checkpoint's record and the threshold, with no model loaded (``--dry-run``)."""
        try:
            record = read_classifier_record(path)
        except FileNotFoundError as exc:
            raise ValueError(str(exc)) from None
        _checked_threshold(threshold, record)

    @property
    def cheap(self) -> bool:
        return self.every_step

    @property
    def reads_screen(self) -> bool:
        return True

    @property
    def screen_size(self) -> tuple[int, int]:
        return self._screen_size

    @property
    def history(self) -> bool:
        """Whether the model reads the previous screen with the last action marked."""
        return self.model.history

    def probability(
        self,
        goal: str,
        screen: np.ndarray,
        previous: np.ndarray | None = None,
        action: Action | None = None,
        device_size: tuple[int, int] | None = None,
    ) -> float:
        """``p(goal achieved | screen)``, given also the screen before the last action and that
        action (coordinates in pixels of a ``device_size`` phone) when the model was trained
        with history (a screen-only model ignores them); screens are resized to
        :attr:`screen_size` if needed."""
        screen = _resized(screen, self._screen_size)
        if not self.history:
            previous = None
        if previous is not None:
            previous = _resized(previous, self._screen_size)
        with self._lock, torch.no_grad():
            logit = self.model(self.model.inputs([goal], [screen], [previous], [action], [device_size]))
        return float(torch.sigmoid(logit)[0])

    async def verify(self, request: VerificationRequest) -> Verdict:
        if request.final_screenshot is None:
            return Verdict(success=None, reason="learned verifier: no screenshot of the final screen was taken")
        goal = goal_text(request.task, request.instruction)
        move = last_move(request.transitions) if self.history else None
        if move is None:
            p = await asyncio.to_thread(self.probability, goal, request.final_screenshot)
        else:
            p = await asyncio.to_thread(
                self.probability,
                goal,
                request.final_screenshot,
                move.observation.screenshot,
                move.decision.action,
                move.observation.device_size,
            )
        return Verdict(success=p >= self.threshold, reason=f"learned: p={p:.3f} (threshold {self.threshold:.3f})")
