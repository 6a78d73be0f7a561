"""An asyncio event loop on a daemon thread of its own, and ``asyncio.run`` for large results.

Work that must not hold up the caller's loop (the task proposer's model calls, the adbd farm's
servers, the local policy server) runs there; any thread hands it coroutines. Commands whose
coroutine returns episodes run it with :func:`run_returning`.

>>> import asyncio
>>> async def double(x):
...     await asyncio.sleep(0)
...     return 2 * x
>>> loop = LoopThread("example")
>>> loop.call(double(21))
42
>>> loop.close()
>>> loop.alive
False
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread", "run_returning"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


def run_returning(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` for a coroutine whose result is large (an evaluation's trajectories).

    On Python 3.11, ``asyncio.run`` formats the repr of its finished main task while it puts
    the SIGINT handler back (``signal.getsignal`` tries the handler as a ``signal.Handlers``
    value, and the failed lookup's message holds the handler, which holds the task), and a
    finished task's repr holds its result's: every screenshot of an evaluation printed as
    text, 6 s of a 43 s ``darwin eval`` of 128 episodes. Here the result leaves the task
    before that, so the task's repr is short.

    >>> async def screens():
    ...     return [[0] * 1_000] * 1_000
    >>> len(run_returning(screens()))
    1000
    """
    out: list[T] = []

    async def keep() -> None:
        out.append(await main)

    asyncio.run(keep())
    return out[0]


class LoopThread:
    """An event loop running on a daemon thread named ``name``, started on construction.

    :meth:`submit` schedules a coroutine and returns a concurrent future; :meth:`call` waits for
    its result. :meth:`close` cancels what still runs there, stops the loop and joins the thread;
    it is idempotent.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        """True until :meth:`close` has stopped the thread."""
        return self._thread.is_alive()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the loop; its future (``result()`` waits for it)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = 30.0) -> T:
        """Run ``coro`` on the loop and return its result (``TimeoutError`` after ``timeout`` s)."""
        return self.submit(coro).result(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Cancel the tasks still running on the loop, stop it and join the thread."""
        if self._thread.is_alive():
            try:
                self.submit(_cancel_all()).result(timeout=timeout)
            except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                logger.debug("%s: tasks on its loop did not stop within %.0f s", self.name, timeout)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=timeout)
            if self._thread.is_alive():
                logger.error("%s: event loop thread did not stop within %.0f s", self.name, timeout)
        if not self._thread.is_alive() and not self.loop.is_closed():
            self.loop.close()


async def _cancel_all() -> None:
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
