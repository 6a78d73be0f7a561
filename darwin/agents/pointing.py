"""Marks in prompts and actions that point at them (the agent's side of :mod:`darwin.readers`).

Context processing (psi) lists an observation's marks as numbered lines, ``[k] text``
(:func:`marks_text`), and may draw their boxes and numbers on the screenshot
(:func:`draw_marks`). Action projection (xi) resolves references: ``#k`` is mark ``k`` (a tap
or long press at its box's centre, or its text typed), ``@i:j`` the goal's words ``i`` to
``j - 1`` (the goal's own characters between them, typed, or the mark that reads them,
pressed), and a press with a quoted text (``click('Search')``) the mark that reads it
(:func:`mark_reading`). ``click(@7:8)`` presses the row that shows the goal's eighth word, whatever
the word: a model that learned where a template puts its destination presses the row of a city it
never saw, without reading or spelling it. A reference past the marks or the
goal's words is a format error, never a crash (:class:`PointingError`).

    >>> from darwin.agents.pointing import goal_span, find_goal_span, goal_words
    >>> goal = "Search stays in New York for 2 adults"
    >>> [goal[a:b] for a, b in goal_words(goal)][3:5]
    ['New', 'York']
    >>> find_goal_span(goal, "New York"), goal_span(goal, 3, 5)
    ((3, 5), 'New York')
    >>> [goal_words("搜索柏林")[k] for k in (2, 3)]
    [(2, 3), (3, 4)]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from darwin.types import Mark

POINTING_VERSION = 2
"""How :meth:`~darwin.agents.tiny.TinyAgent.format_action` writes pointing calls (2: apps opened
by the goal's words, numbers pressed as ``#k``). A reading warm start's cache key holds it
(:meth:`darwin.sft.config.SFTConfig.config_hash`), so a cached warm start never teaches an
older writing."""

MAX_GOAL_WORDS = 256
"""Goal words beyond this many cannot be pointed at (a goal is a sentence or two)."""

# A word: a run of letters, digits or marks (\w without the underscore), or one CJK / kana /
# hangul character on its own (those scripts write no spaces between words).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_WORD = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")


class PointingError(ValueError):
    """A reference that points at nothing; the message says what was asked and what exists."""


@lru_cache(maxsize=1024)
def goal_words(goal: str) -> tuple[tuple[int, int], ...]:
    """The ``(start, end)`` character offsets of the goal's words, in order (at most
    :data:`MAX_GOAL_WORDS`)."""
    return tuple((m.start(), m.end()) for m in _WORD.finditer(goal))[:MAX_GOAL_WORDS]


def goal_span(goal: str, start: int, end: int) -> str:
    """The goal's text from the start of word ``start`` to the end of word ``end - 1``."""
    words = goal_words(goal)
    if not 0 <= start < end <= len(words):
        raise PointingError(
            f"@{start}:{end} is not a span of the goal's {len(words)} words (0 <= start < end <= {len(words)})"
        )
    return goal[words[start][0] : words[end - 1][1]]


def find_goal_span(goal: str, text: str) -> tuple[int, int] | None:
    """The shortest word span of the goal that reads exactly ``text`` (first if several), or None."""
    words = goal_words(goal)
    for i, (a, _) in enumerate(words):
        if goal[a : a + len(text)] != text:
            continue
        for j in range(i, len(words)):
            end = words[j][1]
            if end == a + len(text):
                return i, j + 1
            if end > a + len(text):
                break
    return None


def mark(marks: Sequence[Mark], index: int) -> Mark:
    """Mark ``index`` of the screen, or :class:`PointingError` naming how many there are."""
    if not 0 <= index < len(marks):
        have = f"#0-#{len(marks) - 1}" if marks else "none"
        raise PointingError(f"#{index} is not a mark of this screen (it has {len(marks)}: {have})")
    return marks[index]


def mark_at(marks: Sequence[Mark], x: int, y: int) -> int | None:
    """The index of the smallest mark whose box holds the pixel ``(x, y)``, or None."""
    best: int | None = None
    for k, m in enumerate(marks):
        if m.contains(x, y) and (best is None or m.area < marks[best].area):
            best = k
    return best


def mark_with_text(marks: Sequence[Mark], text: str) -> int | None:
    """The index of the first mark that reads exactly ``text``, or None."""
    return next((k for k, m in enumerate(marks) if m.text == text), None)


def _words(text: str) -> tuple[str, ...]:
    return tuple(text[a:b].casefold() for a, b in goal_words(text))


def mark_reading(marks: Sequence[Mark], text: str) -> int | None:
    """The mark ``click('text')`` presses: the first (in reading order) that reads ``text``
    (case and spacing aside), else the first whose words hold ``text``'s words in a row
    ("Berlin" presses "Berlin City"); None if no mark does."""
    want = _words(text)
    if not want:
        return None
    held: int | None = None
    for k, m in enumerate(marks):
        words = _words(m.text)
        if words == want:
            return k
        if held is None and any(words[i : i + len(want)] == want for i in range(len(words) - len(want) + 1)):
            held = k
    return held


def press_text(marks: Sequence[Mark], goal: str, k: int, max_chars: int = 40) -> str | tuple[int, int] | None:
    """How to press mark ``k`` by what reads it (:func:`mark_reading`): the ``(i, j)`` span of the
    goal's words the mark holds (the shortest, then the first), else the mark's own text; None
    if neither leads back to mark ``k`` (another mark reads it first), the text is over
    ``max_chars``, or it is digits only: Qwen's tokenizer writes a digit per token and a greedy
    decoder repeats them (``click('222')`` for a calendar's ``22``), so a number is pressed as
    ``#k``."""
    target = _words(marks[k].text)
    spans = goal_words(goal)
    for length in range(1, min(len(target), 4) + 1):
        for i in range(len(spans) - length + 1):
            span = goal[spans[i][0] : spans[i + length - 1][1]]
            words = _words(span)
            held = any(target[j : j + length] == words for j in range(len(target) - length + 1))
            if held and mark_reading(marks, span) == k:
                return i, i + length
    own = marks[k].text
    if own.strip().isdigit():
        return None
    return own if len(own) <= max_chars and mark_reading(marks, own) == k else None


def marks_text(marks: Sequence[Mark]) -> str:
    """The numbered lines a prompt lists: ``[k] text`` per mark, in order."""
    return "\n".join(f"[{k}] {m.text}" for k, m in enumerate(marks))


def draw_marks(screenshot: np.ndarray, marks: Sequence[Mark], device_size: tuple[int, int]) -> np.ndarray:
    """A copy of ``screenshot`` with each mark's box outlined and its number written at its
    top-left corner (set-of-marks prompting); the input is left untouched."""
    from PIL import Image, ImageDraw

    image = Image.fromarray(np.ascontiguousarray(screenshot))
    draw = ImageDraw.Draw(image)
    h, w = screenshot.shape[:2]
    sx, sy = w / device_size[0], h / device_size[1]
    for k, m in enumerate(marks):
        x0, y0, x1, y1 = m.box
        box = (x0 * sx, y0 * sy, max(x0 * sx, x1 * sx - 1), max(y0 * sy, y1 * sy - 1))
        draw.rectangle(box, outline=(255, 0, 64), width=1)
        draw.text((box[0] + 1, box[1]), str(k), fill=(255, 0, 64))
    return np.asarray(image, dtype=np.uint8)


__all__ = [
    "MAX_GOAL_WORDS",
    "POINTING_VERSION",
    "PointingError",
    "draw_marks",
    "find_goal_span",
    "goal_span",
    "goal_words",
    "mark",
    "mark_at",
    "mark_reading",
    "mark_with_text",
    "marks_text",
    "press_text",
]
