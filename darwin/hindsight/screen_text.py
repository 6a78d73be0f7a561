"""The ``screen_text`` task synthesiser: goals whose strings come from what a reader saw.

An exploration that kept its screens (``explore(..., keep_screenshots=True)``) is read screen
by screen with a pixel reader (``ocr`` by default, :mod:`darwin.readers`). A text that appears
on a screen after step ``i`` and was on neither the start screen nor any earlier one becomes a
candidate: "In <app>, open the screen that shows '<text>'.", verified by the ``screen.text``
predicate on the last screen (:class:`~darwin.verifiers.screen_text.ScreenTextVerifier`
decides it from the screens, so the task works on phones without a JSON state probe), with the
explorer's first ``i + 1`` actions as its demonstration. Texts that cannot name a goal are
skipped: shorter than ``min_chars``, without a letter (clock times, counters, dates in digits),
the app's own name.

    >>> import asyncio
    >>> from darwin.envs.sim.env import SimPhoneEnv
    >>> from darwin.hindsight.exploration import explore
    >>> from darwin.hindsight.screen_text import ScreenTextSynthesizer
    >>> run = asyncio.run(explore(SimPhoneEnv(seed=0), "Settings", steps=6, seed=1, keep_screenshots=True))
    >>> found = ScreenTextSynthesizer(reader="elements").synthesize(run).kept
    Traceback (most recent call last):
    ...
    ValueError: the screen_text synthesizer reads stored screenshots; reader 'elements' cannot (it reads a phone): use reader='ocr'
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from darwin.components import ComponentSpec, build_component
from darwin.envs.sim.ui import HEIGHT, WIDTH
from darwin.hindsight.base import DifficultyBand, SynthesisedTask, TaskSynthesizer
from darwin.hindsight.exploration import Exploration, ExplorationError
from darwin.png import decode_png
from darwin.predicates import SCREEN_TEXT, norm
from darwin.readers.base import Reader, check_screenshot
from darwin.types import Task, VerifierSpec

__all__ = ["ScreenTextSynthesizer"]

PHONE_SIZE = (WIDTH, HEIGHT)
"""Device size assumed for an exploration that did not record one (SimPhone's; marks' boxes are unused here)."""


class ScreenTextSynthesizer(TaskSynthesizer):
    """Tasks "open the screen that shows X" for each text X an exploration's screens first showed.

    Args:
        reader: the pixel reader of the stored screens (a name or a spec; default ``ocr``).
        min_chars: texts shorter than this never name a goal.
        per_step: at most this many new texts of one screen become tasks (reading order).
        min_steps / max_steps: the difficulty band kept (explorer actions to the screen).
    """

    def __init__(
        self,
        reader: str | Mapping[str, Any] | ComponentSpec = "ocr",
        min_chars: int = 3,
        per_step: int = 2,
        min_steps: int = 1,
        max_steps: int | None = None,
    ) -> None:
        spec = ComponentSpec.model_validate(reader)  # a name, a dict or a spec
        built = build_component("reader", spec)
        assert isinstance(built, Reader)  # checked by build_component
        if built.needs_phone or not built.reads:
            raise ValueError(
                f"the screen_text synthesizer reads stored screenshots; reader {spec.name!r} cannot "
                "(it reads a phone): use reader='ocr'"
            )
        if min_chars < 1 or per_step < 1:
            raise ValueError(f"min_chars ({min_chars}) and per_step ({per_step}) must be at least 1")
        self.reader = built
        self.min_chars = min_chars
        self.per_step = per_step
        self.band = DifficultyBand(min_steps=min_steps, max_steps=max_steps)

    def _texts(self, png: bytes, size: tuple[int, int]) -> list[str]:
        # read here, not through the async cache: synthesis may run inside a run's event loop,
        # and an exploration's screens are read once
        screenshot = decode_png(png)
        check_screenshot(screenshot, size)
        return [m.text for m in self.reader.read(screenshot, size)]

    def _names_a_goal(self, text: str, app: str) -> bool:
        return len(text) >= self.min_chars and any(c.isalpha() for c in text) and norm(text) != norm(app)

    def candidates(self, exploration: Exploration) -> list[SynthesisedTask]:
        if exploration.start_screenshot is None or any(s.screenshot is None for s in exploration.steps):
            raise ExplorationError(
                f"the screen_text synthesizer reads the screens, and the exploration of {exploration.app} on phone "
                f"{exploration.phone} kept none: explore with keep_screenshots=True"
            )
        size = exploration.device_size or PHONE_SIZE
        seen = {norm(t) for t in self._texts(exploration.start_screenshot, size)}
        found: list[SynthesisedTask] = []
        for index, step in enumerate(exploration.steps):
            assert step.screenshot is not None
            texts = self._texts(step.screenshot, size)
            new = [t for t in texts if norm(t) not in seen and self._names_a_goal(t, exploration.app)]
            seen.update(norm(t) for t in texts)
            for text in new[: self.per_step]:
                digest = hashlib.blake2b(f"{exploration.app}\n{norm(text)}".encode(), digest_size=5).hexdigest()
                task = Task(
                    id=f"screen_text.{digest}",
                    instruction=f"In {exploration.app}, open the screen that shows '{text}'.",
                    app=exploration.app,
                    verifier=VerifierSpec(predicate=SCREEN_TEXT, params={"text": text, "where": "last"}),
                    source="hindsight",
                )
                found.append(SynthesisedTask(task, exploration.actions(index + 1), exploration.start_state))
        return found
