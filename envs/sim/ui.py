"""SimPhone's UI toolkit: widgets with bounds and callbacks, laid out top to bottom.

Apps describe a screen by calling :class:`UI` methods (``app_bar``, ``field``, ``row``,
``toggle_row``, ``list`` ...). The result is a flat list of :class:`Widget` s in logical
device pixels (1080 x 2400). Callbacks are closures over the phone's JSON state, rebuilt
at every step, so the state itself stays plain JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

WIDTH = 1080
HEIGHT = 2400
STATUS_BAR_H = 96
NAV_BAR_H = 120
KEYBOARD_H = 760
ROW_H = 168
APP_BAR_H = 176
MARGIN = 48

Box = tuple[int, int, int, int]
OPAQUE_KINDS = frozenset({"dialog", "keyboard", "appbar", "navbar", "statusbar"})
Callback = Callable[[], None]
SubmitCallback = Callable[[str], None]


@dataclass
class Widget:
    """One thing on screen. ``id`` is semantic and stable across perturbations."""

    id: str
    kind: str
    box: Box
    text: str = ""
    subtitle: str = ""
    checked: bool | None = None
    on_tap: Callback | None = None
    on_long_press: Callback | None = None
    # Text fields: the key of the field value inside the screen's state and a submit hook.
    field_key: str | None = None
    on_submit: SubmitCallback | None = None
    multiline: bool = False
    focused: bool = False
    placeholder: str = ""
    # Scroll containers: the state key of the offset and how many rows it can scroll.
    scroll_key: str | None = None
    scroll_max: int = 0
    role: str = "surface"
    glyph: str = ""
    description: str = ""
    """What the widget does, for screen readers (Android's content description): an icon's
    ``glyph`` says nothing to a program (``➤`` is "Send"); empty: the glyph stands for itself."""

    @property
    def center(self) -> tuple[int, int]:
        x0, y0, x1, y1 = self.box
        return (x0 + x1) // 2, (y0 + y1) // 2

    def contains(self, x: int, y: int) -> bool:
        x0, y0, x1, y1 = self.box
        return x0 <= x < x1 and y0 <= y < y1

    @property
    def interactive(self) -> bool:
        return self.on_tap is not None or self.on_long_press is not None or self.field_key is not None


@dataclass
class Screen:
    """A laid-out screen: widgets in paint order (later widgets are on top)."""

    widgets: list[Widget] = field(default_factory=list)
    modal: bool = False
    """True while a dialog is shown: only widgets with ``kind`` starting 'dialog' react."""

    def hit(self, x: int, y: int) -> Widget | None:
        """Top-most interactive widget under (x, y); opaque surfaces and modal dialogs block."""
        for w in reversed(self.widgets):
            if not w.contains(x, y):
                continue
            if self.modal and not self.reacts_in_modal(w):
                return None
            if w.interactive:
                return w
            if w.kind in OPAQUE_KINDS:
                return None
        return None

    @staticmethod
    def reacts_in_modal(w: Widget) -> bool:
        return w.kind.startswith("dialog") or w.kind == "navbutton"

    def scroller_at(self, x: int, y: int) -> Widget | None:
        if self.modal:
            return None
        for w in reversed(self.widgets):
            if w.scroll_key is not None and w.contains(x, y):
                return w
        return None

    def find(self, widget_id: str) -> Widget | None:
        for w in self.widgets:
            if w.id == widget_id:
                return w
        return None

    def focused_field(self) -> Widget | None:
        for w in self.widgets:
            if w.field_key is not None and w.focused:
                return w
        return None

    def signature(self) -> str:
        """Canonical text of the screen (kinds, texts, states; no positions or colours)."""
        parts = []
        for w in self.widgets:
            if w.kind in ("wallpaper", "statusbar", "navbar"):
                continue
            parts.append(f"{w.kind}:{w.id}:{w.text}:{w.checked}")
        return "|".join(parts)


@dataclass
class Row:
    """One list row description for :meth:`UI.list`."""

    id: str
    text: str
    subtitle: str = ""
    on_tap: Callback | None = None
    checked: bool | None = None
    trailing: str = ""
    on_trailing: Callback | None = None
    glyph: str = ""


class UI:
    """Vertical layout builder. Apps call its methods in reading order.

    >>> ui = UI(top=96, bottom=2280)
    >>> ui.app_bar("Settings")
    >>> ui.row("wifi", "Network & internet", on_tap=lambda: None)
    >>> [w.kind for w in ui.screen.widgets]
    ['appbar', 'row']
    """

    def __init__(self, top: int = STATUS_BAR_H, bottom: int = HEIGHT - NAV_BAR_H) -> None:
        self.screen = Screen()
        self.y = top
        self.bottom = bottom
        self._bottom_items: list[Widget] = []

    # -- primitives -------------------------------------------------------------------
    def add(self, widget: Widget) -> Widget:
        self.screen.widgets.append(widget)
        return widget

    def space(self, h: int) -> None:
        self.y += h

    # -- components -------------------------------------------------------------------
    def app_bar(
        self,
        title: str,
        on_back: Callback | None = None,
        actions: Sequence[tuple[str, str, Callback] | tuple[str, str, Callback, str]] = (),
    ) -> None:
        """Title bar with an optional back arrow and icon actions ``(id, glyph, callback)`` or
        ``(id, glyph, callback, description)`` (what the icon does: its content description)."""
        y0 = self.y
        self.add(Widget(id="appbar", kind="appbar", box=(0, y0, WIDTH, y0 + APP_BAR_H), text=title, role="bar"))
        if on_back is not None:
            self.add(Widget(id="nav_up", kind="icon", box=(16, y0 + 24, 144, y0 + 152), glyph="<", on_tap=on_back))
        x1 = WIDTH - 16
        for aid, glyph, cb, *description in reversed(list(actions)):
            self.add(
                Widget(
                    id=aid,
                    kind="icon",
                    box=(x1 - 128, y0 + 24, x1, y0 + 152),
                    glyph=glyph,
                    on_tap=cb,
                    description="".join(description),
                )
            )
            x1 -= 136
        self.y += APP_BAR_H

    def title(self, text: str, size: str = "large") -> None:
        h = 132 if size == "large" else 96
        self.add(
            Widget(
                id=f"title:{text}", kind=f"title_{size}", box=(MARGIN, self.y, WIDTH - MARGIN, self.y + h), text=text
            )
        )
        self.y += h

    def label(self, wid: str, text: str, h: int = 96, role: str = "muted") -> None:
        self.add(Widget(id=wid, kind="label", box=(MARGIN, self.y, WIDTH - MARGIN, self.y + h), text=text, role=role))
        self.y += h

    def field(
        self,
        wid: str,
        *,
        value: str,
        focused: bool,
        placeholder: str,
        on_focus: Callback,
        on_submit: SubmitCallback | None,
        on_clear: Callback | None,
        multiline: bool = False,
        h: int = 144,
    ) -> None:
        """A text field; tapping focuses it, a clear button appears while it holds text."""
        y0 = self.y + 16
        box = (MARGIN, y0, WIDTH - MARGIN, y0 + h)
        self.add(
            Widget(
                id=wid,
                kind="field",
                box=box,
                text=value,
                placeholder=placeholder,
                focused=focused,
                on_tap=on_focus,
                field_key=wid,
                on_submit=on_submit,
                multiline=multiline,
            )
        )
        if value and on_clear is not None:
            self.add(
                Widget(
                    id=f"{wid}.clear",
                    kind="icon",
                    box=(box[2] - 128, y0 + 8, box[2] - 8, y0 + h - 8),
                    glyph="x",
                    on_tap=on_clear,
                )
            )
        self.y = y0 + h + 16

    def button(self, wid: str, text: str, on_tap: Callback | None, role: str = "primary", h: int = 140) -> None:
        y0 = self.y + 16
        self.add(
            Widget(id=wid, kind="button", box=(MARGIN, y0, WIDTH - MARGIN, y0 + h), text=text, on_tap=on_tap, role=role)
        )
        self.y = y0 + h + 16

    def row(
        self,
        wid: str,
        text: str,
        subtitle: str = "",
        on_tap: Callback | None = None,
        checked: bool | None = None,
        glyph: str = "",
    ) -> None:
        kind = "toggle_row" if checked is not None else "row"
        self.add(
            Widget(
                id=wid,
                kind=kind,
                box=(0, self.y, WIDTH, self.y + ROW_H),
                text=text,
                subtitle=subtitle,
                on_tap=on_tap,
                checked=checked,
                glyph=glyph,
            )
        )
        self.y += ROW_H

    def toggle_row(self, wid: str, text: str, checked: bool, on_toggle: Callback, subtitle: str = "") -> None:
        self.row(wid, text, subtitle=subtitle, on_tap=on_toggle, checked=checked)

    def buttons_row(self, items: Sequence[tuple[str, str, Callback | None, bool]], h: int = 132) -> None:
        """Equal-width chips/buttons ``(id, text, callback, selected)`` on one line."""
        n = max(1, len(items))
        gap = 16
        w = (WIDTH - 2 * MARGIN - gap * (n - 1)) // n
        y0 = self.y + 12
        for i, (wid, text, cb, selected) in enumerate(items):
            x0 = MARGIN + i * (w + gap)
            self.add(Widget(id=wid, kind="chip", box=(x0, y0, x0 + w, y0 + h), text=text, on_tap=cb, checked=selected))
        self.y = y0 + h + 12

    def grid(self, items: Sequence[tuple[str, str, Callback | None, bool]], columns: int, cell_h: int = 132) -> None:
        """Chips in a grid, ``columns`` per line."""
        for start in range(0, len(items), columns):
            self.buttons_row(items[start : start + columns], h=cell_h)

    def tabs(self, items: Sequence[tuple[str, str, Callback | None]], selected: str, h: int = 132) -> None:
        n = max(1, len(items))
        w = WIDTH // n
        for i, (wid, text, cb) in enumerate(items):
            self.add(
                Widget(
                    id=wid,
                    kind="tab",
                    box=(i * w, self.y, (i + 1) * w, self.y + h),
                    text=text,
                    on_tap=cb,
                    checked=(wid == selected),
                )
            )
        self.y += h

    def list(self, scroll_key: str, offset: int, rows: Sequence[Row], reserve_bottom: int = 0) -> None:
        """A scrollable list: ``offset`` rows are scrolled away; rows that do not fit are hidden."""
        top = self.y
        bottom = self.bottom - reserve_bottom
        visible = max(1, (bottom - top) // ROW_H)
        offset = max(0, min(offset, max(0, len(rows) - visible)))
        self.add(
            Widget(
                id=f"scroll:{scroll_key}",
                kind="scroller",
                box=(0, top, WIDTH, bottom),
                scroll_key=scroll_key,
                scroll_max=max(0, len(rows) - visible),
                checked=None,
                text=str(offset),
            )
        )
        for r in rows[offset : offset + visible]:
            self.row(r.id, r.text, subtitle=r.subtitle, on_tap=r.on_tap, checked=r.checked, glyph=r.glyph)
            if r.trailing:
                y1 = self.y
                self.add(
                    Widget(
                        id=f"{r.id}.action",
                        kind="pill",
                        box=(WIDTH - 330, y1 - ROW_H + 34, WIDTH - MARGIN, y1 - 34),
                        text=r.trailing,
                        on_tap=r.on_trailing,
                    )
                )
        self.y = bottom

    def card(self, wid: str, title: str, body: str, h: int = 300, on_tap: Callback | None = None) -> None:
        y0 = self.y + 16
        self.add(
            Widget(
                id=wid, kind="card", box=(MARGIN, y0, WIDTH - MARGIN, y0 + h), text=title, subtitle=body, on_tap=on_tap
            )
        )
        self.y = y0 + h + 16

    # -- bottom-anchored components ---------------------------------------------------
    def bottom_nav(self, items: Sequence[tuple[str, str, Callback | None]], selected: str, h: int = 168) -> None:
        n = max(1, len(items))
        w = WIDTH // n
        y0 = self.bottom - h
        for i, (wid, text, cb) in enumerate(items):
            self.add(
                Widget(
                    id=wid,
                    kind="navitem",
                    box=(i * w, y0, (i + 1) * w, y0 + h),
                    text=text,
                    on_tap=cb,
                    checked=(wid == selected),
                )
            )
        self.bottom = y0

    def fab(self, wid: str, glyph: str, on_tap: Callback, text: str = "") -> None:
        size = 180
        x1, y1 = WIDTH - MARGIN, self.bottom - MARGIN
        self.add(Widget(id=wid, kind="fab", box=(x1 - size, y1 - size, x1, y1), glyph=glyph, text=text, on_tap=on_tap))

    def dialog(self, wid: str, title: str, body: str, buttons: Sequence[tuple[str, str, Callback]]) -> None:
        """A modal dialog centred on screen; only its buttons react while it is shown."""
        self.screen.modal = True
        h = 620
        y0 = (HEIGHT - h) // 2
        self.add(Widget(id=wid, kind="dialog", box=(96, y0, WIDTH - 96, y0 + h), text=title, subtitle=body))
        n = max(1, len(buttons))
        bw = (WIDTH - 2 * 96 - 64 - 24 * (n - 1)) // n
        for i, (bid, text, cb) in enumerate(buttons):
            x0 = 96 + 32 + i * (bw + 24)
            self.add(
                Widget(id=bid, kind="dialog_button", box=(x0, y0 + h - 180, x0 + bw, y0 + h - 40), text=text, on_tap=cb)
            )
