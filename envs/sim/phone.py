"""SimPhone: a simulated Android-like phone whose whole state is plain JSON.

>>> from darwin.envs.sim.phone import SimPhone
>>> from darwin.actions import OpenApp
>>> phone = SimPhone(seed=3)
>>> phone.execute(OpenApp(app="Settings"))
>>> phone.foreground
'settings'
>>> saved = phone.snapshot()
>>> phone.press_home(); phone.foreground is None
True
>>> phone.restore(saved); phone.foreground
'settings'
>>> phone.screenshot(size=(252, 560)).shape
(560, 252, 3)
"""

from __future__ import annotations

import copy
import hashlib
import logging
import random
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import orjson

from darwin.actions import (
    Action,
    Answer,
    Click,
    Direction,
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
from darwin.envs.screen_elements import ScreenElement
from darwin.envs.sim.apps import default_apps
from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.i18n import Locale, app_label, check_locale, translate_screen
from darwin.envs.sim.keyboard import add_keyboard
from darwin.envs.sim.perturb import Perturbation, PerturbationConfig
from darwin.envs.sim.render import Renderer
from darwin.envs.sim.ui import HEIGHT, NAV_BAR_H, STATUS_BAR_H, UI, WIDTH, Screen, Widget
from darwin.png import encode_png

logger = logging.getLogger(__name__)

STATE_VERSION = 1
LAUNCHER_PACKAGE = "com.google.android.apps.nexuslauncher"
"""The package the launcher's screen belongs to (as ``uiautomator dump`` names it)."""
LAUNCHER_COLUMNS = 4
LAUNCHER_PAGE_SIZE = 12
"""Icons on one launcher page (three rows of four). Apps past the first twelve, in
:func:`~darwin.envs.sim.apps.default_apps` order (then extra apps), go on later pages, which
a horizontal swipe on the launcher shows: the first page looks as it did before they came."""
VIEW_CLASSES: dict[str, str] = {
    "field": "android.widget.EditText",
    "button": "android.widget.Button",
    "dialog_button": "android.widget.Button",
    "pill": "android.widget.Button",
    "chip": "android.widget.Button",
    "key": "android.widget.Button",
    "icon": "android.widget.ImageButton",
    "fab": "android.widget.ImageButton",
    "navbutton": "android.widget.ImageButton",
}
"""The Android view class each widget kind is dumped as (others: ``android.view.View``), so a
program reading the view hierarchy tells a text field from a button as on a phone."""
LAYOUT_VERSION = 3
"""Bump whenever SimPhone's screens, drawing or listed elements change what an agent sees (2: the
twelve-app launcher; 3: the elements an ``elements`` reader lists: icons by their description,
lists without their scroll offset)."""


def appearance_key(apps: Sequence[SimApp] | None = None) -> str:
    """16 hex digits naming what a SimPhone looks like: the layout version and the installed apps.

    Caches of anything learned from SimPhone screens (the SFT warm start) put it in their key,
    so installing an app or changing the layout never reuses a stale cache::

        >>> from darwin.envs.sim.apps import default_apps
        >>> appearance_key() == appearance_key(default_apps()) != appearance_key(default_apps()[:8])
        True
    """
    installed = list(apps) if apps is not None else default_apps()
    record = {
        "layout": LAYOUT_VERSION,
        "launcher_columns": LAUNCHER_COLUMNS,
        "launcher_page_size": LAUNCHER_PAGE_SIZE,
        "apps": [[a.id, a.label, a.glyph, list(a.color), a.root_screen] for a in installed],
    }
    return hashlib.blake2b(orjson.dumps(record), digest_size=8).hexdigest()


class UnknownAppError(ValueError):
    """``open_app`` named an app that is not installed; lists the installed ones."""


class SimPhone:
    """A simulated phone: launcher, apps with navigation stacks, keyboard, dialogs, perturbations.

    Args:
        seed: picks the perturbations and the initial app data.
        perturbation: which perturbations apply (``PerturbationConfig(enabled=False)`` for none).
        extra_apps: additional :class:`SimApp` instances to install.
        locale: the UI language, ``"en"`` (default) or ``"zh"`` (Simplified Chinese, from each
            app's :attr:`SimApp.zh` and :mod:`darwin.envs.sim.i18n`); the state is the same in both.

    The device is 1080 x 2400 pixels; :meth:`screenshot` renders at that size or smaller.
    """

    width = WIDTH
    height = HEIGHT

    def __init__(
        self,
        seed: int = 0,
        perturbation: PerturbationConfig | None = None,
        extra_apps: Sequence[SimApp] = (),
        locale: str = "en",
    ) -> None:
        self.apps: dict[str, SimApp] = {a.id: a for a in (*default_apps(), *extra_apps)}
        self.locale: Locale = check_locale(locale)
        self._perturbation_config = perturbation or PerturbationConfig()
        self._renderer = Renderer()
        self.seed = seed
        self.state: dict[str, Any] = {}
        self.reset(seed)

    # -- state --------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        """Factory reset: fresh app data for ``seed`` (default: the phone's seed)."""
        if seed is not None:
            self.seed = seed
        rng = random.Random(self.seed)
        self.state = {
            "version": STATE_VERSION,
            "perturb": Perturbation.initial(self.seed, self._perturbation_config, list(self.apps), LAUNCHER_PAGE_SIZE),
            "clock": {"minutes": 9 * 60 + 41, "weekday": 2},
            "foreground": None,
            "focus": None,
            "popup": None,
            "toast": None,
            "answer": None,
            "launches": {},
            "apps": {
                app_id: {"stack": [{"name": app.root_screen}], "data": app.initial_data(rng)}
                for app_id, app in self.apps.items()
            },
        }
        self._changed()

    def snapshot(self) -> dict[str, Any]:
        """A deep copy of the full phone state (plain JSON)."""
        return orjson.loads(orjson.dumps(self.state))

    def restore(self, state: dict[str, Any]) -> None:
        """Replace the phone state by ``state`` (as returned by :meth:`snapshot`)."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"SimPhone state version {state.get('version')!r} != {STATE_VERSION}; take a new snapshot")
        missing = set(self.apps) - set(state["apps"])
        if missing:
            raise ValueError(f"SimPhone state lacks apps {sorted(missing)}; was it taken on a phone with other apps?")
        self.state = orjson.loads(orjson.dumps(state))
        self._changed()

    def fork(self) -> SimPhone:
        """A new phone with a copy of this state (cheap: no rendering, shared app objects)."""
        other = copy.copy(self)
        other.state = orjson.loads(orjson.dumps(self.state))
        other._renderer = self._renderer
        other._changed()
        return other

    def state_key(self) -> bytes:
        """Canonical bytes of the state, for deduplication (e.g. by the oracle's search)."""
        return orjson.dumps(self.state, option=orjson.OPT_SORT_KEYS)

    @property
    def perturbation(self) -> Perturbation:
        return Perturbation(self.state)

    @property
    def foreground(self) -> str | None:
        return self.state["foreground"]

    def app_data(self, app_id: str) -> dict[str, Any]:
        return self.state["apps"][app_id]["data"]

    def top_screen(self, app_id: str) -> dict[str, Any]:
        return self.state["apps"][app_id]["stack"][-1]

    @property
    def dark(self) -> bool:
        return bool(self.state["apps"].get("settings", {}).get("data", {}).get("dark_theme", False))

    def set_locale(self, locale: str) -> None:
        """Show the UI in ``locale`` (``"en"``, ``"zh"``) from the next screen on; state is unchanged."""
        locale = check_locale(locale)
        if locale != self.locale:
            self.locale = locale
            self._changed()

    def _changed(self) -> None:
        self._layout: Screen | None = None
        self._shots: dict[tuple[int, int], np.ndarray] = {}

    # -- apps ---------------------------------------------------------------------------
    def resolve_app(self, name: str) -> SimApp:
        """The app called ``name`` (label, id, package or alias; case-insensitive; its Chinese label too)."""
        key = name.strip().lower()
        for app in self.apps.values():
            names = {
                app.label.lower(),
                app.id.lower(),
                app.package.lower(),
                *(a.lower() for a in app.aliases),
                app_label(app, "zh").lower(),
            }
            if key in names:
                return app
        raise UnknownAppError(
            f"no app named {name!r} on this phone; installed: {', '.join(a.label for a in self.apps.values())}"
        )

    def launch(self, app_id: str) -> None:
        """Bring an app to the foreground, resuming its stack; may show its launch pop-up."""
        app = self.apps[app_id]
        count = self.state["launches"].get(app_id, 0) + 1
        self.state["launches"][app_id] = count
        self.state["foreground"] = app_id
        self.state["focus"] = None
        self.state["toast"] = None
        popup = app.popup()
        if popup is not None and self.perturbation.shows_popup(app_id, count):
            self.state["popup"] = {"app": app_id, "title": popup[0], "body": popup[1], "dismiss": popup[2]}
        else:
            self.state["popup"] = None

    def go_home(self, reset_app: bool = False) -> None:
        fg = self.state["foreground"]
        if reset_app and fg is not None:
            root = self.apps[fg].root_screen
            self.state["apps"][fg]["stack"] = [{"name": root}]
        self.state["foreground"] = None
        self.state["focus"] = None
        self.state["popup"] = None
        self.state["toast"] = None
        self.state.pop("launcher_page", None)  # home shows the first launcher page
        # An answer belongs to the episode that gave it (an answer ends its episode, and
        # episodes end by going home): a later answer task must not find it already given.
        self.state["answer"] = None

    def press_home(self) -> None:
        self.go_home()
        self._changed()

    def dismiss_popup_if_any(self) -> None:
        """Close a launch pop-up (test helper; agents must tap 'Not now' or press back)."""
        self.state["popup"] = None
        self._changed()

    def advance_clock(self, minutes: int) -> None:
        """Move the status-bar clock forward (called between episodes, never within one)."""
        total = self.state["clock"]["minutes"] + minutes
        self.state["clock"]["minutes"] = total % (24 * 60)
        self.state["clock"]["weekday"] = (self.state["clock"]["weekday"] + total // (24 * 60)) % 7
        self._changed()

    # -- layout -------------------------------------------------------------------------
    def layout(self) -> Screen:
        """The current screen's widgets (cached until the state changes)."""
        if self._layout is None:
            self._layout = self._build_layout()
        return self._layout

    def screen_elements(self) -> list[ScreenElement]:
        """The current screen as view-hierarchy elements (what ``uiautomator dump`` lists), in
        paint order; behind a dialog only the dialog's elements are clickable."""
        screen = self.layout()
        fg = self.foreground
        package = self.apps[fg].package if fg is not None else LAUNCHER_PACKAGE
        return [
            ScreenElement(
                # an empty field shows its hint; a list's text is its scroll offset, never drawn
                # (a RecyclerView has no text in a dump)
                text="" if w.kind == "scroller" else " ".join(t for t in (w.text, w.subtitle) if t) or w.placeholder,
                description=w.description or w.glyph,  # what an icon does, as Android's content description
                package=package,
                bounds=(w.box[0], w.box[1], w.box[2], w.box[3]),
                clickable=w.interactive and (not screen.modal or screen.reacts_in_modal(w)),
                focused=w.focused,
                class_name=VIEW_CLASSES.get(w.kind, "android.view.View"),
            )
            for w in screen.widgets
        ]

    def untranslated_layout(self) -> Screen:
        """The current screen as built in English (the oracle reads its texts); not cached."""
        return self.layout() if self.locale == "en" else self._build_layout(translated=False)

    def _build_layout(self, translated: bool = True) -> Screen:
        ui = UI(top=STATUS_BAR_H, bottom=HEIGHT - NAV_BAR_H)
        fg = self.state["foreground"]
        if fg is None:
            self._build_launcher(ui)
        else:
            ctx = AppContext(self, self.apps[fg])
            if self.state["focus"] is not None:
                ui.bottom -= 760  # keyboard reserves the bottom; content lays out above it
            self.apps[fg].build(ui, ctx)
            focused = ui.screen.focused_field()
            if focused is None and self.state["focus"] is not None:
                self.state["focus"] = None  # focus on a field no longer on screen
            if focused is not None:
                add_keyboard(self, ui, focused)
        screen = ui.screen
        screen.widgets.insert(
            0, Widget(id="statusbar", kind="statusbar", box=(0, 0, WIDTH, STATUS_BAR_H), text=self._clock_text())
        )
        if fg is None:
            screen.widgets.insert(0, Widget(id="wallpaper", kind="wallpaper", box=(0, 0, WIDTH, HEIGHT)))
        self._add_nav_bar(screen)
        toast = self.state["toast"]
        if toast:
            screen.widgets.append(
                Widget(
                    id="toast",
                    kind="toast",
                    box=(120, HEIGHT - NAV_BAR_H - 300, WIDTH - 120, HEIGHT - NAV_BAR_H - 180),
                    text=toast,
                )
            )
        popup = self.state["popup"]
        if popup is not None:
            dui = UI()
            dui.screen = screen
            dui.dialog(
                "popup", popup["title"], popup["body"], [("popup.dismiss", popup["dismiss"], self._dismiss_popup)]
            )
        if translated and self.locale != "en":
            translate_screen(screen, self.locale, self.apps, fg, popup["app"] if popup is not None else None)
        return screen

    def _dismiss_popup(self) -> None:
        self.state["popup"] = None

    def _clock_text(self) -> str:
        m = self.state["clock"]["minutes"]
        return f"{m // 60}:{m % 60:02d}"

    def _build_launcher(self, ui: UI) -> None:
        order = [a for a in self.perturbation.icon_order if a in self.apps]
        order += [a for a in self.apps if a not in order]
        page = min(self.state.get("launcher_page", 0), self._launcher_pages() - 1)
        order = order[page * LAUNCHER_PAGE_SIZE : (page + 1) * LAUNCHER_PAGE_SIZE]
        cell_w = WIDTH // LAUNCHER_COLUMNS
        cell_h = 300
        top = STATUS_BAR_H + 260
        ui.add(
            Widget(
                id="launcher.date",
                kind="launcher_date",
                box=(0, STATUS_BAR_H + 40, WIDTH, STATUS_BAR_H + 220),
                text=self._date_text(),
            )
        )
        for i, app_id in enumerate(order):
            app = self.apps[app_id]
            col, row = i % LAUNCHER_COLUMNS, i // LAUNCHER_COLUMNS
            x0, y0 = col * cell_w, top + row * cell_h
            ui.add(
                Widget(
                    id=f"launcher.{app_id}",
                    kind="app_icon",
                    box=(x0, y0, x0 + cell_w, y0 + cell_h),
                    text=app.label,
                    glyph=app.glyph,
                    on_tap=self._launcher_tap(app_id),
                    role=f"app:{app_id}",
                )
            )

    def _launcher_pages(self) -> int:
        return max(1, -(-len(self.apps) // LAUNCHER_PAGE_SIZE))

    def _turn_launcher_page(self, step: int) -> None:
        """Show the next (``step`` 1) or previous (-1) launcher page, if there is one."""
        page = max(0, min(self._launcher_pages() - 1, self.state.get("launcher_page", 0) + step))
        if page:
            self.state["launcher_page"] = page
        else:
            self.state.pop("launcher_page", None)

    def _launcher_tap(self, app_id: str):
        return lambda: self.launch(app_id)

    def _date_text(self) -> str:
        days = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
        return f"{days[self.state['clock']['weekday']]}, Nov 21"

    def _add_nav_bar(self, screen: Screen) -> None:
        y0 = HEIGHT - NAV_BAR_H
        third = WIDTH // 3
        screen.widgets.append(Widget(id="navbar", kind="navbar", box=(0, y0, WIDTH, HEIGHT)))
        screen.widgets.append(
            Widget(id="nav.back", kind="navbutton", box=(0, y0, third, HEIGHT), glyph="<", on_tap=self._back)
        )
        screen.widgets.append(
            Widget(id="nav.home", kind="navbutton", box=(third, y0, 2 * third, HEIGHT), glyph="o", on_tap=self.go_home)
        )

    # -- actions ------------------------------------------------------------------------
    def execute(self, action: Action) -> None:
        """Apply one action. Actions that hit nothing are no-ops, as on a real phone.

        Raises :class:`UnknownAppError` for ``open_app`` of an app that is not installed
        (after leaving the phone unchanged), so callers can report it.
        """
        if isinstance(action, Click):
            self._tap(action.x, action.y, long=False)
        elif isinstance(action, LongPress):
            self._tap(action.x, action.y, long=True)
        elif isinstance(action, Type):
            self._type(action.content)
        elif isinstance(action, Scroll):
            self._scroll(action.x, action.y, action.direction)
        elif isinstance(action, Drag):
            self._drag(action)
        elif isinstance(action, OpenApp):
            app = self.resolve_app(action.app)
            self.launch(app.id)
        elif isinstance(action, PressHome):
            self.go_home()
        elif isinstance(action, PressBack):
            self._back()
        elif isinstance(action, Answer):
            self.state["answer"] = action.content
        elif isinstance(action, (Wait, Finished)):
            pass
        else:  # pragma: no cover - the union is closed
            raise TypeError(f"not an action: {action!r}")
        self._changed()

    def _tap(self, x: int, y: int, long: bool) -> None:
        if not (0 <= x < WIDTH and 0 <= y < HEIGHT):
            return
        widget = self.layout().hit(x, y)
        if widget is None:
            return
        self.state["toast"] = None
        callback = widget.on_long_press if long else widget.on_tap
        if callback is not None:
            callback()

    def _type(self, content: str) -> None:
        """Type into the focused field; each newline submits a single-line field."""
        for i, chunk in enumerate(content.split("\n")):
            field = self.layout().focused_field()
            if field is None or field.field_key is None:
                return
            if i > 0:
                if field.multiline:
                    chunk = "\n" + chunk
                else:
                    self._submit(field)
                    self._changed()
                    field = self.layout().focused_field()
                    if field is None or field.field_key is None:
                        return
            if chunk:
                self._append_text(field, chunk)
                self._changed()

    def _append_text(self, field: Widget, text: str) -> None:
        assert self.state["foreground"] is not None and field.field_key is not None
        screen = self.top_screen(self.state["foreground"])
        fields = screen.setdefault("fields", {})
        fields[field.field_key] = fields.get(field.field_key, "") + text

    def key_press(self, key: str) -> None:
        """On-screen keyboard key: a character, ``"backspace"`` or ``"enter"``."""
        field = self.layout().focused_field()
        if field is None or field.field_key is None:
            return
        screen = self.top_screen(self.state["foreground"])
        fields = screen.setdefault("fields", {})
        if key == "backspace":
            fields[field.field_key] = fields.get(field.field_key, "")[:-1]
        elif key == "enter":
            if field.multiline:
                fields[field.field_key] = fields.get(field.field_key, "") + "\n"
            else:
                self._submit(field)
        else:
            fields[field.field_key] = fields.get(field.field_key, "") + key

    def commit_text(self, text: str) -> bool:
        """Insert ``text`` verbatim into the focused field, like an IME's ``commitText``.

        Unlike the ``type`` action, newlines and tabs are plain characters here: nothing is
        submitted. Returns ``False`` (and changes nothing) when no text field has focus.
        Used by the ADB device backend (:mod:`darwin.envs.sim.device`).
        """
        field = self.layout().focused_field()
        if field is None or field.field_key is None:
            return False
        if text:
            self._append_text(field, text)
            self._changed()
        return True

    def press_key(self, key: str) -> None:
        """A hardware key event into the focused field (:meth:`key_press`), then refresh the screen."""
        self.key_press(key)
        self._changed()

    def _submit(self, field: Widget) -> None:
        value = self.top_screen(self.state["foreground"]).get("fields", {}).get(field.field_key, "")
        if field.on_submit is not None:
            field.on_submit(value)

    def _scroll(self, x: int, y: int, direction: Direction, rows: int | None = None) -> None:
        if self.state["foreground"] is None and direction in (Direction.LEFT, Direction.RIGHT):
            self._turn_launcher_page(1 if direction == Direction.RIGHT else -1)  # right: the page to the right
            return
        scroller = self.layout().scroller_at(x, y)
        if scroller is None or direction in (Direction.LEFT, Direction.RIGHT):
            return
        x0, y0, x1, y1 = scroller.box
        page = max(1, (y1 - y0) // 168 - 1)
        step = rows if rows is not None else page
        delta = step if direction == Direction.DOWN else -step
        screen = self.top_screen(self.state["foreground"])
        scroll = screen.setdefault("scroll", {})
        key = scroller.scroll_key
        assert key is not None
        scroll[key] = max(0, min(scroller.scroll_max, int(scroll.get(key, 0)) + delta))

    def _drag(self, action: Drag) -> None:
        dx, dy = action.x2 - action.x1, action.y2 - action.y1
        if self.state["foreground"] is None and abs(dx) >= 100 and abs(dx) > abs(dy):
            self._turn_launcher_page(1 if dx < 0 else -1)  # dragging the page leftwards shows the next
            return
        if abs(dy) < 100 or abs(dy) < abs(action.x2 - action.x1):
            return
        rows = max(1, abs(dy) // 168)
        # Dragging content upwards reveals what is below, like scrolling down.
        self._scroll(action.x1, action.y1, Direction.DOWN if dy < 0 else Direction.UP, rows=rows)

    def _back(self) -> None:
        if self.state["popup"] is not None:
            self.state["popup"] = None
            return
        if self.state["focus"] is not None:
            self.state["focus"] = None
            return
        fg = self.state["foreground"]
        if fg is None:
            return
        if self.apps[fg].handle_back(AppContext(self, self.apps[fg])):
            return
        stack = self.state["apps"][fg]["stack"]
        if len(stack) > 1:
            stack.pop()
        else:
            self.go_home(reset_app=True)

    # -- pixels -------------------------------------------------------------------------
    def screenshot(self, size: tuple[int, int] | None = None) -> np.ndarray:
        """The screen as an ``(H, W, 3)`` uint8 array at ``size = (W, H)`` (default full size).

        Deterministic: the same state gives byte-identical pixels at every size.
        """
        w, h = size or (WIDTH, HEIGHT)
        if not (0 < w <= WIDTH and 0 < h <= HEIGHT):
            raise ValueError(f"screenshot size must be within 1..{WIDTH} x 1..{HEIGHT}, got {w}x{h}")
        key = (w, h)
        if key not in self._shots:
            self._shots = {key: self._renderer.render(self.layout(), self, (w, h))}  # keep only the latest size
        return self._shots[key]

    def screenshot_png(self, size: tuple[int, int] | None = None) -> bytes:
        """PNG bytes of :meth:`screenshot` (what ``adb exec-out screencap -p`` returns)."""
        return encode_png(self.screenshot(size))

    # -- introspection ------------------------------------------------------------------
    def interactive_widgets(self) -> Iterable[Widget]:
        """Widgets that react to input on the current screen (respecting modal dialogs)."""
        screen = self.layout()
        for w in screen.widgets:
            if w.on_tap is None:
                continue
            if screen.modal and not screen.reacts_in_modal(w):
                continue
            yield w
