"""``darwin bench reader``: the OCR reader against SimPhone's own elements, on the launcher and
every app's first screens, English and Chinese, at the agent's resolution.

Truth is what SimPhone lists as its screen's elements (``screen_elements()``: the text each
widget draws, in device pixels). Per screen the OCR reader's marks are compared with it:

- **word recall**: the share of the elements' words (a CJK character is a word) that the marks
  of the same screen contain, case-folded;
- **box IoU**: for each element read as one mark (the same text), the overlap of the mark's box
  with the element's (an element's box is its widget's: a list row is wider than its text, so
  IoU under 1 is expected there), and **centre hits**: the share of those marks whose centre
  lies inside the element, which is what ``click(#k)`` needs;
- **ms per screen**: the first read (cold: the engine loads its models), every other read
  (warm), and a read of a screen already read (cached); the ``elements`` reader's for scale.

Figures go to the Readers section of docs/benchmarks.md.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np

from darwin.agents.pointing import goal_words
from darwin.envs.sim.env import SimPhoneEnv
from darwin.envs.sim.i18n import LOCALES
from darwin.readers.base import Reader, clean_text, read_marks_sync
from darwin.readers.elements import ElementsReader
from darwin.types import Mark


@dataclass(frozen=True)
class LocaleResult:
    """One locale's figures over its screens."""

    locale: str
    screens: int
    words: int
    words_read: int
    iou_median: float
    centre_hits: float
    matched: int
    cold_ms: float
    warm_ms: float
    cached_ms: float
    elements_ms: float
    missed: tuple[str, ...]
    """The words not read (at most 40, for the report)."""

    @property
    def recall(self) -> float:
        return self.words_read / self.words if self.words else 1.0


def words(text: str) -> list[str]:
    """``text``'s words as the recall counts them: case-folded, CJK per character."""
    text = clean_text(text).casefold()
    return [text[a:b] for a, b in goal_words(text)]


def iou(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> float:
    """Intersection over union of two ``(x0, y0, x1, y1)`` boxes."""
    w = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def bench_screens(env: SimPhoneEnv) -> list[str]:
    """The screens read: the launcher, then each app's first screen (the phone goes home between)."""
    return ["launcher", *env.phone.apps]


def visible_texts(env: SimPhoneEnv) -> list[tuple[str, tuple[int, int, int, int]]]:
    """The texts the screen draws, with their widgets' boxes: SimPhone's widgets with a text
    (its subtitle joined, as ``screen_elements`` lists them), less a list's scroll position
    (a scroller's text, never drawn) and what a dialog covers (widgets painted before it that
    overlap it)."""
    widgets = env.phone.layout().widgets
    dialogs = [w.box for w in widgets if w.kind == "dialog"]
    first_dialog = next((i for i, w in enumerate(widgets) if w.kind == "dialog"), len(widgets))
    dw, dh = env.device_size
    out = []
    for i, w in enumerate(widgets):
        text = " ".join(t for t in (w.text, w.subtitle) if t)
        x0, y0, x1, y1 = w.box
        if not text.strip() or w.kind == "scroller" or x1 <= 0 or y1 <= 0 or x0 >= dw or y0 >= dh:
            continue
        if i < first_dialog and any(iou(w.box, d) > 0 for d in dialogs):
            continue
        out.append((text, (x0, y0, x1, y1)))
    return out


def show(env: SimPhoneEnv, name: str) -> None:
    """Put screen ``name`` of :func:`bench_screens` on ``env``."""
    env.go_home()
    if name != "launcher":
        env.phone.launch(name)


def bench_reader(
    reader: Reader, agent_size: tuple[int, int] = (504, 1120), locales: tuple[str, ...] = ("en", "zh")
) -> list[LocaleResult]:
    """The figures of ``reader`` (a pixel reader) per locale, on SimPhone seed 0."""
    results = []
    first = True
    for locale in locales:
        if locale not in LOCALES:
            raise ValueError(f"unknown locale {locale!r}: one of {', '.join(LOCALES)}")
        env = SimPhoneEnv(seed=0, locale=locale)
        total = read = matched = hits = 0
        ious: list[float] = []
        cold_ms = 0.0
        warm: list[float] = []
        cached: list[float] = []
        elements_ms: list[float] = []
        missed: list[str] = []
        screens = bench_screens(env)
        for name in screens:
            show(env, name)
            shot = env.screenshot(agent_size)
            started = time.perf_counter()
            marks = read_marks_sync(reader, shot, env.device_size)
            elapsed = 1000 * (time.perf_counter() - started)
            if first:
                cold_ms, first = elapsed, False
            else:
                warm.append(elapsed)
            started = time.perf_counter()
            read_marks_sync(reader, shot, env.device_size)
            cached.append(1000 * (time.perf_counter() - started))
            started = time.perf_counter()
            read_marks_sync(ElementsReader(), shot, env.device_size, env)
            elements_ms.append(1000 * (time.perf_counter() - started))
            seen = {w for m in marks for w in words(m.text)}
            by_text: dict[str, list[Mark]] = {}
            for m in marks:
                by_text.setdefault(clean_text(m.text).casefold(), []).append(m)
            for text, box in visible_texts(env):
                x0, y0, x1, y1 = box
                for word in words(text):
                    total += 1
                    if word in seen:
                        read += 1
                    elif len(missed) < 40:
                        missed.append(f"{name}:{word}")
                same = by_text.get(clean_text(text).casefold(), [])
                if same:  # a text shown twice (two "Not now"): the mark over this element
                    mark = max(same, key=lambda m: iou(m.box, box))
                    matched += 1
                    ious.append(iou(mark.box, box))
                    hits += int(x0 <= mark.center[0] < x1 and y0 <= mark.center[1] < y1)
        results.append(
            LocaleResult(
                locale=locale,
                screens=len(screens),
                words=total,
                words_read=read,
                iou_median=statistics.median(ious) if ious else 0.0,
                centre_hits=hits / matched if matched else 0.0,
                matched=matched,
                cold_ms=cold_ms,
                warm_ms=float(np.mean(warm)) if warm else 0.0,
                cached_ms=float(np.mean(cached)),
                elements_ms=float(np.mean(elements_ms)),
                missed=tuple(missed),
            )
        )
    return results


__all__ = ["LocaleResult", "bench_reader", "bench_screens", "iou", "words"]
