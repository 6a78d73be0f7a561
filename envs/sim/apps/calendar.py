"""Calendar: a week's schedule, day views, event details, a create/edit form with a time picker."""

from __future__ import annotations

import random
from typing import Any

from pydantic import Field, field_validator

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.apps.calendar_zh import ZH
from darwin.envs.sim.apps.clock import time_text
from darwin.envs.sim.apps.forms import focus_next, typing_cost
from darwin.envs.sim.setups import setup_step
from darwin.envs.sim.ui import UI, Row
from darwin.predicates import Check, PredicateParams, data, norm, predicate, top

YEAR, MONTH, FIRST_DATE = 2029, "November", 19
"""The week shown is Monday 19 .. Sunday 25 November 2029; 'today' is Wednesday 21, as on the launcher."""
TODAY = 2
DAY_FULL = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
DAY_SHORT = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
DAY_LETTERS = ("M", "T", "W", "T", "F", "S", "S")
DURATIONS = ((30, "30 min"), (60, "1 hour"), (120, "2 hours"))
MINUTES = (0, 15, 30, 45)
DEFAULT_START = 10 * 60
DEFAULT_DURATION = 60
SEED_EVENTS = (
    ("Team standup", "Zoom"),
    ("1:1 with manager", "Room 2B"),
    ("Lunch with Sam", "Cafe Roma"),
    ("Gym", "FitLife"),
    ("Project review", "Room 5A"),
    ("Grocery run", ""),
    ("Piano lesson", "Music school"),
    ("Book club", "Library"),
    ("Call mom", ""),
    ("Haircut", "Studio 9"),
    ("Coffee with Lee", "Blue Bottle"),
    ("Dinner party", "Jo's place"),
    ("Yoga", "Park"),
    ("Sprint planning", "Room 3C"),
)
"""Titles a phone's seeded events are drawn from (templates use :data:`TEMPLATE_EVENTS`)."""
TEMPLATE_EVENTS = (
    "Dentist appointment",
    "Parent-teacher meeting",
    "Car service",
    "Flight to Lisbon",
    "Vet visit",
    "Budget meeting",
    "Guitar lesson",
    "Birthday dinner",
    "Job interview",
    "Tennis match",
    "Pharmacy pickup",
    "Museum tour",
)
"""Event titles task instances use (disjoint from :data:`SEED_EVENTS`)."""
LOCATIONS = (
    "Room 4",
    "Main Street Clinic",
    "City Hall",
    "Terminal 2",
    "Oak Cafe",
    "Riverside Park",
    "Studio B",
    "Town Library",
)


def date_text(day: int) -> str:
    return f"{DAY_FULL[day]}, {MONTH} {FIRST_DATE + day}, {YEAR}"


def start_text(start: int) -> str:
    return time_text(start // 60, start % 60)


def span_text(event: dict[str, Any]) -> str:
    return f"{start_text(event['start'])} – {start_text(event['end'] % (24 * 60))}"


def count_text(n: int) -> str:
    return f"{n} event{'s' if n != 1 else ''}" if n else "No events"


class CalendarApp(SimApp):
    """Calendar: schedule of the week, a view per day, event details, and an event form."""

    id = "calendar"
    label = "Calendar"
    package = "com.google.android.calendar"
    activity = "com.android.calendar.AllInOneActivity"
    color = (219, 68, 55)
    glyph = "31"
    aliases = ("google calendar", "agenda")
    zh = ZH

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        events = []
        for i, (title, location) in enumerate(rng.sample(SEED_EVENTS, k=9)):
            start = rng.randrange(8, 20) * 60 + rng.choice((0, 30))  # on the hour or half hour; templates use :15 / :45
            events.append(
                {
                    "id": i + 1,
                    "title": title,
                    "day": rng.randrange(7),
                    "start": start,
                    "end": start + rng.choice((30, 60, 90)),
                    "location": location,
                }
            )
        return {"events": events}

    def popup(self) -> None:
        return None  # a system app: no "rate us" prompt

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        events = sorted(ctx.data["events"], key=lambda e: (e["day"], e["start"], e["id"]))
        if name == "home":
            ui.app_bar("Calendar")
            ui.label("calendar.week", f"{MONTH} {FIRST_DATE} – {FIRST_DATE + 6}, {YEAR}", role="text")
            ui.buttons_row(
                [
                    (f"calendar.day.{d}", f"{DAY_LETTERS[d]} {FIRST_DATE + d}", ctx.pusher("day", day=d), d == TODAY)
                    for d in range(7)
                ]
            )
            rows = [
                Row(
                    f"calendar.event.{e['id']}",
                    e["title"],
                    f"{DAY_SHORT[e['day']]}, Nov {FIRST_DATE + e['day']} · {start_text(e['start'])}",
                    on_tap=ctx.pusher("event", event=e["id"]),
                )
                for e in events
            ]
            ui.list("schedule", ctx.scroll_offset("schedule"), rows, reserve_bottom=240)
            ui.fab("calendar.add", "+", ctx.pusher("edit", **_new_form(TODAY)))
        elif name == "day":
            day = ctx.screen["day"]
            ui.app_bar(f"{DAY_FULL[day]}, {MONTH} {FIRST_DATE + day}", on_back=ctx.popper())
            todays = [e for e in events if e["day"] == day]
            ui.label("calendar.day_count", count_text(len(todays)))
            rows = [
                Row(
                    f"calendar.event.{e['id']}",
                    e["title"],
                    span_text(e) + (f" · {e['location']}" if e["location"] else ""),
                    on_tap=ctx.pusher("event", event=e["id"]),
                )
                for e in todays
            ]
            ui.list("day_events", ctx.scroll_offset("day_events"), rows, reserve_bottom=240)
            ui.fab("calendar.add", "+", ctx.pusher("edit", **_new_form(day)))
        elif name == "event":
            self._event(ui, ctx)
        elif name == "edit":
            self._edit(ui, ctx)
        elif name == "time":
            self._time_picker(ui, ctx)
        else:
            raise ValueError(f"calendar: unknown screen {name!r}")

    def _event(self, ui: UI, ctx: AppContext) -> None:
        event = _find(ctx.data, ctx.screen["event"])
        if event is None:
            ui.app_bar("Event", on_back=ctx.popper())
            ui.label("calendar.gone", "This event was deleted")
            return
        ui.app_bar(
            event["title"],
            on_back=ctx.popper(),
            actions=[("calendar.edit", "✎", ctx.pusher("edit", **_edit_form(event)), "Edit")],
        )
        ui.title(event["title"])
        ui.row("calendar.detail.date", date_text(event["day"]), "Date")
        ui.row("calendar.detail.time", span_text(event), "Time")
        if event["location"]:
            ui.row("calendar.detail.location", event["location"], "Location")
        ui.button("calendar.delete", "Delete", lambda: ctx.screen.__setitem__("confirm", True), role="secondary")
        if ctx.screen.get("confirm"):
            ui.dialog(
                "calendar.delete_dialog",
                "Delete event?",
                f"'{event['title']}' on {DAY_FULL[event['day']]} will be deleted.",
                [
                    ("calendar.delete.cancel", "Cancel", lambda: ctx.screen.__setitem__("confirm", False)),
                    ("calendar.delete.confirm", "Delete", _deleter(ctx, event["id"])),
                ],
            )

    def _edit(self, ui: UI, ctx: AppContext) -> None:
        s = ctx.screen
        ui.app_bar(
            "New event" if s["event"] is None else "Edit event",
            on_back=ctx.popper(),
            actions=[("calendar.save", "✓", self._save(ctx), "Save")],
        )
        # Labels above the fields stay visible once the fields hold text.
        ui.label("calendar.edit.title_label", "Title", h=64)
        ctx.text_field(ui, "calendar.title", "Add title", on_submit=focus_next(ctx, "calendar.location"))
        ui.label("calendar.edit.location_label", "Location", h=64)
        ctx.text_field(ui, "calendar.location", "Add location", on_submit=focus_next(ctx, None))
        ui.label("calendar.edit.day_label", f"Day: {DAY_FULL[s['day']]}, Nov {FIRST_DATE + s['day']}")
        ui.buttons_row(
            [(f"calendar.edit.day.{d}", DAY_LETTERS[d], _screen_setter(ctx, "day", d), d == s["day"]) for d in range(7)]
        )
        ui.row(
            "calendar.edit.start",
            f"Starts {start_text(s['start'])}",
            "Tap to change",
            on_tap=ctx.pusher("time", hour=s["start"] // 60 % 12, minute=s["start"] % 60, pm=s["start"] >= 12 * 60),
        )
        ui.buttons_row(
            [
                (f"calendar.edit.duration.{m}", text, _screen_setter(ctx, "duration", m), s["duration"] == m)
                for m, text in DURATIONS
            ]
        )

    def _time_picker(self, ui: UI, ctx: AppContext) -> None:
        s = ctx.screen
        ui.app_bar("Start time", on_back=ctx.popper())
        start = _picker_start(s)
        ui.title(start_text(start))
        ui.grid(
            [
                (f"calendar.hour.{h}", str(h), _screen_setter(ctx, "hour", h % 12), s["hour"] % 12 == h % 12)
                for h in range(1, 13)
            ],
            columns=4,
        )
        ui.buttons_row(
            [
                (f"calendar.minute.{m:02d}", f":{m:02d}", _screen_setter(ctx, "minute", m), s["minute"] == m)
                for m in MINUTES
            ]
        )
        ui.buttons_row(
            [
                ("calendar.am", "AM", _screen_setter(ctx, "pm", False), not s["pm"]),
                ("calendar.pm", "PM", _screen_setter(ctx, "pm", True), s["pm"]),
            ]
        )
        ui.buttons_row(
            [
                ("calendar.picker.cancel", "Cancel", ctx.popper(), False),
                ("calendar.picker.ok", "OK", _set_start(ctx, start), False),
            ]
        )

    @staticmethod
    def _save(ctx: AppContext):
        def save() -> None:
            s = ctx.screen
            title = ctx.field("calendar.title").strip()
            if not title:
                ctx.toast("Add a title")
                return
            values = {
                "title": title,
                "day": s["day"],
                "start": s["start"],
                "end": s["start"] + s["duration"],
                "location": ctx.field("calendar.location").strip(),
            }
            event = _find(ctx.data, s["event"])
            if event is None:
                new_id = max((e["id"] for e in ctx.data["events"]), default=0) + 1
                ctx.data["events"].append({"id": new_id, **values})
            else:
                event.update(values)
            ctx.pop()
            ctx.toast("Event saved")

        return save


def _new_form(day: int) -> dict[str, Any]:
    return {"event": None, "day": day, "start": DEFAULT_START, "duration": DEFAULT_DURATION}


def _edit_form(event: dict[str, Any]) -> dict[str, Any]:
    return {
        "event": event["id"],
        "day": event["day"],
        "start": event["start"],
        "duration": event["end"] - event["start"],
        "fields": {"calendar.title": event["title"], "calendar.location": event["location"]},
    }


def _picker_start(s: dict[str, Any]) -> int:
    return ((s["hour"] % 12) + (12 if s["pm"] else 0)) * 60 + s["minute"]


def _find(d: dict[str, Any], event_id: int | None) -> dict[str, Any] | None:
    return next((e for e in d["events"] if e["id"] == event_id), None)


def _screen_setter(ctx: AppContext, key: str, value: Any):
    def set_value() -> None:
        ctx.screen[key] = value

    return set_value


def _set_start(ctx: AppContext, start: int):
    def ok() -> None:
        ctx.stack[-2]["start"] = start  # the form under the picker
        ctx.pop()

    return ok


def _deleter(ctx: AppContext, event_id: int):
    def delete() -> None:
        ctx.data["events"] = [e for e in ctx.data["events"] if e["id"] != event_id]
        ctx.pop()
        ctx.toast("Event deleted")

    return delete


# -- predicates -----------------------------------------------------------------------------
class EventSpec(PredicateParams):
    """An event by title, optionally on ``day`` (0 = Monday 19 November) at ``hour:minute`` at ``location``."""

    title: str = Field(min_length=1)
    day: int | None = Field(None, ge=0, le=6)
    hour: int | None = Field(None, ge=0, le=23)
    minute: int = Field(0, description="0, 15, 30 or 45 (the picker's minutes); used with hour")
    location: str | None = None
    exclusive: bool = Field(False, description="no other event may have this title (a move, not a copy)")

    @field_validator("minute")
    @classmethod
    def _minute(cls, v: int) -> int:
        if v not in MINUTES:
            raise ValueError(f"minute must be one of {MINUTES} (what the time picker offers)")
        return v

    def texts(self) -> list[str]:
        return [t for t in (self.title, self.location) if t]

    @property
    def start(self) -> int | None:
        return None if self.hour is None else self.hour * 60 + self.minute


def _matches(e: dict[str, Any], p: EventSpec) -> bool:
    return (
        norm(e["title"]) == norm(p.title)
        and (p.day is None or e["day"] == p.day)
        and (p.start is None or e["start"] == p.start)
        and (p.location is None or norm(e["location"]) == norm(p.location))
    )


def _fg(state: dict[str, Any]) -> int:
    return 0 if state["foreground"] == "calendar" and state["popup"] is None else 1


def _picker_taps(hour: int, minute: int, pm: bool, target: int) -> int:
    th, tm = divmod(target, 60)
    return int(hour % 12 != th % 12) + int(minute != tm) + int(pm != (th >= 12))


def _time_cost(current: int, p: EventSpec) -> int:
    """Open the picker, set it, OK (0 when the form already starts at the target time)."""
    if p.start is None or current == p.start:
        return 0
    h, m = divmod(current, 60)
    return 1 + _picker_taps(h % 12, m, h >= 12, p.start) + 1


def _form_cost(title: str, location: str, day: int, start: int, p: EventSpec, focused: bool) -> int:
    """Typing, day chip and time picker actions that make a form hold ``p``, plus save."""
    pairs = [(title, p.title)] + ([(location, p.location)] if p.location is not None else [])
    day_cost = int(p.day is not None and day != p.day)
    return typing_cost(pairs, focused) + day_cost + _time_cost(start, p) + 1


def event_cost(state: dict[str, Any], p: EventSpec) -> int:
    """Lower bound on making an event match ``p``: finish an open form, create one, or edit one."""
    stack = state["apps"]["calendar"]["stack"]
    s = stack[-1]
    if s["name"] == "time" and len(stack) > 1 and stack[-2]["name"] == "edit":
        form = stack[-2]
        fields = form.get("fields", {})
        target = p.start if p.start is not None else _picker_start(s)
        rest = _form_cost(
            fields.get("calendar.title", ""), fields.get("calendar.location", ""), form["day"], target, p, False
        )
        # Set the picker, OK; or cancel (one tap) and work on the form as it is.
        via_picker = _picker_taps(s["hour"], s["minute"], s["pm"], target) + 1 + rest
        return _fg(state) + min(
            via_picker,
            1
            + _form_cost(
                fields.get("calendar.title", ""),
                fields.get("calendar.location", ""),
                form["day"],
                form["start"],
                p,
                False,
            ),
        )
    if s["name"] == "edit":
        fields = s.get("fields", {})
        return _fg(state) + _form_cost(
            fields.get("calendar.title", ""),
            fields.get("calendar.location", ""),
            s["day"],
            s["start"],
            p,
            state["focus"] is not None,
        )
    # Create with '+' (on the schedule or a day view, whose '+' starts on that day; reaching another
    # day's view costs the tap its day chip would).
    entry = 1 if s["name"] in ("home", "day") else 2
    start_day = s["day"] if s["name"] == "day" else TODAY
    best = entry + _form_cost("", "", start_day, DEFAULT_START, p, False)
    for e in data(state, "calendar")["events"]:
        on_detail = s["name"] == "event" and s.get("event") == e["id"] and not s.get("confirm")
        best = min(
            best, (1 if on_detail else 2) + _form_cost(e["title"], e["location"], e["day"], e["start"], p, False)
        )
    return _fg(state) + best


@predicate("calendar.event", EventSpec)
def event(state: dict[str, Any], p: EventSpec) -> Check:
    """An event titled ``title`` exists (on ``day`` at ``hour:minute`` at ``location`` when given);
    with ``exclusive``, it is the only event of that title."""
    events = data(state, "calendar")["events"]
    same_title = [e for e in events if norm(e["title"]) == norm(p.title)]
    matched = any(_matches(e, p) for e in same_title)
    # Every other event of the title must go (Delete, confirm at least) when exclusive.
    extras = 2 * max(0, len(same_title) - 1) if p.exclusive else 0
    if matched:
        return Check.of(extras)
    return Check.of(event_cost(state, p) + extras)


class EventTitle(PredicateParams):
    title: str = Field(min_length=1)
    day: int | None = Field(None, ge=0, le=6, description="only events on this day (None: any day)")


@predicate("calendar.no_event", EventTitle)
def no_event(state: dict[str, Any], p: EventTitle) -> Check:
    """No event titled ``title`` (on ``day``, when given)."""
    hits = [
        e
        for e in data(state, "calendar")["events"]
        if norm(e["title"]) == norm(p.title) and (p.day is None or e["day"] == p.day)
    ]
    if not hits:
        return Check.of(0)
    s = top(state, "calendar")
    first = 3  # its row, Delete, confirm
    if s["name"] == "event" and s.get("event") in {e["id"] for e in hits}:
        first = 1 if s.get("confirm") else 2
    return Check.of(_fg(state) + first + 3 * (len(hits) - 1))


# -- setup steps ----------------------------------------------------------------------------
class NewEvent(PredicateParams):
    title: str = Field(min_length=1)
    day: int = Field(ge=0, le=6)
    hour: int = Field(ge=0, le=23)
    minute: int = Field(0, ge=0, le=59)
    duration: int = Field(60, ge=15, le=600)
    location: str = ""


class AddEvents(PredicateParams):
    """Events to put in the week; one of the same title is replaced (a repeated setup adds nothing twice)."""

    events: list[NewEvent] = Field(default_factory=list)
    clear_days: list[int] = Field(default_factory=list, description="days (0 = Monday) emptied first")


@setup_step("calendar.events", AddEvents)
def _add_events(state: dict[str, Any], p: AddEvents) -> None:
    """Empty ``clear_days``, then add (or replace by title) the given events."""
    d = data(state, "calendar")
    d["events"] = [e for e in d["events"] if e["day"] not in set(p.clear_days)]
    for spec in p.events:
        same = [e["id"] for e in d["events"] if norm(e["title"]) == norm(spec.title)]
        new_id = same[0] if same else max((e["id"] for e in d["events"]), default=0) + 1
        start = spec.hour * 60 + spec.minute
        d["events"] = [e for e in d["events"] if norm(e["title"]) != norm(spec.title)]
        d["events"].append(
            {
                "id": new_id,
                "title": spec.title,
                "day": spec.day,
                "start": start,
                "end": start + spec.duration,
                "location": spec.location,
            }
        )
