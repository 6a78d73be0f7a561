"""Phone providers: where phones come from, and how they are reset.

A :class:`PhoneProvider` lists phones, hands them out as connected
:class:`~darwin.envs.adb.AdbPhoneEnv` s (:meth:`~PhoneProvider.acquire`), takes them back
(:meth:`~PhoneProvider.release`), resets them softly (home button) or hard (through the
provider's own API: re-image a cloud phone, restart an emulator), reports their health
and heals quarantined ones. A new provider (e.g. for a cloud vendor's API) implements two
methods; docs/phones.md walks through one.

An experiment chooses its phones by naming a provider (``phones.provider``). These ship:

- :class:`SimPhones` (``sim``, the default): N in-process SimPhones, no adb at all; hard
  reset = factory reset.
- :class:`AdbDevices` (``adb``): a fixed list of serials or ``host:port`` addresses (USB
  phones, emulators, cloud phones you manage yourself) reached through an adb server; hard
  reset through a function you give.
- :class:`SimFarm` (``sim_farm``): starts N SimPhones served as ADB devices on 127.0.0.1
  (optionally with injected faults); hard reset = factory reset + adbd restart.
- :class:`~darwin.envs.ray_phones.RayPhones` (``ray``): phone groups on a Ray cluster's nodes.

    >>> from darwin.envs.providers import AdbDevices
    >>> provider = AdbDevices(["127.0.0.1:6101", "emulator-5554"])
    >>> [p.serial for p in provider.list_phones()]
    ['127.0.0.1:6101', 'emulator-5554']
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from darwin.envs.adb import AdbPhoneEnv
from darwin.envs.adb_apps import AppMap
from darwin.envs.adb_client import AdbServerClient
from darwin.envs.adb_config import AdbEnvConfig, PhoneHealth
from darwin.envs.base import InfraError
from darwin.envs.faults import FaultSpec, FaultyEnv, ServedFaults

__all__ = ["AdbDevices", "NoPhoneAvailable", "PhoneInfo", "PhoneProvider", "ProviderError", "SimFarm", "SimPhones"]

logger = logging.getLogger(__name__)


class ProviderError(RuntimeError):
    """A provider cannot do what was asked (no reset API, unknown phone...)."""


class NoPhoneAvailable(ProviderError):  # noqa: N818 - reads as a sentence
    """Every phone is in use, quarantined or unreachable."""


@dataclass(frozen=True)
class PhoneInfo:
    """One phone a provider offers: its provider-side id and its adb serial."""

    id: str
    serial: str
    """``host:port`` (reached with ``adb connect``) or a USB/emulator serial."""
    labels: dict[str, str] = field(default_factory=dict, hash=False, compare=False)


class PhoneProvider(ABC):
    """Lists phones and resets them through its own API; the rest is shared.

    Subclasses implement :meth:`list_phones` and :meth:`hard_reset` (and may override
    :meth:`prepare` / :meth:`retire` to reserve and free phones with a vendor API)::

        class MyCloud(PhoneProvider):
            def __init__(self, api, **kwargs):
                super().__init__(**kwargs)
                self.api = api

            def list_phones(self):
                return [PhoneInfo(p["id"], f"{p['host']}:{p['adb_port']}") for p in self.api.phones()]

            def hard_reset(self, phone):
                self.api.reimage(phone.id)
                self.api.wait_ready(phone.id, timeout=300)

    Args:
        config: settings of the :class:`~darwin.envs.adb.AdbPhoneEnv` s it creates.
        apps: app map for ``open_app`` (default: SPA-Bench + SimPhone apps).
    """

    over_adb: ClassVar[bool] = True
    """Its phones are :class:`~darwin.envs.adb.AdbPhoneEnv` s reached through this machine's adb
    server (a run starts one on ``phones.adb_server``'s port when none answers there), and a
    phone quarantined for failing calls stays so until the fleet hard-resets or replaces it.
    False where neither holds (in-process SimPhones are never quarantined; Ray phones use their
    nodes' adb servers and come back with their node): with no reset scheduled, the fleet then
    has nothing to do between episodes."""

    def __init__(self, config: AdbEnvConfig | None = None, apps: AppMap | None = None) -> None:
        self.config = config or AdbEnvConfig()
        self.apps = apps if apps is not None else AppMap.default()
        self._in_use: dict[str, AdbPhoneEnv | None] = {}  # None: being connected
        self._info: dict[str, PhoneInfo] = {}
        self._lock = threading.Lock()

    # -- what a provider implements ---------------------------------------------------------
    @abstractmethod
    def list_phones(self) -> list[PhoneInfo]:
        """Every phone this provider can hand out (in use or not)."""

    @abstractmethod
    def hard_reset(self, phone: PhoneInfo) -> None:
        """Reset ``phone`` through the provider's API (re-image, restart) and return once
        it accepts ADB connections again. Raise :class:`ProviderError` if impossible."""

    def prepare(self, phone: PhoneInfo) -> None:
        """Called before a phone is connected (e.g. reserve or start it with a vendor API)."""

    def connect(self, phone: PhoneInfo) -> AdbPhoneEnv:
        """The env that drives ``phone``: an :class:`~darwin.envs.adb.AdbPhoneEnv` connected to
        its serial (:class:`SimPhones` hands out in-process SimPhones instead)."""
        return AdbPhoneEnv(phone.serial, self.config, apps=self.apps, name=phone.id)

    def start(self) -> PhoneProvider:
        """Called once before the first :meth:`acquire` (a run starts its provider; SimFarm
        starts serving its phones here)."""
        return self

    def stop(self) -> None:
        """Called once at the end, after every phone is released."""

    def retire(self, phone: PhoneInfo) -> None:
        """Called after a phone is released (e.g. free the reservation)."""

    # -- shared ----------------------------------------------------------------------------
    def acquire(self) -> AdbPhoneEnv:
        """A connected env for a free phone; phones that fail to connect are skipped.

        Raises :class:`NoPhoneAvailable` when no phone can be had.
        """
        errors = []
        for phone in self.list_phones():
            with self._lock:
                if phone.id in self._in_use:
                    continue
                self._in_use[phone.id] = None  # reserved while connecting
            try:
                self.prepare(phone)
                env = self.connect(phone)
            except InfraError as exc:
                logger.warning("provider: %s (%s) is unreachable: %s", phone.id, phone.serial, exc)
                errors.append(f"{phone.id}: {exc}")
                with self._lock:
                    self._in_use.pop(phone.id, None)
                continue
            with self._lock:
                self._in_use[phone.id] = env
                self._info[phone.id] = phone
            return env
        detail = "; ".join(errors) if errors else "all phones are in use"
        raise NoPhoneAvailable(f"no phone available from {type(self).__name__}: {detail}")

    def acquire_many(self, count: int) -> list[AdbPhoneEnv]:
        """``count`` connected envs (all or nothing)."""
        envs: list[AdbPhoneEnv] = []
        try:
            for _ in range(count):
                envs.append(self.acquire())
        except NoPhoneAvailable:
            for env in envs:
                self.release(env)
            raise
        return envs

    def release(self, env: AdbPhoneEnv) -> None:
        """Give a phone back: home button (best effort), stop its env thread."""
        self._phone_of(env)  # a phone not handed out here raises before anything touches it
        env.go_home()
        self._close_and_forget(env)

    def _close_and_forget(self, env: AdbPhoneEnv) -> None:
        """Close a phone handed out by this provider and take it off the phones in use."""
        phone = self._phone_of(env)
        env.close()
        with self._lock:
            self._in_use.pop(phone.id, None)
        self.retire(phone)

    def soft_reset(self, env: AdbPhoneEnv) -> None:
        """Minimal cleanup between episodes: return to the launcher (state persists)."""
        env.go_home()

    def reset(self, env: AdbPhoneEnv) -> None:
        """Hard-reset the phone behind ``env`` through the provider and put it back in
        service (quarantine released; the next call reconnects)."""
        self.hard_reset(self._phone_of(env))
        release = getattr(env, "release_quarantine", None)
        if callable(release):  # in-process phones are never quarantined
            release()

    def health(self) -> dict[str, PhoneHealth]:
        """Health of every phone in use, by phone id."""
        with self._lock:
            envs = {k: v for k, v in self._in_use.items() if v is not None}
        return {phone_id: env.health() for phone_id, env in envs.items()}

    def heal(self) -> list[str]:
        """Hard-reset every quarantined phone in use; returns the ids put back in service."""
        healed = []
        with self._lock:
            envs = [(k, v) for k, v in self._in_use.items() if v is not None and v.quarantined]
        for phone_id, env in envs:
            try:
                self.reset(env)
            except (ProviderError, InfraError, OSError) as exc:
                logger.error("provider: hard reset of %s failed: %s", phone_id, exc)
                continue
            healed.append(phone_id)
        return healed

    def _phone_of(self, env: AdbPhoneEnv) -> PhoneInfo:
        with self._lock:
            for phone_id, used in self._in_use.items():
                if used is env:
                    return self._info[phone_id]
        raise ProviderError(f"{env!r} was not acquired from this {type(self).__name__}")


class AdbDevices(PhoneProvider):
    """A fixed list of phones reached through an adb server: serials or ``host:port`` addresses
    (``phones.provider = "adb"``, the phones in ``phones.devices``).

    Args:
        devices: serials (``emulator-5554``, USB ids) or ``host:port`` of cloud phones.
        reset: ``reset(phone)`` that re-images the phone through your infrastructure and
            returns when it is back; without it :meth:`hard_reset` raises.
        config, apps: see :class:`PhoneProvider`.
    """

    def __init__(
        self,
        devices: Sequence[str],
        config: AdbEnvConfig | None = None,
        apps: AppMap | None = None,
        reset: Callable[[PhoneInfo], None] | None = None,
    ) -> None:
        super().__init__(config, apps)
        if not devices:
            raise ValueError("AdbDevices needs at least one device serial or host:port (phones.devices)")
        duplicates = sorted({d for d in devices if list(devices).count(d) > 1})
        if duplicates:
            raise ValueError(f"devices listed twice: {duplicates}")
        self._phones = [PhoneInfo(id=d, serial=d) for d in devices]
        self._reset = reset

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> AdbDevices:
        """Read one serial or ``host:port`` per line (blank lines and ``#`` comments skipped)."""
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        devices = [line.split("#", 1)[0].strip() for line in lines]
        return cls([d for d in devices if d], **kwargs)

    def list_phones(self) -> list[PhoneInfo]:
        return list(self._phones)

    def hard_reset(self, phone: PhoneInfo) -> None:
        if self._reset is None:
            raise ProviderError(
                f"AdbDevices has no reset API for {phone.id}; pass reset=<function> "
                "that re-images the phone, or write a PhoneProvider for your vendor (docs/phones.md)"
            )
        self._reset(phone)


class SimFarm(PhoneProvider):
    """N SimPhones served as ADB devices on 127.0.0.1, as a phone provider.

    Args:
        count: number of phones.
        seed: phone ``i`` is ``SimPhone(seed=seed + i)``.
        faults: a :class:`~darwin.envs.faults.FaultSpec` (or its string form) injected into
            every served phone, each with its own RNG.
        port_base: first port (phone ``i`` on ``port_base + i``), or ``None`` for free ports.
        adb_port: the adb server the envs talk to (shorthand for ``config.adb_port``).
        config: env settings (default :meth:`AdbEnvConfig.for_sim`).
        log_limit: per-phone cap of the command log (``None``: unbounded).

    Serving needs no adb server; :meth:`acquire` does. Use it as a context manager::

        with SimFarm(count=16, faults="drop=0.01,crash=0.001", adb_port=5037) as farm:
            envs = farm.acquire_many(16)
            ...
            farm.backends[0].phone.state      # the SimPhone behind phone 0
            farm.servers[0].command_log       # every command it received
    """

    def __init__(
        self,
        count: int,
        seed: int = 0,
        faults: FaultSpec | str | None = None,
        port_base: int | None = None,
        adb_port: int | None = None,
        config: AdbEnvConfig | None = None,
        apps: AppMap | None = None,
        perturbation: Any = None,
        log_limit: int | None = None,
    ) -> None:
        from darwin.envs.sim.device import SimDeviceBackend

        if count < 1:
            raise ValueError(f"SimFarm needs count >= 1, got {count}")
        if config is None:
            config = AdbEnvConfig.for_sim(**({"adb_port": adb_port} if adb_port else {}))
        elif adb_port is not None:
            config = config.model_copy(update={"adb_port": adb_port})
        super().__init__(config, apps)
        self.count = count
        self.faults = FaultSpec.parse(faults) if isinstance(faults, str) else (faults or FaultSpec())
        self.port_base = port_base
        self.log_limit = log_limit
        self.backends = [
            SimDeviceBackend(seed=seed + i, perturbation=perturbation, serial=f"darwin-sim-{seed + i}")
            for i in range(count)
        ]
        self.served = [ServedFaults(self.faults, b, f"sim-{i}") for i, b in enumerate(self.backends)]
        """Per-phone fault injection (see :meth:`set_faults`)."""
        self._farm: Any = None

    # -- serving ---------------------------------------------------------------------------
    def start(self) -> SimFarm:
        """Start serving every phone (no adb server needed for this)."""
        from darwin.envs.sim.adbd import AdbdFarm

        if self._farm is not None:
            raise RuntimeError("SimFarm is already started")
        farm = AdbdFarm([s.backend for s in self.served], port_base=self.port_base, log_limit=self.log_limit)
        for served, server in zip(self.served, farm.servers, strict=True):
            served.attach(server)
        farm.start()
        self._farm = farm
        if self.faults.enabled:
            logger.info("SimFarm: faults %s", self.faults)
        return self

    def stop(self) -> None:
        """Release every phone in use, disconnect them from the adb server and stop serving."""
        with self._lock:
            envs = [e for e in self._in_use.values() if e is not None]
        for env in envs:
            env.close()
        with self._lock:
            self._in_use.clear()
        if self._farm is not None:
            # Otherwise the adb server keeps redialing the stopped phones.
            client = AdbServerClient(self.config.adb_host, self.config.adb_port)
            for address in self._farm.addresses:
                try:
                    client.disconnect_device(address, time.monotonic() + 5)
                except InfraError as exc:
                    logger.debug("SimFarm: adb disconnect %s: %s", address, exc)
                    if exc.cause == "adb_server":
                        break  # no adb server: nothing to disconnect from
            self._farm.stop()
            self._farm = None

    def __enter__(self) -> SimFarm:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def farm(self) -> Any:
        """The :class:`~darwin.envs.sim.adbd.AdbdFarm` serving the phones."""
        if self._farm is None:
            raise RuntimeError("SimFarm is not started; use `with SimFarm(...) as farm:` or call start()")
        return self._farm

    @property
    def servers(self) -> list[Any]:
        """One :class:`~darwin.envs.sim.adbd.AdbdServer` per phone (command logs)."""
        return self.farm.servers

    @property
    def addresses(self) -> list[str]:
        return self.farm.addresses

    def set_faults(self, faults: FaultSpec | str, index: int | None = None) -> None:
        """Change the injected faults from now on, for one phone or (``index=None``) all."""
        spec = FaultSpec.parse(faults) if isinstance(faults, str) else faults
        for i, served in enumerate(self.served):
            if index is None or i == index:
                served.set_spec(spec)

    # -- PhoneProvider ---------------------------------------------------------------------
    def list_phones(self) -> list[PhoneInfo]:
        return [PhoneInfo(id=f"sim-{i}", serial=address) for i, address in enumerate(self.addresses)]

    def hard_reset(self, phone: PhoneInfo) -> None:
        """Factory-reset the SimPhone and restart its adbd (every connection is cut)."""
        index = self.addresses.index(phone.serial)
        server, backend = self.servers[index], self.backends[index]

        async def restart() -> None:
            if server.running:
                await server.stop()
            backend.reboot(reset=True)
            await server.start()

        self.farm.call(restart(), timeout=30)
        logger.info("SimFarm: %s hard-reset", phone.id)

    def phone_index(self, env: AdbPhoneEnv) -> int:
        """Which backend serves ``env``."""
        return self.addresses.index(env.serial)


class SimPhones(PhoneProvider):
    """N in-process SimPhones as a phone provider, no adb at all: ``phones.provider = "sim"``,
    every experiment's default. Phone ``i`` is ``SimPhoneEnv(seed + i)`` named ``sim-<seed + i>``,
    wrapped in a :class:`~darwin.envs.faults.FaultyEnv` when ``faults`` are injected; a hard
    reset is its factory reset.

        >>> provider = SimPhones(count=3, seed=10)
        >>> [env.name for env in provider.acquire_many(2)]
        ['sim-10', 'sim-11']
        >>> provider.acquire().name                   # the spare
        'sim-12'

    Args:
        count: phones (those in service plus the spares).
        seed: phone ``i`` is seeded ``seed + i``.
        perturbation: the SimPhones' perturbation settings.
        reset_between_episodes: every episode starts from the phone's initial state.
        fresh_initial_states: with ``reset_between_episodes``, every episode starts from a new
            initial state (:attr:`SimPhoneEnv.fresh_initial_states`; ``phones.initial_states='fresh'``).
        locale: the SimPhones' UI language (``"auto"``: each episode's task's, see :class:`SimPhoneEnv`).
        faults: infrastructure faults injected into every phone (a :class:`~darwin.envs.faults.FaultSpec`
            or its string form; ``phones.faults``), each phone with its own RNG.
        call_deadline_s: with ``faults``, how long an injected hang holds a call before it fails.
    """

    over_adb = False  # never quarantined: nothing to heal or replace unless a reset is scheduled

    def __init__(
        self,
        count: int,
        seed: int = 0,
        perturbation: Any = None,
        reset_between_episodes: bool = True,
        locale: str = "en",
        faults: FaultSpec | str | None = None,
        call_deadline_s: float = 10.0,
        fresh_initial_states: bool = False,
    ) -> None:
        super().__init__()
        if count < 1:
            raise ValueError(f"SimPhones needs count >= 1, got {count}")
        self._phones = [PhoneInfo(id=f"sim-{seed + i}", serial=f"sim-{seed + i}") for i in range(count)]
        self._seeds = {p.id: seed + i for i, p in enumerate(self._phones)}
        self.perturbation = perturbation
        self.reset_between_episodes = reset_between_episodes
        self.fresh_initial_states = fresh_initial_states
        self.locale = locale
        self.faults = FaultSpec.parse(faults) if isinstance(faults, str) else (faults or FaultSpec())
        self.call_deadline_s = call_deadline_s

    def list_phones(self) -> list[PhoneInfo]:
        return list(self._phones)

    def connect(self, phone: PhoneInfo) -> Any:  # a SimPhoneEnv: the shared machinery only needs a PhoneEnv
        from darwin.envs.sim.env import SimPhoneEnv

        env = SimPhoneEnv(
            seed=self._seeds[phone.id],
            perturbation=self.perturbation,
            name=phone.id,
            reset_between_episodes=self.reset_between_episodes,
            locale=self.locale,
            fresh_initial_states=self.fresh_initial_states,
        )
        if not self.faults.enabled:
            return env
        return FaultyEnv(env, self.faults, call_timeout_s=self.call_deadline_s)

    def release(self, env: AdbPhoneEnv) -> None:
        """Give a phone back without going home first: a SimPhone acquired again is built afresh."""
        self._close_and_forget(env)

    def hard_reset(self, phone: PhoneInfo) -> None:
        """Factory reset of the phone's SimPhone."""
        with self._lock:
            env = self._in_use.get(phone.id)
        if env is None:
            raise ProviderError(f"{phone.id} is not in use; acquire it first")
        env.hard_reset()
