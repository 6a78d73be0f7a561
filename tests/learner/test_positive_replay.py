"""PositiveReplay (MobileRL AdaPR): insertion, eviction by hand-computed scores, ageing, state."""

from __future__ import annotations

import doctest
import importlib
import math
import random

import pytest

from darwin.learner.replay import PositiveReplay, ReplayEntry


def contents(replay: PositiveReplay) -> list:
    return [entry.item for entry in replay.state()]


# --------------------------------------------------------------------------------------------
# Insertion
# --------------------------------------------------------------------------------------------


def test_insert_takes_the_top_quarter_by_advantage():
    replay = PositiveReplay(capacity=10)
    items = ["a", "b", "c", "d", "e", "f", "g", "h"]
    advantages = [0.1, 0.8, -0.3, 0.5, 0.05, 0.9, 0.2, 0.0]
    # top ceil(0.25 * 8) = 2: f (0.9), b (0.8)
    assert replay.insert(items, advantages, update=0) == ["f", "b"]
    assert contents(replay) == ["f", "b"]
    assert [(e.advantage, e.inserted_at, e.uses) for e in replay.state()] == [
        (0.9, 0, 0),
        (0.8, 0, 0),
    ]


def test_insert_count_is_rounded_up_and_at_least_one():
    replay = PositiveReplay(capacity=10)
    # ceil(0.25 * 5) = 2
    assert replay.insert(list("abcde"), [0.5, 0.4, 0.3, 0.2, 0.1], update=0) == ["a", "b"]
    # ceil(0.25 * 1) = 1
    assert replay.insert(["z"], [0.7], update=1) == ["z"]


def test_insert_keeps_only_positive_advantages_among_the_top():
    replay = PositiveReplay(capacity=10, insert_fraction=0.5)
    # top 2 of 4: 0.3 and -0.1; only the positive one is stored
    assert replay.insert(["a", "b", "c", "d"], [0.3, -0.1, -0.2, -0.5], update=0) == ["a"]
    # nothing positive at all; an advantage of exactly 0 is not positive
    assert replay.insert(["e", "f"], [0.0, -1.0], update=1) == []
    assert replay.insert([], [], update=2) == []
    assert contents(replay) == ["a"]


def test_insert_ties_keep_input_order():
    replay = PositiveReplay(capacity=10, insert_fraction=0.5)
    assert replay.insert(["a", "b", "c", "d"], [0.5, 0.5, 0.5, 0.1], update=0) == ["a", "b"]


# --------------------------------------------------------------------------------------------
# Eviction by hand: capacity 3, advantage_weight 0.5, insert_fraction 1.
#   update 0: a (0.2), b (1.0); update 1: c (0.6); update 2: d (0.4) -> 4 entries, evict one:
#     advantage  a .2  b 1.0  c .6  d .4   -> min-max: a 0,  b 1,  c .5,  d .25
#     inserted   a 0   b 0    c 1   d 2    -> min-max: a 0,  b 0,  c .5,  d 1
#     score      a 0   b .5   c .5  d .625 -> evict a
#   update 3: e (0.3) -> b, c, d, e:
#     advantage  b 1   c .6   d .4   e .3  -> (x - .3) / .7: b 1, c .428571, d .142857, e 0
#     inserted   b 0   c 1    d 2    e 3   -> b 0, c .333333, d .666667, e 1
#     score      b .5  c .380952  d .404762  e .5 -> evict c (neither the oldest nor the lowest)
# --------------------------------------------------------------------------------------------


def test_eviction_order_by_hand():
    replay = PositiveReplay(capacity=3, insert_fraction=1.0, advantage_weight=0.5)
    assert replay.insert(["a", "b"], [0.2, 1.0], update=0) == ["b", "a"]
    assert replay.insert(["c"], [0.6], update=1) == ["c"]
    assert replay.insert(["d"], [0.4], update=2) == ["d"]
    assert sorted(contents(replay)) == ["b", "c", "d"]
    assert replay.insert(["e"], [0.3], update=3) == ["e"]
    assert sorted(contents(replay)) == ["b", "d", "e"]


@pytest.mark.parametrize(
    ("advantage_weight", "survivors"),
    [
        (1.0, ["b", "c"]),  # pure advantage: drop the two lowest (a .2, d .4)
        (0.0, ["c", "d"]),  # pure recency: drop the two oldest (a, b at update 0)
    ],
)
def test_eviction_extremes(advantage_weight, survivors):
    replay = PositiveReplay(capacity=2, insert_fraction=1.0, advantage_weight=advantage_weight)
    replay.insert(["a", "b"], [0.2, 1.0], update=0)
    replay.insert(["c"], [0.6], update=1)
    replay.insert(["d"], [0.4], update=2)
    assert sorted(contents(replay)) == survivors


def test_eviction_tie_goes_to_the_oldest():
    # advantage a .9, b .1, c .5 -> 1, 0, .5; inserted a 0, b 2, c 1 -> 0, 1, .5;
    # scores .5, .5, .5 -> the oldest (a) leaves. restore() evicts down to capacity too.
    replay = PositiveReplay(capacity=2)
    replay.restore([ReplayEntry("a", 0.9, 0), ReplayEntry("b", 0.1, 2), ReplayEntry("c", 0.5, 1)])
    assert contents(replay) == ["b", "c"]


def test_insert_returns_only_items_still_stored():
    replay = PositiveReplay(capacity=1, insert_fraction=1.0, advantage_weight=1.0)
    assert replay.insert(["x"], [0.9], update=0) == ["x"]
    assert replay.insert(["y"], [0.5], update=1) == []  # evicted at once: lower advantage
    assert contents(replay) == ["x"]


def test_capacity_is_never_exceeded():
    rng = random.Random(0)
    replay = PositiveReplay(capacity=7, insert_fraction=0.5, max_uses=3)
    for update in range(50):
        n = rng.randint(0, 12)
        replay.insert([(update, i) for i in range(n)], [rng.uniform(-1, 1) for _ in range(n)], update)
        assert len(replay) <= 7
        drawn = replay.sample(rng.randint(0, 16), rng)
        assert len(drawn) == len(set(drawn))  # without replacement
        assert len(replay) <= 7


# --------------------------------------------------------------------------------------------
# Sampling and ageing
# --------------------------------------------------------------------------------------------


def test_an_item_leaves_after_max_uses_samples():
    replay = PositiveReplay(capacity=4, max_uses=3, replay_ratio=1.0)
    replay.insert(["only"], [1.0], update=0)
    for use in range(1, 3):
        assert replay.sample(1, random.Random(use)) == ["only"]
        assert [e.uses for e in replay.state()] == [use]
    assert replay.sample(1, random.Random(3)) == ["only"]  # third use: it leaves
    assert len(replay) == 0
    assert replay.sample(1, random.Random(4)) == []


def test_uses_are_counted_per_entry():
    replay = PositiveReplay(capacity=4, insert_fraction=1.0, max_uses=2, replay_ratio=0.5)
    replay.insert(["a", "b", "c"], [0.3, 0.2, 0.1], update=0)
    rng = random.Random(0)
    first = replay.sample(2, rng)  # round(0.5 * 2) = 1 item
    assert len(first) == 1
    assert {e.item: e.uses for e in replay.state()} == {item: (1 if item == first[0] else 0) for item in "abc"}


@pytest.mark.parametrize(
    ("replay_ratio", "batch_size", "stored", "expected"),
    [
        (0.25, 8, 10, 2),
        (0.25, 10, 10, 3),  # 2.5 rounds half up
        (0.25, 4, 10, 1),
        (0.25, 1, 10, 0),  # 0.25 rounds down
        (0.25, 40, 3, 3),  # capped by the buffer
        (0.0, 40, 3, 0),
        (0.5, 0, 3, 0),
    ],
)
def test_sample_size(replay_ratio, batch_size, stored, expected):
    replay = PositiveReplay(capacity=16, insert_fraction=1.0, replay_ratio=replay_ratio)
    replay.insert(list(range(stored)), [1.0 + i for i in range(stored)], update=0)
    assert len(replay.sample(batch_size, random.Random(0))) == expected


def test_sample_is_deterministic_given_the_rng():
    def fresh() -> PositiveReplay:
        replay = PositiveReplay(capacity=16, insert_fraction=1.0, replay_ratio=0.5)
        replay.insert(list(range(12)), [1.0] * 12, update=0)
        return replay

    assert fresh().sample(8, random.Random(42)) == fresh().sample(8, random.Random(42))


# --------------------------------------------------------------------------------------------
# Checkpoint state
# --------------------------------------------------------------------------------------------


def test_state_round_trip():
    replay = PositiveReplay(capacity=5, insert_fraction=0.5, max_uses=3, replay_ratio=0.5)
    replay.insert(["a", "b", "c", "d"], [0.9, 0.1, 0.5, 0.3], update=0)
    replay.insert(["e", "f"], [0.8, 0.2], update=1)
    replay.sample(2, random.Random(0))
    saved = replay.state()

    restored = PositiveReplay(capacity=5, insert_fraction=0.5, max_uses=3, replay_ratio=0.5)
    restored.restore(saved)
    assert restored.state() == saved
    assert restored.sample(4, random.Random(1)) == replay.sample(4, random.Random(1))
    assert restored.state() == replay.state()


def test_state_is_a_copy():
    replay = PositiveReplay()
    replay.insert(["a"], [1.0], update=0)
    saved = replay.state()
    saved[0].uses = 99
    saved.append(ReplayEntry("z", 1.0, 0))
    assert replay.state() == [ReplayEntry("a", 1.0, 0, 0)]
    saved[0].uses = 1
    replay.restore(saved[:1])
    saved[0].uses = 3
    assert replay.state() == [ReplayEntry("a", 1.0, 0, 1)]  # restore copies the entries


def test_restore_applies_current_settings():
    replay = PositiveReplay(capacity=2, max_uses=2)
    replay.restore(
        [
            ReplayEntry("worn", 0.9, 5, uses=2),  # reached max_uses -> dropped
            ReplayEntry("a", 0.5, 1, uses=1),
            ReplayEntry("b", 0.4, 2),
            ReplayEntry("c", 0.1, 0),  # lowest advantage and oldest -> evicted
        ]
    )
    assert contents(replay) == ["a", "b"]
    with pytest.raises(TypeError, match="restore takes the ReplayEntry list"):
        replay.restore([("a", 0.5, 1, 0)])  # type: ignore[list-item]


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"capacity": 0}, "capacity must be an integer >= 1"),
        ({"capacity": 2.5}, "capacity must be an integer >= 1"),
        ({"insert_fraction": 0.0}, r"insert_fraction must lie in \(0, 1\]"),
        ({"insert_fraction": 1.5}, r"insert_fraction must lie in \(0, 1\]"),
        ({"max_uses": 0}, "max_uses must be an integer >= 1"),
        ({"replay_ratio": -0.1}, r"replay_ratio must lie in \[0, 1\]"),
        ({"replay_ratio": math.nan}, r"replay_ratio must lie in \[0, 1\]"),
        ({"advantage_weight": 1.1}, r"advantage_weight must lie in \[0, 1\]"),
    ],
)
def test_constructor_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PositiveReplay(**kwargs)


def test_insert_and_sample_errors():
    replay = PositiveReplay()
    with pytest.raises(ValueError, match="items has 2 entries but mean_advantages has 1"):
        replay.insert(["a", "b"], [1.0], update=0)
    with pytest.raises(ValueError, match="must be finite"):
        replay.insert(["a"], [math.nan], update=0)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 0"):
        replay.sample(-1, random.Random(0))


def test_module_doctest():
    module = importlib.import_module("darwin.learner.replay")
    assert doctest.testmod(module).failed == 0
