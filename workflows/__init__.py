"""Workflows: interaction patterns between an actor and a phone."""

from darwin.workflows.base import Emit, Workflow
from darwin.workflows.step import LifecycleWorkflow, StepConfig, StepWorkflow

__all__ = ["Emit", "LifecycleWorkflow", "StepConfig", "StepWorkflow", "Workflow"]
