"""The learner: PPO with critic warm-up (the paper's) or GRPO on one process (CPU or one GPU).

    from darwin.learner import LearnerConfig, LocalLearner

    learner = LocalLearner(policy, LearnerConfig())          # embedded defaults
    metrics = learner.update(buffer.take_completed())        # one update -> UpdateMetrics
    learner.save("run/ckpt", pending=[...], extra_state={"curriculum": curriculum.state_dict()})
    learner = LocalLearner.load("run/ckpt", policy)          # resume; learner.resume_state

Modules: ``local`` (the update), ``update_batch`` (what an update trains on, advantages),
``metrics``, ``checkpoint``, ``models`` (building the networks), ``batch`` (step rows),
``replay``, ``config``. See ``docs/learner.md``; verl's FSDP workers on Ray: ``darwin.learner.verl_learner.VerlLearner``
(``LearnerConfig(backend="verl")``, ``docs/scale.md``). The maths lives in :mod:`darwin.algos`.
"""

from darwin.learner.batch import (
    BuildInputs,
    LearnerDataError,
    RowInputs,
    StepRow,
    collate,
    collect_step_rows,
    preprocess_rows,
    processor_inputs,
)
from darwin.learner.checkpoint import (
    CHECKPOINT_FORMAT_VERSION,
    ResumeState,
    resolve_checkpoint,
    restore_pending,
)
from darwin.learner.config import PAPER_TABLE_1, LearnerConfig, LoraConfig
from darwin.learner.local import LocalLearner
from darwin.learner.metrics import UpdateMetrics
from darwin.learner.models import ValueModel
from darwin.learner.update_batch import UpdateBatch
from darwin.learner.verl_config import VerlConfig

__all__ = [
    "BuildInputs",
    "CHECKPOINT_FORMAT_VERSION",
    "PAPER_TABLE_1",
    "LearnerConfig",
    "LearnerDataError",
    "LocalLearner",
    "LoraConfig",
    "ResumeState",
    "RowInputs",
    "StepRow",
    "UpdateBatch",
    "UpdateMetrics",
    "ValueModel",
    "VerlConfig",
    "collate",
    "collect_step_rows",
    "preprocess_rows",
    "processor_inputs",
    "resolve_checkpoint",
    "restore_pending",
]
