"""The learner: PPO with critic warm-up (the paper's) or GRPO on one process (CPU or one GPU).

    from darwin.learner.config import LearnerConfig
    from darwin.learner.local import LocalLearner

    learner = LocalLearner(policy, LearnerConfig())          # embedded defaults
    metrics = learner.update(buffer.take_completed())        # one update -> UpdateMetrics
    learner.save("run/ckpt", pending=[...], extra_state={"curriculum": curriculum.state_dict()})
    learner = LocalLearner.load("run/ckpt", policy)          # resume; learner.resume_state

Modules: ``local`` (the update), ``update_batch`` (what an update trains on, advantages),
``metrics``, ``checkpoint``, ``models`` (building the networks), ``batch`` (step rows),
``replay``, ``config``. See ``docs/learner.md``; verl's FSDP workers on Ray: ``darwin.learner.verl_learner.VerlLearner``
(``LearnerConfig(backend="verl")``, ``docs/scale.md``). The maths lives in :mod:`darwin.algos`.
"""
