"""SimPhone as a :class:`~darwin.envs.base.PhoneEnv` (in process, no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from darwin.actions import Action, OpenApp
from darwin.envs.base import PhoneEnv
from darwin.envs.screen_elements import ScreenElement
from darwin.envs.sim.i18n import check_locale, locale_for_task
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.envs.sim.phone import SimPhone, UnknownAppError
from darwin.envs.sim.setups import apply_setup
from darwin.types import StateSetup, Task

FRESH_SEED_STRIDE = 2**32
"""A phone seeded ``s`` with fresh initial states starts its k-th later episode from seed
``s + k * FRESH_SEED_STRIDE``: never the seed of another phone (training phones and evaluation
phones are seeded below 2**32), so an evaluation phone's initial state never trains."""


class SimPhoneEnv(PhoneEnv):
    """An in-process SimPhone. Its async methods run inline: rendering is a few milliseconds.

    >>> from darwin.envs.sim.env import SimPhoneEnv
    >>> env = SimPhoneEnv(seed=1)
    >>> env.screenshot((252, 560)).shape
    (560, 252, 3)

    ``locale`` is the UI language: ``"en"`` (default), ``"zh"``, or ``"auto"``: each episode's
    task sets it (:meth:`begin_task`; Chinese instances play on a Chinese UI)::

        >>> from darwin.task_registry import get_task
        >>> env = SimPhoneEnv(seed=1, locale="auto")
        >>> env.begin_task(get_task("clock.set_alarm.zh.s0")); env.phone.locale
        'zh'
    """

    def __init__(
        self,
        seed: int = 0,
        perturbation: PerturbationConfig | None = None,
        name: str | None = None,
        phone: SimPhone | None = None,
        reset_between_episodes: bool = False,
        locale: str = "en",
        fresh_initial_states: bool = False,
    ) -> None:
        if locale != "auto":
            check_locale(locale)
        if fresh_initial_states and not reset_between_episodes:
            raise ValueError(
                "fresh_initial_states=True starts each episode from a new factory-reset state, which needs "
                "reset_between_episodes=True (a phone that keeps its state has no initial state to renew)"
            )
        self.locale = locale
        """``"auto"``, ``"en"`` or ``"zh"`` (see the class docstring)."""
        self.phone = (
            phone
            if phone is not None
            else SimPhone(seed=seed, perturbation=perturbation, locale="en" if locale == "auto" else locale)
        )
        self.device_size = (self.phone.width, self.phone.height)
        self.name = name or f"sim-{seed}"
        self.last_error: str | None = None
        self.reset_between_episodes = reset_between_episodes
        """``go_home`` (called between episodes) restores the phone's initial state instead of
        only pressing home, so no goal reached in one episode holds at the start of the next."""
        self._initial = self.phone.snapshot() if reset_between_episodes else None
        self.fresh_initial_states = fresh_initial_states
        """``go_home`` factory-resets the phone to a new seed instead (:data:`FRESH_SEED_STRIDE`): each
        episode starts from another initial state (new app data, list order, icon order, accent and
        pop-ups), as AndroidWorld draws each episode's task parameters anew, so RL cannot fit a
        fixed handful of starts."""
        self._first_seed = self.phone.seed
        self._episodes_started = 0

    def screenshot(self, size: tuple[int, int] | None = None) -> np.ndarray:
        return self.phone.screenshot(size)

    def execute(self, action: Action) -> None:
        try:
            self.phone.execute(action)
            self.last_error = None
        except UnknownAppError as exc:
            # Like `am start` of a missing package: nothing happens on screen; keep the reason.
            assert isinstance(action, OpenApp)
            self.last_error = str(exc)

    def screen_elements(self) -> list[ScreenElement]:
        return self.phone.screen_elements()

    def begin_task(self, task: Task) -> None:
        """With ``locale="auto"``, show the UI in the task's language (``CHN``: Chinese)."""
        if self.locale == "auto":
            self.phone.set_locale(locale_for_task(task.language))

    def go_home(self) -> None:
        if self.fresh_initial_states:  # implies reset_between_episodes (checked in __init__)
            self._episodes_started += 1
            self.phone.reset(self._first_seed + self._episodes_started * FRESH_SEED_STRIDE)
        elif self._initial is not None:
            self.phone.restore(self._initial)
        else:
            self.phone.press_home()
            self.phone.advance_clock(3)

    def probe_state(self) -> dict[str, Any]:
        return self.phone.snapshot()

    @property
    def forks(self) -> bool:
        return True

    def restore_state(self, state: dict[str, Any]) -> None:
        self.phone.restore(state)

    def hard_reset(self) -> None:
        """Factory reset: the phone's data back to its seed's, the launcher on screen."""
        self.phone.reset()
        if self._initial is not None:
            self._initial = self.phone.snapshot()

    def apply_setup(self, setup: Sequence[StateSetup]) -> None:
        self.phone.restore(apply_setup(self.phone.snapshot(), setup))

    # In-process calls are fast: no thread hop needed.
    async def ascreenshot(self, size: tuple[int, int] | None = None) -> np.ndarray:
        return self.screenshot(size)

    async def aexecute(self, action: Action) -> None:
        self.execute(action)

    async def ago_home(self) -> None:
        self.go_home()

    async def aprobe_state(self) -> dict[str, Any]:
        return self.probe_state()

    async def arestore_state(self, state: dict[str, Any]) -> None:
        self.restore_state(state)

    async def aapply_setup(self, setup: Sequence[StateSetup]) -> None:
        self.apply_setup(setup)
