"""Phones: the environment interface, real phones over adb, phone providers, faults and Ray phones.

The interface is :class:`PhoneEnv` (its failures are :class:`InfraError`, counted as
truncations, never as task failures); :class:`AdbPhoneEnv` drives a real Android phone or
emulator; a :class:`PhoneProvider` hands out phones (:class:`SimPhones`, :class:`AdbDevices`,
:class:`SimFarm`, :class:`RayPhones`); the simulated phone is :mod:`darwin.envs.sim`
(docs/phones.md):

    >>> from darwin.envs import AdbEnvConfig, AdbPhoneEnv, PhoneEnv
    >>> issubclass(AdbPhoneEnv, PhoneEnv), AdbEnvConfig(adb_port=5038).adb_port
    (True, 5038)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from darwin.lazy_exports import lazy_exports

__all__ = [
    "ActionGuard",
    "AdbDevices",
    "AdbEnvConfig",
    "AdbPhoneEnv",
    "FaultSpec",
    "FaultyEnv",
    "ForkUnsupported",
    "GuardedPhone",
    "HardResetUnsupported",
    "InfraError",
    "NoPhoneAvailable",
    "PhoneEnv",
    "PhoneFleet",
    "PhoneInfo",
    "PhoneProvider",
    "PhoneWrapper",
    "ProviderError",
    "RayPhoneGroup",
    "RayPhones",
    "RayPhonesConfig",
    "ResetSchedule",
    "RuleGuard",
    "SetupUnsupported",
    "SimFarm",
    "SimPhones",
]

if TYPE_CHECKING:
    from darwin.envs.adb import AdbPhoneEnv
    from darwin.envs.adb_config import AdbEnvConfig
    from darwin.envs.base import (
        ForkUnsupported,
        HardResetUnsupported,
        InfraError,
        PhoneEnv,
        PhoneWrapper,
        SetupUnsupported,
    )
    from darwin.envs.faults import FaultSpec, FaultyEnv
    from darwin.envs.fleet import PhoneFleet, ResetSchedule
    from darwin.envs.guard import ActionGuard, GuardedPhone, RuleGuard
    from darwin.envs.providers import (
        AdbDevices,
        NoPhoneAvailable,
        PhoneInfo,
        PhoneProvider,
        ProviderError,
        SimFarm,
        SimPhones,
    )
    from darwin.envs.ray_phones import RayPhoneGroup, RayPhones, RayPhonesConfig
else:  # hidden from type checkers, so that a misspelt name is their error
    # public name -> the module that holds it, imported on first use (darwin.lazy_exports)
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "ActionGuard": "darwin.envs.guard",
            "AdbDevices": "darwin.envs.providers",
            "AdbEnvConfig": "darwin.envs.adb_config",
            "AdbPhoneEnv": "darwin.envs.adb",
            "FaultSpec": "darwin.envs.faults",
            "FaultyEnv": "darwin.envs.faults",
            "ForkUnsupported": "darwin.envs.base",
            "GuardedPhone": "darwin.envs.guard",
            "HardResetUnsupported": "darwin.envs.base",
            "InfraError": "darwin.envs.base",
            "NoPhoneAvailable": "darwin.envs.providers",
            "PhoneEnv": "darwin.envs.base",
            "PhoneFleet": "darwin.envs.fleet",
            "PhoneInfo": "darwin.envs.providers",
            "PhoneProvider": "darwin.envs.providers",
            "PhoneWrapper": "darwin.envs.base",
            "ProviderError": "darwin.envs.providers",
            "RayPhoneGroup": "darwin.envs.ray_phones",
            "RayPhones": "darwin.envs.ray_phones",
            "RayPhonesConfig": "darwin.envs.ray_phones",
            "ResetSchedule": "darwin.envs.fleet",
            "RuleGuard": "darwin.envs.guard",
            "SetupUnsupported": "darwin.envs.base",
            "SimFarm": "darwin.envs.providers",
            "SimPhones": "darwin.envs.providers",
        },
    )
