"""The ``elements`` reader: the phone's accessibility tree (Android's view hierarchy, as
``uiautomator dump`` lists it; SimPhone's widgets) as marks: exact text and bounds, and whether
each element is clickable. Fast and exact where a phone can list its elements (SimPhones in
process or served over ADB, ADB devices); a phone that cannot stops the run at its first screen.

    >>> import numpy as np
    >>> from darwin.envs.sim.env import SimPhoneEnv
    >>> from darwin.readers import ElementsReader, read_marks_sync
    >>> env = SimPhoneEnv(seed=0)
    >>> marks = read_marks_sync(ElementsReader(), env.screenshot((252, 560)), env.device_size, env)
    >>> any(m.text == "Clock" and m.clickable for m in marks)
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from darwin.readers.base import Reader, ReaderUnavailable, clean_text, order_marks
from darwin.types import Mark

if TYPE_CHECKING:
    from darwin.envs.base import PhoneEnv


class ElementsReader(Reader):
    """Every element with a text (or, failing that, a content description) that lies on the
    screen, in reading order. ``clickable_only`` keeps only elements that react to a tap;
    ``max_marks`` bounds the list."""

    needs_phone = True

    def __init__(self, clickable_only: bool = False, max_marks: int = 48) -> None:
        if not 1 <= max_marks <= 512:
            raise ValueError(f"max_marks={max_marks} must lie in [1, 512]")
        self.clickable_only = clickable_only
        self.max_marks = max_marks

    @property
    def cache_key(self) -> str:
        return f"elements(clickable_only={self.clickable_only},max_marks={self.max_marks})"

    def read(
        self, screenshot: np.ndarray, device_size: tuple[int, int], env: PhoneEnv | None = None
    ) -> tuple[Mark, ...]:
        if env is None:
            raise ReaderUnavailable(
                "the elements reader reads the phone's accessibility tree and was given no phone: "
                "read stored screenshots with agent.reader='ocr' instead"
            )
        elements = env.screen_elements()
        if elements is None:
            raise ReaderUnavailable(
                f"{env.name} ({type(env).__name__}) cannot list its screen's elements (no accessibility tree): "
                "use agent.reader='ocr', which reads the screenshot"
            )
        dw, dh = device_size
        marks = []
        for e in elements:
            if self.clickable_only and not e.clickable:
                continue
            text = clean_text(e.text) or clean_text(e.description)
            x0, y0, x1, y1 = e.bounds
            x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, dw), min(y1, dh)
            if not text or x1 <= x0 or y1 <= y0:
                continue
            marks.append(Mark(text=text, box=(x0, y0, x1, y1), clickable=e.clickable))
        return order_marks(marks, self.max_marks)


__all__ = ["ElementsReader"]
