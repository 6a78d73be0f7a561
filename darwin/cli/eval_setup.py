"""What ``darwin eval`` plays on: the phones and the workflow, and the action guard of
``--guard``, taken from an experiment (``--experiment``) or from the command's flags."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from pydantic import ValidationError

if TYPE_CHECKING:
    from darwin.components import ComponentSpec
    from darwin.envs.base import PhoneEnv
    from darwin.envs.guard import ActionGuard
    from darwin.run.config import ExperimentConfig
    from darwin.workflows.base import Workflow

__all__ = ["eval_guard", "eval_phones_and_workflow", "guard_spec"]


def eval_phones_and_workflow(
    experiment: ExperimentConfig | None,
    phones: int,
    seed: int | None,
    *,
    no_perturb: bool,
    observation_size: tuple[int, int],
    end_on_success: bool,
) -> tuple[list[PhoneEnv], Workflow]:
    """With an experiment: its evaluation phones (its perturbation unless ``no_perturb``, reset
    between episodes) and its own workflow, verifier and reward settings. Without one:
    ``phones`` evaluation SimPhones seeded from ``seed`` and a lifecycle workflow that ends an
    episode on success when ``end_on_success``."""
    from darwin.envs.sim.perturb import PerturbationConfig
    from darwin.evaluate import evaluation_phones
    from darwin.run.build import build_eval_phones, build_workflow, sim_eval_phones
    from darwin.workflows.step import LifecycleWorkflow, StepConfig

    if experiment is None:  # Chinese task instances on a Chinese UI, as in an experiment's default
        envs = evaluation_phones(seed or 0, phones, perturbation=PerturbationConfig(enabled=not no_perturb))
        step_config = StepConfig(observation_size=observation_size, end_on_success=end_on_success)
        return envs, LifecycleWorkflow(config=step_config)
    if no_perturb:
        canonical = PerturbationConfig(enabled=False)
        experiment = experiment.model_copy(
            update={
                "phones": experiment.phones.model_copy(update={"perturbation": canonical}),
                "evaluation": experiment.evaluation.model_copy(update={"perturbation": canonical}),
            }
        )
    # An experiment on other phones is evaluated here on `phones` SimPhones with its settings.
    envs = build_eval_phones(experiment) if experiment.phones.in_process else sim_eval_phones(experiment, phones)
    return envs, build_workflow(experiment, observation_size, evaluation=True)


def eval_guard(experiment: ExperimentConfig | None, guard_name: str | None) -> ActionGuard | None:
    """The guard of ``--guard`` (``off``: none), else the experiment's ``phones.guard``; none
    without either (the evaluation phones are SimPhones). ``--guard`` is ``rules`` (the built-in
    rules), a rules file (a path ending in ``.yaml`` / ``.yml``: the built-in guard with its
    rules), a component spec as JSON (``{"name": "rules", "kwargs": {"rules": "my.yaml"}}``, as
    ``--set phones.guard=...`` takes it) or an import path ``module:Class``."""
    from darwin.components import ComponentError, build_component
    from darwin.envs.guard import ActionGuard, GuardError
    from darwin.problems import ExperimentError
    from darwin.run.build import build_guard

    try:
        if guard_name == "off":
            return None
        if guard_name is not None:
            guard = build_component("guard", guard_spec(guard_name))
            assert isinstance(guard, ActionGuard)  # build_component checked the class
            return guard
        return None if experiment is None else build_guard(experiment)
    except (ComponentError, ExperimentError, GuardError) as exc:
        raise click.BadParameter(str(exc), param_hint="--guard") from None


def guard_spec(value: str) -> ComponentSpec:
    """The guard component ``--guard VALUE`` names (see :func:`eval_guard`); raises
    :class:`~darwin.components.ComponentError` for JSON that is not a component spec.

    >>> guard_spec("my_rules.yaml")
    ComponentSpec(name='rules', kwargs={'rules': 'my_rules.yaml'})
    >>> guard_spec('{"name": "rules", "kwargs": {"penalty": 0.5}}').kwargs
    {'penalty': 0.5}
    """
    from darwin.components import ComponentError, ComponentSpec

    text = value.strip()
    if text.startswith("{"):
        try:
            return ComponentSpec.model_validate_json(text)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'the spec'}: {e['msg']}" for e in exc.errors())
            raise ComponentError(
                f"--guard {value!r} is not a guard spec ({problems}); write "
                '{"name": "rules", "kwargs": {"rules": "my_rules.yaml", "penalty": 1.0}}'
            ) from None
    if text.lower().endswith((".yaml", ".yml")):
        return ComponentSpec(name="rules", kwargs={"rules": text})
    return ComponentSpec(name=text)
