"""The actors of an evaluation: what ``darwin eval --agent`` names, a component of kind
``"actors"`` (:mod:`darwin.components`).

A built-in (``oracle``, ``random``, ``tiny``, ``litellm``) or a user's factory by import path
makes an :class:`Actors`: one actor per phone, the clean-up of what they share, and the
screenshot size they need. It imports no model code, so the command line and the builders can
name it before anything heavy is loaded.

    >>> from darwin.agents.scripted import RandomActor
    >>> actors = Actors(lambda i: RandomActor(seed=i))
    >>> type(actors.make(0)).__name__, actors.aclose, actors.observation_size
    ('RandomActor', None, None)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from darwin.agents.base import Actor

__all__ = ["Actors", "AgentChoiceError"]


class Actors:
    """The actors of an evaluation's phones (``make(i)`` for phone ``i``), their clean-up, and the
    screenshot size they require (if any)."""

    def __init__(
        self,
        make: Callable[[int], Actor],
        aclose: Callable[[], Awaitable[None]] | None = None,
        observation_size: tuple[int, int] | None = None,
    ) -> None:
        self.make = make
        self.aclose = aclose
        self.observation_size = observation_size


class AgentChoiceError(ValueError):
    """An agent spec or one of its settings that cannot be used; ``option`` names the command-line
    option that gave it, so the message can point at it."""

    def __init__(self, message: str, option: str) -> None:
        super().__init__(message)
        self.option = option
