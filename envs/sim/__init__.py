"""SimPhone: a deterministic simulated Android-like phone for training and tests."""

from darwin.envs.sim.perturb import PerturbationConfig
from darwin.envs.sim.phone import SimPhone, UnknownAppError

__all__ = ["PerturbationConfig", "SimPhone", "UnknownAppError"]
