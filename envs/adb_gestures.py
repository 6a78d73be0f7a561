"""Touch gestures over ADB: the ``input swipe`` a long press, a scroll or a drag becomes, judged
against Android's touch slop (:mod:`darwin.envs.adb_touch`), under which a moving finger is still
a press (part of :mod:`darwin.envs.adb`).

A swipe that moves less than the touch slop is a tap (or, held, a long press) on every Android
phone, and so is one that ends inside the button it started on. A scroll therefore always keeps
its full length: where the end would fall off the screen, the start moves inward instead of the
end being clamped (a left scroll at x=1060 on a 1080-wide screen used to become a 19 px swipe,
which the phone took as a tap on the icon there). A drag shorter than the slop is not sent at
all (:class:`GestureRefused`): no phone would take it as a drag.

    >>> from darwin.actions import Direction, Scroll
    >>> from darwin.envs.adb_config import AdbEnvConfig
    >>> swipe_for(Scroll(x=1060, y=184, direction=Direction.LEFT), (1080, 2400), 420, AdbEnvConfig())
    Swipe(x1=647, y1=184, x2=1079, y2=184, duration_ms=300)
"""

from __future__ import annotations

from dataclasses import dataclass

from darwin.actions import Action, Direction, Drag, LongPress, Scroll
from darwin.envs.adb_config import AdbEnvConfig
from darwin.envs.adb_touch import touch_slop_px

__all__ = [
    "GestureRefused",
    "Swipe",
    "swipe_for",
]


class GestureRefused(ValueError):  # noqa: N818 - reads as what happened
    """An action that no phone would perform as asked (a drag shorter than the touch slop is a
    press); the message says why. :class:`~darwin.envs.adb.AdbPhoneEnv` sends nothing for it."""


@dataclass(frozen=True)
class Swipe:
    """One ``input swipe X1 Y1 X2 Y2 MS``: from (x1, y1) to (x2, y2) in ``duration_ms``."""

    x1: int
    y1: int
    x2: int
    y2: int
    duration_ms: int

    @property
    def length(self) -> int:
        """How far the finger moves along its longer axis (what the slop is compared with)."""
        return max(abs(self.x2 - self.x1), abs(self.y2 - self.y1))

    def argv(self) -> list[str]:
        return ["input", "swipe", *(str(v) for v in (self.x1, self.y1, self.x2, self.y2, self.duration_ms))]


def _clamp(value: int, low: int, high: int) -> int:
    return min(max(value, low), high)


def swipe_for(action: Action, size: tuple[int, int], density_dpi: int, config: AdbEnvConfig) -> Swipe:
    """The swipe ``action`` (a long press, scroll or drag) becomes on a ``size = (W, H)`` screen
    at ``density_dpi``, with ``config``'s lengths and durations.

    - A long press: a swipe that does not move, held ``long_press_ms``.
    - A scroll: ``scroll_distance`` of the screen's height (width for left/right), in
      ``scroll_ms`` (a fling). The finger moves up for ``down`` (content below comes into
      view). The swipe keeps its full length: a start too close to the edge it moves towards
      is moved inward, along the swipe, just enough.
    - A drag: from (x1, y1) to (x2, y2), both kept on the screen, in ``drag_ms``.

    Raises :class:`GestureRefused` where the swipe would move less than the touch slop (a drag
    that short, or a ``scroll_distance`` that small on this screen) and :class:`TypeError` for
    any other action.
    """
    w, h = size
    slop = touch_slop_px(density_dpi)
    if isinstance(action, LongPress):
        x, y = _clamp(action.x, 0, w - 1), _clamp(action.y, 0, h - 1)
        return Swipe(x, y, x, y, config.long_press_ms)
    if isinstance(action, Scroll):
        vertical = action.direction in (Direction.UP, Direction.DOWN)
        extent = h if vertical else w
        distance = min(round(config.scroll_distance * extent), extent - 1)
        if distance < slop:
            raise GestureRefused(
                f"a scroll of scroll_distance={config.scroll_distance} moves {distance} px on this "
                f"{w}x{h} screen, under the touch slop ({slop} px at {density_dpi} dpi): the phone would take it "
                "as a tap; raise AdbEnvConfig.scroll_distance"
            )
        # The finger moves against the content: up (-) reveals what is below, left (-) what is to the right.
        sign = -1 if action.direction in (Direction.DOWN, Direction.RIGHT) else 1
        start = action.y if vertical else action.x
        start = _clamp(start, distance, extent - 1) if sign < 0 else _clamp(start, 0, extent - 1 - distance)
        end = start + sign * distance
        if vertical:
            x = _clamp(action.x, 0, w - 1)
            return Swipe(x, start, x, end, config.scroll_ms)
        y = _clamp(action.y, 0, h - 1)
        return Swipe(start, y, end, y, config.scroll_ms)
    if isinstance(action, Drag):
        swipe = Swipe(
            _clamp(action.x1, 0, w - 1),
            _clamp(action.y1, 0, h - 1),
            _clamp(action.x2, 0, w - 1),
            _clamp(action.y2, 0, h - 1),
            config.drag_ms,
        )
        if swipe.length < slop:
            raise GestureRefused(
                f"a drag from ({swipe.x1}, {swipe.y1}) to ({swipe.x2}, {swipe.y2}) on the screen moves {swipe.length} px, "
                f"under the touch slop ({slop} px at {density_dpi} dpi): a phone would take it as a press; not sent"
            )
        return swipe
    raise TypeError(f"{type(action).__name__} is not a swipe (long_press, scroll or drag)")
