"""Marks drawn on screenshots land at the action's pixels, scaled from device to image size."""

from __future__ import annotations

import numpy as np
import pytest

from darwin.actions import Click, Drag, LongPress, OpenApp, Scroll, Type
from darwin.verifiers.marks import MARK_COLORS, draw_action, draw_actions, scale_point, scroll_path

DEVICE = (1080, 2400)
GREY = 128


def screen(w: int = 252, h: int = 560) -> np.ndarray:
    return np.full((h, w, 3), GREY, np.uint8)


def colour(image: np.ndarray, x: int, y: int) -> tuple[int, int, int]:
    return tuple(int(c) for c in image[y, x])


@pytest.mark.parametrize("size", [(252, 560), (126, 280), (1080, 2400)])
def test_a_tap_is_a_red_dot_at_the_scaled_point(size):
    shot = screen(*size)
    marked = draw_action(shot, Click(x=810, y=600), DEVICE)
    x, y = scale_point(810, 600, DEVICE, size)
    assert (x, y) == (int(810 * size[0] / 1080), int(600 * size[1] / 2400))
    assert colour(marked, x, y) == MARK_COLORS["click"]
    assert colour(marked, x + 1, y) == MARK_COLORS["click"]
    # far from the tap the screen is untouched, and the input array is never changed
    assert colour(marked, size[0] - 1, size[1] - 1) == (GREY,) * 3
    assert int(shot.max()) == GREY and int(shot.min()) == GREY


def test_a_long_press_is_magenta_with_a_ring():
    marked = draw_action(screen(), LongPress(x=540, y=1200), DEVICE)
    x, y = scale_point(540, 1200, DEVICE, (252, 560))
    assert colour(marked, x, y) == MARK_COLORS["long_press"]
    ring = marked[y, x : x + 40]
    assert any(tuple(p) == MARK_COLORS["long_press"] for p in ring[12:])  # the ring, beyond the dot
    assert any(tuple(p) == (GREY,) * 3 for p in ring[8:14])  # a gap between dot and ring


@pytest.mark.parametrize("direction", ["down", "up", "left", "right"])
def test_a_scroll_is_a_blue_arrow_along_the_finger(direction):
    action = Scroll(x=540, y=1200, direction=direction)
    (x1, y1), (x2, y2) = scroll_path(action, DEVICE)
    # content moves the named way, so the finger moves the other way
    moved = {"down": y2 < y1, "up": y2 > y1, "left": x2 > x1, "right": x2 < x1}[direction]
    assert moved
    marked = draw_action(screen(), action, DEVICE)
    start = scale_point(x1, y1, DEVICE, (252, 560))
    mid = scale_point((x1 + x2) // 2, (y1 + y2) // 2, DEVICE, (252, 560))
    end = scale_point(x2, y2, DEVICE, (252, 560))
    for point in (start, mid, end):
        assert colour(marked, *point) == MARK_COLORS["scroll"], point


def test_a_drag_is_a_green_arrow_from_start_to_end():
    action = Drag(x1=100, y1=300, x2=900, y2=2000)
    marked = draw_action(screen(), action, DEVICE)
    for x, y in ((100, 300), (500, 1150), (900, 2000)):
        assert colour(marked, *scale_point(x, y, DEVICE, (252, 560))) == MARK_COLORS["drag"]


def test_typed_text_is_a_banner_across_the_bottom():
    marked = draw_action(screen(), Type(content="milk and eggs"), DEVICE)
    assert colour(marked, 0, 559) == MARK_COLORS["type_background"]
    band = marked[520:560]
    yellow = np.all(band == np.array(MARK_COLORS["type_text"], np.uint8), axis=-1)
    assert yellow.sum() > 20  # the text is written
    assert colour(marked, 0, 0) == (GREY,) * 3


def test_long_text_is_shortened_to_fit_and_chinese_text_draws():
    draw_action(screen(), Type(content="x" * 500), DEVICE)
    draw_action(screen(), Type(content="milk\n"), DEVICE)  # a newline submits; it is drawn as \n
    marked = draw_action(screen(), Type(content="牛奶"), DEVICE)
    assert colour(marked, 0, 559) == MARK_COLORS["type_background"]


def test_actions_without_a_place_leave_the_screen_as_it_was():
    shot = screen()
    assert np.array_equal(draw_action(shot, OpenApp(app="Clock"), DEVICE), shot)
    assert np.array_equal(draw_action(shot, None, DEVICE), shot)


def test_several_actions_on_one_screen():
    marked = draw_actions(screen(), [Click(x=100, y=100), Click(x=1000, y=2300)], DEVICE)
    assert colour(marked, *scale_point(100, 100, DEVICE, (252, 560))) == MARK_COLORS["click"]
    assert colour(marked, *scale_point(1000, 2300, DEVICE, (252, 560))) == MARK_COLORS["click"]


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="uint8"):
        draw_action(np.zeros((4, 4), np.uint8), Click(x=1, y=1), DEVICE)
    with pytest.raises(ValueError, match="device_size"):
        scale_point(1, 1, (0, 10), (4, 4))
