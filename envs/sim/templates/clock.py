"""Clock templates: alarms, world clocks, the home time zone, and what the Clock shows."""

from __future__ import annotations

import random
from typing import Literal

from pydantic import Field, field_validator

from darwin.envs.sim.apps.clock import CITIES, STYLES, TIME_ZONES, days_text, time_text
from darwin.templates import TaskTemplate, TemplateParams, register
from darwin.types import StateSetup, VerifierSpec

ALARMS = ("apps.clock.data.alarms",)
DAY_SETS = ((0, 1, 2, 3, 4), (5, 6), (), (0,), (2, 4), (1, 3), (0, 2, 4))
ZH_DAYS = {(0, 1, 2, 3, 4): "工作日", (5, 6): "周末", (): "不重复"}


class AlarmTime(TemplateParams):
    hour: int = Field(ge=0, le=23)
    minute: int = Field(0, ge=0, le=59)


class Alarm(AlarmTime):
    days: tuple[int, ...] = Field((), description="0 = Monday ... 6 = Sunday; () = once")


def _time(rng: random.Random) -> tuple[int, int]:
    # Not 7:xx or 8:00/10:00: the alarms every phone starts with.
    return rng.choice((5, 6, 9, 11, 13, 14, 16, 18, 21, 22)), rng.choice((0, 15, 30, 45))


def _alarm_words(p: Alarm) -> dict[str, str]:
    days = tuple(sorted(p.days))
    repeat = {(0, 1, 2, 3, 4): "on weekdays", (5, 6): "on weekends", (): "once"}.get(
        days, "every " + ", ".join(days_text([d]) for d in days)
    )
    zh = ZH_DAYS.get(days, "每" + "、".join("周" + "一二三四五六日"[d] for d in days))
    return {
        "time": time_text(p.hour, p.minute),
        "repeat": repeat,
        "zh_repeat": zh,
        "zh_time": f"{p.hour}:{p.minute:02d}",
    }


register(
    TaskTemplate(
        id="clock.set_alarm",
        app="Clock",
        params=Alarm,
        difficulty=2,
        step_budget=24,
        description="create an alarm at a time, repeating on given days",
        sample=lambda rng: Alarm(hour=(t := _time(rng))[0], minute=t[1], days=rng.choice(DAY_SETS)),
        phrasings={
            "ENG": (
                "Set an alarm for {time} {repeat}.",
                "Create a {time} alarm that rings {repeat}.",
                "Add an alarm at {time}, {repeat}.",
            ),
            "CHN": ("设置一个{zh_time}的闹钟，{zh_repeat}。", "新建闹钟：{zh_time}，{zh_repeat}。"),
        },
        wording=_alarm_words,
        verifier=lambda p: VerifierSpec(
            predicate="clock.alarm", params={"hour": p.hour, "minute": p.minute, "days": list(p.days)}
        ),
        allowed_changes=lambda p: (*ALARMS, "apps.clock.data.next_id"),  # a new alarm takes the next id
        subgoals=lambda p: (
            VerifierSpec(predicate="clock.alarm_exists", params={"hour": p.hour, "minute": p.minute}),
            VerifierSpec(predicate="clock.alarm", params={"hour": p.hour, "minute": p.minute, "days": list(p.days)}),
        ),
    )
)

register(
    TaskTemplate(
        id="clock.delete_alarm",
        app="Clock",
        params=AlarmTime,
        difficulty=1,
        step_budget=16,
        description="delete the alarm at a time (the instance adds it first)",
        sample=lambda rng: AlarmTime(hour=(t := _time(rng))[0], minute=t[1]),
        phrasings={
            "ENG": ("Delete the {time} alarm.", "Remove my alarm for {time}.", "Get rid of the alarm set at {time}."),
            "CHN": ("删除{zh_time}的闹钟。", "把{zh_time}的闹钟删掉。"),
        },
        wording=lambda p: {"time": time_text(p.hour, p.minute), "zh_time": f"{p.hour}:{p.minute:02d}"},
        setup=lambda p: (
            StateSetup(
                step="clock.alarms",
                params={"alarms": [{"hour": p.hour, "minute": p.minute, "days": [], "enabled": True}]},
            ),
        ),
        verifier=lambda p: VerifierSpec(predicate="clock.no_alarm_at", params={"hour": p.hour, "minute": p.minute}),
        allowed_changes=lambda p: ALARMS,
    )
)


class CityParams(TemplateParams):
    city: str = Field(min_length=1, description="a city of the Clock's city list")

    @field_validator("city")
    @classmethod
    def _listed(cls, v: str) -> str:
        if v not in CITIES:
            raise ValueError(f"{v!r} is not in the Clock's city list: {', '.join(CITIES)}")
        return v


register(
    TaskTemplate(
        id="clock.add_world_clock",
        app="Clock",
        params=CityParams,
        difficulty=1,
        step_budget=16,
        description="add a city to the world clocks",
        sample=lambda rng: CityParams(city=rng.choice([c for c in CITIES if c not in ("London", "New York")])),
        phrasings={
            "ENG": (
                "Add {city} to the world clocks.",
                "Show the time in {city} in the Clock app.",
                "Add a world clock for {city}.",
            ),
            "CHN": ("在世界时钟中添加{city}。", "添加{city}的世界时钟。"),
        },
        verifier=lambda p: VerifierSpec(predicate="clock.world_clock", params={"city": p.city}),
        allowed_changes=lambda p: ("apps.clock.data.world_clocks",),
    )
)


class ZoneParams(TemplateParams):
    zone: str = Field(min_length=1, description="a city of the Clock's time-zone list")

    @field_validator("zone")
    @classmethod
    def _listed(cls, v: str) -> str:
        if v not in dict(TIME_ZONES):
            raise ValueError(f"{v!r} is not in the Clock's time-zone list: {', '.join(z for z, _ in TIME_ZONES)}")
        return v


register(
    TaskTemplate(
        id="clock.home_time_zone",
        app="Clock",
        params=ZoneParams,
        difficulty=2,
        step_budget=20,
        description="set the home time zone",
        sample=lambda rng: ZoneParams(zone=rng.choice([z for z, _ in TIME_ZONES if z != "London"])),
        phrasings={
            "ENG": (
                "Set Home time zone to '{zone}'.",
                "Change the Clock's home time zone to {zone}.",
                "Make {zone} my home time zone.",
            ),
            "CHN": ("将主时区设置为{zone}。", "把时钟的家庭时区改成{zone}。"),
        },
        verifier=lambda p: VerifierSpec(predicate="clock.home_time_zone", params={"zone": p.zone}),
        allowed_changes=lambda p: ("apps.clock.data.home_time_zone",),
    )
)


register(
    TaskTemplate(
        id="clock.zone_offset",
        app="Clock",
        params=ZoneParams,
        difficulty=2,
        step_budget=20,
        description="answer: the GMT offset the Clock lists for a city",
        sample=lambda rng: ZoneParams(zone=rng.choice([z for z, _ in TIME_ZONES])),
        phrasings={
            "ENG": (
                "What GMT offset does the Clock list for {zone}?",
                "In the Clock's time zone list, what is {zone}'s offset from GMT?",
            ),
            "CHN": ("时钟应用中{zone}的GMT偏移是多少？",),
        },
        verifier=lambda p: VerifierSpec(
            predicate="answer.matches",
            params={
                "kind": "exact",
                "expected": dict(TIME_ZONES)[p.zone],
                "app": "clock",
                "via": ["settings", "tz_picker"],
            },
        ),
        allowed_changes=lambda p: (),
    )
)


register(
    TaskTemplate(
        id="clock.disable_alarm",
        app="Clock",
        params=Alarm,
        difficulty=1,
        step_budget=12,
        description="switch off an alarm, keeping it (the instance adds it, switched on)",
        sample=lambda rng: Alarm(hour=(t := _time(rng))[0], minute=t[1], days=rng.choice(DAY_SETS)),
        phrasings={
            "ENG": (
                "Turn off the {time} alarm, but don't delete it.",
                "Switch off my alarm for {time}.",
                "Disable the alarm set at {time}.",
            ),
            "CHN": ("关闭{zh_time}的闹钟，但不要删除。", "把{zh_time}的闹钟关掉。"),
        },
        wording=_alarm_words,
        setup=lambda p: (
            StateSetup(
                step="clock.alarms",
                params={"alarms": [{"hour": p.hour, "minute": p.minute, "days": list(p.days), "enabled": True}]},
            ),
        ),
        verifier=lambda p: VerifierSpec(
            predicate="clock.alarm", params={"hour": p.hour, "minute": p.minute, "days": list(p.days), "enabled": False}
        ),
        allowed_changes=lambda p: ALARMS,
    )
)


class StyleParams(TemplateParams):
    style: Literal["Digital", "Analog"]


register(
    TaskTemplate(
        id="clock.style",
        app="Clock",
        params=StyleParams,
        difficulty=2,
        step_budget=12,
        description="set the clock style in the Clock's settings (the instance sets the other style first)",
        sample=lambda rng: StyleParams(style=rng.choice(STYLES)),
        phrasings={
            "ENG": (
                "Change the Clock style to {style}.",
                "Make the Clock app show an {style_lower} clock.",
                "In the Clock settings, set Style to {style}.",
            ),
            "CHN": ("把时钟样式改为{zh}。", "在时钟设置中将样式设为{zh}。"),
        },
        wording=lambda p: {
            "style": p.style,
            "style_lower": p.style.lower(),
            "zh": {"Digital": "数字", "Analog": "指针"}[p.style],
        },
        setup=lambda p: (StateSetup(step="clock.style", params={"style": next(s for s in STYLES if s != p.style)}),),
        verifier=lambda p: VerifierSpec(predicate="clock.style", params={"style": p.style}),
        allowed_changes=lambda p: ("apps.clock.data.style",),
    )
)
