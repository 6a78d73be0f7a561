"""SimPhone: a deterministic simulated Android-like phone for training and tests.

:class:`SimPhone` is the phone (its whole state plain JSON), :class:`SimPhoneEnv` the phone as a
:class:`~darwin.envs.PhoneEnv`, :class:`PerturbationConfig` its randomised look, :class:`SimApp`
the base class of its apps, and :class:`AdbdServer` / :class:`AdbdFarm` serve SimPhones over the
real adb protocol (docs/simphone.md, docs/adbd.md):

    >>> from darwin.actions import OpenApp
    >>> from darwin.envs.sim import SimPhone
    >>> phone = SimPhone(seed=3)
    >>> phone.execute(OpenApp(app="Settings"))
    >>> phone.foreground
    'settings'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from darwin.lazy_exports import lazy_exports

__all__ = [
    "AdbdFarm",
    "AdbdServer",
    "AppContext",
    "PerturbationConfig",
    "SimApp",
    "SimPhone",
    "SimPhoneEnv",
]

if TYPE_CHECKING:
    from darwin.envs.sim.adbd import AdbdFarm, AdbdServer
    from darwin.envs.sim.apps.base import AppContext, SimApp
    from darwin.envs.sim.env import SimPhoneEnv
    from darwin.envs.sim.perturb import PerturbationConfig
    from darwin.envs.sim.phone import SimPhone
else:  # hidden from type checkers, so that a misspelt name is their error
    # public name -> the module that holds it, imported on first use (darwin.lazy_exports)
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "AdbdFarm": "darwin.envs.sim.adbd",
            "AdbdServer": "darwin.envs.sim.adbd",
            "AppContext": "darwin.envs.sim.apps.base",
            "PerturbationConfig": "darwin.envs.sim.perturb",
            "SimApp": "darwin.envs.sim.apps.base",
            "SimPhone": "darwin.envs.sim.phone",
            "SimPhoneEnv": "darwin.envs.sim.env",
        },
    )
