"""UI-TARS: the published prompts verbatim, and real outputs from the bytedance/UI-TARS repository."""

from __future__ import annotations

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
from darwin.agents.uitars import ANSWER_LINE, WAIT_LINE, UITarsAgent, UITarsConfig
from darwin.types import ParseError

GOLDEN = Path(__file__).parent / "golden"


def _template(agent: UITarsAgent) -> str:
    return agent.system_text("{instruction}").replace(agent.config.language, "{language}")


def test_prompt_is_mobile_use_verbatim():
    # golden/uitars_mobile_use.txt = MOBILE_USE of bytedance/UI-TARS codes/prompts.py @ 932a9e6 (2025-05-06)
    agent = UITarsAgent(darwin_actions=False)
    assert _template(agent) == (GOLDEN / "uitars_mobile_use.txt").read_text()


def test_point_prompt_is_mobile_use_doubao_verbatim():
    # golden/uitars_mobile_use_doubao.txt = MOBILE_USE_DOUBAO of codes/ui_tars/prompt.py @ 582f3a7
    agent = UITarsAgent(darwin_actions=False, prompt_style="point")
    assert _template(agent) == (GOLDEN / "uitars_mobile_use_doubao.txt").read_text()


def test_darwin_actions_add_wait_and_answer_only():
    plain = UITarsAgent(darwin_actions=False).system_text("Find the alarm time.")
    extended = UITarsAgent().system_text("Find the alarm time.")
    assert WAIT_LINE in extended and ANSWER_LINE in extended
    assert extended.replace(WAIT_LINE, "").replace(ANSWER_LINE, "") == plain
    assert extended.endswith("## User Instruction\nFind the alarm time.\n")
    assert "- Use Chinese in `Thought` part." in UITarsAgent(language="Chinese").system_text("x")


def test_readme_coordinates_example_matches_official_mapping(make_obs):
    # README_coordinates.md: UI-TARS-1.5 output "click(start_box='(197,525)')" on
    # data/coordinate_process_image.png (1920x1080); the official code maps it to (195, 519)
    # with int() truncation; darwin rounds, so it may differ by one pixel.
    obs = make_obs(1920, 1080, device=(1920, 1080))
    action = UITarsAgent(version="1.5").project_action("Thought: xxx\nAction: click(start_box='(197,525)')", obs)
    assert isinstance(action, Click)
    assert abs(action.x - 195) <= 1 and abs(action.y - 519) <= 1


def test_readme_deploy_expected_output_chinese_thought(make_obs):
    # README_deploy.md "Expected Output" of UI-TARS-1.5 (desktop screenshot, size not given;
    # 1920x1080 assumed here).
    text = (
        "Thought: 我看到Preferences窗口已经打开了，但这里显示的都是系统资源相关的设置。要设置图片的颜色模式，"
        '我得先看看左侧的选项列表。嗯，"Color Management"这个选项看起来很有希望，应该就是处理颜色管理的地方。'
        "让我点击它看看里面有什么选项。\nAction: click(start_box='(177,549)')"
    )
    obs = make_obs(1920, 1080, device=(1920, 1080))
    parsed = UITarsAgent().parse(text, obs)
    assert parsed.action == Click(x=round(177 * 1920 / 1932), y=round(549 * 1080 / 1092))
    assert parsed.thought.startswith("我看到Preferences窗口已经打开了") and parsed.thought.endswith("有什么选项。")
    assert parsed.summary == parsed.thought and parsed.num_actions == 1 and not parsed.warnings


def test_readme_usage_example_qwen25vl_mapping(make_obs):
    # README.md "Usage": response "Thought: Click the button\nAction: click(start_box='(100,200)')",
    # 1920x1080 image, model_type="qwen25vl" -> smart_resize to 1932x1092.
    obs = make_obs(1920, 1080, device=(1920, 1080))
    action = UITarsAgent(version="1.5").project_action(
        "Thought: Click the button\nAction: click(start_box='(100,200)')", obs
    )
    assert action == Click(x=99, y=198)


def test_point_format_relative(make_obs):
    # codes/README.md: "Thought: Click the button\nAction: click(point='<point>200 300</point>')"
    # parsed with factor=1000 (relative) on 1920x1080 -> (384, 324).
    obs = make_obs(1920, 1080, device=(1920, 1080))
    action = UITarsAgent(version="1.0").project_action(
        "Thought: Click the button\nAction: click(point='<point>200 300</point>')", obs
    )
    assert action == Click(x=384, y=324)


def test_training_example_box_tokens_relative(full_obs):
    # data/training_example.json (UI-TARS-1.0 format): "Action: click(start_box='<|box_start|>(495,30)<|box_end|>')"
    action = UITarsAgent(version="1.0").project_action(
        "Action: click(start_box='<|box_start|>(495,30)<|box_end|>')", full_obs
    )
    assert action == Click(x=535, y=72)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Action: long_press(start_box='<|box_start|>(500,500)<|box_end|>')", LongPress(x=540, y=1200)),
        ("Action: long_press(start_box='<|box_start|>(500,500)<|box_end|>', time='')", LongPress(x=540, y=1200)),
        ("Action: type(content='hello world\\n')", Type(content="hello world\n")),
        ("Action: type(content='it\\'s \"quoted\"')", Type(content='it\'s "quoted"')),
        ("Action: type(content='it's unescaped')", Type(content="it's unescaped")),
        (
            "Action: scroll(start_box='<|box_start|>(500,500)<|box_end|>', direction='down')",
            Scroll(x=540, y=1200, direction=Direction.DOWN),
        ),
        ("Action: scroll(direction='up')", Scroll(x=540, y=1200, direction=Direction.UP)),
        (  # the UI-TARS-1.0 README's older mobile scroll(start_box, end_box)
            "Action: scroll(start_box='<|box_start|>(500,800)<|box_end|>', end_box='<|box_start|>(500,200)<|box_end|>')",
            Drag(x1=540, y1=1920, x2=540, y2=480),
        ),
        (
            "Action: drag(start_box='<|box_start|>(100,200)<|box_end|>', end_box='<|box_start|>(300,400)<|box_end|>')",
            Drag(x1=108, y1=480, x2=324, y2=960),
        ),
        (
            "Action: drag(start_point='<point>100 200</point>', end_point='<point>300 400</point>')",
            Drag(x1=108, y1=480, x2=324, y2=960),
        ),
        ("Action: open_app(app_name='Clock')", OpenApp(app="Clock")),
        ("Action: press_home()", PressHome()),
        ("Action: press_back()", PressBack()),
        ("Action: wait()", Wait()),
        ("Action: finished(content='The alarm is set.')", Finished(content="The alarm is set.")),
        ("Action: finished()", Finished()),
        ("Action: answer(content='7:30 AM')", Answer(content="7:30 AM")),
        ("Action: click(start_box='[100,200,300,400]')", Click(x=216, y=720)),  # box -> centre
        ("Action: click(start_box='(100,200,300,400)')", Click(x=216, y=720)),
        ("Action: click(start_box='<bbox>100 200 300 400</bbox>')", Click(x=216, y=720)),
        ("Action: click(start_box=(500, 500))", Click(x=540, y=1200)),  # unquoted
        ("Action: click('(500,500)')", Click(x=540, y=1200)),  # positional
        ("  \n ACTION :  CLICK ( start_box = '(500, 500)' )  \n", Click(x=540, y=1200)),  # case, spaces
        ("Action: hotkey(key='enter')", Type(content="\n")),
        ("Action: click(start_box='(500,500)'", Click(x=540, y=1200)),  # cut by the token limit
    ],
)
def test_every_action_form_relative(text, expected, full_obs):
    assert UITarsAgent(version="1.0").project_action(text, full_obs) == expected


def test_thought_and_action_in_prose_markers(full_obs):
    parsed = UITarsAgent(version="1.0").parse("Thought: My next action: open the menu.\nAction: press_back()", full_obs)
    assert parsed.action == PressBack() and parsed.thought == "My next action: open the menu."


def test_reflection_action_summary_format(full_obs):
    # The official parser's "Reflection: ... Action_Summary: ... Action: ..." variant.
    parsed = UITarsAgent().parse(
        "Reflection: the page did not load.\nAction_Summary: Go back and retry.\nAction: press_back()", full_obs
    )
    assert parsed.action == PressBack() and parsed.thought == "Go back and retry."


@pytest.mark.parametrize("name", ["call_user", "left_double", "right_single", "hover"])
def test_desktop_actions_are_parse_errors(name, full_obs):
    out = UITarsAgent().project_action(f"Action: {name}(start_box='(1,2)')", full_obs)
    assert isinstance(out, ParseError) and name in out.reason


def test_config_is_validated_when_built():
    with pytest.raises(ValueError):
        UITarsConfig(version="2.0")
    with pytest.raises(ValueError):
        UITarsConfig(off_screen="wrap")
    with pytest.raises(TypeError):
        UITarsAgent(UITarsConfig(), version="1.0")
    assert UITarsAgent(version="1.0").convention.kind == "relative"
    assert UITarsAgent().convention.kind == "resized_image"


def test_format_uses_the_prompt_style(full_obs):
    click = Click(x=540, y=1200)
    assert (
        UITarsAgent(version="1.0").format_action(click, full_obs)
        == "click(start_box='<|box_start|>(500,500)<|box_end|>')"
    )
    assert (
        UITarsAgent(version="1.0", prompt_style="point").format_action(click, full_obs)
        == "click(point='<point>500 500</point>')"
    )
    assert (
        UITarsAgent(version="1.0").format_response(click, full_obs, thought="Tap the middle.")
        == "Thought: Tap the middle.\nAction: click(start_box='<|box_start|>(500,500)<|box_end|>')"
    )


def test_history_restores_box_tokens_like_add_box_token(full_obs, make_transition):
    # A decoder that skips special tokens drops <|box_start|>/<|box_end|> (README_deploy.md's output);
    # UI-TARS's add_box_token() puts them back before the step goes into the history.
    agent = UITarsAgent()
    past = make_transition(
        agent, 0, text="Thought: Tap it.\nAction: click(start_box='(177,549)')", width=1080, height=2400
    )
    texts = [m.text for m in agent.build_context(full_obs, [past]).messages if m.role == "assistant"]
    assert texts == ["Thought: Tap it.\nAction: click(start_box='<|box_start|>(177,549)<|box_end|>')"]
