"""Shared builders for agent tests: observations and histories."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from darwin.actions import Action
from darwin.agents.vlm import VLMAgent
from darwin.types import Decision, Generation, Observation, ParseError, Phase, Transition


def observation(
    width: int = 252,
    height: int = 560,
    device: tuple[int, int] = (1080, 2400),
    step: int = 0,
    goal: str = "Open Clock",
    fill: int = 0,
) -> Observation:
    return Observation(screenshot=np.full((height, width, 3), fill, np.uint8), goal=goal, device_size=device, step=step)


def transition(
    agent: VLMAgent,
    step: int,
    text: str | None = None,
    action: Action | None = None,
    width: int = 252,
    height: int = 560,
    device: tuple[int, int] = (1080, 2400),
) -> Transition:
    """A past step: the model wrote ``text`` (parsed by ``agent``) or a scripted ``action``."""
    obs = observation(width, height, device, step=step, fill=step % 256)
    if text is not None:
        projected = agent.project_action(text, obs)
        generation = Generation(text=text)
        if isinstance(projected, ParseError):
            decision = Decision(action=None, parse_error=projected, generation=generation)
        else:
            decision = Decision(action=projected, generation=generation)
    else:
        assert action is not None
        decision = Decision(action=action)
    return Transition(
        episode_id="ep", task_id="t", step=step, phase=Phase.EXECUTION, observation=obs, decision=decision
    )


@pytest.fixture
def obs() -> Observation:
    """The embedded default: a 252x560 screenshot of a 1080x2400 phone."""
    return observation()


@pytest.fixture
def full_obs() -> Observation:
    """A full-resolution 1080x2400 screenshot."""
    return observation(1080, 2400)


@pytest.fixture
def make_obs() -> Callable[..., Observation]:
    return observation


@pytest.fixture
def make_transition() -> Callable[..., Transition]:
    return transition
