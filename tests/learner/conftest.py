"""Builders for learner tests: a tiny 56x112 Qwen2-VL policy and trajectories sampled from it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch

from darwin.actions import Wait
from darwin.learner.config import LearnerConfig
from darwin.models.config import TinyVLMConfig
from darwin.models.factory import build_tiny_vlm
from darwin.policies.hf import HFPolicy, HFPolicyConfig
from darwin.types import (
    ChatMessage,
    Decision,
    Generation,
    Observation,
    ParseError,
    Phase,
    Prompt,
    Task,
    Termination,
    TerminationReason,
    Trajectory,
    Transition,
    VerifierSpec,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

SCREEN = (56, 112)  # (W, H): 8 visual tokens per screenshot
TASK = Task(id="clock_alarm", instruction="Set an alarm.", app="Clock", verifier=VerifierSpec(predicate="p"))


def tiny_policy(max_new_tokens: int = 5, seed: int = 1) -> HFPolicy:
    """A fresh policy (its own model: learners push weights into it)."""
    vlm = build_tiny_vlm(TinyVLMConfig(screen_width=SCREEN[0], screen_height=SCREEN[1]), seed=0)
    return HFPolicy(vlm, HFPolicyConfig(max_new_tokens=max_new_tokens, seed=seed))


def merged(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` on top, a section given as a mapping merged field by field."""
    out = dict(base)
    for key, value in overrides.items():
        below = out.get(key)
        out[key] = {**below, **value} if isinstance(below, dict) and isinstance(value, dict) else value
    return out


def small_config(**overrides: Any) -> LearnerConfig:
    base: dict[str, Any] = {
        "critic": {"warmup_updates": 0, "warmup_epochs": 1},
        "mini_batch_size": 4,
        "speed": {"micro_batch_size": 2},
        "ppo_epochs": 1,
    }
    return LearnerConfig(**merged(base, overrides))


def prompt_for(step: int, rng: np.random.Generator, goal: str = "Set an alarm for 7:30.") -> Prompt:
    shot = rng.integers(0, 256, (SCREEN[1], SCREEN[0], 3), dtype=np.uint8)
    return Prompt(
        messages=(
            ChatMessage(role="system", text="You are a phone agent."),
            ChatMessage(role="user", text=f"Goal: {goal} Step {step}.", images=(shot,)),
        )
    )


def sampled_trajectory(
    policy: HFPolicy,
    rewards: Sequence[float],
    *,
    reason: TerminationReason = TerminationReason.AGENT_FINISHED,
    seed: int = 0,
    parse_error_steps: Sequence[int] = (),
    task: Task = TASK,
) -> Trajectory:
    """One trajectory whose steps are real samples of ``policy`` on random screens."""
    rng = np.random.default_rng(seed)
    eid = uuid.UUID(int=int(rng.integers(0, 2**62))).hex
    transitions = []
    for step, reward in enumerate(rewards):
        prompt = prompt_for(step, rng)
        (gen,) = policy.generate_sync([prompt])
        transitions.append(
            _transition(
                eid,
                task,
                step,
                prompt,
                gen,
                reward,
                step in parse_error_steps,
                last=step == len(rewards) - 1,
                reason=reason,
            )
        )
    cause = "adb disconnected" if reason in (TerminationReason.INFRA_TRUNCATED, TerminationReason.ERROR) else ""
    return Trajectory(episode_id=eid, task=task, transitions=transitions, termination=Termination(reason, cause))


def canned_trajectory(policy: HFPolicy, prompt: Prompt, text: str, reward: float, eid: str | None = None) -> Trajectory:
    """A one-step trajectory whose response is ``text`` (+ EOS), scored by the policy itself."""
    tok = policy.vlm.tokenizer
    ids = tuple(tok.encode(text, add_special_tokens=False)) + (int(tok.convert_tokens_to_ids("<|im_end|>")),)
    (lps,) = policy.teacher_forced_logprobs([prompt], [ids])
    inputs = policy.build_inputs([prompt])
    gen = Generation(
        text=text,
        prompt_ids=tuple(inputs["input_ids"][0].tolist()),
        response_ids=ids,
        response_logprobs=tuple(lps.tolist()),
        policy_version=policy.version,
    )
    eid = eid or uuid.uuid4().hex
    tr = _transition(eid, TASK, 0, prompt, gen, reward, False, last=True, reason=TerminationReason.AGENT_FINISHED)
    return Trajectory(
        episode_id=eid, task=TASK, transitions=[tr], termination=Termination(TerminationReason.AGENT_FINISHED)
    )


def _transition(
    eid: str,
    task: Task,
    step: int,
    prompt: Prompt,
    gen: Generation,
    reward: float,
    parse_error: bool,
    *,
    last: bool,
    reason: TerminationReason,
) -> Transition:
    shot = prompt.images[0]
    obs = Observation(screenshot=shot, goal=task.instruction, device_size=(1080, 2400), task_id=task.id, step=step)
    if parse_error:
        decision = Decision(action=None, parse_error=ParseError(reason="no call"), generation=gen, prompt=prompt)
    else:
        decision = Decision(action=Wait(), generation=gen, prompt=prompt)
    cause = "adb disconnected" if reason in (TerminationReason.INFRA_TRUNCATED, TerminationReason.ERROR) else ""
    return Transition(
        episode_id=eid,
        task_id=task.id,
        step=step,
        phase=Phase.EXECUTION,
        observation=obs,
        decision=decision,
        reward=reward,
        done=last,
        termination=Termination(reason, cause) if last else None,
    )


def params_equal(a: torch.nn.Module | dict[str, torch.Tensor], b: torch.nn.Module | dict[str, torch.Tensor]) -> bool:
    sa = a if isinstance(a, dict) else a.state_dict()
    sb = b if isinstance(b, dict) else b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k].cpu(), sb[k].cpu()) for k in sa)


@pytest.fixture
def policy() -> HFPolicy:
    return tiny_policy()


@pytest.fixture
def trajectories(policy: HFPolicy) -> list[Trajectory]:
    """Three sampled trajectories: a success, a failure with a parse error, a truncation."""
    return [
        sampled_trajectory(policy, [0.0, 0.0, 1.0], seed=1),
        sampled_trajectory(policy, [0.0, -0.1], seed=2, parse_error_steps=(1,)),
        sampled_trajectory(policy, [0.0, 0.0], seed=3, reason=TerminationReason.STEP_BUDGET),
    ]


class Kit:
    """The builders above, handed to tests as the ``kit`` fixture (tests import only darwin.*)."""

    SCREEN = SCREEN
    TASK = TASK
    tiny_policy = staticmethod(tiny_policy)
    small_config = staticmethod(small_config)
    prompt_for = staticmethod(prompt_for)
    sampled_trajectory = staticmethod(sampled_trajectory)
    canned_trajectory = staticmethod(canned_trajectory)
    params_equal = staticmethod(params_equal)


@pytest.fixture
def kit() -> type[Kit]:
    return Kit
