"""Shared machinery of prompt-and-parse VLM agents (UI-TARS, Qwen-VL, the tiny format).

A :class:`VLMAgent` is an :class:`~darwin.agents.base.Agent` whose action projection goes
through :meth:`VLMAgent.parse`, which returns a :class:`ParsedOutput`: the action or a
:class:`~darwin.types.ParseError`, plus what callers may want to know about the text (the
model's thought, its natural-language summary, how many actions it wrote, warnings such
as a clamped coordinate). :meth:`~VLMAgent.project_action` returns only the action or the
error, as the :class:`Agent` contract says, and logs a warning when the model wrote
several actions; callers that need the flags call :meth:`~VLMAgent.parse` directly.

    >>> import numpy as np
    >>> from darwin.agents.tiny import TinyAgent
    >>> from darwin.types import Observation
    >>> obs = Observation(screenshot=np.zeros((560, 252, 3), np.uint8), goal="Open Clock",
    ...                   device_size=(1080, 2400))
    >>> parsed = TinyAgent().parse("click(50,50) click(10,10)", obs)
    >>> parsed.action, parsed.multiple_actions
    (Click(type='click', x=545, y=1212), True)
"""

from __future__ import annotations

import logging
import math
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from darwin.actions import Action, Direction
from darwin.agents.base import Agent
from darwin.agents.coords import CoordinateConvention, Size
from darwin.agents.pointing import draw_marks, marks_text
from darwin.components import ComponentSpec, build_component, check_component
from darwin.memory.base import HistoryItem, Memory
from darwin.memory.sliding_window import SlidingWindowMemory
from darwin.readers.base import Reader
from darwin.types import Mark, Observation, ParseError, Task, Trajectory, Transition

logger = logging.getLogger(__name__)

OffScreen = Literal["clamp", "error"]
"""What to do with a coordinate outside the screen: move it to the nearest edge pixel
(and warn) or reject the output with a :class:`~darwin.types.ParseError`."""

HISTORY_TEXT_LIMIT = 400
"""Characters of an unparseable past response shown in the history."""


@dataclass(frozen=True)
class ParsedOutput:
    """Everything a VLM agent read from one response.

    Exactly one of ``action`` and ``error`` is set; :attr:`result` is what
    :meth:`VLMAgent.project_action` returns.
    """

    action: Action | None = None
    error: ParseError | None = None
    thought: str = ""
    """The model's reasoning (UI-TARS/Qwen3-VL ``Thought:``), empty if none."""
    summary: str | None = None
    """The model's natural-language action summary, if its format has one."""
    action_text: str = ""
    """The chosen action exactly as the model wrote it (one call or one tool-call JSON)."""
    num_actions: int = 0
    """How many actions the response contained (only the first is used)."""
    warnings: tuple[str, ...] = ()
    """Things the parser repaired or ignored: extra actions, clamped coordinates, missing markers."""

    def __post_init__(self) -> None:
        if (self.action is None) == (self.error is None):
            raise ValueError("a ParsedOutput holds exactly one of action or error")

    @property
    def multiple_actions(self) -> bool:
        """True when the model wrote more than one action (the first was taken)."""
        return self.num_actions > 1

    @property
    def result(self) -> Action | ParseError:
        return self.action if self.action is not None else self.error  # type: ignore[return-value]  # __post_init__: exactly one is set


class Reject(Exception):
    """Raised inside a parser to turn the current output into a ParseError with ``reason``
    (control flow within :meth:`VLMAgent.parse`; never escapes it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Geometry:
    """Maps model coordinates of one observation to device pixels, applying the off-screen policy."""

    def __init__(self, convention: CoordinateConvention, observation: Observation, off_screen: OffScreen) -> None:
        self.convention = convention
        shot = observation.screenshot
        self.image_size: Size = (int(shot.shape[1]), int(shot.shape[0]))
        self.device_size: Size = (int(observation.device_size[0]), int(observation.device_size[1]))
        self.off_screen = off_screen
        self.warnings: list[str] = []

    def point(self, values: Sequence[float], what: str = "point") -> tuple[int, int]:
        """Device pixel of a model point ``(x, y)`` or box ``(x1, y1, x2, y2)`` (its centre)."""
        if len(values) == 2:
            x, y = values
        elif len(values) == 4:
            x, y = (values[0] + values[2]) / 2, (values[1] + values[3]) / 2
        else:
            raise Reject(f"{what}: expected 2 numbers (x, y) or 4 (x1, y1, x2, y2), got {len(values)}")
        dw, dh = self.device_size
        if dw <= 0 or dh <= 0:
            raise Reject(f"device size {self.device_size} is empty")
        try:
            fx, fy = self.convention.to_device((x, y), self.image_size, self.device_size)
        except (ValueError, ZeroDivisionError, OverflowError) as e:
            raise Reject(f"{what}: cannot map ({x:g}, {y:g}) to the screen: {e}") from None
        if not (math.isfinite(fx) and math.isfinite(fy)):
            raise Reject(f"{what}: coordinates ({x:g}, {y:g}) are not finite")
        px = math.floor(min(max(fx, -1.0), dw) + 0.5)
        py = math.floor(min(max(fy, -1.0), dh) + 0.5)
        if 0 <= px < dw and 0 <= py < dh:
            return px, py
        where = f"{what} ({x:g}, {y:g}) lies outside the {dw}x{dh} screen"
        if self.off_screen == "error":
            raise Reject(where)
        cx, cy = min(max(px, 0), dw - 1), min(max(py, 0), dh - 1)
        self.warnings.append(f"{where}; clamped to ({cx}, {cy})")
        return cx, cy

    def center(self) -> tuple[int, int]:
        return self.device_size[0] // 2, self.device_size[1] // 2

    def model_point(self, x: int, y: int) -> tuple[int, int]:
        """Device pixel -> integer model coordinates (for formatting actions)."""
        return self.convention.to_model((x, y), self.image_size, self.device_size)


def parse_direction(value: str | None) -> Direction:
    """``'down'``, ``" Down "`` -> :class:`Direction`; anything else is rejected."""
    v = (value or "").strip().strip("'\"").strip().lower()
    try:
        return Direction(v)
    except ValueError:
        raise Reject(f"direction {value!r} is not one of up, down, left, right") from None


def quote(text: str, q: str = "'") -> str:
    r"""A Python-style string literal that :func:`darwin.agents.parsing.unquote` reads back exactly."""
    body = (
        text.replace("\\", "\\\\").replace(q, "\\" + q).replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    )
    return f"{q}{body}{q}"


def scroll_as_swipe(direction: Direction, x: int, y: int, device_size: Size) -> tuple[int, int]:
    """End point of a finger swipe from ``(x, y)`` that scrolls content in ``direction``
    (a quarter screen; "down" reveals lower content, so the finger moves up)."""
    dw, dh = device_size
    dx, dy = {
        Direction.DOWN: (0, -dh // 4),
        Direction.UP: (0, dh // 4),
        Direction.RIGHT: (-dw // 4, 0),
        Direction.LEFT: (dw // 4, 0),
    }[direction]
    return min(max(x + dx, 0), dw - 1), min(max(y + dy, 0), dh - 1)


def truncate(text: str, limit: int = HISTORY_TEXT_LIMIT) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ReaderSettings(BaseModel):
    """How an agent format reads the screen beyond its pixels (:mod:`darwin.readers`); every
    format's config has these fields, all off by default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reader: ComponentSpec = Field(
        ComponentSpec(name="none"),
        description="what reads each screen into marks (darwin.readers): none (pixels only), ocr (RapidOCR on the "
        "screenshot), elements (the accessibility tree), or the import path of a Reader class",
    )
    list_marks: bool = Field(True, description="with a reader: list the marks in the prompt as '[k] text' lines")
    draw_marks: bool = Field(False, description="with a reader: outline the marks and their numbers on the screenshot")

    @field_validator("reader")
    @classmethod
    def _check_reader(cls, spec: ComponentSpec) -> ComponentSpec:
        check_component("reader", spec)  # an unknown name fails here, with the close match
        return spec

    def build_reader(self) -> Reader | None:
        """The reader these settings name; None for ``none``."""
        reader = build_component("reader", self.reader)
        assert isinstance(reader, Reader)  # checked by build_component
        return reader if reader.reads else None

    def screen_lines(self, observation: Observation) -> str:
        """``Screen:`` and the observation's marks as ``[k] text`` lines; empty without marks,
        without a reader (marks another reader left on an observation are not this agent's) or
        with ``list_marks`` off."""
        if not observation.marks or not self.list_marks or self.reader.name == "none":
            return ""
        return "Screen:\n" + marks_text(observation.marks)

    def screen_image(self, observation: Observation) -> np.ndarray:
        """The screenshot the model sees: with the marks drawn where ``draw_marks`` is on."""
        if observation.marks and self.draw_marks and self.reader.name != "none":
            return draw_marks(observation.screenshot, observation.marks, observation.device_size)
        return observation.screenshot


class VLMAgent(Agent):
    """Base of prompt-and-parse agents: memory, :meth:`parse`, :meth:`format_action`, history rendering.

    Subclasses implement :meth:`build_context` (with ``self.memory.window(history,
    self.render, ...)``), :meth:`parse` (never raising) and :meth:`format_action` (the
    inverse of :meth:`parse`, used for scripted steps in the history and for SFT targets).
    """

    def __init__(self, memory: Memory | None = None, reader: Reader | None = None) -> None:
        self.memory: Memory = memory if memory is not None else SlidingWindowMemory()
        self.reader = reader
        # Past responses parsed once per episode: render() is called for every past step at
        # every step, which would otherwise re-parse the whole history each time (quadratic).
        self._parsed: dict[tuple[str, tuple[int, ...], tuple[int, int], str, tuple[Mark, ...]], ParsedOutput] = {}

    def start_episode(self, task: Task | None = None) -> None:
        self._parsed.clear()
        self.memory.start_episode(task)

    def parse_cached(self, text: str, observation: Observation) -> ParsedOutput:
        """:meth:`parse`, remembered for the episode (the result depends only on the text, the
        screenshot's size, the device's size and, for pointing actions, the goal and the marks)."""
        key = (text, observation.screenshot.shape, observation.device_size, observation.goal, observation.marks)
        parsed = self._parsed.get(key)
        if parsed is None:
            if len(self._parsed) >= 4096:  # an agent used without start_episode: stay bounded
                self._parsed.clear()
            parsed = self._parsed[key] = self.parse(text, observation)
        return parsed

    async def observe(self, history: Sequence[Transition]) -> None:
        await self.memory.observe(history)

    async def end_episode(self, trajectory: Trajectory) -> None:
        await self.memory.end_episode(trajectory)

    @abstractmethod
    def parse(self, text: str, observation: Observation) -> ParsedOutput:
        """Read one response; never raises."""

    @abstractmethod
    def format_action(self, action: Action, observation: Observation) -> str:
        """The text this agent's model would write for ``action`` (coordinates in its convention)."""

    def project_action(self, text: str, observation: Observation) -> Action | ParseError:
        parsed = self.parse_cached(text, observation)  # the next steps' history reads it back
        if parsed.multiple_actions:
            logger.warning(
                "%s: model wrote %d actions, using the first: %s",
                type(self).__name__,
                parsed.num_actions,
                truncate(parsed.action_text, 120),
            )
        return parsed.result

    def history_item(self, parsed: ParsedOutput) -> HistoryItem:
        """How a parsed past response reads in the history (override for format-specific text)."""
        return HistoryItem(action=parsed.action_text, summary=parsed.summary)

    def invalid_history_text(self, text: str) -> str:
        """How an unparseable past response reads in the history (default: the text, truncated)."""
        return truncate(text)

    def render(self, transition: Transition) -> HistoryItem:
        """One past step in this agent's history format: the model's own words when it wrote
        the step, :meth:`format_action` for scripted steps."""
        decision = transition.decision
        generation = decision.generation
        if generation is not None and generation.text.strip():
            parsed = self.parse_cached(generation.text, transition.observation)
            if parsed.action is not None:
                return self.history_item(parsed)
            return HistoryItem(action=self.invalid_history_text(generation.text))
        if decision.action is not None:
            # Read our own formatting back so scripted steps look exactly like model-written ones.
            text = self.format_action(decision.action, transition.observation)
            parsed = self.parse_cached(text, transition.observation)
            return self.history_item(parsed) if parsed.action is not None else HistoryItem(action=text)
        reason = decision.parse_error.reason if decision.parse_error is not None else "no action"
        return HistoryItem(action=f"(invalid output: {truncate(reason, 120)})")


def build_action(make: Callable[..., Action], **fields: object) -> Action:
    """Construct an action, turning pydantic's validation errors into a :class:`Reject`."""
    try:
        return make(**fields)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors())
        raise Reject(f"invalid {getattr(make, '__name__', 'action')}: {problems}") from None


__all__ = [
    "Geometry",
    "OffScreen",
    "ParsedOutput",
    "ReaderSettings",
    "Reject",
    "VLMAgent",
    "build_action",
    "parse_direction",
    "quote",
    "scroll_as_swipe",
    "truncate",
]
