"""The run's phones as a fleet: hard resets on a schedule, and spares for phones that do not heal.

:class:`PhoneFleet` holds the phone each rollout worker plays on (one *slot* per worker) and
looks after them between episodes, as the paper runs its cloud phones: minimal cleanup
between episodes (the phone's own ``go_home``), and a hard reset

- every ``every_episodes`` episodes a phone plays (state that persists piles up otherwise),
- after ``after_infra_failures`` infrastructure truncations in a row on one phone,
- when a phone fails its health check (it is quarantined: its calls failed too often).

A hard reset goes through the phone's provider (:meth:`PhoneProvider.reset
<darwin.envs.providers.PhoneProvider.reset>`: re-image a cloud phone, factory-reset a served
SimPhone) or, for a phone without one, its own :meth:`~darwin.envs.base.PhoneEnv.hard_reset`
(an in-process SimPhone's factory reset). A quarantined phone that is not healthy again
within ``replace_after_s`` is released and a spare from the provider takes its slot; with no
spare left, the slot retires and the run goes on with fewer phones. Every reset, replacement
and retirement is a :class:`PhoneEvent`, logged and handed to ``on_event`` (the run database
records them per phone).

    >>> import asyncio
    >>> from darwin.envs.fleet import PhoneFleet, ResetSchedule
    >>> from darwin.envs.sim.env import SimPhoneEnv
    >>> from darwin.task_registry import task_set
    >>> from darwin.types import Termination, TerminationReason, Trajectory
    >>> fleet = PhoneFleet([SimPhoneEnv(seed=0)], schedule=ResetSchedule(every_episodes=2))
    >>> def episode():
    ...     return Trajectory("e", task_set("base8")[0], termination=Termination(TerminationReason.STEP_BUDGET))
    >>> [asyncio.run(fleet.after_episode(0, episode())).name for _ in range(2)]
    ['sim-0', 'sim-0']
    >>> [(e.kind, e.reason) for e in fleet.events]
    [('hard_reset', 'every 2 episodes')]
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from darwin.envs.base import HardResetUnsupported, InfraError, PhoneEnv
from darwin.envs.providers import NoPhoneAvailable, PhoneProvider, ProviderError
from darwin.types import TerminationReason, Trajectory

__all__ = ["PhoneEvent", "PhoneFleet", "ResetSchedule"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResetSchedule:
    """When the fleet hard-resets a phone between episodes (``None``: never for that reason)."""

    every_episodes: int | None = None
    """Hard-reset a phone after every this many episodes it played."""
    after_infra_failures: int | None = None
    """Hard-reset a phone after this many infrastructure truncations in a row."""
    on_failed_health: bool = True
    """Hard-reset a quarantined phone (its health check failed) before anything else."""

    def __post_init__(self) -> None:
        for name in ("every_episodes", "after_infra_failures"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"ResetSchedule.{name} must be >= 1 or None, got {value}")

    @property
    def enabled(self) -> bool:
        return self.every_episodes is not None or self.after_infra_failures is not None or self.on_failed_health


@dataclass(frozen=True)
class PhoneEvent:
    """Something the fleet did to one phone."""

    phone: str
    kind: Literal["hard_reset", "replaced", "retired"]
    reason: str
    episodes: int
    """Episodes the phone had played in this run when it happened."""
    replacement: str | None = None
    """``replaced``: the spare that took the phone's slot."""
    ok: bool = True
    """``hard_reset``: whether the reset succeeded (a failed one is recorded too)."""


@dataclass
class _Slot:
    env: PhoneEnv
    episodes: int = 0
    infra_streak: int = 0


class PhoneFleet:
    """The phones of a run, one slot per rollout worker (module docstring: the policy).

    Args:
        envs: the phones in service, one per slot.
        provider: where the phones came from; it hard-resets them and hands out spares. ``None``:
            phones reset themselves (:meth:`PhoneEnv.hard_reset`) and there are no spares.
        schedule: when to hard-reset.
        replace_after_s: a quarantined phone still unhealthy this long after the first attempt to
            heal it is replaced by a spare (or retired when none is left).
        on_event: called with every :class:`PhoneEvent` (the run database records them).
        closers: called by :meth:`close` after the phones are released, last first (stop the
            provider that was started for the run, a private adb server).

    With no schedule and no phones that may be left quarantined (no provider, or one whose
    :attr:`~darwin.envs.providers.PhoneProvider.over_adb` is False: in-process SimPhones, Ray
    phones) the fleet only holds the phones (:attr:`active` is False: the rollout engine plays
    them as they are).
    """

    def __init__(
        self,
        envs: Sequence[PhoneEnv],
        *,
        provider: PhoneProvider | None = None,
        schedule: ResetSchedule | None = None,
        replace_after_s: float = 60.0,
        on_event: Callable[[PhoneEvent], None] | None = None,
        closers: Sequence[Callable[[], None]] = (),
    ) -> None:
        if not envs:
            raise ValueError("PhoneFleet needs at least one phone")
        if replace_after_s < 0:
            raise ValueError(f"replace_after_s must be >= 0, got {replace_after_s}")
        self._slots = [_Slot(env) for env in envs]
        self.provider = provider
        self.active = schedule is not None or (provider is not None and provider.over_adb)
        """Whether the fleet does anything between episodes (else the engine leaves it out)."""
        self.schedule = schedule or ResetSchedule(on_failed_health=False)
        self.replace_after_s = replace_after_s
        self.on_event = on_event
        self.closers = list(closers)
        self.events: list[PhoneEvent] = []
        self._retired: list[PhoneEnv] = []

    @property
    def envs(self) -> list[PhoneEnv]:
        """The phone of each slot now (a replaced phone's slot holds its spare)."""
        return [slot.env for slot in self._slots]

    def env(self, slot: int) -> PhoneEnv:
        return self._slots[slot].env

    # ------------------------------------------------------------------ between episodes
    async def after_episode(self, slot: int, trajectory: Trajectory) -> PhoneEnv | None:
        """Count the episode, hard-reset the phone if the schedule says so, and return the
        phone the slot plays on next (``None``: the slot retired, no healthy phone is left)."""
        state = self._slots[slot]
        state.episodes += 1
        infra = (
            trajectory.termination is not None and trajectory.termination.reason == TerminationReason.INFRA_TRUNCATED
        )
        state.infra_streak = state.infra_streak + 1 if infra else 0
        schedule = self.schedule
        reason = None
        if state.env.quarantined:
            return await self.recover(slot)
        if schedule.after_infra_failures is not None and state.infra_streak >= schedule.after_infra_failures:
            reason = f"{state.infra_streak} infrastructure truncations in a row"
        elif schedule.every_episodes is not None and state.episodes % schedule.every_episodes == 0:
            reason = f"every {schedule.every_episodes} episodes"
        if reason is not None:
            await self._hard_reset(state, reason)
            if state.env.quarantined:
                return await self.recover(slot)
        return state.env

    async def recover(self, slot: int) -> PhoneEnv | None:
        """A quarantined phone: hard-reset it until it is healthy, for up to ``replace_after_s``;
        then replace it with a spare, or retire the slot. Returns the slot's phone (``None``:
        retired). A phone that comes back by itself (``env.recovers``) is left to do so."""
        state = self._slots[slot]
        env = state.env
        if env.recovers:
            return env
        if self.schedule.on_failed_health and self._can_reset(env):
            deadline = time.monotonic() + self.replace_after_s
            attempt = 0
            while True:
                attempt += 1
                if await self._hard_reset(state, "health check failed (quarantined)") and await self._healthy(env):
                    return env
                if time.monotonic() >= deadline:
                    break
                await asyncio.sleep(min(2.0**attempt * 0.1, 5.0, max(0.0, deadline - time.monotonic())))
        return await self._replace(
            slot, f"quarantined and not healthy {self.replace_after_s:g} s after the first reset"
        )

    def _can_reset(self, env: PhoneEnv) -> bool:
        return self.provider is not None or type(env).hard_reset is not PhoneEnv.hard_reset

    async def _hard_reset(self, state: _Slot, reason: str) -> bool:
        env = state.env
        try:
            if self.provider is not None:
                await asyncio.to_thread(self.provider.reset, env)  # type: ignore[arg-type]  # a provider's fleet holds only the AdbPhoneEnvs it handed out
            else:
                await asyncio.to_thread(env.hard_reset)
        except (ProviderError, InfraError, HardResetUnsupported, OSError, TimeoutError) as exc:
            self._event(PhoneEvent(env.name, "hard_reset", f"{reason}; failed: {exc}", state.episodes, ok=False))
            return False
        state.infra_streak = 0
        self._event(PhoneEvent(env.name, "hard_reset", reason, state.episodes))
        return True

    @staticmethod
    async def _healthy(env: PhoneEnv) -> bool:
        """The health check after a reset: the phone answers a screenshot."""
        if env.quarantined:
            return False
        try:
            await env.ascreenshot((54, 120))
        except InfraError:
            return False
        return not env.quarantined

    async def _replace(self, slot: int, reason: str) -> PhoneEnv | None:
        state = self._slots[slot]
        old = state.env
        spare: PhoneEnv | None = None
        if self.provider is not None:
            try:
                spare = await asyncio.to_thread(self.provider.acquire)
            except NoPhoneAvailable as exc:
                logger.error("fleet: no spare for %s: %s", old.name, exc)
        await self._release(old)
        if spare is None:
            self._event(PhoneEvent(old.name, "retired", f"{reason}; no spare left", state.episodes))
            self._retired.append(old)
            return None
        self._event(PhoneEvent(old.name, "replaced", reason, state.episodes, replacement=spare.name))
        self._slots[slot] = _Slot(spare)
        return spare

    async def _release(self, env: PhoneEnv) -> None:
        try:
            if self.provider is not None:
                await asyncio.to_thread(self.provider.release, env)  # type: ignore[arg-type]  # a provider's fleet holds only the AdbPhoneEnvs it handed out
            else:
                env.close()
        except (ProviderError, InfraError, OSError) as exc:  # a dead phone may not even go home
            logger.warning("fleet: releasing %s: %s", env.name, exc)

    def _event(self, event: PhoneEvent) -> None:
        self.events.append(event)
        level = logging.INFO if event.kind == "hard_reset" and event.ok else logging.WARNING
        extra = f" -> {event.replacement}" if event.replacement else ""
        logger.log(
            level,
            "fleet: %s %s%s after %d episodes (%s)",
            event.phone,
            event.kind.replace("_", " "),
            extra,
            event.episodes,
            event.reason,
        )
        if self.on_event is not None:
            self.on_event(event)

    # ------------------------------------------------------------------ the end
    def close(self) -> None:
        """Release every phone in service to its provider (or close it), then stop an owned provider."""
        for slot in self._slots:
            try:
                if self.provider is not None:
                    self.provider.release(slot.env)  # type: ignore[arg-type]  # a provider's fleet holds only the AdbPhoneEnvs it handed out
                else:
                    slot.env.close()
            except (ProviderError, InfraError, OSError) as exc:
                logger.warning("fleet: releasing %s: %s", slot.env.name, exc)
        for close in reversed(self.closers):
            close()
        self.closers.clear()
