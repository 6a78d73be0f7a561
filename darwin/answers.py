"""Answer matchers: is the text an agent answered the answer an information task asks for?

Information-retrieval tasks end with ``answer(text)``; the matcher decides, without a
model, whether ``text`` carries the expected answer (MobileGym's AnswerSheet kinds):

- ``exact``: the same text after normalisation (case, spaces, punctuation at the ends,
  a leading article: ``"The Hobbit."`` matches ``"the hobbit"``);
- ``number``: the first number in the text is within ``tolerance`` of the expected one
  (``"It costs $1,299.00"`` matches 1299);
- ``choice``: the normalised text is one of the accepted answers (synonyms, e.g. yes/on);
- ``time``: the same clock time (``"9am"``, ``"09:00"``, ``"9:00 AM"`` all match 09:00);
- ``date``: the same calendar date (``"2026-03-05"``, ``"March 5, 2026"``, ``"5 Mar 2026"``).

    >>> from darwin.answers import AnswerKey
    >>> AnswerKey(kind="number", expected="1299", tolerance=0.5).matches("It costs $1,299.00")
    True
    >>> AnswerKey(kind="time", expected="21:30").matches("9:30 pm")
    True
    >>> AnswerKey(kind="exact", expected="The Hobbit").matches("hobbit")
    True
"""

from __future__ import annotations

import datetime as dt
import re
import string
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

MatcherKind = Literal["exact", "number", "choice", "time", "date"]

_ARTICLES = ("the ", "a ", "an ")
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+")
_TIME = re.compile(r"\b(\d{1,2})(?:[:.](\d{2}))?\s*(a\.?m\.?|p\.?m\.?)?(?![\d])", re.IGNORECASE)
_MONTHS = {
    m.lower(): i
    for i, m in enumerate(
        [
            "January",
            "February",
            "March",
            "April",
            "May",
            "June",
            "July",
            "August",
            "September",
            "October",
            "November",
            "December",
        ],
        1,
    )
}


def normalise(text: str) -> str:
    """Lower case, single spaces, no surrounding punctuation or quotes, no leading article."""
    out = " ".join(text.lower().split()).strip(string.punctuation + " \u201c\u201d\u2018\u2019")
    for article in _ARTICLES:
        if out.startswith(article):
            out = out[len(article) :]
            break
    return out


def parse_number(text: str) -> float | None:
    """The first number in ``text`` (thousands separators allowed), or ``None``."""
    found = _NUMBER.search(text)
    if found is None:
        return None
    return float(found.group().replace(",", ""))


def parse_time(text: str) -> tuple[int, int] | None:
    """The first clock time in ``text`` as ``(hour, minute)`` on a 24-hour clock, or ``None``.

    A bare number counts only with am/pm (``"9"`` alone is not a time, ``"9 pm"`` is).
    """
    for found in _TIME.finditer(text):
        hour, minute, meridiem = int(found.group(1)), found.group(2), found.group(3)
        if minute is None and meridiem is None:
            continue
        minute_value = int(minute) if minute is not None else 0
        if meridiem is not None:
            if not 1 <= hour <= 12:
                continue
            pm = meridiem.lower().startswith("p")
            hour = hour % 12 + (12 if pm else 0)
        if 0 <= hour <= 23 and 0 <= minute_value <= 59:
            return hour, minute_value
    return None


def parse_date(text: str) -> dt.date | None:
    """The first date in ``text``: ISO ``2026-03-05``, ``March 5, 2026``, ``5 March 2026`` (month names may be cut to 3 letters)."""
    iso = re.search(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b", text)
    if iso:
        try:
            return dt.date(int(iso.group(1)), int(iso.group(2)), int(iso.group(3)))
        except ValueError:
            return None
    words = re.findall(r"[A-Za-z]+|\d+", text)
    month = day = year = None
    for word in words:
        low = word.lower()
        if month is None and len(low) >= 3 and not low.isdigit():
            month = next((n for name, n in _MONTHS.items() if name.startswith(low)), None)
        elif low.isdigit() and len(low) == 4 and year is None:
            year = int(low)
        elif low.isdigit() and len(low) <= 2 and day is None:
            day = int(low)
    if month is None or day is None or year is None:
        return None
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


class AnswerKey(BaseModel):
    """The expected answer of an information task and how an answer is matched against it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: MatcherKind = "exact"
    expected: str = Field(min_length=1, description="the answer as shown in the app (what the oracle answers)")
    tolerance: float = Field(0.0, ge=0.0, description="number: largest accepted absolute difference")
    accepted: tuple[str, ...] = Field((), description="choice: every accepted answer (expected is added)")

    @model_validator(mode="after")
    def _check(self) -> AnswerKey:
        parsers = {"number": parse_number, "time": parse_time, "date": parse_date}
        if self.kind in parsers and parsers[self.kind](self.expected) is None:
            raise ValueError(
                f"expected={self.expected!r} is not a {self.kind}; write it as the matcher reads it (see darwin.answers)"
            )
        return self

    def matches(self, answer: str | None) -> bool:
        """Whether ``answer`` (the agent's text; ``None``: it never answered) is right."""
        if answer is None:
            return False
        if self.kind == "exact":
            return normalise(answer) == normalise(self.expected)
        if self.kind == "choice":
            return normalise(answer) in {normalise(a) for a in (self.expected, *self.accepted)}
        if self.kind == "number":
            got, want = parse_number(answer), parse_number(self.expected)
            return got is not None and want is not None and abs(got - want) <= self.tolerance + 1e-9
        if self.kind == "time":
            return parse_time(answer) is not None and parse_time(answer) == parse_time(self.expected)
        return parse_date(answer) is not None and parse_date(answer) == parse_date(self.expected)


def grounded(answer: str, kind: MatcherKind, screens: Sequence[Sequence[str]]) -> bool:
    """Whether the value of ``answer`` is read on one of ``screens`` (each the texts a reader
    read off one screen the agent saw): a number answer's first number is a number on a screen,
    a time or date answer's value is a time or date on a screen, a text answer (``exact``) is
    within a screen's text, case and spacing aside. A ``choice`` (yes/no, on/off)
    judges what a screen shows rather than copying it, so it is always grounded.

    An answer that is worked out rather than read (a count of rows, a sum) is never grounded: a
    verifier that asks for grounding rejects it, right or not.

        >>> grounded("It is 18 degrees", "number", [("Weather", "18°")])
        True
        >>> grounded("3", "number", [("Mon 2 events",)])
        False
        >>> grounded("Berlin", "exact", [("Stays in BERLIN",)])
        True
    """
    if kind == "choice":
        return True
    lines = [t for screen in screens for t in (*screen, " ".join(screen))]
    if kind == "number":
        want = parse_number(answer)
        return want is not None and any(
            float(m.group().replace(",", "")) == want for line in lines for m in _NUMBER.finditer(line)
        )
    if kind == "time":
        want_time = parse_time(answer)
        return want_time is not None and any(parse_time(line) == want_time for line in lines)
    if kind == "date":
        want_date = parse_date(answer)
        return want_date is not None and any(parse_date(line) == want_date for line in lines)
    want_text = normalise(answer)
    return bool(want_text) and any(want_text in normalise(line) for line in lines)
