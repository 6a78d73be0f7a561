"""Marks in the tiny agent's prompt and actions that point at them (issue 72)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from darwin.actions import Click, Direction, LongPress, OpenApp, Scroll, Type
from darwin.agents.pointing import (
    PointingError,
    draw_marks,
    find_goal_span,
    goal_span,
    mark_at,
    mark_reading,
    mark_with_text,
    marks_text,
    press_text,
)
from darwin.agents.qwen import QwenVLAgent
from darwin.agents.tiny import ACTION_SPACE, POINTING_SPACE, TinyAgent
from darwin.agents.uitars import UITarsAgent
from darwin.components import ComponentError
from darwin.types import Mark, Observation

MARKS = (
    Mark("Paris", (0, 400, 1080, 520), clickable=True),
    Mark("Berlin", (0, 520, 1080, 640), clickable=True),
    Mark("Search", (40, 540, 200, 600)),  # inside Berlin's row: the smaller mark wins
)


def marked(goal: str = "Search stays in Berlin for 2 adults", marks: tuple[Mark, ...] = MARKS) -> Observation:
    return Observation(screenshot=np.zeros((560, 252, 3), np.uint8), goal=goal, device_size=(1080, 2400), marks=marks)


def reading_agent(**overrides: object) -> TinyAgent:
    return TinyAgent(reader={"name": "elements"}, **overrides)


def test_marks_reach_the_prompt_as_numbered_lines():
    agent = reading_agent()
    text = agent.build_context(marked(), []).messages[-1].text
    assert "Screen:\n[0] Paris\n[1] Berlin\n[2] Search" in text
    assert POINTING_SPACE in agent.system_text(marked())
    assert "#k" not in TinyAgent().system_text(marked())  # no reader: the prompt is unchanged
    assert "Screen:" not in reading_agent(list_marks=False).build_context(marked(), []).messages[-1].text


def test_a_press_points_at_the_smallest_mark_that_holds_it_and_comes_back():
    agent, obs = reading_agent(point_text=False), marked()
    assert agent.format_action(Click(x=100, y=570), obs) == "click(#2)"
    assert agent.format_action(Click(x=900, y=570), obs) == "click(#1)"
    assert agent.format_action(LongPress(x=10, y=410), obs) == "long_press(#0)"
    for text in ("click(#1)", "long_press(#0)", "click(#2)"):
        action = agent.project_action(text, obs)
        assert MARKS[int(text.split("#")[1][0])].contains(action.x, action.y)
        assert agent.format_action(action, obs) == text
    # nothing under the press: the coordinates are written out
    assert agent.format_action(Click(x=540, y=2000), obs) == agent.plain_text(Click(x=540, y=2000), obs)


def test_a_press_is_written_with_the_text_that_reads_its_mark():
    agent, obs = reading_agent(), marked()
    assert agent.format_action(Click(x=900, y=570), obs) == "click(@3:4)"  # the goal's "Berlin"
    assert agent.format_action(Click(x=100, y=570), obs) == "click(@0:1)"  # the goal's "Search"
    assert agent.project_action("click(@3:4)", obs) == Click(x=MARKS[1].center[0], y=MARKS[1].center[1])
    # the same words of another goal press the row that shows that goal's city
    oslo = marked(goal="Search stays in Paris for 2 adults")
    assert agent.project_action("click(@3:4)", oslo) == Click(x=MARKS[0].center[0], y=MARKS[0].center[1])
    assert agent.format_action(Click(x=10, y=410), obs) == "click('Paris')"  # its own text: not in the goal
    for text in ("click('Berlin')", "click('berlin')", 'click( "Berlin" )'):
        assert agent.project_action(text, obs) == Click(x=MARKS[1].center[0], y=MARKS[1].center[1])
    assert agent.project_action("long_press('Paris')", obs) == LongPress(x=MARKS[0].center[0], y=MARKS[0].center[1])
    # a text no mark reads is a format error; without marks the quoted press is too
    for text, o in (("click('Oslo')", obs), ("click('Berlin')", marked(marks=())), ("click(@5:7)", obs)):
        parsed = agent.parse(text, o)
        assert parsed.action is None and parsed.error is not None
    # a text read by an earlier mark first does not lead back: the number is written instead
    twice = (Mark("Berlin", (0, 0, 100, 50)), Mark("Berlin", (0, 100, 100, 150)))
    assert agent.format_action(Click(x=10, y=120), marked(marks=twice)) == "click(#1)"
    # a number is pressed by its mark: a greedy decoder repeats digits written out (click('222'))
    calendar = (Mark("2", (0, 0, 100, 50)), Mark("22", (0, 100, 100, 150)), Mark("23", (100, 100, 200, 150)))
    assert agent.format_action(Click(x=150, y=120), marked(marks=calendar)) == "click(#2)"
    assert press_text(calendar, "Set the alarm for 9am", 1) is None
    assert press_text(calendar, "Check in on the 22 of May", 1) == (4, 5)  # a span of the goal still points


def test_mark_reading_prefers_an_exact_text_then_whole_words():
    marks = (Mark("Berlin City", (0, 0, 9, 9)), Mark("Berlin", (0, 10, 9, 19)), Mark("Berliner", (0, 20, 9, 29)))
    assert mark_reading(marks, "berlin") == 1
    assert mark_reading(marks, "City") == 0
    assert mark_reading(marks, "Berl") is None
    assert press_text(marks, "Stays in Berlin City", 0) == (3, 4)  # "City": the shortest span that leads back
    assert press_text(marks, "Stays in Berlin", 2) == "Berliner"


def test_type_copies_a_goal_span_or_a_mark_by_reference():
    agent, obs = reading_agent(), marked()
    assert agent.format_action(Type(content="Berlin"), obs) == "type(@3:4)"
    assert agent.project_action("type(@3:4)", obs) == Type(content="Berlin")
    assert agent.project_action("type(@0:2)", obs) == Type(content="Search stays")
    assert agent.format_action(Type(content="Paris"), obs) == "type(#0)"
    assert agent.project_action("type(#0)", obs) == Type(content="Paris")
    # a quoted '#0' is the characters, not a reference
    assert agent.project_action("type('#0')", obs) == Type(content="#0")
    # a string nowhere on screen or in the goal is spelled out
    assert agent.format_action(Type(content="Oslo"), obs) == "type('Oslo')"
    assert reading_agent(point=False).format_action(Type(content="Berlin"), obs) == "type('Berlin')"


def test_open_app_names_the_app_by_the_goals_words():
    agent, obs = reading_agent(), marked(goal="Booking.com: Navigate to app settings.")
    assert agent.format_action(OpenApp(app="Booking.com"), obs) == "open_app(@0:2)"
    assert agent.project_action("open_app(@0:2)", obs) == OpenApp(app="Booking.com")
    # the same words open an app the model never saw opened: the goal names it
    settings = marked(goal="Settings: Go to display settings. Turn on Dark Theme.")
    assert agent.project_action("open_app(@0:1)", settings) == OpenApp(app="Settings")
    # an app the goal does not name keeps its name; without a reader or point the name is written
    assert agent.format_action(OpenApp(app="Clock"), obs) == "open_app('Clock')"
    assert reading_agent(point=False).format_action(OpenApp(app="Booking.com"), obs) == "open_app('Booking.com')"
    assert TinyAgent().format_action(OpenApp(app="Booking.com"), obs) == "open_app('Booking.com')"
    assert "open_app(@i:j)" in POINTING_SPACE


@pytest.mark.parametrize(
    "text",
    [
        "click(#3)",
        "click(#99999999999)",
        "type(@4:3)",
        "type(@0:99)",
        "type(@2)",
        "scroll(#1)",
        "click(#x)",
        "open_app(#0)",
        "open_app(@5:99)",
        "press_back(@0:1)",
    ],
)
def test_a_reference_to_nothing_is_a_format_error_never_a_crash(text):
    parsed = reading_agent().parse(text, marked())
    assert parsed.action is None and parsed.error is not None


def test_pointing_without_marks_is_a_format_error():
    parsed = reading_agent().parse("click(#0)", marked(marks=()))
    assert parsed.action is None and parsed.error is not None
    assert "#0 is not a mark of this screen (it has 0" in parsed.error.reason


def test_chinese_goals_point_per_character():
    obs = marked(goal="搜索柏林的住宿", marks=())
    assert find_goal_span(obs.goal, "柏林") == (2, 4)
    assert reading_agent().format_action(Type(content="柏林"), obs) == "type(@2:4)"
    assert reading_agent().project_action("type(@2:4)", obs) == Type(content="柏林")


def test_helpers_on_hand_built_marks():
    assert mark_at(MARKS, 100, 570) == 2 and mark_at(MARKS, 5, 2300) is None
    assert mark_with_text(MARKS, "berlin") is None  # typing copies exactly: case matters
    assert mark_with_text(MARKS, "Berlin") == 1
    assert marks_text(MARKS[:2]) == "[0] Paris\n[1] Berlin"
    with pytest.raises(PointingError, match="words"):
        goal_span("two words", 0, 3)
    drawn = draw_marks(np.zeros((560, 252, 3), np.uint8), MARKS, (1080, 2400))
    assert drawn.shape == (560, 252, 3) and drawn.any()


def test_an_unknown_reader_fails_at_build_time_with_the_close_match():
    with pytest.raises((ComponentError, ValueError), match="ocr"):
        TinyAgent(reader={"name": "ocrr"})


def test_the_plain_action_space_is_unchanged():
    assert "#" not in ACTION_SPACE
    obs = dataclasses.replace(marked(), marks=())
    assert TinyAgent().format_action(Scroll(x=540, y=1200, direction=Direction.DOWN), obs) == "scroll(50,50,down)"


@pytest.mark.parametrize(
    "make", [lambda **kw: UITarsAgent(**kw), lambda **kw: QwenVLAgent(**kw)], ids=["uitars", "qwen"]
)
def test_uitars_and_qwen_list_marks_only_when_asked(make):
    plain = make().build_context(marked(), [])
    assert all("[1] Berlin" not in m.text for m in plain.messages)
    reading = make(reader={"name": "elements"}).build_context(marked(), [])
    assert reading.messages[-1].text.endswith("Screen:\n[0] Paris\n[1] Berlin\n[2] Search")
    drawn = make(reader={"name": "elements"}, draw_marks=True, list_marks=False).build_context(marked(), [])
    assert "Screen:" not in drawn.messages[-1].text
    assert drawn.messages[-1].images[-1].any() and not plain.messages[-1].images[-1].any()


def test_the_paper_preset_reads_pixels_only():
    from darwin.agents.formats import make_agent
    from darwin.run.load import load_experiment

    config = load_experiment("examples/spa_bench.py", preset="paper")
    assert config.agent.format is not None
    agent = make_agent(config.agent.format, memory=None)
    assert agent.reader is None and config.sft.agent.reader.name == "none"
