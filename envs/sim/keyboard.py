"""The on-screen keyboard shown while a text field has focus.

Keys are ordinary widgets, so an agent can type by tapping them as well as with ``type``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from darwin.envs.sim.ui import HEIGHT, KEYBOARD_H, NAV_BAR_H, UI, WIDTH, Widget

if TYPE_CHECKING:
    from darwin.envs.sim.phone_view import PhoneView

KEY_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


def add_keyboard(phone: PhoneView, ui: UI, focused: Widget) -> None:
    """Append the keyboard widgets (base plate, letter keys, space, backspace, enter)."""
    top = HEIGHT - NAV_BAR_H - KEYBOARD_H
    ui.add(Widget(id="keyboard", kind="keyboard", box=(0, top, WIDTH, HEIGHT - NAV_BAR_H)))
    key_h = 150
    gap = 30
    y = top + 30
    key_w = WIDTH // 10
    for row in KEY_ROWS:
        x = (WIDTH - key_w * len(row)) // 2
        for ch in row:
            ui.add(
                Widget(
                    id=f"key.{ch}",
                    kind="key",
                    box=(x + 6, y, x + key_w - 6, y + key_h),
                    text=ch,
                    on_tap=_presser(phone, ch),
                )
            )
            x += key_w
        y += key_h + gap
    # Last row: backspace, space, enter (its label says what submitting does).
    ui.add(
        Widget(
            id="key.backspace", kind="key", box=(12, y, 200, y + key_h), text="<x", on_tap=_presser(phone, "backspace")
        )
    )
    ui.add(Widget(id="key.space", kind="key", box=(212, y, 760, y + key_h), text="space", on_tap=_presser(phone, " ")))
    enter_label = "new line" if focused.multiline else "go"
    ui.add(
        Widget(
            id="key.enter",
            kind="key",
            box=(772, y, WIDTH - 12, y + key_h),
            text=enter_label,
            on_tap=_presser(phone, "enter"),
            role="primary",
        )
    )


def _presser(phone: PhoneView, key: str):
    return lambda: phone.key_press(key)
