"""Goal text for a state the explorer reached, from phrase rules per state path.

This is the stand-in for a model describer (issue 45: a VLM that looks at the reached screen
and writes the goal). It never reads the task templates' wording (``envs/sim/templates``):
each sentence comes from the path that changed, its value, and the record it belongs to (the
alarm whose ``enabled`` flipped), through :data:`PHRASE_RULES`, a table a user may extend.
A path no rule phrases gets a generic but readable sentence built from the path and value.

    >>> start = {"apps": {"clock": {"data": {"alarms": [{"hour": 7, "minute": 30, "enabled": False}]}}}}
    >>> reached = {"apps": {"clock": {"data": {"alarms": [{"hour": 7, "minute": 30, "enabled": True}]}}}}
    >>> describe("apps.clock.data.alarms.0.enabled", start, reached, app="Clock")
    'In Clock, turn on the 07:30 alarm.'
    >>> describe("apps.booking.data.search.rooms", {}, {"apps": {"booking": {"data": {"search": {"rooms": 2}}}}},
    ...          app="Booking.com")
    'In Booking.com, set the search rooms to 2.'
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import JsonValue

from darwin.predicates import State, lookup

__all__ = ["PHRASE_RULES", "PathChange", "PhraseRule", "describe", "path_change"]

# Fields that name a record, most telling first (a note's title before its id).
_NAME_FIELDS = ("title", "name", "subject", "word", "query", "label", "expr", "text")


@dataclass(frozen=True)
class PathChange:
    """One state path that changed between the exploration's start and a state it reached."""

    path: str
    """The dotted path (``apps.clock.data.alarms.0.enabled``)."""
    app: str
    """The launcher label of the app whose data holds the path (``Clock``)."""
    field: str
    """The path's last key, readable (``enabled``; ``Wi-Fi`` for ``toggles.network:Wi-Fi``)."""
    before: JsonValue
    """The value at the start (``None`` where the path did not exist)."""
    after: JsonValue
    """The value in the reached state."""
    record: str | None
    """The list item the path belongs to, named (``the 07:30 alarm``, ``the note 'Wi-Fi'``);
    ``None`` when the path is in no list item."""
    place: str
    """The path below the app's data, readable (``search rooms``), for sentences without a rule."""


@dataclass(frozen=True)
class PhraseRule:
    """A sentence for the paths matching ``pattern`` (dotted, ``*``: any one key, the whole path
    matched); ``phrase`` returns ``None`` to pass the change on to the next rule."""

    pattern: str
    phrase: Callable[[PathChange], str | None]

    def matches(self, path: str) -> bool:
        want, have = self.pattern.split("."), path.split(".")
        return len(want) == len(have) and all(w in ("*", h) for w, h in zip(want, have, strict=True))


def _on_off(value: JsonValue) -> str:
    return "on" if value else "off"


def _value_text(value: JsonValue) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, bool):
        return _on_off(value)
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def _singular(key: str) -> str:
    return key[:-1] if key.endswith("s") and not key.endswith("ss") else key


def _item_name(item: JsonValue, noun: str) -> str:
    """A list element as a sentence names it: a string quoted, a record by its time or name field
    (``the 07:30 alarm``, ``the note 'Wi-Fi'``); ``""`` for a record with neither."""
    if not isinstance(item, dict):
        return _value_text(item)
    hour, minute = item.get("hour"), item.get("minute")
    if isinstance(hour, int) and isinstance(minute, int):
        return f"the {hour:02d}:{minute:02d} {noun}"
    first, last = item.get("first"), item.get("last")
    if isinstance(first, str) and isinstance(last, str):
        full_name = f"{first} {last}".strip()
        return f"the {noun} {full_name!r}"
    for key in _NAME_FIELDS:
        value = item.get(key)
        if isinstance(value, str) and value:
            return f"the {noun} {value!r}"
    return ""


def _record_name(record: JsonValue, list_key: str, index: int) -> str:
    noun = _singular(list_key).replace("_", " ")
    return _item_name(record, noun) or f"{noun} number {index + 1}"


def _readable(key: str) -> str:
    # Settings' toggles are keyed "section:Label": the label is what the screen shows.
    return key.rpartition(":")[2].replace("_", " ")


def path_change(path: str, start: State, reached: State, app: str) -> PathChange:
    """The :class:`PathChange` of ``path`` between the two states (``app``: its launcher label)."""
    segments = path.split(".")
    # Below "apps.<id>.data" (the diff's default root) sits what a user thinks of as the app's data.
    data_depth = 3 if segments[:1] == ["apps"] and segments[2:3] == ["data"] else 0
    record: str | None = None
    for i in range(data_depth + 1, len(segments) - 1):
        # The record as it was at the start names it best (a note whose title the explorer erased).
        for state in (start, reached):
            parent_found, parent = lookup(state, ".".join(segments[:i]))
            item_found, item = lookup(state, ".".join(segments[: i + 1]))
            if parent_found and item_found and isinstance(parent, list) and isinstance(item, dict):
                record = _record_name(item, segments[i - 1], int(segments[i]))
                break
    _, before = lookup(start, path)
    _, after = lookup(reached, path)
    below = [s for s in segments[data_depth:] if not s.isdigit()]
    return PathChange(
        path=path,
        app=app,
        field=_readable(segments[-1]),
        before=before,
        after=after,
        record=record,
        place=" ".join(_readable(s) for s in below) or path,
    )


def _toggle(change: PathChange) -> str | None:
    if not isinstance(change.after, bool):
        return None
    return f"In {change.app}, turn {_on_off(change.after)} {change.field}."


def _flag(on: str, off: str) -> Callable[[PathChange], str | None]:
    """A record's boolean field as a verb: ``_flag("star", "unstar")`` -> "In Mail, star the email 'Hi'."."""

    def phrase(change: PathChange) -> str | None:
        if not isinstance(change.after, bool) or change.record is None:
            return None
        return f"In {change.app}, {on if change.after else off} {change.record}."

    return phrase


def _identity(item: JsonValue) -> JsonValue:
    """What stays the same when a list element is edited: a record's ``id``, else the element itself."""
    return item["id"] if isinstance(item, dict) and "id" in item else item


def _list_length(change: PathChange) -> str | None:
    """A list that grew or shrank (the diff reports the list, not its shifted elements)."""
    if not isinstance(change.after, list):
        return None
    before = change.before if isinstance(change.before, list) else []
    noun = _singular(change.field)
    before_ids = [_identity(i) for i in before]
    after_ids = [_identity(i) for i in change.after]
    added = [i for i in change.after if _identity(i) not in before_ids]
    removed = [i for i in before if _identity(i) not in after_ids]
    edited = [i for i in change.after if _identity(i) in before_ids and i not in before]
    where = f"the {change.field}" + (f" of {change.record}" if change.record else "")
    parts = []
    if added:
        parts.append(f"add {_names(added, noun)} to {where}")
    if removed:
        parts.append(f"remove {_names(removed, noun)} from {where}")
    if edited:
        parts.append(f"edit {_names(edited, noun)}")
    if not parts:  # the same elements in another order
        return f"In {change.app}, reorder {where}."
    return f"In {change.app}, {' and '.join(parts)}."


def _names(items: list[JsonValue], noun: str) -> str:
    names = [_item_name(i, noun) or f"a new {noun}" for i in items]
    return ", ".join(names)


def _generic(change: PathChange) -> str:
    """The sentence for a path no rule phrases: the path below the app's data, and the value."""
    where = f"the {change.field} of {change.record}" if change.record else f"the {change.place}"
    if change.after is None:
        return f"In {change.app}, clear {where}."
    if isinstance(change.after, bool):
        return f"In {change.app}, turn {_on_off(change.after)} {where}."
    return f"In {change.app}, set {where} to {_value_text(change.after)}."


PHRASE_RULES: tuple[PhraseRule, ...] = (
    PhraseRule("apps.settings.data.toggles.*", _toggle),
    PhraseRule("apps.*.data.*.*.enabled", _flag("turn on", "turn off")),
    PhraseRule("apps.*.data.*.*.unread", _flag("mark as unread", "read")),
    PhraseRule("apps.*.data.*.*.starred", _flag("star", "unstar")),
    PhraseRule("apps.*.data.*.*.pinned", _flag("pin", "unpin")),
    PhraseRule("apps.*.data.*.*.done", _flag("complete", "reopen")),
    PhraseRule("apps.*.data.*", _list_length),
    PhraseRule("apps.*.data.*.*.*", _list_length),
)
"""The phrase rules, tried in order; the first whose pattern matches and whose phrase returns a
sentence wins. ``apps.*.data.*`` and ``apps.*.data.*.*.*`` catch lists that grew or shrank (a
cart, a thread's messages)."""


def describe(path: str, start: State, reached: State, app: str, rules: tuple[PhraseRule, ...] = PHRASE_RULES) -> str:
    """The goal "make ``path`` hold its value in ``reached``" as a sentence (see the module docstring)."""
    change = path_change(path, start, reached, app)
    for rule in rules:
        if rule.matches(path):
            sentence = rule.phrase(change)
            if sentence is not None:
                return sentence
    return _generic(change)
