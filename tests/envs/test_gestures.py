"""Swipes stay swipes: a long press, scroll or drag sent over ADB never moves less than Android's
touch slop (where a phone takes it as a tap), on any screen and from any point, and has the same
effect on a SimPhone served over the real adb server as in process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from darwin.actions import Action, Click, Direction, Drag, LongPress, OpenApp, Scroll, Type
from darwin.envs.adb import AdbPhoneEnv
from darwin.envs.adb_config import AdbEnvConfig
from darwin.envs.adb_gestures import GestureRefused, Swipe, swipe_for
from darwin.envs.adb_touch import TOUCH_SLOP_DP, UNKNOWN_DENSITY_DPI, touch_slop_px
from darwin.envs.providers import SimFarm
from darwin.envs.sim.device import DENSITY_DPI, TOUCH_SLOP_PX, swipe_action
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.envs.sim.phone import SimPhone

pytestmark = pytest.mark.timeout(120)

CONFIG = AdbEnvConfig()
SCREENS = [((1080, 2400), 420), ((720, 1280), 320), ((2400, 1080), 560), ((480, 800), 240)]


def test_the_touch_slop_is_8_dp_at_the_phones_density() -> None:
    assert TOUCH_SLOP_DP == 8
    assert [touch_slop_px(d) for d in (160, 240, 320, 420, 480, 560, 640)] == [8, 12, 16, 21, 24, 28, 32]
    assert TOUCH_SLOP_PX == touch_slop_px(DENSITY_DPI) == 21  # what a served SimPhone takes as a press
    assert touch_slop_px(UNKNOWN_DENSITY_DPI) >= max(touch_slop_px(d) for _, d in SCREENS)
    with pytest.raises(ValueError, match="must be positive"):
        touch_slop_px(0)


@given(
    screen=st.sampled_from(SCREENS),
    x=st.integers(0, 3000),
    y=st.integers(0, 3000),
    direction=st.sampled_from(list(Direction)),
)
def test_a_scroll_from_any_point_keeps_its_full_length_on_the_screen(
    screen: tuple[tuple[int, int], int], x: int, y: int, direction: Direction
) -> None:
    (w, h), dpi = screen
    swipe = swipe_for(Scroll(x=x, y=y, direction=direction), (w, h), dpi, CONFIG)
    vertical = direction in (Direction.UP, Direction.DOWN)
    full = round(CONFIG.scroll_distance * (h if vertical else w))
    assert swipe.length == full >= touch_slop_px(dpi)
    assert all(0 <= v < w for v in (swipe.x1, swipe.x2)) and all(0 <= v < h for v in (swipe.y1, swipe.y2))
    # The finger moves against the content, along one axis only; the other coordinate is the action's.
    if vertical:
        assert swipe.x1 == swipe.x2 == min(x, w - 1)
        assert (swipe.y2 < swipe.y1) == (direction == Direction.DOWN)
    else:
        assert swipe.y1 == swipe.y2 == min(y, h - 1)
        assert (swipe.x2 < swipe.x1) == (direction == Direction.RIGHT)
    # The start moves only where the full swipe would leave the screen.
    start, extent = (y, h) if vertical else (x, w)
    end = start + (-full if direction in (Direction.DOWN, Direction.RIGHT) else full)
    if start < extent and 0 <= end < extent:
        assert (swipe.y1 if vertical else swipe.x1) == start
    assert swipe_action(swipe.x1, swipe.y1, swipe.x2, swipe.y2, swipe.duration_ms) == Scroll(
        x=swipe.x1, y=swipe.y1, direction=direction
    )  # a served SimPhone reads it back as the scroll it is


def test_the_scroll_that_became_a_tap_is_a_scroll() -> None:
    """The issue's case: a left scroll at the top-right icon was sent as a 19 px swipe."""
    swipe = swipe_for(Scroll(x=1060, y=184, direction=Direction.LEFT), (1080, 2400), 420, CONFIG)
    assert swipe == Swipe(647, 184, 1079, 184, CONFIG.scroll_ms)
    assert swipe.argv() == ["input", "swipe", "647", "184", "1079", "184", "300"]


@pytest.mark.parametrize(
    ("drag", "sent"),
    [
        (Drag(x1=540, y1=1800, x2=540, y2=900), Swipe(540, 1800, 540, 900, 1000)),
        (Drag(x1=1060, y1=184, x2=1060, y2=5000), Swipe(1060, 184, 1060, 2399, 1000)),  # the end kept on screen
        (Drag(x1=1060, y1=184, x2=1300, y2=184), None),  # 19 px once on the screen: a press
        (Drag(x1=100, y1=100, x2=110, y2=115), None),
        (Drag(x1=100, y1=100, x2=100, y2=100), None),
    ],
)
def test_a_drag_under_the_touch_slop_is_refused(drag: Drag, sent: Swipe | None) -> None:
    if sent is None:
        with pytest.raises(GestureRefused, match="under the touch slop"):
            swipe_for(drag, (1080, 2400), 420, CONFIG)
    else:
        assert swipe_for(drag, (1080, 2400), 420, CONFIG) == sent


def test_a_scroll_distance_under_the_slop_is_refused_and_a_long_press_stays_put() -> None:
    with pytest.raises(GestureRefused, match="raise AdbEnvConfig.scroll_distance"):
        swipe_for(Scroll(x=5, y=5, direction=Direction.LEFT), (1080, 2400), 420, AdbEnvConfig(scroll_distance=0.01))
    assert swipe_for(LongPress(x=5000, y=10), (1080, 2400), 420, CONFIG) == Swipe(1079, 10, 1079, 10, 1000)
    with pytest.raises(TypeError, match="not a swipe"):
        swipe_for(Click(x=1, y=1), (1080, 2400), 420, CONFIG)


# ------------------------------------------------------------------- over the real adb server

EDGE_POINTS = [(0, 0), (5, 184), (1060, 184), (1079, 2399), (540, 1200), (1075, 2290), (3000, 3000)]
EDGE_GESTURES: list[Action] = [
    *(Scroll(x=x, y=y, direction=d) for x, y in EDGE_POINTS for d in Direction),
    Drag(x1=1060, y1=184, x2=1079, y2=184),  # 19 px: not sent
    Drag(x1=1060, y1=184, x2=1060, y2=5000),
    Drag(x1=0, y1=2399, x2=1079, y2=0),
]
CALM = PerturbationConfig(enabled=False)


def _compose_a_post(phone: SimPhone) -> None:
    """X's compose screen with text in it: the Post icon sits in the top-right corner."""
    phone.__init__(seed=3, perturbation=CALM)  # a calm phone: no pop-up in the way
    phone.execute(OpenApp(app="X"))
    for widget in ("x.compose", "x.compose_text"):
        found = phone.layout().find(widget)
        assert found is not None, widget
        phone.execute(Click(x=found.center[0], y=found.center[1]))
    phone.execute(Type(content="not for posting"))
    post = phone.layout().find("x.post_button")
    assert post is not None and post.contains(1060, 184)


@pytest.fixture(scope="module")
def served(adb_server_port: int) -> Iterator[tuple[SimFarm, AdbPhoneEnv]]:
    fast = {"command_timeout_s": 3.0, "screenshot_timeout_s": 5.0, "connect_timeout_s": 3.0}
    with SimFarm(1, seed=3, config=AdbEnvConfig.for_sim(adb_port=adb_server_port, **fast)) as farm:
        env = farm.acquire()
        try:
            yield farm, env
        finally:
            farm.release(env)


def test_every_swipe_sent_over_adb_moves_at_least_the_touch_slop(served: tuple[SimFarm, AdbPhoneEnv]) -> None:
    farm, env = served
    device, server = farm.backends[0], farm.servers[0]
    assert env.density_dpi == DENSITY_DPI and env.touch_slop_px == TOUCH_SLOP_PX  # read from `dumpsys display`
    with device.lock:
        _compose_a_post(device.phone)
    start = len(server.command_log)
    for gesture in EDGE_GESTURES:
        env.execute(gesture)
    swipes = [argv for r in server.command_log[start:] for argv in r.executed if argv[:2] == ("input", "swipe")]
    assert len(swipes) == len(EDGE_GESTURES) - 1  # the 19 px drag was not sent
    for argv in swipes:
        x1, y1, x2, y2 = (int(v) for v in argv[2:6])
        assert max(abs(x2 - x1), abs(y2 - y1)) >= env.touch_slop_px, argv
        assert all(0 <= v < 1080 for v in (x1, x2)) and all(0 <= v < 2400 for v in (y1, y2)), argv
    assert env.last_error is not None and "under the touch slop" in env.last_error
    with device.lock:  # no swipe pressed the Post icon (before: a 19 px swipe there posted)
        assert device.phone.snapshot()["apps"]["x"]["data"]["posts"] == []
        assert device.phone.foreground == "x" and device.phone.layout().find("x.post_button") is not None


def test_the_same_swipes_never_press_anything_in_process() -> None:
    env = SimPhoneEnv(seed=3, perturbation=CALM)
    _compose_a_post(env.phone)
    for gesture in EDGE_GESTURES:
        env.execute(gesture)
    assert env.phone.snapshot()["apps"]["x"]["data"]["posts"] == []
    assert env.phone.layout().find("x.post_button") is not None
