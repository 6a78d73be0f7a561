"""TinyAgent: the compact format, its coordinate grid and its prompt."""

from __future__ import annotations

import doctest
import importlib

import pytest

from darwin.actions import Click, Direction, Drag, Finished, OpenApp, Scroll, Type
from darwin.agents.tiny import TinyAgent, TinyAgentConfig
from darwin.memory.sliding_window import SlidingWindowMemory
from darwin.types import ParseError


@pytest.mark.parametrize(
    ("action", "text"),
    [
        (Click(x=540, y=1200), "click(50,50)"),
        (Click(x=0, y=0), "click(0,0)"),
        (Click(x=1079, y=2399), "click(99,99)"),
        (Scroll(x=540, y=1200, direction=Direction.DOWN), "scroll(50,50,down)"),
        (Drag(x1=540, y1=1800, x2=540, y2=600), "drag(50,75,50,25)"),
        (Type(content="it's\n"), "type('it\\'s\\n')"),
        (OpenApp(app="Clock"), "open_app('Clock')"),
        (Finished(), "finished()"),
    ],
)
def test_format_is_short(action, text, obs):
    assert TinyAgent().format_action(action, obs) == text


def test_grid_cells_map_to_their_centres(obs):
    agent = TinyAgent()
    assert agent.project_action("click(0,0)", obs) == Click(x=5, y=12)
    assert agent.project_action("click(99,99)", obs) == Click(x=1075, y=2388)
    # any pixel comes back within half a cell (5.4 x 12 px on 1080x2400)
    for x in range(0, 1080, 37):
        back = agent.project_action(agent.format_action(Click(x=x, y=x * 2), obs), obs)
        assert abs(back.x - x) <= 6 and abs(back.y - 2 * x) <= 12


def test_device_pixel_mode_is_exact(obs):
    agent = TinyAgent(grid=None)
    assert agent.format_action(Click(x=537, y=1213), obs) == "click(537,1213)"
    assert agent.project_action("click(537,1213)", obs) == Click(x=537, y=1213)
    assert "1080x2400" in agent.system_text(obs)


@pytest.mark.parametrize(
    "text",
    [
        "click(50,50)",
        " CLICK( 50 , 50 ) ",
        "click(x=50, y=50)",
        "Sure: click(50,50)\n",
        "click(50,50",
        "click('50','50')",
    ],
)
def test_tolerant_reading(text, obs):
    assert TinyAgent().project_action(text, obs) == Click(x=545, y=1212)


@pytest.mark.parametrize("text", ["click(50)", "click(a,b)", "scroll(1,2)", "tap(1,2)", "open_app('')", ""])
def test_errors(text, obs):
    assert isinstance(TinyAgent().project_action(text, obs), ParseError)


def test_prompt_without_system_turn(obs, make_transition):
    agent = TinyAgent(system_prompt=False, memory=SlidingWindowMemory(max_interactions=2))
    history = [make_transition(agent, i, text=t) for i, t in enumerate(["open_app('Clock')", "click(1,2)", "wait()"])]
    (user,) = agent.build_context(obs, history).messages
    assert user.role == "user" and user.text == "Goal: Open Clock\nDone: click(1,2); wait()"


def test_config_validation():
    with pytest.raises(ValueError):
        TinyAgentConfig(grid=1)
    with pytest.raises(ValueError):
        TinyAgentConfig(unknown=True)


@pytest.mark.parametrize(
    "module",
    [
        "darwin.agents",
        "darwin.agents.coords",
        "darwin.agents.parsing",
        "darwin.agents.vlm",
        "darwin.agents.uitars",
        "darwin.agents.qwen",
        "darwin.agents.tiny",
        "darwin.memory.base",
        "darwin.memory.sliding_window",
    ],
)
def test_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def _context(agent, obs, history):
    """(role, text, image fills) per message: comparable without numpy's ambiguous ==."""
    return [(m.role, m.text, [int(im[0, 0, 0]) for im in m.images]) for m in agent.build_context(obs, history).messages]


def test_invalid_past_outputs_are_omitted_by_default(obs, make_transition):
    # The phone did nothing on an unparseable step, so the next prompt is the one the slip
    # came from: the model simply tries again.
    agent = TinyAgent(memory=SlidingWindowMemory(max_interactions=2))
    opened, clicked = make_transition(agent, 0, text="open_app('Clock')"), make_transition(agent, 3, text="click(1,2)")
    slips = [make_transition(agent, 1, text="click(50)"), make_transition(agent, 2, text="q#@!")]
    assert _context(agent, obs, [opened, *slips]) == _context(agent, obs, [opened])
    with_slips = _context(agent, obs, [opened, *slips, clicked])
    assert with_slips == _context(agent, obs, [opened, clicked])
    # The window of 2 counts remembered steps after omission: both valid steps fit.
    assert with_slips[-1][1].endswith("Done: open_app('Clock'); click(1,2)")


def test_invalid_past_outputs_marked_stay_short(obs, make_transition):
    agent = TinyAgent(invalid_history="mark")
    history = [make_transition(agent, 0, text="q#@!" * 50), make_transition(agent, 1, text="press_back()")]
    (_, user) = agent.build_context(obs, history).messages
    assert user.text.endswith("Done: invalid; press_back()")
