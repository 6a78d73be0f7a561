"""Workflows: interaction patterns between an actor (and other agents) and a phone.

The interface is :class:`Workflow` (one abstract method, ``run``); :class:`StepWorkflow` runs
the execution phase step by step, :class:`LifecycleWorkflow` adds the setup and teardown phases,
and :class:`PlannerWorkflow`, :class:`SelfVerifyWorkflow` and :class:`ReflectionWorkflow` put
another model beside the actor (docs/workflows.md). Subclass any of them:

    >>> from darwin.workflows import StepConfig, StepWorkflow, Workflow
    >>> class Short(StepWorkflow):
    ...     pass
    >>> issubclass(Short, Workflow), StepConfig(observation_size=(126, 280)).observation_size
    (True, (126, 280))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from darwin.lazy_exports import lazy_exports

__all__ = [
    "AdviserSpec",
    "LifecycleWorkflow",
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

if TYPE_CHECKING:
    from darwin.workflows.advisers import AdviserSpec
    from darwin.workflows.base import Workflow
    from darwin.workflows.planner import PlannerConfig, PlannerWorkflow
    from darwin.workflows.reflection import ReflectionConfig, ReflectionWorkflow
    from darwin.workflows.self_verify import SelfVerifyConfig, SelfVerifyWorkflow
    from darwin.workflows.step import LifecycleWorkflow, StepConfig, StepWorkflow
else:  # hidden from type checkers, so that a misspelt name is their error
    # public name -> the module that holds it, imported on first use (darwin.lazy_exports)
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "AdviserSpec": "darwin.workflows.advisers",
            "LifecycleWorkflow": "darwin.workflows.step",
            "PlannerConfig": "darwin.workflows.planner",
            "PlannerWorkflow": "darwin.workflows.planner",
            "ReflectionConfig": "darwin.workflows.reflection",
            "ReflectionWorkflow": "darwin.workflows.reflection",
            "SelfVerifyConfig": "darwin.workflows.self_verify",
            "SelfVerifyWorkflow": "darwin.workflows.self_verify",
            "StepConfig": "darwin.workflows.step",
            "StepWorkflow": "darwin.workflows.step",
            "Workflow": "darwin.workflows.base",
        },
    )
