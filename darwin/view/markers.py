"""Where an action is drawn on the screenshot it was taken from: pure geometry, in the phone's
pixels (the coordinates actions use); the episode page draws it as SVG over the image.

    >>> from darwin.actions import Click, Scroll, Direction, OpenApp
    >>> action_marker(Click(x=540, y=1200), (1080, 2400))
    ActionMarker(shape='point', x=540.0, y=1200.0, x2=None, y2=None, label='click (540, 1200)')
    >>> m = action_marker(Scroll(x=540, y=1200, direction=Direction.UP), (1080, 2400))
    >>> m.shape, m.x2, m.y2
    ('arrow', 540.0, 840.0)
    >>> action_marker(OpenApp(app="Clock"), (1080, 2400)).label
    'open_app Clock'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from darwin.actions import Action, Click, Direction, Drag, LongPress, OpenApp, Scroll, Type

__all__ = ["ActionMarker", "action_marker"]

SCROLL_SHARE = 0.15
"""A scroll's arrow is this share of the screen's height (or width) long."""


@dataclass(frozen=True)
class ActionMarker:
    """How to draw one step's action: ``point`` (a tap at ``x, y``), ``press`` (a long press),
    ``arrow`` (a drag from ``x, y`` to ``x2, y2``, or a scroll: the arrow points the way the
    content moves, as :class:`~darwin.actions.Direction` names it) or ``banner`` (an action without a
    place: typed text, ``open_app``, back, home, wait, finished, an answer, a parse error),
    with ``label`` written beside it."""

    shape: Literal["point", "press", "arrow", "banner"]
    x: float | None
    y: float | None
    x2: float | None
    y2: float | None
    label: str


def action_marker(action: Action | None, device_size: tuple[int, int], parse_error: str | None = None) -> ActionMarker:
    """The marker of ``action`` on a ``(width, height)`` screen; ``action=None`` is a step whose
    response did not parse (``parse_error`` its reason)."""
    width, height = device_size
    if action is None:
        return ActionMarker("banner", None, None, None, None, f"parse error: {parse_error or 'no action'}")
    if isinstance(action, Click):
        return ActionMarker("point", float(action.x), float(action.y), None, None, f"click ({action.x}, {action.y})")
    if isinstance(action, LongPress):
        return ActionMarker(
            "press", float(action.x), float(action.y), None, None, f"long press ({action.x}, {action.y})"
        )
    if isinstance(action, Scroll):
        dx, dy = {
            Direction.UP: (0.0, -SCROLL_SHARE * height),
            Direction.DOWN: (0.0, SCROLL_SHARE * height),
            Direction.LEFT: (-SCROLL_SHARE * width, 0.0),
            Direction.RIGHT: (SCROLL_SHARE * width, 0.0),
        }[action.direction]
        x, y = float(action.x), float(action.y)
        return ActionMarker("arrow", x, y, x + dx, y + dy, f"scroll {action.direction.value}")
    if isinstance(action, Drag):
        return ActionMarker("arrow", float(action.x1), float(action.y1), float(action.x2), float(action.y2), "drag")
    if isinstance(action, Type):
        return ActionMarker("banner", None, None, None, None, f"type {action.content!r}")
    if isinstance(action, OpenApp):
        return ActionMarker("banner", None, None, None, None, f"open_app {action.app}")
    content = getattr(action, "content", "")  # finished and answer carry words
    return ActionMarker("banner", None, None, None, None, action.type + (f" {content!r}" if content else ""))
