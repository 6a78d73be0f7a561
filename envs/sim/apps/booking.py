"""Booking.com: stays search (destination, dates, rooms and guests), saved properties and app settings."""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from typing import Any

from pydantic import Field, field_validator

from darwin.envs.sim.apps.base import AppContext, SimApp
from darwin.envs.sim.apps.booking_zh import ZH
from darwin.envs.sim.setups import setup_step
from darwin.envs.sim.ui import UI, Row
from darwin.predicates import (
    Check,
    NoParams,
    PredicateParams,
    data,
    nav_cost,
    norm,
    on_screen,
    predicate,
    top,
)

DESTINATIONS = ("Amsterdam", "Barcelona", "Berlin", "Dublin", "Lisbon", "London", "Paris", "Prague", "Rome", "Vienna")
DAYS = tuple(f"{d} Nov" for d in range(22, 31)) + tuple(f"{d} Dec" for d in range(1, 6))
HOTELS = (
    "Hotel Adlon",
    "Motel One",
    "Park Inn",
    "Hilton",
    "Meininger",
    "Generator Hostel",
    "NH Collection",
    "Ibis Styles",
)
LIMITS = {"rooms": (1, 5), "adults": (1, 8), "children": (0, 4)}
CURRENCIES = ("Euro", "US Dollar", "British Pound", "Swiss Franc", "Japanese Yen", "Czech Koruna")
SETTINGS_ROWS = (
    ("currency", "Currency"),
    ("language", "Language"),
    ("temperature", "Temperature"),
    ("units", "Units"),
    ("notifications", "Notifications"),
)


class BookingApp(SimApp):
    """Booking.com with a stays search form, date picker, guests editor, profile and settings."""

    id = "booking"
    label = "Booking.com"
    package = "com.booking"
    activity = "com.booking.appindex.presentation.activity.SearchActivity"
    color = (0, 53, 128)
    glyph = "B"
    aliases = ("booking",)
    root_screen = "search"
    zh = ZH

    def initial_data(self, rng: random.Random) -> dict[str, Any]:
        return {
            "search": {"destination": "", "checkin": None, "checkout": None, "rooms": 1, "adults": 2, "children": 0},
            "settings": {
                "currency": "Euro",
                "language": "English (UK)",
                "temperature": "Celsius",
                "units": "Metric (km, m)",
                "notifications": "On",
            },
            "saved": [],
        }

    def build(self, ui: UI, ctx: AppContext) -> None:
        name = ctx.screen["name"]
        d = ctx.data
        sch = d["search"]
        tabs = [
            ("booking.tab.search", "Search", lambda: ctx.reset_to("search")),
            ("booking.tab.saved", "Saved", lambda: ctx.reset_to("saved")),
            ("booking.tab.bookings", "Bookings", lambda: ctx.reset_to("bookings")),
            ("booking.tab.profile", "Profile", lambda: ctx.reset_to("profile")),
        ]
        if name in ("search", "saved", "bookings", "profile"):
            ui.app_bar("Booking.com")
            ui.bottom_nav(tabs, f"booking.tab.{name}")
        if name == "search":
            ui.buttons_row(
                [
                    ("booking.stays", "Stays", None, True),
                    ("booking.flights", "Flights", lambda: ctx.toast("Flights are not available"), False),
                    ("booking.cars", "Car rental", lambda: ctx.toast("Car rental is not available"), False),
                ]
            )
            ui.row(
                "booking.destination",
                sch["destination"] or "Enter your destination",
                "Destination",
                on_tap=ctx.pusher("destination"),
                glyph="D",
            )
            dates = f"{sch['checkin']} - {sch['checkout']}" if sch["checkin"] and sch["checkout"] else "Select dates"
            ui.row(
                "booking.dates",
                dates,
                "Check-in - Check-out",
                on_tap=ctx.pusher("dates", checkin=sch["checkin"], checkout=sch["checkout"]),
                glyph="C",
            )
            ui.row("booking.guests", _guests_text(sch), "Rooms and guests", on_tap=ctx.pusher("guests"), glyph="G")
            ui.button("booking.search_button", "Search", self._search(ctx))
        elif name == "destination":
            ui.app_bar("Enter destination", on_back=ctx.popper())
            ctx.text_field(ui, "booking.dest_field", "Where are you going?", on_submit=self._pick_destination(ctx))
            typed = norm(ctx.field("booking.dest_field"))
            rows = [
                Row(f"booking.suggest.{c}", c, "City", on_tap=functools.partial(self._pick_destination(ctx), c))
                for c in DESTINATIONS
                if typed in norm(c)
            ]
            ui.list("suggestions", ctx.scroll_offset("suggestions"), ctx.shuffled(rows, "suggestions"))
        elif name == "dates":
            s = ctx.screen
            ui.app_bar("Select dates", on_back=ctx.popper())
            ui.label(
                "booking.dates_hint",
                f"Check-in: {s['checkin'] or '-'}    Check-out: {s['checkout'] or '-'}",
                role="text",
            )
            cells = [
                (f"booking.day.{i}", day.split()[0], self._tap_day(ctx, day), day in (s["checkin"], s["checkout"]))
                for i, day in enumerate(DAYS)
            ]
            ui.grid(cells, columns=7)
            ui.button("booking.dates_confirm", "Select dates", self._confirm_dates(ctx))
        elif name == "guests":
            ui.app_bar("Rooms and guests", on_back=ctx.popper())
            for key, label in (("rooms", "Rooms"), ("adults", "Adults"), ("children", "Children")):
                ui.buttons_row(
                    [
                        (f"booking.{key}.minus", "-", self._adjust(ctx, key, -1), False),
                        (f"booking.{key}.value", f"{label}: {sch[key]}", None, False),
                        (f"booking.{key}.plus", "+", self._adjust(ctx, key, +1), False),
                    ]
                )
            ui.button("booking.guests_apply", "Apply", ctx.popper())
        elif name == "results":
            s = ctx.screen
            ui.app_bar(s["destination"], on_back=ctx.popper())
            ui.label("booking.results_summary", f"{s['checkin']} - {s['checkout']} - {s['guests']}", role="text")
            rows = [
                Row(
                    f"booking.hotel.{i}",
                    f"{h}, {s['destination']}",
                    f"{night_price(h)} per night",
                    on_tap=ctx.pusher("hotel", title=h, destination=s["destination"]),
                )
                for i, h in enumerate(HOTELS)
            ]
            ui.list("hotels", ctx.scroll_offset("hotels"), ctx.shuffled(rows, "hotels"))
        elif name == "hotel":
            ui.app_bar(ctx.screen["title"], on_back=ctx.popper())
            ui.card("booking.hotel_card", ctx.screen["title"], "Free cancellation\nBreakfast included")
            ui.button("booking.save_hotel", "Save", self._save(ctx))
        elif name == "saved":
            ui.label("booking.saved_empty", "No saved properties" if not d["saved"] else f"{len(d['saved'])} saved")
            rows = [
                Row(
                    f"booking.saved.{i}", prop, "Saved property", trailing="Remove", on_trailing=_remover(d["saved"], i)
                )
                for i, prop in enumerate(d["saved"])
            ]
            ui.list("saved", ctx.scroll_offset("saved"), rows)
        elif name == "bookings":
            ui.label("booking.bookings_empty", "No upcoming trips")
        elif name == "profile":
            ui.row("booking.profile.account", "Manage account", glyph="A")
            ui.row("booking.profile.rewards", "Rewards & Wallet", glyph="R")
            ui.row("booking.profile.settings", "Settings", on_tap=ctx.pusher("settings"), glyph="S")
            ui.row("booking.profile.help", "Help center", glyph="H")
        elif name == "settings":
            ui.app_bar("Settings", on_back=ctx.popper())
            for key, label in SETTINGS_ROWS:
                ui.row(f"booking.settings.{key}", label, d["settings"][key])
        else:
            raise ValueError(f"booking: unknown screen {name!r}")

    @staticmethod
    def _save(ctx: AppContext):
        def save() -> None:
            # Older screens (before the destination was passed along) save the bare name.
            dest = ctx.screen.get("destination")
            ctx.data["saved"].append(f"{ctx.screen['title']}, {dest}" if dest else ctx.screen["title"])
            ctx.toast("Saved")

        return save

    @staticmethod
    def _pick_destination(ctx: AppContext) -> Callable[[str], None]:
        def pick(text: str) -> None:
            match = next((c for c in DESTINATIONS if norm(c) == norm(text)), text.strip().title())
            if match:
                ctx.data["search"]["destination"] = match
                ctx.pop()

        return pick

    @staticmethod
    def _tap_day(ctx: AppContext, day: str):
        def tap() -> None:
            s = ctx.screen
            if s["checkin"] is None or s["checkout"] is not None or DAYS.index(day) <= DAYS.index(s["checkin"]):
                s["checkin"], s["checkout"] = day, None
            else:
                s["checkout"] = day

        return tap

    @staticmethod
    def _confirm_dates(ctx: AppContext):
        def confirm() -> None:
            s = ctx.screen
            if s["checkin"] and s["checkout"]:
                ctx.data["search"]["checkin"], ctx.data["search"]["checkout"] = s["checkin"], s["checkout"]
                ctx.pop()
            else:
                ctx.toast("Select check-in and check-out dates")

        return confirm

    @staticmethod
    def _adjust(ctx: AppContext, key: str, delta: int):
        def adjust() -> None:
            lo, hi = LIMITS[key]
            ctx.data["search"][key] = max(lo, min(hi, ctx.data["search"][key] + delta))

        return adjust

    @staticmethod
    def _search(ctx: AppContext):
        def search() -> None:
            sch = ctx.data["search"]
            if not sch["destination"]:
                ctx.toast("Enter a destination to start searching")
            elif not (sch["checkin"] and sch["checkout"]):
                ctx.toast("Select your dates")
            else:
                ctx.push(
                    "results",
                    destination=sch["destination"],
                    checkin=sch["checkin"],
                    checkout=sch["checkout"],
                    guests=_guests_text(sch),
                )

        return search


def night_price(hotel: str) -> str:
    """The nightly price Booking.com lists for ``hotel`` (in every city, for every date): ``"EUR 97"``."""
    return f"EUR {80 + 17 * HOTELS.index(hotel)}"


def _remover(items: list[str], index: int):
    def remove() -> None:
        del items[index]

    return remove


def _guests_text(s: dict[str, Any]) -> str:
    return f"{s['rooms']} room{'s' if s['rooms'] > 1 else ''} - {s['adults']} adult{'s' if s['adults'] > 1 else ''} - {s['children']} children"


class StaysSearch(PredicateParams):
    destination: str = Field(min_length=1)

    def texts(self) -> list[str]:
        return [self.destination]


@predicate("booking.stays_results", StaysSearch)
def stays_results(state: dict[str, Any], p: StaysSearch) -> Check:
    """Booking.com shows stay results for ``destination`` (dates, rooms and guests chosen)."""
    if on_screen(state, "booking", "results") and norm(top(state, "booking")["destination"]) == norm(p.destination):
        return Check.of(0)
    # Lower bound: setting the destination, choosing dates and searching are separate actions.
    sch = data(state, "booking")["search"]
    screen = top(state, "booking")
    here = state["foreground"] == "booking" and state["popup"] is None
    cost = 1  # the search button
    if norm(sch["destination"]) != norm(p.destination):
        cost += 1 if here and screen["name"] == "destination" else 2
    if not (sch["checkin"] and sch["checkout"]):
        if here and screen["name"] == "dates":
            cost += 1 + (screen["checkin"] is None) + (screen["checkout"] is None)
        else:
            cost += 4  # open the picker, tap check-in, tap check-out, confirm
    return Check.of(cost)


@predicate("booking.app_settings", NoParams)
def app_settings(state: dict[str, Any], p: NoParams) -> Check:
    """Booking.com's app settings screen is open."""
    return Check.of(nav_cost(state, "booking", ("profile", "settings")))


class Search(PredicateParams):
    """A stays search: destination and dates; rooms and guests only where given."""

    destination: str = Field(min_length=1)
    checkin: str
    checkout: str
    rooms: int | None = Field(None, ge=1, le=5)
    adults: int | None = Field(None, ge=1, le=8)
    children: int | None = Field(None, ge=0, le=4)

    def texts(self) -> list[str]:
        return [self.destination]

    @field_validator("checkin", "checkout")
    @classmethod
    def _day(cls, v: str) -> str:
        if v not in DAYS:
            raise ValueError(f"{v!r} is not a day of the date picker; use one of {', '.join(DAYS)}")
        return v

    def guests(self) -> dict[str, int]:
        return {
            k: v
            for k, v in (("rooms", self.rooms), ("adults", self.adults), ("children", self.children))
            if v is not None
        }


def _guest_taps(sch: dict[str, Any], want: dict[str, int]) -> int:
    return sum(abs(sch[k] - v) for k, v in want.items())


@predicate("booking.search", Search)
def search(state: dict[str, Any], p: Search) -> Check:
    """Booking.com shows stay results for ``destination`` from ``checkin`` to ``checkout`` (and the given rooms and guests)."""
    screen = top(state, "booking")
    if (
        on_screen(state, "booking", "results")
        and norm(screen["destination"]) == norm(p.destination)
        and (screen["checkin"], screen["checkout"]) == (p.checkin, p.checkout)
        and all(_parse_guests(screen["guests"])[k] == v for k, v in p.guests().items())
    ):
        return Check.of(0)
    return Check.of(_form_cost(state, p.destination, (p.checkin, p.checkout), p.guests()))


def _form_cost(
    state: dict[str, Any], destination: str, dates: tuple[str, str] | None, guests: dict[str, int] | None
) -> int:
    """Lower bound from the search form: each wrong part needs its own actions, then 'Search'.

    ``dates`` None: any dates, but some must be chosen; ``guests`` None or empty: any.
    """
    sch = data(state, "booking")["search"]
    screen = top(state, "booking")
    here = state["foreground"] == "booking" and state["popup"] is None
    cost = 1  # the search button
    if norm(sch["destination"]) != norm(destination):
        cost += 1 if here and screen["name"] == "destination" else 2
    chosen = (sch["checkin"], sch["checkout"])
    if (dates is None and not all(chosen)) or (dates is not None and chosen != dates):
        if here and screen["name"] == "dates":
            want_in, want_out = dates if dates is not None else (screen["checkin"], screen["checkout"])
            cost += (
                1
                + (screen["checkin"] is None or screen["checkin"] != want_in)
                + (screen["checkout"] is None or screen["checkout"] != want_out)
            )
        else:
            cost += 4  # open the picker, tap check-in, tap check-out, confirm
    taps = _guest_taps(sch, guests or {})
    if taps:
        cost += taps + (1 if here and screen["name"] == "guests" else 2)  # open the editor and leave it
    return cost


def _parse_guests(text: str) -> dict[str, int]:
    rooms, adults, children = (int(part.split()[0]) for part in text.split(" - "))
    return {"rooms": rooms, "adults": adults, "children": children}


class Guests(PredicateParams):
    rooms: int = Field(ge=1, le=5)
    adults: int = Field(ge=1, le=8)
    children: int = Field(ge=0, le=4)


@predicate("booking.guests", Guests)
def guests(state: dict[str, Any], p: Guests) -> Check:
    """The stays search form is set to ``rooms`` rooms, ``adults`` adults and ``children`` children."""
    taps = _guest_taps(data(state, "booking")["search"], p.model_dump())
    if taps == 0:
        return Check.of(0)
    return Check.of(nav_cost(state, "booking", ("search", "guests")) + taps)


class Property(PredicateParams):
    """A property as Booking.com's saved list names it: ``"Hotel Adlon, Berlin"``."""

    property: str = Field(min_length=1)


def _saved(state: dict[str, Any], prop: str) -> int:
    return sum(1 for s in data(state, "booking")["saved"] if norm(s) == norm(prop))


@predicate("booking.saved", Property)
def saved(state: dict[str, Any], p: Property) -> Check:
    """``property`` is among the saved properties."""
    if _saved(state, p.property):
        return Check.of(0)
    screen = top(state, "booking")
    here = state["foreground"] == "booking" and state["popup"] is None
    hotel, _, city = p.property.partition(", ")
    extra = 0 if here else 1  # open the app (or dismiss its pop-up); its stack is kept
    if screen["name"] == "hotel" and screen["title"] == hotel and norm(screen.get("destination") or "") == norm(city):
        return Check.of(extra + 1)
    if screen["name"] == "results" and norm(screen["destination"]) == norm(city):
        return Check.of(extra + 2)  # open the property, save it
    # Results for the city first (the search form's bound), then open the property and save it.
    return Check.of(extra + _form_cost(state, city, None, None) + 2)


@predicate("booking.not_saved", Property)
def not_saved(state: dict[str, Any], p: Property) -> Check:
    """``property`` is not among the saved properties (each copy needs its own 'Remove')."""
    left = _saved(state, p.property)
    if left == 0:
        return Check.of(0)
    return Check.of(nav_cost(state, "booking", ("saved",)) + left)


class SearchForm(PredicateParams):
    """Values to put in the stays search form (only the ones given)."""

    destination: str | None = None
    checkin: str | None = None
    checkout: str | None = None
    rooms: int | None = Field(None, ge=1, le=5)
    adults: int | None = Field(None, ge=1, le=8)
    children: int | None = Field(None, ge=0, le=4)

    @field_validator("checkin", "checkout")
    @classmethod
    def _day(cls, v: str | None) -> str | None:
        if v is not None and v not in DAYS:
            raise ValueError(f"{v!r} is not a day of the date picker; use one of {', '.join(DAYS)}")
        return v


@setup_step("booking.search", SearchForm)
def _search_form(state: dict[str, Any], p: SearchForm) -> None:
    """Fill the given fields of the stays search form (as a previous search left them)."""
    data(state, "booking")["search"].update(p.model_dump(exclude_none=True))


class SavedList(PredicateParams):
    properties: tuple[str, ...] = Field(min_length=1)


@setup_step("booking.saved", SavedList)
def _saved_list(state: dict[str, Any], p: SavedList) -> None:
    """Add the given properties (``"Hotel Adlon, Berlin"``) to the saved list."""
    data(state, "booking")["saved"].extend(p.properties)


class AppSettings(PredicateParams):
    currency: str | None = Field(None, description=f"one of {', '.join(CURRENCIES)}")

    @field_validator("currency")
    @classmethod
    def _currency(cls, v: str | None) -> str | None:
        if v is not None and v not in CURRENCIES:
            raise ValueError(f"unknown currency {v!r}; use one of {', '.join(CURRENCIES)}")
        return v


@setup_step("booking.settings", AppSettings)
def _app_settings(state: dict[str, Any], p: AppSettings) -> None:
    """Set the given app settings."""
    data(state, "booking")["settings"].update(p.model_dump(exclude_none=True))
