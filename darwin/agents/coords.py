"""Coordinate conventions: how a model writes a screen position, and the way back to device pixels.

Actions carry *device pixels*; models write coordinates in their own frame:

================================  ===========================================================
convention                        model coordinate ``m`` for device pixel ``x`` (width ``W``)
================================  ===========================================================
:class:`RelativeCoordinates`      ``m = x * scale / W`` (UI-TARS-1.0 and Qwen3-VL: scale 1000)
:class:`ResizedImageCoordinates`  ``m = x * w' / W`` where ``(h', w') = smart_resize(h, w)`` of
                                  the screenshot the model sees (UI-TARS-1.5, Qwen2.5-VL)
:class:`DeviceCoordinates`        ``m = x``
================================  ===========================================================

Every convention is a *frame* ``(fw, fh)``; conversion is linear in both directions, so
``to_device(to_model(p)) == p`` to within half a model unit (one pixel whenever the frame
is at least as fine as the device)::

    >>> from darwin.agents.coords import ResizedImageCoordinates, smart_resize
    >>> smart_resize(2400, 1080, min_pixels=3136, max_pixels=12845056)   # Qwen2.5-VL defaults
    (2408, 1092)
    >>> conv = ResizedImageCoordinates(min_pixels=3136, max_pixels=12845056)
    >>> conv.to_model((540, 1200), image_size=(1080, 2400), device_size=(1080, 2400))
    (546, 1204)
    >>> conv.to_device((546, 1204), image_size=(1080, 2400), device_size=(1080, 2400))
    (540.0, 1200.0)

Sizes are ``(width, height)`` throughout, as in :attr:`darwin.types.Observation.device_size`;
only :func:`smart_resize` keeps Qwen's ``(height, width)`` argument order.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

IMAGE_FACTOR = 28
"""Pixels per merged visual token side in Qwen2-VL / Qwen2.5-VL (patch 14 x merge 2)."""

QWEN_MIN_PIXELS = 56 * 56
"""Qwen2-VL / Qwen2.5-VL image processor default ``min_pixels``."""

QWEN_MAX_PIXELS = 28 * 28 * 16384
"""Qwen2.5-VL / UI-TARS default ``max_pixels`` (12,845,056)."""

UITARS_MIN_PIXELS = 100 * 28 * 28
"""``MIN_PIXELS`` of UI-TARS's ``action_parser.py`` (78,400)."""

MAX_RATIO = 200
"""Largest aspect ratio ``smart_resize`` accepts (as in qwen-vl-utils)."""

Size = tuple[int, int]
"""``(width, height)`` in pixels."""


def _round_by(n: float, factor: int) -> int:
    return round(n / factor) * factor


def _ceil_by(n: float, factor: int) -> int:
    return math.ceil(n / factor) * factor


def _floor_by(n: float, factor: int) -> int:
    return math.floor(n / factor) * factor


def smart_resize(
    height: int,
    width: int,
    factor: int = IMAGE_FACTOR,
    min_pixels: int = QWEN_MIN_PIXELS,
    max_pixels: int = QWEN_MAX_PIXELS,
) -> tuple[int, int]:
    """Qwen2-VL / Qwen2.5-VL image resizing: ``(height, width)`` of the image the model sees.

    Both sides become multiples of ``factor``, the area lands in ``[min_pixels,
    max_pixels]`` and the aspect ratio is kept as closely as possible. Same algorithm as
    qwen-vl-utils and UI-TARS's ``codes/ui_tars/action_parser.py``. Raises ``ValueError``
    for empty images or an aspect ratio above 200.

    >>> smart_resize(1080, 1920, min_pixels=100 * 28 * 28)   # UI-TARS README_coordinates.md
    (1092, 1932)
    """
    if height <= 0 or width <= 0:
        raise ValueError(f"image size must be positive, got height={height} width={width}")
    if max(height, width) / min(height, width) > MAX_RATIO:
        raise ValueError(
            f"absolute aspect ratio must be smaller than {MAX_RATIO}, got {max(height, width) / min(height, width)}"
        )
    h_bar = max(factor, _round_by(height, factor))
    w_bar = max(factor, _round_by(width, factor))
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, _floor_by(height / beta, factor))
        w_bar = max(factor, _floor_by(width / beta, factor))
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = _ceil_by(height * beta, factor)
        w_bar = _ceil_by(width * beta, factor)
    return h_bar, w_bar


def visual_tokens(
    height: int,
    width: int,
    factor: int = IMAGE_FACTOR,
    min_pixels: int = QWEN_MIN_PIXELS,
    max_pixels: int = QWEN_MAX_PIXELS,
) -> int:
    """Prompt tokens one screenshot costs in a Qwen2-VL-family model (``<|image_pad|>`` x n
    plus ``<|vision_start|>`` and ``<|vision_end|>``).

    >>> visual_tokens(560, 252)    # the embedded default's 252x560 screenshots
    182
    """
    h, w = smart_resize(height, width, factor, min_pixels, max_pixels)
    return (h // factor) * (w // factor) + 2


class _Convention(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def frame(self, image_size: Size, device_size: Size) -> Size:
        """The model's coordinate frame ``(fw, fh)`` for a screenshot and a device."""
        raise NotImplementedError

    def prompt_resolution(self, image_size: Size, device_size: Size) -> Size:
        """The screen size to announce in a prompt (largest coordinate + 1 for grids)."""
        return self.frame(image_size, device_size)

    def to_device(self, point: tuple[float, float], image_size: Size, device_size: Size) -> tuple[float, float]:
        """Model coordinates -> (unrounded) device pixels. Raises ``ValueError`` on a bad frame."""
        fw, fh = self.frame(image_size, device_size)
        dw, dh = device_size
        return point[0] * dw / fw, point[1] * dh / fh

    def to_model(self, point: tuple[int, int], image_size: Size, device_size: Size) -> tuple[int, int]:
        """Device pixels -> integer model coordinates (what a model should write)."""
        fw, fh = self.frame(image_size, device_size)
        dw, dh = device_size
        return _half_up(point[0] * fw / dw), _half_up(point[1] * fh / dh)


def _half_up(v: float) -> int:
    return math.floor(v + 0.5)


class RelativeCoordinates(_Convention):
    """Coordinates on a ``scale x scale`` grid over the screen, whatever its size.

    UI-TARS-1.0 and Qwen3-VL use ``scale=1000`` (values 0..999; the Qwen3-VL mobile
    cookbook announces "The screen's resolution is 999x999"). With ``center=True`` an
    integer ``m`` maps to the centre of its grid cell (``(m + 0.5) * W / scale``) and a
    pixel to the cell it lies in, which halves the worst-case error of coarse grids
    (darwin's tiny format).
    """

    kind: Literal["relative"] = "relative"
    scale: int = Field(1000, ge=2, le=1_000_000, description="grid size along each axis")
    center: bool = Field(False, description="map integers to grid-cell centres (tiny format) instead of edges")

    def frame(self, image_size: Size, device_size: Size) -> Size:
        return self.scale, self.scale

    def prompt_resolution(self, image_size: Size, device_size: Size) -> Size:
        return self.scale - 1, self.scale - 1

    def to_device(self, point: tuple[float, float], image_size: Size, device_size: Size) -> tuple[float, float]:
        if not self.center:
            return super().to_device(point, image_size, device_size)
        dw, dh = device_size
        return (point[0] + 0.5) * dw / self.scale, (point[1] + 0.5) * dh / self.scale

    def to_model(self, point: tuple[int, int], image_size: Size, device_size: Size) -> tuple[int, int]:
        if not self.center:
            return super().to_model(point, image_size, device_size)
        dw, dh = device_size
        s = self.scale
        return min(s - 1, max(0, math.floor(point[0] * s / dw))), min(s - 1, max(0, math.floor(point[1] * s / dh)))


class ResizedImageCoordinates(_Convention):
    """Absolute pixels on the screenshot after Qwen's :func:`smart_resize` (UI-TARS-1.5, Qwen2.5-VL).

    ``min_pixels``/``max_pixels`` must equal the image processor's (the model saw an image
    of exactly that size). UI-TARS's parser uses ``min_pixels=100*28*28``; Qwen2.5-VL's
    processor defaults to ``56*56``; both cap at ``16384*28*28``.
    """

    kind: Literal["resized_image"] = "resized_image"
    factor: int = Field(IMAGE_FACTOR, ge=1, description="patch_size * merge_size (28 for Qwen2/2.5-VL)")
    min_pixels: int = Field(QWEN_MIN_PIXELS, ge=1, description="image processor min_pixels")
    max_pixels: int = Field(QWEN_MAX_PIXELS, ge=1, description="image processor max_pixels")

    @model_validator(mode="after")
    def _check(self) -> ResizedImageCoordinates:
        if self.min_pixels > self.max_pixels:
            raise ValueError(f"min_pixels={self.min_pixels} exceeds max_pixels={self.max_pixels}: swap or fix them")
        if self.max_pixels < self.factor**2:
            raise ValueError(f"max_pixels={self.max_pixels} is below one visual token ({self.factor}**2 pixels)")
        return self

    def frame(self, image_size: Size, device_size: Size) -> Size:
        h, w = smart_resize(image_size[1], image_size[0], self.factor, self.min_pixels, self.max_pixels)
        return w, h


class DeviceCoordinates(_Convention):
    """The model writes device pixels directly."""

    kind: Literal["device"] = "device"

    def frame(self, image_size: Size, device_size: Size) -> Size:
        return device_size


CoordinateConvention = Annotated[
    RelativeCoordinates | ResizedImageCoordinates | DeviceCoordinates, Field(discriminator="kind")
]
"""Any coordinate convention, discriminated by ``kind`` (JSON round-trips in configs)."""


__all__ = [
    "IMAGE_FACTOR",
    "MAX_RATIO",
    "QWEN_MAX_PIXELS",
    "QWEN_MIN_PIXELS",
    "UITARS_MIN_PIXELS",
    "CoordinateConvention",
    "DeviceCoordinates",
    "RelativeCoordinates",
    "ResizedImageCoordinates",
    "Size",
    "smart_resize",
    "visual_tokens",
]
