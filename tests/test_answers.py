"""Answer matchers: hand-computed cases for every kind."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from darwin.answers import AnswerKey, normalise, parse_date, parse_number, parse_time


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("  The  Hobbit. ", "hobbit"),
        ('"An apple"', "apple"),
        ("Theatre", "theatre"),
        ("A", "a"),
        ("", ""),
    ],
)
def test_normalise(text: str, want: str) -> None:
    assert normalise(text) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("$1,299.00", 1299.0),
        ("about -3.5 degrees", -3.5),
        ("4.6 stars (12k)", 4.6),
        ("none", None),
        (".5", 0.5),
    ],
)
def test_parse_number(text: str, want: float | None) -> None:
    assert parse_number(text) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("9am", (9, 0)),
        ("9:00 AM", (9, 0)),
        ("09:00", (9, 0)),
        ("12 am", (0, 0)),
        ("12:30 pm", (12, 30)),
        ("9:30 p.m.", (21, 30)),
        ("21.45", (21, 45)),
        ("at 9", None),
        ("13 pm", None),
        ("25:00", None),
    ],
)
def test_parse_time(text: str, want: tuple[int, int] | None) -> None:
    assert parse_time(text) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("2026-03-05", dt.date(2026, 3, 5)),
        ("March 5, 2026", dt.date(2026, 3, 5)),
        ("5 Mar 2026", dt.date(2026, 3, 5)),
        ("Thu, Nov 26 2026", dt.date(2026, 11, 26)),
        ("2026-02-30", None),
        ("March 2026", None),
    ],
)
def test_parse_date(text: str, want: dt.date | None) -> None:
    assert parse_date(text) == want


def test_exact_and_choice() -> None:
    key = AnswerKey(kind="exact", expected="GMT+9:00")
    assert (
        key.matches("gmt+9:00") and key.matches(" GMT+9:00.") and not key.matches("GMT+8:00") and not key.matches(None)
    )
    choice = AnswerKey(kind="choice", expected="On", accepted=("yes", "enabled"))
    assert choice.matches("Yes") and choice.matches("enabled") and choice.matches("on") and not choice.matches("off")


def test_number_tolerance() -> None:
    key = AnswerKey(kind="number", expected="$19.99", tolerance=0.01)
    assert key.matches("19.99") and key.matches("It is $20.00") and not key.matches("20.01") and not key.matches("free")
    assert AnswerKey(kind="number", expected="42").matches("42 followers") and not AnswerKey(
        kind="number", expected="42"
    ).matches("41")


def test_time_and_date() -> None:
    assert AnswerKey(kind="time", expected="21:30").matches("9:30 PM") and not AnswerKey(
        kind="time", expected="21:30"
    ).matches("9:30 AM")
    assert AnswerKey(kind="date", expected="2026-11-26").matches("Thursday, November 26, 2026")
    assert not AnswerKey(kind="date", expected="2026-11-26").matches("November 27, 2026")


def test_expected_must_parse_as_its_kind() -> None:
    with pytest.raises(ValidationError, match="not a number"):
        AnswerKey(kind="number", expected="many")
    with pytest.raises(ValidationError, match="not a time"):
        AnswerKey(kind="time", expected="noonish")
