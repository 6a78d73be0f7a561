"""Android's touch slop: how far a finger may move and still be pressing, in pixels at a
screen density. Shared by the swipes :class:`~darwin.envs.adb.AdbPhoneEnv` sends
(:mod:`darwin.envs.adb_gestures`), the SimPhone device that reads them back
(:mod:`darwin.envs.sim.device`) and the action guard; it imports nothing of darwin, so each of
them can use it without a circle.

    >>> touch_slop_px(420)  # 8 dp at 420 dpi
    21
"""

from __future__ import annotations

import math

__all__ = ["BASELINE_DPI", "TOUCH_SLOP_DP", "UNKNOWN_DENSITY_DPI", "touch_slop_px"]

TOUCH_SLOP_DP = 8
"""Android's touch slop in density-independent pixels (``ViewConfiguration``'s ``TOUCH_SLOP``,
``config_viewConfigurationTouchSlop``): a finger that moves less than this is still pressing."""

BASELINE_DPI = 160
"""The density at which one dp is one pixel (Android's ``DisplayMetrics.DENSITY_DEFAULT``)."""

UNKNOWN_DENSITY_DPI = 640
"""The density assumed for a phone that does not report one: the highest Android bucket
(xxxhdpi), so the slop assumed is never smaller than the phone's own."""


def touch_slop_px(density_dpi: int) -> int:
    """The touch slop in device pixels at ``density_dpi`` (rounded up: never under the phone's)."""
    if density_dpi <= 0:
        raise ValueError(f"a screen density must be positive, got {density_dpi} dpi")
    return math.ceil(TOUCH_SLOP_DP * density_dpi / BASELINE_DPI)
