"""Verifiers decide whether a task phase succeeded. A plain (async) callable works too.

    >>> import asyncio
    >>> from darwin.verifiers.base import Verdict, VerificationRequest, as_verifier
    >>> judge = as_verifier(lambda request: Verdict(success=True, reason="always"))
    >>> asyncio.run(judge.verify(None)).success  # doctest: +SKIP
    True
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from darwin.types import Phase, Task, Transition, VerifierSpec


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


@dataclass(frozen=True)
class Verdict:
    """``success=None`` means unverified (e.g. the judge was unreachable): never a silent 0 or 1."""

    success: bool | None
    reward: float | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        if self.reward is None:
            object.__setattr__(self, "reward", None if self.success is None else float(self.success))


class Verifier(ABC):
    """Judges a phase from the final phone state, screenshots and/or the trajectory."""

    kind: str = "custom"

    @abstractmethod
    async def verify(self, request: VerificationRequest) -> Verdict:
        """The verdict for ``request``. Infrastructure problems give ``success=None``."""

    @property
    def cheap(self) -> bool:
        """True if it may be called after every step (rule checks); False for LLM judges."""
        return False


class _CallableVerifier(Verifier):
    def __init__(self, fn: Callable[[VerificationRequest], Verdict | Awaitable[Verdict]], kind: str) -> None:
        self.fn = fn
        self.kind = kind

    async def verify(self, request: VerificationRequest) -> Verdict:
        out = self.fn(request)
        if inspect.isawaitable(out):
            out = await out
        if not isinstance(out, Verdict):
            raise TypeError(f"verifier {self.kind!r} returned {type(out).__name__}; return a darwin.verifiers.Verdict")
        return out


def as_verifier(fn: Verifier | Callable[[VerificationRequest], Verdict | Awaitable[Verdict]], kind: str | None = None) -> Verifier:
    """Wrap a plain (async) function ``request -> Verdict`` as a :class:`Verifier`."""
    if isinstance(fn, Verifier):
        return fn
    if not callable(fn):
        raise TypeError(f"a verifier must be a Verifier or a callable, got {type(fn).__name__}")
    return _CallableVerifier(fn, kind or getattr(fn, "__name__", "callable"))
