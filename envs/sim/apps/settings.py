"""Settings: notifications (notification history) and display (dark theme), plus distractors."""

from __future__ import annotations

import random
from typing import Any

from pydantic import Field, field_validator

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.apps.settings_zh import ZH
from darwin.envs.sim.setups import setup_step
from darwin.envs.sim.ui import UI, Row
from darwin.predicates import Check, PredicateParams, data, nav_cost, predicate, top

MAIN_ENTRIES = (
    ("network", "Network & internet", "Wi-Fi, mobile, data usage", "W"),
    ("devices", "Connected devices", "Bluetooth, pairing", "B"),
    ("apps", "Apps", "Recent apps, default apps", "A"),
    ("notifications", "Notifications", "Notification history, conversations", "N"),
    ("battery", "Battery", "100%", "b"),
    ("storage", "Storage", "38% used - 79 GB free", "S"),
    ("sound", "Sound & vibration", "Volume, haptics, Do Not Disturb", "s"),
    ("display", "Display", "Dark theme, font size, brightness", "D"),
    ("wallpaper", "Wallpaper & style", "Colours, themed icons", "w"),
    ("accessibility", "Accessibility", "Display, interaction, audio", "a"),
    ("security", "Security & privacy", "App security, device lock", "L"),
    ("location", "Location", "On - 3 apps have access", "l"),
    ("system", "System", "Languages, gestures, time, backup", "i"),
)
GENERIC_TOGGLES = {
    "network": ("Wi-Fi", "Mobile data", "Airplane mode"),
    "devices": ("Bluetooth", "NFC"),
    "battery": ("Battery Saver", "Adaptive Battery"),
    "sound": ("Vibrate for calls", "Touch sounds"),
    "location": ("Use location",),
    "accessibility": ("Color inversion", "Extra dim"),
    "security": ("Show passwords",),
    "wallpaper": ("Themed icons",),
    "system": ("Automatic updates",),
    "apps": ("Show system apps",),
    "storage": ("Storage manager",),
}
APPS_WITH_NOTIFICATIONS = ("Amazon Shopping", "Booking.com", "Chrome", "Clock", "Google Play Store", "X")
TOGGLE_KEYS = tuple(f"{k}:{t}" for k, ts in GENERIC_TOGGLES.items() for t in ts)
"""Keys of the section toggles in ``data["toggles"]`` (``"network:Wi-Fi"``)."""
TIMEOUTS = ("15 seconds", "30 seconds", "1 minute", "2 minutes", "5 minutes", "10 minutes", "30 minutes")


class SettingsApp(SimApp):
    """The system Settings app; its data also holds phone-wide settings (dark theme)."""

    id = "settings"
    label = "Settings"
    package = "com.android.settings"
    activity = "com.android.settings.Settings"
    color = (96, 125, 139)
    glyph = "S"
    aliases = ("system settings",)
    zh = ZH

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        return {
            "dark_theme": False,
            "notification_history": False,
            "hide_silent": rng.random() < 0.5,
            "notification_dots": True,
            "adaptive_brightness": True,
            "screen_timeout": "30 seconds",
            "app_notifications": {name: True for name in APPS_WITH_NOTIFICATIONS},
            "toggles": {f"{k}:{t}": rng.random() < 0.5 for k, ts in GENERIC_TOGGLES.items() for t in ts},
        }

    def popup(self) -> None:
        return None  # the system app never nags

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        d = ctx.data
        if name == "home":
            ui.app_bar("Settings")
            rows = [
                Row(
                    f"settings.{key}",
                    title,
                    sub,
                    on_tap=ctx.pusher(key if key in ("notifications", "display") else "generic", section=key),
                    glyph=g,
                )
                for key, title, sub, g in MAIN_ENTRIES
            ]
            ui.list("main", ctx.scroll_offset("main"), rows)
        elif name == "notifications":
            ui.app_bar("Notifications", on_back=ctx.popper())
            ui.row(
                "settings.app_notifications",
                "App notifications",
                "Control notifications from individual apps",
                on_tap=ctx.pusher("app_notifications"),
            )
            ui.row(
                "settings.notification_history",
                "Notification history",
                "Show recent and snoozed notifications",
                on_tap=ctx.pusher("notification_history"),
            )
            ui.row("settings.conversations", "Conversations", "No priority conversations")
            ui.toggle_row(
                "settings.hide_silent",
                "Hide silent notifications in status bar",
                d["hide_silent"],
                _flip(d, "hide_silent"),
            )
            ui.toggle_row(
                "settings.dots", "Notification dot on app icon", d["notification_dots"], _flip(d, "notification_dots")
            )
        elif name == "notification_history":
            ui.app_bar("Notification history", on_back=ctx.popper())
            ui.toggle_row(
                "settings.use_notification_history",
                "Use notification history",
                d["notification_history"],
                _flip(d, "notification_history"),
            )
            ui.label(
                "settings.history_hint",
                "Recent notifications appear here"
                if d["notification_history"]
                else "Turn on notification history to see recent\nand snoozed notifications",
                h=160,
            )
        elif name == "app_notifications":
            ui.app_bar("App notifications", on_back=ctx.popper())
            rows = [
                Row(f"settings.notif.{app}", app, checked=on, on_tap=_flip(d["app_notifications"], app))
                for app, on in d["app_notifications"].items()
            ]
            ui.list("apps", ctx.scroll_offset("apps"), rows)
        elif name == "display":
            ui.app_bar("Display", on_back=ctx.popper())
            ui.title("Appearance", size="small")
            ui.toggle_row(
                "settings.dark_theme",
                "Dark theme",
                d["dark_theme"],
                _flip(d, "dark_theme"),
                subtitle="Use dark background",
            )
            ui.row("settings.font_size", "Font size and text", "Default")
            ui.title("Brightness", size="small")
            ui.toggle_row(
                "settings.adaptive_brightness",
                "Adaptive brightness",
                d["adaptive_brightness"],
                _flip(d, "adaptive_brightness"),
            )
            ui.row("settings.screen_timeout", "Screen timeout", d["screen_timeout"], on_tap=ctx.pusher("timeout"))
        elif name == "timeout":
            ui.app_bar("Screen timeout", on_back=ctx.popper())
            rows = [
                Row(
                    f"settings.timeout.{t}",
                    t,
                    checked=(d["screen_timeout"] == t),
                    on_tap=_setter(d, "screen_timeout", t, ctx),
                )
                for t in TIMEOUTS
            ]
            ui.list("timeouts", ctx.scroll_offset("timeouts"), rows)
        elif name == "generic":
            section = ctx.screen["section"]
            title = next(t for k, t, _, _ in MAIN_ENTRIES if k == section)
            ui.app_bar(title, on_back=ctx.popper())
            for toggle in GENERIC_TOGGLES.get(section, ()):
                key = f"{section}:{toggle}"
                ui.toggle_row(f"settings.{key}", toggle, d["toggles"][key], _flip(d["toggles"], key))
        else:
            raise ValueError(f"settings: unknown screen {name!r}")


def _flip(d: dict[str, Any], key: str):
    def flip() -> None:
        d[key] = not d[key]

    return flip


def _setter(d: dict[str, Any], key: str, value: Any, ctx: AppContext):
    def set_and_back() -> None:
        d[key] = value
        ctx.pop()

    return set_and_back


class Enabled(PredicateParams):
    enabled: bool = True


@predicate("settings.dark_theme", Enabled)
def dark_theme(state: dict[str, Any], p: Enabled) -> Check:
    """System dark theme is on (or off, with ``enabled=False``)."""
    if data(state, "settings")["dark_theme"] == p.enabled:
        return Check.of(0)
    return Check.of(nav_cost(state, "settings", ("display",)) + 1)


@predicate("settings.notification_history", Enabled)
def notification_history(state: dict[str, Any], p: Enabled) -> Check:
    """'Use notification history' is on (or off)."""
    if data(state, "settings")["notification_history"] == p.enabled:
        return Check.of(0)
    return Check.of(nav_cost(state, "settings", ("notifications", "notification_history")) + 1)


class SettingsValues(PredicateParams):
    """Settings values to force (only the ones given)."""

    dark_theme: bool | None = None
    notification_history: bool | None = None
    hide_silent: bool | None = None
    notification_dots: bool | None = None
    adaptive_brightness: bool | None = None
    screen_timeout: str | None = Field(None, description=f"one of {', '.join(TIMEOUTS)}")
    toggles: dict[str, bool] | None = Field(
        None, description="section toggles by key ('network:Wi-Fi'); only the given ones"
    )
    app_notifications: dict[str, bool] | None = Field(
        None, description="per-app notifications by app name; only the given ones"
    )

    @field_validator("screen_timeout")
    @classmethod
    def _timeout(cls, v: str | None) -> str | None:
        if v is not None and v not in TIMEOUTS:
            raise ValueError(f"unknown screen timeout {v!r}; use one of {', '.join(TIMEOUTS)}")
        return v

    @field_validator("toggles")
    @classmethod
    def _toggles(cls, v: dict[str, bool] | None) -> dict[str, bool] | None:
        unknown = [k for k in v or {} if k not in TOGGLE_KEYS]
        if unknown:
            raise ValueError(f"unknown toggles {unknown}; use keys like {', '.join(TOGGLE_KEYS[:3])} ...")
        return v

    @field_validator("app_notifications")
    @classmethod
    def _apps(cls, v: dict[str, bool] | None) -> dict[str, bool] | None:
        unknown = [k for k in v or {} if k not in APPS_WITH_NOTIFICATIONS]
        if unknown:
            raise ValueError(f"unknown apps {unknown}; use {', '.join(APPS_WITH_NOTIFICATIONS)}")
        return v


@setup_step("settings.values", SettingsValues)
def _settings_values(state: dict[str, Any], p: SettingsValues) -> None:
    """Set the given Settings switches."""
    values = state["apps"]["settings"]["data"]
    for key, value in p.model_dump(exclude_none=True).items():
        if isinstance(value, dict):
            values[key].update(value)
        else:
            values[key] = value


def _in_front(state: dict[str, Any]) -> bool:
    return state["foreground"] == "settings" and state["popup"] is None


class Toggle(PredicateParams):
    key: str = Field(description="'<section>:<toggle>', e.g. 'network:Wi-Fi'")
    enabled: bool = True

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        if v not in TOGGLE_KEYS:
            raise ValueError(f"unknown toggle {v!r}; use one of {', '.join(TOGGLE_KEYS)}")
        return v


@predicate("settings.toggle", Toggle)
def toggle(state: dict[str, Any], p: Toggle) -> Check:
    """The section toggle ``key`` (``'devices:Bluetooth'``) is on (or off)."""
    if data(state, "settings")["toggles"][p.key] == p.enabled:
        return Check.of(0)
    screen = top(state, "settings")
    section = p.key.split(":", 1)[0]
    if _in_front(state) and screen["name"] == "generic" and screen.get("section") == section:
        return Check.of(1)
    # Open the section (from the main list), then flip; one more if Settings is not in front.
    return Check.of(2 + (0 if _in_front(state) else 1))


class Timeout(PredicateParams):
    value: str

    @field_validator("value")
    @classmethod
    def _value(cls, v: str) -> str:
        if v not in TIMEOUTS:
            raise ValueError(f"unknown screen timeout {v!r}; use one of {', '.join(TIMEOUTS)}")
        return v


@predicate("settings.screen_timeout", Timeout)
def screen_timeout(state: dict[str, Any], p: Timeout) -> Check:
    """The screen timeout is ``value`` (``'2 minutes'``)."""
    if data(state, "settings")["screen_timeout"] == p.value:
        return Check.of(0)
    return Check.of(nav_cost(state, "settings", ("display", "timeout")) + 1)


class AppNotifications(PredicateParams):
    app: str
    enabled: bool = True

    @field_validator("app")
    @classmethod
    def _app(cls, v: str) -> str:
        if v not in APPS_WITH_NOTIFICATIONS:
            raise ValueError(f"no notification switch for {v!r}; apps: {', '.join(APPS_WITH_NOTIFICATIONS)}")
        return v


@predicate("settings.app_notifications", AppNotifications)
def app_notifications(state: dict[str, Any], p: AppNotifications) -> Check:
    """Notifications from ``app`` (its name in Settings, 'Amazon Shopping') are on (or off)."""
    if data(state, "settings")["app_notifications"][p.app] == p.enabled:
        return Check.of(0)
    return Check.of(nav_cost(state, "settings", ("notifications", "app_notifications")) + 1)


class Switches(PredicateParams):
    """Switches that must all hold (only the ones given)."""

    dark_theme: bool | None = None
    notification_history: bool | None = None
    hide_silent: bool | None = None
    notification_dots: bool | None = None
    adaptive_brightness: bool | None = None


SWITCH_SCREENS = {
    "dark_theme": "display",
    "adaptive_brightness": "display",
    "notification_history": "notification_history",
    "hide_silent": "notifications",
    "notification_dots": "notifications",
}
"""The screen whose toggle flips each switch."""


@predicate("settings.switches", Switches)
def switches(state: dict[str, Any], p: Switches) -> Check:
    """Every given switch (dark theme, notification history, hide silent, dots, adaptive brightness) has its value."""
    values = data(state, "settings")
    wrong = [key for key, want in p.model_dump(exclude_none=True).items() if values[key] != want]
    if not wrong:
        return Check.of(0)
    # Each wrong switch needs its own tap, and each screen holding one must be entered (unless shown).
    here = top(state, "settings")["name"] if _in_front(state) else None
    screens = {SWITCH_SCREENS[key] for key in wrong} - {here}
    return Check.of(len(wrong) + len(screens) + (0 if _in_front(state) else 1))
