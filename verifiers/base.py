"""Verifiers decide whether a task phase succeeded. A plain (async) callable works too.

>>> import asyncio
>>> from darwin.verifiers.base import Verdict, VerificationRequest, as_verifier
>>> judge = as_verifier(lambda request: Verdict(success=True, reason="always"))
>>> asyncio.run(judge.verify(None)).success  # doctest: +SKIP
True
"""

from __future__ import annotations

import functools
import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# Verdict and VerdictUsage live with the trajectory that holds them (darwin.types).
from darwin.types import Phase, Task, Transition, Verdict, VerifierSpec

__all__ = [
    "VerificationRequest",
    "Verifier",
    "as_verifier",
]


@dataclass(frozen=True)
class VerificationRequest:
    """Everything a verifier may look at for one phase of one episode."""

    task: Task
    phase: Phase
    instruction: str
    spec: VerifierSpec
    transitions: Sequence[Transition]
    final_state: dict[str, Any] | None
    final_screenshot: np.ndarray | None


class Verifier(ABC):
    """Judges a phase from the final phone state, screenshots and/or the trajectory."""

    kind: str = "custom"

    def __init_subclass__(cls, **kwargs: object) -> None:
        """A subclass may write ``verify`` as a plain ``def``, as a function verifier may be:
        it is wrapped into the ``async`` method the workflow awaits (and runs on the loop,
        as a plain function verifier does)."""
        super().__init_subclass__(**kwargs)
        verify = cls.__dict__.get("verify")
        if verify is None or inspect.iscoroutinefunction(verify) or getattr(verify, "__isabstractmethod__", False):
            return
        sync = verify

        @functools.wraps(sync)
        async def verify_async(self: Verifier, request: VerificationRequest) -> Verdict:
            out = sync(self, request)
            if inspect.isawaitable(out):  # a plain def that returns a coroutine
                out = await out
            if not isinstance(out, Verdict):
                raise TypeError(f"{cls.__name__}.verify returned {type(out).__name__}; return a darwin.types.Verdict")
            return out

        cls.verify = verify_async  # type: ignore[method-assign]  # a sync verify is wrapped as the async one the interface declares

    @abstractmethod
    async def verify(self, request: VerificationRequest) -> Verdict:
        """The verdict for ``request`` (``async def`` or a plain ``def``). Infrastructure
        problems give ``success=None``."""

    @property
    def cheap(self) -> bool:
        """True if it may be called after every step (rule checks); False for LLM judges."""
        return False

    @property
    def reads_screen(self) -> bool:
        """True if it needs ``final_screenshot`` (the workflow then takes one for each check)."""
        return not self.cheap

    @property
    def screen_size(self) -> tuple[int, int] | None:
        """``(W, H)`` of the final screenshot it reads; ``None`` = the phone's full resolution."""
        return None

    def close(self) -> None:
        """Release what the verifier holds open (a model, a database, a thread); default: nothing.

        Called once, by the workflow that owns it when the run's cleanup closes that workflow; it
        must be safe to call twice.
        """


class _CallableVerifier(Verifier):
    def __init__(self, fn: Callable[[VerificationRequest], Verdict | Awaitable[Verdict]], kind: str) -> None:
        self.fn = fn
        self.kind = kind

    async def verify(self, request: VerificationRequest) -> Verdict:
        out = self.fn(request)
        if inspect.isawaitable(out):
            out = await out
        if not isinstance(out, Verdict):
            raise TypeError(f"verifier {self.kind!r} returned {type(out).__name__}; return a darwin.types.Verdict")
        return out


def as_verifier(
    fn: Verifier | Callable[[VerificationRequest], Verdict | Awaitable[Verdict]], kind: str | None = None
) -> Verifier:
    """Wrap a plain (async) function ``request -> Verdict`` as a :class:`Verifier`."""
    if isinstance(fn, Verifier):
        return fn
    if not callable(fn):
        raise TypeError(f"a verifier must be a Verifier or a callable, got {type(fn).__name__}")
    return _CallableVerifier(fn, kind or str(getattr(fn, "__name__", "callable")))
