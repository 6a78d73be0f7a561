"""Warm start: behaviour cloning of the tiny model on SimPhone oracle demonstrations.

UI-TARS is an SFT model before anyone runs RL on it; the embedded default mirrors that.
:func:`train_sft` runs the simulator's :class:`~darwin.agents.scripted.OracleActor`
through the real workflow on perturbed SimPhones (state persists between episodes, as in
training), records every step's prompt exactly as :class:`~darwin.agents.tiny.TinyAgent`
builds it at RL time, and fine-tunes a fresh tiny Qwen2-VL on ``prompt -> action text +
EOS`` with the same masked log-probs the PPO learner uses
(:func:`~darwin.models.scoring.compute_response_logprobs`). It stops *short of mastery* on
purpose (a fixed step budget, optionally an earlier held-out threshold) so that RL has
room to show gains, and writes a checkpoint directory that
:func:`load_warm_start` (or ``darwin eval --agent tiny:<dir>``) turns back into the exact
agent and model. :func:`ensure_warm_start` caches checkpoints by config hash.

One module per job:

- :mod:`darwin.sft.config`: :class:`SFTConfig` and its hash;
- :mod:`darwin.sft.demonstrations`: the oracle's recorded demonstrations;
- :mod:`darwin.sft.encoding`: demonstrations as the policy's cached model inputs;
- :mod:`darwin.sft.training`: :func:`train_sft` and its held-out metrics;
- :mod:`darwin.sft.training`: the checkpoint directory (save, load);
- :mod:`darwin.sft.cache`: :func:`ensure_warm_start`, checkpoints cached by config hash;
- :mod:`darwin.sft.evaluation`: :func:`evaluate_warm_start`.

Acting with a checkpoint (one policy, an actor per phone) is
:class:`darwin.agents.pool.ActorPool`.

    >>> from darwin.sft.config import SFTConfig
    >>> cfg = SFTConfig(steps=100, episodes=8, phones=2)
    >>> cfg.resolved_model.screen_width, cfg.observation_size
    (168, (168, 364))
    >>> len(cfg.config_hash())
    16

See docs/sft.md.
"""
