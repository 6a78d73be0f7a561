"""Hindsight goals from what the reader saw (issue 72): an exploration's screens read by OCR
become "open the screen that shows X" tasks that the screen-text verifier decides."""

from __future__ import annotations

import asyncio

import pytest

from darwin.envs.sim.env import SimPhoneEnv
from darwin.hindsight.exploration import ExplorationError, explore
from darwin.hindsight.screen_text import ScreenTextSynthesizer
from darwin.predicates import SCREEN_TEXT
from darwin.run.self_evolution import replay_demonstration


@pytest.fixture(scope="module")
def exploration():
    return asyncio.run(explore(SimPhoneEnv(seed=0), "Settings", steps=5, seed=1, keep_screenshots=True))


def test_goals_take_their_strings_from_the_screens_and_replay_true(exploration):
    kept = ScreenTextSynthesizer(per_step=1).synthesize(exploration).kept
    assert kept, "five steps into Settings show new texts"
    for found in kept:
        text = found.task.verifier.params["text"]
        assert found.task.verifier.predicate == SCREEN_TEXT and text in found.task.instruction
        assert any(c.isalpha() for c in text) and text.casefold() != "settings"
    # the explorer's actions up to that screen reach it again on a fresh phone, as OCR reads it
    first = kept[0]
    _, holds = replay_demonstration(first, SimPhoneEnv(seed=0), (252, 560))
    assert holds


def test_no_screens_no_goals():
    bare = asyncio.run(explore(SimPhoneEnv(seed=0), "Settings", steps=2, seed=1))
    with pytest.raises(ExplorationError, match="keep_screenshots=True"):
        ScreenTextSynthesizer().candidates(bare)


def test_settings_are_checked():
    with pytest.raises(ValueError, match="reader='ocr'"):
        ScreenTextSynthesizer(reader="elements")
    with pytest.raises(ValueError, match="at least 1"):
        ScreenTextSynthesizer(per_step=0)
