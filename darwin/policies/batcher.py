"""The central dynamic batcher: many concurrent callers, one batched inference backend.

Env workers ``await batcher.submit(prompt)`` independently; one serving loop groups the
waiting requests into batches and runs the backend's batched ``generate`` on them, so the
number of phones is decoupled from the inference batch size (paper section 3.4).

Batching rule (:func:`batch_decision`, applied whenever a request arrives, a batch
finishes or a deadline passes, and only while fewer than ``max_inflight_batches`` batches
are running): let ``n`` be the number of waiting requests and ``age`` the time the
oldest one has waited since :meth:`DynamicBatcher.submit`.

* ``n >= min_batch``: serve the ``min(n, max_batch)`` oldest requests now;
* ``0 < n < min_batch`` and ``age >= max_wait``: serve all ``n`` now (a partial batch);
* otherwise wait until another request arrives or ``age`` reaches ``max_wait``.

So no request waits more than ``max_wait`` seconds for companions *once the backend is
free*; time spent queued behind a running batch counts towards ``max_wait``. Requests
are served in arrival order; a batch never exceeds ``max_batch``.

    >>> import asyncio
    >>> from darwin.policies.batcher import BatcherConfig, DynamicBatcher
    >>> from darwin.policies.base import Policy
    >>> from darwin.types import ChatMessage, Prompt
    >>> from darwin.types import Generation
    >>> class Echo(Policy):
    ...     async def generate(self, prompts):
    ...         return [Generation(text=p.messages[-1].text) for p in prompts]
    >>> async def main():
    ...     async with DynamicBatcher(Echo(), BatcherConfig(min_batch=4, max_batch=4, max_wait=1.0)) as b:
    ...         prompts = [Prompt(messages=(ChatMessage(role="user", text=str(i)),)) for i in range(8)]
    ...         outs = await asyncio.gather(*(b.submit(p) for p in prompts))
    ...         return [o.text for o in outs], b.stats().batch_sizes
    >>> asyncio.run(main())
    (['0', '1', '2', '3', '4', '5', '6', '7'], {4: 2})
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

from darwin.policies.base import Policy
from darwin.types import Generation, Prompt

logger = logging.getLogger(__name__)

_EPSILON = 1e-9


class BatcherClosedError(RuntimeError):
    """The batcher was closed: the request was not (and will not be) served."""


class BatcherConfig(BaseModel):
    """Dynamic batching settings (validated when built; frozen).

    >>> from pydantic import ValidationError
    >>> try:
    ...     BatcherConfig(min_batch=9, max_batch=8, max_wait=-1)
    ... except ValidationError as exc:
    ...     print(exc.error_count(), "problems:", [e["loc"] for e in exc.errors()])
    1 problems: [('max_wait',)]
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_batch: int = Field(default=1, ge=1, description="serve as soon as this many requests wait (1: serve greedily)")
    max_batch: int = Field(default=8, ge=1, le=4096, description="largest batch ever sent to the backend")
    max_wait: float = Field(
        default=0.05,
        ge=0.0,
        le=3600.0,
        description="seconds the oldest waiting request may wait for companions before a "
        "partial batch (< min_batch) is served",
    )
    max_inflight_batches: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="batches the backend runs at once (1 for a local model; more for a hosted API)",
    )

    @model_validator(mode="after")
    def _check(self) -> BatcherConfig:
        if self.min_batch > self.max_batch:
            raise ValueError(
                f"min_batch={self.min_batch} exceeds max_batch={self.max_batch}: lower min_batch or raise max_batch"
            )
        return self


def batch_decision(pending: int, oldest_age: float, config: BatcherConfig) -> tuple[int, float]:
    """The batching rule as a pure function: ``(take, wait)``.

    ``take > 0``: serve the ``take`` oldest requests now. ``take == 0``: wait at most
    ``wait`` seconds (``inf``: until a request arrives) and decide again.

    >>> cfg = BatcherConfig(min_batch=4, max_batch=8, max_wait=0.5)
    >>> batch_decision(0, 0.0, cfg), batch_decision(2, 0.125, cfg), batch_decision(2, 0.5, cfg)
    ((0, inf), (0, 0.375), (2, 0.0))
    >>> batch_decision(5, 0.0, cfg), batch_decision(20, 0.0, cfg)
    ((5, 0.0), (8, 0.0))

    Ages within ``1e-9`` s of ``max_wait`` count as reached, so a caller that sleeps
    exactly ``wait`` always gets a batch on the next decision.
    """
    if pending <= 0:
        return 0, math.inf
    remaining = config.max_wait - oldest_age
    if pending >= config.min_batch or remaining <= _EPSILON:
        return min(pending, config.max_batch), 0.0
    return 0, remaining


@dataclass(frozen=True)
class BatcherStats:
    """A snapshot of the batcher's metrics since it started or since the last reset.

    ``idle_fraction`` is the share of wall time during which the backend had no batch
    running ("policy idle fraction"); ``queue_wait_*`` is the time from
    :meth:`DynamicBatcher.submit` to the start of the request's batch.
    """

    requests: int
    batches: int
    failed_batches: int
    batch_sizes: dict[int, int]
    """Histogram: batch size -> number of batches of that size."""
    mean_batch_size: float
    queue_wait_mean_s: float
    queue_wait_p50_s: float
    queue_wait_p95_s: float
    queue_wait_max_s: float
    busy_s: float
    idle_s: float
    idle_fraction: float
    pending: int
    inflight_batches: int


@dataclass
class _Request:
    prompt: Prompt
    future: asyncio.Future[Generation]
    submitted: float


@dataclass
class _Meter:
    start: float
    requests: int = 0
    batches: int = 0
    failed: int = 0
    sizes: dict[int, int] = field(default_factory=dict)
    waits: deque[float] = field(default_factory=lambda: deque(maxlen=200_000))
    busy: float = 0.0
    busy_since: float | None = None


class DynamicBatcher(Policy):
    """Serves concurrent :meth:`submit` calls with batched ``backend.generate`` calls.

    The batcher is itself a :class:`Policy` (``generate`` submits every prompt and gathers
    the results), so an agent's actor can use it in place of the backend. The backend's
    ``generate`` is awaited on the event loop; backends that compute (``HFPolicy``) run it
    on their own single worker thread, so the event loop stays free and the model is never
    used by two batches at once. With ``max_inflight_batches > 1`` batches overlap, which
    suits hosted backends.

    Errors: an exception raised by the backend is set on every caller of that batch (the
    serving loop carries on with the next batch); a backend returning the wrong number of
    generations is an error too. :meth:`close` stops accepting requests, fails every
    waiting request with :class:`BatcherClosedError` and waits for running batches. A
    caller cancelled while waiting is dropped from the queue. One batcher serves one event
    loop (the one it first ran on).
    """

    def __init__(self, backend: Policy, config: BatcherConfig | None = None) -> None:
        self.backend = backend
        self.config = config if config is not None else BatcherConfig()
        self._clock = time.monotonic
        self._queue: deque[_Request] = deque()
        self._wakeup: asyncio.Event | None = None
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Task[None] | None = None
        self._inflight: set[asyncio.Task[None]] = set()
        self._closed = False
        self._meter = _Meter(start=self._clock())

    # -- Policy interface -------------------------------------------------------------
    @property
    def version(self) -> int:  # type: ignore[override]  # read-only here: the backend owns the version Policy declares as an attribute
        """The backend's policy version."""
        return self.backend.version

    async def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        """Submit every prompt (they may land in different batches) and gather the results."""
        return list(await asyncio.gather(*(self.submit(p) for p in prompts)))

    def load_weights(self, weights: Mapping[str, torch.Tensor], version: int) -> None:
        """Delegates to the backend (``HFPolicy`` waits for a running batch first)."""
        self.backend.load_weights(weights, version)

    # -- submitting -------------------------------------------------------------------
    async def submit(self, prompt: Prompt) -> Generation:
        """Queue one prompt and wait for its generation (or the batch's exception)."""
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop:
            raise RuntimeError("this DynamicBatcher belongs to another event loop; create one batcher per loop")
        if self._closed:
            raise BatcherClosedError("the batcher is closed; no new requests are accepted")
        if self._loop is None:
            self._loop = loop
            self._wakeup = asyncio.Event()
            self._slots = asyncio.Semaphore(self.config.max_inflight_batches)
            self._meter = _Meter(start=self._clock())
            self._server = loop.create_task(self._serve(), name="darwin-batcher")
        assert self._wakeup is not None
        future: asyncio.Future[Generation] = loop.create_future()
        self._queue.append(_Request(prompt, future, self._clock()))
        self._meter.requests += 1
        self._wakeup.set()
        return await future

    # -- serving ----------------------------------------------------------------------
    async def _serve(self) -> None:
        assert self._slots is not None
        try:
            while True:
                await self._slots.acquire()
                batch = await self._next_batch()
                if batch is None:
                    self._slots.release()
                    return
                task = asyncio.get_running_loop().create_task(self._run(batch))
                self._inflight.add(task)
                task.add_done_callback(self._batch_done)
        except asyncio.CancelledError:  # close(), or the event loop is shutting down
            self._closed = True
            self._fail_pending(BatcherClosedError("the batcher stopped before this request was served"))
            raise
        except Exception as exc:  # a bug in the loop itself: nobody may wait forever
            self._closed = True
            self._fail_pending(exc)
            raise

    def _batch_done(self, task: asyncio.Task[None]) -> None:
        self._inflight.discard(task)
        assert self._slots is not None
        self._slots.release()

    async def _next_batch(self) -> list[_Request] | None:
        assert self._wakeup is not None
        while True:
            while self._queue and self._queue[0].future.done():  # cancelled callers
                self._queue.popleft()
            if self._closed:
                return None
            age = self._clock() - self._queue[0].submitted if self._queue else 0.0
            take, wait = batch_decision(len(self._queue), age, self.config)
            if take:
                batch: list[_Request] = []
                while self._queue and len(batch) < take:
                    req = self._queue.popleft()
                    if not req.future.done():
                        batch.append(req)
                if batch:
                    return batch
                continue
            self._wakeup.clear()
            with contextlib.suppress(asyncio.TimeoutError):  # max_wait reached: decide again
                await asyncio.wait_for(self._wakeup.wait(), None if math.isinf(wait) else wait)

    async def _run(self, batch: list[_Request]) -> None:
        meter = self._meter
        now = self._clock()
        if meter.busy_since is None:
            meter.busy_since = now
        for req in batch:
            meter.waits.append(now - req.submitted)
        meter.batches += 1
        meter.sizes[len(batch)] = meter.sizes.get(len(batch), 0) + 1
        try:
            results = await self.backend.generate([r.prompt for r in batch])
            if len(results) != len(batch):
                raise RuntimeError(
                    f"{type(self.backend).__name__}.generate returned {len(results)} generations "
                    f"for {len(batch)} prompts"
                )
        except asyncio.CancelledError:
            self._meter.failed += 1
            for req in batch:
                if not req.future.done():
                    req.future.set_exception(
                        BatcherClosedError("the batcher closed while this request's batch was running")
                    )
            raise
        except Exception as exc:  # noqa: BLE001 - set on every caller of the batch and logged
            self._meter.failed += 1
            logger.warning("policy batch of %d failed: %s: %s", len(batch), type(exc).__name__, exc)
            for req in batch:
                if not req.future.done():
                    req.future.set_exception(exc)
        else:
            for req, result in zip(batch, results, strict=True):
                if not req.future.done():
                    req.future.set_result(result)
        finally:
            current = self._meter  # stats(reset=True) may have swapped it meanwhile
            if len(self._inflight) <= 1 and current.busy_since is not None:
                current.busy += self._clock() - current.busy_since
                current.busy_since = None

    def _fail_pending(self, exc: Exception) -> None:
        while self._queue:
            req = self._queue.popleft()
            if not req.future.done():
                req.future.set_exception(exc)

    # -- metrics ----------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Requests waiting for a batch."""
        return sum(1 for r in self._queue if not r.future.done())

    def stats(self, *, reset: bool = False) -> BatcherStats:
        """Metrics since the start (or the last ``reset=True``), e.g. once per learner update."""
        m = self._meter
        now = self._clock()
        busy = m.busy + (now - m.busy_since if m.busy_since is not None else 0.0)
        total = max(now - m.start, 0.0)
        idle = max(total - busy, 0.0)
        waits = sorted(m.waits)
        sizes = dict(sorted(m.sizes.items()))
        n_batches = sum(sizes.values())
        stats = BatcherStats(
            requests=m.requests,
            batches=m.batches,
            failed_batches=m.failed,
            batch_sizes=sizes,
            mean_batch_size=(sum(k * v for k, v in sizes.items()) / n_batches) if n_batches else 0.0,
            queue_wait_mean_s=(sum(waits) / len(waits)) if waits else 0.0,
            queue_wait_p50_s=_quantile(waits, 0.5),
            queue_wait_p95_s=_quantile(waits, 0.95),
            queue_wait_max_s=waits[-1] if waits else 0.0,
            busy_s=busy,
            idle_s=idle,
            idle_fraction=(idle / total) if total > 0 else 0.0,
            pending=self.pending,
            inflight_batches=len(self._inflight),
        )
        if reset:
            self._meter = _Meter(start=now, busy_since=now if m.busy_since is not None else None)
        return stats

    # -- shutdown ---------------------------------------------------------------------
    async def close(self, *, timeout: float | None = None) -> None:
        """Stop accepting requests, fail waiting ones, wait for running batches.

        Waiting callers get :class:`BatcherClosedError`. Running batches finish and
        deliver their results (a blocking backend cannot be interrupted); ``timeout``
        bounds that wait, after which their callers get :class:`BatcherClosedError` too.
        Idempotent.
        """
        self._closed = True
        self._fail_pending(BatcherClosedError("the batcher closed before this request was served"))
        server = self._server
        if server is not None and not server.done():
            server.cancel()  # it only ever waits (for requests or a free slot)
            await asyncio.wait({server})
        inflight = set(self._inflight)
        if inflight:
            _, still = await asyncio.wait(inflight, timeout=timeout)
            for task in still:
                task.cancel()
            if still:
                await asyncio.wait(still)
        if server is not None and not server.cancelled() and server.exception() is not None:
            raise BatcherClosedError("the batcher's serving loop failed") from server.exception()

    async def __aenter__(self) -> DynamicBatcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    idx = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[idx]


__all__ = ["BatcherClosedError", "BatcherConfig", "BatcherStats", "DynamicBatcher", "batch_decision"]
