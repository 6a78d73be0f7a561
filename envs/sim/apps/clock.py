"""Clock: alarms with a time picker and weekday chips, world clocks, home time zone."""

from __future__ import annotations

import random
from typing import Any

from pydantic import Field, field_validator

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.apps.clock_zh import ZH
from darwin.envs.sim.setups import setup_step
from darwin.envs.sim.ui import UI, Row
from darwin.predicates import Check, PredicateParams, data, nav_cost, norm, predicate, top

DAY_LETTERS = ("M", "T", "W", "T", "F", "S", "S")
DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
CITIES = (
    "Amsterdam",
    "Athens",
    "Bangkok",
    "Berlin",
    "Buenos Aires",
    "Cairo",
    "Chicago",
    "Dubai",
    "Hong Kong",
    "Istanbul",
    "Lisbon",
    "London",
    "Los Angeles",
    "Madrid",
    "Melbourne",
    "Mexico City",
    "Moscow",
    "Mumbai",
    "New York",
    "Paris",
    "Rome",
    "Seoul",
    "Singapore",
    "Sydney",
    "Tokyo",
    "Toronto",
)
TIME_ZONES = (
    ("Honolulu", "GMT-10:00"),
    ("Los Angeles", "GMT-8:00"),
    ("Denver", "GMT-7:00"),
    ("Chicago", "GMT-6:00"),
    ("New York", "GMT-5:00"),
    ("Buenos Aires", "GMT-3:00"),
    ("London", "GMT+0:00"),
    ("Lisbon", "GMT+0:00"),
    ("Paris", "GMT+1:00"),
    ("Berlin", "GMT+1:00"),
    ("Cairo", "GMT+2:00"),
    ("Athens", "GMT+2:00"),
    ("Moscow", "GMT+3:00"),
    ("Dubai", "GMT+4:00"),
    ("Mumbai", "GMT+5:30"),
    ("Bangkok", "GMT+7:00"),
    ("Singapore", "GMT+8:00"),
    ("Hong Kong", "GMT+8:00"),
    ("Tokyo", "GMT+9:00"),
    ("Seoul", "GMT+9:00"),
    ("Sydney", "GMT+11:00"),
    ("Auckland", "GMT+13:00"),
)
STYLES = ("Digital", "Analog")


def time_text(hour: int, minute: int) -> str:
    h12 = hour % 12 or 12
    return f"{h12}:{minute:02d} {'AM' if hour < 12 else 'PM'}"


def days_text(days: list[int]) -> str:
    if not days:
        return "Not scheduled"
    if sorted(days) == [0, 1, 2, 3, 4]:
        return "Weekdays"
    if sorted(days) == [5, 6]:
        return "Weekends"
    return ", ".join(DAY_NAMES[d] for d in sorted(days))


class ClockApp(SimApp):
    """The Clock app: Alarm, Clock (world clocks) and Timer tabs, plus settings."""

    id = "clock"
    label = "Clock"
    package = "com.google.android.deskclock"
    activity = "com.android.deskclock.DeskClock"
    color = (63, 81, 181)
    glyph = "L"
    aliases = ("alarm", "deskclock")
    root_screen = "alarms"
    zh = ZH

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        alarms = [
            {
                "id": 1,
                "hour": 7,
                "minute": rng.choice((0, 15, 30)),
                "days": [0, 1, 2, 3, 4],
                "enabled": rng.random() < 0.5,
                "vibrate": True,
            },
            {"id": 2, "hour": rng.choice((8, 10)), "minute": 0, "days": [5, 6], "enabled": False, "vibrate": True},
        ]
        return {
            "alarms": alarms,
            "next_id": 3,
            "world_clocks": [rng.choice(("New York", "Tokyo", "Paris"))],
            "home_time_zone": "London",
            "auto_home_clock": True,
            "style": "Digital",
        }

    def popup(self) -> None:
        return None

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        d = ctx.data
        tabs = [
            ("clock.tab.alarms", "Alarm", lambda: ctx.reset_to("alarms")),
            ("clock.tab.clock", "Clock", lambda: ctx.reset_to("world")),
            ("clock.tab.timer", "Timer", lambda: ctx.reset_to("timer")),
        ]
        if name in ("alarms", "world", "timer"):
            ui.app_bar("Clock", actions=[("clock.menu", "menu", ctx.pusher("settings"))])
            ui.bottom_nav(tabs, f"clock.tab.{name}")
        if name == "alarms":
            rows = [
                Row(
                    f"clock.alarm.{a['id']}",
                    time_text(a["hour"], a["minute"]),
                    days_text(a["days"]) + (" - on" if a["enabled"] else " - off"),
                    on_tap=ctx.pusher("alarm_edit", alarm=a["id"]),
                )
                for a in sorted(d["alarms"], key=lambda a: (a["hour"], a["minute"], a["id"]))
            ]
            ui.list("alarms", ctx.scroll_offset("alarms"), rows, reserve_bottom=240)
            ui.fab("clock.add_alarm", "+", ctx.pusher("time_picker", alarm=None, hour=6, minute=0, pm=False))
        elif name == "world":
            ui.card("clock.home", f"{d['home_time_zone']} (home)", f"Style: {d['style']}", h=220)
            rows = [
                Row(f"clock.city.{c}", c, "Today", trailing="Remove", on_trailing=_remover(d["world_clocks"], c))
                for c in d["world_clocks"]
            ]
            ui.list("cities", ctx.scroll_offset("cities"), rows, reserve_bottom=240)
            ui.fab("clock.add_city", "+", ctx.pusher("city_picker"))
        elif name == "timer":
            ui.title("00h 00m 00s")
            ui.grid([(f"clock.timer.{k}", str(k), None, False) for k in (1, 2, 3, 4, 5, 6, 7, 8, 9, 0)], columns=3)
        elif name == "time_picker":
            self._time_picker(ui, ctx)
        elif name == "alarm_edit":
            self._alarm_edit(ui, ctx)
        elif name == "city_picker":
            ui.app_bar("Choose a city", on_back=ctx.popper())
            ctx.text_field(ui, "clock.city_search", "Search for a city")
            typed = norm(ctx.field("clock.city_search"))
            cities = [c for c in CITIES if typed in norm(c)]
            rows = [Row(f"clock.pick.{c}", c, on_tap=_city_adder(ctx, c)) for c in cities]
            ui.list("city_list", ctx.scroll_offset("city_list"), rows)
        elif name == "settings":
            ui.app_bar("Settings", on_back=ctx.popper())
            ui.title("Clock", size="small")
            ui.row("clock.settings.style", "Style", d["style"], on_tap=ctx.pusher("style_picker"))
            ui.toggle_row(
                "clock.settings.auto_home",
                "Automatic home clock",
                d["auto_home_clock"],
                _flip(d, "auto_home_clock"),
                subtitle="While traveling, add a clock for home",
            )
            ui.row("clock.settings.home_tz", "Home time zone", d["home_time_zone"], on_tap=ctx.pusher("tz_picker"))
            ui.row("clock.settings.date_time", "Change date & time")
        elif name == "style_picker":
            ui.app_bar("Style", on_back=ctx.popper())
            for s in STYLES:
                ui.row(f"clock.style.{s}", s, checked=(d["style"] == s), on_tap=_set_and_pop(ctx, "style", s))
        elif name == "tz_picker":
            ui.app_bar("Home time zone", on_back=ctx.popper())
            rows = [
                Row(
                    f"clock.tz.{city}",
                    f"({off}) {city}",
                    on_tap=_set_and_pop(ctx, "home_time_zone", city),
                    checked=None,
                )
                for city, off in TIME_ZONES
            ]
            ui.list("tz", ctx.scroll_offset("tz"), rows)
        elif name not in ("alarms", "world", "timer"):
            raise ValueError(f"clock: unknown screen {name!r}")

    def _time_picker(self, ui: UI, ctx: AppContext) -> None:
        s = ctx.screen
        ui.app_bar("Select time", on_back=ctx.popper())
        hour24 = (s["hour"] % 12) + (12 if s["pm"] else 0)
        ui.title(time_text(hour24, s["minute"]))
        hours = [
            (f"clock.hour.{h}", str(h), _screen_setter(ctx, "hour", h % 12), s["hour"] % 12 == h % 12)
            for h in range(1, 13)
        ]
        ui.grid(hours, columns=4)
        ui.buttons_row(
            [
                (f"clock.minute.{m:02d}", f":{m:02d}", _screen_setter(ctx, "minute", m), s["minute"] == m)
                for m in (0, 15, 30, 45)
            ]
        )
        ui.buttons_row(
            [
                ("clock.am", "AM", _screen_setter(ctx, "pm", False), not s["pm"]),
                ("clock.pm", "PM", _screen_setter(ctx, "pm", True), s["pm"]),
            ]
        )
        ui.buttons_row(
            [
                ("clock.picker.cancel", "Cancel", ctx.popper(), False),
                ("clock.picker.ok", "OK", _save_time(ctx, hour24), False),
            ]
        )

    def _alarm_edit(self, ui: UI, ctx: AppContext) -> None:
        alarm = next((a for a in ctx.data["alarms"] if a["id"] == ctx.screen["alarm"]), None)
        ui.app_bar("Alarm", on_back=ctx.popper())
        if alarm is None:
            ui.label("clock.alarm_gone", "This alarm was deleted")
            return
        ui.row(
            "clock.edit.time",
            time_text(alarm["hour"], alarm["minute"]),
            "Tap to change time",
            on_tap=ctx.pusher(
                "time_picker",
                alarm=alarm["id"],
                hour=alarm["hour"] % 12,
                minute=alarm["minute"],
                pm=alarm["hour"] >= 12,
            ),
        )
        ui.toggle_row("clock.edit.enabled", "Alarm on", alarm["enabled"], _flip(alarm, "enabled"))
        ui.label("clock.edit.days_label", f"Repeat: {days_text(alarm['days'])}")
        ui.buttons_row(
            [(f"clock.day.{i}", DAY_LETTERS[i], _day_toggler(alarm, i), i in alarm["days"]) for i in range(7)]
        )
        ui.toggle_row("clock.edit.vibrate", "Vibrate", alarm["vibrate"], _flip(alarm, "vibrate"))
        ui.button("clock.edit.delete", "Delete", _deleter(ctx, alarm["id"]), role="secondary")


def _flip(d: dict[str, Any], key: str):
    def flip() -> None:
        d[key] = not d[key]

    return flip


def _screen_setter(ctx: AppContext, key: str, value: Any):
    def set_value() -> None:
        ctx.screen[key] = value

    return set_value


def _set_and_pop(ctx: AppContext, key: str, value: Any):
    def set_value() -> None:
        ctx.data[key] = value
        ctx.pop()

    return set_value


def _save_time(ctx: AppContext, hour24: int):
    def save() -> None:
        s = ctx.screen
        if s["alarm"] is None:
            alarm_id = ctx.data["next_id"]
            ctx.data["next_id"] += 1
            ctx.data["alarms"].append(
                {"id": alarm_id, "hour": hour24, "minute": s["minute"], "days": [], "enabled": True, "vibrate": True}
            )
            ctx.replace("alarm_edit", alarm=alarm_id)
        else:
            for a in ctx.data["alarms"]:
                if a["id"] == s["alarm"]:
                    a["hour"], a["minute"], a["enabled"] = hour24, s["minute"], True
            ctx.pop()

    return save


def _day_toggler(alarm: dict[str, Any], day: int):
    def toggle() -> None:
        days = set(alarm["days"])
        days.symmetric_difference_update({day})
        alarm["days"] = sorted(days)

    return toggle


def _deleter(ctx: AppContext, alarm_id: int):
    def delete() -> None:
        ctx.data["alarms"] = [a for a in ctx.data["alarms"] if a["id"] != alarm_id]
        ctx.pop()

    return delete


def _remover(cities: list[str], city: str):
    def remove() -> None:
        cities.remove(city)

    return remove


def _city_adder(ctx: AppContext, city: str):
    def add() -> None:
        if city not in ctx.data["world_clocks"]:
            ctx.data["world_clocks"].append(city)
        ctx.pop()

    return add


class AlarmParams(PredicateParams):
    hour: int = Field(ge=0, le=23, description="24-hour clock")
    minute: int = Field(default=0, ge=0, le=59)
    days: list[int] = Field(default_factory=list, description="0 = Monday ... 6 = Sunday")
    enabled: bool = True

    @field_validator("days")
    @classmethod
    def _days(cls, v: list[int]) -> list[int]:
        if any(d < 0 or d > 6 for d in v):
            raise ValueError("days must be 0 (Monday) .. 6 (Sunday)")
        return sorted(set(v))


@predicate("clock.alarm", AlarmParams)
def alarm(state: dict[str, Any], p: AlarmParams) -> Check:
    """An alarm at ``hour:minute`` repeating on exactly ``days`` and switched on/off as given."""
    # Admissible lower bound: the cheaper of fixing an existing alarm and creating a new one.
    best = _create_cost(state, p)
    for a in data(state, "clock")["alarms"]:
        best = min(best, _edit_cost(state, a, p))
    return Check.of(best)


def _picker_taps(screen: dict[str, Any], p: AlarmParams) -> int:
    hour12, pm = p.hour % 12, p.hour >= 12
    return int(screen["hour"] % 12 != hour12) + int(screen["minute"] != p.minute) + int(screen["pm"] != pm)


def _create_cost(state: dict[str, Any], p: AlarmParams) -> int:
    screen = top(state, "clock")
    if state["foreground"] == "clock" and screen["name"] == "time_picker" and screen["alarm"] is None:
        taps = _picker_taps(screen, p)
    else:
        taps = _picker_taps({"hour": 6, "minute": 0, "pm": False}, p)  # the picker's defaults
    # '+' (if needed), the picker taps, OK, then one tap per repeat day of the new alarm.
    return nav_cost(state, "clock", ("alarms", "time_picker")) + taps + 1 + len(p.days)


def _edit_cost(state: dict[str, Any], a: dict[str, Any], p: AlarmParams) -> int:
    days = len(set(a["days"]) ^ set(p.days))
    if (a["hour"], a["minute"]) != (p.hour, p.minute):
        screen = top(state, "clock")
        on_picker = state["foreground"] == "clock" and screen["name"] == "time_picker" and screen["alarm"] == a["id"]
        taps = _picker_taps(screen, p) if on_picker else 1
        # Saving a new time also switches the alarm on.
        return nav_cost(state, "clock", ("alarm_edit", "time_picker")) + taps + 1 + days
    enabled_wrong = int(a["enabled"] != p.enabled)
    if enabled_wrong or days:
        return nav_cost(state, "clock", ("alarm_edit",)) + enabled_wrong + days
    return 0


class AlarmTime(PredicateParams):
    hour: int = Field(ge=0, le=23)
    minute: int = Field(default=0, ge=0, le=59)


@predicate("clock.no_alarm_at", AlarmTime)
def no_alarm_at(state: dict[str, Any], p: AlarmTime) -> Check:
    """No alarm is set for ``hour:minute`` (each remaining one needs at least one action)."""
    n = sum(1 for a in data(state, "clock")["alarms"] if (a["hour"], a["minute"]) == (p.hour, p.minute))
    return Check.of(n)


@predicate("clock.alarm_exists", AlarmTime)
def alarm_exists(state: dict[str, Any], p: AlarmTime) -> Check:
    """An alarm is set for ``hour:minute`` (on any days, on or off)."""
    if any((a["hour"], a["minute"]) == (p.hour, p.minute) for a in data(state, "clock")["alarms"]):
        return Check.of(0)
    return Check.of(_create_cost(state, AlarmParams(hour=p.hour, minute=p.minute)))


class City(PredicateParams):
    city: str

    def texts(self) -> list[str]:
        return [self.city]


@predicate("clock.world_clock", City)
def world_clock(state: dict[str, Any], p: City) -> Check:
    """``city`` is among the world clocks."""
    if norm(p.city) in {norm(c) for c in data(state, "clock")["world_clocks"]}:
        return Check.of(0)
    return Check.of(nav_cost(state, "clock", ("world", "city_picker")) + 1)


class Zone(PredicateParams):
    zone: str


@predicate("clock.home_time_zone", Zone)
def home_time_zone(state: dict[str, Any], p: Zone) -> Check:
    """The home time zone is ``zone`` (a city name such as 'Hong Kong')."""
    if norm(data(state, "clock")["home_time_zone"]) == norm(p.zone):
        return Check.of(0)
    return Check.of(nav_cost(state, "clock", ("settings", "tz_picker")) + 1)


class AlarmSpec(PredicateParams):
    hour: int = Field(ge=0, le=23)
    minute: int = Field(default=0, ge=0, le=59)
    days: list[int] = Field(default_factory=list)
    enabled: bool = True


class Alarms(PredicateParams):
    """Alarms to add to the Clock (after the ones it has)."""

    alarms: list[AlarmSpec] = Field(min_length=1)


@setup_step("clock.alarms", Alarms)
def _add_alarms(state: dict[str, Any], p: Alarms) -> None:
    """Add the given alarms with fresh ids."""
    alarms = data(state, "clock")["alarms"]
    for spec in p.alarms:
        next_id = max((a["id"] for a in alarms), default=0) + 1
        alarms.append(
            {
                "id": next_id,
                "hour": spec.hour,
                "minute": spec.minute,
                "days": sorted(set(spec.days)),
                "enabled": spec.enabled,
                "vibrate": True,
            }
        )


class Style(PredicateParams):
    style: str

    @field_validator("style")
    @classmethod
    def _style(cls, v: str) -> str:
        if v not in STYLES:
            raise ValueError(f"unknown clock style {v!r}; use one of {', '.join(STYLES)}")
        return v


@predicate("clock.style", Style)
def style(state: dict[str, Any], p: Style) -> Check:
    """The Clock's style (Settings > Style) is ``style``."""
    if data(state, "clock")["style"] == p.style:
        return Check.of(0)
    return Check.of(nav_cost(state, "clock", ("settings", "style_picker")) + 1)


@setup_step("clock.style", Style)
def _set_style(state: dict[str, Any], p: Style) -> None:
    """Set the Clock's style."""
    data(state, "clock")["style"] = p.style
