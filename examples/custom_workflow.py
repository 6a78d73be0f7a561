"""Extension point: the workflow, the interaction pattern of one episode.

A workflow turns (phone, task, actor) into a trajectory. Its contract
(:class:`darwin.workflows.base.Workflow`):

- ``async def run(env, task, actor, emit=None, episode_id=None) -> Trajectory``;
- every transition goes to ``emit`` the moment it happens (the replay buffer and the run
  database receive it), with ``step`` counting 0, 1, 2, ... over the whole episode, and the
  returned trajectory holds exactly the transitions emitted, a ``termination``, and a verdict
  per phase in ``verdicts`` (read as ``phase_success`` / ``phase_reasons``; ``None``: unscored);
- a failing phone (``darwin.envs.base.InfraError``) ends the episode as an infrastructure
  truncation, never as a failure of the agent;
- the experiment builds it as ``cls(verifier=..., config=StepConfig(...), **kwargs)``,
  passing ``verifier`` and ``config`` only when ``__init__`` takes them.

Subclassing :class:`~darwin.workflows.step.StepWorkflow` keeps all of that and changes one
piece: :meth:`phases` (which phases run, with which step budgets), ``step_goal`` (what the
actor is told at each step), ``confirm_finish`` (whether ``finished`` ends the phase) or
``run_phase`` (the whole step loop of a phase).

This file's :class:`GoldenBudgetWorkflow` overrides :meth:`phases`: each task's execution
phase gets a step budget from the task's golden (human) step count, ``max(min_steps,
ceil(slack * golden_steps))``, never more than the horizon. An episode that is lost stops
early on an easy task, so more of each update's ``rollout_steps`` come from episodes that
can still succeed (spa_bench.py cut the horizon from 32 to 12 for this reason, for every
task alike). With the default ``slack=2`` every base8 task keeps at least the oracle's step
count: the oracle needs 8 steps on booking.com_0 (golden 5, budget 10) and 4 on settings_3
(golden 3, budget 6). Tasks without a golden step count keep the horizon.

Everything else is ``examples/spa_bench.py``'s default experiment (its warm start is
shared through the cache), so ``darwin compare`` against a spa_bench run shows what the
budgets change. The evaluation runs through this workflow too: both evaluations of a run
use the same budgets.

    darwin run examples/custom_workflow.py --dry-run                    # build and validate everything
    darwin run examples/custom_workflow.py                              # train (~20 min on 2 cores)
    darwin run examples/custom_workflow.py --set 'workflow.kwargs={"slack": 1.5}'
    darwin run examples/custom_workflow.py --set time_budget_s=120 --set evaluation.samples=0

Pitfalls: :meth:`phases` of ``StepWorkflow`` yields only the execution phase; subclass
``LifecycleWorkflow`` to keep setup and teardown. The workflow is named by import path,
``f"{__name__}:GoldenBudgetWorkflow"``: ``darwin run`` imports this file as the module
``darwin_experiment_custom_workflow``, so the name resolves without this folder on
``PYTHONPATH`` (docs/experiments.md).
"""

from __future__ import annotations

import math
from pathlib import Path

from darwin.components import ComponentSpec
from darwin.run.config import ExperimentConfig
from darwin.run.load import load_experiment
from darwin.types import Phase, Task, VerifierSpec
from darwin.verifiers.base import Verifier
from darwin.workflows.step import StepConfig, StepWorkflow


class GoldenBudgetWorkflow(StepWorkflow):
    """The paper's step loop with a per-task execution budget from the golden step count.

    Args:
        verifier: the experiment's verifier (passed by the experiment).
        config: the step loop's settings (passed by the experiment).
        slack: the budget is ``slack`` times the golden step count (``> 0``).
        min_steps: the smallest budget (``>= 1``), for tasks with very few golden steps.
    """

    def __init__(
        self,
        verifier: Verifier | None = None,
        config: StepConfig | None = None,
        *,
        slack: float = 2.0,
        min_steps: int = 4,
    ) -> None:
        super().__init__(verifier, config)
        self.check_arguments(slack=slack, min_steps=min_steps)
        self.slack = float(slack)
        self.min_steps = min_steps

    @classmethod
    def check_arguments(cls, *, slack: float = 2.0, min_steps: int = 4, **context: object) -> None:
        """The values, checked by ``darwin run --dry-run`` without building the workflow."""
        if isinstance(slack, bool) or not isinstance(slack, (int, float)) or not slack > 0:
            raise ValueError(f"slack must be a number > 0 (budget = slack * golden steps, e.g. 2.0), got {slack!r}")
        if isinstance(min_steps, bool) or not isinstance(min_steps, int) or min_steps < 1:
            raise ValueError(f"min_steps must be an integer >= 1 (the smallest budget, e.g. 4), got {min_steps!r}")

    def budget(self, task: Task, horizon: int) -> int:
        """The execution budget of ``task``: from its golden step count, at most ``horizon``."""
        if task.golden_steps is None:
            return horizon
        return min(horizon, max(self.min_steps, math.ceil(self.slack * task.golden_steps)))

    def phases(self, task: Task) -> list[tuple[Phase, str, VerifierSpec, int]]:
        return [
            (phase, instruction, spec, self.budget(task, budget) if phase == Phase.EXECUTION else budget)
            for phase, instruction, spec, budget in super().phases(task)
        ]


def build(preset: str) -> ExperimentConfig:
    """``examples/spa_bench.py``'s ``preset`` with :class:`GoldenBudgetWorkflow` as the workflow."""
    base = load_experiment(Path(__file__).with_name("spa_bench.py"), preset)
    return ExperimentConfig.model_validate(
        {
            **base.model_dump(),
            "name": f"custom_workflow{'' if preset == 'default' else '_' + preset}",
            "workflow": ComponentSpec(name=f"{__name__}:GoldenBudgetWorkflow", kwargs={"slack": 2.0, "min_steps": 4}),
            "notes": "examples/spa_bench.py with a per-task step budget of max(4, 2 x golden steps), at most the horizon.",
        }
    )
