"""Booking.com templates: stays searches (dates, rooms and guests), saved properties, prices and app settings."""

from __future__ import annotations

import random

from pydantic import Field, ValidationInfo, field_validator, model_validator

from darwin.envs.sim.apps.booking import CURRENCIES, DAYS, DESTINATIONS, HOTELS, night_price
from darwin.templates import TaskTemplate, TemplateParams, register
from darwin.types import StateSetup, VerifierSpec

SEARCH_FORM = ("apps.booking.data.search",)
SAVED = ("apps.booking.data.saved",)
DEFAULT_DATES = {"checkin": "24 Nov", "checkout": "26 Nov"}
"""Dates a previous search left in the form (instances that are not about dates start with them)."""


def zh_day(day: str) -> str:
    """``"24 Nov"`` -> ``"11月24日"``."""
    number, month = day.split()
    return f"{11 if month == 'Nov' else 12}月{number}日"


class Stay(TemplateParams):
    destination: str
    checkin: str
    checkout: str

    @field_validator("destination")
    @classmethod
    def _destination(cls, v: str) -> str:
        if v not in DESTINATIONS:
            raise ValueError(f"unknown destination {v!r}; Booking.com suggests {', '.join(DESTINATIONS)}")
        return v

    @field_validator("checkin", "checkout")
    @classmethod
    def _day(cls, v: str) -> str:
        if v not in DAYS:
            raise ValueError(f"{v!r} is not in the date picker ({DAYS[0]} .. {DAYS[-1]})")
        return v

    @model_validator(mode="after")
    def _order(self) -> Stay:
        if DAYS.index(self.checkout) <= DAYS.index(self.checkin):
            raise ValueError(f"checkout {self.checkout!r} must be after checkin {self.checkin!r}")
        return self


def _stay(rng: random.Random) -> dict[str, str]:
    start = rng.randrange(len(DAYS) - 1)
    end = rng.randint(start + 1, min(start + 4, len(DAYS) - 1))
    return {"destination": rng.choice(DESTINATIONS), "checkin": DAYS[start], "checkout": DAYS[end]}


def _stay_words(p: Stay) -> dict[str, str]:
    return {
        "city": p.destination,
        "checkin": p.checkin,
        "checkout": p.checkout,
        "zh_in": zh_day(p.checkin),
        "zh_out": zh_day(p.checkout),
    }


def _search(p: Stay, **guests: int) -> VerifierSpec:
    return VerifierSpec(
        predicate="booking.search",
        params={"destination": p.destination, "checkin": p.checkin, "checkout": p.checkout, **guests},
    )


register(
    TaskTemplate(
        id="booking.search_dates",
        app="Booking.com",
        params=Stay,
        difficulty=2,
        step_budget=24,
        description="search stays in a city for given dates",
        sample=lambda rng: Stay(**_stay(rng)),
        phrasings={
            "ENG": (
                "Search Booking.com for stays in {city} from {checkin} to {checkout}.",
                "Find a place to stay in {city}, checking in {checkin} and out {checkout}.",
                "Look for hotels in {city} for {checkin} - {checkout} on Booking.com.",
            ),
            "CHN": (
                "在Booking.com搜索{city}的住宿，{zh_in}入住，{zh_out}退房。",
                "查找{city}{zh_in}至{zh_out}的酒店。",
            ),
        },
        wording=_stay_words,
        verifier=lambda p: _search(p),
        allowed_changes=lambda p: SEARCH_FORM,
        subgoals=lambda p: (
            VerifierSpec(predicate="booking.stays_results", params={"destination": p.destination}),
            _search(p),
        ),
    )
)


class Guests(TemplateParams):
    rooms: int = Field(ge=1, le=5)
    adults: int = Field(ge=1, le=8)
    children: int = Field(ge=0, le=4)

    @model_validator(mode="after")
    def _not_default(self) -> Guests:
        if (self.rooms, self.adults, self.children) == (1, 2, 0):
            raise ValueError("1 room, 2 adults, 0 children is the form's default: nothing to change")
        return self


def _guests(rng: random.Random) -> dict[str, int]:
    while True:
        rooms, adults, children = rng.randint(1, 3), rng.randint(1, 4), rng.randint(0, 2)
        if (rooms, adults, children) != (1, 2, 0):
            return {"rooms": rooms, "adults": adults, "children": children}


def _guest_words(p: Guests) -> dict[str, str]:
    return {
        "rooms": f"{p.rooms} room{'s' if p.rooms > 1 else ''}",
        "adults": f"{p.adults} adult{'s' if p.adults > 1 else ''}",
        "children": f"{p.children} child{'ren' if p.children != 1 else ''}",
        "r": str(p.rooms),
        "a": str(p.adults),
        "c": str(p.children),
    }


register(
    TaskTemplate(
        id="booking.set_guests",
        app="Booking.com",
        params=Guests,
        difficulty=1,
        step_budget=20,
        description="set rooms and guests in the stays search form",
        sample=lambda rng: Guests(**_guests(rng)),
        phrasings={
            "ENG": (
                "On Booking.com, set the stays search to {rooms}, {adults} and {children}.",
                "Change the rooms and guests for my Booking.com search to {rooms}, {adults}, {children}.",
            ),
            "CHN": (
                "在Booking.com把住宿搜索设置为{r}间房、{a}位成人、{c}名儿童。",
                "把Booking.com的房间和人数改成：{r}间，成人{a}位，儿童{c}名。",
            ),
        },
        wording=_guest_words,
        verifier=lambda p: VerifierSpec(predicate="booking.guests", params=p.model_dump()),
        allowed_changes=lambda p: SEARCH_FORM,
    )
)


class StayWithGuests(Stay, Guests):
    pass


register(
    TaskTemplate(
        id="booking.search_with_guests",
        app="Booking.com",
        params=StayWithGuests,
        difficulty=3,
        step_budget=32,
        description="search stays in a city for given dates, rooms and guests",
        sample=lambda rng: StayWithGuests(**_stay(rng), **_guests(rng)),
        phrasings={
            "ENG": (
                "Search Booking.com for stays in {city} from {checkin} to {checkout} for {rooms}, {adults} and {children}.",
                "Find {rooms} in {city} for {adults} and {children}, {checkin} to {checkout}.",
            ),
            "CHN": ("在Booking.com搜索{city}的住宿：{zh_in}至{zh_out}，{r}间房，{a}位成人，{c}名儿童。",),
        },
        wording=lambda p: {**_stay_words(p), **_guest_words(p)},
        verifier=lambda p: _search(p, rooms=p.rooms, adults=p.adults, children=p.children),
        allowed_changes=lambda p: SEARCH_FORM,
        subgoals=lambda p: (
            VerifierSpec(
                predicate="booking.guests", params={"rooms": p.rooms, "adults": p.adults, "children": p.children}
            ),
            VerifierSpec(predicate="booking.stays_results", params={"destination": p.destination}),
            _search(p, rooms=p.rooms, adults=p.adults, children=p.children),
        ),
    )
)


class PropertyParams(TemplateParams):
    hotel: str
    city: str

    @field_validator("hotel")
    @classmethod
    def _hotel(cls, v: str) -> str:
        if v not in HOTELS:
            raise ValueError(f"unknown property {v!r}; Booking.com lists {', '.join(HOTELS)}")
        return v

    @field_validator("city")
    @classmethod
    def _city(cls, v: str) -> str:
        if v not in DESTINATIONS:
            raise ValueError(f"unknown city {v!r}; use one of {', '.join(DESTINATIONS)}")
        return v

    def name(self) -> str:
        return f"{self.hotel}, {self.city}"


def _property(rng: random.Random) -> PropertyParams:
    return PropertyParams(hotel=rng.choice(HOTELS), city=rng.choice(DESTINATIONS))


register(
    TaskTemplate(
        id="booking.save_property",
        app="Booking.com",
        params=PropertyParams,
        difficulty=2,
        step_budget=24,
        description="search a city (dates already chosen) and save one property",
        sample=_property,
        phrasings={
            "ENG": (
                "Save {hotel} in {city} to my saved properties on Booking.com.",
                "On Booking.com, find {hotel} in {city} and save it.",
                "Add {hotel}, {city} to my Booking.com saved list.",
            ),
            "CHN": ("在Booking.com上收藏{city}的{hotel}。", "把{city}的{hotel}保存到Booking.com的收藏列表。"),
        },
        setup=lambda p: (StateSetup(step="booking.search", params=DEFAULT_DATES),),
        verifier=lambda p: VerifierSpec(predicate="booking.saved", params={"property": p.name()}),
        allowed_changes=lambda p: SAVED + SEARCH_FORM,
    )
)


class SavedParams(TemplateParams):
    """The saved list the instance starts with (``"Hotel, City"``) and the property to remove."""

    saved: tuple[str, ...] = Field(min_length=2, max_length=4)
    remove: str

    @field_validator("remove")
    @classmethod
    def _remove(cls, v: str, info: ValidationInfo) -> str:
        if v not in info.data.get("saved", ()):
            raise ValueError(f"remove={v!r} must be one of the saved properties")
        return v


def _saved(rng: random.Random) -> SavedParams:
    k = rng.randint(2, 4)
    names = [
        f"{hotel}, {city}" for hotel, city in zip(rng.sample(HOTELS, k=k), rng.choices(DESTINATIONS, k=k), strict=True)
    ]
    return SavedParams(saved=tuple(names), remove=rng.choice(names))


register(
    TaskTemplate(
        id="booking.remove_saved",
        app="Booking.com",
        params=SavedParams,
        difficulty=1,
        step_budget=16,
        description="remove one property from the saved list (the instance saves a few first)",
        sample=_saved,
        phrasings={
            "ENG": ("Remove {remove} from my saved properties on Booking.com.", "Unsave {remove} in Booking.com."),
            "CHN": ("把{remove}从Booking.com的收藏中移除。", "在Booking.com取消收藏{remove}。"),
        },
        wording=lambda p: {"remove": p.remove},
        setup=lambda p: (StateSetup(step="booking.saved", params={"properties": list(p.saved)}),),
        verifier=lambda p: VerifierSpec(predicate="booking.not_saved", params={"property": p.remove}),
        allowed_changes=lambda p: SAVED,
    )
)

register(
    TaskTemplate(
        id="booking.night_price",
        app="Booking.com",
        params=PropertyParams,
        difficulty=2,
        step_budget=24,
        description="answer: the nightly price of a property (dates already chosen)",
        sample=_property,
        phrasings={
            "ENG": (
                "How much is a night at {hotel} in {city} on Booking.com?",
                "Search stays in {city}: what does {hotel} cost per night?",
            ),
            "CHN": ("Booking.com上{city}的{hotel}一晚多少钱？", "搜索{city}的住宿，{hotel}每晚价格是多少？"),
        },
        setup=lambda p: (StateSetup(step="booking.search", params=DEFAULT_DATES),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={
                "kind": "number",
                "expected": night_price(p.hotel),
                "tolerance": 0.5,
                "app": "booking",
                "via": ["results"],
            },
        ),
        allowed_changes=lambda p: SEARCH_FORM,
    )
)


class CurrencyParams(TemplateParams):
    currency: str

    @field_validator("currency")
    @classmethod
    def _currency(cls, v: str) -> str:
        if v not in CURRENCIES:
            raise ValueError(f"unknown currency {v!r}; use one of {', '.join(CURRENCIES)}")
        return v


register(
    TaskTemplate(
        id="booking.currency",
        app="Booking.com",
        params=CurrencyParams,
        difficulty=1,
        step_budget=16,
        description="answer: the currency set in the app settings (the instance sets it)",
        sample=lambda rng: CurrencyParams(currency=rng.choice(CURRENCIES)),
        phrasings={
            "ENG": (
                "Which currency is Booking.com set to show prices in?",
                "What currency does my Booking.com app use? Check its settings.",
            ),
            "CHN": ("Booking.com设置的显示货币是什么？", "查看Booking.com的设置，货币是哪一种？"),
        },
        wording=lambda p: {},
        setup=lambda p: (StateSetup(step="booking.settings", params={"currency": p.currency}),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={"kind": "exact", "expected": p.currency, "app": "booking", "via": ["profile", "settings"]},
        ),
        allowed_changes=lambda p: (),
    )
)
