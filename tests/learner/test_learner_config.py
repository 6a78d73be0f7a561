"""LearnerConfig: embedded defaults, the paper preset, every problem in one error."""

from __future__ import annotations

import doctest
import importlib
from operator import attrgetter

import pytest
from pydantic import ValidationError

from darwin.learner.config import PAPER_TABLE_1, LearnerConfig, LoraConfig


def test_paper_preset_is_table_1():
    cfg = LearnerConfig.paper()
    for key, value in PAPER_TABLE_1.items():
        if isinstance(value, dict):  # a section
            for name, inner in value.items():
                assert getattr(getattr(cfg, key), name) == inner, f"{key}.{name}"
        else:
            assert getattr(cfg, key) == value, key
    assert (cfg.actor_lr, cfg.critic.lr, cfg.critic.warmup_updates, cfg.mini_batch_size) == (1e-6, 1e-5, 30, 64)
    assert cfg.critic.value_head_init == "calibrated" and cfg.critic.value_head_bias == 0.1 and cfg.truncation == "zero"


def test_embedded_defaults_scale_the_schedule_only():
    cfg, paper = LearnerConfig(), LearnerConfig.paper()
    assert cfg.critic.warmup_updates < paper.critic.warmup_updates
    same = ("gamma", "lam", "ppo.clip_ratio", "ppo_epochs", "critic.warmup_epochs", "critic.warmup_lam")
    assert all(attrgetter(k)(cfg) == attrgetter(k)(paper) for k in same)


def test_every_problem_is_listed_in_one_error():
    with pytest.raises(ValidationError) as info:
        LearnerConfig(
            algorithm="grpo",
            ppo={"loss_agg_mode": "token-mea"},
            critic={"lr": -1.0},
            speed={"micro_batch_size": 4},
            mini_batch_size=6,
            truncation="bootstrap",
        )
    text = str(info.value)
    assert "5 problem(s)" in text
    for fragment in (
        "critic.lr",
        "speed.micro_batch_size=3",
        "critic.warmup_updates=3",
        "truncation='bootstrap'",
        "token-mea",
    ):
        assert fragment in text, fragment


def test_cross_field_problems_and_frozen():
    with pytest.raises(ValidationError, match="speed.micro_batch_size=16 exceeds"):
        LearnerConfig(mini_batch_size=8, speed={"micro_batch_size": 16})
    with pytest.raises(ValidationError, match="finetunes.lora.critic=False"):
        LearnerConfig(
            critic={"backbone": "shared"},
            finetunes={"lora": LoraConfig(critic=False)},
        )
    with pytest.raises(
        ValidationError, match="critic.freeze_vision needs critic.backbone='separate'.*speed.freeze_vision=true"
    ):
        LearnerConfig(
            critic={"backbone": "shared", "freeze_vision": True},
        )
    with pytest.raises(ValidationError, match="critic.freeze_vision with algorithm='grpo': there is no critic"):
        LearnerConfig(
            algorithm="grpo",
            critic={"warmup_updates": 0, "freeze_vision": True},
        )
    with pytest.raises(ValidationError, match="Extra inputs.*did you mean 'actor_lr'"):
        LearnerConfig(actor_lrr=1e-3)
    cfg = LearnerConfig(algorithm="grpo", critic={"warmup_updates": 0})
    assert not cfg.uses_critic
    with pytest.raises(ValidationError):
        cfg.gamma = 0.5  # type: ignore[misc]


def test_every_field_has_help():
    for name, info in LearnerConfig.model_fields.items():
        assert info.description, name
    for section in ("ppo", "critic", "levers", "speed", "finetunes"):
        for name, info in type(getattr(LearnerConfig(), section)).model_fields.items():
            assert info.description, f"{section}.{name}"


def test_doctests():
    module = importlib.import_module("darwin.learner.config")
    assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0
