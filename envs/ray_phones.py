"""Phones on a Ray cluster: phone workers run as Ray actors on the nodes near their phones.

A :class:`PhoneHost` actor owns some phones on one node, built there by the group's phone
provider (``provider``, a component of the kind ``provider``): in-process SimPhones
(``sim``), ADB devices that node reaches (``adb``: USB phones, cloud phones on its network,
SimPhones served over adbd there), or the phones of a provider of your own named by import
path (its module must be importable on the node). On the driver each phone is a :class:`RayPhoneEnv`, an ordinary
:class:`~darwin.envs.base.PhoneEnv`: the rollout engine, workflows, batcher, buffer and
learner see no difference. Screenshots travel zlib-compressed (a 252x560 SimPhone frame is
~12 KB instead of 423 KB, small enough to ride in the actor's reply instead of the object
store).

When a node dies, the calls in flight and every later call raise
``InfraError("node_lost", detail)``: the workflow ends each running episode as an
infrastructure truncation with that cause, and completed episodes are already on the
driver. While the node is gone its phones report :attr:`RayPhoneEnv.quarantined` (workers
stop giving them episodes); a background thread watches for a node that matches the
placement again (bounded exponential backoff), re-creates the actor there and puts the
phones back in service.

Placement (:class:`RayPhoneGroup`): by node ``labels`` (``ray start --labels``), by a custom
``resource`` (``ray start --resources``), by ``node_ip``, by ``node_id``, or anywhere
(spread over the live nodes). The configuration is typed and validated before Ray starts::

    >>> from darwin.components import ComponentSpec
    >>> from darwin.envs.ray_phones import RayPhoneGroup, RayPhonesConfig
    >>> config = RayPhonesConfig(address="10.0.0.2:6379", groups=(
    ...     RayPhoneGroup(labels={"phones": "eu"}, count=4, seed=0, actors=2),
    ...     RayPhoneGroup(resource="phones-us", provider=ComponentSpec(name="adb"), devices=("10.1.0.7:5555",)),
    ... ))
    >>> config.total_phones
    5
    >>> RayPhoneGroup(node_ip="10.0.0.3", labels={"phones": "eu"}, count=1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    pydantic_core._pydantic_core.ValidationError: ...
    ... place a group by at most one of node_id, node_ip, labels, resource (got node_ip, labels)...

Building the phones connects to the cluster (``ray.init(address)``) and starts the actors::

    envs = build_ray_phones(config)                   # list[RayPhoneEnv]
    darwin.evaluate.evaluate(tasks, envs, make_actor)  # as with any phones

An experiment runs its phones there with ``phones.provider = "ray"`` and the groups in
``phones.ray``: :class:`RayPhones` is the provider that starts the hosts and hands out their
phones (``darwin run --ray-address ADDR`` sets both for a sim experiment).
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from darwin.actions import Action
from darwin.components import BUILTINS, ComponentSpec, build_component, check_component, resolve_component
from darwin.envs.adb_config import AdbEnvConfig
from darwin.envs.base import InfraError, PhoneEnv, SetupUnsupported
from darwin.envs.providers import AdbDevices, PhoneInfo, PhoneProvider, ProviderError, SimPhones
from darwin.envs.sim.perturb import PerturbationConfig
from darwin.types import StateSetup, Task

if TYPE_CHECKING:
    from ray.actor import ActorHandle

__all__ = [
    "NODE_LOST",
    "HostedPhones",
    "PhoneHost",
    "RayPhoneEnv",
    "RayPhoneGroup",
    "RayPhoneHost",
    "RayPhones",
    "RayPhonesConfig",
    "RayPhonesError",
    "build_ray_phones",
    "check_ray_address",
    "connect_ray",
]

logger = logging.getLogger(__name__)

NODE_LOST = "node_lost"
"""The ``InfraError`` cause of a call whose phone host (its Ray node) died or stopped answering."""

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")
_START_HINT = (
    "start a cluster with `ray start --head --port=6379` on the head machine and "
    '`ray start --address=HEAD:6379 --labels=\'{"phones": "eu"}\'` (or --resources=\'{"phones-eu": 1}\') '
    "on each phone machine, then pass --ray-address HEAD:6379 (docs/scale.md)"
)


class RayPhonesError(ProviderError):
    """The cluster is unreachable, no node matches a placement, or a phone host failed to start."""


# ======================================================================================
# Configuration
# ======================================================================================


class RayPhoneGroup(BaseModel):
    """Phones served by actors on one node (or a set of interchangeable nodes).

    Place the group by exactly one of ``node_id``, ``node_ip``, ``labels`` or ``resource``,
    or by none (anywhere: the actors spread over the live nodes). Labels and resources
    survive a node's restart, so the phones come back with it; a ``node_id`` names one
    raylet's lifetime (a restarted node has a new id), so its phones stay quarantined.

    ``provider`` names the phones: each host builds it on its node with its share of the
    group's phones (phone ``i`` seeded ``seed + i``, or ``devices[i]``), ``config`` (the
    ``adb`` settings) and the experiment's SimPhone settings (``perturbation``,
    ``reset_between_episodes``, ``locale``), the ones its ``__init__`` takes; the spec's own
    kwargs win, except for what the group owns (count, seed, devices, adb).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    node_id: str | None = Field(None, description="a Ray node id (hex), as in `ray list nodes`")
    node_ip: str | None = Field(None, description="the IP address of the node (must be the only live node with it)")
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="node labels the host needs, e.g. {'phones': 'eu'} (`ray start --labels`); exact values",
    )
    resource: str | None = Field(
        None,
        description="a custom resource the host needs, e.g. 'phones-eu' (`ray start --resources='{\"phones-eu\": 1}'`)",
    )
    provider: ComponentSpec = Field(
        default_factory=lambda: ComponentSpec(name="sim"),
        description="the phones, a phone provider each host builds on its node: 'sim' (SimPhones in the host's "
        "process), 'adb' (`devices` the node reaches through its adb server), 'sim_farm', or an import path "
        "'module:Class' of a PhoneProvider importable there; not 'ray'",
    )
    count: int = Field(
        0, ge=0, le=4096, description="how many phones (sim: SimPhones seeded seed, seed+1, ...; adb: 0, from devices)"
    )
    seed: int = Field(0, ge=0, description="the first phone's seed (SimPhones)")
    devices: tuple[str, ...] = Field((), description="adb: serials or host:port of the phones, as the node sees them")
    adb: AdbEnvConfig = Field(
        default_factory=AdbEnvConfig,
        description="adb: env settings; adb_host/adb_port name the adb server on the node (AdbEnvConfig.for_sim() for served SimPhones)",
    )
    actors: int = Field(
        1, ge=1, le=1024, description="host processes the phones are split over (a SimPhone renders on its host's core)"
    )

    @field_validator("labels")
    @classmethod
    def _plain_labels(cls, labels: dict[str, str]) -> dict[str, str]:
        bad = [f"{k}={v}" for k, v in labels.items() if not (_LABEL.match(k) and _LABEL.match(v))]
        if bad:
            raise ValueError(
                f"labels {bad} are not plain names; give exact values such as {{'phones': 'eu'}} (no selector operators)"
            )
        return labels

    @model_validator(mode="after")
    def _check(self) -> RayPhoneGroup:
        problems = []
        targets = [name for name in ("node_id", "node_ip", "labels", "resource") if getattr(self, name)]
        if len(targets) > 1:
            problems.append(
                f"place a group by at most one of node_id, node_ip, labels, resource (got {', '.join(targets)})"
            )
        try:
            cls = self.provider_class()
        except ValueError as exc:  # not a phone provider (a typo: with "did you mean"), or the Ray provider
            problems.append(str(exc))
            raise ValueError("; ".join(problems)) from None
        name = self.provider.name
        if issubclass(cls, SimPhones):
            if self.count < 1:
                problems.append(f"provider {name!r} needs count >= 1 (the number of SimPhones)")
            if self.devices:
                problems.append(f"devices are for provider 'adb'; a {name!r} group has count and seed")
        elif issubclass(cls, AdbDevices) and not self.devices:
            problems.append(
                f"provider {name!r} needs devices: the serials or host:port of the phones as the node sees them"
            )
        elif not self.devices and self.count < 1:
            problems.append(f"provider {name!r} needs count >= 1: how many of its phones the group's hosts take")
        if self.devices:
            if self.count not in (0, len(self.devices)):
                problems.append(
                    f"provider {name!r} takes its phones from devices ({len(self.devices)}); leave count at 0"
                )
            duplicates = sorted({d for d in self.devices if self.devices.count(d) > 1})
            if duplicates:
                problems.append(f"devices listed twice: {duplicates}")
        owned = sorted(set(self.provider.kwargs) & {"count", "seed", "devices", "config"})
        if owned:
            problems.append(
                f"provider.kwargs sets {', '.join(owned)}, which the group gives each host (its share); set count, "
                "seed, devices or adb on the group instead"
            )
        if self.actors > max(1, self.phones):
            problems.append(f"actors={self.actors} is more than the group's {self.phones} phones; lower it")
        if problems:
            raise ValueError("; ".join(problems))
        # The provider's __init__ must take its kwargs and what each host gives it (as build_component will).
        check_component("provider", self.provider, named_context=None, **HostedPhones.of_group(self).provider_context())
        return self

    def provider_class(self) -> type[PhoneProvider]:
        """The :class:`~darwin.envs.providers.PhoneProvider` class ``provider`` names (not the Ray
        provider: a group's phones are on one node already)."""
        cls = resolve_component("provider", self.provider.name)
        others = ", ".join(repr(n) for n in sorted(BUILTINS["provider"]) if n != "ray")
        if not (isinstance(cls, type) and issubclass(cls, PhoneProvider)):
            raise ValueError(
                f"provider {self.provider.name!r} is not a PhoneProvider; name a built-in ({others}) or a subclass "
                "of darwin.envs.providers.PhoneProvider"
            )
        if issubclass(cls, RayPhones):
            raise ValueError(
                f"provider {self.provider.name!r} runs phone groups on a Ray cluster; a group's provider builds the "
                f"phones of one host on its node: name {others} or an import path 'module:Class' of a PhoneProvider"
            )
        return cls

    @property
    def in_process(self) -> bool:
        """The group's phones are SimPhones in its hosts' processes (provider 'sim')."""
        return issubclass(self.provider_class(), SimPhones)

    @property
    def phones(self) -> int:
        return self.count or len(self.devices)

    @property
    def what(self) -> str:
        """The phones in words (``darwin run --dry-run``)."""
        if self.in_process:
            return f"{self.phones} SimPhones"
        if issubclass(self.provider_class(), AdbDevices):
            return f"{self.phones} ADB devices"
        return f"{self.phones} phones from provider {self.provider.name!r}"

    @property
    def where(self) -> str:
        """The placement in words (logs, errors, ``darwin run --dry-run``)."""
        if self.node_id:
            return f"node {self.node_id}"
        if self.node_ip:
            return f"the node at {self.node_ip}"
        if self.labels:
            return "nodes labelled " + ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        if self.resource:
            return f"nodes with resource {self.resource!r}"
        return "any node"


class RayPhonesConfig(BaseModel):
    """Phones on a Ray cluster: the cluster's address and where each group of phones runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    address: str = Field(
        "auto",
        description="the cluster: 'auto' (the one `ray start` ran here), 'HOST:PORT' of the head's GCS, 'ray://HOST:10001', or 'local' (a private one-node Ray)",
    )
    groups: tuple[RayPhoneGroup, ...] = Field(min_length=1, description="the phones, by node")
    namespace: str = Field("darwin", min_length=1, description="Ray namespace of the phone hosts")
    call_timeout_s: float = Field(
        120.0,
        gt=0,
        description="deadline of one phone call through Ray; must exceed the phones' own deadlines (an ADB call "
        "with its reconnect: command_timeout_s + reconnect_timeout_s); it catches a node cut off without dying",
    )
    start_timeout_s: float = Field(
        120.0, gt=0, description="deadline for a host to start (worker process, imports, connecting its phones)"
    )
    recovery_backoff_s: float = Field(
        0.5, gt=0, description="first wait before looking for a lost host's node again (doubles)"
    )
    recovery_backoff_max_s: float = Field(10.0, gt=0, description="longest wait between looks")
    screenshot_codec: Literal["zlib", "raw"] = Field(
        "zlib",
        description="how screenshots travel: zlib level 1 (UI frames shrink 20-40x) or raw arrays through the object store",
    )
    num_cpus_per_actor: float = Field(
        0.0, ge=0, description="CPUs each host reserves in Ray's scheduler (0: placement by node only)"
    )
    resource_per_actor: float = Field(
        0.001, gt=0, le=1, description="how much of a group's custom resource each host takes"
    )

    @model_validator(mode="after")
    def _check(self) -> RayPhonesConfig:
        if self.recovery_backoff_max_s < self.recovery_backoff_s:
            raise ValueError(
                f"recovery_backoff_max_s={self.recovery_backoff_max_s} < recovery_backoff_s={self.recovery_backoff_s}; raise the maximum"
            )
        return self

    @property
    def total_phones(self) -> int:
        return sum(g.phones for g in self.groups)


class HostedPhones(BaseModel):
    """The phones one host builds on its node (sent to the actor): its share of a group's
    phones, from the group's provider.

        >>> [env.name for env in HostedPhones(count=2, seed=5).build()[1]]
        ['sim-5', 'sim-6']
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="sim"))
    count: int = Field(ge=1)
    seed: int = 0
    devices: tuple[str, ...] = ()
    adb: AdbEnvConfig = Field(default_factory=AdbEnvConfig)
    perturbation: PerturbationConfig | None = None
    reset_between_episodes: bool = False
    locale: Literal["auto", "en", "zh"] = "en"

    @classmethod
    def of_group(
        cls,
        group: RayPhoneGroup,
        start: int = 0,
        stop: int | None = None,
        perturbation: PerturbationConfig | None = None,
        reset_between_episodes: bool = False,
        locale: Literal["auto", "en", "zh"] = "en",
    ) -> HostedPhones:
        """Phones ``start`` to ``stop`` of ``group`` (all by default): phone ``i`` is seeded
        ``seed + i``, or is ``devices[i]``."""
        stop = group.phones if stop is None else stop
        return cls(
            provider=group.provider,
            count=stop - start,
            seed=group.seed + start,
            devices=group.devices[start:stop],
            adb=group.adb,
            perturbation=perturbation,
            reset_between_episodes=reset_between_episodes,
            locale=locale,
        )

    def provider_context(self) -> dict[str, object]:
        """What the host gives the provider (the arguments its ``__init__`` takes get them)."""
        context: dict[str, object] = {
            "count": self.count,
            "seed": self.seed,
            "config": self.adb,
            "perturbation": self.perturbation,
            "reset_between_episodes": self.reset_between_episodes,
            "locale": self.locale,
        }
        if self.devices:
            context["devices"] = list(self.devices)
        return context

    def build(self) -> tuple[PhoneProvider, list[PhoneEnv]]:
        """Build and start the provider, and take ``count`` phones from it (all or none)."""
        provider = build_component("provider", self.provider, named_context=None, **self.provider_context())
        assert isinstance(provider, PhoneProvider)  # checked with the group: a PhoneProvider, not RayPhones
        provider.start()
        try:
            envs: list[PhoneEnv] = [*provider.acquire_many(self.count)]
        except BaseException:
            provider.stop()
            raise
        return provider, envs


def hosted_phones(
    group: RayPhoneGroup,
    perturbation: PerturbationConfig | None = None,
    reset_between_episodes: bool = False,
    locale: Literal["auto", "en", "zh"] = "en",
) -> list[HostedPhones]:
    """The phones of each of ``group``'s ``actors`` hosts, in order: the group's phones split into
    ``actors`` consecutive shares (SimPhone ``i`` is named ``sim-<seed + i>``)."""
    shares = np.array_split(np.arange(group.phones), group.actors)
    return [
        HostedPhones.of_group(group, int(share[0]), int(share[-1]) + 1, perturbation, reset_between_episodes, locale)
        for share in shares
    ]


# ======================================================================================
# The actor (runs on the phones' node)
# ======================================================================================


@dataclass(frozen=True)
class PhoneFailure:
    """An ``InfraError`` raised on the host, returned as a value (Ray would wrap the
    exception, and ``InfraError`` does not survive pickling with its cause)."""

    cause: str
    detail: str


@dataclass(frozen=True)
class SetupRefused:
    """The phone has no state writes (``SetupUnsupported`` on the host): a configuration error."""

    message: str


@dataclass(frozen=True)
class HostInfo:
    """What a started host reports: where it runs and its phones' names and screen sizes."""

    node_id: str
    pid: int
    phones: tuple[tuple[str, tuple[int, int]], ...]


@dataclass(frozen=True)
class EncodedScreenshot:
    shape: tuple[int, ...]
    codec: Literal["zlib", "raw"]
    payload: Any
    """zlib: compressed bytes; raw: the array itself."""


def encode_screenshot(array: np.ndarray, codec: Literal["zlib", "raw"]) -> EncodedScreenshot:
    array = np.ascontiguousarray(array, dtype=np.uint8)
    if codec == "raw":
        return EncodedScreenshot(array.shape, "raw", array)
    return EncodedScreenshot(array.shape, "zlib", zlib.compress(array.data, 1))


def decode_screenshot(shot: EncodedScreenshot) -> np.ndarray:
    if shot.codec == "raw":
        # Arrays from the object store are read-only views that pin the object: copy.
        return np.array(shot.payload, dtype=np.uint8, copy=True)
    return np.frombuffer(zlib.decompress(shot.payload), np.uint8).reshape(shot.shape).copy()


class PhoneHost:
    """Owns ``phones`` on the node it runs on; every method takes the phone's index.

    It builds them with their provider (:meth:`HostedPhones.build`) on the node it runs on.
    Run as a Ray actor (async: ADB phones answer on their own threads, so one slow phone
    never holds up the host's others). Phone failures come back as :class:`PhoneFailure`
    values. Without Ray (a plain object) it serves the same calls in process, which is how
    the benchmark measures the hop::

        >>> import asyncio
        >>> from darwin.envs.ray_phones import HostedPhones, PhoneHost, decode_screenshot
        >>> host = PhoneHost(HostedPhones(count=1))
        >>> shot = asyncio.run(host.screenshot(0, (54, 120), "zlib"))
        >>> decode_screenshot(shot).shape
        (120, 54, 3)
    """

    def __init__(self, phones: HostedPhones) -> None:
        self.provider, self.envs = phones.build()

    async def ready(self) -> HostInfo:
        node_id = ""
        try:
            import ray

            if ray.is_initialized():
                node_id = ray.get_runtime_context().get_node_id()
        except ImportError:  # a plain object without Ray installed
            pass
        import os

        return HostInfo(
            node_id=node_id,
            pid=os.getpid(),
            phones=tuple((e.name, cast(tuple[int, int], tuple(e.device_size))) for e in self.envs),
        )

    async def screenshot(
        self, index: int, size: tuple[int, int] | None, codec: Literal["zlib", "raw"]
    ) -> EncodedScreenshot | PhoneFailure:
        try:
            return encode_screenshot(await self.envs[index].ascreenshot(size), codec)
        except InfraError as exc:
            return PhoneFailure(exc.cause, exc.detail)

    async def execute(self, index: int, action: Action) -> None | PhoneFailure:
        try:
            await self.envs[index].aexecute(action)
        except InfraError as exc:
            return PhoneFailure(exc.cause, exc.detail)
        return None

    async def go_home(self, index: int) -> None | PhoneFailure:
        try:
            await self.envs[index].ago_home()
        except InfraError as exc:
            return PhoneFailure(exc.cause, exc.detail)
        return None

    async def probe_state(self, index: int) -> dict[str, Any] | None | PhoneFailure:
        try:
            return await self.envs[index].aprobe_state()
        except InfraError as exc:
            return PhoneFailure(exc.cause, exc.detail)

    async def begin_task(self, index: int, task: Task) -> None | PhoneFailure:
        try:
            await self.envs[index].abegin_task(task)
        except InfraError as exc:
            return PhoneFailure(exc.cause, exc.detail)
        return None

    async def apply_setup(self, index: int, setup: Sequence[StateSetup]) -> None | PhoneFailure | SetupRefused:
        try:
            await self.envs[index].aapply_setup(setup)
        except InfraError as exc:
            return PhoneFailure(exc.cause, exc.detail)
        except SetupUnsupported as exc:
            return SetupRefused(str(exc))
        return None

    async def close(self) -> None:
        for env in self.envs:
            self.provider.release(env)  # type: ignore[arg-type]  # the provider's own phone, typed as its AdbPhoneEnv
        self.provider.stop()


_REMOTE_HOST: Any = None


def _remote_host_class() -> Any:
    global _REMOTE_HOST  # one ray.remote wrapper per process, made on first use
    if _REMOTE_HOST is None:
        ray = _import_ray()
        _REMOTE_HOST = ray.remote(PhoneHost)
    return _REMOTE_HOST


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayPhonesError("phones on a Ray cluster need Ray: pip install 'ray[default]'") from None
    return ray


def _node_lost_errors() -> tuple[type[BaseException], ...]:
    """Ray's ways of saying the actor or its node is gone or unreachable."""
    from ray import exceptions as rx

    errors: list[type[BaseException]] = [
        rx.RayActorError,
        rx.NodeDiedError,
        rx.GetTimeoutError,
        rx.ObjectLostError,
        TimeoutError,
    ]
    for name in ("ActorDiedError", "ActorUnavailableError", "OwnerDiedError", "ObjectFetchTimedOutError"):
        if hasattr(rx, name):
            errors.append(getattr(rx, name))
    return tuple(errors)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _explain(exc: BaseException) -> str:
    """One line out of Ray's multi-line actor errors: the exception name and its reason (for
    a host whose ``__init__`` raised, the error it raised: the traceback's last line)."""
    lines = [line.strip() for line in _ANSI.sub("", str(exc)).splitlines() if line.strip()]
    if getattr(exc, "actor_init_failed", False) and lines:
        return f"its start raised {lines[-1]}"[:400]
    if isinstance(exc, TimeoutError) and not lines:
        return "no answer in time"
    reason = next(
        (line for line in lines if "died because" in line or "unavailable" in line.lower()), lines[0] if lines else ""
    )
    return f"{type(exc).__name__}: {reason}"[:300]


# ======================================================================================
# The driver side
# ======================================================================================


def check_ray_address(address: str, timeout_s: float = 3.0) -> str:
    """The cluster address if a Ray head answers there (a TCP connect to its GCS port),
    else :class:`RayPhonesError` naming the address and how to start a cluster.

    ``'auto'`` looks for the cluster `ray start` recorded on this machine (or ``RAY_ADDRESS``);
    ``'local'`` needs no cluster. ``ray://`` addresses are checked the same way.
    """
    if address == "local":
        return address
    target = address
    if address == "auto":
        _import_ray()
        from ray._private import services

        try:
            found = services.canonicalize_bootstrap_address(address)
        except ConnectionError:
            found = None
        if not found:
            raise RayPhonesError(
                f"--ray-address auto: no Ray cluster was started on this machine (no `ray start` record, RAY_ADDRESS unset); {_START_HINT}"
            )
        target = found
    host, port = _split_address(target.removeprefix("ray://"), address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise RayPhonesError(
            f"no Ray cluster answers at {address} ({host}:{port}: {exc.strerror or exc}); {_START_HINT}"
        ) from None
    return target


def _split_address(hostport: str, original: str) -> tuple[str, int]:
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RayPhonesError(f"Ray address {original!r} is not HOST:PORT, 'ray://HOST:PORT', 'auto' or 'local'")
    return host.strip("[]"), int(port)


def connect_ray(config: RayPhonesConfig) -> None:
    """Connect this process to the cluster unless it already is (a caller's own ``ray.init`` wins)."""
    ray = _import_ray()
    if ray.is_initialized():
        return
    address = None if config.address == "local" else check_ray_address(config.address)
    try:
        ray.init(
            address=address,
            namespace=config.namespace,
            log_to_driver=False,
            include_dashboard=False if address is None else None,
        )
    except ConnectionError as exc:
        raise RayPhonesError(f"cannot join the Ray cluster at {config.address}: {exc}; {_START_HINT}") from None
    logger.info("joined Ray cluster at %s (%d live nodes)", config.address, sum(1 for n in ray.nodes() if n["Alive"]))


def _live_nodes() -> list[dict[str, Any]]:
    ray = _import_ray()
    return [n for n in ray.nodes() if n.get("Alive")]


class RayPhoneHost:
    """The driver's handle on one :class:`PhoneHost` actor: starts it where its group is
    placed, forwards calls, notices when its node is lost and starts a new actor when a
    matching node is back.

    Args:
        phones: what the host serves (built on its node).
        group: where it runs.
        config: timeouts, backoff, codec.
        name: for logs.
    """

    def __init__(self, phones: HostedPhones, group: RayPhoneGroup, config: RayPhonesConfig, name: str) -> None:
        # Not started yet: build_ray_phones launches every host, then waits for them all.
        self.phones = phones
        self.group = group
        self.config = config
        self.name = name
        self.losses = 0
        """How many times the host's node was lost."""
        self.recoveries = 0
        self.info: HostInfo | None = None
        self._lock = threading.Lock()
        self._actor: ActorHandle | None = None
        self._generation = 0
        self._lost: str | None = None  # why, while the node is gone
        self._closed = threading.Event()
        self._users = 0
        self._recovery: threading.Thread | None = None
        self._errors = _node_lost_errors()
        self._starting: Any = None

    def __repr__(self) -> str:
        state = "closed" if self._closed.is_set() else "lost" if self._lost else "ok"
        return f"RayPhoneHost({self.name!r}, {self.group.where}, node={self.node_id[:12] or '-'}, {state})"

    # -- state ---------------------------------------------------------------------------------
    @property
    def lost(self) -> str | None:
        """Why the host is out of service (its node was lost), or ``None`` while it serves."""
        return self._lost

    @property
    def node_id(self) -> str:
        return self.info.node_id if self.info is not None else ""

    # -- starting ------------------------------------------------------------------------------
    def _options(self) -> dict[str, Any]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        options: dict[str, Any] = {
            "num_cpus": self.config.num_cpus_per_actor,
            "max_restarts": 0,
            "max_task_retries": 0,
            "namespace": self.config.namespace,
        }
        group = self.group
        if group.node_id:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(group.node_id, soft=False)
        elif group.node_ip:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(self._node_at_ip(group.node_ip), soft=False)
        elif group.labels:
            options["label_selector"] = dict(group.labels)
        elif group.resource:
            options["resources"] = {group.resource: self.config.resource_per_actor}
        else:
            options["scheduling_strategy"] = "SPREAD"
        return options

    def _matching_nodes(self) -> list[str]:
        """Ids of the live nodes this host may run on."""
        group = self.group
        nodes = _live_nodes()
        if group.node_id:
            return [n["NodeID"] for n in nodes if n["NodeID"] == group.node_id]
        if group.node_ip:
            return [n["NodeID"] for n in nodes if n.get("NodeManagerAddress") == group.node_ip]
        if group.labels:
            return [
                n["NodeID"] for n in nodes if all((n.get("Labels") or {}).get(k) == v for k, v in group.labels.items())
            ]
        if group.resource:
            return [
                n["NodeID"]
                for n in nodes
                if (n.get("Resources") or {}).get(group.resource, 0) >= self.config.resource_per_actor
            ]
        return [n["NodeID"] for n in nodes]

    def _node_at_ip(self, ip: str) -> str:
        matches = self._matching_nodes()
        if len(matches) != 1:
            what = (
                "no live Ray node"
                if not matches
                else f"{len(matches)} live Ray nodes ({', '.join(m[:12] for m in matches)})"
            )
            raise RayPhonesError(f"{what} at {ip}; place the group by node_id, labels or resource instead")
        return matches[0]

    def launch(self) -> Any:
        """Create the actor where the group is placed; returns the reference to its ``ready``
        reply (:meth:`finish_start` waits for it), so many hosts start at once."""
        if not self._matching_nodes():
            raise RayPhonesError(f"phone host {self.name}: no live Ray node is among {self.group.where}; {_START_HINT}")
        try:
            remote = _remote_host_class().options(**self._options())
        except ValueError as exc:  # an older Ray without label_selector
            raise RayPhonesError(
                f"phone host {self.name}: this Ray ({_import_ray().__version__}) cannot place on {self.group.where}: {exc}; "
                "upgrade Ray or place the group by resource"
            ) from None
        actor = remote.remote(self.phones)
        self._starting = actor
        return actor.ready.remote()

    def finish_start(self, ready: Any) -> None:
        """Wait until the launched actor's phones answer; then it serves."""
        ray = _import_ray()
        actor, self._starting = self._starting, None
        try:
            info: HostInfo = ray.get(ready, timeout=self.config.start_timeout_s)
        except self._errors as exc:
            self._kill(actor)
            why = (
                f"not up within start_timeout_s={self.config.start_timeout_s:.0f}"
                if isinstance(exc, TimeoutError)
                else _explain(exc)
            )
            raise RayPhonesError(f"phone host {self.name} on {self.group.where} did not start: {why}") from None
        with self._lock:
            if self._closed.is_set():  # closed while starting: nobody will use it
                closed = True
            else:
                closed = False
                self._actor, self.info, self._lost = actor, info, None
                self._generation += 1
        if closed:
            self._kill(actor)
            return
        logger.info(
            "phone host %s serves %d phone(s) on node %s (pid %d)",
            self.name,
            len(info.phones),
            info.node_id[:12],
            info.pid,
        )

    # -- calls -----------------------------------------------------------------------------------
    def _submit(self, method: str, *args: Any) -> tuple[Any, int]:
        with self._lock:
            if self._closed.is_set():
                raise InfraError("closed", f"phone host {self.name} was closed")
            if self._lost is not None:
                raise InfraError(NODE_LOST, self._lost)
            actor, generation = self._actor, self._generation
        assert actor is not None
        return getattr(actor, method).remote(*args), generation

    def call(self, method: str, *args: Any) -> Any:
        """Run ``method`` on the host and wait (blocking) for its reply."""
        ray = _import_ray()
        ref, generation = self._submit(method, *args)
        try:
            reply = ray.get(ref, timeout=self.config.call_timeout_s)
        except self._errors as exc:
            raise self._on_lost(generation, exc) from None
        return _unwrap(reply)

    async def acall(self, method: str, *args: Any) -> Any:
        """Run ``method`` on the host; the event loop stays free while it runs."""
        ref, generation = self._submit(method, *args)
        try:
            reply = await asyncio.wait_for(asyncio.wrap_future(ref.future()), self.config.call_timeout_s)
        except self._errors as exc:
            raise self._on_lost(generation, exc) from None
        return _unwrap(reply)

    # -- losing and recovering -----------------------------------------------------------------------
    def _on_lost(self, generation: int, exc: BaseException) -> InfraError:
        """Take the host out of service (once per actor) and start looking for its node."""
        detail = f"phone host {self.name} on node {self.node_id[:12]} ({self.group.where}): {_explain(exc)}"
        if isinstance(exc, TimeoutError):  # asyncio's or Ray's GetTimeoutError: a node cut off, not (yet) dead
            detail = f"phone host {self.name} on node {self.node_id[:12]} ({self.group.where}) did not answer within call_timeout_s={self.config.call_timeout_s:g}"
        with self._lock:
            if generation != self._generation or self._lost is not None or self._closed.is_set():
                return InfraError(NODE_LOST, self._lost or detail)
            self._lost = detail
            self.losses += 1
            actor = self._actor
            self._recovery = threading.Thread(target=self._recover, name=f"ray-phones-{self.name}", daemon=True)
            self._recovery.start()
        logger.warning(
            "%s; its %d phone(s) are quarantined until a node among %s is back",
            detail,
            self.phones.count,
            self.group.where,
        )
        self._kill(actor)
        return InfraError(NODE_LOST, detail)

    def _recover(self) -> None:
        """Look for a matching live node with bounded exponential backoff; start a new actor there."""
        delay = self.config.recovery_backoff_s
        not_back: tuple[type[BaseException], ...] = (RayPhonesError, *self._errors)
        while not self._closed.wait(delay):
            try:
                if self._matching_nodes():
                    self.finish_start(self.launch())
                    if self._closed.is_set():
                        return
                    self.recoveries += 1
                    logger.warning(
                        "phone host %s is back on node %s: its phones serve again", self.name, self.node_id[:12]
                    )
                    return
            except not_back as exc:
                logger.info("phone host %s: not back yet: %s", self.name, exc)
            delay = min(2 * delay, self.config.recovery_backoff_max_s)

    def _kill(self, actor: Any) -> None:
        if actor is None:
            return
        ray = _import_ray()
        gone: tuple[type[BaseException], ...] = (ValueError, *self._errors)
        try:
            ray.kill(actor, no_restart=True)
        except gone as exc:  # already gone
            logger.debug("phone host %s: kill: %s", self.name, exc)

    # -- lifetime ----------------------------------------------------------------------------------
    def acquire(self) -> None:
        with self._lock:
            self._users += 1

    def release(self) -> None:
        """Called by each phone's ``close``; the last one stops the actor."""
        with self._lock:
            self._users -= 1
            if self._users > 0:
                return
        self.close()

    def close(self) -> None:
        """Stop the actor (and one still starting); calls fail with cause ``closed`` from now on."""
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            actors, self._actor, self._starting = (self._actor, self._starting), None, None
        for actor in actors:
            self._kill(actor)


def _unwrap(reply: Any) -> Any:
    if isinstance(reply, PhoneFailure):
        raise InfraError(reply.cause, reply.detail)
    if isinstance(reply, SetupRefused):
        raise SetupUnsupported(reply.message)
    return reply


class RayPhoneEnv(PhoneEnv):
    """A phone served by a :class:`PhoneHost` actor on another node, as a ``PhoneEnv``.

    Every call goes to the host; a phone failure there raises the same ``InfraError`` it
    would in process, and a lost node raises ``InfraError("node_lost", detail)``.
    :attr:`quarantined` is true while the node is gone. Build them with
    :func:`build_ray_phones`; without Ray, :class:`PhoneHost` shows the calls::

        envs = build_ray_phones(RayPhonesConfig(address="auto", groups=(RayPhoneGroup(labels={"phones": "eu"}, count=4),)))
        envs[0].node_id            # where it runs
        envs[0].screenshot((252, 560)).shape   # (560, 252, 3)
    """

    def __init__(self, host: RayPhoneHost, index: int) -> None:
        assert host.info is not None
        self.host = host
        self.index = index
        self.name, size = host.info.phones[index]
        self.device_size = (int(size[0]), int(size[1]))
        self._closed = False
        host.acquire()

    recovers = True  # the host re-creates its actor when the node is back

    def __repr__(self) -> str:
        return f"RayPhoneEnv({self.name!r}, host={self.host!r})"

    @property
    def quarantined(self) -> bool:
        return self.host.lost is not None

    @property
    def node_id(self) -> str:
        """The Ray node the phone's host runs on now."""
        return self.host.node_id

    def screenshot(self, size: tuple[int, int] | None = None) -> np.ndarray:
        return decode_screenshot(self.host.call("screenshot", self.index, size, self.host.config.screenshot_codec))

    def execute(self, action: Action) -> None:
        self.host.call("execute", self.index, action)

    def go_home(self) -> None:
        """Best effort, like every phone's: a lost node is logged, never raised."""
        try:
            self.host.call("go_home", self.index)
        except InfraError as exc:
            logger.warning("%s: go_home failed: %s", self.name, exc)

    def probe_state(self) -> dict[str, Any] | None:
        return self.host.call("probe_state", self.index)

    def apply_setup(self, setup: Sequence[StateSetup]) -> None:
        self.host.call("apply_setup", self.index, list(setup))

    def begin_task(self, task: Task) -> None:
        self.host.call("begin_task", self.index, task)

    async def ascreenshot(self, size: tuple[int, int] | None = None) -> np.ndarray:
        return decode_screenshot(
            await self.host.acall("screenshot", self.index, size, self.host.config.screenshot_codec)
        )

    async def aexecute(self, action: Action) -> None:
        await self.host.acall("execute", self.index, action)

    async def ago_home(self) -> None:
        try:
            await self.host.acall("go_home", self.index)
        except InfraError as exc:
            logger.warning("%s: go_home failed: %s", self.name, exc)

    async def aprobe_state(self) -> dict[str, Any] | None:
        return await self.host.acall("probe_state", self.index)

    async def aapply_setup(self, setup: Sequence[StateSetup]) -> None:
        await self.host.acall("apply_setup", self.index, list(setup))

    async def abegin_task(self, task: Task) -> None:
        await self.host.acall("begin_task", self.index, task)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.host.release()


def build_ray_phones(
    config: RayPhonesConfig,
    perturbation: PerturbationConfig | None = None,
    reset_between_episodes: bool = False,
    locale: Literal["auto", "en", "zh"] = "en",
) -> list[RayPhoneEnv]:
    """Join the cluster, start every group's hosts where they are placed and return one
    :class:`RayPhoneEnv` per phone (groups in order). The groups' providers get ``perturbation``,
    ``reset_between_episodes`` and ``locale`` where they take them (SimPhones do). Raises :class:`RayPhonesError` with the fix when the cluster
    is unreachable, no node matches a placement or a host fails to start; hosts already
    started are stopped again."""
    connect_ray(config)
    hosts: list[RayPhoneHost] = []
    try:
        for g, group in enumerate(config.groups):
            for a, phones in enumerate(hosted_phones(group, perturbation, reset_between_episodes, locale)):
                hosts.append(RayPhoneHost(phones, group, config, name=f"g{g}.{a}"))
        ready = [host.launch() for host in hosts]  # every actor starts at once
        for host, ref in zip(hosts, ready, strict=True):
            host.finish_start(ref)
    except BaseException:
        for host in hosts:
            host.close()  # stops what started
        raise
    return [RayPhoneEnv(host, i) for host in hosts for i in range(host.phones.count)]


class RayPhones(PhoneProvider):
    """The phones of a Ray cluster's phone groups as a provider: ``phones.provider = "ray"``,
    with the cluster and the groups in ``phones.ray``. :meth:`start` joins the cluster and
    starts every group's hosts (:func:`build_ray_phones`); each phone it hands out is a
    :class:`RayPhoneEnv`, in the groups' order.

    A phone whose node is lost comes back with it (:attr:`RayPhoneEnv.recovers`), so the
    fleet leaves these phones alone unless a reset is scheduled; a hard reset through the
    cluster is not supported (:meth:`hard_reset` raises).

    Args:
        ray: the cluster's address and where each group of phones runs.
        perturbation, reset_between_episodes, locale: settings of the groups' SimPhones.
    """

    over_adb = False  # the nodes reach the phones; a lost node's phones come back with it

    def __init__(
        self,
        ray: RayPhonesConfig,
        perturbation: PerturbationConfig | None = None,
        reset_between_episodes: bool = False,
        locale: Literal["auto", "en", "zh"] = "en",
    ) -> None:
        super().__init__()
        self.ray_config = ray
        self.perturbation = perturbation
        self.reset_between_episodes = reset_between_episodes
        self.locale = locale
        self._envs: dict[str, RayPhoneEnv] = {}

    def start(self) -> RayPhones:
        """Join the cluster and start every host (raises :class:`RayPhonesError` with the fix)."""
        envs = build_ray_phones(
            self.ray_config,
            perturbation=self.perturbation,
            reset_between_episodes=self.reset_between_episodes,
            locale=self.locale,
        )
        self._envs = {f"{env.host.name}/{env.index}": env for env in envs}  # names may repeat across groups
        return self

    def list_phones(self) -> list[PhoneInfo]:
        return [PhoneInfo(id=phone_id, serial=env.name) for phone_id, env in self._envs.items()]

    def connect(self, phone: PhoneInfo) -> Any:  # a RayPhoneEnv: the shared machinery only needs a PhoneEnv
        return self._envs[phone.id]

    def release(self, env: Any) -> None:
        """Give a phone back: its host stops when its last phone is closed (no home button: a
        lost node would hold the call for ``call_timeout_s``)."""
        self._close_and_forget(env)

    def hard_reset(self, phone: PhoneInfo) -> None:
        raise ProviderError(
            f"{phone.serial} runs on a Ray phone host, which cannot hard-reset its phones; unset "
            "phones.hard_reset_every and phones.hard_reset_after_infra"
        )

    def stop(self) -> None:
        """Close every phone (a phone closed already is left as it is), which stops the hosts."""
        for env in self._envs.values():
            env.close()
