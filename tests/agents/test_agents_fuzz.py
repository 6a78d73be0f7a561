"""Parsers never raise: random bytes, unicode, 1 MB strings, unbalanced quotes, nested brackets."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from darwin.actions import Click, Drag, LongPress, Scroll
from darwin.agents.parsing import find_calls, parse_arguments, split_top_level, unquote
from darwin.agents.qwen import QwenVLAgent
from darwin.agents.tiny import TinyAgent
from darwin.agents.uitars import UITarsAgent
from darwin.agents.vlm import VLMAgent
from darwin.types import Observation, ParseError

OBS = Observation(screenshot=np.zeros((560, 252, 3), np.uint8), goal="g", device_size=(1080, 2400))
AGENTS: list[VLMAgent] = [
    UITarsAgent(version="1.0"),
    UITarsAgent(version="1.5", off_screen="error"),
    UITarsAgent(prompt_style="point"),
    QwenVLAgent(version="2.5"),
    QwenVLAgent(version="3", off_screen="error"),
    TinyAgent(),
    TinyAgent(grid=None, off_screen="error"),
]
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_all(text: str) -> None:
    for agent in AGENTS:
        parsed = agent.parse(text, OBS)
        out = agent.project_action(text, OBS)
        assert isinstance(out, ParseError) or out.type
        assert parsed.result == out
        action = parsed.action
        if isinstance(action, Click | LongPress | Scroll):
            assert 0 <= action.x < 1080 and 0 <= action.y < 2400
        if isinstance(action, Drag):
            assert all(0 <= v < 1080 for v in (action.x1, action.x2))
            assert all(0 <= v < 2400 for v in (action.y1, action.y2))
        if isinstance(out, ParseError):
            assert len(out.text) <= 500
        if parsed.action is not None:  # rendering the step for the next prompt must not raise either
            assert isinstance(agent.history_item(parsed).action, str)


@given(st.binary(max_size=2000))
@FUZZ
def test_random_bytes_decoded(data):
    for encoding, errors in (("utf-8", "replace"), ("utf-8", "surrogateescape"), ("latin-1", "strict")):
        check_all(data.decode(encoding, errors))


@given(st.text(max_size=500))
@FUZZ
def test_random_unicode(text):
    check_all(text)


_PIECES = st.sampled_from(
    [
        "Thought:",
        "Action:",
        "action :",
        "click(",
        "long_press(",
        "type(",
        "scroll(",
        "drag(",
        "open_app(",
        "press_home()",
        "finished(",
        "answer(",
        "hotkey(",
        "call_user()",
        "start_box=",
        "end_box=",
        "point=",
        "content=",
        "direction=",
        "app_name=",
        "'",
        '"',
        "\\",
        "\\'",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "<",
        ">",
        ",",
        "=",
        "<|box_start|>",
        "<|box_end|>",
        "<point>",
        "</point>",
        "<bbox>",
        "<tool_call>",
        "</tool_call>",
        '{"name": "mobile_use", "arguments": ',
        '"action": "click"',
        '"coordinate": ',
        '"text": ',
        '"swipe"',
        "down",
        "up",
        "nan",
        "inf",
        "-",
        ".",
        "1e999",
        "NaN",
        "Infinity",
        "\n",
        " ",
        "\t",
        "你好",
        "🎉",
        "\u202e",
        "\x00",
        "\ud800",
    ]
)
_NUMS = st.integers(-(10**30), 10**30).map(str) | st.floats(allow_nan=False, allow_infinity=False).map(
    lambda f: f"{f:.3f}"
)


@given(st.lists(_PIECES | _NUMS, max_size=60))
@FUZZ
def test_grammar_shaped_noise(pieces):
    check_all("".join(pieces))


@given(st.integers(1, 2000), st.sampled_from(["(", "[", "{", "((", "([{", ")", "]]", "'", '"', "'\""]))
@settings(max_examples=30, deadline=None)
def test_nested_and_unbalanced(depth, unit):
    for prefix in ("Action: click(start_box=", "<tool_call>", "click(", "Action: type(content="):
        check_all(prefix + unit * depth)
        check_all(prefix + unit * depth + "500,500" + unit[::-1] * depth + ")")


@pytest.mark.parametrize(
    "text",
    [
        "a" * 1_000_000,
        "click(" * 170_000,
        "Action: type(content='" + "'" * 1_000_000,
        "Action: type(content='" + "\\" * 1_000_000,
        "Action: click(start_box=" + "([" * 500_000,
        "<tool_call>" + "[" * 1_000_000,
        "<tool_call>" + '{"a":' * 200_000,
        "<tool_call>{}</tool_call>" * 40_000,
        "Action:" + " " * 1_000_000 + "click(start_box='(1,2)')",
        "Thought:" + "\n" * 1_000_000,
        "Action: " + "click(start_box='(1,2)')\n" * 40_000,
        "Action: click(start_box='" + "1," * 500_000,
        "{" * 1_000_000,
        "你好" * 500_000,
    ],
    ids=lambda t: f"{t[:16]!r}x{len(t)}",
)
def test_one_megabyte_strings_are_fast_and_safe(text):
    start = time.perf_counter()
    check_all(text)
    assert time.perf_counter() - start < 5.0  # linear scanners: well under a second in practice


def test_scanners_directly_never_raise():
    for text in ["", "'", "\\", "a=", "=b", "(,,,)", "'''", "x='", ",".join(["'a'"] * 1000), "(" * 10_000]:
        split_top_level(text)
        parse_arguments(text)
        unquote(text)
        find_calls(text, frozenset({"a", "x", "click"}))
