"""TinyAgent: a compact prompt and output format for small models trained from scratch by SFT.

The output is one call with positional arguments, nothing else, so a tiny model has few
tokens to learn and to sample (Qwen's tokenizer splits digits one by one, so ``click(54,50)``
costs about eight tokens)::

    click(x,y)   long_press(x,y)   type('text')   scroll(x,y,down)   drag(x1,y1,x2,y2)
    open_app('Clock')   press_home()   press_back()   wait()   finished('msg')   answer('text')

Coordinates are integers on a ``grid x grid`` lattice over the screen (default 100: 0..99
across the width and the height), independent of the device resolution; an integer maps
to the centre of its cell, so a pixel comes back within half a cell (5.4 x 12 px on a
1080x2400 phone). ``grid=None`` uses device pixels instead (exact, more digits). Strings
are single-quoted Python literals (``\\'``, ``\\n``, ``\\\\`` escapes).

Prompt (through the same chat-template path as every agent): an optional short system turn
listing the format, then one user turn with the screenshot(s) and ``Goal: ...`` plus
``Done: a1; a2; ...`` (the remembered raw actions, oldest first; unparseable ones are left
out by default, see ``TinyAgentConfig.invalid_history``). A memory with notes (app
knowledge, summaries) adds a ``Notes:`` block between the goal and ``Done:``.

With a reader (``TinyAgentConfig.reader``: ``ocr``, ``elements``) the observation's marks are
listed after the goal (``Screen:`` then ``[k] text`` lines) and pointing calls join the
action space: ``click(#k)`` and ``long_press(#k)`` press mark ``k``'s centre, ``click(@i:j)``
the mark that reads the goal's words ``i`` to ``j - 1``, ``click('text')`` the mark that reads
``text``; ``type(#k)`` types mark ``k``'s text and ``type(@i:j)`` the goal's words;
``open_app(@i:j)`` opens the app the goal's words name (the goal starts with its app: a model
that learned ``open_app(@0:1)`` opens an app it never saw demonstrated)
(:mod:`darwin.agents.pointing`). :meth:`TinyAgent.format_action` writes them wherever a mark
or the goal covers the action (``point=True``), so demonstrations teach pointing.

    >>> import numpy as np
    >>> from darwin.actions import Click
    >>> from darwin.agents.tiny import TinyAgent
    >>> from darwin.types import Observation
    >>> obs = Observation(screenshot=np.zeros((560, 252, 3), np.uint8), goal="Open Clock",
    ...                   device_size=(1080, 2400))
    >>> agent = TinyAgent()
    >>> agent.format_action(Click(x=540, y=1200), obs)
    'click(50,50)'
    >>> agent.project_action("click(50,50)", obs)
    Click(type='click', x=545, y=1212)
"""

from __future__ import annotations

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
    CoordinateConvention,
    DeviceCoordinates,
    RelativeCoordinates,
    visual_tokens,
)
from darwin.agents.parsing import MAX_PARSE_CHARS, Call, find_calls, numbers
from darwin.agents.pointing import (
    PointingError,
    find_goal_span,
    goal_span,
    mark,
    mark_at,
    mark_reading,
    mark_with_text,
    press_text,
)
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

ACTION_SPACE = (
    "click(x,y) long_press(x,y) type('text') scroll(x,y,up|down|left|right) drag(x1,y1,x2,y2) "
    "open_app('name') press_home() press_back() wait() finished('message') answer('text')"
)
POINTING_SPACE = "click(#k|@i:j|'text') long_press(#k|@i:j|'text') type(#k|@i:j) open_app(@i:j)"
"""The pointing calls a reader adds: mark ``k``, goal words ``i`` to ``j - 1`` (typed, the
mark that reads them pressed, or the app they name opened), the mark that reads ``text``."""

_NAMES = frozenset(
    {
        "click",
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
    }
)


class TinyAgentConfig(ReaderSettings):
    """Settings of :class:`TinyAgent` (validated when built)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    grid: int | None = Field(
        100, ge=2, le=10_000, description="coordinate lattice per axis (cell centres); None = device pixels"
    )
    system_prompt: bool = Field(
        True, description="start with a short system turn listing the format (off: the model learns it by SFT alone)"
    )
    off_screen: OffScreen = Field("clamp", description="off-screen coordinates: clamp to the edge or ParseError")
    invalid_history: Literal["omit", "mark"] = Field(
        "omit",
        description="unparseable past responses: 'omit' leaves them out of the history, so the next step "
        "retries from the same context; 'mark' shows them as 'invalid'",
    )
    point: bool = Field(
        True,
        description="with a reader: format_action (SFT targets) writes click(#k)/type(#k)/type(@i:j)/open_app(@i:j) "
        "wherever a mark or the goal covers the action; the parser reads them either way",
    )
    point_text: bool = Field(
        True,
        description="with a reader and point: a press is written by what reads its mark, click(@i:j) (a span "
        "of the goal's words the mark holds) or click('text') (the mark's own text), where that leads back to "
        "the mark; else click(#k)",
    )

    @property
    def convention(self) -> CoordinateConvention:
        if self.grid is None:
            return DeviceCoordinates()
        return RelativeCoordinates(scale=self.grid, center=True)


class TinyAgent(VLMAgent):
    """The tiny model's agent: one short call per step, raw-action history.

    ``TinyAgent(config, memory)`` or ``TinyAgent(grid=1000, ...)`` with config fields as
    keywords. :meth:`format_action` produces the SFT targets; :meth:`parse` reads them back.
    """

    def __init__(
        self, config: TinyAgentConfig | None = None, memory: Memory | None = None, **overrides: object
    ) -> None:
        if config is not None and overrides:
            raise TypeError("pass either a TinyAgentConfig or keyword overrides, not both")
        config = config if config is not None else TinyAgentConfig.model_validate(overrides)
        super().__init__(memory, config.build_reader())
        self.config = config
        self.convention = self.config.convention

    # ---------------------------------------------------------------- prompt (psi)
    def system_text(self, observation: Observation) -> str:
        grid = self.config.grid
        if grid is None:
            w, h = observation.device_size
            coords = f"x,y: screen pixels of the {w}x{h} screen."
        else:
            coords = f"x,y: 0-{grid - 1} across the screen width and height."
        if self.reader is None:
            return f"Phone agent. Reply with one action:\n{ACTION_SPACE}\n{coords}"
        return (
            f"Phone agent. Reply with one action:\n{ACTION_SPACE} {POINTING_SPACE}\n{coords}\n"
            "#k: screen mark k. @i:j: goal words i to j-1 (from 0), or the mark reading them. "
            "'text': the mark reading it."
        )

    def build_context(self, observation: Observation, history: Sequence[Transition]) -> Prompt:
        system = self.system_text(observation) if self.config.system_prompt else ""
        goal = f"Goal: {observation.goal}"
        if lines := self.config.screen_lines(observation):
            goal += "\n" + lines
        h, w = observation.screenshot.shape[:2]
        image_tokens = visual_tokens(h, w)
        if self.config.invalid_history == "omit":
            # An unparseable response changed nothing on the phone; a model trained on clean
            # demonstrations has never seen one in its history, so showing it derails the rest
            # of the episode (one sampling slip became a failure in 297 of 390 failed episodes).
            history = [t for t in history if t.decision.action is not None]
        reserved = self.memory.count_tokens(system) + self.memory.count_tokens(goal) + image_tokens + 8
        window = self.memory.window(history, self.render, reserved_tokens=reserved, image_tokens=image_tokens)
        text = goal
        if window.notes:  # their tokens are in the memory's budget (MemoryWindow.notes_tokens)
            text += "\n" + format_notes(window.notes)
        if window.entries:
            text += "\nDone: " + "; ".join(e.text for e in window.entries)
        images = (*window.images, self.config.screen_image(observation))
        messages = [ChatMessage(role="system", text=system)] if system else []
        messages.append(ChatMessage(role="user", text=text, images=images))
        return Prompt(messages=tuple(messages))

    def history_item(self, parsed: ParsedOutput) -> HistoryItem:
        return HistoryItem(action=parsed.action_text)

    def invalid_history_text(self, text: str) -> str:
        """Unparseable past outputs read ``invalid``: a random model's noise would crowd the prompt."""
        return "invalid"

    # ---------------------------------------------------------------- parser (xi)
    def parse(self, text: str, observation: Observation) -> ParsedOutput:
        warnings: list[str] = []
        if len(text) > MAX_PARSE_CHARS:
            warnings.append(f"response of {len(text)} characters; only the first {MAX_PARSE_CHARS} were read")
            text = text[:MAX_PARSE_CHARS]
        calls = find_calls(text, _NAMES)
        if not calls:
            return ParsedOutput(
                error=ParseError(reason="no action found (expected e.g. click(50,50))", text=text),
                warnings=tuple(warnings),
            )
        geo = Geometry(self.convention, observation, self.config.off_screen)
        call = calls[0]
        try:
            action = _pointed(call, observation)
            if action is None:
                action = _convert(call, geo)
        except Reject as e:
            return ParsedOutput(
                error=ParseError(reason=f"{call.name}(): {e.reason}", text=text),
                num_actions=len(calls),
                warnings=tuple(warnings + geo.warnings),
            )
        if len(calls) > 1:
            warnings.append(f"{len(calls)} actions in one response; using the first")
        if not call.terminated:
            warnings.append(f"{call.name}( is not closed; read to the end of the response")
        return ParsedOutput(
            action=action,
            action_text=call.text.strip(),
            num_actions=len(calls),
            warnings=tuple(warnings + geo.warnings),
        )

    # ---------------------------------------------------------------- inverse
    def format_action(self, action: Action, observation: Observation) -> str:
        """The text for ``action``: a pointing call where :attr:`TinyAgentConfig.point` is on and
        a mark or the goal covers it (:meth:`pointing_text`), else :meth:`plain_text`."""
        pointed = self.pointing_text(action, observation) if self.config.point else None
        return pointed if pointed is not None else self.plain_text(action, observation)

    def pointing_text(self, action: Action, observation: Observation) -> str | None:
        """``click(#k)``/``long_press(#k)`` for a press inside mark ``k`` (the smallest holding the
        point), ``type(@i:j)`` for text that is a span of the goal's words, ``type(#k)`` for
        text a mark reads, ``open_app(@i:j)`` for an app the goal's words name; None where
        nothing covers the action (no reader: always None)."""
        marks = observation.marks
        if isinstance(action, (Click, LongPress)) and marks:
            k = mark_at(marks, action.x, action.y)
            if k is not None:
                return self.press_call("click" if isinstance(action, Click) else "long_press", k, observation)
        if isinstance(action, Type) and self.reader is not None and action.content:
            span = find_goal_span(observation.goal, action.content)
            if span is not None:
                return f"type(@{span[0]}:{span[1]})"
            k = mark_with_text(marks, action.content)
            if k is not None:
                return f"type(#{k})"
        if isinstance(action, OpenApp) and self.reader is not None:
            span = find_goal_span(observation.goal, action.app)
            if span is not None:
                return f"open_app(@{span[0]}:{span[1]})"
        return None

    def press_call(self, name: str, k: int, observation: Observation) -> str:
        """``name(@i:j)`` pressing mark ``k`` by the goal's words it shows, or ``name('text')`` by
        its own text (:func:`~darwin.agents.pointing.press_text`), where ``point_text`` is on and
        that leads back to mark ``k``; else ``name(#k)``."""
        how = press_text(observation.marks, observation.goal, k) if self.config.point_text else None
        if how is None:
            return f"{name}(#{k})"
        if isinstance(how, tuple):
            return f"{name}(@{how[0]}:{how[1]})"
        return f"{name}({quote(how)})"

    def plain_text(self, action: Action, observation: Observation) -> str:
        """The text for ``action`` with its coordinates and strings written out."""
        geo = Geometry(self.convention, observation, "clamp")

        def pt(x: int, y: int) -> str:
            mx, my = geo.model_point(x, y)
            return f"{mx},{my}"

        if isinstance(action, Click):
            return f"click({pt(action.x, action.y)})"
        if isinstance(action, LongPress):
            return f"long_press({pt(action.x, action.y)})"
        if isinstance(action, Type):
            return f"type({quote(action.content)})"
        if isinstance(action, Scroll):
            return f"scroll({pt(action.x, action.y)},{action.direction.value})"
        if isinstance(action, Drag):
            return f"drag({pt(action.x1, action.y1)},{pt(action.x2, action.y2)})"
        if isinstance(action, OpenApp):
            return f"open_app({quote(action.app)})"
        if isinstance(action, PressHome):
            return "press_home()"
        if isinstance(action, PressBack):
            return "press_back()"
        if isinstance(action, Wait):
            return "wait()"
        if isinstance(action, Finished):
            return f"finished({quote(action.content)})" if action.content else "finished()"
        if isinstance(action, Answer):
            return f"answer({quote(action.content)})"
        raise TypeError(f"unknown action {action!r}")


def _reference(call: Call) -> str | None:
    """The call's first argument as written when it is an unquoted reference (``#3``,
    ``@2:4``), else None (``type('#3')`` types the characters ``#3``)."""
    raw = call.text[call.text.find("(") + 1 :].lstrip()
    if raw[:1] not in ("#", "@"):
        return None
    return raw.split(")", 1)[0].split(",", 1)[0].strip()


def _quoted(call: Call) -> bool:
    """Whether the call's first argument is written as a quoted string (``click('Berlin')``)."""
    return call.text[call.text.find("(") + 1 :].lstrip()[:1] in ("'", '"')


def _index(text: str, what: str) -> int:
    digits = text.strip()
    if not digits.isdigit() or len(digits) > 6:
        raise Reject(f"{what} {text!r} is not a number (write e.g. #3 or @2:4)")
    return int(digits)


def _pointed(call: Call, observation: Observation) -> Action | None:
    """The action of a pointing call (``click(#k)``, ``long_press(#k)``, ``type(#k)``,
    ``type(@i:j)``, ``open_app(@i:j)``), None for a call with plain arguments; a reference to
    nothing rejects."""
    ref = _reference(call)
    if ref is None:
        if call.name in ("click", "long_press") and _quoted(call) and len(call.args) == 1 and not call.kwargs:
            k = mark_reading(observation.marks, call.args[0])
            if k is None:
                raise Reject(f"no mark of this screen reads {call.args[0]!r} (press a mark by its text, #k or x,y)")
            x, y = observation.marks[k].center
            return build_action(Click if call.name == "click" else LongPress, x=x, y=y)
        return None
    try:
        if ref.startswith("#"):
            target = mark(observation.marks, _index(ref[1:], "mark"))
            if call.name in ("click", "long_press"):
                x, y = target.center
                return build_action(Click if call.name == "click" else LongPress, x=x, y=y)
            if call.name == "type":
                return build_action(Type, content=target.text)
            raise Reject(f"{call.name}() cannot point at a mark (only click, long_press and type can)")
        if call.name not in ("type", "click", "long_press", "open_app"):
            raise Reject(f"{call.name}() cannot take a goal span (only type, click, long_press and open_app can)")
        start, sep, end = ref[1:].partition(":")
        if not sep:
            raise Reject(f"goal span {ref!r} needs a start and an end: @i:j")
        words = goal_span(observation.goal, _index(start, "start"), _index(end, "end"))
        if call.name == "type":
            return build_action(Type, content=words)
        if call.name == "open_app":
            return build_action(OpenApp, app=words)
        k = mark_reading(observation.marks, words)
        if k is None:
            raise Reject(f"no mark of this screen reads the goal's {ref} ({words!r})")
        x, y = observation.marks[k].center
        return build_action(Click if call.name == "click" else LongPress, x=x, y=y)
    except PointingError as e:
        raise Reject(str(e)) from None


def _point_values(call: Call, count: int) -> list[float]:
    named = [call.kwarg(k) for k in (("x", "y") if count == 2 else ("x1", "y1", "x2", "y2"))]
    if all(v is not None for v in named):
        values = [numbers(v, limit=1) for v in named if v is not None]
        if all(values):
            return [v[0] for v in values]
    found = numbers(",".join(a for a in call.args if not a.strip().isalpha()), limit=count + 1)
    if len(found) != count:
        raise Reject(f"expected {count} coordinates, got {len(found)}")
    return found


def _text(call: Call, *keys: str) -> str:
    value = call.kwarg(*keys)
    if value is None:
        value = call.args[0] if call.args else ""
    return value


def _convert(call: Call, geo: Geometry) -> Action:
    name = call.name
    if name in ("click", "long_press"):
        x, y = geo.point(_point_values(call, 2), name)
        return build_action(Click if name == "click" else LongPress, x=x, y=y)
    if name == "scroll":
        direction = call.kwarg("direction") or next((a for a in call.args if a.strip().isalpha()), None)
        d = parse_direction(direction)
        x, y = geo.point(_point_values(call, 2), name)
        return build_action(Scroll, x=x, y=y, direction=d)
    if name == "drag":
        v = _point_values(call, 4)
        (x1, y1), (x2, y2) = geo.point(v[:2], "drag start"), geo.point(v[2:], "drag end")
        return build_action(Drag, x1=x1, y1=y1, x2=x2, y2=y2)
    if name == "type":
        return build_action(Type, content=_text(call, "content", "text"))
    if name == "open_app":
        return build_action(OpenApp, app=_text(call, "app", "app_name", "name").strip())
    if name == "press_home":
        return PressHome()
    if name == "press_back":
        return PressBack()
    if name == "wait":
        return Wait()
    if name == "finished":
        return build_action(Finished, content=_text(call, "content"))
    return build_action(Answer, content=_text(call, "content", "text"))


__all__ = ["ACTION_SPACE", "POINTING_SPACE", "TinyAgent", "TinyAgentConfig"]
