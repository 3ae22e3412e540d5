"""TurnBatch: the reports of one loop turn are taken together, in order, each caller gets its own result or error,
a caller that gave up is not taken, and a burst never holds the loop for more than `limit` takes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TypeVar

import pytest

from accelscore.scorer.ingest.turn_batch import TurnBatch

T = TypeVar("T")


class Refused(Exception):
    pass


def run(coro: Coroutine[object, object, T]) -> T:
    return asyncio.run(coro)


def failing_on_one(error: BaseException) -> Callable[[int], int]:
    """A take that gives each item back, and raises `error` for item 1."""
    def take(item: int) -> int:
        if item == 1:
            raise error
        return item
    return take


def test_one_turns_items_are_taken_together_in_order_after_the_turn() -> None:
    taken: list[int] = []

    def take(item: int) -> int:
        taken.append(item)
        return item * 10

    async def main() -> list[int]:
        batch = TurnBatch(take)
        futures = [batch.submit(i) for i in range(5)]
        assert taken == []  # nothing is taken while the turn is still running
        return list(await asyncio.gather(*futures))

    assert run(main()) == [0, 10, 20, 30, 40]
    assert taken == [0, 1, 2, 3, 4]


def test_each_caller_gets_its_own_error_and_the_rest_are_still_taken() -> None:
    async def main() -> list[object]:
        batch = TurnBatch(failing_on_one(Refused("no")))
        return list(await asyncio.gather(*(batch.submit(i) for i in range(3)), return_exceptions=True))

    results = run(main())
    assert results[0] == 0 and results[2] == 2
    assert isinstance(results[1], Refused)


def test_a_caller_cancelled_before_its_turn_ends_is_not_taken() -> None:
    taken: list[str] = []

    async def main() -> str:
        def take(item: str) -> str:
            taken.append(item)
            return item

        batch = TurnBatch(take)
        gone = asyncio.ensure_future(batch.submit("gone"))
        kept = batch.submit("kept")
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        return await kept

    assert run(main()) == "kept"
    assert taken == ["kept"]


def test_a_burst_over_the_limit_lets_other_callbacks_run_between_takes() -> None:
    events: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def take(item: int) -> None:
            events.append(f"take {item}")

        batch = TurnBatch(take, limit=2)
        futures = [batch.submit(i) for i in range(5)]
        loop.call_soon(events.append, "timer")  # queued after the batch's first callback
        await asyncio.wait_for(asyncio.gather(*futures), 60)  # a burst left unserved would hang: fail instead

    run(main())
    assert events == ["take 0", "take 1", "timer", "take 2", "take 3", "take 4"]


def test_items_submitted_after_a_turn_start_a_new_one() -> None:
    turns: list[list[int]] = []
    current: list[int] = []

    async def main() -> None:
        def take(item: int) -> int:
            current.append(item)
            return item

        batch = TurnBatch(take)
        await asyncio.gather(*(batch.submit(i) for i in range(3)))
        turns.append(current[:])
        current.clear()
        await batch.submit(9)
        turns.append(current[:])

    run(main())
    assert turns == [[0, 1, 2], [9]]


class Fatal(BaseException):
    pass


def test_a_take_that_raises_past_exception_cancels_its_caller_and_the_rest_are_still_taken() -> None:
    async def main() -> list[object]:
        loop = asyncio.get_running_loop()
        seen: list[object] = []
        loop.set_exception_handler(lambda _, context: seen.append(context.get("exception")))
        batch = TurnBatch(failing_on_one(Fatal("the loop's exception handler sees this")))
        first = list(await asyncio.wait_for(  # a batch that stopped serving would hang here: fail instead
            asyncio.gather(*(batch.submit(i) for i in range(3)), return_exceptions=True), 60))
        later = await asyncio.wait_for(batch.submit(5), 60)  # the batch still serves new turns
        assert len(seen) == 1 and isinstance(seen[0], Fatal)
        return [*first, later]

    results = run(main())
    assert results[0] == 0 and results[2] == 2 and results[3] == 5
    assert isinstance(results[1], asyncio.CancelledError)


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="limit"):
        TurnBatch(lambda item: item, limit=0)
