import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from darwin.actions import Wait
from darwin.replay_buffer import ReplayBuffer, ReplayBufferError
from darwin.task_registry import get_task
from darwin.types import (
    Decision,
    Observation,
    Phase,
    Termination,
    TerminationReason,
    Trajectory,
    Transition,
)

TASK = get_task("amazon_0")
OBS = Observation(screenshot=np.zeros((2, 2, 3), np.uint8), goal="g", device_size=(1080, 2400))


def transition(ep: str, step: int, done: bool = False) -> Transition:
    return Transition(
        episode_id=ep,
        task_id=TASK.id,
        step=step,
        phase=Phase.EXECUTION,
        observation=OBS,
        decision=Decision(action=Wait()),
        done=done,
    )


def trajectory(ep: str, n: int) -> Trajectory:
    return Trajectory(
        episode_id=ep,
        task=TASK,
        transitions=[transition(ep, i, i == n - 1) for i in range(n)],
        termination=Termination(TerminationReason.STEP_BUDGET),
    )


@st.composite
def schedules(draw):
    n_eps = draw(st.integers(1, 12))
    lengths = [draw(st.integers(1, 6)) for _ in range(n_eps)]
    # Interleave: every episode's events in order, episodes interleaved arbitrarily, takes anywhere.
    events = []
    cursors = [0] * n_eps
    started = [False] * n_eps
    while any(c <= length for c, length in zip(cursors, lengths, strict=True)):
        i = draw(st.sampled_from([k for k in range(n_eps) if cursors[k] <= lengths[k]]))
        if not started[i]:
            events.append(("start", i))
            started[i] = True
        elif cursors[i] < lengths[i]:
            events.append(("add", i, cursors[i]))
            cursors[i] += 1
        else:
            events.append(("finish", i))
            cursors[i] += 1
        if draw(st.booleans()):
            events.append(("take",))
    return lengths, events


@settings(max_examples=200, deadline=None)
@given(schedules(), st.integers(1, 10))
def test_nothing_lost_nothing_duplicated_only_completed_in_order(schedule, rollout_steps):
    lengths, events = schedule
    buf = ReplayBuffer(rollout_steps=rollout_steps)
    finished: set[int] = set()
    taken: list[Trajectory] = []
    for ev in events:
        if ev[0] == "start":
            buf.start(f"e{ev[1]}")
        elif ev[0] == "add":
            buf.add(transition(f"e{ev[1]}", ev[2], ev[2] == lengths[ev[1]] - 1))
        elif ev[0] == "finish":
            buf.finish(trajectory(f"e{ev[1]}", lengths[ev[1]]))
            finished.add(ev[1])
        else:
            before = buf.completed_steps
            got = buf.take_completed()
            if got is None:
                assert before < rollout_steps
            else:
                assert sum(len(t) for t in got) >= rollout_steps
                for t in got:
                    assert int(t.episode_id[1:]) in finished  # only completed trajectories
                    assert [x.step for x in t.transitions] == list(range(len(t)))
                taken.extend(got)
    rest = []
    while (got := buf.take_completed()) is not None:
        rest.extend(got)
    ids = [t.episode_id for t in taken]
    assert len(ids) == len(set(ids))  # nothing duplicated
    leftover = buf.completed_steps
    assert sum(len(t) for t in taken + rest) + leftover == sum(lengths)  # nothing lost
    assert leftover < rollout_steps


def test_over_collection_carries_to_the_next_update():
    buf = ReplayBuffer(rollout_steps=5)
    for i, n in enumerate((3, 3, 3)):
        buf.start(f"e{i}")
        for s in range(n):
            buf.add(transition(f"e{i}", s))
        buf.finish(trajectory(f"e{i}", n))
    got = buf.take_completed()
    assert [t.episode_id for t in got] == ["e0", "e1"]
    assert buf.completed_steps == 3 and buf.take_completed() is None


def test_active_episodes_are_never_handed_out():
    buf = ReplayBuffer(rollout_steps=1)
    buf.start("a")
    buf.add(transition("a", 0))
    assert buf.take_completed() is None and buf.active_steps() == 1


def test_group_mode_releases_whole_groups():
    buf = ReplayBuffer(rollout_steps=1, group_size=2)
    buf.start("a", group="g1")
    buf.start("b", group="g1")
    buf.start("c", group="g2")
    for ep in "abc":
        buf.add(transition(ep, 0))
    buf.finish(trajectory("a", 1))
    buf.finish(trajectory("c", 1))
    assert buf.take_completed() is None  # no group complete yet
    buf.finish(trajectory("b", 1))
    assert sorted(t.episode_id for t in buf.take_completed()) == ["a", "b"]


def test_a_held_group_waits_for_its_release_whatever_its_size():
    buf = ReplayBuffer(rollout_steps=1)  # no group_size: branching's families decide their size as they go
    buf.hold("family")
    for ep in ("root", "branch"):
        buf.start(ep, group="family")
        buf.add(transition(ep, 0))
        buf.finish(trajectory(ep, 1))
        assert buf.take_completed() is None  # held: the continuations may still come
    buf.start("other")
    buf.add(transition("other", 0))
    buf.finish(trajectory("other", 1))
    assert [t.episode_id for t in buf.take_completed()] == ["other"]  # others pass a held group
    buf.release("family")
    assert [t.episode_id for t in buf.take_completed()] == ["root", "branch"]


def test_out_of_order_and_duplicates_are_errors():
    buf = ReplayBuffer(rollout_steps=1)
    with pytest.raises(ReplayBufferError, match="not active"):
        buf.add(transition("x", 0))
    buf.start("x")
    with pytest.raises(ReplayBufferError, match="expected 0"):
        buf.add(transition("x", 1))
    buf.add(transition("x", 0))
    with pytest.raises(ReplayBufferError, match="differ"):
        buf.finish(trajectory("x", 2))
    with pytest.raises(ReplayBufferError, match="started twice"):
        buf.start("x")
