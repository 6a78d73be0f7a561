"""DynamicBatcher: the batching rule, concurrency, max_wait, errors, cancellation, shutdown.

Time is only bounded from below (a partial batch is never served before max_wait) or
with generous limits (asyncio.wait_for(..., 10)) so the tests never assert speed.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Mapping, Sequence

import pytest
import torch
from pydantic import ValidationError

from darwin.policies.base import Policy
from darwin.policies.batcher import BatcherClosedError, BatcherConfig, DynamicBatcher, batch_decision
from darwin.types import ChatMessage, Generation, Prompt

LIMIT = 10.0  # generous bound for "eventually"


def P(text: str) -> Prompt:
    return Prompt(messages=(ChatMessage(role="user", text=text),))


class Fake(Policy):
    """Echoes prompts; records every batch; can hold batches, sleep, or fail on 'boom'."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.batches: list[list[str]] = []
        self.started: list[float] = []
        self.running = 0
        self.max_running = 0
        self.gate: asyncio.Event | None = None
        self.loaded: list[int] = []

    async def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        texts = [p.messages[-1].text for p in prompts]
        self.batches.append(texts)
        self.started.append(time.monotonic())
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            if self.gate is not None:
                await self.gate.wait()
            if self.delay:
                await asyncio.sleep(self.delay)
            if "boom" in texts:
                raise ValueError("boom in batch")
            if "short" in texts:
                return [Generation(text="only one")]
            return [Generation(text=t.upper(), policy_version=self.version) for t in texts]
        finally:
            self.running -= 1

    def load_weights(self, weights: Mapping[str, torch.Tensor], version: int) -> None:
        self.loaded.append(version)
        self.version = version


# --- the rule, with a fake clock -----------------------------------------------------------
@pytest.mark.parametrize(
    ("pending", "age", "expected"),
    [
        (0, 0.0, (0, math.inf)),
        (1, 0.0, (0, 0.25)),
        (3, 0.1, (0, 0.15)),
        (3, 0.25, (3, 0.0)),  # max_wait reached: partial batch
        (3, 9.0, (3, 0.0)),
        (4, 0.0, (4, 0.0)),  # min_batch reached: serve at once
        (6, 0.0, (6, 0.0)),
        (20, 0.0, (8, 0.0)),  # never more than max_batch
        (20, 5.0, (8, 0.0)),
    ],
)
def test_batch_decision(pending: int, age: float, expected: tuple[int, float]) -> None:
    cfg = BatcherConfig(min_batch=4, max_batch=8, max_wait=0.25)
    take, wait = batch_decision(pending, age, cfg)
    assert take == expected[0]
    assert wait == pytest.approx(expected[1])


def test_batch_decision_fake_clock_simulation() -> None:
    """Replay arrivals on a fake clock: every served batch obeys the rule."""
    cfg = BatcherConfig(min_batch=3, max_batch=5, max_wait=1.0)
    rng = random.Random(0)
    arrivals = sorted(rng.uniform(0, 20) for _ in range(60))
    queue: list[float] = []
    now, served = 0.0, []
    i = 0
    while i < len(arrivals) or queue:
        take, wait = batch_decision(len(queue), now - queue[0] if queue else 0.0, cfg)
        if take:
            served.append((now, queue[:take]))
            queue = queue[take:]
            continue
        next_arrival = arrivals[i] if i < len(arrivals) else math.inf
        now = min(next_arrival, now + wait)
        if now == next_arrival:
            queue.append(arrivals[i])
            i += 1
    assert sum(len(b) for _, b in served) == 60
    for t, batch in served:
        assert 1 <= len(batch) <= cfg.max_batch
        assert len(batch) >= cfg.min_batch or t - batch[0] >= cfg.max_wait - 1e-9
        assert t - batch[0] <= cfg.max_wait + 1e-9  # nobody waits longer than max_wait here


def test_config_validation_lists_every_problem() -> None:
    with pytest.raises(ValidationError) as info:
        BatcherConfig(min_batch=0, max_batch=0, max_wait=-1, max_inflight_batches=0)
    assert {e["loc"][0] for e in info.value.errors()} == {"min_batch", "max_batch", "max_wait", "max_inflight_batches"}
    with pytest.raises(ValidationError, match="min_batch=5 exceeds max_batch=2"):
        BatcherConfig(min_batch=5, max_batch=2)
    with pytest.raises(ValidationError, match="extra"):
        BatcherConfig(max_wait_s=1.0)


# --- concurrency ---------------------------------------------------------------------------
async def test_many_submitters_never_exceed_max_batch() -> None:
    backend = Fake(delay=0.002)
    cfg = BatcherConfig(min_batch=3, max_batch=5, max_wait=0.01)
    rng = random.Random(1)

    async def worker(i: int) -> list[tuple[str, str]]:
        out = []
        for step in range(4):
            await asyncio.sleep(rng.uniform(0, 0.005))
            text = f"w{i}s{step}"
            gen = await batcher.submit(P(text))
            out.append((text, gen.text))
        return out

    async with DynamicBatcher(backend, cfg) as batcher:
        results = await asyncio.wait_for(asyncio.gather(*(worker(i) for i in range(16))), LIMIT)
        stats = batcher.stats()
    pairs = [pair for r in results for pair in r]
    assert len(pairs) == 64 and all(out == text.upper() for text, out in pairs)
    sizes = [len(b) for b in backend.batches]
    assert max(sizes) <= 5 and sum(sizes) == 64
    assert backend.max_running == 1  # one batch at a time by default
    assert stats.requests == 64 and stats.batches == len(sizes)
    assert stats.batch_sizes == {s: sizes.count(s) for s in set(sizes)}
    assert stats.mean_batch_size == pytest.approx(64 / len(sizes))
    assert 0.0 <= stats.queue_wait_p50_s <= stats.queue_wait_p95_s <= stats.queue_wait_max_s
    assert stats.failed_batches == 0 and stats.pending == 0


async def test_min_batch_is_served_without_waiting_for_max_wait() -> None:
    backend = Fake()
    async with DynamicBatcher(backend, BatcherConfig(min_batch=4, max_batch=4, max_wait=3600)) as b:
        outs = await asyncio.wait_for(asyncio.gather(*(b.submit(P(str(i))) for i in range(8))), LIMIT)
    assert [o.text for o in outs] == [str(i) for i in range(8)]
    assert backend.batches == [["0", "1", "2", "3"], ["4", "5", "6", "7"]]


async def test_partial_batch_waits_max_wait() -> None:
    backend = Fake()
    max_wait = 0.2
    async with DynamicBatcher(backend, BatcherConfig(min_batch=4, max_batch=8, max_wait=max_wait)) as b:
        start = time.monotonic()
        outs = await asyncio.wait_for(asyncio.gather(b.submit(P("a")), b.submit(P("b"))), LIMIT)
    assert [o.text for o in outs] == ["A", "B"]
    assert backend.batches == [["a", "b"]]
    assert backend.started[0] - start >= max_wait  # lower bound only


async def test_waiting_behind_a_running_batch_counts_towards_max_wait() -> None:
    backend = Fake()
    backend.gate = asyncio.Event()
    cfg = BatcherConfig(min_batch=3, max_batch=3, max_wait=0.05)
    async with DynamicBatcher(backend, cfg) as b:
        first = asyncio.ensure_future(b.submit(P("first")))
        while not backend.batches:
            await asyncio.sleep(0.01)  # partial batch after max_wait, now held by the gate
        second = asyncio.ensure_future(b.submit(P("second")))
        await asyncio.sleep(0.1)  # second has waited > max_wait while the backend was busy
        assert b.pending == 1
        backend.gate.set()
        await asyncio.wait_for(asyncio.gather(first, second), LIMIT)
    assert backend.batches == [["first"], ["second"]]


async def test_inflight_batches_are_bounded() -> None:
    backend = Fake(delay=0.02)
    cfg = BatcherConfig(min_batch=1, max_batch=2, max_wait=0, max_inflight_batches=3)
    async with DynamicBatcher(backend, cfg) as b:
        await asyncio.wait_for(asyncio.gather(*(b.submit(P(str(i))) for i in range(20))), LIMIT)
    assert 1 < backend.max_running <= 3
    assert max(len(x) for x in backend.batches) <= 2


async def test_busy_and_idle_time() -> None:
    backend = Fake(delay=0.03)
    async with DynamicBatcher(backend, BatcherConfig(min_batch=1, max_batch=1, max_wait=0)) as b:
        for i in range(3):
            await b.submit(P(str(i)))
        await asyncio.sleep(0.05)
        stats = b.stats(reset=True)
        after = b.stats()
    assert stats.busy_s >= 3 * 0.03
    assert stats.idle_s >= 0.05
    assert stats.idle_fraction == pytest.approx(stats.idle_s / (stats.idle_s + stats.busy_s))
    assert after.requests == 0 and after.batches == 0 and after.batch_sizes == {}


async def test_reset_while_a_batch_runs_keeps_busy_time_consistent() -> None:
    backend = Fake()
    backend.gate = asyncio.Event()
    async with DynamicBatcher(backend, BatcherConfig(min_batch=1, max_wait=0)) as b:
        task = asyncio.ensure_future(b.submit(P("x")))
        while not backend.batches:
            await asyncio.sleep(0.01)
        b.stats(reset=True)
        await asyncio.sleep(0.03)
        backend.gate.set()
        await asyncio.wait_for(task, LIMIT)
        await asyncio.sleep(0.03)
        first = b.stats()
        await asyncio.sleep(0.03)
        second = b.stats()
    assert first.busy_s >= 0.03 and first.inflight_batches == 0
    assert second.busy_s == first.busy_s  # the busy span closed when the batch ended
    assert second.idle_s >= first.idle_s + 0.03


# --- errors --------------------------------------------------------------------------------
async def test_backend_error_reaches_every_caller_of_the_batch_and_serving_continues() -> None:
    backend = Fake()
    async with DynamicBatcher(backend, BatcherConfig(min_batch=3, max_batch=3, max_wait=3600)) as b:
        outs = await asyncio.wait_for(
            asyncio.gather(*(b.submit(P(t)) for t in ("x", "boom", "y")), return_exceptions=True), LIMIT
        )
        assert all(isinstance(o, ValueError) and "boom in batch" in str(o) for o in outs)
        ok = await asyncio.wait_for(asyncio.gather(*(b.submit(P(t)) for t in ("p", "q", "r"))), LIMIT)
        assert [o.text for o in ok] == ["P", "Q", "R"]
        assert b.stats().failed_batches == 1


async def test_wrong_number_of_generations_is_an_error_for_all() -> None:
    async with DynamicBatcher(Fake(), BatcherConfig(min_batch=2, max_batch=2, max_wait=3600)) as b:
        outs = await asyncio.wait_for(
            asyncio.gather(b.submit(P("short")), b.submit(P("z")), return_exceptions=True), LIMIT
        )
    assert all(isinstance(o, RuntimeError) and "1 generations for 2 prompts" in str(o) for o in outs)


async def test_cancelled_caller_is_dropped_from_the_queue() -> None:
    backend = Fake()
    async with DynamicBatcher(backend, BatcherConfig(min_batch=2, max_batch=2, max_wait=3600)) as b:
        lonely = asyncio.ensure_future(b.submit(P("gone")))
        await asyncio.sleep(0.01)
        lonely.cancel()
        await asyncio.sleep(0.01)
        outs = await asyncio.wait_for(asyncio.gather(b.submit(P("a")), b.submit(P("b"))), LIMIT)
    assert [o.text for o in outs] == ["A", "B"]
    assert backend.batches == [["a", "b"]]


# --- shutdown ------------------------------------------------------------------------------
async def test_close_fails_waiting_callers_and_finishes_running_batches() -> None:
    backend = Fake()
    backend.gate = asyncio.Event()
    b = DynamicBatcher(backend, BatcherConfig(min_batch=1, max_batch=1, max_wait=0))
    running = asyncio.ensure_future(b.submit(P("running")))
    while not backend.batches:
        await asyncio.sleep(0.01)
    waiting = [asyncio.ensure_future(b.submit(P(f"w{i}"))) for i in range(3)]
    await asyncio.sleep(0.01)
    closing = asyncio.ensure_future(b.close())
    for w in waiting:
        with pytest.raises(BatcherClosedError, match="closed before this request was served"):
            await asyncio.wait_for(w, LIMIT)
    assert not running.done()
    backend.gate.set()
    assert (await asyncio.wait_for(running, LIMIT)).text == "RUNNING"
    await asyncio.wait_for(closing, LIMIT)
    with pytest.raises(BatcherClosedError, match="closed"):
        await b.submit(P("late"))
    await b.close()  # idempotent
    assert backend.batches == [["running"]]


async def test_close_with_timeout_gives_up_on_a_hung_backend() -> None:
    backend = Fake()
    backend.gate = asyncio.Event()  # never set: the backend hangs
    b = DynamicBatcher(backend, BatcherConfig(min_batch=1, max_batch=1, max_wait=0))
    hung = asyncio.ensure_future(b.submit(P("hung")))
    while not backend.batches:
        await asyncio.sleep(0.01)
    await asyncio.wait_for(b.close(timeout=0.05), LIMIT)
    with pytest.raises(BatcherClosedError, match="while this request's batch was running"):
        await asyncio.wait_for(hung, LIMIT)


def test_batcher_belongs_to_one_event_loop() -> None:
    b = DynamicBatcher(Fake(), BatcherConfig(min_batch=1, max_wait=0))
    assert asyncio.run(b.submit(P("x"))).text == "X"
    with pytest.raises(RuntimeError, match="another event loop"):
        asyncio.run(b.submit(P("y")))


# --- as a Policy ---------------------------------------------------------------------------
async def test_batcher_is_a_policy() -> None:
    backend = Fake()
    async with DynamicBatcher(backend, BatcherConfig(min_batch=1, max_batch=8, max_wait=0)) as b:
        outs = await asyncio.wait_for(b.generate([P("a"), P("b")]), LIMIT)
        assert [o.text for o in outs] == ["A", "B"]
        b.load_weights({}, 3)
        assert b.version == 3 and backend.loaded == [3]
        (again,) = await asyncio.wait_for(b.generate([P("c")]), LIMIT)
    assert again.policy_version == 3
