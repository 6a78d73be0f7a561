import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from darwin.actions import (
    ACTION_TYPES,
    MAX_TEXT_LENGTH,
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
    is_terminal,
    parse_action,
)

pixel = st.integers(min_value=0, max_value=5000)
text = st.text(max_size=200)
any_action = st.one_of(
    st.builds(Click, x=pixel, y=pixel),
    st.builds(LongPress, x=pixel, y=pixel),
    st.builds(Type, content=text),
    st.builds(Scroll, x=pixel, y=pixel, direction=st.sampled_from(list(Direction))),
    st.builds(Drag, x1=pixel, y1=pixel, x2=pixel, y2=pixel),
    st.builds(OpenApp, app=st.text(min_size=1, max_size=50)),
    st.just(PressHome()),
    st.just(PressBack()),
    st.just(Wait()),
    st.builds(Finished, content=text),
    st.builds(Answer, content=text),
)


@given(any_action)
def test_every_action_round_trips_through_json(action):
    assert parse_action(action.model_dump_json()) == action
    assert parse_action(action.model_dump(mode="json")) == action


def test_there_are_exactly_eleven_actions_with_distinct_tags():
    tags = {cls.model_fields["type"].default for cls in ACTION_TYPES}
    assert len(ACTION_TYPES) == 11 and len(tags) == 11


@pytest.mark.parametrize(
    "bad",
    [{"type": "click", "x": -1, "y": 5}, {"type": "click", "x": 1.5, "y": 5}, {"type": "click", "x": "3", "y": 5}],
)
def test_coordinates_must_be_non_negative_integers(bad):
    with pytest.raises(ValidationError):
        parse_action(bad)


def test_direction_must_be_one_of_four():
    with pytest.raises(ValidationError):
        parse_action({"type": "scroll", "x": 1, "y": 1, "direction": "diagonal"})
    assert parse_action({"type": "scroll", "x": 1, "y": 1, "direction": "up"}).direction is Direction.UP


def test_text_length_is_bounded():
    Type(content="a" * MAX_TEXT_LENGTH)
    with pytest.raises(ValidationError):
        Type(content="a" * (MAX_TEXT_LENGTH + 1))


def test_unknown_type_and_extra_fields_are_rejected():
    with pytest.raises(ValidationError):
        parse_action({"type": "teleport"})
    with pytest.raises(ValidationError):
        parse_action({"type": "wait", "seconds": 3})


def test_terminal_actions():
    assert is_terminal(Finished()) and is_terminal(Answer(content="42"))
    assert not is_terminal(Click(x=1, y=1))
