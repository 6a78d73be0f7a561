"""The task registry: the paper's SPA-Bench tasks, their lifecycle variants, and task files.

Task ids follow SPA-Bench (``amazon_0``, ``clock_1`` ...; see ``darwin/data/spa-bench``);
the two tasks the paper writes out itself are ``chrome_clear_tabs`` and
``settings_dark_theme``. Lifecycle ("cycle") variants carry the suffix ``.cycle``.

    >>> from darwin.task_registry import get_task, task_set
    >>> get_task("clock_1").instruction
    'Set an alarm for 9am on weekdays.'
    >>> len(task_set("base8")), len(task_set("paper16")), len(task_set("cycle8"))
    (8, 15, 8)
"""

from __future__ import annotations

import csv
import difflib
import json
from collections.abc import Iterable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from darwin.predicates import resolve
from darwin.templates import SPLIT_SETS
from darwin.types import Lifecycle, PhaseSpec, Task, TaskDefinitionError, VerifierSpec

WEEKDAYS = [0, 1, 2, 3, 4]


def _v(predicate: str, **params: Any) -> VerifierSpec:
    return VerifierSpec(predicate=predicate, params=params)


# (id, app, verifier) for tasks whose text comes from the SPA-Bench CSV.
_SPA_TASKS: tuple[tuple[str, str, VerifierSpec], ...] = (
    ("amazon_0", "Amazon", _v("amazon.search_results", query="sunglasses")),
    ("booking.com_0", "Booking.com", _v("booking.stays_results", destination="Berlin")),
    ("booking.com_3", "Booking.com", _v("booking.app_settings")),
    ("clock_1", "Clock", _v("clock.alarm", hour=9, minute=0, days=WEEKDAYS)),
    ("clock_4", "Clock", _v("clock.home_time_zone", zone="Hong Kong")),
    ("settings_3", "Settings", _v("settings.notification_history", enabled=True)),
    ("chrome_0", "Chrome", _v("chrome.search_results", query="Taylor Swift")),
    ("clock_3", "Clock", _v("clock.world_clock", city="London")),
    ("dictionary_merriam_webster_0", "Merriam-Webster", _v("dictionary.definition", word="agent")),
    ("google_play_0", "Google Play", _v("play.search_results", query="WhatsApp")),
    ("google_play_3", "Google Play", _v("play.general_settings")),
    ("x_0", "X", _v("x.draft", content="Written by Agent1")),
    ("x_3", "X", _v("x.following", handle="Mayday_EN")),
)

# Written out in the paper only (not in the public SPA-Bench CSV).
_PAPER_TASKS: tuple[Task, ...] = (
    Task(
        id="chrome_clear_tabs",
        instruction="Clear all active tabs.",
        app="Chrome",
        golden_steps=4,
        verifier=_v("chrome.no_tabs"),
        source="darwin-paper",
        key_components=("tabs",),
    ),
    Task(
        id="settings_dark_theme",
        instruction="Go to display settings. Turn on Dark Theme.",
        app="Settings",
        golden_steps=3,
        verifier=_v("settings.dark_theme", enabled=True),
        source="darwin-paper",
        key_components=("dark", "theme"),
    ),
)

BASE8 = (
    "amazon_0",
    "booking.com_0",
    "booking.com_3",
    "clock_1",
    "clock_4",
    "settings_3",
    "chrome_clear_tabs",
    "settings_dark_theme",
)
EXTRA16 = ("chrome_0", "clock_3", "dictionary_merriam_webster_0", "google_play_0", "google_play_3", "x_0", "x_3")

# Paper section 5.5: 3 tasks without phases, 1 with a setup phase, 4 with teardown phases.
_LIFECYCLES: dict[str, Lifecycle] = {
    "chrome_clear_tabs": Lifecycle(
        setup=PhaseSpec(
            instruction="Get the search results for 'weather' in Chrome.",
            verifier=_v("chrome.tab_with_query", query="weather"),
        )
    ),
    "settings_dark_theme": Lifecycle(
        teardown=PhaseSpec(
            instruction="Go to display settings. Turn off Dark Theme.",
            verifier=_v("settings.dark_theme", enabled=False),
        )
    ),
    "settings_3": Lifecycle(
        teardown=PhaseSpec(
            instruction="Go to notification settings. Turn off Notification History.",
            verifier=_v("settings.notification_history", enabled=False),
        )
    ),
    "clock_1": Lifecycle(
        teardown=PhaseSpec(instruction="Delete the 9am alarm.", verifier=_v("clock.no_alarm_at", hour=9, minute=0))
    ),
    "clock_4": Lifecycle(
        teardown=PhaseSpec(
            instruction="Set Home time zone to 'London'.", verifier=_v("clock.home_time_zone", zone="London")
        )
    ),
}

TASK_SETS: dict[str, tuple[str, ...]] = {
    "base8": BASE8,
    "paper16": BASE8 + EXTRA16,
    "cycle8": tuple(f"{t}.cycle" if t in _LIFECYCLES else t for t in BASE8),
}


def _spa_rows() -> dict[str, dict[str, str]]:
    path = resources.files("darwin") / "data" / "spa-bench" / "single-app-ENG.csv"
    with path.open(encoding="utf-8") as f:
        return {row["task_identifier"]: row for row in csv.DictReader(f)}


@cache
def registry() -> dict[str, Task]:
    """All built-in tasks by id (validated against the predicate registry)."""
    rows = _spa_rows()
    tasks: dict[str, Task] = {}
    for task_id, app, verifier in _SPA_TASKS:
        row = rows[task_id]
        tasks[task_id] = Task(
            id=task_id,
            instruction=row["task_description"],
            app=app,
            language=row["task_language"],
            difficulty=int(row["task_difficulty"]),
            golden_steps=int(row["golden_steps"]),
            verifier=verifier,
            key_components=tuple(json.loads(row["key_component_final"].replace("'", '"'))),
            source="spa-bench",
        )
    for task in _PAPER_TASKS:
        tasks[task.id] = task
    for task_id, lifecycle in _LIFECYCLES.items():
        base = tasks[task_id]
        tasks[f"{task_id}.cycle"] = base.model_copy(update={"id": f"{task_id}.cycle", "lifecycle": lifecycle})
    for task in tasks.values():
        validate_task(task)
    return tasks


def validate_task(task: Task) -> Task:
    """Check that every verifier spec and setup step of ``task`` is registered, with valid params."""
    # Deferred: setup steps edit SimPhone state and live in the simulator package.
    from darwin.envs.sim.setups import resolve_setup

    resolve(task.verifier, task.id, "verifier")
    for i, spec in enumerate(task.subgoals):
        resolve(spec, task.id, f"subgoals.{i}")
    for i, step in enumerate(task.setup):
        resolve_setup(step, task.id, f"setup.{i}")
    if task.lifecycle is not None:
        for phase in ("setup", "teardown"):
            spec = getattr(task.lifecycle, phase)
            if spec is not None:
                resolve(spec.verifier, task.id, f"lifecycle.{phase}.verifier")
    return task


def get_task(task_id: str) -> Task:
    """A built-in task or a sampled template instance (``clock.set_alarm.s3``) by id, with a 'did you mean' hint for typos."""
    from darwin.templates import instance_of, templates

    tasks = registry()
    if task_id in tasks:
        return tasks[task_id]
    instance = instance_of(task_id)
    if instance is not None:
        validate_task(instance)
        return instance
    if task_id.startswith("spa."):
        # SPA-Bench rows on SimPhone (deferred: they live in the simulator package).
        from darwin.envs.sim.spa import spa_task

        found = spa_task(task_id)
        if found is not None:
            return found
    if task_id in templates():
        raise KeyError(f"{task_id!r} is a template, not a task; name an instance such as '{task_id}.s0' (seed 0)")
    close = difflib.get_close_matches(task_id, tasks, n=3)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else "; run `darwin tasks list`"
    raise KeyError(f"unknown task {task_id!r}{hint}")


GENERALISATION_SETS = {f"gen.{name}": name for name in SPLIT_SETS}
"""Named sets of the default template split (:func:`darwin.templates.default_split`)."""


SPA_SIM_SETS = ("spa.en", "spa.zh", "spa.cross")
"""SPA-Bench's rows that SimPhone models, as rule-checked tasks (:mod:`darwin.envs.sim.spa`)."""


def task_set_names() -> list[str]:
    return [*TASK_SETS, *GENERALISATION_SETS, *SPA_SIM_SETS]


def task_set(name: str) -> list[Task]:
    """A named task set: ``base8``, ``paper16`` (15 distinct tasks), ``cycle8``, or a split of the
    templates: ``gen.train``, ``gen.unseen_instances``, ``gen.unseen_templates``, ``gen.unseen_apps``; or
    SPA-Bench's rows on SimPhone: ``spa.en``, ``spa.zh``, ``spa.cross``."""
    if name in SPA_SIM_SETS:
        from darwin.envs.sim.spa import spa_tasks

        return spa_tasks(name)
    if name in GENERALISATION_SETS:
        from darwin.templates import default_split

        tasks = default_split().sets[GENERALISATION_SETS[name]]
        for task in tasks:
            validate_task(task)
        return tasks
    if name not in TASK_SETS:
        raise KeyError(f"unknown task set {name!r}; known: {', '.join(task_set_names())}")
    return [get_task(t) for t in TASK_SETS[name]]


def resolve_tasks(names: Iterable[str]) -> list[Task]:
    """Task ids, task-set names, or paths to task files, in order, without duplicates."""
    out: dict[str, Task] = {}
    for name in names:
        if name in TASK_SETS or name in GENERALISATION_SETS or name in SPA_SIM_SETS:
            found = task_set(name)
        elif name.endswith((".yaml", ".yml", ".json")):
            found = load_task_file(name)
        else:
            found = [get_task(name)]
        for t in found:
            out.setdefault(t.id, t)
    return list(out.values())


def load_task_file(path: str | Path) -> list[Task]:
    """Load tasks from a YAML or JSON file (a list of task mappings).

    Errors name the file, the line, the task and the field, and say how to fix it.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskDefinitionError(f"{path}: cannot read task file ({exc.strerror}); check the path") from None
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", -1) + 1
        raise TaskDefinitionError(f"{path}:{line}: not valid YAML/JSON: {getattr(exc, 'problem', exc)}") from None
    if root is None or not isinstance(root, yaml.SequenceNode):
        raise TaskDefinitionError(f"{path}:1: a task file must be a list of tasks (start each with '- id: ...')")
    raw = yaml.safe_load(text)
    tasks: list[Task] = []
    for node, item in zip(root.value, raw, strict=True):
        task_id = item.get("id", "?") if isinstance(item, dict) else "?"
        try:
            task = Task.model_validate(item)
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                loc = [str(p) for p in err["loc"]]
                line = _line_of(node, loc)
                problems.append(f"{path}:{line}: task {task_id!r}: field '{'.'.join(loc)}': {err['msg']}")
            raise TaskDefinitionError(
                "\n".join(problems) + "\nFix the fields above (see docs/tasks.md for the schema)."
            ) from None
        try:
            validate_task(task)
        except TaskDefinitionError as exc:
            raise TaskDefinitionError(f"{path}:{node.start_mark.line + 1}: {exc}") from None
        tasks.append(task)
    return tasks


def _line_of(node: yaml.Node, loc: list[str]) -> int:
    """1-based line of the deepest node along ``loc`` that exists."""
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if k.value == key), None)
        elif isinstance(node, yaml.SequenceNode) and key.isdigit() and int(key) < len(node.value):
            nxt = node.value[int(key)]
        else:
            nxt = None
        if nxt is None:
            break
        node = nxt
    return node.start_mark.line + 1


def goal_text(task: Task, instruction: str | None = None) -> str:
    """The goal an agent sees: the app and the phase's instruction (Table 2 style)."""
    return f"{task.app}: {instruction or task.instruction}"
