"""UI-TARS mobile agent: the published ``MOBILE_USE`` prompt and a tolerant ``Thought/Action`` parser.

Prompt: ``MOBILE_USE`` from bytedance/UI-TARS (``codes/prompts.py`` at commit 932a9e6,
2025-05-06, "<|box_start|>" boxes) or ``MOBILE_USE_DOUBAO`` (``codes/ui_tars/prompt.py``,
``<point>x y</point>`` points), verbatim; with ``darwin_actions=True`` (default) two lines
are added so the agent can use the whole darwin action space: ``wait()`` (worded as in
UI-TARS's ``COMPUTER_USE`` prompt) and ``answer(content='xxx')`` (information-retrieval
tasks, as in AndroidWorld-Generalization).

Conversation (as UI-TARS is trained, ``data/training_example.json`` of the same repository):
the prompt and instruction as the first user turn; each remembered step as an assistant
turn (``Thought: ...\\nAction: ...``), preceded by a user turn with its screenshot when it
is within the image depth; finally a user turn with the current screenshot. A memory with
notes (app knowledge, summaries) appends a ``Notes:`` block to the first user turn.

Coordinates: UI-TARS-1.0 (Qwen2-VL) writes ``[0, 1000)`` relative coordinates;
UI-TARS-1.5 (Qwen2.5-VL) writes absolute pixels on the screenshot after ``smart_resize``
(factor 28, ``min_pixels=100*28*28``, ``max_pixels=16384*28*28``; README_coordinates.md).

    >>> import numpy as np
    >>> from darwin.agents.uitars import UITarsAgent
    >>> from darwin.types import Observation
    >>> obs = Observation(screenshot=np.zeros((2400, 1080, 3), np.uint8), goal="Open Clock",
    ...                   device_size=(1080, 2400))
    >>> agent = UITarsAgent(version="1.5")
    >>> agent.project_action("Thought: The clock icon is on the home screen.\\n"
    ...                      "Action: click(start_box='<|box_start|>(546,1204)<|box_end|>')", obs)
    Click(type='click', x=540, y=1200)
    >>> [m.role for m in agent.build_context(obs, []).messages]
    ['user', 'user']
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import ConfigDict, Field

from darwin.actions import (
    Action,
    Answer,
    Click,
    Drag,
    Finished,
    LongPress,
    OpenApp,
    PressBack,
    PressHome,
    Scroll,
    Type,
    Wait,
)
from darwin.agents.coords import (
    QWEN_MAX_PIXELS,
    UITARS_MIN_PIXELS,
    CoordinateConvention,
    RelativeCoordinates,
    ResizedImageCoordinates,
    visual_tokens,
)
from darwin.agents.parsing import MAX_PARSE_CHARS, Call, find_calls, numbers
from darwin.agents.vlm import (
    Geometry,
    OffScreen,
    ParsedOutput,
    ReaderSettings,
    Reject,
    VLMAgent,
    build_action,
    parse_direction,
    quote,
)
from darwin.memory.base import HistoryItem, Memory, format_notes
from darwin.types import ChatMessage, Observation, ParseError, Prompt, Transition

MOBILE_USE = (
    "You are a GUI agent. You are given a task and your action history, with screenshots. "
    "You need to perform the next action to complete the task. \n"
    "## Output Format\n```\nThought: ...\nAction: ...\n```\n"
    "## Action Space\n\n"
    "click(start_box='<|box_start|>(x1,y1)<|box_end|>')\n"
    "long_press(start_box='<|box_start|>(x1,y1)<|box_end|>')\n"
    "type(content='') #If you want to submit your input, use \"\\n\" at the end of `content`.\n"
    "scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')\n"
    "open_app(app_name='')\n"
    "drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')\n"
    "press_home()\n"
    "press_back()\n"
    "finished(content='xxx') # Use escape characters \\', \\\", and \\n in content part to ensure "
    "we can parse the content in normal python string format.\n"
    "\n\n"
    "## Note\n"
    "- Use {language} in `Thought` part.\n"
    "- Write a small plan and finally summarize your next action (with its target element) "
    "in one sentence in `Thought` part.\n"
    "\n"
    "## User Instruction\n"
    "{instruction}\n"
)
"""UI-TARS ``MOBILE_USE`` (bytedance/UI-TARS ``codes/prompts.py``, commit 932a9e6), verbatim."""

MOBILE_USE_POINT = MOBILE_USE.replace(
    "start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>'",
    "start_point='<point>x1 y1</point>', end_point='<point>x2 y2</point>'",
).replace("start_box='<|box_start|>(x1,y1)<|box_end|>'", "point='<point>x1 y1</point>'")
"""UI-TARS ``MOBILE_USE_DOUBAO`` (``codes/ui_tars/prompt.py``): the same prompt with ``<point>`` points."""

WAIT_LINE = "wait() #Sleep for 5s and take a screenshot to check for any changes.\n"
"""darwin addition, worded as in UI-TARS's ``COMPUTER_USE`` prompt."""

ANSWER_LINE = (
    "answer(content='xxx') # Answer the user's question with the information found on the screen. "
    "Use escape characters as in finished.\n"
)
"""darwin addition for information-retrieval tasks (AndroidWorld-Generalization's ``answer``)."""

_LINE_MARKER = re.compile(r"^[ \t]*(thought|action_summary|reflection|action)[ \t]*:", re.IGNORECASE | re.MULTILINE)
_MARKER = re.compile(r"(?<![A-Za-z0-9_])(thought|action_summary|reflection|action)[ \t]*:", re.IGNORECASE)

_BARE_BOX = re.compile(r"(start_box|end_box)='\(([0-9]{1,6}),\s{0,4}([0-9]{1,6})\)'")

_SUPPORTED = frozenset(
    {
        "click",
        "left_single",
        "long_press",
        "type",
        "scroll",
        "drag",
        "open_app",
        "press_home",
        "press_back",
        "wait",
        "finished",
        "answer",
        "hotkey",
        "press",
    }
)
_UNSUPPORTED = frozenset({"left_double", "right_single", "hover", "call_user", "select", "mouse_down", "mouse_up"})
_NAMES = _SUPPORTED | _UNSUPPORTED


class UITarsConfig(ReaderSettings):
    """Settings of :class:`UITarsAgent` (validated when built). With a reader (off by default,
    and in the paper preset) the marks are listed as ``[k] text`` lines beside the screenshot
    (``list_marks``) and may be drawn on it (``draw_marks``); actions keep their coordinates."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal["1.0", "1.5"] = Field(
        "1.5", description="1.0: [0,1000) relative coordinates; 1.5: absolute on the smart-resized screenshot"
    )
    prompt_style: Literal["box", "point"] = Field(
        "box",
        description="'box': MOBILE_USE with <|box_start|>(x,y)<|box_end|>; 'point': MOBILE_USE_DOUBAO with <point>x y</point>",
    )
    language: str = Field("English", min_length=1, description="language of the Thought part")
    darwin_actions: bool = Field(True, description="add wait() and answer(content=...) to the action space")
    coordinates: CoordinateConvention | None = Field(
        None, description="override the version's coordinate convention (e.g. other min/max pixels)"
    )
    off_screen: OffScreen = Field("clamp", description="off-screen coordinates: clamp to the edge or ParseError")

    @property
    def convention(self) -> CoordinateConvention:
        """The coordinate convention in use (explicit, or the version's)."""
        if self.coordinates is not None:
            return self.coordinates
        if self.version == "1.0":
            return RelativeCoordinates(scale=1000)
        return ResizedImageCoordinates(min_pixels=UITARS_MIN_PIXELS, max_pixels=QWEN_MAX_PIXELS)


class UITarsAgent(VLMAgent):
    """UI-TARS-1.0 / 1.5 on phones: ``MOBILE_USE`` prompt, ``Thought/Action`` output.

    ``UITarsAgent(config, memory)`` or ``UITarsAgent(version="1.0", ...)`` with config
    fields as keywords. History goes through ``memory`` (default: a
    :class:`~darwin.memory.sliding_window.SlidingWindowMemory`); a past step reads ``Thought: ...\\nAction:
    ...`` when the memory uses summaries, ``Action: ...`` otherwise.
    """

    def __init__(self, config: UITarsConfig | None = None, memory: Memory | None = None, **overrides: object) -> None:
        if config is not None and overrides:
            raise TypeError("pass either a UITarsConfig or keyword overrides, not both")
        config = config if config is not None else UITarsConfig.model_validate(overrides)
        super().__init__(memory, config.build_reader())
        self.config = config
        self.convention = self.config.convention

    # ---------------------------------------------------------------- prompt (psi)
    def system_text(self, goal: str) -> str:
        """The first user turn: the mobile prompt with the language and the instruction."""
        template = MOBILE_USE if self.config.prompt_style == "box" else MOBILE_USE_POINT
        if self.config.darwin_actions:
            template = template.replace("press_back()\n", "press_back()\n" + WAIT_LINE, 1)
            end = template.index("\n", template.index("finished(content=")) + 1
            template = template[:end] + ANSWER_LINE + template[end:]
        return template.replace("{language}", self.config.language).replace("{instruction}", goal)

    def image_tokens(self, observation: Observation) -> int:
        conv = self.convention
        h, w = observation.screenshot.shape[:2]
        if isinstance(conv, ResizedImageCoordinates):
            return visual_tokens(h, w, conv.factor, conv.min_pixels, conv.max_pixels)
        return visual_tokens(h, w)

    def build_context(self, observation: Observation, history: Sequence[Transition]) -> Prompt:
        intro = self.system_text(observation.goal)
        image_tokens = self.image_tokens(observation)
        lines = self.config.screen_lines(observation)  # the marks, beside the screenshot
        reserved = self.memory.count_tokens(intro) + self.memory.count_tokens(lines) + image_tokens + 16
        window = self.memory.window(history, self.render, reserved_tokens=reserved, image_tokens=image_tokens)
        if window.notes:  # after the instruction; their tokens are in the memory's budget
            intro += "\n" + format_notes(window.notes) + "\n"
        messages = [ChatMessage(role="user", text=intro)]
        for entry in window.entries:
            if entry.image is not None:
                messages.append(ChatMessage(role="user", text="", images=(entry.image,)))
            messages.append(ChatMessage(role="assistant", text=entry.text))
        screen = ChatMessage(role="user", text=lines, images=(self.config.screen_image(observation),))
        messages.append(screen)
        return Prompt(messages=tuple(messages))

    def history_item(self, parsed: ParsedOutput) -> HistoryItem:
        call = parsed.action_text
        if self.config.prompt_style == "box":  # as UI-TARS's add_box_token() restores stripped box tokens
            call = _BARE_BOX.sub(r"\1='<|box_start|>(\2,\3)<|box_end|>'", call)
        action = f"Action: {call}"
        summary = f"Thought: {parsed.thought}\n{action}" if parsed.thought else None
        return HistoryItem(action=action, summary=summary)

    # ---------------------------------------------------------------- parser (xi)
    def parse(self, text: str, observation: Observation) -> ParsedOutput:
        warnings: list[str] = []
        if len(text) > MAX_PARSE_CHARS:
            warnings.append(f"response of {len(text)} characters; only the first {MAX_PARSE_CHARS} were read")
            text = text[:MAX_PARSE_CHARS]
        thought, section, marked = _split_sections(text)
        if not marked:
            warnings.append("no 'Action:' marker; searched the whole response")
        calls = find_calls(section, _NAMES)
        if not calls:
            return ParsedOutput(
                error=ParseError(reason="no UI-TARS action found (expected e.g. click(start_box='(x,y)'))", text=text),
                thought=thought,
                warnings=tuple(warnings),
            )
        geo = Geometry(self.convention, observation, self.config.off_screen)
        # After an 'Action:' marker the first call is the action; without one, prose may
        # mention a call-like phrase, so the first call that converts is taken.
        candidates = calls if not marked else calls[:1]
        first_reason = ""
        for call in candidates:
            try:
                action = _convert(call, geo)
            except Reject as e:
                first_reason = first_reason or f"{call.name}(): {e.reason}"
                continue
            if not call.terminated:
                warnings.append(f"{call.name}( is not closed; read to the end of the response")
            if len(calls) > 1:
                warnings.append(f"{len(calls)} actions in one response; using the first")
            return ParsedOutput(
                action=action,
                thought=thought,
                summary=thought or None,
                action_text=call.text.strip(),
                num_actions=len(calls),
                warnings=tuple(warnings + geo.warnings),
            )
        return ParsedOutput(
            error=ParseError(reason=first_reason, text=text),
            thought=thought,
            num_actions=len(calls),
            warnings=tuple(warnings + geo.warnings),
        )

    # ---------------------------------------------------------------- inverse
    def format_action(self, action: Action, observation: Observation) -> str:
        geo = Geometry(self.convention, observation, "clamp")
        point_style = self.config.prompt_style == "point"

        def pt(x: int, y: int) -> str:
            mx, my = geo.model_point(x, y)
            return f"'<point>{mx} {my}</point>'" if point_style else f"'<|box_start|>({mx},{my})<|box_end|>'"

        start = "point" if point_style else "start_box"
        if isinstance(action, Click):
            return f"click({start}={pt(action.x, action.y)})"
        if isinstance(action, LongPress):
            return f"long_press({start}={pt(action.x, action.y)})"
        if isinstance(action, Type):
            return f"type(content={quote(action.content)})"
        if isinstance(action, Scroll):
            return f"scroll({start}={pt(action.x, action.y)}, direction='{action.direction.value}')"
        if isinstance(action, Drag):
            if point_style:
                return f"drag(start_point={pt(action.x1, action.y1)}, end_point={pt(action.x2, action.y2)})"
            return f"drag(start_box={pt(action.x1, action.y1)}, end_box={pt(action.x2, action.y2)})"
        if isinstance(action, OpenApp):
            return f"open_app(app_name={quote(action.app)})"
        if isinstance(action, PressHome):
            return "press_home()"
        if isinstance(action, PressBack):
            return "press_back()"
        if isinstance(action, Wait):
            return "wait()"
        if isinstance(action, Finished):
            return f"finished(content={quote(action.content)})"
        if isinstance(action, Answer):
            return f"answer(content={quote(action.content)})"
        raise TypeError(f"unknown action {action!r}")

    def format_response(self, action: Action, observation: Observation, thought: str = "") -> str:
        """A whole response (``Thought: ...\\nAction: ...``), e.g. an SFT target."""
        body = f"Action: {self.format_action(action, observation)}"
        return f"Thought: {thought}\n{body}" if thought else body


def _split_sections(text: str) -> tuple[str, str, bool]:
    """``(thought, action section, has Action: marker)``; markers at a line start win over
    markers inside prose ("... my next action: ...")."""
    found = _split_with(_LINE_MARKER, text)
    return found if found[2] else _split_with(_MARKER, text)


def _split_with(pattern: re.Pattern[str], text: str) -> tuple[str, str, bool]:
    thought_start = -1
    for m in pattern.finditer(text):
        kind = m.group(1).lower()
        if kind == "action":
            thought = text[thought_start : m.start()].strip() if thought_start >= 0 else ""
            return thought, text[m.end() :], True
        if thought_start < 0 and kind in ("thought", "action_summary"):
            thought_start = m.end()
    thought = text[thought_start:].strip() if thought_start >= 0 else ""
    return thought, text, False


def _coords(call: Call, *keys: str, positional: bool = True) -> list[float] | None:
    """Numbers of a box/point argument (``'(x,y)'``, ``'<point>x y</point>'``, ``'[x1,y1,x2,y2]'``)."""
    value = call.kwarg(*keys)
    if value is None:
        if not positional or not call.args:
            return None
        value = ",".join(a for a in call.args if not a.strip().isalpha())
    found = numbers(value, limit=5)
    if not found:
        raise Reject(f"no coordinates in {value[:80]!r}")
    return found


def _text_arg(call: Call, *keys: str) -> str | None:
    value = call.kwarg(*keys)
    if value is None and call.args:
        value = call.args[0]
    return value


_KEYS = {"enter": "enter", "return": "enter", "back": "back", "home": "home"}


def _convert(call: Call, geo: Geometry) -> Action:
    name = call.name
    if name in _UNSUPPORTED:
        raise Reject(f"{name}() is not in the mobile action space")
    if name in ("click", "left_single", "long_press"):
        values = _coords(call, "start_box", "point", "start_point", "box")
        if values is None:
            raise Reject("missing start_box")
        x, y = geo.point(values, name)
        return build_action(Click if name != "long_press" else LongPress, x=x, y=y)
    if name == "type":
        return build_action(Type, content=_text_arg(call, "content", "text") or "")
    if name == "scroll":
        direction = call.kwarg("direction")
        if direction is None:
            direction = next((a for a in call.args if a.strip().isalpha()), None)
        values = _coords(call, "start_box", "point", "start_point", "box")
        if direction is None:
            end = _coords(call, "end_box", "end_point", positional=False)
            if values is not None and end is not None:  # the 1.0 README's scroll(start_box, end_box)
                (x1, y1), (x2, y2) = geo.point(values, "start_box"), geo.point(end, "end_box")
                return build_action(Drag, x1=x1, y1=y1, x2=x2, y2=y2)
            raise Reject("scroll needs direction='up|down|left|right'")
        d = parse_direction(direction)
        x, y = geo.point(values, "start_box") if values is not None else geo.center()
        return build_action(Scroll, x=x, y=y, direction=d)
    if name == "drag":
        start = _coords(call, "start_box", "start_point", positional=False)
        end = _coords(call, "end_box", "end_point", positional=False)
        if start is None and end is None and call.args:
            both = numbers(",".join(call.args), limit=5)
            if len(both) == 4:
                start, end = both[:2], both[2:]
        if start is None or end is None:
            raise Reject("drag needs start_box and end_box")
        (x1, y1), (x2, y2) = geo.point(start, "start_box"), geo.point(end, "end_box")
        return build_action(Drag, x1=x1, y1=y1, x2=x2, y2=y2)
    if name == "open_app":
        app = _text_arg(call, "app_name", "app", "name")
        return build_action(OpenApp, app=(app or "").strip())
    if name == "press_home":
        return PressHome()
    if name == "press_back":
        return PressBack()
    if name == "wait":
        return Wait()
    if name == "finished":
        return build_action(Finished, content=_text_arg(call, "content") or "")
    if name == "answer":
        return build_action(Answer, content=_text_arg(call, "content", "text", "answer") or "")
    # hotkey / press: only keys with a phone equivalent
    key = (_text_arg(call, "key", "hotkey", "keys") or "").strip().lower()
    mapped = _KEYS.get(key)
    if mapped == "enter":
        return Type(content="\n")
    if mapped == "back":
        return PressBack()
    if mapped == "home":
        return PressHome()
    raise Reject(f"{name}(key={key[:40]!r}) has no phone equivalent (only enter, back, home)")


__all__ = ["ANSWER_LINE", "MOBILE_USE", "MOBILE_USE_POINT", "WAIT_LINE", "UITarsAgent", "UITarsConfig"]
