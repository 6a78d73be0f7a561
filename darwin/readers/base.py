"""Readers: what an agent knows of a screen beyond its pixels.

A :class:`Reader` turns a screen into :class:`~darwin.types.Mark`\\ s (text, box in device
pixels, clickable where known). The agent's reader is a component (``agent.reader``): ``none``
(pixels only), ``ocr`` (RapidOCR's shipped PP-OCR models on the screenshot,
:class:`~darwin.readers.ocr.OCRReader`), ``elements`` (the phone's accessibility tree,
:class:`~darwin.readers.elements.ElementsReader`), or a user's subclass by import path. The
workflow reads every observation with the acting agent's reader (:func:`read_marks`), so the
marks travel on the :class:`~darwin.types.Observation` into the prompt (numbered ``[k] text``
lines) and into pointing actions (``click(#k)``).

Readers of pixels (``needs_phone = False``) are cached by screenshot content in one cache per
process and reader settings, shared by every phone of the process (:class:`MarkCache`); the
time spent reading and the cache's hit rate are counted per reader (:func:`reader_stats`) and
logged by a run with each update.

    >>> import numpy as np
    >>> from darwin.readers import Reader
    >>> from darwin.types import Mark
    >>> class Corners(Reader):
    ...     def read(self, screenshot, device_size, env=None):
    ...         w, h = device_size
    ...         return (Mark("top left", (0, 0, w // 4, h // 8)),)
    >>> Corners().read(np.zeros((8, 4, 3), np.uint8), (1080, 2400))[0].center
    (134, 149)
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
import unicodedata
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from darwin.types import Mark, RunAbort

if TYPE_CHECKING:
    from darwin.envs.base import PhoneEnv

MAX_MARK_TEXT = 80
"""Characters of one mark's text kept (a paragraph read off the screen is cut here)."""


class ReaderError(ValueError):
    """A reader given what it cannot read (an empty or absurd screenshot); the message says what."""


class ReaderUnavailable(RunAbort):
    """The reader cannot work with this phone at all (``elements`` on a phone that cannot list its
    view hierarchy): no episode can work around it, so the run stops and says how to fix it."""


@dataclass
class ReaderStats:
    """What one reader (by :attr:`Reader.cache_key`) cost in this process so far."""

    screens: int = 0
    """Screens asked for (cache hits included)."""
    hits: int = 0
    """Screens answered from the cache."""
    read_seconds: float = 0.0
    """Wall time spent in :meth:`Reader.read` (misses only; hits cost a hash)."""
    total_seconds: float = 0.0
    """Wall time of every :func:`read_marks` call, hashing and waiting included."""

    @property
    def hit_rate(self) -> float | None:
        return self.hits / self.screens if self.screens else None

    def since(self, before: ReaderStats) -> ReaderStats:
        """What was counted after ``before`` (a copy taken earlier)."""
        return ReaderStats(
            self.screens - before.screens,
            self.hits - before.hits,
            self.read_seconds - before.read_seconds,
            self.total_seconds - before.total_seconds,
        )

    @property
    def ms_per_screen(self) -> float | None:
        return 1000.0 * self.total_seconds / self.screens if self.screens else None


class MarkCache:
    """Marks by screenshot content, least recently used first out (thread-safe)."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._items: OrderedDict[bytes, tuple[Mark, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes) -> tuple[Mark, ...] | None:
        with self._lock:
            marks = self._items.get(key)
            if marks is not None:
                self._items.move_to_end(key)
            return marks

    def put(self, key: bytes, marks: tuple[Mark, ...]) -> None:
        with self._lock:
            self._items[key] = marks
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


_CACHES: dict[str, MarkCache] = {}
_STATS: dict[str, ReaderStats] = {}
_READ_LOCKS: dict[str, threading.Lock] = {}
_REGISTRY_LOCK = threading.Lock()


def _shared(key: str) -> tuple[MarkCache, ReaderStats, threading.Lock]:
    with _REGISTRY_LOCK:
        if key not in _CACHES:
            _CACHES[key] = MarkCache()
            _STATS[key] = ReaderStats()
            _READ_LOCKS[key] = threading.Lock()
        return _CACHES[key], _STATS[key], _READ_LOCKS[key]


def reader_stats() -> dict[str, ReaderStats]:
    """A copy of every reader's counters in this process, by :attr:`Reader.cache_key`."""
    with _REGISTRY_LOCK:
        return {k: ReaderStats(v.screens, v.hits, v.read_seconds, v.total_seconds) for k, v in _STATS.items()}


def screenshot_key(screenshot: np.ndarray, device_size: tuple[int, int]) -> bytes:
    """What identifies a screen for a pixel reader: its pixels, their shape and the device size."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(repr((screenshot.shape, str(screenshot.dtype), tuple(device_size))).encode())
    digest.update(np.ascontiguousarray(screenshot).data)
    return digest.digest()


class Reader(ABC):
    """Turns a screen into marks; one abstract method.

    ``needs_phone``: the reader asks the phone (its accessibility tree) rather than the
    pixels; it is then never cached, and :meth:`read` gets the phone as ``env``.
    """

    needs_phone: ClassVar[bool] = False

    @property
    def cache_key(self) -> str:
        """Identity of the reader and its settings (marks of different settings never mix)."""
        return f"{type(self).__module__}.{type(self).__qualname__}"

    @property
    def reads(self) -> bool:
        """False for the ``none`` reader: the workflow skips it."""
        return True

    @abstractmethod
    def read(
        self, screenshot: np.ndarray, device_size: tuple[int, int], env: PhoneEnv | None = None
    ) -> tuple[Mark, ...]:
        """The marks of one screen: ``screenshot`` is ``(H, W, 3)`` uint8 at any resolution,
        ``device_size`` the phone's ``(width, height)`` the boxes are given in."""


class NoReader(Reader):
    """Pixels only: no marks (the paper preset's reader)."""

    @property
    def reads(self) -> bool:
        return False

    def read(
        self, screenshot: np.ndarray, device_size: tuple[int, int], env: PhoneEnv | None = None
    ) -> tuple[Mark, ...]:
        return ()


def check_screenshot(screenshot: np.ndarray, device_size: tuple[int, int]) -> None:
    """Raise :class:`ReaderError` naming what is wrong with a screen no reader can read."""
    if not isinstance(screenshot, np.ndarray) or screenshot.ndim != 3 or screenshot.shape[2] != 3:
        shape = getattr(screenshot, "shape", type(screenshot).__name__)
        raise ReaderError(f"a reader reads (H, W, 3) uint8 screenshots, got {shape}")
    if screenshot.shape[0] < 1 or screenshot.shape[1] < 1:
        raise ReaderError(f"the screenshot is empty ({screenshot.shape[1]}x{screenshot.shape[0]})")
    w, h = device_size
    if w < 1 or h < 1:
        raise ReaderError(f"device size {device_size} is empty: marks are given in device pixels")


def clean_text(text: str) -> str:
    """One line of normalised text (NFKC, whitespace runs as one space, controls dropped)."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(" " if c.isspace() else c for c in text if c.isspace() or unicodedata.category(c)[0] != "C")
    return " ".join(text.split())[:MAX_MARK_TEXT]


def order_marks(marks: Iterable[Mark], max_marks: int) -> tuple[Mark, ...]:
    """Marks in reading order (top to bottom by box centre row band, then left to right),
    without repeats of the same text at the same box, at most ``max_marks``."""
    seen: set[tuple[str, tuple[int, int, int, int]]] = set()
    unique: list[Mark] = []
    for m in marks:
        if not m.text or (m.text, m.box) in seen:
            continue
        seen.add((m.text, m.box))
        unique.append(m)
    # Rows: a mark whose centre lies within 1/2 of the previous row's height joins it.
    unique.sort(key=lambda m: (m.center[1], m.center[0]))
    ordered: list[Mark] = []
    row: list[Mark] = []
    row_y = -1
    for m in unique:
        cy = m.center[1]
        half = max(1, (m.box[3] - m.box[1]) // 2)
        if row and abs(cy - row_y) > half:
            ordered.extend(sorted(row, key=lambda r: r.box[0]))
            row = []
        if not row:
            row_y = cy
        row.append(m)
    ordered.extend(sorted(row, key=lambda r: r.box[0]))
    return tuple(ordered[:max_marks])


async def read_marks(
    reader: Reader | None, screenshot: np.ndarray, device_size: tuple[int, int], env: PhoneEnv | None = None
) -> tuple[Mark, ...]:
    """The marks of one screen by ``reader`` (``()`` for none), through the process's cache for
    pixel readers; a reader that asks the phone runs off the event loop on every call."""
    if reader is None or not reader.reads:
        return ()
    check_screenshot(screenshot, device_size)
    cache, stats, lock = _shared(reader.cache_key)
    started = time.perf_counter()
    if reader.needs_phone:
        marks = await asyncio.to_thread(reader.read, screenshot, device_size, env)
        elapsed = time.perf_counter() - started
        with _REGISTRY_LOCK:
            stats.screens += 1
            stats.read_seconds += elapsed
            stats.total_seconds += elapsed
        return marks
    key = screenshot_key(screenshot, device_size)
    marks_or_none = cache.get(key)
    hit = marks_or_none is not None
    read_seconds = 0.0
    if marks_or_none is None:

        def read_once() -> tuple[tuple[Mark, ...], float]:
            # One read of a screen at a time per reader: phones showing the same screen wait
            # for the first read instead of repeating it (the engine uses every core anyway).
            with lock:
                again = cache.get(key)
                if again is not None:
                    return again, 0.0
                t0 = time.perf_counter()
                found = reader.read(screenshot, device_size, env)
                cache.put(key, found)
                return found, time.perf_counter() - t0

        marks, read_seconds = await asyncio.to_thread(read_once)
        hit = read_seconds == 0.0
    else:
        marks = marks_or_none
    with _REGISTRY_LOCK:
        stats.screens += 1
        stats.hits += int(hit)
        stats.read_seconds += read_seconds
        stats.total_seconds += time.perf_counter() - started
    return marks


def read_marks_sync(
    reader: Reader | None, screenshot: np.ndarray, device_size: tuple[int, int], env: PhoneEnv | None = None
) -> tuple[Mark, ...]:
    """:func:`read_marks` for callers outside an event loop (benchmarks, offline data)."""
    return asyncio.run(read_marks(reader, screenshot, device_size, env))


def scale_box(
    box: Sequence[float], image_size: tuple[int, int], device_size: tuple[int, int]
) -> tuple[int, int, int, int]:
    """An ``(x0, y0, x1, y1)`` box in screenshot pixels as device pixels, clipped to the screen."""
    iw, ih = image_size
    dw, dh = device_size
    sx, sy = dw / iw, dh / ih
    x0, y0, x1, y1 = box
    return (
        int(min(max(x0 * sx, 0), dw - 1)),
        int(min(max(y0 * sy, 0), dh - 1)),
        int(min(max(round(x1 * sx), 1), dw)),
        int(min(max(round(y1 * sy), 1), dh)),
    )


__all__ = [
    "MAX_MARK_TEXT",
    "MarkCache",
    "NoReader",
    "Reader",
    "ReaderError",
    "ReaderStats",
    "ReaderUnavailable",
    "check_screenshot",
    "clean_text",
    "order_marks",
    "read_marks",
    "read_marks_sync",
    "reader_stats",
    "scale_box",
    "screenshot_key",
]
