"""darwin.loop_thread: run_returning hands a coroutine's result back without formatting it."""

from __future__ import annotations

import asyncio

import pytest

from darwin.loop_thread import run_returning


class _CountedRepr:
    """A result that counts how often it is formatted."""

    def __init__(self) -> None:
        self.reprs = 0

    def __repr__(self) -> str:
        self.reprs += 1
        return "_CountedRepr()"


async def _make() -> _CountedRepr:
    await asyncio.sleep(0)
    return _CountedRepr()


def test_the_result_comes_back_unformatted() -> None:
    result = run_returning(_make())
    assert isinstance(result, _CountedRepr) and result.reprs == 0


def test_an_exception_of_the_coroutine_reaches_the_caller() -> None:
    async def fail() -> None:
        raise KeyError("the phone is gone")

    with pytest.raises(KeyError, match="the phone is gone"):
        run_returning(fail())
