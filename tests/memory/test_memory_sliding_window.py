"""SlidingWindowMemory: N interactions, image depth K, summaries vs raw actions, token budget."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from darwin.actions import Click, PressBack
from darwin.memory.base import HistoryItem, Memory, approx_token_count, default_render
from darwin.memory.sliding_window import SlidingWindowConfig, SlidingWindowMemory, tokenizer_counter
from darwin.types import Decision, Generation, Observation, Phase, Transition


def step(i: int, text: str | None = None) -> Transition:
    obs = Observation(screenshot=np.full((8, 4, 3), i, np.uint8), goal="g", device_size=(1080, 2400), step=i)
    generation = Generation(text=text) if text is not None else None
    decision = Decision(action=Click(x=i, y=i) if i % 2 == 0 else PressBack(), generation=generation)
    return Transition(episode_id="e", task_id="t", step=i, phase=Phase.EXECUTION, observation=obs, decision=decision)


def render(t: Transition) -> HistoryItem:
    return HistoryItem(action=f"act{t.step}", summary=f"I did step {t.step}" if t.step % 3 else None)


HISTORY = [step(i) for i in range(10)]


def test_select_keeps_the_n_most_recent_oldest_first():
    assert [t.step for t in SlidingWindowMemory(max_interactions=3).select(HISTORY)] == [7, 8, 9]
    assert SlidingWindowMemory(max_interactions=0).select(HISTORY) == []
    assert [t.step for t in SlidingWindowMemory(max_interactions=50).select(HISTORY)] == list(range(10))


@pytest.mark.parametrize(("n", "k"), [(4, 1), (4, 2), (4, 4), (4, 9), (0, 3), (10, 1)])
def test_window_has_n_entries_and_k_minus_one_past_images(n, k):
    window = SlidingWindowMemory(max_interactions=n, image_depth=k, max_prompt_tokens=None).window(HISTORY, render)
    assert [e.step for e in window.entries] == list(range(10 - n, 10))
    assert window.omitted == 10 - n and window.dropped == 0
    with_images = [e.step for e in window.entries if e.image is not None]
    assert with_images == list(range(10 - min(n, k - 1), 10))
    assert [int(img[0, 0, 0]) for img in window.images] == with_images


def test_summaries_when_available_raw_actions_otherwise():
    window = SlidingWindowMemory(max_interactions=3).window(HISTORY, render)
    assert [e.text for e in window.entries] == ["I did step 7", "I did step 8", "act9"]
    raw = SlidingWindowMemory(max_interactions=3, use_summaries=False).window(HISTORY, render)
    assert [e.text for e in raw.entries] == ["act7", "act8", "act9"]
    assert raw.entries[0].item == HistoryItem(action="act7", summary="I did step 7")


def test_token_budget_drops_the_oldest_first():
    counter = len  # one token per character, to make the arithmetic visible
    memory = SlidingWindowMemory(
        max_interactions=10, image_depth=2, max_prompt_tokens=100, entry_overhead_tokens=0, token_counter=counter
    )
    unbounded = SlidingWindowMemory(
        max_interactions=10, image_depth=2, max_prompt_tokens=None, entry_overhead_tokens=0, token_counter=counter
    )
    full = unbounded.window(HISTORY, render, reserved_tokens=40, image_tokens=20)
    assert full.tokens == sum(len(e.text) for e in full.entries) + 20
    window = memory.window(HISTORY, render, reserved_tokens=40, image_tokens=20)
    assert window.tokens <= 60
    kept = [e.step for e in window.entries]
    assert kept == list(range(10 - len(kept), 10)) and window.dropped == 10 - len(kept) > 0
    assert window.entries[-1].image is not None  # the most recent (with its image) survives longest
    assert memory.window(HISTORY, render, reserved_tokens=1000).entries == ()


def test_default_counter_and_tokenizer_counter():
    assert approx_token_count("") == 0
    assert approx_token_count("abcd") == 1 and approx_token_count("abcde") == 2
    assert approx_token_count("打开设置") == 4

    class Tok:
        def encode(self, text, add_special_tokens=True):
            return text.split()

    assert tokenizer_counter(Tok())("a b c") == 3
    with pytest.raises(TypeError):
        tokenizer_counter(object())
    assert SlidingWindowMemory(token_counter=tokenizer_counter(Tok())).count_tokens("x y") == 2


def test_config_is_validated_when_built():
    with pytest.raises(ValidationError):
        SlidingWindowConfig(image_depth=0)
    with pytest.raises(ValidationError):
        SlidingWindowConfig(max_interactions=-1)
    with pytest.raises(ValidationError):
        SlidingWindowMemory(max_interaction=3)  # typo: extra fields are rejected
    with pytest.raises(TypeError):
        SlidingWindowMemory(SlidingWindowConfig(), image_depth=2)
    cfg = SlidingWindowConfig()
    assert (cfg.max_interactions, cfg.image_depth, cfg.max_prompt_tokens) == (8, 1, 8192)


def test_window_is_a_pure_function_of_history():
    memory = SlidingWindowMemory(max_interactions=4, image_depth=3)
    a = memory.window(HISTORY, render)
    memory.reset()
    b = memory.window(HISTORY, render)
    assert [e.text for e in a.entries] == [e.text for e in b.entries]


def test_default_render_reads_thought_or_uses_the_action_json():
    t = step(0, text="Thought: tap the clock.\nAction: click(start_box='(1,2)')")
    item = default_render(t)
    assert item.summary == "tap the clock." and '"type":"click"' in item.action
    assert default_render(step(1)).summary is None


def test_a_select_only_memory_gets_text_history():
    class LastTwo(Memory):
        def select(self, history):
            return list(history[-2:])

    window = LastTwo().window(HISTORY, render)
    assert [e.text for e in window.entries] == ["I did step 8", "act9"]
    assert window.images == [] and window.omitted == 8
