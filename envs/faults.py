"""Fault injection for phones: one seeded spec for in-process and served SimPhones.

A :class:`FaultSpec` says how often each infrastructure failure happens. Draws come from
a ``random.Random`` per device, seeded from ``(spec.seed, device)``, so a run is
reproducible and the global RNG is never touched. The spec applies in two places:

- in process, :class:`FaultyEnv` wraps any :class:`~darwin.envs.base.PhoneEnv` and
  draws once per call (screenshot, execute, probe, go_home);
- served over ADB, :class:`ServedFaults` draws once per command the device receives
  (``darwin phones serve --faults SPEC`` and :class:`~darwin.envs.providers.SimFarm`):
  it delays or never answers the OPEN, cuts the TCP connection before or after the
  command runs, and stops the device's server for a crash or a reboot.

The spec as a string (``darwin phones serve --faults``), comma-separated entries:

=================================  ==========================================================
entry                              meaning (P: probability per command, 0..1)
=================================  ==========================================================
``drop=P[:before|after|any]``      cut the connection; ``after``: the command ran first, its
                                   answer is lost (default ``any``: half each)
``hang=P[:SECONDS|forever]``       never answer (default ``forever``) or answer after SECONDS
``slow=lognormal:MEDIAN:SIGMA``    every command waits a lognormal delay (MEDIAN seconds)
``stall=P:SECONDS``                occasionally wait SECONDS more
``crash=P[:DOWN]``                 the device's adbd dies; back after DOWN s (default 1), state kept
``reboot=P[:keep|reset][:DOWN]``   reboot: back after DOWN s (default 3) on the home screen,
                                   app data kept (default) or factory reset
``seed=N``                         seed of the per-device RNGs (default 0)
``scale=F``                        multiply every duration (tests: ``scale=0.05``)
=================================  ==========================================================

``none`` (or an empty string) is no faults.

    >>> from darwin.envs.faults import FaultSpec
    >>> spec = FaultSpec.parse("drop=0.01,hang=0.005,slow=lognormal:0.05:0.5,stall=0.01:3.0,crash=0.002,reboot=0.001:keep")
    >>> spec.hang_s is None, spec.reboot_mode, spec.crash_down_s
    (True, 'keep', 1.0)
    >>> FaultSpec.parse(str(spec)) == spec
    True
    >>> inj = spec.injector("phone-0")
    >>> [inj.draw().kind for _ in range(3)]
    ['slow', 'slow', 'slow']
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from darwin.actions import Action
from darwin.envs.base import InfraError, PhoneEnv

if TYPE_CHECKING:
    from darwin.envs.sim.adbd import AdbdServer
    from darwin.envs.sim.adbd_backend import ShellResult
    from darwin.envs.sim.device import SimDeviceBackend
    from darwin.types import Task

__all__ = ["FaultDraw", "FaultInjector", "FaultSpec", "FaultSpecError", "FaultyEnv", "ServedFaults"]

logger = logging.getLogger(__name__)


class FaultSpecError(ValueError):
    """A fault spec string is malformed; the message names the entry and the fix."""


_FORMAT_HELP = (
    "write comma-separated entries like 'drop=0.01,hang=0.005:forever,slow=lognormal:0.05:0.5,"
    "stall=0.01:3,crash=0.002:1,reboot=0.001:keep:3,seed=7,scale=1' (see docs/phones.md)"
)


class FaultSpec(BaseModel):
    """How often each infrastructure fault happens (per command) and how long it lasts.

    Durations are in seconds and multiplied by ``time_scale`` when injected.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = Field(default=0, description="seed of the per-device RNGs")
    drop: float = Field(default=0.0, ge=0, le=1, description="probability of cutting the connection")
    drop_when: Literal["before", "after", "any"] = Field(
        default="any", description="before the command runs, after it (effect kept, answer lost), or either"
    )
    hang: float = Field(default=0.0, ge=0, le=1, description="probability of not answering")
    hang_s: float | None = Field(default=None, gt=0, description="answer after this long; None: never")
    slow_median_s: float = Field(
        default=0.0, ge=0, description="median of the lognormal delay of every command (0: none)"
    )
    slow_sigma: float = Field(default=0.0, ge=0, description="sigma of the lognormal delay")
    stall: float = Field(default=0.0, ge=0, le=1, description="probability of a long stall")
    stall_s: float = Field(default=3.0, ge=0, description="length of a stall")
    crash: float = Field(
        default=0.0, ge=0, le=1, description="probability that adbd crashes (connections cut, port closed)"
    )
    crash_down_s: float = Field(default=1.0, ge=0, description="how long a crashed device stays unreachable")
    reboot: float = Field(default=0.0, ge=0, le=1, description="probability of a reboot")
    reboot_mode: Literal["keep", "reset"] = Field(
        default="keep", description="app data after a reboot: kept or factory reset"
    )
    reboot_down_s: float = Field(default=3.0, ge=0, description="how long a rebooting device stays unreachable")
    time_scale: float = Field(default=1.0, gt=0, description="multiplies every duration (tests run faster)")

    @model_validator(mode="after")
    def _total(self) -> FaultSpec:
        total = self.drop + self.hang + self.crash + self.reboot
        if total > 1:
            raise ValueError(f"drop + hang + crash + reboot = {total:g} > 1; lower the probabilities")
        return self

    @property
    def enabled(self) -> bool:
        """Whether any fault can happen."""
        return bool(self.drop or self.hang or self.slow_median_s or self.stall or self.crash or self.reboot)

    def injector(self, device: str | int) -> FaultInjector:
        """The fault source of one device (its own RNG, seeded from ``(seed, device)``)."""
        return FaultInjector(self, str(device))

    def scaled(self, seconds: float) -> float:
        return seconds * self.time_scale

    # -- the string form ------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str | None) -> FaultSpec:
        """Parse the CLI form (see the module docstring); raises :class:`FaultSpecError`."""
        text = (text or "").strip()
        if text in ("", "none"):
            return cls()
        values: dict[str, Any] = {}
        for entry in (e.strip() for e in text.split(",")):
            if not entry:
                continue
            key, sep, raw = entry.partition("=")
            key = key.strip()
            parts = raw.split(":") if raw else []
            if not sep or not parts:
                raise FaultSpecError(f"fault entry {entry!r} has no '=VALUE'; {_FORMAT_HELP}")
            try:
                values.update(cls._parse_entry(key, parts))
            except (ValueError, IndexError) as exc:
                raise FaultSpecError(f"fault entry {entry!r}: {exc}; {_FORMAT_HELP}") from None
        try:
            return cls(**values)
        except ValueError as exc:
            raise FaultSpecError(f"fault spec {text!r} is invalid: {exc}") from None

    @staticmethod
    def _parse_entry(key: str, parts: list[str]) -> dict[str, Any]:
        def prob(s: str) -> float:
            p = float(s)
            if not 0 <= p <= 1:
                raise ValueError(f"probability {s} is not within 0..1")
            return p

        def seconds(s: str) -> float:
            v = float(s)
            if v < 0 or not math.isfinite(v):
                raise ValueError(f"duration {s} must be a finite number >= 0")
            return v

        def at_most(n: int) -> None:
            if len(parts) > n:
                raise ValueError(f"too many ':' fields (at most {n})")

        if key == "seed":
            at_most(1)
            return {"seed": int(parts[0])}
        if key == "scale":
            at_most(1)
            return {"time_scale": float(parts[0])}
        if key == "drop":
            at_most(2)
            out: dict[str, Any] = {"drop": prob(parts[0])}
            if len(parts) > 1:
                if parts[1] not in ("before", "after", "any"):
                    raise ValueError(f"drop timing {parts[1]!r} is not before, after or any")
                out["drop_when"] = parts[1]
            return out
        if key == "hang":
            at_most(2)
            out = {"hang": prob(parts[0])}
            if len(parts) > 1 and parts[1] != "forever":
                out["hang_s"] = seconds(parts[1])
            return out
        if key == "slow":
            if parts[0] != "lognormal" or len(parts) != 3:
                raise ValueError("slow takes lognormal:MEDIAN_SECONDS:SIGMA")
            return {"slow_median_s": seconds(parts[1]), "slow_sigma": seconds(parts[2])}
        if key == "stall":
            if len(parts) != 2:
                raise ValueError("stall takes P:SECONDS")
            return {"stall": prob(parts[0]), "stall_s": seconds(parts[1])}
        if key == "crash":
            at_most(2)
            out = {"crash": prob(parts[0])}
            if len(parts) > 1:
                out["crash_down_s"] = seconds(parts[1])
            return out
        if key == "reboot":
            at_most(3)
            out = {"reboot": prob(parts[0])}
            for part in parts[1:]:
                if part in ("keep", "reset"):
                    out["reboot_mode"] = part
                else:
                    out["reboot_down_s"] = seconds(part)
            return out
        raise ValueError(f"unknown fault {key!r} (known: drop, hang, slow, stall, crash, reboot, seed, scale)")

    def __str__(self) -> str:
        parts = []
        if self.drop:
            parts.append(f"drop={self.drop:g}:{self.drop_when}")
        if self.hang:
            parts.append(f"hang={self.hang:g}:{'forever' if self.hang_s is None else f'{self.hang_s:g}'}")
        if self.slow_median_s:
            parts.append(f"slow=lognormal:{self.slow_median_s:g}:{self.slow_sigma:g}")
        if self.stall:
            parts.append(f"stall={self.stall:g}:{self.stall_s:g}")
        if self.crash:
            parts.append(f"crash={self.crash:g}:{self.crash_down_s:g}")
        if self.reboot:
            parts.append(f"reboot={self.reboot:g}:{self.reboot_mode}:{self.reboot_down_s:g}")
        parts.append(f"seed={self.seed}")
        if self.time_scale != 1:
            parts.append(f"scale={self.time_scale:g}")
        return ",".join(parts)


@dataclass(frozen=True)
class FaultDraw:
    """What happens to one command. Durations are already scaled."""

    delay_s: float = 0.0
    hang: bool = False
    hang_s: float | None = None
    drop: Literal["before", "after"] | None = None
    crash: bool = False
    reboot: bool = False

    @property
    def kind(self) -> str:
        """The most severe fault drawn (``"none"`` if nothing happens)."""
        for name, on in (
            ("crash", self.crash),
            ("reboot", self.reboot),
            ("hang", self.hang),
            ("drop", self.drop is not None),
        ):
            if on:
                return name
        return "slow" if self.delay_s > 0 else "none"


class FaultInjector:
    """Draws faults for one device from its own seeded RNG (thread-safe).

    ``counts`` tallies what was injected, by :attr:`FaultDraw.kind` (stalls separately).
    """

    def __init__(self, spec: FaultSpec, device: str) -> None:
        self.spec = spec
        self.device = device
        self._rng = random.Random(f"darwin-faults:{spec.seed}:{device}")
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def draw(self) -> FaultDraw:
        s = self.spec
        with self._lock:
            rng = self._rng
            u = rng.random()
            delay = 0.0
            if s.slow_median_s > 0:
                delay = rng.lognormvariate(math.log(s.slow_median_s), s.slow_sigma)
            stalled = rng.random() < s.stall
            if stalled:
                delay += s.stall_s
            when: Literal["before", "after"] = "before" if rng.random() < 0.5 else "after"
            if s.drop_when != "any":
                when = s.drop_when
            draw = FaultDraw(delay_s=s.scaled(delay))
            edges = (s.crash, s.reboot, s.hang, s.drop)
            if u < edges[0]:
                draw = FaultDraw(crash=True)
            elif u < sum(edges[:2]):
                draw = FaultDraw(reboot=True)
            elif u < sum(edges[:3]):
                draw = FaultDraw(
                    delay_s=draw.delay_s, hang=True, hang_s=None if s.hang_s is None else s.scaled(s.hang_s)
                )
            elif u < sum(edges):
                draw = FaultDraw(delay_s=draw.delay_s, drop=when)
            self.counts[draw.kind] += 1
            if stalled and draw.delay_s:
                self.counts["stall"] += 1
            return draw


# ======================================================================================
# In process
# ======================================================================================


class FaultyEnv(PhoneEnv):
    """Wrap a phone env with injected infrastructure faults (one draw per call).

    Faults become :class:`~darwin.envs.base.InfraError` with cause ``disconnect``
    (drop), ``deadline`` (a hang past ``call_timeout_s``), ``crash`` or ``reboot``; a
    crashed or rebooting phone is unreachable for the spec's downtime, and the next call
    waits for it (like a reconnect) up to ``recovery_timeout_s``, else fails with
    ``offline``. A reboot of a SimPhone env (one with a ``phone`` attribute) sends it home
    and keeps or resets its data. :meth:`go_home` never raises (as for ADB phones).

    >>> from darwin.envs.sim.env import SimPhoneEnv
    >>> env = FaultyEnv(SimPhoneEnv(seed=0), FaultSpec(drop=1.0, drop_when="before"))
    >>> try:
    ...     env.screenshot((54, 120))
    ... except InfraError as exc:
    ...     print(exc.cause)
    disconnect
    """

    def __init__(
        self,
        env: PhoneEnv,
        spec: FaultSpec,
        device: str | int | None = None,
        call_timeout_s: float = 10.0,
        recovery_timeout_s: float = 60.0,
    ) -> None:
        self.inner = env
        self.spec = spec
        self.injector = spec.injector(device if device is not None else env.name)
        self.device_size = env.device_size
        self.name = env.name
        self.call_timeout_s = call_timeout_s
        self.recovery_timeout_s = recovery_timeout_s
        self._down_until = 0.0

    def __getattr__(self, item: str) -> Any:  # last_error, phone ... of the wrapped env
        return getattr(self.inner, item)

    # -- the fault plan -------------------------------------------------------------------
    def _outage(self, draw: FaultDraw) -> InfraError:
        if draw.crash:
            self._down_until = time.monotonic() + self.spec.scaled(self.spec.crash_down_s)
            return InfraError("crash", f"{self.name}: injected crash")
        self._down_until = time.monotonic() + self.spec.scaled(self.spec.reboot_down_s)
        phone = getattr(self.inner, "phone", None)
        if phone is not None:
            from darwin.envs.sim.device import reboot_phone

            reboot_phone(phone, reset=self.spec.reboot_mode == "reset")
        return InfraError("reboot", f"{self.name}: injected reboot ({self.spec.reboot_mode})")

    def _wait_needed(self) -> float:
        left = self._down_until - time.monotonic()
        if left > self.recovery_timeout_s:
            raise InfraError("offline", f"{self.name} is down for {left:.1f} s more")
        return max(0.0, left)

    def _hang_wait(self, draw: FaultDraw) -> tuple[float, InfraError | None]:
        if draw.hang_s is None or draw.hang_s >= self.call_timeout_s:
            return self.call_timeout_s, InfraError(
                "deadline", f"{self.name}: no answer within {self.call_timeout_s:g} s (injected hang)"
            )
        return draw.hang_s, None

    def _call(self, fn: Any, *args: Any) -> Any:
        time.sleep(self._wait_needed())
        draw = self.injector.draw()
        if draw.crash or draw.reboot:
            raise self._outage(draw)
        time.sleep(draw.delay_s)
        if draw.hang:
            wait, error = self._hang_wait(draw)
            time.sleep(wait)
            if error is not None:
                raise error
        if draw.drop == "before":
            raise InfraError("disconnect", f"{self.name}: connection dropped (injected, before the call)")
        result = fn(*args)
        if draw.drop == "after":
            raise InfraError("disconnect", f"{self.name}: connection dropped (injected, after the call ran)")
        return result

    async def _acall(self, fn: Any, *args: Any) -> Any:
        await asyncio.sleep(self._wait_needed())
        draw = self.injector.draw()
        if draw.crash or draw.reboot:
            raise self._outage(draw)
        await asyncio.sleep(draw.delay_s)
        if draw.hang:
            wait, error = self._hang_wait(draw)
            await asyncio.sleep(wait)
            if error is not None:
                raise error
        if draw.drop == "before":
            raise InfraError("disconnect", f"{self.name}: connection dropped (injected, before the call)")
        result = await fn(*args)
        if draw.drop == "after":
            raise InfraError("disconnect", f"{self.name}: connection dropped (injected, after the call ran)")
        return result

    # -- PhoneEnv -------------------------------------------------------------------------
    def screenshot(self, size: tuple[int, int] | None = None) -> np.ndarray:
        return self._call(self.inner.screenshot, size)

    def execute(self, action: Action) -> None:
        self._call(self.inner.execute, action)

    def probe_state(self) -> dict[str, Any] | None:
        return self._call(self.inner.probe_state)

    def go_home(self) -> None:
        try:
            self._call(self.inner.go_home)
        except InfraError as exc:
            logger.warning("%s: go_home failed: %s", self.name, exc)

    def close(self) -> None:
        self.inner.close()

    def begin_task(self, task: Task) -> None:
        self.inner.begin_task(task)

    def hard_reset(self) -> None:
        """Reset the wrapped phone; the phone is up again at once (the downtime ends)."""
        self.inner.hard_reset()
        self._down_until = 0.0

    async def ascreenshot(self, size: tuple[int, int] | None = None) -> np.ndarray:
        return await self._acall(self.inner.ascreenshot, size)

    async def aexecute(self, action: Action) -> None:
        await self._acall(self.inner.aexecute, action)

    async def aprobe_state(self) -> dict[str, Any] | None:
        return await self._acall(self.inner.aprobe_state)

    async def ago_home(self) -> None:
        try:
            await self._acall(self.inner.ago_home)
        except InfraError as exc:
            logger.warning("%s: go_home failed: %s", self.name, exc)


# ======================================================================================
# Served over ADB
# ======================================================================================


class ServedFaults:
    """Inject a :class:`FaultSpec` into one served SimPhone (an adbd server + backend).

    ``hook`` goes to ``AdbdServer.before_command``; ``backend`` wraps the SimPhone
    backend (it cuts the connection after a command when the draw says ``drop=after``).
    Crashes and reboots stop the server (every connection is cut, the port refuses
    connections) and start it again on the same port after the downtime.

    Example::

        faults = ServedFaults(FaultSpec.parse("drop=0.01,crash=0.001"), SimDeviceBackend(seed=0), "sim-0")
        server = AdbdServer(faults.backend, before_command=faults.hook)
        faults.attach(server)
    """

    def __init__(self, spec: FaultSpec, backend: SimDeviceBackend, device: str) -> None:
        self.spec = spec
        self.injector = spec.injector(device)
        self.sim = backend
        self.backend = _DropAfterBackend(backend, self)
        self.server: AdbdServer | None = None
        self.outages: list[tuple[str, float, float]] = []
        """``(kind, start, end)`` of every crash/reboot (``time.monotonic()``), for tests."""
        self._drop_after: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._down = False
        self._tasks: set[asyncio.Task[None]] = set()

    def set_spec(self, spec: FaultSpec) -> None:
        """Change the faults from now on (the device keeps its RNG)."""
        self.spec = spec
        self.injector.spec = spec

    def attach(self, server: AdbdServer) -> None:
        """Install the hook on ``server`` (whose backend must be :attr:`backend`)."""
        self.server = server
        server.before_command = self.hook

    @property
    def down(self) -> bool:
        """Whether the device is in a crash or reboot right now."""
        return self._down

    def take_drop_after(self, raw_command: str) -> bool:
        with self._lock:
            if self._drop_after[raw_command] > 0:
                self._drop_after[raw_command] -= 1
                return True
            return False

    async def hook(self, service: str, command: str) -> None:
        from darwin.envs.sim.adbd_backend import DropConnection

        if not self.injector.spec.enabled:
            return
        draw = self.injector.draw()
        if draw.crash or draw.reboot:
            if not self._down and self.server is not None:
                self._down = True
                task = asyncio.get_running_loop().create_task(self._outage("crash" if draw.crash else "reboot"))
                self._tasks.add(task)  # the loop keeps only weak references to tasks
                task.add_done_callback(self._tasks.discard)
            raise DropConnection("injected " + ("crash" if draw.crash else "reboot"))
        if draw.delay_s:
            await asyncio.sleep(draw.delay_s)
        if draw.hang:
            if draw.hang_s is None:
                await asyncio.Event().wait()  # until the client or the server closes the stream
            else:
                await asyncio.sleep(draw.hang_s)
        if draw.drop == "before":
            raise DropConnection("injected drop")
        if draw.drop == "after":
            with self._lock:
                self._drop_after[command] += 1

    async def _outage(self, kind: str) -> None:
        assert self.server is not None
        spec = self.spec
        start = time.monotonic()
        down = spec.scaled(spec.crash_down_s if kind == "crash" else spec.reboot_down_s)
        logger.info("%s: injected %s, down for %.2f s", self.server.serial_name, kind, down)
        try:
            await self.server.stop()
            await asyncio.sleep(down)
            if kind == "reboot":
                self.sim.reboot(reset=spec.reboot_mode == "reset")
            with self._lock:
                self._drop_after.clear()
            await self.server.start()
        except OSError:
            logger.exception("%s: could not restart after the injected %s", self.server.serial_name, kind)
        finally:
            self._down = False
            self.outages.append((kind, start, time.monotonic()))


class _DropAfterBackend:
    """A backend that cuts the connection after a command when :class:`ServedFaults` says so."""

    def __init__(self, inner: SimDeviceBackend, faults: ServedFaults) -> None:
        self.inner = inner
        self.faults = faults
        self.serial_props = inner.serial_props

    def run(self, argv: list[str], raw_command: str) -> ShellResult:
        from darwin.envs.sim.adbd_backend import DropConnection

        result = self.inner.run(argv, raw_command)
        if self.faults.take_drop_after(raw_command):
            raise DropConnection("injected drop after the command ran")
        return result
