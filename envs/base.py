"""The phone interface every environment implements (SimPhone in process, ADB devices, ...).

Three abstract methods; async twins run the blocking calls off the event loop so one
slow phone never stalls the others::

    >>> import numpy as np
    >>> from darwin.envs.base import PhoneEnv
    >>> class BlackPhone(PhoneEnv):
    ...     device_size = (1080, 2400)
    ...     def screenshot(self, size=None):
    ...         w, h = size or self.device_size
    ...         return np.zeros((h, w, 3), np.uint8)
    ...     def execute(self, action):
    ...         pass
    ...     def go_home(self):
    ...         pass
    >>> BlackPhone().screenshot((54, 120)).shape
    (120, 54, 3)
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from darwin.actions import Action
from darwin.envs.screen_elements import ScreenElement
from darwin.types import StateSetup, Task


class InfraError(RuntimeError):
    """The phone or its connection failed (not the agent's fault).

    ``cause`` is a short machine-readable tag (``"disconnect"``, ``"deadline"``,
    ``"crash"``, ``"black_screen"`` ...); workflows turn this into a truncation.
    """

    def __init__(self, cause: str, detail: str = "") -> None:
        super().__init__(f"{cause}: {detail}" if detail else cause)
        self.cause = cause
        self.detail = detail


class SetupUnsupported(RuntimeError):
    """The phone cannot put a task's state on itself (a real phone has no state writes):
    run tasks with ``setup`` steps on SimPhones (in process or served over ADB)."""


class HardResetUnsupported(RuntimeError):  # noqa: N818 - reads as a sentence
    """The phone cannot reset itself: hard resets go through its provider (``phones.provider``)."""


class ForkUnsupported(RuntimeError):  # noqa: N818 - reads as a sentence
    """The phone cannot be put back in a state it was in (:meth:`PhoneEnv.restore_state`), so
    episodes cannot branch from it: branching rollouts need in-process SimPhones."""


class PhoneEnv(ABC):
    """A phone an agent acts on. Coordinates in actions are device pixels."""

    device_size: tuple[int, int]
    """``(width, height)`` of the device screen in pixels."""

    name: str = "phone"

    @abstractmethod
    def screenshot(self, size: tuple[int, int] | None = None) -> np.ndarray:
        """The current screen as ``(H, W, 3)`` uint8, resized to ``size = (W, H)`` if given."""

    @abstractmethod
    def execute(self, action: Action) -> None:
        """Perform one action; raise :class:`InfraError` if the phone fails."""

    @abstractmethod
    def go_home(self) -> None:
        """Minimal cleanup between episodes: return to the launcher (state persists)."""

    @property
    def quarantined(self) -> bool:
        """True when the phone failed too often to be trusted; workers stop using it (or, where
        :attr:`recovers`, wait for it)."""
        return False

    @property
    def quarantine_reason(self) -> str | None:
        """Why the phone is quarantined (the last failure), ``None`` when it is not or does not say."""
        return None

    recovers: bool = False
    """A quarantined phone of this kind comes back by itself (a Ray phone whose node returns):
    the rollout engine's worker waits for it instead of stopping."""

    def probe_state(self) -> dict[str, Any] | None:
        """Machine-readable phone state for rule verification, or ``None`` if unavailable."""
        return None

    def screen_elements(self) -> list[ScreenElement] | None:
        """The screen's view hierarchy (``uiautomator dump`` on Android), or ``None`` where the
        phone cannot list it; the action guard reads it (:mod:`darwin.envs.guard`)."""
        return None

    @property
    def forks(self) -> bool:
        """The phone can be put back exactly in a state :meth:`probe_state` returned
        (:meth:`restore_state`): branching rollouts play several continuations from one state."""
        return False

    def restore_state(self, state: dict[str, Any]) -> None:
        """Put the phone back in ``state`` (as :meth:`probe_state` returned it), exactly: the same
        screen, the same data, so the same actions from there lead to the same states.

        Raises :class:`ForkUnsupported` where the phone cannot (the default).
        """
        raise ForkUnsupported(
            f"{self.name} ({type(self).__name__}) cannot be put back in an earlier state; "
            "branching rollouts need phones that fork (in-process SimPhones, phones.provider='sim')"
        )

    def begin_task(self, task: Task) -> None:
        """Called by workflows before each episode of ``task`` (before its setup); default: nothing.

        A SimPhone with ``locale="auto"`` switches its UI to the task's language here.
        """

    def apply_setup(self, setup: Sequence[StateSetup]) -> None:
        """Put a task instance's state on the phone before its episode (``Task.setup``).

        Raises :class:`SetupUnsupported` where the phone has no state writes (the default),
        :class:`InfraError` if the phone fails while applying it.
        """
        raise SetupUnsupported(
            f"{self.name} ({type(self).__name__}) cannot apply setup steps {[s.step for s in setup]}; "
            "run template tasks with setup on SimPhones"
        )

    def hard_reset(self) -> None:
        """Put the phone back in its factory state (a SimPhone's fresh data for its seed).

        Phones reached over a network cannot do this themselves: their provider resets them
        (:meth:`darwin.envs.providers.PhoneProvider.reset`); the default raises
        :class:`HardResetUnsupported`.
        """
        raise HardResetUnsupported(
            f"{self.name} ({type(self).__name__}) cannot hard-reset itself; acquire it from a provider "
            "(phones.provider, docs/phones.md) whose API re-images it"
        )

    def close(self) -> None:
        """Release the phone (connections, processes)."""

    async def ascreenshot(self, size: tuple[int, int] | None = None) -> np.ndarray:
        return await asyncio.to_thread(self.screenshot, size)

    async def aapply_setup(self, setup: Sequence[StateSetup]) -> None:
        await asyncio.to_thread(self.apply_setup, setup)

    async def abegin_task(self, task: Task) -> None:
        self.begin_task(task)  # in process and cheap; a remote phone overrides it

    async def aexecute(self, action: Action) -> None:
        await asyncio.to_thread(self.execute, action)

    async def ago_home(self) -> None:
        await asyncio.to_thread(self.go_home)

    async def aprobe_state(self) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.probe_state)

    async def arestore_state(self, state: dict[str, Any]) -> None:
        await asyncio.to_thread(self.restore_state, state)


class PhoneWrapper(PhoneEnv):
    """``env`` with some behaviour changed (Gymnasium's wrapper pattern): every call goes to
    ``env`` unless a subclass overrides it, and ``env``'s own attributes (a SimPhone's
    ``phone`` ...) read through. The rollout engine's lock-step mode and the action guard
    (:class:`~darwin.envs.guard.GuardedPhone`) are wrappers.

        >>> from darwin.envs.sim.env import SimPhoneEnv
        >>> class CountingActions(PhoneWrapper):
        ...     actions = 0
        ...     async def aexecute(self, action):
        ...         self.actions += 1
        ...         await self.env.aexecute(action)
        >>> wrapped = CountingActions(SimPhoneEnv(seed=1))
        >>> wrapped.name, wrapped.phone.seed
        ('sim-1', 1)
    """

    def __init__(self, env: PhoneEnv) -> None:
        self.env = env
        self.device_size = env.device_size
        self.name = env.name

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def screenshot(self, size: tuple[int, int] | None = None) -> np.ndarray:
        return self.env.screenshot(size)

    def execute(self, action: Action) -> None:
        self.env.execute(action)

    def go_home(self) -> None:
        self.env.go_home()

    @property
    def quarantined(self) -> bool:
        return self.env.quarantined

    @property
    def quarantine_reason(self) -> str | None:
        return self.env.quarantine_reason

    def probe_state(self) -> dict[str, Any] | None:
        return self.env.probe_state()

    def screen_elements(self) -> list[ScreenElement] | None:
        return self.env.screen_elements()

    @property
    def forks(self) -> bool:
        return self.env.forks

    def restore_state(self, state: dict[str, Any]) -> None:
        self.env.restore_state(state)

    def begin_task(self, task: Task) -> None:
        self.env.begin_task(task)

    def apply_setup(self, setup: Sequence[StateSetup]) -> None:
        self.env.apply_setup(setup)

    def hard_reset(self) -> None:
        self.env.hard_reset()

    def close(self) -> None:
        self.env.close()

    async def ascreenshot(self, size: tuple[int, int] | None = None) -> np.ndarray:
        return await self.env.ascreenshot(size)

    async def aapply_setup(self, setup: Sequence[StateSetup]) -> None:
        await self.env.aapply_setup(setup)

    async def abegin_task(self, task: Task) -> None:
        await self.env.abegin_task(task)

    async def aexecute(self, action: Action) -> None:
        await self.env.aexecute(action)

    async def ago_home(self) -> None:
        await self.env.ago_home()

    async def aprobe_state(self) -> dict[str, Any] | None:
        return await self.env.aprobe_state()

    async def arestore_state(self, state: dict[str, Any]) -> None:
        await self.env.arestore_state(state)
