"""Coordinate conventions: smart_resize values and device -> model -> device round trips."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from darwin.agents.coords import (
    QWEN_MAX_PIXELS,
    UITARS_MIN_PIXELS,
    CoordinateConvention,
    DeviceCoordinates,
    RelativeCoordinates,
    ResizedImageCoordinates,
    smart_resize,
    visual_tokens,
)


@pytest.mark.parametrize(
    ("hw", "kwargs", "expected"),
    [
        ((1080, 1920), {"min_pixels": UITARS_MIN_PIXELS}, (1092, 1932)),  # README_coordinates.md
        ((2400, 1080), {}, (2408, 1092)),  # Qwen2.5-VL cookbook: "The screen's resolution is 1092x2408"
        ((1280, 720), {}, (1288, 728)),  # cookbook Chinese example: 728x1288
        ((560, 252), {}, (560, 252)),  # darwin's agent resolution is already a multiple of 28
        ((3120, 1440), {"max_pixels": 1280 * 28 * 28}, (1456, 672)),  # max_pixels: floor to 28s
        ((10, 10), {"min_pixels": UITARS_MIN_PIXELS}, (280, 280)),  # min_pixels grows
    ],
)
def test_smart_resize_known_values(hw, kwargs, expected):
    h, w = smart_resize(*hw, **kwargs)
    assert (h, w) == expected
    assert h % 28 == 0 and w % 28 == 0


def test_smart_resize_rejects_bad_images():
    with pytest.raises(ValueError, match="aspect ratio"):
        smart_resize(10, 5000)
    with pytest.raises(ValueError, match="positive"):
        smart_resize(0, 100)


@given(h=st.integers(28, 5000), w=st.integers(28, 5000))
@settings(max_examples=200, deadline=None)
def test_smart_resize_invariants(h, w):
    if max(h, w) / min(h, w) > 200:
        return
    rh, rw = smart_resize(h, w, min_pixels=UITARS_MIN_PIXELS, max_pixels=QWEN_MAX_PIXELS)
    assert rh % 28 == 0 and rw % 28 == 0
    assert UITARS_MIN_PIXELS <= rh * rw <= QWEN_MAX_PIXELS


def test_visual_tokens_of_the_embedded_default():
    assert visual_tokens(560, 252) == 20 * 9 + 2


CONVENTIONS = [
    RelativeCoordinates(scale=1000),  # UI-TARS-1.0, Qwen3-VL
    ResizedImageCoordinates(min_pixels=UITARS_MIN_PIXELS),  # UI-TARS-1.5
    ResizedImageCoordinates(),  # Qwen2.5-VL
    DeviceCoordinates(),
    RelativeCoordinates(scale=100, center=True),  # TinyAgent
]


def _round_trip_error(conv, x, y, image, device):
    m = conv.to_model((x, y), image, device)
    fx, fy = conv.to_device(m, image, device)
    return abs(math.floor(fx + 0.5) - x), abs(math.floor(fy + 0.5) - y), conv.frame(image, device)


@pytest.mark.parametrize("conv", CONVENTIONS, ids=lambda c: f"{c.kind}")
@given(data=st.data())
@settings(max_examples=150, deadline=None)
def test_round_trip_within_half_a_model_unit(conv, data):
    dw = data.draw(st.integers(100, 3000), label="device width")
    dh = data.draw(st.integers(100, 3000), label="device height")
    scale = data.draw(st.sampled_from([1.0, 0.5, 0.25, 0.1]), label="screenshot scale")
    image = (max(28, round(dw * scale)), max(28, round(dh * scale)))
    if max(image) / min(image) > 200:
        return
    x = data.draw(st.integers(0, dw - 1), label="x")
    y = data.draw(st.integers(0, dh - 1), label="y")
    ex, ey, (fw, fh) = _round_trip_error(conv, x, y, image, (dw, dh))
    # |error| <= half a model unit in device pixels (+ rounding); one pixel when the frame is finer
    assert ex <= 0.5 * dw / fw + 0.5 + 1e-9
    assert ey <= 0.5 * dh / fh + 0.5 + 1e-9
    if fw >= dw:
        assert ex <= 1
    if fh >= dh:
        assert ey <= 1


@pytest.mark.parametrize(
    ("conv", "image"),
    [
        (ResizedImageCoordinates(min_pixels=UITARS_MIN_PIXELS), (1080, 2400)),  # UI-TARS-1.5 on full-res screenshots
        (ResizedImageCoordinates(), (1080, 2400)),  # Qwen2.5-VL
        (DeviceCoordinates(), (252, 560)),
    ],
    ids=["uitars-1.5", "qwen2.5-vl", "device"],
)
def test_round_trip_within_one_pixel_on_a_phone(conv, image):
    device = (1080, 2400)
    for x in range(0, 1080, 7):
        for y in range(0, 2400, 53):
            ex, ey, _ = _round_trip_error(conv, x, y, image, device)
            assert ex <= 1 and ey <= 1


def test_relative_1000_is_within_one_pixel_along_the_short_side():
    # 1000 units over 1080 px: finer than 1.08 px/unit -> within one pixel horizontally;
    # 2400 px tall -> 2.4 px/unit, within half a unit (1.7 px) vertically.
    conv = RelativeCoordinates(scale=1000)
    worst = (0, 0)
    for x in range(0, 1080, 3):
        for y in range(0, 2400, 7):
            ex, ey, _ = _round_trip_error(conv, x, y, (252, 560), (1080, 2400))
            worst = (max(worst[0], ex), max(worst[1], ey))
    assert worst[0] <= 1 and worst[1] <= 2


def test_conventions_validate_and_round_trip_through_json():
    adapter = TypeAdapter(CoordinateConvention)
    for conv in CONVENTIONS:
        assert adapter.validate_json(conv.model_dump_json()) == conv
    with pytest.raises(ValidationError):
        ResizedImageCoordinates(min_pixels=10_000, max_pixels=1_000)
    with pytest.raises(ValidationError):
        RelativeCoordinates(scale=1)


def test_prompt_resolution():
    assert RelativeCoordinates().prompt_resolution((252, 560), (1080, 2400)) == (999, 999)
    assert ResizedImageCoordinates().prompt_resolution((1080, 2400), (1080, 2400)) == (1092, 2408)
