"""Qwen2.5-VL / Qwen3-VL: cookbook prompts verbatim, real cookbook outputs, every mobile_use action."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from darwin.actions import (
    Answer,
    Click,
    Direction,
    Drag,
    Finished,
    LongPress,
    OpenApp,
    PressBack,
    PressHome,
    Scroll,
    Type,
    Wait,
)
from darwin.agents.qwen import QwenVLAgent, QwenVLConfig
from darwin.types import ParseError

GOLDEN = Path(__file__).parent / "golden"

# QwenLM/Qwen2.5-VL (now QwenLM/Qwen3-VL) cookbooks/mobile_agent.ipynb @ f61c3cd, first example:
# a 1080x2400 screenshot (mobile_en_example.png), the rendered prompt and Qwen2.5-VL-7B's output.
QWEN25_USER = (
    "The user query: Open the file manager app and view the au_uu_SzH3yR2.mp3 file in MUSIC Folder\n"
    "Task progress (You have done the following operation on the current device): "
    'Step 1: {"name": "mobile_use", "arguments": {"action": "open", "text": "File Manager"}}; '
)
QWEN25_OUTPUT = (
    '\n<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [935, 406]}}\n</tool_call>\n'
)
# Same notebook, Chinese example (720x1280 screenshot, resized 728x1288).
QWEN25_OUTPUT_ZH = (
    '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [639, 1095]}}\n</tool_call>\n'
)
# cookbooks/mobile_agent.ipynb @ 9e7b8cc (Qwen3-VL), English example on a 1440x3120 screenshot.
QWEN3_OUTPUT = (
    "Thought: To search for Musk in X, I need to click on the search bar at the top of the screen. "
    "This will allow me to type in the search query.\n"
    'Action: "I tapped on the search bar to begin searching for Musk."\n'
    '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [447, 81]}}\n</tool_call>\n'
)


def test_qwen25_system_prompt_verbatim(make_obs):
    # golden/qwen2_5_vl_system_1092x2408.txt: the system turn rendered in the notebook's output.
    obs = make_obs(1080, 2400)
    agent = QwenVLAgent(version="2.5", darwin_actions=False)
    assert agent.system_text(obs) == (GOLDEN / "qwen2_5_vl_system_1092x2408.txt").read_text()


def test_qwen25_user_turn_matches_cookbook(make_obs):
    agent = QwenVLAgent(version="2.5")
    step = '{"name": "mobile_use", "arguments": {"action": "open", "text": "File Manager"}}'
    goal = "Open the file manager app and view the au_uu_SzH3yR2.mp3 file in MUSIC Folder"
    assert agent.user_text(goal, [(1, step)]) == QWEN25_USER


def test_qwen25_history_uses_raw_tool_calls(make_obs, make_transition):
    agent = QwenVLAgent(version="2.5")
    opened = make_transition(
        agent,
        0,
        text='<tool_call>\n{"name": "mobile_use", "arguments": {"action": "open", "text": "File Manager"}}\n</tool_call>',
        width=1080,
        height=2400,
    )
    obs = make_obs(1080, 2400, goal="Open the file manager app and view the au_uu_SzH3yR2.mp3 file in MUSIC Folder")
    prompt = agent.build_context(obs, [opened])
    system, user = prompt.messages
    assert system.role == "system" and user.role == "user"
    assert user.text == QWEN25_USER and len(user.images) == 1


def test_qwen25_real_outputs(make_obs):
    agent = QwenVLAgent(version="2.5")
    parsed = agent.parse(QWEN25_OUTPUT, make_obs(1080, 2400))
    assert parsed.action == Click(x=925, y=405)  # 935 * 1080/1092, 406 * 2400/2408
    assert parsed.action_text == '{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [935, 406]}}'
    assert parsed.summary is None and parsed.num_actions == 1 and not parsed.warnings
    assert agent.project_action(QWEN25_OUTPUT_ZH, make_obs(720, 1280, device=(720, 1280))) == Click(x=632, y=1088)


def test_qwen3_system_prompt_verbatim(make_obs):
    # golden/qwen3_vl_system.txt: `system_prompt` of the Qwen3-VL cookbook @ 9e7b8cc.
    agent = QwenVLAgent(version="3", darwin_actions=False)
    assert agent.system_text(make_obs(1440, 3120)) == (GOLDEN / "qwen3_vl_system.txt").read_text()


def test_qwen3_user_turn_matches_cookbook(make_obs):
    agent = QwenVLAgent(version="3")
    goal = "Search for Musk in X and go to his homepage to open the first post."
    assert agent.user_text(goal, [(1, "I opened the X app from the home screen.")]) == (
        f"The user query: {goal}.\nTask progress (You have done the following operation on the current device): "
        "Step 1: I opened the X app from the home screen.; .\n"
    )


def test_qwen3_real_output_and_summary(make_obs):
    obs = make_obs(1440, 3120, device=(1440, 3120))
    parsed = QwenVLAgent(version="3").parse(QWEN3_OUTPUT, obs)
    # The cookbook rescales by 999: round(447/999*1440) = 644, round(81/999*3120) = 253.
    assert parsed.action == Click(x=644, y=253)
    assert parsed.thought.startswith("To search for Musk in X")
    assert parsed.summary == "I tapped on the search bar to begin searching for Musk."


def test_qwen3_history_uses_summaries_cleaned_like_the_cookbook(make_obs, make_transition):
    agent = QwenVLAgent(version="3")
    past = make_transition(agent, 0, text=QWEN3_OUTPUT, width=1440, height=3120, device=(1440, 3120))
    user = agent.build_context(make_obs(1440, 3120, device=(1440, 3120)), [past]).messages[1].text
    assert "Step 1: I tapped on the search bar to begin searching for Musk.; .\n" in user


def test_darwin_actions_extend_the_tool(make_obs):
    obs = make_obs(1080, 2400)
    tools25 = QwenVLAgent(version="2.5").system_text(obs)
    tools3 = QwenVLAgent(version="3").system_text(obs)
    assert '"answer"' in tools25 and "* `answer`: Output the answer." in tools25
    assert '"open"' in tools3 and "* `open`: Open an app on the device." in tools3
    assert '"answer"' not in QwenVLAgent(version="2.5", darwin_actions=False).system_text(obs)


def _call(arguments: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": "mobile_use", "arguments": arguments}) + "\n</tool_call>"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"action": "click", "coordinate": [500, 500]}, Click(x=540, y=1200)),
        ({"action": "long_press", "coordinate": [500, 500], "time": 2}, LongPress(x=540, y=1200)),
        (
            {"action": "swipe", "coordinate": [500, 800], "coordinate2": [500, 200]},
            Drag(x1=540, y1=1920, x2=540, y2=480),
        ),
        ({"action": "type", "text": "héllo 你好\n"}, Type(content="héllo 你好\n")),
        ({"action": "answer", "text": "42"}, Answer(content="42")),
        ({"action": "open", "text": "Clock"}, OpenApp(app="Clock")),
        ({"action": "system_button", "button": "Back"}, PressBack()),
        ({"action": "system_button", "button": "Home"}, PressHome()),
        ({"action": "system_button", "button": "Enter"}, Type(content="\n")),
        ({"action": "key", "text": "KEYCODE_BACK"}, PressBack()),
        ({"action": "wait", "time": 2}, Wait()),
        ({"action": "terminate", "status": "success"}, Finished(content="success")),
        ({"action": "terminate", "status": "failure"}, Finished(content="failure")),
        ({"action": "click", "coordinate": ["500", "500"]}, Click(x=540, y=1200)),
        ({"action": "click", "coordinate": "[500, 500]"}, Click(x=540, y=1200)),
        ({"action": "click", "coordinate": [400, 400, 600, 600]}, Click(x=540, y=1200)),
    ],
)
def test_every_mobile_use_action(arguments, expected, make_obs):
    agent = QwenVLAgent(version="3")
    assert agent.project_action(_call(arguments), make_obs(1080, 2400)) == expected


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [500, 500]}}',  # unclosed
        'Sure! <TOOL_CALL>\n{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [500, 500]}}  trailing\n</tool_call>',
        '{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [500, 500]}}',  # no tags
        '<tool_call>\n{"name": "mobile_use", "arguments": "{\\"action\\": \\"click\\", \\"coordinate\\": [500, 500]}"}\n</tool_call>',
        '<tool_call>{"action": "click", "coordinate": [500, 500]}</tool_call>',  # bare arguments
    ],
)
def test_tolerated_variants(text, make_obs):
    assert QwenVLAgent(version="3").project_action(text, make_obs(1080, 2400)) == Click(x=540, y=1200)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I will tap the search bar.",
        "<tool_call>not json</tool_call>",
        '<tool_call>{"name": "mobile_use", "arguments": {"action": "fly"}}</tool_call>',
        '<tool_call>{"name": "mobile_use", "arguments": {"action": "click"}}</tool_call>',
        '<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [1, true]}}</tool_call>',
        '<tool_call>{"name": "mobile_use", "arguments": {"action": "system_button", "button": "Menu"}}</tool_call>',
        '<tool_call>{"name": "mobile_use", "arguments": [1, 2]}</tool_call>',
        '<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [NaN, 1]}}</tool_call>',
    ],
)
def test_parse_errors(text, make_obs):
    out = QwenVLAgent(version="2.5").project_action(text, make_obs(1080, 2400))
    assert isinstance(out, ParseError) and out.reason


def test_scroll_is_written_as_a_swipe_and_read_back_as_a_drag(make_obs):
    obs = make_obs(1080, 2400)
    agent = QwenVLAgent(version="3")
    text = agent.format_action(Scroll(x=540, y=1200, direction=Direction.DOWN), obs)
    assert json.loads(text.split("\n")[1])["arguments"] == {
        "action": "swipe",
        "coordinate": [500, 500],
        "coordinate2": [500, 250],
    }
    assert agent.project_action(text, obs) == Drag(x1=540, y1=1200, x2=540, y2=600)


def test_config_is_validated_when_built():
    with pytest.raises(ValueError):
        QwenVLConfig(version="2")
    assert QwenVLAgent(version="3").convention.kind == "relative"
    assert QwenVLAgent().convention.kind == "resized_image"
