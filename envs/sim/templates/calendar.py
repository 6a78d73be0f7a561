"""Calendar templates: create, move and delete events; read an event's time and place, count a day's events."""

from __future__ import annotations

import random

from pydantic import Field

from darwin.envs.sim.apps.calendar import DAY_FULL, LOCATIONS, TEMPLATE_EVENTS, count_text
from darwin.envs.sim.apps.clock import time_text
from darwin.templates import TaskTemplate, TemplateParams, register
from darwin.types import StateSetup, VerifierSpec

EVENTS = ("apps.calendar.data.events",)
ZH_DAYS = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")


class Event(TemplateParams):
    title: str = Field(min_length=1)
    day: int = Field(ge=0, le=6, description="0 = Monday 19 November")
    hour: int = Field(ge=0, le=23)
    minute: int = Field(0, description="0, 15, 30 or 45 (the time picker's minutes)")


class EventAt(Event):
    location: str = Field(min_length=1)


class Move(Event):
    to_day: int = Field(ge=0, le=6)


class DayCount(TemplateParams):
    day: int = Field(ge=0, le=6)
    titles: tuple[str, ...] = Field(
        min_length=1, max_length=5, description="the events the day holds (it is emptied first)"
    )


def _time(rng: random.Random) -> tuple[int, int]:
    # Quarter past or to the hour: seeded events start on the hour or half hour, so the time is unique.
    return rng.randrange(8, 20), rng.choice((15, 45))


def _sample_event(rng: random.Random) -> Event:
    hour, minute = _time(rng)
    return Event(title=rng.choice(TEMPLATE_EVENTS), day=rng.randrange(7), hour=hour, minute=minute)


def _sample_event_at(rng: random.Random) -> EventAt:
    e = _sample_event(rng)
    return EventAt(**e.model_dump(), location=rng.choice(LOCATIONS))


def _sample_move(rng: random.Random) -> Move:
    e = _sample_event(rng)
    return Move(**e.model_dump(), to_day=rng.choice([d for d in range(7) if d != e.day]))


def _words(p: Event) -> dict[str, str]:
    out = {k: str(v) for k, v in p.model_dump().items()}
    out.update(
        day=DAY_FULL[p.day], zh_day=ZH_DAYS[p.day], time=time_text(p.hour, p.minute), zh_time=f"{p.hour}:{p.minute:02d}"
    )
    if isinstance(p, Move):
        out.update(to_day=DAY_FULL[p.to_day], zh_to_day=ZH_DAYS[p.to_day])
    return out


def _add(p: Event, location: str = "") -> StateSetup:
    return StateSetup(
        step="calendar.events",
        params={"events": [{"title": p.title, "day": p.day, "hour": p.hour, "minute": p.minute, "location": location}]},
    )


def _event(**params: object) -> VerifierSpec:
    return VerifierSpec(predicate="calendar.event", params=params)


register(
    TaskTemplate(
        id="calendar.create_event",
        app="Calendar",
        params=Event,
        difficulty=2,
        step_budget=24,
        description="create an event on a day of this week at a time",
        sample=_sample_event,
        phrasings={
            "ENG": (
                "Add an event '{title}' on {day} at {time}.",
                "Schedule '{title}' for {day} at {time} in my calendar.",
                "Create a calendar event called '{title}' on {day}, starting at {time}.",
            ),
            "CHN": ("在日历中添加日程“{title}”，时间是{zh_day}{zh_time}。", "新建日程：{zh_day}{zh_time}，{title}。"),
        },
        wording=_words,
        verifier=lambda p: _event(title=p.title, day=p.day, hour=p.hour, minute=p.minute),
        allowed_changes=lambda p: EVENTS,
        subgoals=lambda p: (
            _event(title=p.title),
            _event(title=p.title, day=p.day),
            _event(title=p.title, day=p.day, hour=p.hour, minute=p.minute),
        ),
    )
)

register(
    TaskTemplate(
        id="calendar.create_event_location",
        app="Calendar",
        params=EventAt,
        difficulty=3,
        step_budget=28,
        description="create an event with a day, a time and a location",
        sample=_sample_event_at,
        phrasings={
            "ENG": (
                "Add '{title}' to my calendar on {day} at {time}, location {location}.",
                "Create an event '{title}' at {location} on {day}, {time}.",
            ),
            "CHN": (
                "在日历里添加“{title}”，{zh_day}{zh_time}，地点{location}。",
                "新建日程“{title}”：{zh_day}{zh_time}，在{location}。",
            ),
        },
        wording=_words,
        verifier=lambda p: _event(title=p.title, day=p.day, hour=p.hour, minute=p.minute, location=p.location),
        allowed_changes=lambda p: EVENTS,
        subgoals=lambda p: (
            _event(title=p.title),
            _event(title=p.title, day=p.day, hour=p.hour, minute=p.minute),
            _event(title=p.title, day=p.day, hour=p.hour, minute=p.minute, location=p.location),
        ),
    )
)

register(
    TaskTemplate(
        id="calendar.delete_event",
        app="Calendar",
        params=Event,
        difficulty=1,
        step_budget=16,
        description="delete an event (the instance adds it)",
        sample=_sample_event,
        phrasings={
            "ENG": (
                "Delete the '{title}' event on {day}.",
                "Remove '{title}' from my calendar on {day}.",
                "Cancel my {title} on {day}: delete the event.",
            ),
            "CHN": ("删除{zh_day}的日程“{title}”。", "把{zh_day}的“{title}”从日历里删掉。"),
        },
        wording=_words,
        setup=lambda p: (_add(p),),
        verifier=lambda p: VerifierSpec(predicate="calendar.no_event", params={"title": p.title, "day": p.day}),
        allowed_changes=lambda p: EVENTS,
    )
)

register(
    TaskTemplate(
        id="calendar.move_event",
        app="Calendar",
        params=Move,
        difficulty=2,
        step_budget=20,
        description="move an event to another day at the same time (the instance adds it)",
        sample=_sample_move,
        phrasings={
            "ENG": (
                "Move '{title}' from {day} to {to_day}, keeping the time.",
                "Reschedule my {title} from {day} to {to_day} at the same time.",
            ),
            "CHN": (
                "把“{title}”从{zh_day}改到{zh_to_day}，时间不变。",
                "将{zh_day}的“{title}”移到{zh_to_day}同一时间。",
            ),
        },
        wording=_words,
        setup=lambda p: (_add(p),),
        verifier=lambda p: _event(title=p.title, day=p.to_day, hour=p.hour, minute=p.minute, exclusive=True),
        allowed_changes=lambda p: ("apps.calendar.data.events.*.day",),
        subgoals=lambda p: (
            _event(title=p.title, day=p.to_day),
            _event(title=p.title, day=p.to_day, hour=p.hour, minute=p.minute, exclusive=True),
        ),
    )
)

register(
    TaskTemplate(
        id="calendar.event_time",
        app="Calendar",
        params=Event,
        difficulty=1,
        step_budget=12,
        description="answer: when an event starts (time matcher)",
        sample=_sample_event,
        phrasings={
            "ENG": ("When does '{title}' start on {day}?", "What time is my {title} on {day}?"),
            "CHN": ("{zh_day}的“{title}”几点开始？", "我{zh_day}的{title}是几点？"),
        },
        wording=_words,
        setup=lambda p: (_add(p),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={"kind": "time", "expected": time_text(p.hour, p.minute), "app": "calendar", "via": ["day"]},
        ),
        allowed_changes=lambda p: (),
    )
)

register(
    TaskTemplate(
        id="calendar.event_location",
        app="Calendar",
        params=EventAt,
        difficulty=1,
        step_budget=12,
        description="answer: where an event takes place",
        sample=_sample_event_at,
        phrasings={
            "ENG": ("Where is '{title}' on {day}?", "What is the location of my {title} on {day}?"),
            "CHN": ("{zh_day}的“{title}”在哪里？", "我{zh_day}的{title}地点是哪里？"),
        },
        wording=_words,
        setup=lambda p: (_add(p, p.location),),
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={"kind": "exact", "expected": p.location, "app": "calendar", "via": ["day"]},
        ),
        allowed_changes=lambda p: (),
    )
)


def _count_setup(p: DayCount) -> tuple[StateSetup, ...]:
    events = [{"title": t, "day": p.day, "hour": 9 + 2 * i, "minute": 15} for i, t in enumerate(p.titles)]
    return (StateSetup(step="calendar.events", params={"events": events, "clear_days": [p.day]}),)


register(
    TaskTemplate(
        id="calendar.count_day",
        app="Calendar",
        params=DayCount,
        difficulty=2,
        step_budget=12,
        description="answer: how many events a day holds (the instance sets that day's events)",
        sample=lambda rng: DayCount(day=rng.randrange(7), titles=tuple(rng.sample(TEMPLATE_EVENTS, rng.randint(1, 4)))),
        phrasings={
            "ENG": ("How many events do I have on {day}?", "Count the events in my calendar on {day}."),
            "CHN": ("我{zh_day}有几个日程？", "日历里{zh_day}一共有多少个活动？"),
        },
        wording=lambda p: {"day": DAY_FULL[p.day], "zh_day": ZH_DAYS[p.day]},
        setup=_count_setup,
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={"kind": "number", "expected": count_text(len(p.titles)), "app": "calendar", "via": ["day"]},
        ),
        allowed_changes=lambda p: (),
    )
)
