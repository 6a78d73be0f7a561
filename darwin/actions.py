"""The action space shared by every agent, environment and learner.

Eleven actions (the Darwin paper's Appendix C plus ``answer`` from
AndroidWorld-Generalization). Coordinates are integer *device pixels*; agents convert
from their model's convention before building an action. Actions are a pydantic
discriminated union on the ``type`` field, so they round-trip through JSON::

    >>> from darwin.actions import Click, parse_action
    >>> a = Click(x=540, y=1200)
    >>> parse_action(a.model_dump_json()) == a
    True
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

MAX_TEXT_LENGTH = 2000
"""Longest text a ``type``/``finished``/``answer`` action may carry (characters)."""

Pixel = Annotated[int, Field(ge=0, strict=True, description="device pixel, >= 0")]
Text = Annotated[str, Field(max_length=MAX_TEXT_LENGTH)]


class Direction(str, Enum):
    """Scroll direction: the way the *content* moves into view (``down`` reveals lower items)."""

    UP = "up"
    DOWN = "down"
    LEFT = "left"
    RIGHT = "right"


class _Action(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Click(_Action):
    """Tap at (x, y)."""

    type: Literal["click"] = "click"
    x: Pixel
    y: Pixel


class LongPress(_Action):
    """Press and hold at (x, y)."""

    type: Literal["long_press"] = "long_press"
    x: Pixel
    y: Pixel


class Type(_Action):
    """Type ``content`` into the focused text field; a trailing newline submits it."""

    type: Literal["type"] = "type"
    content: Text


class Scroll(_Action):
    """Scroll the content under (x, y) so that more of it in ``direction`` comes into view."""

    type: Literal["scroll"] = "scroll"
    x: Pixel
    y: Pixel
    direction: Direction


class Drag(_Action):
    """Drag from (x1, y1) to (x2, y2)."""

    type: Literal["drag"] = "drag"
    x1: Pixel
    y1: Pixel
    x2: Pixel
    y2: Pixel


class OpenApp(_Action):
    """Launch an app by its name (e.g. ``"Clock"``)."""

    type: Literal["open_app"] = "open_app"
    app: Annotated[str, Field(min_length=1, max_length=200)]


class PressHome(_Action):
    """Go to the launcher."""

    type: Literal["press_home"] = "press_home"


class PressBack(_Action):
    """System back."""

    type: Literal["press_back"] = "press_back"


class Wait(_Action):
    """Do nothing for one step (let the screen settle)."""

    type: Literal["wait"] = "wait"


class Finished(_Action):
    """The agent declares the task done, with an optional message."""

    type: Literal["finished"] = "finished"
    content: Text = ""


class Answer(_Action):
    """The agent answers an information-retrieval task; ends the episode."""

    type: Literal["answer"] = "answer"
    content: Text


Action = Annotated[
    Click | LongPress | Type | Scroll | Drag | OpenApp | PressHome | PressBack | Wait | Finished | Answer,
    Field(discriminator="type"),
]
"""Any of the eleven actions, discriminated by ``type``."""

ACTION_TYPES: tuple[type[_Action], ...] = (
    Click,
    LongPress,
    Type,
    Scroll,
    Drag,
    OpenApp,
    PressHome,
    PressBack,
    Wait,
    Finished,
    Answer,
)
TERMINAL_ACTIONS: tuple[type[_Action], ...] = (Finished, Answer)

_ACTION_ADAPTER: TypeAdapter[Action] = TypeAdapter(Action)


def parse_action(data: str | bytes | dict) -> Action:
    """Validate an action from JSON text or a dict; raises ``pydantic.ValidationError``."""
    if isinstance(data, dict):
        return _ACTION_ADAPTER.validate_python(data)
    return _ACTION_ADAPTER.validate_json(data)


def action_to_json(action: Action) -> str:
    """Serialise an action to compact JSON (inverse of :func:`parse_action`)."""
    return action.model_dump_json()


def is_terminal(action: Action) -> bool:
    """True for actions that end an episode by the agent's own decision."""
    return isinstance(action, TERMINAL_ACTIONS)


__all__ = [
    "Action",
    "ACTION_TYPES",
    "Answer",
    "Click",
    "Direction",
    "Drag",
    "Finished",
    "LongPress",
    "MAX_TEXT_LENGTH",
    "OpenApp",
    "PressBack",
    "PressHome",
    "Scroll",
    "TERMINAL_ACTIONS",
    "Type",
    "Wait",
    "action_to_json",
    "is_terminal",
    "parse_action",
]
