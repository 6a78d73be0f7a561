"""Setup steps: named edits of SimPhone state that put what a task instance needs on the phone.

A template instance that deletes "the 7:30 alarm" needs that alarm to exist; an answer
task about a contact's phone number needs that contact. Each step is registered next to
its app, like the predicates, with a parameter model that validates at build time::

    >>> from darwin.envs.sim.setups import apply_setup
    >>> from darwin.envs.sim.phone import SimPhone
    >>> from darwin.types import StateSetup
    >>> phone = SimPhone(seed=0)
    >>> state = apply_setup(phone.snapshot(), [StateSetup(step="settings.values", params={"dark_theme": True})])
    >>> state["apps"]["settings"]["data"]["dark_theme"]
    True

A setup step edits app data only; it never opens an app or changes what is on screen, so
the episode still starts on the launcher.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from darwin.predicates import PredicateParams, State
from darwin.problems import validation_summary
from darwin.types import StateSetup, TaskDefinitionError

P = TypeVar("P", bound=BaseModel)


@dataclass(frozen=True)
class SetupStep(Generic[P]):
    name: str
    params_model: type[P]
    fn: Callable[[State, P], None]
    doc: str


SETUP_STEPS: dict[str, SetupStep] = {}


def setup_step(name: str, params_model: type[P]) -> Callable[[Callable[[State, P], None]], Callable[[State, P], None]]:
    """Register ``fn(state, params)`` (edits ``state`` in place) under ``name``."""

    def register(fn: Callable[[State, P], None]) -> Callable[[State, P], None]:
        if name in SETUP_STEPS:
            raise ValueError(f"setup step {name!r} is registered twice")
        SETUP_STEPS[name] = SetupStep(name, params_model, fn, (fn.__doc__ or "").strip())
        return fn

    return register


def resolve_setup(spec: StateSetup, task_id: str = "?", field: str = "setup") -> tuple[SetupStep, PredicateParams]:
    """Look up and validate a setup step; raises :class:`TaskDefinitionError` naming task, field and fix."""
    import darwin.envs.sim.apps  # noqa: F401  (steps live next to their apps)

    step = SETUP_STEPS.get(spec.step)
    if step is None:
        close = difflib.get_close_matches(spec.step, SETUP_STEPS, n=3)
        hint = f"did you mean {', '.join(map(repr, close))}?" if close else f"known: {', '.join(sorted(SETUP_STEPS))}"
        raise TaskDefinitionError(
            f"task {task_id!r}: field '{field}.step' = {spec.step!r} is not a registered setup step; {hint}"
        )
    try:
        params = step.params_model.model_validate(spec.params)
    except ValidationError as exc:
        problems = validation_summary(exc, "(root)")
        fields = ", ".join(step.params_model.model_fields) or "none"
        raise TaskDefinitionError(
            f"task {task_id!r}: field '{field}.params' is invalid for setup step {spec.step!r}: {problems}. "
            f"Fix: give the parameters {fields}."
        ) from None
    return step, params


def apply_setup(state: dict[str, Any], setup: Sequence[StateSetup]) -> dict[str, Any]:
    """Apply ``setup`` in order to ``state`` (edited in place and returned)."""
    for spec in setup:
        step, params = resolve_setup(spec)
        step.fn(state, params)
    return state
