"""LearnerConfig: embedded defaults, the paper preset, every problem in one error."""

from __future__ import annotations

import doctest
import importlib

import pytest
from pydantic import ValidationError

from darwin.learner.config import PAPER_TABLE_1, LearnerConfig, LoraConfig


def test_paper_preset_is_table_1():
    cfg = LearnerConfig.paper()
    for key, value in PAPER_TABLE_1.items():
        assert getattr(cfg, key) == value, key
    assert (cfg.actor_lr, cfg.critic_lr, cfg.critic_warmup_updates, cfg.mini_batch_size) == (1e-6, 1e-5, 30, 64)
    assert cfg.value_head_init == "calibrated" and cfg.value_head_bias == 0.1 and cfg.truncation == "zero"


def test_embedded_defaults_scale_the_schedule_only():
    cfg, paper = LearnerConfig(), LearnerConfig.paper()
    assert cfg.critic_warmup_updates < paper.critic_warmup_updates
    same = ("gamma", "lam", "clip_ratio", "ppo_epochs", "critic_warmup_epochs", "critic_warmup_lam")
    assert all(getattr(cfg, k) == getattr(paper, k) for k in same)


def test_every_problem_is_listed_in_one_error():
    with pytest.raises(ValidationError) as info:
        LearnerConfig(
            algorithm="grpo",
            critic_lr=-1.0,
            mini_batch_size=6,
            micro_batch_size=4,
            truncation="bootstrap",
            loss_agg_mode="token-mea",
        )
    text = str(info.value)
    assert "5 problem(s)" in text
    for fragment in (
        "critic_lr",
        "micro_batch_size=3",
        "critic_warmup_updates=3",
        "truncation='bootstrap'",
        "token-mea",
    ):
        assert fragment in text, fragment


def test_cross_field_problems_and_frozen():
    with pytest.raises(ValidationError, match="micro_batch_size=16 exceeds"):
        LearnerConfig(mini_batch_size=8, micro_batch_size=16)
    with pytest.raises(ValidationError, match="lora.critic=False"):
        LearnerConfig(critic="shared", lora=LoraConfig(critic=False))
    with pytest.raises(ValidationError, match="critic_freeze_vision needs critic='separate'.*freeze_vision=true"):
        LearnerConfig(critic="shared", critic_freeze_vision=True)
    with pytest.raises(ValidationError, match="critic_freeze_vision with algorithm='grpo': there is no critic"):
        LearnerConfig(algorithm="grpo", critic_warmup_updates=0, critic_freeze_vision=True)
    with pytest.raises(ValidationError, match="Extra inputs.*did you mean 'actor_lr'"):
        LearnerConfig(actor_lrr=1e-3)
    cfg = LearnerConfig(algorithm="grpo", critic_warmup_updates=0)
    assert not cfg.uses_critic
    with pytest.raises(ValidationError):
        cfg.gamma = 0.5  # type: ignore[misc]


def test_every_field_has_help():
    for name, info in LearnerConfig.model_fields.items():
        assert info.description, name


def test_doctests():
    module = importlib.import_module("darwin.learner.config")
    assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0
