"""Readers (issue 72): the real OCR model on SimPhone screens, the accessibility tree, the
process cache, and hostile screenshots."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from darwin.actions import Click, Finished
from darwin.agents.base import Actor
from darwin.agents.tiny import TinyAgent
from darwin.envs.sim.env import SimPhoneEnv
from darwin.readers import (
    ElementsReader,
    NoReader,
    OCRReader,
    Reader,
    ReaderError,
    ReaderUnavailable,
    read_marks,
    read_marks_sync,
    reader_stats,
)
from darwin.readers.base import clean_text, order_marks, scale_box
from darwin.readers.ocr import MAX_OCR_SIDE
from darwin.task_registry import get_task
from darwin.types import Decision, Mark, Observation, TerminationReason
from darwin.workflows.step import StepWorkflow

AGENT_SIZE = (504, 1120)


@pytest.fixture(scope="module")
def home() -> tuple[SimPhoneEnv, np.ndarray]:
    env = SimPhoneEnv(seed=0)
    return env, env.screenshot(AGENT_SIZE)


def test_ocr_reads_the_home_screen_and_a_pointed_tap_opens_the_app(home):
    env, shot = home
    marks = read_marks_sync(OCRReader(), shot, env.device_size)
    texts = [m.text for m in marks]
    for app in ("Clock", "Calendar", "Chrome", "Contacts", "Booking.com"):
        assert app in texts
    agent = TinyAgent(reader={"name": "ocr"})
    obs = Observation(screenshot=shot, goal="Open Clock", device_size=env.device_size, marks=marks)
    k = texts.index("Clock")
    action = agent.project_action(f"click(#{k})", obs)
    assert isinstance(action, Click)
    env.execute(action)
    assert env.phone.foreground == "clock"
    env.go_home()


def test_ocr_reads_chinese():
    env = SimPhoneEnv(seed=0, locale="zh")
    marks = read_marks_sync(OCRReader(), env.screenshot(AGENT_SIZE), env.device_size)
    elements = {e.text for e in env.screen_elements() if e.text}
    read = {m.text for m in marks}
    assert sum(t in read for t in elements) >= 0.8 * len(elements), (sorted(read), sorted(elements))
    assert any("\u4e00" <= c <= "\u9fff" for t in read for c in t)


def test_ocr_boxes_overlap_the_elements_they_read(home):
    env, shot = home
    by_text = {e.text: e.bounds for e in env.screen_elements() if e.text}
    for m in read_marks_sync(OCRReader(), shot, env.device_size):
        if m.text in by_text:
            x0, y0, x1, y1 = by_text[m.text]
            cx, cy = m.center
            # the read text lies on its element (a label may sit under its icon, inside the tile)
            assert x0 - 8 <= cx <= x1 + 8 and y0 - 8 <= cy <= y1 + 8, (m, by_text[m.text])


def test_elements_reader_lists_text_and_clickability(home):
    env, shot = home
    marks = read_marks_sync(ElementsReader(), shot, env.device_size, env)
    clock = next(m for m in marks if m.text == "Clock")
    assert clock.clickable is True and clock.score is None
    only = read_marks_sync(ElementsReader(clickable_only=True), shot, env.device_size, env)
    assert all(m.clickable for m in only) and len(only) < len(marks)


def test_elements_reader_without_a_tree_stops_the_run_saying_how_to_fix_it(home):
    _, shot = home

    class Blind(SimPhoneEnv):
        def screen_elements(self):
            return None

    with pytest.raises(ReaderUnavailable, match="agent.reader='ocr'"):
        read_marks_sync(ElementsReader(), shot, (1080, 2400), Blind(seed=0))
    with pytest.raises(ReaderUnavailable, match="no phone"):
        read_marks_sync(ElementsReader(), shot, (1080, 2400))


class Counting(Reader):
    """Counts its reads: what the cache saves."""

    def __init__(self, tag: str) -> None:
        self.tag, self.calls = tag, 0

    @property
    def cache_key(self) -> str:
        return f"counting-{self.tag}"

    def read(self, screenshot, device_size, env=None):
        self.calls += 1
        return (Mark(f"{int(screenshot.sum())}", (0, 0, 10, 10)),)


def test_the_cache_reads_a_screen_once_for_every_phone_of_the_process():
    first, second = Counting("shared"), Counting("shared")  # two phones' agents, same settings
    a = np.zeros((20, 10, 3), np.uint8)
    b = np.ones((20, 10, 3), np.uint8)

    async def many():
        return await asyncio.gather(*(read_marks(r, s, (100, 200)) for r in (first, second) for s in (a, b, a, b)))

    results = asyncio.run(many())
    assert first.calls + second.calls == 2  # two distinct screens, eight asks
    assert results[0] == results[2] == results[4] and results[1] != results[0]
    stats = reader_stats()["counting-shared"]
    assert (stats.screens, stats.hits) == (8, 6) and stats.hit_rate == 0.75
    # the same pixels on a phone of another size are another screen (boxes are in device pixels)
    read_marks_sync(first, a, (200, 400))
    assert first.calls + second.calls == 3


@pytest.mark.parametrize(
    ("screenshot", "device", "match"),
    [
        (np.zeros((0, 10, 3), np.uint8), (1080, 2400), "empty"),
        (np.zeros((10, 10), np.uint8), (1080, 2400), r"\(H, W, 3\)"),
        (np.zeros((10, 10, 3), np.uint8), (0, -3), "device size"),
    ],
)
def test_hostile_screenshots_are_refused_with_what_is_wrong(screenshot, device, match):
    with pytest.raises(ReaderError, match=match):
        read_marks_sync(Counting("hostile"), screenshot, device)


def test_ocr_on_a_pixel_and_on_a_giant(home):
    env, _ = home
    assert read_marks_sync(OCRReader(), np.zeros((1, 1, 3), np.uint8), env.device_size) == ()
    assert read_marks_sync(OCRReader(), np.full((20, 40, 3), 255, np.uint8), env.device_size) == ()
    tall = np.zeros((10_000, 10, 3), np.uint8)
    with pytest.raises(ReaderError, match=f"exceeds {MAX_OCR_SIDE}"):
        OCRReader().read(tall, env.device_size)


class Watching(Actor):
    """Taps Clock by its mark, recording what it was shown."""

    def __init__(self, reader: Reader) -> None:
        self._reader, self.seen = reader, []

    @property
    def reader(self) -> Reader:
        return self._reader

    async def act(self, observation, history):
        self.seen.append(observation.marks)
        if len(self.seen) > 1:
            return Decision(action=Finished())
        clock = next(m for m in observation.marks if m.text == "Clock")
        return Decision(action=Click(x=clock.center[0], y=clock.center[1]))


def test_the_workflow_reads_every_screen_with_the_actors_reader():
    actor = Watching(ElementsReader())
    env = SimPhoneEnv(seed=0)
    asyncio.run(StepWorkflow().run(env, get_task("clock_1"), actor))
    assert len(actor.seen) == 2
    assert any(m.text == "Clock" for m in actor.seen[0])  # the launcher
    assert actor.seen[1] != actor.seen[0]  # the clock app, read again


class Broken(Reader):
    def read(self, screenshot, device_size, env=None):
        raise ReaderError("this screen has no pixels a reader can use")


def test_a_screen_the_reader_refuses_ends_the_episode_with_the_reason():
    trajectory = asyncio.run(StepWorkflow().run(SimPhoneEnv(seed=0), get_task("clock_1"), Watching(Broken())))
    assert trajectory.termination.reason == TerminationReason.ERROR
    assert "reader: this screen has no pixels" in trajectory.termination.cause


def test_settings_are_validated():
    for bad in ({"min_score": 2}, {"scale": 0}, {"threads": 0}, {"max_marks": 0}):
        with pytest.raises(ValueError):
            OCRReader(**bad)
    with pytest.raises(ValueError):
        ElementsReader(max_marks=10_000)
    assert not NoReader().reads and read_marks_sync(NoReader(), np.zeros((4, 4, 3), np.uint8), (4, 4)) == ()


def test_text_and_boxes_are_normalised():
    assert clean_text(" Place\u00a0your\u200b\norder ") == "Place your order"
    assert scale_box((10, 20, 30, 40), (100, 200), (1000, 2000)) == (100, 200, 300, 400)
    assert scale_box((-5, -5, 500, 500), (100, 200), (1000, 2000)) == (0, 0, 1000, 2000)
    row = [Mark("b", (500, 10, 600, 50)), Mark("a", (0, 12, 100, 52)), Mark("c", (0, 100, 50, 150))]
    assert [m.text for m in order_marks(row + row[:1], 10)] == ["a", "b", "c"]
    assert len(order_marks(row, 2)) == 2


def test_a_run_logs_each_readers_cost_since_the_last_update():
    import types

    from darwin.run.recipe import TrainingRecipe

    recipe = types.SimpleNamespace(_reader_before={}, _reader_clock=0.0, envs=[object(), object()])
    reader = Counting("per-update")
    shot = np.zeros((8, 4, 3), np.uint8)
    read_marks_sync(reader, shot, (40, 80))
    read_marks_sync(reader, shot, (40, 80))
    first = TrainingRecipe._reader_metrics(recipe)
    assert first["reader/counting-per-update/cache_hit_rate"] == 0.5
    assert first["reader/counting-per-update/ms_per_screen"] > 0
    assert 0 < first["reader/counting-per-update/share_of_phone_time"] < 1
    # nothing read since: nothing logged for it; three hits after: their rate alone
    assert "reader/counting-per-update/cache_hit_rate" not in TrainingRecipe._reader_metrics(recipe)
    for _ in range(3):
        read_marks_sync(reader, shot, (40, 80))
    assert TrainingRecipe._reader_metrics(recipe)["reader/counting-per-update/cache_hit_rate"] == 1.0
