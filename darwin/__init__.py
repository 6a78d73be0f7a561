"""darwin: train mobile GUI agents with reinforcement learning on simulated and real phones.

What a script needs is exported here; everything else lives in its package
(:mod:`darwin.workflows`, :mod:`darwin.verifiers`, :mod:`darwin.curricula`, :mod:`darwin.memory`,
:mod:`darwin.envs`, :mod:`darwin.agents`, :mod:`darwin.policies`, :mod:`darwin.algos`), each
exporting its base class and built-ins. An experiment is a config; ``run_experiment`` trains it
(``darwin run FILE`` does the same from the command line):

    >>> from darwin import ComponentSpec, ExperimentConfig, PhonesConfig
    >>> config = ExperimentConfig(
    ...     name="lab", phones=PhonesConfig(count=4), curriculum=ComponentSpec(name="learnability")
    ... )
    >>> config.phones.count, config.tasks
    (4, ('base8',))

``run_experiment(config, Path("runs/lab"))`` then returns a :class:`~darwin.run.recipe.RunResult`;
``load_experiment("examples/spa_bench.py")`` and ``apply_overrides(config, ["updates=5"])`` read an
experiment file and ``--set`` overrides as ``darwin run`` does. Names are imported on first use,
so ``import darwin`` loads nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from darwin.lazy_exports import lazy_exports

__all__ = [
    "AgentConfig",
    "ComponentSpec",
    "EvaluationConfig",
    "ExperimentConfig",
    "LearnerConfig",
    "PhonesConfig",
    "PolicyConfig",
    "RunResult",
    "SFTConfig",
    "SelfEvolutionConfig",
    "apply_overrides",
    "load_experiment",
    "run_experiment",
]

if TYPE_CHECKING:
    from darwin.components import ComponentSpec
    from darwin.learner.config import LearnerConfig
    from darwin.run.config import (
        AgentConfig,
        EvaluationConfig,
        ExperimentConfig,
        PhonesConfig,
        PolicyConfig,
        SelfEvolutionConfig,
    )
    from darwin.run.load import apply_overrides, load_experiment
    from darwin.run.recipe import RunResult, run_experiment
    from darwin.sft.config import SFTConfig
else:  # hidden from type checkers, so that a misspelt name is their error
    # public name -> the module that holds it, imported on first use (darwin.lazy_exports)
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "AgentConfig": "darwin.run.config",
            "ComponentSpec": "darwin.components",
            "EvaluationConfig": "darwin.run.config",
            "ExperimentConfig": "darwin.run.config",
            "LearnerConfig": "darwin.learner.config",
            "PhonesConfig": "darwin.run.config",
            "PolicyConfig": "darwin.run.config",
            "RunResult": "darwin.run.recipe",
            "SFTConfig": "darwin.sft.config",
            "SelfEvolutionConfig": "darwin.run.config",
            "apply_overrides": "darwin.run.load",
            "load_experiment": "darwin.run.load",
            "run_experiment": "darwin.run.recipe",
        },
    )
