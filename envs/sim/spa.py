"""SPA-Bench's tasks on SimPhone: the CSV rows SimPhone can express, as rule-checked tasks.

SPA-Bench (``darwin/data/spa-bench``) lists 340 tasks for real third-party apps, checked on
real phones by a model judge. Rows whose apps SimPhone models map to SimPhone task
instances with rule predicates, kept as data in :data:`MAPPING` (``"<csv file>/<row id>"`` ->
a template id and its parameters, or a rule check where no template fits; the rows of the
paper's tasks in :mod:`darwin.task_registry` keep their checks). A mapped task keeps the row's instruction, language, difficulty,
golden steps and key components; its id is ``spa.<en|zh|cross>.<row id>``.

Some rows map only with an *adaptation*, said in the entry's ``adapted``: an app replaced by
SimPhone's counterpart (Huawei Browser by Chrome, WeChat's theme by Google Play's), a free
choice the rule check cannot leave open fixed in the instruction. Every other row is listed
by :func:`unmapped` with its reason category: ``app not modelled`` or ``feature not
modelled`` (:data:`FEATURE_GAPS` says which feature).

    >>> from darwin.envs.sim.spa import coverage, spa_tasks
    >>> [(c.file, c.mapped) for c in coverage()][:1]
    [('single-app-ENG', 26)]
    >>> spa_tasks("spa.en")[0].id
    'spa.en.amazon_0'

The named task sets ``spa.en``, ``spa.zh`` and ``spa.cross`` (:func:`darwin.task_registry.task_set`)
hold the mapped rows of the English and Chinese single-app files and of both cross-app
files; ``darwin tasks spa`` prints the coverage.
"""

from __future__ import annotations

import ast
import csv
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Literal

from darwin.types import StateSetup, Task, VerifierSpec

SPA_FILES = ("single-app-ENG", "single-app-CHN", "cross-app-ENG", "cross-app-CHN")
SPA_SETS: dict[str, tuple[str, ...]] = {
    "spa.en": ("single-app-ENG",),
    "spa.zh": ("single-app-CHN",),
    "spa.cross": ("cross-app-ENG", "cross-app-CHN"),
}
"""Named task sets and the CSV files whose mapped rows they hold."""
_TAG = {"single-app-ENG": "en", "single-app-CHN": "zh", "cross-app-ENG": "cross", "cross-app-CHN": "cross"}

APPS: dict[str, str] = {
    # single-app files (``task_app``)
    "amazon": "Amazon",
    "booking.com": "Booking.com",
    "calendar": "Calendar",
    "chrome": "Chrome",
    "clock": "Clock",
    "contacts": "Contacts",
    "dictionary_merriam_webster": "Merriam-Webster",
    "google_play": "Google Play",
    "keep_notes": "Notes",
    "settings": "Settings",
    "x": "X",
    "calculator": "Calculator",
    "files": "Files",
    "gmail": "Mail",
    "google_tasks": "Tasks",
    "deskclock": "Clock",
    "huaweiliulanqi": "Chrome",
    "youdaodict": "Merriam-Webster",
    # cross-app files (entries of ``task_app``)
    "Amazon": "Amazon",
    "Calendar": "Calendar",
    "Chrome": "Chrome",
    "Clock": "Clock",
    "Google Play Store": "Google Play",
    "Gmail": "Mail",
    "Keep Notes": "Notes",
    "Setting": "Settings",
    "X": "X",
    "设置": "Settings",
    "华为浏览器": "Chrome",
}
"""SPA-Bench app names SimPhone models -> SimPhone's app (some by a counterpart: Huawei Browser
-> Chrome, Youdao -> Merriam-Webster, the Chinese 万年历 almanac is not modelled)."""


@dataclass(frozen=True)
class SpaMapping:
    """How one SPA-Bench row becomes a SimPhone task: a ``template`` with ``params``, or a rule
    ``verifier`` on ``app`` (with its ``setup`` and ``allowed_changes``) where no template fits."""

    template: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    verifier: VerifierSpec | None = None
    app: str | None = None
    setup: tuple[StateSetup, ...] = ()
    allowed_changes: tuple[str, ...] | None = None
    adapted: str = ""
    """What differs from the row as written (empty: the row's goal exactly)."""
    instruction: str | None = None
    """The goal's text where the row's does not fit SimPhone (an adapted row); default the row's."""


def _tpl(template: str, adapted: str = "", instruction: str | None = None, **params: Any) -> SpaMapping:
    return SpaMapping(template=template, params=params, adapted=adapted, instruction=instruction)


def _rule(
    app: str, verifier: VerifierSpec, allowed_changes: tuple[str, ...], setup: tuple[StateSetup, ...] = ()
) -> SpaMapping:
    return SpaMapping(app=app, verifier=verifier, allowed_changes=allowed_changes, setup=setup)


def _v(predicate: str, **params: Any) -> VerifierSpec:
    return VerifierSpec(predicate=predicate, params=params)


WEEKDAYS = [0, 1, 2, 3, 4]

MAPPING: dict[str, SpaMapping] = {
    # ---- single-app-ENG
    "single-app-ENG/amazon_0": _tpl("amazon.search", query="sunglasses"),
    "single-app-ENG/amazon_1": _tpl(
        "amazon.add_result_to_cart",
        query="sunglasses",
        style="Kids",
        adapted="'Filter with kids' is choosing the Kids result (SimPhone's Amazon has no filters)",
    ),
    "single-app-ENG/calculator_0": _tpl("calculator.compute", expr="1+1"),
    "single-app-ENG/booking.com_0": _rule(
        "Booking.com", _v("booking.stays_results", destination="Berlin"), ("apps.booking.data.search",)
    ),
    "single-app-ENG/booking.com_3": _rule("Booking.com", _v("booking.app_settings"), ()),
    "single-app-ENG/chrome_0": _tpl("chrome.search", query="Taylor Swift"),
    "single-app-ENG/clock_0": _tpl("clock.set_alarm", hour=8, minute=0, days=[]),
    "single-app-ENG/clock_1": _tpl("clock.set_alarm", hour=9, minute=0, days=WEEKDAYS),
    "single-app-ENG/clock_3": _tpl("clock.add_world_clock", city="London"),
    "single-app-ENG/clock_4": _tpl("clock.home_time_zone", zone="Hong Kong"),
    "single-app-ENG/contacts_0": _tpl("contacts.add_contact", name="Agent", phone="+44 1234 567 890"),
    "single-app-ENG/contacts_1": _tpl(
        "contacts.add_contact_email", name="Agent Two", phone="+44 1234 567 890", email="benchmark@gmail.com"
    ),
    "single-app-ENG/dictionary_merriam_webster_0": _tpl("dictionary.look_up", word="agent"),
    "single-app-ENG/google_tasks_1": _tpl("tasks.new_list", list_name="Weekend", title="Buy groceries"),
    "single-app-ENG/google_play_0": _tpl("play.search", query="WhatsApp"),
    "single-app-ENG/google_play_3": _rule("Google Play", _v("play.general_settings"), ()),
    "single-app-ENG/google_play_4": _tpl("play.theme", theme="Dark", start="Light"),
    "single-app-ENG/keep_notes_0": _tpl("notes.quick_note", text="Hello this is a note1"),
    "single-app-ENG/keep_notes_1": _tpl("notes.create_note", title="Written by Agent2", body="Hello this is a note2"),
    "single-app-ENG/settings_1": _tpl("settings.screen_timeout", value="5 minutes"),
    "single-app-ENG/settings_2": _rule(
        "Settings",
        _v(
            "all.of",
            checks=[
                _v("settings.screen_timeout", value="10 minutes").model_dump(),
                _v("settings.dark_theme", enabled=True).model_dump(),
            ],
        ),
        ("apps.settings.data.screen_timeout", "apps.settings.data.dark_theme"),
        setup=(StateSetup(step="settings.values", params={"screen_timeout": "30 seconds", "dark_theme": False}),),
    ),
    "single-app-ENG/settings_3": _rule(
        "Settings",
        _v("settings.notification_history", enabled=True),
        ("apps.settings.data.notification_history",),
        setup=(StateSetup(step="settings.values", params={"notification_history": False}),),
    ),
    "single-app-ENG/settings_4": _tpl("settings.app_notifications", app="Google Play Store", enabled=False),
    "single-app-ENG/x_0": _tpl("x.draft", text="Written by Agent1"),
    "single-app-ENG/x_1": _tpl(
        "x.post",
        text="Written by Agent2 #animalcrossing",
        adapted="the tag is part of the post's text; checking it from the profile is not checked",
    ),
    "single-app-ENG/x_3": _tpl("x.follow", handle="Mayday_EN"),
    # ---- single-app-CHN
    "single-app-CHN/deskclock_0": _tpl(
        "clock.set_alarm",
        hour=6,
        minute=0,
        days=[0],
        adapted="the row leaves the time open; the rule check needs one: the picker's default 6:00 AM",
        instruction="新建闹钟（时间保持默认的上午6:00），设置在每个星期一重复，然后停止操作",
    ),
    "single-app-CHN/huaweiliulanqi_0": _tpl("chrome.search", query="bilibili.com", adapted="Huawei Browser -> Chrome"),
    # ---- cross-app
    "cross-app-ENG/General_Tool_2_ENG": _tpl(
        "cross.toggle_and_alarm",
        key="battery:Battery Saver",
        hour=6,
        minute=0,
        adapted="Data Saver -> Battery Saver (SimPhone's Settings has no Data Saver)",
        instruction="In the Settings app, enable 'Battery Saver' mode. Open the Clock app and set an alarm for 6:00 AM.",
    ),
    "cross-app-CHN/General_Tool_2_CHN": _tpl(
        "cross.dark_theme_then_app_theme",
        theme="System default",
        start="Light",
        adapted="WeChat -> Google Play (its theme setting has the same 'follow the system' choice)",
        instruction="进入设置，切换到深色模式，然后打开Google Play，将主题设置为“跟随系统”",
    ),
}
"""Mapped rows: ``"<csv file>/<task_identifier>"`` -> how the row becomes a SimPhone task."""

FEATURE_GAPS: dict[str, str] = {
    # rows of modelled apps that do not map: the feature SimPhone lacks
    "single-app-ENG/amazon_2": "result filters ('adult') and similar items",
    "single-app-ENG/booking.com_1": "flights",
    "single-app-ENG/booking.com_2": "flights",
    "single-app-ENG/booking.com_4": "temperature and unit settings",
    "single-app-ENG/booking.com_5": "setting the currency and notifications (no rule check)",
    "single-app-ENG/calculator_1": "scientific functions (log, ln)",
    "single-app-ENG/calculator_2": "scientific functions (log, ln, factorial)",
    "single-app-ENG/files_0": "a goal of only looking (no state change or answer to check)",
    "single-app-ENG/files_1": "folders inside DCIM (internal storage's folder tree)",
    "single-app-ENG/files_2": "folders inside DCIM and moving folders",
    "single-app-ENG/gmail_0": "free-form text ('asking about their paper'): no rule check",
    "single-app-ENG/gmail_1": "free-form text ('asking about their paper'): no rule check",
    "single-app-ENG/gmail_2": "scheduled sending; free-form text",
    "single-app-ENG/gmail_3": "Mail's settings",
    "single-app-ENG/gmail_4": "Mail's notification settings",
    "single-app-ENG/gmail_5": "Mail's notification settings",
    "single-app-ENG/google_tasks_0": "an empty list (a new list takes its first task)",
    "single-app-ENG/google_tasks_2": "due dates of other months (the 12th)",
    "single-app-ENG/calendar_0": "dates outside the modelled week (31 October)",
    "single-app-ENG/calendar_1": "all-day events; days of other months (the 16th)",
    "single-app-ENG/calendar_2": "days of other months (the 17th); end times",
    "single-app-ENG/chrome_1": "web pages and bookmarks",
    "single-app-ENG/chrome_2": "web pages, bookmarks and the reading list",
    "single-app-ENG/clock_2": "alarm vibration",
    "single-app-ENG/clock_5": "the screen saver's style",
    "single-app-ENG/contacts_2": "last-name edits of seeded contacts, labels and companies",
    "single-app-ENG/dictionary_merriam_webster_1": "the thesaurus",
    "single-app-ENG/dictionary_merriam_webster_2": "the thesaurus",
    "single-app-ENG/google_play_1": "reviews",
    "single-app-ENG/google_play_2": "reviews",
    "single-app-ENG/google_play_5": "the Play Store's notification settings",
    "single-app-ENG/keep_notes_2": "checklists and labels",
    "single-app-ENG/settings_0": "a goal of only looking (no state change or answer to check)",
    "single-app-ENG/settings_5": "Instagram's notification categories and app storage",
    "single-app-ENG/x_2": "likes and replies",
    "single-app-ENG/x_4": "searching an account's posts",
    "single-app-ENG/x_5": "searching posts and reposts",
    "single-app-CHN/calendar_0": "the 万年历 almanac and fortunes (SimPhone's Calendar holds events only)",
    "single-app-CHN/calendar_1": "the 万年历 almanac, fortunes and lucky days",
    "single-app-CHN/calendar_2": "the 万年历 almanac, fortunes and lucky days",
    "single-app-CHN/deskclock_1": "alarm labels",
    "single-app-CHN/deskclock_2": "alarm labels and ringtones",
    "single-app-CHN/huaweiliulanqi_1": "web pages (a site's own search)",
    "single-app-CHN/huaweiliulanqi_2": "web pages and bookmarks",
    "single-app-CHN/huaweiliulanqi_3": "web pages (browsing a site)",
    "single-app-CHN/huaweiliulanqi_4": "web pages (a site's own search)",
    "single-app-CHN/huaweiliulanqi_5": "web pages (a shop's listings and reviews)",
    "single-app-CHN/settings_0": "developer options",
    "single-app-CHN/settings_1": "developer options (memory use)",
    "single-app-CHN/settings_2": "developer options (memory use)",
    "single-app-CHN/youdaodict_0": "Youdao's Learn feed",
    "single-app-CHN/youdaodict_1": "Youdao's Learn feed and comments",
    "single-app-CHN/youdaodict_2": "Youdao's Learn feed and comments",
    "cross-app-ENG/General_Tool_0_ENG": "an app outside the Play catalogue (Alibaba.com); Settings' app list",
    "cross-app-ENG/Information_Management_1_ENG": "web content (the Olympics' date); dates outside the modelled week",
    "cross-app-ENG/Media_Entertainment_1_ENG": "web content; recipe apps (not in the Play catalogue)",
}
"""Unmapped rows whose apps SimPhone models: the missing feature (one line each)."""

Reason = Literal["app not modelled", "feature not modelled"]


@dataclass(frozen=True)
class FileCoverage:
    """How many rows of one CSV file map to SimPhone tasks (``adapted`` of them with an adaptation)."""

    file: str
    rows: int
    mapped: int
    adapted: int
    app_not_modelled: int
    feature_not_modelled: int


@cache
def rows(file: str) -> dict[str, dict[str, str]]:
    """One SPA-Bench CSV file's rows by ``task_identifier`` (in file order)."""
    if file not in SPA_FILES:
        raise KeyError(f"unknown SPA-Bench file {file!r}; known: {', '.join(SPA_FILES)}")
    path = resources.files("darwin") / "data" / "spa-bench" / f"{file}.csv"
    with path.open(encoding="utf-8-sig") as f:
        return {row["task_identifier"]: row for row in csv.DictReader(f)}


def row_apps(file: str, row: Mapping[str, str]) -> list[str]:
    """The row's apps as SPA-Bench names them (a cross-app row lists several)."""
    return list(ast.literal_eval(row["task_app"])) if file.startswith("cross") else [row["task_app"]]


def unmapped() -> dict[str, tuple[Reason, str]]:
    """Every row without a SimPhone task: key -> (reason category, detail)."""
    out: dict[str, tuple[Reason, str]] = {}
    for file in SPA_FILES:
        for row_id, row in rows(file).items():
            key = f"{file}/{row_id}"
            if key in MAPPING:
                continue
            missing = [a for a in row_apps(file, row) if a not in APPS]
            if missing:
                out[key] = ("app not modelled", ", ".join(missing))
            else:
                out[key] = ("feature not modelled", FEATURE_GAPS.get(key, "(not yet examined)"))
    return out


def coverage() -> list[FileCoverage]:
    """Per CSV file: rows, mapped rows (adapted ones among them) and the unmapped rows by reason."""
    gaps = unmapped()
    out = []
    for file in SPA_FILES:
        keys = [f"{file}/{r}" for r in rows(file)]
        out.append(
            FileCoverage(
                file=file,
                rows=len(keys),
                mapped=sum(k in MAPPING for k in keys),
                adapted=sum(bool(MAPPING[k].adapted) for k in keys if k in MAPPING),
                app_not_modelled=sum(gaps.get(k, ("",))[0] == "app not modelled" for k in keys),
                feature_not_modelled=sum(gaps.get(k, ("",))[0] == "feature not modelled" for k in keys),
            )
        )
    return out


def _key_components(row: Mapping[str, str]) -> tuple[str, ...]:
    raw = row.get("key_component_final")
    return tuple(str(c) for c in ast.literal_eval(raw)) if raw else ()


def _validate(task: Task) -> Task:
    """Every check and setup step of ``task`` is registered, with valid parameters (as :func:`darwin.task_registry.validate_task`)."""
    from darwin.envs.sim.setups import resolve_setup
    from darwin.predicates import resolve

    resolve(task.verifier, task.id, "verifier")
    for i, spec in enumerate(task.subgoals):
        resolve(spec, task.id, f"subgoals.{i}")
    for i, step in enumerate(task.setup):
        resolve_setup(step, task.id, f"setup.{i}")
    return task


def _build(key: str) -> Task:
    from darwin.templates import get_template

    file, row_id = key.split("/", 1)
    row, entry = rows(file)[row_id], MAPPING[key]
    task_id = f"spa.{_TAG[file]}.{row_id}"
    language: Literal["ENG", "CHN"] = "CHN" if row["task_language"] == "CHN" else "ENG"
    if entry.template is not None:
        base = get_template(entry.template).task(dict(entry.params), language)
    elif entry.verifier is not None and entry.app is not None:
        base = Task(
            id=task_id,
            instruction=row["task_description"],
            app=entry.app,
            language=language,
            verifier=entry.verifier,
            setup=entry.setup,
            allowed_changes=entry.allowed_changes,
        )
    else:
        raise ValueError(f"SPA-Bench mapping {key!r} names neither a template nor a verifier with its app")
    task = base.model_copy(
        update={
            "id": task_id,
            "instruction": (entry.instruction or row["task_description"]).strip(),
            "language": language,
            "difficulty": int(row["task_difficulty"]),
            "golden_steps": int(row["golden_steps"]),
            "key_components": _key_components(row),
            "source": "spa-bench-sim",
        }
    )
    return _validate(Task.model_validate(task.model_dump()))


@cache
def _tasks() -> dict[str, Task]:
    out: dict[str, Task] = {}
    for file in SPA_FILES:
        for row_id in rows(file):
            if f"{file}/{row_id}" in MAPPING:
                task = _build(f"{file}/{row_id}")
                out[task.id] = task
    return out


def spa_tasks(name: str) -> list[Task]:
    """The tasks of the named set ``spa.en``, ``spa.zh`` or ``spa.cross`` (mapped rows, in file order)."""
    if name not in SPA_SETS:
        raise KeyError(f"unknown SPA-Bench task set {name!r}; known: {', '.join(SPA_SETS)}")
    prefixes = {f"spa.{_TAG[f]}." for f in SPA_SETS[name]}
    return [t for t in _tasks().values() if any(t.id.startswith(p) for p in prefixes)]


def spa_task(task_id: str) -> Task | None:
    """The mapped task ``spa.<en|zh|cross>.<row id>``, or ``None`` if no row maps to that id."""
    return _tasks().get(task_id)


def mapping_key(task: Task) -> str | None:
    """The ``MAPPING`` key behind a ``spa.*`` task (``single-app-ENG/clock_0``), or ``None``."""
    for key in MAPPING:
        file, row_id = key.split("/", 1)
        if task.id == f"spa.{_TAG[file]}.{row_id}":
            return key
    return None
