"""Workflows: interaction patterns between an actor (and other agents) and a phone."""

from darwin.workflows.base import Emit, Workflow
from darwin.workflows.planner import PLANNER, PlannerConfig, PlannerWorkflow
from darwin.workflows.reflection import REFLECTOR, ReflectionConfig, ReflectionWorkflow
from darwin.workflows.self_verify import VERIFIER, SelfVerifyConfig, SelfVerifyWorkflow
from darwin.workflows.step import (
    AdviserError,
    LifecycleWorkflow,
    PhaseTurns,
    StepConfig,
    StepWorkflow,
)

__all__ = [
    "PLANNER",
    "REFLECTOR",
    "VERIFIER",
    "AdviserError",
    "Emit",
    "LifecycleWorkflow",
    "PhaseTurns",
    "PlannerConfig",
    "PlannerWorkflow",
    "ReflectionConfig",
    "ReflectionWorkflow",
    "SelfVerifyConfig",
    "SelfVerifyWorkflow",
    "StepConfig",
    "StepWorkflow",
    "Workflow",
]
