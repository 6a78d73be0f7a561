"""Extension point: the verifier, which decides whether a phase succeeded (the reward).

A verifier is a :class:`darwin.verifiers.base.Verifier` subclass or, as here, a plain function
``request -> Verdict`` (``async def`` works the same way). Its contract:

- it gets a :class:`~darwin.verifiers.base.VerificationRequest`: the task, the phase, its
  instruction and ``spec`` (the task's rule: a predicate name and parameters), the actor's
  transitions of the phase, ``final_state`` (the phone's probed state; ``None`` on phones
  without a state probe) and ``final_screenshot``;
- it returns a :class:`~darwin.types.Verdict`: ``success`` True or False, or ``None``
  when it cannot decide (no state, an unreachable judge), never a silent 0 or 1;
  ``reward`` defaults to ``float(success)``; ``reason`` is stored with the verdict in the
  run database (``verdicts.reason``), with the function's name as ``verifier_kind``.

A function verifier counts as *expensive* (``Verifier.cheap`` is False, like an LLM judge):
the step loop asks it once per phase, when the agent says ``finished`` or the step budget
runs out, and takes a full-size final screenshot for it. A cheap verifier (the built-in
``rule``) is asked after every step instead: the phase ends the moment the goal holds, and
a goal that already holds before the first action leaves the episode unscored.

This file's :func:`final_state_check` evaluates the task's rule predicate on the phone's
state at the end of the phase only, as SPA-Bench judges an agent: the agent is not stopped
when it reaches the goal, so a goal reached and then undone is a failure. It is the built-in
rule's predicate under a stricter schedule, and a failure's reason says how far the phone
was from the goal (the predicate's lower bound on the actions still needed).

Cost: the tiny warm start learnt from demonstrations that ended when the goal first held, so
it does not say ``finished`` (in none of 3,953 steps of one measured spa_bench run) and every
episode runs the whole horizon of 12 steps; under the built-in rule that run's successes
took 5 steps on average, so an episode costs about a third more environment steps.
Everything else is ``examples/spa_bench.py``'s schedule, sharing its cached warm start.

    darwin run examples/custom_verifier.py --dry-run                  # build and validate everything
    darwin run examples/custom_verifier.py                            # train (~20 min on 2 cores)
    darwin run examples/custom_verifier.py --set verifier.name=rule   # the same run with the built-in rule
    darwin eval --experiment examples/custom_verifier.py --episodes 2 # the warm start, judged by this function

Pitfalls: a function takes no ``kwargs`` (write a ``Verifier`` subclass for settings, or to
make it cheap: override the ``cheap`` property to return True). The function is named by
import path, ``f"{__name__}:final_state_check"``, which ``darwin run`` resolves because it
imports this file as the module ``darwin_experiment_custom_verifier`` (docs/experiments.md).
"""

from __future__ import annotations

from pathlib import Path

from darwin.components import ComponentSpec
from darwin.predicates import resolve
from darwin.run.config import ExperimentConfig
from darwin.run.load import load_experiment
from darwin.types import Verdict
from darwin.verifiers.base import VerificationRequest


def final_state_check(request: VerificationRequest) -> Verdict:
    """The task's rule predicate, judged once on the phone's state at the end of the phase."""
    if request.final_state is None:
        return Verdict(success=None, reason="the phone has no state probe; the final state cannot be checked")
    predicate, params = resolve(request.spec, request.task.id)
    check = predicate.fn(request.final_state, params)
    if check.success:
        return Verdict(success=True, reason=f"{request.spec.predicate} holds in the final state")
    return Verdict(
        success=False,
        reason=f"{request.spec.predicate} does not hold in the final state (at least {check.unmet} action(s) short)",
    )


def build(preset: str) -> ExperimentConfig:
    """``examples/spa_bench.py``'s ``preset`` judged by :func:`final_state_check`."""
    base = load_experiment(Path(__file__).with_name("spa_bench.py"), preset)
    return ExperimentConfig.model_validate(
        {
            **base.model_dump(),
            "name": f"custom_verifier{'' if preset == 'default' else '_' + preset}",
            "verifier": ComponentSpec(name=f"{__name__}:final_state_check"),
            "notes": "examples/spa_bench.py judged once per episode on the final phone state (SPA-Bench's rule).",
        }
    )
