"""Progress of a long job's stages: how long each has run and what is left of it.

``darwin run`` spends minutes in stages that used to say one word (demonstrations, SFT
training, an evaluation): in a log file or CI the run looked hung. Three small parts:

- :class:`StageClock` times the stage a job is in and estimates what is left, from the rate
  so far (``done`` of ``total`` units) and from a time budget;
- :class:`LineSchedule` says when a progress line is due: at a new stage, then every
  ``every_s`` seconds within one;
- :class:`Heartbeat` calls a function every few seconds from a thread, so the lines come
  also while the job itself reports nothing (one long call).

The clock is injectable, so all of it is tested without waiting:

    >>> now = [0.0]
    >>> clock = StageClock(clock=lambda: now[0])
    >>> clock.start("SFT training", total=400, unit="steps")
    >>> now[0] = 50.0
    >>> clock.advance(100)
    >>> clock.snapshot().line()
    'SFT training: 100/400 steps, 50s elapsed, about 2m30s left'
    >>> schedule = LineSchedule(every_s=20.0, clock=lambda: now[0])
    >>> schedule.due("SFT training"), schedule.due("SFT training")
    (True, False)
    >>> now[0] = 70.0
    >>> schedule.due("SFT training")
    True

Nothing here prints: the command line shows the lines (``darwin.cli.run``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from types import TracebackType

__all__ = ["HEARTBEAT_S", "LINE_EVERY_S", "Heartbeat", "LineSchedule", "StageClock", "StageProgress", "duration"]

LINE_EVERY_S = 20.0
"""A progress line at least this often within a stage (plus at most one heartbeat): no log goes
quiet for 30 seconds."""

HEARTBEAT_S = 5.0
"""How often a run refreshes its progress when nothing else does."""


def duration(seconds: float) -> str:
    """``42s``, ``2m30s``, ``1h05m``: short enough for a progress line.

    >>> duration(42.4), duration(150), duration(3900)
    ('42s', '2m30s', '1h05m')
    """
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


@dataclass(frozen=True)
class StageProgress:
    """A stage at one moment: what a progress line shows."""

    stage: str = ""
    elapsed_s: float = 0.0
    done: int = 0
    total: int | None = None
    unit: str = ""
    left_s: float | None = None
    """Estimated seconds left; ``None`` while nothing tells (no count yet, no budget)."""

    def timing(self) -> str:
        """``100/400 steps, 50s elapsed, about 2m30s left`` (the parts that are known)."""
        parts = []
        if self.total is not None:
            parts.append(f"{self.done}/{self.total} {self.unit}".rstrip())
        elif self.done:
            parts.append(f"{self.done} {self.unit}".rstrip())
        parts.append(f"{duration(self.elapsed_s)} elapsed")
        if self.left_s is not None:
            parts.append(f"about {duration(self.left_s)} left")
        return ", ".join(parts)

    def line(self) -> str:
        return f"{self.stage}: {self.timing()}"


class StageClock:
    """Times the stage a job is in: elapsed time, and what is left, estimated from the rate so
    far (``done`` of ``total``) and from a time budget (the smaller of the two). Safe to advance
    from one thread and read from another (a job's worker and a :class:`Heartbeat`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.stage = ""
        self._started = clock()
        self._done = 0
        self._total: int | None = None
        self._unit = ""
        self._budget_s: float | None = None

    def start(self, stage: str, total: int | None = None, unit: str = "", budget_s: float | None = None) -> None:
        """A new stage: its clock starts now."""
        with self._lock:
            self.stage = stage
            self._started = self._clock()
            self._done, self._total, self._unit, self._budget_s = 0, total, unit, budget_s

    def advance(self, done: int, total: int | None = None, unit: str | None = None) -> None:
        """``done`` units of the stage are finished (and, when given, its total and unit)."""
        with self._lock:
            self._done = done
            if total is not None:
                self._total = total
            if unit is not None:
                self._unit = unit

    def snapshot(self) -> StageProgress:
        with self._lock:
            elapsed = self._clock() - self._started
            estimates = []
            if self._total is not None and self._done > 0:
                estimates.append(elapsed / self._done * max(self._total - self._done, 0))
            if self._budget_s is not None:
                estimates.append(max(self._budget_s - elapsed, 0.0))
            return StageProgress(
                stage=self.stage,
                elapsed_s=elapsed,
                done=self._done,
                total=self._total,
                unit=self._unit,
                left_s=min(estimates) if estimates else None,
            )


class LineSchedule:
    """When a progress line is due: the first report of a stage (any new ``key``), then again
    once ``every_s`` seconds have passed since the last line."""

    def __init__(self, every_s: float = LINE_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self._clock = clock
        self._key: Hashable = None
        self._last: float | None = None

    def due(self, key: Hashable) -> bool:
        now = self._clock()
        if key != self._key or self._last is None or now - self._last >= self.every_s:
            self._key, self._last = key, now
            return True
        return False


class Heartbeat:
    """Calls ``beat`` every ``every_s`` seconds from a daemon thread while the ``with`` block
    runs; an exception in ``beat`` stops the beats and is raised when the block ends."""

    def __init__(self, beat: Callable[[], None], every_s: float = HEARTBEAT_S) -> None:
        self.beat = beat
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="darwin-progress-heartbeat", daemon=True)
        self._error: BaseException | None = None

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.beat()
            except Exception as exc:  # noqa: BLE001 - not swallowed: __exit__ raises it in the caller's thread
                self._error = exc
                return

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        if self._error is not None and error is None:
            raise self._error
