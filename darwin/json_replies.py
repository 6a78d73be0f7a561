"""JSON in a model's reply: the one parser of the judge, the LLM memory and the task proposer.

Hosted models wrap JSON in code fences, put prose before and after it, or answer with
several objects. :func:`json_values` finds every object or list in order;
:func:`parse_json_answer` takes the first, looking inside code fences first.

    >>> parse_json_answer('Sure!\\n```json\\n{"summary": "done"}\\n```\\nHope it helps.')
    {'summary': 'done'}
    >>> parse_json_answer('["a", "b"] and more text'), parse_json_answer("no json here")
    (['a', 'b'], None)
    >>> json_values('{"complete": "no"} then {"complete": "yes", "reason": "saved"}')
    [{'complete': 'no'}, {'complete': 'yes', 'reason': 'saved'}]
"""

from __future__ import annotations

import json
import re

__all__ = ["json_values", "parse_json_answer"]

MAX_PARSE_CHARS = 20_000
"""Longer replies are read up to here (a runaway model's output is not worth scanning)."""
MAX_JSON_STARTS = 64
"""At most this many ``{`` / ``[`` are tried as the start of a value: a reply full of
brackets costs bounded time."""

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_VALUE_START = re.compile(r"[\[{]")


def json_values(text: str) -> list[dict | list]:
    """Every JSON object or list in ``text``, in order; a value nested in one found is not
    repeated. Prose, fences and broken fragments around them are skipped."""
    text = text[:MAX_PARSE_CHARS]
    decoder = json.JSONDecoder()
    found: list[dict | list] = []
    position, tries = 0, 0
    while tries < MAX_JSON_STARTS:
        match = _VALUE_START.search(text, position)
        if match is None:
            break
        tries += 1
        try:
            value, end = decoder.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            position = match.start() + 1
            continue
        if isinstance(value, (dict, list)):
            found.append(value)
        position = end
    return found


def parse_json_answer(text: str) -> dict | list | None:
    """The first JSON object or list in a model's answer: inside a code fence first, else
    anywhere; ``None`` if there is none."""
    text = text[:MAX_PARSE_CHARS]
    for candidate in [m.group(1) for m in _FENCE.finditer(text)] + [text]:
        values = json_values(candidate)
        if values:
            return values[0]
    return None
