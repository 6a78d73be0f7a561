"""What an action will press, read from the screen's elements: the action guard's view of a
screen (:mod:`darwin.envs.guard`; docs/phones.md, "The action guard").

An action presses more than the point it names:

- a **tap** presses the top-most clickable element under it (a non-clickable row presses
  nothing, except inside a web view, whose content often says nothing of being clickable);
- a **long press** presses it too: where no long press is handled, Android clicks on release;
- a **swipe** (a scroll or a drag, as :func:`~darwin.envs.adb_gestures.swipe_for` sends it)
  presses the element under its start when it moves less than the touch slop, or when it ends
  inside that element (grown by the slop): Android's ``View`` clicks on release while the
  finger stays on it. A drag also drops onto the element under its end;
- **Enter** (typed text with a newline, or a tap on the keyboard's Enter key: "go", "send",
  "前往" ...) submits the focused field: it acts as the field's submit button, the clickable
  element right beside, below or above the field.

Each of these is a :class:`Target`; the guard's rules match its label after
:func:`normalise_label` (Unicode NFKC, invisible characters dropped, every kind of space one
space, case folded, no spaces between Chinese characters).

    >>> from darwin.actions import Click, LongPress
    >>> from darwin.envs.screen_elements import ScreenElement
    >>> button = ScreenElement("", "", "com.x", (0, 0, 100, 50), clickable=True)
    >>> label = ScreenElement("Send", "", "com.x", (10, 10, 90, 40))
    >>> action_targets([button, label], Click(x=5, y=5))
    [Target(package='com.x', text='Send', how='', point=(5, 5))]
    >>> action_targets([button, label], LongPress(x=5, y=5))[0].how
    'held: a tap where no long press is handled'
    >>> normalise_label("Place\\u00a0your\\u200b order\\n"), normalise_label("删 除")
    ('place your order', '删除')
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from darwin.actions import Action, Click, Drag, LongPress, Scroll, Type
from darwin.envs.adb_gestures import Swipe
from darwin.envs.screen_elements import ScreenElement

__all__ = [
    "ENTER_KEY_LABELS",
    "Target",
    "action_targets",
    "normalise_label",
    "pressed_at",
]

ENTER_KEY_LABELS = frozenset(
    {"go", "enter", "send", "search", "done", "next", "return", "submit", "↵", "⏎", "⌤", "➤"}
    | {"前往", "发送", "搜索", "完成", "下一步", "确定", "回车", "提交"}
)
"""Labels (normalised) of a keyboard's Enter key: the IME's action names in English and Chinese.
A tap on one while a text field has focus is Enter in that field (a new line keeps its own
label, "new line" / "换行", and submits nothing)."""

_CJK = r"[\u2e80-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]"
_SPACE_BETWEEN_CJK = re.compile(rf"(?<={_CJK}) (?={_CJK})")
_SPACES = re.compile(r"\s+")


def normalise_label(text: str) -> str:
    """``text`` as the rules compare it: Unicode NFKC (full-width letters, ligatures and
    compatibility spaces become plain ones), invisible format characters dropped (zero-width
    spaces and joiners, soft hyphens, direction marks, byte-order marks), every run of
    whitespace (newlines, non-breaking and ideographic spaces) one space, case folded, and no
    space left between two Chinese characters (``删 除`` is ``删除``)."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    text = _SPACES.sub(" ", text.casefold()).strip()
    return _SPACE_BETWEEN_CJK.sub("", text)


@dataclass(frozen=True)
class Target:
    """Something an action presses: the app it belongs to, its label (the texts and content
    descriptions of the element and of everything inside it), how the action presses it (empty:
    a plain tap) and the point a tap there would press (``None`` for Enter's submit)."""

    package: str
    text: str
    how: str = ""
    point: tuple[int, int] | None = None


def pressed_at(elements: Sequence[ScreenElement], x: int, y: int) -> ScreenElement | None:
    """The element a tap at (x, y) presses: the top-most clickable one there; where none is
    clickable, the smallest element inside a web view there (web content rarely says it is
    clickable), else ``None`` (a tap on a plain row or label presses nothing)."""
    under = [e for e in elements if e.contains(x, y)]
    clickable = [e for e in under if e.clickable]
    if clickable:
        return clickable[-1]
    if any("WebView" in e.class_name for e in under):
        return min(under, key=lambda e: (e.bounds[2] - e.bounds[0]) * (e.bounds[3] - e.bounds[1]))
    return None


def _label(elements: Sequence[ScreenElement], element: ScreenElement) -> str:
    texts = [t for e in elements if e is element or e.inside(element) for t in (e.text, e.description) if t.strip()]
    return " ".join(dict.fromkeys(texts))


def _target(
    elements: Sequence[ScreenElement], element: ScreenElement, how: str, point: tuple[int, int] | None
) -> Target:
    return Target(package=element.package, text=_label(elements, element), how=how, point=point)


def _focused_field(elements: Sequence[ScreenElement]) -> ScreenElement | None:
    focused = [e for e in elements if e.focused and (e.is_text_field or not e.class_name)]
    return focused[-1] if focused else None


def _gap(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> int | None:
    """The distance between two boxes side by side or one above the other (``None``: neither)."""
    ax0, ay0, ax1, ay1 = a
    bx0, by0, bx1, by1 = b
    if min(ay1, by1) > max(ay0, by0):  # overlapping rows: side by side
        return max(bx0 - ax1, ax0 - bx1, 0)
    if min(ax1, bx1) > max(ax0, bx0):  # overlapping columns: one above the other
        return max(by0 - ay1, ay0 - by1, 0)
    return None


def _submit_targets(elements: Sequence[ScreenElement], field: ScreenElement, how: str) -> list[Target]:
    """Enter in ``field``: its submit button, every clickable element (not a text field, not
    inside or around the field) within the field's height of it, beside, below or above; and
    the field's own content description. Its typed text is not a label and is not read."""
    x0, y0, x1, y1 = field.bounds
    reach = y1 - y0
    buttons = [
        e
        for e in elements
        if e.clickable
        and e is not field
        and not e.is_text_field
        and not e.inside(field)
        and not field.inside(e)
        and (gap := _gap(field.bounds, e.bounds)) is not None
        and gap <= reach
    ]
    targets = [_target(elements, e, how, None) for e in buttons]
    if field.description.strip():
        targets.append(Target(package=field.package, text=field.description, how=how))
    return targets


def _enter_key(elements: Sequence[ScreenElement], pressed: ScreenElement) -> ScreenElement | None:
    """The focused field when ``pressed`` is a keyboard's Enter key (by its label), else ``None``."""
    field = _focused_field(elements)
    if field is None or pressed is field:
        return None
    labels = {normalise_label(pressed.text), normalise_label(pressed.description)}
    return field if labels & ENTER_KEY_LABELS else None


def _press(elements: Sequence[ScreenElement], x: int, y: int, how: str) -> list[Target]:
    """What a press at (x, y) presses, and, on an Enter key, the focused field's submit."""
    pressed = pressed_at(elements, x, y)
    if pressed is None:
        return []
    targets = [_target(elements, pressed, how, (x, y))]
    field = _enter_key(elements, pressed)
    if field is not None:
        targets += _submit_targets(elements, field, "Enter submits")
    return targets


def _grown(bounds: tuple[int, int, int, int], by: int) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = bounds
    return x0 - by, y0 - by, x1 + by, y1 + by


def action_targets(
    elements: Sequence[ScreenElement], action: Action, swipe: Swipe | None = None, slop: int = 0
) -> list[Target]:
    """What ``action`` presses on a screen of ``elements`` (module docstring). ``swipe`` is the
    swipe a scroll, drag or long press becomes on the phone (``None``: none is sent) and
    ``slop`` the phone's touch slop in pixels."""
    if isinstance(action, Click):
        return _press(elements, action.x, action.y, "")
    if isinstance(action, LongPress):
        return _press(elements, action.x, action.y, "held: a tap where no long press is handled")
    if isinstance(action, Type):
        field = _focused_field(elements)
        if "\n" not in action.content or field is None:
            return []  # typing alone inserts text; only Enter acts
        return _submit_targets(elements, field, "Enter submits")
    if isinstance(action, Scroll | Drag) and swipe is not None:
        targets = []
        start = pressed_at(elements, swipe.x1, swipe.y1)
        if start is not None:
            x0, y0, x1, y1 = _grown(start.bounds, slop)
            if swipe.length < slop:
                targets += _press(elements, swipe.x1, swipe.y1, "a swipe under the touch slop: a tap")
            elif x0 <= swipe.x2 < x1 and y0 <= swipe.y2 < y1:
                targets += _press(elements, swipe.x1, swipe.y1, "a swipe that stays on it: a tap")
        if isinstance(action, Drag):
            end = pressed_at(elements, swipe.x2, swipe.y2)
            if end is not None and end is not start:
                targets.append(_target(elements, end, "dropped onto it", (swipe.x2, swipe.y2)))
        return targets
    return []
