"""Qwen2.5-VL and Qwen3-VL mobile agents: the ``mobile_use`` function call in ``<tool_call>`` tags.

Prompts follow the official mobile-agent cookbook (QwenLM/Qwen2.5-VL, now QwenLM/Qwen3-VL,
``cookbooks/mobile_agent.ipynb`` and ``cookbooks/utils/agent_function_call.py``):

* **Qwen2.5-VL** (cookbook at commit f61c3cd): system message "You are a helpful
  assistant." plus Qwen-Agent's ``NousFnCallPrompt`` tool block describing ``mobile_use``
  with "The screen's resolution is {w'}x{h'}" (the smart-resized screenshot); user turn
  ``The user query: {goal}\\nTask progress (You have done the following operation on the
  current device): Step 1: {tool-call JSON}; ...``. Output: ``<tool_call>\\n{"name":
  "mobile_use", "arguments": {"action": "click", "coordinate": [x, y]}}\\n</tool_call>``,
  coordinates absolute on the smart-resized screenshot.
* **Qwen3-VL** (cookbook at commit 9e7b8cc): the tool block with "The screen's resolution
  is 999x999" and a response-format section; user turn ``The user query: {goal}.\\nTask
  progress (...): Step 1: {summary}; ....\\n``. Output: ``Thought: ...\\nAction: "..."\\n
  <tool_call>...</tool_call>``, coordinates relative on a 1000 grid (values 0..999; the
  cookbook rescales by 999, the 0.1% difference is below a pixel on phones).

With ``darwin_actions=True`` (default) the action lists gain what the darwin action space
needs: ``answer`` for Qwen2.5-VL (Qwen3-VL's wording) and ``open`` for Qwen3-VL (Qwen2.5-VL's
wording). The parser accepts the union of both versions' actions either way.

    >>> import numpy as np
    >>> from darwin.agents.qwen import QwenVLAgent
    >>> from darwin.types import Observation
    >>> obs = Observation(screenshot=np.zeros((2400, 1080, 3), np.uint8), goal="Open Clock",
    ...                   device_size=(1080, 2400))
    >>> QwenVLAgent(version="2.5").project_action(
    ...     '<tool_call>\\n{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [935, 406]}}\\n</tool_call>', obs)
    Click(type='click', x=925, y=405)
"""

from __future__ import annotations

import json
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
    QWEN_MIN_PIXELS,
    CoordinateConvention,
    RelativeCoordinates,
    ResizedImageCoordinates,
    visual_tokens,
)
from darwin.agents.parsing import (
    MAX_CALLS,
    MAX_PARSE_CHARS,
    balanced_json_object,
    load_json,
    numbers,
)
from darwin.agents.vlm import (
    Geometry,
    OffScreen,
    ParsedOutput,
    ReaderSettings,
    Reject,
    VLMAgent,
    build_action,
    scroll_as_swipe,
)
from darwin.memory.base import HistoryItem, Memory, format_notes
from darwin.types import ChatMessage, Observation, ParseError, Prompt, Transition

FN_CALL_TEMPLATE = (
    "# Tools\n\n"
    "You may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n{tool_descs}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n'
    "</tool_call>"
)
"""Qwen-Agent's ``FN_CALL_TEMPLATE`` (``qwen_agent/llm/fncall_prompts/nous_fncall_prompt.py``)."""

QWEN3_RESPONSE_FORMAT = (
    "\n\n# Response format\n\n"
    "Response format for every step:\n"
    "1) Thought: one concise sentence explaining the next move (no multi-step reasoning).\n"
    "2) Action: a short imperative describing what to do in the UI.\n"
    '3) A single <tool_call>...</tool_call> block containing only the JSON: {"name": <function-name>, '
    '"arguments": <args-json-object>}.\n\n'
    "Rules:\n"
    "- Output exactly in the order: Thought, Action, <tool_call>.\n"
    "- Be brief: one sentence for Thought, one for Action.\n"
    "- Do not output anything else outside those three parts.\n"
    "- If finishing, use action=terminate in the tool call."
)
"""The Qwen3-VL mobile cookbook's response-format section (appended to the tool block)."""

PROGRESS = "Task progress (You have done the following operation on the current device): "

_DESCRIPTION = (
    "Use a touchscreen to interact with a mobile device, and take screenshots.\n"
    "* This is an interface to a mobile device with touchscreen. You can perform actions like clicking, typing, swiping, etc.\n"
    "* Some applications may take time to start or process actions, so you may need to wait and take "
    "successive screenshots to see the results of your actions.\n"
    "* The screen's resolution is {width}x{height}.\n"
    "* Make sure to click any buttons, links, icons, etc with the cursor tip in the center of the element. "
    "Don't click boxes on their edges unless asked."
)

_ACTION_DOCS = {
    "key": "* `key`: Perform a key event on the mobile device.\n"
    "    - This supports adb's `keyevent` syntax.\n"
    '    - Examples: "volume_up", "volume_down", "power", "camera", "clear".',
    "click": "* `click`: Click the point on the screen with coordinate (x, y).",
    "long_press": "* `long_press`: Press the point on the screen with coordinate (x, y) for specified seconds.",
    "swipe": "* `swipe`: Swipe from the starting point with coordinate (x, y) to the end point with coordinates2 (x2, y2).",
    "type": "* `type`: Input the specified text into the activated input box.",
    "answer": "* `answer`: Output the answer.",
    "system_button": "* `system_button`: Press the system button.",
    "open": "* `open`: Open an app on the device.",
    "wait": "* `wait`: Wait specified seconds for the change to happen.",
    "terminate": "* `terminate`: Terminate the current task and report its completion status.",
}

_QWEN25_ACTIONS = ("key", "click", "long_press", "swipe", "type", "system_button", "open", "wait", "terminate")
_QWEN3_ACTIONS = ("click", "long_press", "swipe", "type", "answer", "system_button", "wait", "terminate")

_TOOL_CALL = re.compile(r"<tool_call>", re.IGNORECASE)
_TOOL_CALL_END = re.compile(r"</tool_call>", re.IGNORECASE)
_LINE = re.compile(r"^[ \t]*(thought|action)[ \t]*:[ \t]*(.*)$", re.IGNORECASE | re.MULTILINE)


def mobile_use_function(version: Literal["2.5", "3"], width: int, height: int, darwin_actions: bool) -> str:
    """The ``mobile_use`` tool description as JSON (``<tools>`` content), as the cookbooks render it."""
    if version == "2.5":
        actions = list(_QWEN25_ACTIONS)
        if darwin_actions:
            actions.insert(actions.index("system_button"), "answer")
        users = [f"`action={a}`" for a in ("key", "type", "open", "answer") if a in actions]
    else:
        actions = list(_QWEN3_ACTIONS)
        if darwin_actions:
            actions.insert(actions.index("wait"), "open")
        users = [f"`action={a}`" for a in ("type", "answer", "open") if a in actions]
    text_users = ", ".join(users[:-1]) + (", and " if len(users) > 2 else " and ") + users[-1]
    parameters = {
        "properties": {
            "action": {
                "description": "The action to perform. The available actions are:\n"
                + "\n".join(_ACTION_DOCS[a] for a in actions),
                "enum": actions,
                "type": "string",
            },
            "coordinate": {
                "description": "(x, y): The x (pixels from the left edge) and y (pixels from the top edge) "
                "coordinates to move the mouse to. Required only by `action=click`, `action=long_press`, "
                "and `action=swipe`.",
                "type": "array",
            },
            "coordinate2": {
                "description": "(x, y): The x (pixels from the left edge) and y (pixels from the top edge) "
                "coordinates to move the mouse to. Required only by `action=swipe`.",
                "type": "array",
            },
            "text": {"description": f"Required only by {text_users}.", "type": "string"},
            "time": {
                "description": "The seconds to wait. Required only by `action=long_press` and `action=wait`.",
                "type": "number",
            },
            "button": {
                "description": "Back means returning to the previous interface, Home means returning to the "
                "desktop, Menu means opening the application background menu, and Enter means pressing the "
                "enter. Required only by `action=system_button`",
                "enum": ["Back", "Home", "Menu", "Enter"],
                "type": "string",
            },
            "status": {
                "description": "The status of the task. Required only by `action=terminate`.",
                "type": "string",
                "enum": ["success", "failure"],
            },
        },
        "required": ["action"],
        "type": "object",
    }
    description = _DESCRIPTION.format(width=width, height=height)
    if version == "2.5":
        function: dict[str, object] = {
            "name_for_human": "mobile_use",
            "name": "mobile_use",
            "description": description,
            "parameters": parameters,
            "args_format": "Format the arguments as a JSON object.",
        }
    else:
        function = {"name": "mobile_use", "description": description, "parameters": parameters}
    return json.dumps({"type": "function", "function": function}, ensure_ascii=False)


class QwenVLConfig(ReaderSettings):
    """Settings of :class:`QwenVLAgent` (validated when built). With a reader (off by default)
    the marks are listed as ``[k] text`` lines after the user turn's text (``list_marks``) and
    may be drawn on the screenshot (``draw_marks``); actions keep their coordinates."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal["2.5", "3"] = Field(
        "2.5", description="2.5: absolute coordinates on the smart-resized screenshot; 3: relative on a 1000 grid"
    )
    darwin_actions: bool = Field(
        True, description="add the darwin actions the version's tool lacks (2.5: answer; 3: open)"
    )
    system_prompt: str = Field(
        "You are a helpful assistant.", description="Qwen2.5-VL only: text before the tool block"
    )
    coordinates: CoordinateConvention | None = Field(
        None, description="override the version's convention (e.g. the processor's min/max pixels)"
    )
    off_screen: OffScreen = Field("clamp", description="off-screen coordinates: clamp to the edge or ParseError")

    @property
    def convention(self) -> CoordinateConvention:
        if self.coordinates is not None:
            return self.coordinates
        if self.version == "3":
            return RelativeCoordinates(scale=1000)
        return ResizedImageCoordinates(min_pixels=QWEN_MIN_PIXELS, max_pixels=QWEN_MAX_PIXELS)


class QwenVLAgent(VLMAgent):
    """Qwen2.5-VL / Qwen3-VL phone agent with the cookbook's ``mobile_use`` tool.

    History is a ``Step i: ...;`` list in the user turn: raw tool-call JSON for Qwen2.5-VL,
    the model's ``Action:`` summaries for Qwen3-VL (raw JSON when a step has none or the
    memory is set not to use summaries). With an image depth above one, past screenshots
    precede the current one in the user turn (oldest first) and a sentence says so. A memory
    with notes adds a ``Notes:`` block between the query and the progress.
    """

    def __init__(self, config: QwenVLConfig | None = None, memory: Memory | None = None, **overrides: object) -> None:
        if config is not None and overrides:
            raise TypeError("pass either a QwenVLConfig or keyword overrides, not both")
        config = config if config is not None else QwenVLConfig.model_validate(overrides)
        super().__init__(memory, config.build_reader())
        self.config = config
        self.convention = self.config.convention

    # ---------------------------------------------------------------- prompt (psi)
    def system_text(self, observation: Observation) -> str:
        shot = observation.screenshot
        w, h = self.convention.prompt_resolution((shot.shape[1], shot.shape[0]), observation.device_size)
        tools = FN_CALL_TEMPLATE.format(
            tool_descs=mobile_use_function(self.config.version, w, h, self.config.darwin_actions)
        )
        if self.config.version == "3":
            return "\n\n" + tools + QWEN3_RESPONSE_FORMAT
        prefix = self.config.system_prompt
        return f"{prefix}\n\n{tools}" if prefix else tools

    def user_text(
        self, goal: str, steps: Sequence[tuple[int, str]], past_images: int = 0, notes: Sequence[str] = ()
    ) -> str:
        """The user turn: goal, the memory's notes (a ``Notes:`` block, only when there are
        some) and ``Step i: ...;`` progress (``steps`` are ``(number, text)``)."""
        progress = "".join(f"Step {n}: {s}; " for n, s in steps)
        block = format_notes(notes) + "\n" if notes else ""
        if self.config.version == "3":
            text = f"The user query: {goal}.\n{block}{PROGRESS}{progress}.\n"
        else:
            text = f"The user query: {goal}\n{block}{PROGRESS}{progress}"
        if past_images:
            text += (
                f"\nThe last image is the current screen; the {past_images} before it show the screen "
                "before the most recent steps, oldest first."
            )
        return text

    def image_tokens(self, observation: Observation) -> int:
        conv = self.convention
        h, w = observation.screenshot.shape[:2]
        if isinstance(conv, ResizedImageCoordinates):
            return visual_tokens(h, w, conv.factor, conv.min_pixels, conv.max_pixels)
        return visual_tokens(h, w)

    def build_context(self, observation: Observation, history: Sequence[Transition]) -> Prompt:
        system = self.system_text(observation)
        image_tokens = self.image_tokens(observation)
        base_user = self.user_text(observation.goal, [])
        lines = self.config.screen_lines(observation)  # the marks, after the user turn's text
        reserved = (
            self.memory.count_tokens(system)
            + self.memory.count_tokens(base_user)
            + self.memory.count_tokens(lines)
            + image_tokens
            + 16
        )
        window = self.memory.window(history, self.render, reserved_tokens=reserved, image_tokens=image_tokens)
        first = len(history) - len(window.entries)  # step numbers count every past step, shown or not
        steps = []
        for i, entry in enumerate(window.entries):
            text = entry.text
            if self.config.version == "3":  # as the Qwen3-VL cookbook cleans its history
                text = text.replace("\n", "").replace('"', "")
            steps.append((first + i + 1, text))
        images = tuple(window.images) + (self.config.screen_image(observation),)
        # The notes' tokens are in the memory's budget already (MemoryWindow.notes_tokens).
        user = self.user_text(observation.goal, steps, past_images=len(images) - 1, notes=window.notes)
        if lines:
            user += "\n" + lines
        return Prompt(
            messages=(
                ChatMessage(role="system", text=system),
                ChatMessage(role="user", text=user, images=images),
            )
        )

    def history_item(self, parsed: ParsedOutput) -> HistoryItem:
        return HistoryItem(action=parsed.action_text, summary=parsed.summary)

    # ---------------------------------------------------------------- parser (xi)
    def parse(self, text: str, observation: Observation) -> ParsedOutput:
        warnings: list[str] = []
        if len(text) > MAX_PARSE_CHARS:
            warnings.append(f"response of {len(text)} characters; only the first {MAX_PARSE_CHARS} were read")
            text = text[:MAX_PARSE_CHARS]
        blocks = _tool_call_blocks(text)
        head_end = blocks[0][0] if blocks else len(text)
        thought, summary = _thought_and_summary(text[:head_end])
        if not blocks:
            span = balanced_json_object(text)
            if span is None:
                return ParsedOutput(
                    error=ParseError(reason="no <tool_call> with a mobile_use call found", text=text),
                    thought=thought,
                    warnings=tuple(warnings),
                )
            warnings.append("no <tool_call> tags; read the first JSON object")
            blocks = [span]
        geo = Geometry(self.convention, observation, self.config.off_screen)
        start, end = blocks[0]
        body = text[start:end].strip()
        try:
            arguments, json_text, name_warning = _arguments(body)
            if name_warning:
                warnings.append(name_warning)
            action = _convert(arguments, geo)
        except Reject as e:
            return ParsedOutput(
                error=ParseError(reason=e.reason, text=text),
                thought=thought,
                summary=summary,
                num_actions=len(blocks),
                warnings=tuple(warnings + geo.warnings),
            )
        if len(blocks) > 1:
            warnings.append(f"{len(blocks)} tool calls in one response; using the first")
        return ParsedOutput(
            action=action,
            thought=thought,
            summary=summary,
            action_text=json_text,
            num_actions=len(blocks),
            warnings=tuple(warnings + geo.warnings),
        )

    # ---------------------------------------------------------------- inverse
    def format_action(self, action: Action, observation: Observation) -> str:
        geo = Geometry(self.convention, observation, "clamp")

        def pt(x: int, y: int) -> list[int]:
            return list(geo.model_point(x, y))

        args: dict[str, object]
        if isinstance(action, Click):
            args = {"action": "click", "coordinate": pt(action.x, action.y)}
        elif isinstance(action, LongPress):
            args = {"action": "long_press", "coordinate": pt(action.x, action.y)}
        elif isinstance(action, Type):
            args = {"action": "type", "text": action.content}
        elif isinstance(action, Scroll):
            x2, y2 = scroll_as_swipe(action.direction, action.x, action.y, geo.device_size)
            args = {"action": "swipe", "coordinate": pt(action.x, action.y), "coordinate2": pt(x2, y2)}
        elif isinstance(action, Drag):
            args = {"action": "swipe", "coordinate": pt(action.x1, action.y1), "coordinate2": pt(action.x2, action.y2)}
        elif isinstance(action, OpenApp):
            args = {"action": "open", "text": action.app}
        elif isinstance(action, PressHome):
            args = {"action": "system_button", "button": "Home"}
        elif isinstance(action, PressBack):
            args = {"action": "system_button", "button": "Back"}
        elif isinstance(action, Wait):
            args = {"action": "wait", "time": 2}
        elif isinstance(action, Finished):
            args = {"action": "terminate", "status": "success"}
        elif isinstance(action, Answer):
            args = {"action": "answer", "text": action.content}
        else:
            raise TypeError(f"unknown action {action!r}")
        payload = json.dumps({"name": "mobile_use", "arguments": args}, ensure_ascii=False)
        return f"<tool_call>\n{payload}\n</tool_call>"

    def format_response(self, action: Action, observation: Observation, thought: str = "", summary: str = "") -> str:
        """A whole response (an SFT target): Qwen3-VL's ``Thought/Action`` lines when given, then the tool call."""
        lines = []
        if thought:
            lines.append(f"Thought: {thought}")
        if summary:
            lines.append(f'Action: "{summary}"')
        lines.append(self.format_action(action, observation))
        return "\n".join(lines)


def _tool_call_blocks(text: str) -> list[tuple[int, int]]:
    """Spans of the bodies of ``<tool_call>...</tool_call>`` (an unclosed one runs to the end)."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while len(spans) < MAX_CALLS:
        m = _TOOL_CALL.search(text, pos)
        if m is None:
            break
        e = _TOOL_CALL_END.search(text, m.end())
        end = e.start() if e is not None else len(text)
        spans.append((m.end(), end))
        pos = e.end() if e is not None else len(text)
    return spans


def _thought_and_summary(head: str) -> tuple[str, str | None]:
    thought, summary = "", None
    for m in _LINE.finditer(head):
        kind, value = m.group(1).lower(), m.group(2).strip()
        if kind == "thought" and not thought:
            thought = value
        elif kind == "action" and summary is None:
            summary = value.strip().strip('"').strip() or None
    return thought, summary


def _arguments(body: str) -> tuple[dict[str, object], str, str]:
    """``(arguments, the JSON text as written, warning)`` of one tool-call body."""
    obj = load_json(body)
    json_text = body
    if obj is None:
        span = balanced_json_object(body)
        if span is None:
            raise Reject(f"tool call is not JSON: {body[:80]!r}")
        json_text = body[span[0] : span[1]]
        obj = load_json(json_text)
        if obj is None:
            raise Reject(f"tool call is not valid JSON: {json_text[:80]!r}")
    if not isinstance(obj, dict):
        raise Reject("tool call must be a JSON object with name and arguments")
    warning = ""
    if "arguments" in obj:
        arguments = obj["arguments"]
        if isinstance(arguments, str):
            arguments = load_json(arguments)
        name = obj.get("name")
        if name != "mobile_use":
            warning = f"function name {str(name)[:40]!r} is not 'mobile_use'; read its arguments anyway"
    else:
        arguments = obj  # bare arguments object
        warning = "tool call without name/arguments; read it as the arguments"
    if not isinstance(arguments, dict):
        raise Reject("tool call arguments must be a JSON object")
    return arguments, json_text, warning


def _values(value: object, what: str) -> list[float]:
    if isinstance(value, str):
        found = numbers(value, limit=5)
    elif isinstance(value, list | tuple):
        found = []
        for v in value[:5]:
            if isinstance(v, bool) or not isinstance(v, int | float | str):
                raise Reject(f"{what} must hold numbers, got {str(v)[:40]!r}")
            if isinstance(v, str):
                parsed = numbers(v, limit=1)
                if not parsed:
                    raise Reject(f"{what} must hold numbers, got {v[:40]!r}")
                found.append(parsed[0])
            else:
                found.append(float(v))
    else:
        raise Reject(f"{what} must be [x, y], got {str(value)[:40]!r}")
    return found


def _string(arguments: dict[str, object], key: str) -> str:
    value = arguments.get(key, "")
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise Reject(f"{key} must be a string")


_BUTTONS = {
    "back": "back",
    "home": "home",
    "enter": "enter",
    "keycode_back": "back",
    "keycode_home": "home",
    "keycode_enter": "enter",
    "return": "enter",
}


def _convert(arguments: dict[str, object], geo: Geometry) -> Action:
    action = _string(arguments, "action").strip().lower()
    if action in ("click", "long_press"):
        if "coordinate" not in arguments:
            raise Reject(f"{action} needs coordinate")
        x, y = geo.point(_values(arguments["coordinate"], "coordinate"), "coordinate")
        return build_action(Click if action == "click" else LongPress, x=x, y=y)
    if action == "swipe":
        if "coordinate" not in arguments or "coordinate2" not in arguments:
            raise Reject("swipe needs coordinate and coordinate2")
        x1, y1 = geo.point(_values(arguments["coordinate"], "coordinate"), "coordinate")
        x2, y2 = geo.point(_values(arguments["coordinate2"], "coordinate2"), "coordinate2")
        return build_action(Drag, x1=x1, y1=y1, x2=x2, y2=y2)
    if action == "type":
        return build_action(Type, content=_string(arguments, "text"))
    if action == "answer":
        return build_action(Answer, content=_string(arguments, "text"))
    if action == "open":
        return build_action(OpenApp, app=_string(arguments, "text").strip())
    if action == "wait":
        return Wait()
    if action == "terminate":
        status = _string(arguments, "status").strip().lower()
        return build_action(Finished, content=status)
    if action in ("system_button", "key"):
        raw = _string(arguments, "button" if action == "system_button" else "text")
        mapped = _BUTTONS.get(raw.strip().lower())
        if mapped == "back":
            return PressBack()
        if mapped == "home":
            return PressHome()
        if mapped == "enter":
            return Type(content="\n")
        raise Reject(f"{action} {raw[:40]!r} has no darwin equivalent (only Back, Home, Enter)")
    raise Reject(f"unknown mobile_use action {action[:40]!r}")


__all__ = ["FN_CALL_TEMPLATE", "QWEN3_RESPONSE_FORMAT", "QwenVLAgent", "QwenVLConfig", "mobile_use_function"]
